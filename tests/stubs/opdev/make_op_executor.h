// Stub: executor creation.
#pragma once
#include "opdev/op_executor.h"

namespace stub {
UniqueExecutor CreateExecutor();
}
#define CREATE_EXECUTOR() ::stub::CreateExecutor()
