// opgen host-side emulation: the subset of CANN's gert host API that opgen's emitted TilingFunc and
// InferShape / InferDataType use (docs/reference/ascendc.md §2.5, §2.6), so they compile with g++ and run on
// x86. Our own minimal declarations, not CANN's headers.
//
// The contexts are plain structs the caller fills (a test driver or the emulated framework). Index
// conventions follow CANN: GetInputShape / GetInputDesc / GetInputDataType take the compute-node index
// (absent optional inputs are skipped), the GetRequired* / GetOptional* accessors take the IR index
// (the OpDef order). The caller stores inputs by IR index, nullptr (DT_UNDEFINED for dtypes) when absent.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/types.h"

namespace fe {
// Platform numbers the caller fills from opgen/platforms (read through platform_ascendc::PlatformAscendC).
class PlatFormInfos {
public:
    int64_t aivNum = 48;
    int64_t aicNum = 24;
    uint64_t ubBytes = 196608;
    uint32_t libApiWorkspaceBytes = 16 * 1024 * 1024;  // PlatformAscendC::GetLibApiWorkSpaceSize()
};
}  // namespace fe

namespace gert {
namespace detail {
// The index-th non-null entry of `v` (compute-node index over IR-ordered inputs), nullptr past the end.
template <typename T>
T* Present(const std::vector<T*>& v, size_t index)
{
    for (T* p : v) {
        if (p != nullptr && index-- == 0) {
            return p;
        }
    }
    return nullptr;
}
template <typename T>
T* At(const std::vector<T*>& v, size_t index)
{
    return index < v.size() ? v[index] : nullptr;
}
}  // namespace detail

class Shape {
public:
    Shape() = default;
    explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
    size_t GetDimNum() const { return dims_.size(); }
    int64_t GetDim(size_t index) const { return index < dims_.size() ? dims_[index] : 0; }
    int64_t GetShapeSize() const
    {
        int64_t n = 1;
        for (int64_t d : dims_) {
            n *= d;
        }
        return n;
    }
    void SetDimNum(size_t count) { dims_.resize(count); }
    void SetDim(size_t index, int64_t value)
    {
        if (index < dims_.size()) {
            dims_[index] = value;
        }
    }
    bool operator==(const Shape& other) const { return dims_ == other.dims_; }

private:
    std::vector<int64_t> dims_;
};

// Origin and storage shapes are the same here: opgen's tensors are ND.
class StorageShape {
public:
    StorageShape() = default;
    explicit StorageShape(Shape shape) : shape_(std::move(shape)) {}
    const Shape& GetStorageShape() const { return shape_; }
    const Shape& GetOriginShape() const { return shape_; }

private:
    Shape shape_;
};

class CompileTimeTensorDesc {
public:
    explicit CompileTimeTensorDesc(ge::DataType dtype = ge::DT_FLOAT) : dtype_(dtype) {}
    ge::DataType GetDataType() const { return dtype_; }

private:
    ge::DataType dtype_;
};

// A list attribute's values (CANN's exe_graph/runtime/continuous_vector.h): read-only access to size and data,
// as the real class exposes to a TilingFunc / InferShape (GetSize, GetCapacity, GetData); the emulation owns
// the values in a vector.
template <typename T>
class TypedContinuousVector {
public:
    TypedContinuousVector() = default;
    explicit TypedContinuousVector(std::vector<T> values) : values_(std::move(values)) {}
    size_t GetSize() const { return values_.size(); }
    size_t GetCapacity() const { return values_.size(); }
    const T* GetData() const { return values_.data(); }

private:
    std::vector<T> values_;
};

// Attribute values by index (the OpDef order); each slot is readable as int64_t, float or bool, and a slot
// set with SetListInt as a list of int64_t only (GetListInt; CANN's ListInt attribute).
class RuntimeAttrs {
public:
    void SetListInt(size_t index, std::vector<int64_t> values)
    {
        Set(index, 0.0);
        lists_[index] = TypedContinuousVector<int64_t>(std::move(values));
    }
    const TypedContinuousVector<int64_t>* GetListInt(size_t index) const
    {
        auto it = lists_.find(index);
        return it == lists_.end() ? nullptr : &it->second;
    }
    // A string attribute (CANN: const char* GetStr(const size_t index) const, GetAttrPointer<char>): the text,
    // NUL-terminated, or nullptr when the attribute at `index` is not a string.
    void SetStr(size_t index, std::string text)
    {
        Set(index, 0.0);
        strs_[index] = std::move(text);
    }
    const char* GetStr(size_t index) const;
    const int64_t* GetInt(size_t index) const;
    const float* GetFloat(size_t index) const;
    const bool* GetBool(size_t index) const;
    void Set(size_t index, double value)
    {
        if (ints_.size() <= index) {
            ints_.resize(index + 1);
            floats_.resize(index + 1);
            bools_.resize(index + 1);
        }
        ints_[index] = static_cast<int64_t>(value);
        floats_[index] = static_cast<float>(value);
        bools_[index] = value != 0.0;
    }
    template <typename T>
    const T* GetAttrPointer(size_t index) const;
    size_t GetAttrNum() const { return ints_.size(); }

private:
    std::vector<int64_t> ints_;
    std::vector<float> floats_;
    std::deque<bool> bools_;  // addressable, unlike std::vector<bool>
    std::map<size_t, TypedContinuousVector<int64_t>> lists_;
    std::map<size_t, std::string> strs_;
};
template <>
inline const char* RuntimeAttrs::GetAttrPointer<char>(size_t index) const
{
    auto it = strs_.find(index);
    return it == strs_.end() ? nullptr : it->second.c_str();
}
inline const char* RuntimeAttrs::GetStr(size_t index) const { return GetAttrPointer<char>(index); }
template <>
inline const int64_t* RuntimeAttrs::GetAttrPointer<int64_t>(size_t index) const
{
    return index < ints_.size() ? &ints_[index] : nullptr;
}
template <>
inline const float* RuntimeAttrs::GetAttrPointer<float>(size_t index) const
{
    return index < floats_.size() ? &floats_[index] : nullptr;
}
template <>
inline const bool* RuntimeAttrs::GetAttrPointer<bool>(size_t index) const
{
    return index < bools_.size() ? &bools_[index] : nullptr;
}
inline const int64_t* RuntimeAttrs::GetInt(size_t index) const { return GetAttrPointer<int64_t>(index); }
inline const float* RuntimeAttrs::GetFloat(size_t index) const { return GetAttrPointer<float>(index); }
inline const bool* RuntimeAttrs::GetBool(size_t index) const { return GetAttrPointer<bool>(index); }

// An input tensor as TilingFunc sees it (CANN's gert::Tensor, exe_graph/runtime/runtime_tensor.h): its shape and,
// for an input the OpDef declares ValueDepend, the host address of its values (nullptr otherwise, as in CANN).
class Tensor {
public:
    Tensor() = default;
    Tensor(Shape shape, const void* addr) : shape_(std::move(shape)), addr_(addr) {}
    int64_t GetShapeSize() const { return shape_.GetStorageShape().GetShapeSize(); }
    const StorageShape& GetShape() const { return shape_; }
    const Shape& GetStorageShape() const { return shape_.GetStorageShape(); }
    const void* GetAddr() const { return addr_; }
    template <class T>
    const T* GetData() const
    {
        return static_cast<const T*>(addr_);
    }

private:
    StorageShape shape_;
    const void* addr_ = nullptr;
};

// The raw tiling-data buffer (64 KiB, like CANN's default capacity).
class TilingData {
public:
    void* GetData() { return buf_.data(); }
    size_t GetCapacity() const { return buf_.size(); }
    void SetDataSize(size_t size) { size_ = size; }
    size_t GetDataSize() const { return size_; }

private:
    std::vector<uint8_t> buf_ = std::vector<uint8_t>(64 * 1024);
    size_t size_ = 0;
};

// Input of TilingFunc: shapes, dtypes, attributes, platform and the deterministic flag in; blockDim, tiling
// key, workspace sizes and tiling data out.
class TilingContext {
public:
    RuntimeAttrs attrs;
    std::vector<StorageShape*> inputShapes;  // IR order; nullptr = absent optional input
    std::vector<Tensor*> inputTensors;       // IR order, as inputShapes (values only for ValueDepend inputs)
    std::vector<CompileTimeTensorDesc*> inputDescs;
    std::vector<CompileTimeTensorDesc*> outputDescs;
    fe::PlatFormInfos* platform = nullptr;
    const void* compileInfo = nullptr;  // what TilingParse filled (nullptr: no TilingParse ran)
    const char* nodeName = "node";
    int32_t deterministic = 0;  // the framework's deterministic-computation setting (1: required)
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    size_t workspace[4] = {0, 0, 0, 0};
    TilingData raw;

