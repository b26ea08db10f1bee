// Case reader of the aclnn case runner (opgen/check/cpp/runtime.cpp), shared by `opgen check` and
// tests/test_codegen.py.
#pragma once
#include <istream>

#include "aclnn/aclnn_base.h"

// argv[1], when given, is the op::SocVersion name (ASCEND910B, ASCEND910_93, ASCEND910_95) the aclnn layer
// sees; false (and a message on stderr) for an unknown name.
bool ApplySocArgument(int argc, char** argv);
aclTensor* ReadTensor(std::istream& in);
aclIntArray* ReadIntArray(std::istream& in);
double ReadDouble(std::istream& in);
int64_t ReadInt(std::istream& in);
bool ReadBool(std::istream& in);
const char* ReadString(std::istream& in);
// True when a token of the current line was missing or malformed (ReadDouble/ReadInt/ReadBool/ReadString) or the
// line holds more tokens than the parameters; the call must then not be made: ReportReadError prints
// "-1<TAB>case runner: <what>" in place of its result and clears the error for the next line.
bool ReadFailed(std::istream& in);
void ReportReadError();
// Prints "<status>\t<first logged error, empty on success>\t<kernel launches queued>" and resets both.
void ReportResult(aclnnStatus rc);
