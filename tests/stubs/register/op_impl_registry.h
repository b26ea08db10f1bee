// Stub: InferShape / InferDataType registration API (reference/ascendc.md §2.6).
#pragma once
#include <cstddef>
#include <cstdint>

#include "graph/types.h"

namespace gert {
class Shape {
public:
    size_t GetDimNum() const;
    int64_t GetDim(size_t index) const;
    void SetDimNum(size_t count);
    void SetDim(size_t index, int64_t value);
};

class RuntimeAttrs {
public:
    template <typename T>
    const T* GetAttrPointer(size_t index) const;
};

class InferShapeContext {
public:
    const Shape* GetInputShape(size_t index) const;
    const Shape* GetRequiredInputShape(size_t irIndex) const;
    const Shape* GetOptionalInputShape(size_t irIndex) const;
    Shape* GetOutputShape(size_t index);
    const RuntimeAttrs* GetAttrs() const;
    const char* GetNodeName() const;
};

class InferDataTypeContext {
public:
    ge::DataType GetInputDataType(size_t index) const;
    ge::DataType GetRequiredInputDataType(size_t irIndex) const;
    ge::DataType GetOptionalInputDataType(size_t irIndex) const;
    ge::graphStatus SetOutputDataType(size_t index, ge::DataType dtype);
    const char* GetNodeName() const;
};

using InferShapeFunc = ge::graphStatus (*)(InferShapeContext*);
using InferDataTypeFunc = ge::graphStatus (*)(InferDataTypeContext*);

class OpImplRegister {
public:
    explicit OpImplRegister(const char* type);
    OpImplRegister& InferShape(InferShapeFunc fn);
    OpImplRegister& InferDataType(InferDataTypeFunc fn);
};
}  // namespace gert

#define IMPL_OP_INFERSHAPE(opType) static gert::OpImplRegister g_impl_##opType = gert::OpImplRegister(#opType)