    const RuntimeAttrs* GetAttrs() const { return &attrs; }
    const StorageShape* GetInputShape(size_t index) const { return detail::Present(inputShapes, index); }
    const StorageShape* GetRequiredInputShape(size_t irIndex) const { return detail::At(inputShapes, irIndex); }
    const StorageShape* GetOptionalInputShape(size_t irIndex) const { return detail::At(inputShapes, irIndex); }
    const Tensor* GetInputTensor(size_t index) const { return detail::Present(inputTensors, index); }
    const Tensor* GetRequiredInputTensor(size_t irIndex) const { return detail::At(inputTensors, irIndex); }
    const Tensor* GetOptionalInputTensor(size_t irIndex) const { return detail::At(inputTensors, irIndex); }
    const CompileTimeTensorDesc* GetInputDesc(size_t index) const { return detail::Present(inputDescs, index); }
    const CompileTimeTensorDesc* GetRequiredInputDesc(size_t irIndex) const { return detail::At(inputDescs, irIndex); }
    const CompileTimeTensorDesc* GetOptionalInputDesc(size_t irIndex) const { return detail::At(inputDescs, irIndex); }
    const CompileTimeTensorDesc* GetOutputDesc(size_t index) const { return detail::At(outputDescs, index); }
    fe::PlatFormInfos* GetPlatformInfo() const { return platform; }
    const void* GetCompileInfo() const { return compileInfo; }
    template <typename T>
    const T* GetCompileInfo() const
    {
        return reinterpret_cast<const T*>(compileInfo);
    }
    const char* GetNodeName() const { return nodeName; }
    int32_t GetDeterministic() const { return deterministic; }
    void SetBlockDim(uint32_t n) { blockDim = n; }
    void SetTilingKey(uint64_t key) { tilingKey = key; }
    size_t* GetWorkspaceSizes(size_t /*count*/) { return workspace; }
    TilingData* GetRawTilingData() { return &raw; }
    template <typename T>
    T* GetTilingData()
    {
        raw.SetDataSize(sizeof(T));
        return reinterpret_cast<T*>(raw.GetData());
    }
};
// Input of TilingParse (graph mode, once per node): the platform in, the op's compile info out.
class TilingParseContext {
public:
    fe::PlatFormInfos* platform = nullptr;
    void* compiledInfo = nullptr;  // an instance of the CompileInfo type TilingParse<...> registered
    const char* nodeName = "node";

