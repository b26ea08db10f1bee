// opgen host-side emulation: aclnn public types (docs/reference/ascendc.md §2.8) and the tensor constructors
// the call examples use. Our own minimal declarations, not CANN's headers. aclTensor / aclIntArray keep
// their shape, dtype and values as data members so an emulated aclnn layer can run the emitted checks;
// the emitted code only calls the methods.
#pragma once
#include <cstddef>
#include <cstdint>
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
