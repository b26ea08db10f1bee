// opgen host-side emulation: the subset of CANN's gert / ge host API that opgen's emitted
// TilingFunc and InferShape use, so they compile and run on x86 with g++ (issue 4; reference/ascendc.md §2.5, §2.6).
// Our own minimal declarations, not CANN's headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ge {
enum DataType : int32_t {
    DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT64 = 9, DT_BOOL = 12,
    DT_BF16 = 27, DT_UNDEFINED = 28
};
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge

namespace fe { class PlatFormInfos { public: int64_t aivNum = 48; int64_t aicNum = 24; uint64_t ubBytes = 196608; }; }

namespace gert {
class Shape {
public:
    Shape() = default;
    explicit Shape(std::vector<int64_t> d) : dims_(std::move(d)) {}
    size_t GetDimNum() const { return dims_.size(); }
    int64_t GetDim(size_t i) const { return i < dims_.size() ? dims_[i] : 0; }
    int64_t GetShapeSize() const { int64_t n = 1; for (auto d : dims_) n *= d; return n; }
    void SetDimNum(size_t n) { dims_.resize(n); }
    void SetDim(size_t i, int64_t v) { if (i < dims_.size()) dims_[i] = v; }
    bool operator==(const Shape& o) const { return dims_ == o.dims_; }
private:
    std::vector<int64_t> dims_;
};
class StorageShape {
public:
    StorageShape() = default;
    explicit StorageShape(Shape s) : s_(std::move(s)) {}
    const Shape& GetStorageShape() const { return s_; }
    const Shape& GetOriginShape() const { return s_; }
private:
    Shape s_;
};
class CompileTimeTensorDesc {
public:
    explicit CompileTimeTensorDesc(ge::DataType d = ge::DT_FLOAT) : dt_(d) {}
    ge::DataType GetDataType() const { return dt_; }
private:
    ge::DataType dt_;
};
class TilingData {
public:
    void* GetData() { return buf_.data(); }
    size_t GetCapacity() const { return buf_.size(); }
    void SetDataSize(size_t n) { size_ = n; }
    size_t GetDataSize() const { return size_; }
private:
    std::vector<uint8_t> buf_ = std::vector<uint8_t>(64 * 1024);
    size_t size_ = 0;
};
// Attribute values by index (the OpDef order); each slot readable as int64_t, float or bool.
class RuntimeAttrs {
public:
    void Set(size_t i, double v)
    {
        if (ints_.size() <= i) {
            ints_.resize(i + 1);
            floats_.resize(i + 1);
            bools_.resize(i + 1);
        }
        ints_[i] = static_cast<int64_t>(v);
        floats_[i] = static_cast<float>(v);
        bools_[i] = v != 0.0;
    }
    template <typename T> const T* GetAttrPointer(size_t i) const;
    size_t GetAttrNum() const { return ints_.size(); }
private:
    std::vector<int64_t> ints_;
    std::vector<float> floats_;
    std::deque<bool> bools_;
};
template <> inline const int64_t* RuntimeAttrs::GetAttrPointer<int64_t>(size_t i) const { return i < ints_.size() ? &ints_[i] : nullptr; }
template <> inline const float* RuntimeAttrs::GetAttrPointer<float>(size_t i) const { return i < floats_.size() ? &floats_[i] : nullptr; }
template <> inline const bool* RuntimeAttrs::GetAttrPointer<bool>(size_t i) const { return i < bools_.size() ? &bools_[i] : nullptr; }

// A tiling context filled by the caller (test driver or the emulated aclnn layer).
class TilingContext {
public:
    RuntimeAttrs attrs;
    const RuntimeAttrs* GetAttrs() const { return &attrs; }
    std::vector<StorageShape*> inputShapes;  // nullptr = absent optional input
    std::vector<CompileTimeTensorDesc*> inputDescs;
    std::vector<CompileTimeTensorDesc*> outputDescs;
    fe::PlatFormInfos* platform = nullptr;
    uint32_t blockDim = 0;
    uint64_t tilingKey = 0;
    size_t workspace[4] = {0, 0, 0, 0};
    TilingData raw;
    const StorageShape* GetInputShape(size_t i) const { return i < inputShapes.size() ? inputShapes[i] : nullptr; }
    const StorageShape* GetOptionalInputShape(size_t i) const { return GetInputShape(i); }
    const CompileTimeTensorDesc* GetInputDesc(size_t i) const { return i < inputDescs.size() ? inputDescs[i] : nullptr; }
    const CompileTimeTensorDesc* GetOptionalInputDesc(size_t i) const { return GetInputDesc(i); }
    const CompileTimeTensorDesc* GetOutputDesc(size_t i) const { return i < outputDescs.size() ? outputDescs[i] : nullptr; }
    fe::PlatFormInfos* GetPlatformInfo() const { return platform; }
    void SetBlockDim(uint32_t n) { blockDim = n; }
    void SetTilingKey(uint64_t k) { tilingKey = k; }
    size_t* GetWorkspaceSizes(size_t) { return workspace; }
    TilingData* GetRawTilingData() { return &raw; }
    template <typename T> T* GetTilingData() { raw.SetDataSize(sizeof(T)); return reinterpret_cast<T*>(raw.GetData()); }
};
class TilingParseContext {};
using TilingFunc = ge::graphStatus (*)(TilingContext*);
inline std::map<std::string, TilingFunc>& TilingRegistry() { static std::map<std::string, TilingFunc> r; return r; }
struct OpImplRegister {
    explicit OpImplRegister(const char* name) : name_(name) {}
    OpImplRegister& Tiling(TilingFunc f) { TilingRegistry()[name_] = f; return *this; }
    template <typename CompileInfo, typename F> OpImplRegister& TilingParse(F) { return *this; }
    std::string name_;
};
}  // namespace gert

#define OPGEN_CAT2(a, b) a##b
#define OPGEN_CAT(a, b) OPGEN_CAT2(a, b)
#define IMPL_OP_OPTILING(op) static gert::OpImplRegister OPGEN_CAT(g_tiling_reg_, __LINE__) = gert::OpImplRegister(#op)