    template <typename T>
    auto GetCompiledInfo() -> T*
    {
        return static_cast<T*>(compiledInfo);
    }
    fe::PlatFormInfos* GetPlatformInfo() const { return platform; }
    const char* GetNodeName() const { return nodeName; }
};

// Input of InferShape: input shapes and attributes in, output shapes out.
class InferShapeContext {
public:
    RuntimeAttrs attrs;
    std::vector<const Shape*> inputShapes;  // IR order; nullptr = absent optional input
    std::vector<Shape*> outputShapes;
    const char* nodeName = "node";

    const Shape* GetInputShape(size_t index) const { return detail::Present(inputShapes, index); }
    const Shape* GetRequiredInputShape(size_t irIndex) const { return detail::At(inputShapes, irIndex); }
    const Shape* GetOptionalInputShape(size_t irIndex) const { return detail::At(inputShapes, irIndex); }
    Shape* GetOutputShape(size_t index) { return detail::At(outputShapes, index); }
    const RuntimeAttrs* GetAttrs() const { return &attrs; }
    const char* GetNodeName() const { return nodeName; }
};

// Input of InferDataType: input dtypes in (IR order, DT_UNDEFINED = absent), output dtypes out.
class InferDataTypeContext {
public:
    std::vector<ge::DataType> inputDtypes;
    std::vector<ge::DataType> outputDtypes;
    const char* nodeName = "node";

