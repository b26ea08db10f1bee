// opgen host-side emulation: aclnn public types (docs/reference/ascendc.md §2.8) and the tensor constructors
// the call examples use. Our own minimal declarations, not CANN's headers. aclTensor / aclIntArray keep
// their shape, dtype and values as data members so an emulated aclnn layer can run the emitted checks;
// the emitted code only calls the methods.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "graph/types.h"

using aclnnStatus = int32_t;
using aclrtStream = void*;
constexpr aclnnStatus ACLNN_SUCCESS = 0;
constexpr aclnnStatus ACLNN_ERR_PARAM_NULLPTR = 161001;
constexpr aclnnStatus ACLNN_ERR_PARAM_INVALID = 161002;
constexpr aclnnStatus ACLNN_ERR_RUNTIME_ERROR = 361001;
constexpr aclnnStatus ACLNN_ERR_INNER = 561000;
constexpr aclnnStatus ACLNN_ERR_INNER_CREATE_EXECUTOR = 561101;
constexpr aclnnStatus ACLNN_ERR_INNER_NULLPTR = 561103;

namespace op {
using DataType = ge::DataType;
enum class Format { FORMAT_ND = 2 };
class Shape {
public:
    std::vector<int64_t> dims;
    size_t GetDimNum() const { return dims.size(); }
    int64_t GetDim(size_t index) const { return dims[index]; }
    Shape& AppendDim(int64_t value)
    {
        dims.push_back(value);
        return *this;
    }
};
}  // namespace op

struct aclTensor {
    op::Shape shape;
    op::DataType dtype = ge::DT_FLOAT;
    void* data = nullptr;  // device memory of the emulation (not read by the emitted host code)
    const op::Shape& GetViewShape() const { return shape; }
    op::DataType GetDataType() const { return dtype; }
    // CANN's aclTensor::IsEmpty (opbase common_types.h): the view shape holds no element.
    bool IsEmpty() const
    {
        for (int64_t d : shape.dims) {
            if (d == 0) {
                return true;
            }
        }
        return false;
    }
};

struct aclIntArray {
    std::vector<int64_t> values;
    uint64_t Size() const { return values.size(); }
    const int64_t& operator[](size_t index) const { return values[index]; }
};

// A scalar operand (opbase's aclScalar, opdev/common_types.h): one value of a dtype, read by the To* accessors,
// which convert from whatever dtype the caller created it with. The emulation keeps the value as a double (every
// dtype it accepts converts to one exactly) and implements the accessors the emitted code calls.
class aclScalar {
public:
    aclScalar(const void* data, op::DataType dataType) : dataType_(dataType)
    {
        switch (dataType) {
            case ge::DT_FLOAT: value_ = Load<float>(data); break;
            case ge::DT_DOUBLE: value_ = Load<double>(data); break;
            case ge::DT_FLOAT16: value_ = HalfBits(Load<uint16_t>(data)); break;
            case ge::DT_BF16: value_ = Bf16Bits(Load<uint16_t>(data)); break;
            case ge::DT_INT8: value_ = Load<int8_t>(data); break;
            case ge::DT_UINT8: value_ = Load<uint8_t>(data); break;
            case ge::DT_INT16: value_ = Load<int16_t>(data); break;
            case ge::DT_INT32: value_ = Load<int32_t>(data); break;
            case ge::DT_INT64: int_ = Load<int64_t>(data); value_ = static_cast<double>(int_); isInt64_ = true; break;
            case ge::DT_BOOL: value_ = Load<uint8_t>(data) != 0 ? 1.0 : 0.0; break;
            default: value_ = 0.0; break;
        }
    }
    op::DataType GetDataType() const { return dataType_; }
    float ToFloat() const { return isInt64_ ? static_cast<float>(int_) : static_cast<float>(value_); }
    double ToDouble() const { return value_; }
    // opbase's ToBool: a floating value is true from fp32's epsilon in magnitude, an integer when not 0
    bool ToBool() const
    {
        const bool floating = dataType_ == ge::DT_FLOAT || dataType_ == ge::DT_DOUBLE || dataType_ == ge::DT_FLOAT16 ||
                              dataType_ == ge::DT_BF16;
        return floating ? std::fabs(value_) >= static_cast<double>(FLT_EPSILON) : value_ != 0.0;
    }
    int32_t ToInt32() const { return static_cast<int32_t>(ToInt64()); }
    int64_t ToInt64() const { return isInt64_ ? int_ : static_cast<int64_t>(value_); }

private:
    template <typename T>
    static T Load(const void* data)
    {
        T v;
        std::memcpy(&v, data, sizeof(T));
        return v;
    }
    static double Bf16Bits(uint16_t bits)
    {
        const uint32_t word = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &word, sizeof(f));
        return f;
    }
    static double HalfBits(uint16_t bits)   // IEEE binary16: sign, 5-bit exponent (bias 15), 10-bit fraction
    {
        const int exponent = (bits >> 10) & 0x1f;
        const int fraction = bits & 0x3ff;
        double magnitude;
        if (exponent == 0) {
            magnitude = std::ldexp(fraction, -24);   // subnormal
        } else if (exponent == 0x1f) {
            magnitude = fraction == 0 ? HUGE_VAL : NAN;
        } else {
            magnitude = (1024 + fraction) * std::ldexp(1.0, exponent - 25);
        }
        return (bits & 0x8000) != 0 ? -magnitude : magnitude;
    }

    op::DataType dataType_;
    double value_ = 0.0;
    int64_t int_ = 0;
    bool isInt64_ = false;
};

struct aclOpExecutor;

// Same numbering as ge::DataType for the types opgen uses.
enum aclDataType {
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT32 = 3,
    ACL_UINT8 = 4,
    ACL_INT16 = 6,
    ACL_INT64 = 9,
    ACL_DOUBLE = 11,
    ACL_BOOL = 12,
    ACL_BF16 = 27,
};
enum aclFormat { ACL_FORMAT_ND = 2 };

// Contiguous ND tensors only: strides, offset and storage dims are accepted and ignored.
inline aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                  const int64_t* /*stride*/, int64_t /*offset*/, aclFormat /*format*/,
                                  const int64_t* /*storageDims*/, uint64_t /*storageDimsNum*/, void* tensorData)
{
    aclTensor* t = new aclTensor;
    t->shape.dims.assign(viewDims, viewDims + viewDimsNum);
    t->dtype = static_cast<ge::DataType>(dataType);
    t->data = tensorData;
    return t;
}
inline aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size)
{
    aclIntArray* a = new aclIntArray;
    a->values.assign(value, value + size);
    return a;
}
// The value is copied at creation (CANN's aclCreateScalar reads `value` as `dataType`).
inline aclScalar* aclCreateScalar(void* value, aclDataType dataType)
{
    return value == nullptr ? nullptr : new aclScalar(value, static_cast<ge::DataType>(dataType));
}
inline aclnnStatus aclDestroyScalar(const aclScalar* scalar)
{
    delete scalar;
    return ACLNN_SUCCESS;
}
inline aclnnStatus aclDestroyTensor(const aclTensor* tensor)
{
    delete tensor;
    return ACLNN_SUCCESS;
}
inline aclnnStatus aclDestroyIntArray(const aclIntArray* array)
{
    delete array;
    return ACLNN_SUCCESS;
}
