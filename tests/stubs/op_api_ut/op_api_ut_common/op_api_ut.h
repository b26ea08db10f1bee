// opgen's stand-in for the op_api UT framework (see tensor_desc.h): OP_API_UT(api, INPUT(...), OUTPUT(...))
// keeps the arguments and TestGetWorkspaceSize calls <api>GetWorkspaceSize with each descriptor turned into
// its acl object (nullptr stays null, plain values pass through).
#pragma once
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

#include "aclnn/aclnn_base.h"
#include "op_api_ut_common/array_desc.h"
#include "op_api_ut_common/scalar_desc.h"
#include "op_api_ut_common/tensor_desc.h"

namespace opgen_op_api_ut {
inline aclTensor* Arg(const TensorDesc& d) { return d.ToAclTypeRawPtr(); }
inline aclIntArray* Arg(const IntArrayDesc& d) { return d.ToAclTypeRawPtr(); }
inline aclScalar* Arg(const ScalarDesc& d) { return d.ToAclTypeRawPtr(); }
inline std::nullptr_t Arg(std::nullptr_t) { return nullptr; }
template <typename T>
T Arg(T value)
{
    return value;
}

template <typename Fn, typename Args>
class Ut {
public:
    Ut(Fn fn, Args args) : fn_(fn), args_(std::move(args)) {}
    aclnnStatus TestGetWorkspaceSize(uint64_t* workspaceSize)
    {
        aclOpExecutor* executor = nullptr;
        return std::apply([&](const auto&... a) { return fn_(Arg(a)..., workspaceSize, &executor); }, args_);
    }

private:
    Fn fn_;
    Args args_;
};

template <typename Fn, typename In, typename Out>
auto Make(Fn fn, In in, Out out)
{
    auto all = std::tuple_cat(std::move(in), std::move(out));
    return Ut<Fn, decltype(all)>(fn, std::move(all));
}
}  // namespace opgen_op_api_ut

#define OP_API_UT(api, input, output) ::opgen_op_api_ut::Make(api##GetWorkspaceSize, input, output)
#define INPUT(...) std::make_tuple(__VA_ARGS__)
#define OUTPUT(...) std::make_tuple(__VA_ARGS__)