    ge::DataType GetInputDataType(size_t index) const
    {
        for (ge::DataType d : inputDtypes) {
            if (d != ge::DT_UNDEFINED && index-- == 0) {
                return d;
            }
        }
        return ge::DT_UNDEFINED;
    }
    ge::DataType GetRequiredInputDataType(size_t irIndex) const { return GetOptionalInputDataType(irIndex); }
    ge::DataType GetOptionalInputDataType(size_t irIndex) const
    {
        return irIndex < inputDtypes.size() ? inputDtypes[irIndex] : ge::DT_UNDEFINED;
    }
    ge::graphStatus SetOutputDataType(size_t index, ge::DataType dtype)
    {
        if (outputDtypes.size() <= index) {
            outputDtypes.resize(index + 1, ge::DT_UNDEFINED);
        }
        outputDtypes[index] = dtype;
        return ge::GRAPH_SUCCESS;
    }
    const char* GetNodeName() const { return nodeName; }
};

using TilingFunc = ge::graphStatus (*)(TilingContext*);
using TilingParseFunc = ge::graphStatus (*)(TilingParseContext*);

// A registered TilingParse: the function and how to make / free its CompileInfo instance.
struct TilingParseEntry {
    TilingParseFunc parse = nullptr;
    void* (*create)() = nullptr;
    void (*destroy)(void*) = nullptr;
};
using InferShapeFunc = ge::graphStatus (*)(InferShapeContext*);
using InferDataTypeFunc = ge::graphStatus (*)(InferDataTypeContext*);

// Registries by OpDef name, filled by IMPL_OP_OPTILING / IMPL_OP_INFERSHAPE at static initialisation.
//
// Linkage of the registries and of OpImplRegister's registering methods: by default inline here (the header alone
// is enough: a test's own driver, tests/test_codegen.py compiling each emitted file). With EMU_SHARED_REGISTRY
// defined (opgen check's TilingFunc objects, opgen/check/build.py tiling_flags) they are only declared, and
// defined once, out of line, by the translation unit that defines EMU_SHARED_REGISTRY_DEFINE before including
// this header (opgen/check/cpp/check_main.cpp, which every launch driver links): a TilingFunc object then holds no
// copy of std::map's code for the four registries (about 0.1 s of the compiler's 0.23 s for a TilingFunc at -O0).
// Every object of one program must see the same mode (the launch drivers' TilingFuncs all get the macro).
#if defined(EMU_SHARED_REGISTRY_DEFINE)
#define OPGEN_REGISTRY_LINKAGE
#define OPGEN_REGISTRY_DEFINED 1
#elif defined(EMU_SHARED_REGISTRY)
#define OPGEN_REGISTRY_LINKAGE
#define OPGEN_REGISTRY_DEFINED 0
#else
#define OPGEN_REGISTRY_LINKAGE inline
#define OPGEN_REGISTRY_DEFINED 1
#endif
OPGEN_REGISTRY_LINKAGE std::map<std::string, TilingFunc>& TilingRegistry();
OPGEN_REGISTRY_LINKAGE std::map<std::string, TilingParseEntry>& TilingParseRegistry();
OPGEN_REGISTRY_LINKAGE std::map<std::string, InferShapeFunc>& InferShapeRegistry();
OPGEN_REGISTRY_LINKAGE std::map<std::string, InferDataTypeFunc>& InferDataTypeRegistry();

class OpImplRegister {
public:
    explicit OpImplRegister(const char* type) : type_(type) {}
    OPGEN_REGISTRY_LINKAGE OpImplRegister& Tiling(TilingFunc fn);
    template <typename CompileInfo>
    OpImplRegister& TilingParse(TilingParseFunc parse)
    {
        TilingParseEntry e;
        e.parse = parse;
        e.create = []() -> void* { return new CompileInfo(); };
        e.destroy = [](void* p) { delete static_cast<CompileInfo*>(p); };
        return SetTilingParse(e);
    }
    OPGEN_REGISTRY_LINKAGE OpImplRegister& InferShape(InferShapeFunc fn);
    OPGEN_REGISTRY_LINKAGE OpImplRegister& InferDataType(InferDataTypeFunc fn);

private:
    OPGEN_REGISTRY_LINKAGE OpImplRegister& SetTilingParse(const TilingParseEntry& e);
    std::string type_;
};

#if OPGEN_REGISTRY_DEFINED
OPGEN_REGISTRY_LINKAGE std::map<std::string, TilingFunc>& TilingRegistry()
{
    static std::map<std::string, TilingFunc> registry;
    return registry;
}
OPGEN_REGISTRY_LINKAGE std::map<std::string, TilingParseEntry>& TilingParseRegistry()
{
    static std::map<std::string, TilingParseEntry> registry;
    return registry;
}
OPGEN_REGISTRY_LINKAGE std::map<std::string, InferShapeFunc>& InferShapeRegistry()
{
    static std::map<std::string, InferShapeFunc> registry;
    return registry;
}
OPGEN_REGISTRY_LINKAGE std::map<std::string, InferDataTypeFunc>& InferDataTypeRegistry()
{
    static std::map<std::string, InferDataTypeFunc> registry;
    return registry;
}
OPGEN_REGISTRY_LINKAGE OpImplRegister& OpImplRegister::Tiling(TilingFunc fn)
{
    TilingRegistry()[type_] = fn;
    return *this;
}
OPGEN_REGISTRY_LINKAGE OpImplRegister& OpImplRegister::SetTilingParse(const TilingParseEntry& e)
{
    TilingParseRegistry()[type_] = e;
    return *this;
}
OPGEN_REGISTRY_LINKAGE OpImplRegister& OpImplRegister::InferShape(InferShapeFunc fn)
{
    InferShapeRegistry()[type_] = fn;
    return *this;
}
OPGEN_REGISTRY_LINKAGE OpImplRegister& OpImplRegister::InferDataType(InferDataTypeFunc fn)
{
    InferDataTypeRegistry()[type_] = fn;
    return *this;
}
#endif
#undef OPGEN_REGISTRY_DEFINED
#undef OPGEN_REGISTRY_LINKAGE
}  // namespace gert

#define OPGEN_IMPL_CAT2(a, b) a##b
#define OPGEN_IMPL_CAT(a, b) OPGEN_IMPL_CAT2(a, b)
#define IMPL_OP_OPTILING(opType) \
    static gert::OpImplRegister OPGEN_IMPL_CAT(g_opgen_tiling_, __LINE__) = gert::OpImplRegister(#opType)
#define IMPL_OP_INFERSHAPE(opType) \
    static gert::OpImplRegister OPGEN_IMPL_CAT(g_opgen_infershape_, __LINE__) = gert::OpImplRegister(#opType)
