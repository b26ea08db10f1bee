// Case reader of the differential test harness (tests/stubs/runtime.cpp).
#pragma once
#include <istream>

#include "aclnn/aclnn_base.h"

aclTensor* ReadTensor(std::istream& in);
aclIntArray* ReadIntArray(std::istream& in);
double ReadDouble(std::istream& in);
int64_t ReadInt(std::istream& in);
bool ReadBool(std::istream& in);
const char* ReadString(std::istream& in);
void ReportResult(aclnnStatus rc);
