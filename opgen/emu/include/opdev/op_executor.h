// opgen host-side emulation: the op executor and kernel-launch macros of the aclnn L0 layer
// (docs/reference/ascendc.md §2.8). Our own minimal declarations, not CANN's headers. The executor owns the
// tensors it allocates; ADD_TO_LAUNCHER_LIST_AICORE type-checks its arguments and launches nothing, so
// running an emitted aclnn API exercises its checks and its L0 calls (codes and messages), not a kernel.
#pragma once
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "aclnn/aclnn_base.h"

struct aclOpExecutor {
    aclTensor* AllocTensor(const op::Shape& shape, op::DataType dtype, op::Format /*format*/)
    {
        aclTensor& t = tensors.emplace_back();
        t.shape = shape;
        t.dtype = dtype;
        return &t;
    }
    const aclTensor* ConvertToTensor(const aclIntArray* array, op::DataType dtype)
    {
        aclTensor& t = tensors.emplace_back();
        t.shape.dims = {static_cast<int64_t>(array->Size())};
        t.dtype = dtype;
        return &t;
    }
    uint64_t GetWorkspaceSize() { return 0; }
    std::deque<aclTensor> tensors;  // deque: pointers stay valid while more are added
};

namespace opgen_host {
// Owns a fresh executor until ReleaseTo hands it to the caller (CANN's UniqueExecutor).
class UniqueExecutor {
public:
    UniqueExecutor() : executor_(new aclOpExecutor) {}
    UniqueExecutor(const UniqueExecutor&) = delete;
    UniqueExecutor& operator=(const UniqueExecutor&) = delete;
    ~UniqueExecutor() { delete executor_; }
    aclOpExecutor* get() { return executor_; }
    aclOpExecutor* operator->() { return executor_; }
    void ReleaseTo(aclOpExecutor** executor)
    {
        *executor = executor_;
        executor_ = nullptr;
    }

private:
    aclOpExecutor* executor_;
};
struct LaunchArgs {};
template <typename... Args>
LaunchArgs Pack(const Args&...)
{
    return {};
}
// The attribute values of the last kernel launch (OP_ATTR), as text: a floating value in C99 hex ("%a"), an integer
// or bool in decimal, a string as it is. `opgen check` compares them with the call's attributes, so an aclnn layer
// that reads, converts or orders an attribute wrongly fails there, although the kernel is launched separately.
inline std::vector<std::string>& LaunchAttrs()
{
    static thread_local std::vector<std::string> attrs;
    return attrs;
}
inline std::string AttrText(const char* v) { return v == nullptr ? "null" : v; }
// A list attribute (aclIntArray, CANN's ListInt) as its values separated by commas ("" when empty).
inline std::string AttrText(const aclIntArray* v)
{
    if (v == nullptr) {
        return "null";
    }
    std::string text;
    for (uint64_t i = 0; i < v->Size(); ++i) {
        text += (i == 0 ? "" : ",") + std::to_string((*v)[i]);
    }
    return text;
}
template <typename T>
std::string AttrText(const T& v)
{
    char buf[64];
    if constexpr (std::is_same_v<T, bool>) {
        std::snprintf(buf, sizeof(buf), "%d", v ? 1 : 0);
    } else if constexpr (std::is_floating_point_v<T>) {
        std::snprintf(buf, sizeof(buf), "%a", static_cast<double>(v));
    } else {
        static_assert(std::is_integral_v<T>, "OP_ATTR takes numbers, bools and strings");
        std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
    }
    return buf;
}
template <typename... Args>
LaunchArgs PackAttrs(const Args&... values)
{
    LaunchAttrs() = {AttrText(values)...};
    return {};
}
// Kernel launches the aclnn layer queued since the last ResetLaunchCount() (what opgen check reads to tell an
// empty call, which launches nothing, from a real one).
inline int& LaunchCount()
{
    static thread_local int count = 0;
    return count;
}
template <typename... Args>
aclnnStatus Launch(const char* /*opType*/, const Args&...)
{
    ++LaunchCount();
    return ACLNN_SUCCESS;
}
}  // namespace opgen_host

// Phase two of the aclnn API: runs (here: nothing) and frees the executor, as CANN does.
inline aclnnStatus CommonOpExecutorRun(void* /*workspace*/, uint64_t /*workspaceSize*/, aclOpExecutor* executor,
                                       aclrtStream /*stream*/)
{
    delete executor;
    return ACLNN_SUCCESS;
}

#define OP_TYPE_REGISTER(opType) static const char* const g_op_type_##opType = #opType
#define OP_INPUT(...) ::opgen_host::Pack(__VA_ARGS__)
#define OP_OUTPUT(...) ::opgen_host::Pack(__VA_ARGS__)
#define OP_ATTR(...) ::opgen_host::PackAttrs(__VA_ARGS__)
#define ADD_TO_LAUNCHER_LIST_AICORE(opType, ...) ::opgen_host::Launch(#opType, __VA_ARGS__)
