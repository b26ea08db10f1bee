// Stub: opdev op definitions.
#pragma once
#include "opdev/common_types.h"
