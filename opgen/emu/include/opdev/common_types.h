// opgen host-side emulation: opdev common types (the aclnn types of aclnn/aclnn_base.h).
#pragma once
#include "aclnn/aclnn_base.h"
