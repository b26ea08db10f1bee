// Stub: OpDef registration API (reference/ascendc.md §2.3).
#pragma once
#include <cstdint>
#include <vector>

#include "graph/types.h"

namespace ops {
enum Option { IGNORE = 0, OPTIONAL = 1, REQUIRED = 2, DYNAMIC = 3 };

class OpParamDef {
public:
    OpParamDef& ParamType(Option type);
    OpParamDef& DataType(std::vector<ge::DataType> types);
    OpParamDef& Format(std::vector<ge::Format> formats);
    OpParamDef& UnknownShapeFormat(std::vector<ge::Format> formats);
    OpParamDef& AutoContiguous();
    OpParamDef& ValueDepend(Option type);
};

class OpAttrDef {
public:
    OpAttrDef& AttrType(Option type);
    OpAttrDef& Int();
    OpAttrDef& Int(int64_t value);
    OpAttrDef& Float();
    OpAttrDef& Float(float value);
    OpAttrDef& Bool();
    OpAttrDef& Bool(bool value);
    OpAttrDef& String();
    OpAttrDef& String(const char* value);
};

class OpAICoreConfig {};

class OpAICoreDef {
public:
    OpAICoreDef& AddConfig(const char* soc);
    OpAICoreDef& AddConfig(const char* soc, OpAICoreConfig& config);
};

class OpDef {
public:
    explicit OpDef(const char* type);
    OpParamDef& Input(const char* name);
    OpParamDef& Output(const char* name);
    OpAttrDef& Attr(const char* name);
    OpAICoreDef& AICore();
};
}  // namespace ops

#define OP_ADD(opType) static opType g_opdef_##opType(#opType)
