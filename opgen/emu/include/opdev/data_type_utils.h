// opgen host-side emulation: opbase's dtype printing (op::ToString of a DataType and of a dtype support list) as
// the aclnn check macros use it. Our own code, not CANN's header. The texts are CANN's: a dtype prints as its
// serial name (DT_FLOAT16), a list as "[" then each name followed by "," then "]" (opbase
// nnopbase/common/utils/data_type_utils.cpp).
#pragma once
#include <initializer_list>
#include <string>

#include "graph/ascend_string.h"
#include "opdev/common_types.h"

namespace op {
inline const char* DataTypeSerialName(DataType dataType)
{
    switch (dataType) {
        case ge::DT_FLOAT:
            return "DT_FLOAT";
        case ge::DT_FLOAT16:
            return "DT_FLOAT16";
        case ge::DT_INT8:
            return "DT_INT8";
        case ge::DT_INT32:
            return "DT_INT32";
        case ge::DT_UINT8:
            return "DT_UINT8";
        case ge::DT_INT16:
            return "DT_INT16";
        case ge::DT_INT64:
            return "DT_INT64";
        case ge::DT_BOOL:
            return "DT_BOOL";
        case ge::DT_BF16:
            return "DT_BF16";
        default:
            return "DT_UNDEFINED";
    }
}
inline ge::AscendString ToString(DataType dataType) { return ge::AscendString(DataTypeSerialName(dataType)); }
inline ge::AscendString ToString(const std::initializer_list<DataType>& dataTypes)
{
    std::string text = "[";
    for (DataType d : dataTypes) {
        text += DataTypeSerialName(d);
        text += ",";
    }
    return ge::AscendString((text + "]").c_str());
}
}  // namespace op
