// opgen's stand-in for the op_api UT framework (see tensor_desc.h): a host integer array argument.
#pragma once
#include <cstdint>
#include <vector>

#include "aclnn/aclnn_base.h"

class IntArrayDesc {
public:
    explicit IntArrayDesc(const std::vector<int64_t>& values) : values_(values) {}
    aclIntArray* ToAclTypeRawPtr() const { return aclCreateIntArray(values_.data(), values_.size()); }

private:
    std::vector<int64_t> values_;
};
