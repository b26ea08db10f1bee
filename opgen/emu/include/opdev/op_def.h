// opgen host-side emulation: opdev op definitions (the aclnn types of aclnn/aclnn_base.h).
#pragma once
#include "opdev/common_types.h"
