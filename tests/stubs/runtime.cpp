// Definitions behind the stub headers, so tests can link and run the emitted aclnn checks on x86
// (tests/test_codegen.py, the differential test against opgen's interpreter). Not used by the
// syntax-only compiles.
#include <cstdarg>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "aclnn_kernels/contiguous.h"
#include "opdev/make_op_executor.h"
#include "opdev/op_log.h"
#include "opdev/platform.h"
#include "runtime.h"

std::string g_lastLog;
aclnnStatus g_lastCode = 0;

namespace stub {
void AclnnLogE(aclnnStatus code, const char* fmt, ...)
{
    char buf[2048];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    if (g_lastLog.empty()) {
        g_lastLog = buf;
        g_lastCode = code;
    }
}

static aclOpExecutor g_executor;

aclOpExecutor* UniqueExecutor::get()
{
    return &g_executor;
}
aclOpExecutor* UniqueExecutor::operator->()
{
    return &g_executor;
}
void UniqueExecutor::ReleaseTo(aclOpExecutor** executor)
{
    *executor = &g_executor;
}
UniqueExecutor CreateExecutor()
{
    return UniqueExecutor();
}
}  // namespace stub

aclTensor* aclOpExecutor::AllocTensor(const op::Shape& shape, op::DataType dtype, op::Format)
{
    aclTensor* t = new aclTensor;
    t->shape = shape;
    t->dtype = dtype;
    return t;
}
const aclTensor* aclOpExecutor::ConvertToTensor(const aclIntArray* array, op::DataType dtype)
{
    aclTensor* t = new aclTensor;
    t->shape.dims = {static_cast<int64_t>(array->Size())};
    t->dtype = dtype;
    return t;
}
uint64_t aclOpExecutor::GetWorkspaceSize()
{
    return 0;
}
aclnnStatus CommonOpExecutorRun(void*, uint64_t, aclOpExecutor*, aclrtStream)
{
    return ACLNN_SUCCESS;
}

namespace l0op {
const aclTensor* Contiguous(const aclTensor* x, aclOpExecutor*)
{
    return x;
}
const aclTensor* ViewCopy(const aclTensor*, const aclTensor* y, aclOpExecutor*)
{
    return y;
}
}  // namespace l0op

namespace op {
static PlatformInfo g_platform;
op::SocVersion g_soc = op::SocVersion::ASCEND910B;
SocVersion PlatformInfo::GetSocVersion() const
{
    return g_soc;
}
const PlatformInfo& GetCurrentPlatformInfo()
{
    return g_platform;
}
}  // namespace op

// ---- the case reader of the test harness --------------------------------------------------------

static ge::DataType ParseDtype(const std::string& name)
{
    if (name == "float32") return ge::DT_FLOAT;
    if (name == "float16") return ge::DT_FLOAT16;
    if (name == "bfloat16") return ge::DT_BF16;
    if (name == "int32") return ge::DT_INT32;
    if (name == "int64") return ge::DT_INT64;
    if (name == "uint8") return ge::DT_UINT8;
    if (name == "bool") return ge::DT_BOOL;
    return ge::DT_UNDEFINED;
}

static std::vector<int64_t> ParseList(const std::string& text)
{
    std::vector<int64_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (!item.empty()) {
            out.push_back(std::stoll(item));
        }
    }
    return out;
}

// "null" or "<dtype>:<d0,d1,...>" (a scalar: "<dtype>:")
aclTensor* ReadTensor(std::istream& in)
{
    std::string tok;
    in >> tok;
    if (tok == "null") {
        return nullptr;
    }
    const size_t colon = tok.find(':');
    aclTensor* t = new aclTensor;
    t->dtype = ParseDtype(tok.substr(0, colon));
    t->shape.dims = ParseList(tok.substr(colon + 1));
    return t;
}

// "null" or "a:<v0,v1,...>"
aclIntArray* ReadIntArray(std::istream& in)
{
    std::string tok;
    in >> tok;
    if (tok == "null") {
        return nullptr;
    }
    aclIntArray* a = new aclIntArray;
    a->values = ParseList(tok.substr(2));
    return a;
}

double ReadDouble(std::istream& in)
{
    double v = 0;
    in >> v;
    return v;
}

int64_t ReadInt(std::istream& in)
{
    int64_t v = 0;
    in >> v;
    return v;
}

bool ReadBool(std::istream& in)
{
    int v = 0;
    in >> v;
    return v != 0;
}

// "null" or the text itself (no spaces)
const char* ReadString(std::istream& in)
{
    std::string tok;
    in >> tok;
    if (tok == "null") {
        return nullptr;
    }
    return (new std::string(tok))->c_str();
}

void ReportResult(aclnnStatus rc)
{
    std::cout << rc << "\t" << (rc == ACLNN_SUCCESS ? std::string() : g_lastLog) << std::endl;
    g_lastLog.clear();
    g_lastCode = 0;
}
