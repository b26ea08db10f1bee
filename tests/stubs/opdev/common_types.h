// Stub: opdev common types.
#pragma once
#include "aclnn/aclnn_base.h"
