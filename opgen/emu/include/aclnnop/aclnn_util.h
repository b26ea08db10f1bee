// opgen host-side emulation: the one macro of CANN's aclnn_util.h the emitted public headers use (our own
// declaration). As in CANN, ACLNN_API comes from here, not from aclnn/aclnn_base.h.
#pragma once
#define ACLNN_API __attribute__((visibility("default")))
