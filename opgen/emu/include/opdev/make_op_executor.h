// opgen host-side emulation: executor creation (CREATE_EXECUTOR gives a fresh, owned executor).
#pragma once
#include "opdev/op_executor.h"

#define CREATE_EXECUTOR() ::opgen_host::UniqueExecutor()
