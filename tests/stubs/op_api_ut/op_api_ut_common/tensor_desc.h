// opgen's stand-in for the op_api UT framework of CANN's op repositories (tests/ut/op_api/op_api_ut_common in
// ops-nn): only what the emitted op_api UTs use, built on opgen's host emulation (opgen/emu/include) so that
// tests/test_op_api_ut.py can run them against the emitted aclnn layer. Not the repositories' code; the real
// framework also records the call for precision runs, which nothing here does.
#pragma once
#include <cstdint>
#include <vector>

#include "aclnn/aclnn_base.h"

// A tensor argument: its view shape and dtype (contiguous, the format recorded only).
class TensorDesc {
public:
    TensorDesc(const std::vector<int64_t>& viewDims, aclDataType dataType, aclFormat format = ACL_FORMAT_ND)
        : dims_(viewDims), dtype_(dataType), format_(format)
    {}
    aclTensor* ToAclTypeRawPtr() const
    {
        return aclCreateTensor(dims_.data(), dims_.size(), dtype_, nullptr, 0, format_, dims_.data(), dims_.size(),
                               nullptr);
    }

private:
    std::vector<int64_t> dims_;
    aclDataType dtype_;
    aclFormat format_;
};
