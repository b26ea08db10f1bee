// opgen host-side emulation: the ACL runtime calls the call examples use (docs/reference/ascendc.md §2.9).
// Our own minimal declarations, not CANN's headers. "Device" memory is host memory; streams are
// null handles and every call succeeds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "aclnn/aclnn_base.h"

using aclError = int;
constexpr aclError ACL_SUCCESS = 0;
enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST = 0 };
enum aclrtMemcpyKind { ACL_MEMCPY_HOST_TO_DEVICE = 1, ACL_MEMCPY_DEVICE_TO_HOST = 2 };

inline aclError aclInit(const char* /*configPath*/) { return ACL_SUCCESS; }
inline aclError aclFinalize() { return ACL_SUCCESS; }
inline aclError aclrtSetDevice(int32_t /*deviceId*/) { return ACL_SUCCESS; }
inline aclError aclrtResetDevice(int32_t /*deviceId*/) { return ACL_SUCCESS; }
inline aclError aclrtCreateStream(aclrtStream* stream)
{
    *stream = nullptr;
    return ACL_SUCCESS;
}
inline aclError aclrtDestroyStream(aclrtStream /*stream*/) { return ACL_SUCCESS; }
inline aclError aclrtSynchronizeStream(aclrtStream /*stream*/) { return ACL_SUCCESS; }
inline aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy /*policy*/)
{
    *devPtr = std::malloc(size == 0 ? 1 : size);
    return *devPtr == nullptr ? 1 : ACL_SUCCESS;
}
inline aclError aclrtFree(void* devPtr)
{
    std::free(devPtr);
    return ACL_SUCCESS;
}
inline aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind /*kind*/)
{
    if (count > destMax) {
        return 1;
    }
    std::memcpy(dst, src, count);
    return ACL_SUCCESS;
}
