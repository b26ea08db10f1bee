// Case reader of the aclnn case runner (opgen/check/cpp/runtime.cpp), shared by `opgen check` and
// tests/test_codegen.py. Plain declarations: a runner's main (opgen/check/aclnn.py harness_source) includes this and
// the aclnn API's header and nothing of the C++ library, so it compiles in a fraction of a second.
#pragma once
#include <cstdint>

#include "aclnn/aclnn_base.h"

// One call line of the runner's standard input (defined in runtime.cpp).
struct CaseLine;

// argv[1], when given, is the op::SocVersion name (ASCEND910B, ASCEND910_93, ASCEND910_95) the aclnn layer
// sees; false (and a message on stderr) for an unknown name.
bool ApplySocArgument(int argc, char** argv);
// The next line of standard input, whose tokens the Read* functions take in order; nullptr at the end of the
// input. The same object is returned for every line (the previous line's tokens are gone).
CaseLine* NextCaseLine();
aclTensor* ReadTensor(CaseLine& in);
aclIntArray* ReadIntArray(CaseLine& in);
double ReadDouble(CaseLine& in);
int64_t ReadInt(CaseLine& in);
bool ReadBool(CaseLine& in);
const char* ReadString(CaseLine& in);
// "null" or "<dtype>:<value>" with dtype float64, float32, int64, int32 or bool (a value as ReadDouble / ReadInt
// take it): an aclScalar created as a caller would (aclCreateScalar).
const aclScalar* ReadScalar(CaseLine& in);
// True when a token of the current line was missing or malformed (ReadDouble/ReadInt/ReadBool/ReadString) or the
// line holds more tokens than the parameters; the call must then not be made: ReportReadError prints
// "-1<TAB>case runner: <what>" in place of its result and clears the error for the next line.
bool ReadFailed(CaseLine& in);
void ReportReadError();
// Prints "<status>\t<first logged error, empty on success>\t<kernel launches queued>\t<attributes of the last
// launch, as opgen_host::LaunchAttrs spells them, separated by \x1f>" and resets all three.
void ReportResult(aclnnStatus rc);
