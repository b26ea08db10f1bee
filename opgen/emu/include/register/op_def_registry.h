// opgen host-side emulation: the OpDef registration API the emitted <op>_def.cpp uses (docs/reference/ascendc.md
// §2.3). Our own minimal declarations, not CANN's headers. The builders accept and discard their
// arguments: the emitted OpDef is compiled (and may be linked) here, but not interpreted; tests read the
// dtype lists back from the source text.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "graph/types.h"

namespace ops {
enum Option { IGNORE = 0, OPTIONAL = 1, REQUIRED = 2, DYNAMIC = 3 };

class OpParamDef {
public:
    OpParamDef& ParamType(Option) { return *this; }
    OpParamDef& DataType(std::vector<ge::DataType>) { return *this; }
    OpParamDef& Format(std::vector<ge::Format>) { return *this; }
    OpParamDef& UnknownShapeFormat(std::vector<ge::Format>) { return *this; }
    OpParamDef& AutoContiguous() { return *this; }
    OpParamDef& ValueDepend(Option) { return *this; }
};

class OpAttrDef {
public:
    OpAttrDef& AttrType(Option) { return *this; }
    OpAttrDef& Int() { return *this; }
    OpAttrDef& Int(int64_t) { return *this; }
    OpAttrDef& Float() { return *this; }
    OpAttrDef& Float(float) { return *this; }
    OpAttrDef& Bool() { return *this; }
    OpAttrDef& Bool(bool) { return *this; }
    OpAttrDef& String() { return *this; }
    OpAttrDef& String(const char*) { return *this; }
};

class OpAICoreConfig {
public:
    OpAICoreConfig& DynamicCompileStaticFlag(bool) { return *this; }
    OpAICoreConfig& DynamicRankSupportFlag(bool) { return *this; }
    OpAICoreConfig& DynamicShapeSupportFlag(bool) { return *this; }
    OpAICoreConfig& ExtendCfgInfo(const char*, const char*) { return *this; }
};

class OpAICoreDef {
public:
    OpAICoreDef& AddConfig(const char*) { return *this; }
    OpAICoreDef& AddConfig(const char*, OpAICoreConfig&) { return *this; }
};

class OpDef {
public:
    explicit OpDef(const char* type) : type_(type) {}
    OpParamDef& Input(const char*) { return params_.emplace_back(); }
    OpParamDef& Output(const char*) { return params_.emplace_back(); }
    OpAttrDef& Attr(const char*) { return attrs_.emplace_back(); }
    OpAICoreDef& AICore() { return aicore_; }
    const char* GetType() const { return type_; }

private:
    const char* type_;
    std::deque<OpParamDef> params_;  // deque: references stay valid while more are added
    std::deque<OpAttrDef> attrs_;
    OpAICoreDef aicore_;
};
}  // namespace ops

#define OP_ADD(opType) static opType g_opdef_##opType(#opType)
