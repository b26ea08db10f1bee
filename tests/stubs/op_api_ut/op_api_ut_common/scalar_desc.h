// opgen's stand-in for the op_api UT framework (see tensor_desc.h): a scalar operand (aclScalar) of the dtype its
// constructor's argument type gives, as the repository's ScalarDesc picks it (float -> ACL_FLOAT, double ->
// ACL_DOUBLE, int64_t -> ACL_INT64, bool -> ACL_BOOL).
#pragma once
#include <cstdint>

#include "aclnn/aclnn_base.h"

class ScalarDesc {
public:
    ScalarDesc(bool val) : type_(ACL_BOOL) { b_ = val ? 1 : 0; }
    ScalarDesc(int64_t val) : type_(ACL_INT64), i_(val) {}
    ScalarDesc(float val) : type_(ACL_FLOAT), f_(val) {}
    ScalarDesc(double val) : type_(ACL_DOUBLE), d_(val) {}
    aclScalar* ToAclTypeRawPtr() const
    {
        switch (type_) {
            case ACL_BOOL: return aclCreateScalar(const_cast<uint8_t*>(&b_), type_);
            case ACL_INT64: return aclCreateScalar(const_cast<int64_t*>(&i_), type_);
            case ACL_FLOAT: return aclCreateScalar(const_cast<float*>(&f_), type_);
            default: return aclCreateScalar(const_cast<double*>(&d_), type_);
        }
    }

private:
    aclDataType type_;
    uint8_t b_ = 0;
    int64_t i_ = 0;
    float f_ = 0.0f;
    double d_ = 0.0;
};
