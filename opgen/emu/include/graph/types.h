// opgen host-side emulation: ge data types, formats and status codes used by the emitted host files
// (OpDef, InferShape, TilingFunc, aclnn). Our own minimal declarations, not CANN's headers; the
// DataType values are CANN's numbering (docs/reference/ascendc.md §2.3) so tests can pass them as integers.
#pragma once
#include <cstdint>

namespace ge {
enum DataType {
    DT_FLOAT = 0,
    DT_FLOAT16 = 1,
    DT_INT8 = 2,
    DT_INT32 = 3,
    DT_UINT8 = 4,
    DT_INT16 = 6,
    DT_INT64 = 9,
    DT_DOUBLE = 11,
    DT_BOOL = 12,
    DT_BF16 = 27,
    DT_UNDEFINED = 28,
};
enum Format { FORMAT_ND = 2 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge
