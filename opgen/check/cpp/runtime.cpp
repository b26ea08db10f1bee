// The aclnn case runner's reader (shared by `opgen check` and tests/test_codegen.py's differential test):
// the runner's main (opgen/check/aclnn.py harness_source) reads one call per line, runs it through the
// emitted aclnn API (compiled against opgen's host emulation, opgen/emu/include) and prints the status
// code and the first logged error message. Our own code.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "opdev/op_executor.h"
#include "opdev/op_log.h"
#include "opdev/platform.h"
#include "runtime.h"

// ---- the SoC the aclnn layer sees -------------------------------------------------------------------

bool ApplySocArgument(int argc, char** argv)
{
    if (argc < 2) {
        return true;
    }
    static const struct {
        const char* name;
        op::SocVersion soc;
    } kSocs[] = {{"ASCEND910B", op::SocVersion::ASCEND910B},
                 {"ASCEND910_93", op::SocVersion::ASCEND910_93},
                 {"ASCEND910_95", op::SocVersion::ASCEND910_95},
                 {"ASCEND310P", op::SocVersion::ASCEND310P}};
    for (const auto& s : kSocs) {
        if (std::strcmp(argv[1], s.name) == 0) {
            op::SetCurrentSocVersion(s.soc);
            return true;
        }
    }
    std::cerr << "unknown SoC " << argv[1] << std::endl;
    return false;
}

// ---- the case reader of the test harness --------------------------------------------------------

struct CaseLine {
    std::istringstream in;
};

CaseLine* NextCaseLine()
{
    static CaseLine line;
    std::string text;
    if (!std::getline(std::cin, text)) {
        return nullptr;
    }
    line.in.clear();
    line.in.str(text);
    return &line;
}

// The first malformed token of the current line ("" when every token parsed); see ReadFailed.
static std::string g_readError;

static std::string NextToken(std::istream& in, const char* what)
{
    std::string tok;
    if (!(in >> tok) && g_readError.empty()) {
        g_readError = std::string("missing ") + what + " token";
    }
    return tok;
}

static void BadToken(const std::string& tok, const char* what)
{
    if (g_readError.empty()) {
        g_readError = "'" + tok + "' is not " + what;
    }
}

static ge::DataType ParseDtype(const std::string& name)
{
    if (name == "float32") return ge::DT_FLOAT;
    if (name == "float16") return ge::DT_FLOAT16;
    if (name == "bfloat16") return ge::DT_BF16;
    if (name == "int32") return ge::DT_INT32;
    if (name == "int64") return ge::DT_INT64;
    if (name == "uint8") return ge::DT_UINT8;
    if (name == "int8") return ge::DT_INT8;
    if (name == "int16") return ge::DT_INT16;
    if (name == "bool") return ge::DT_BOOL;
    return ge::DT_UNDEFINED;
}

// Comma-separated int64 values (empty items skipped); false for an item that is not one.
static bool ParseList(const std::string& text, std::vector<int64_t>& out)
{
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) {
            continue;
        }
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (end != item.c_str() + item.size() || errno == ERANGE) {
            return false;
        }
        out.push_back(static_cast<int64_t>(v));
    }
    return true;
}

// "null" or "<dtype>:<d0,d1,...>" (a scalar: "<dtype>:")
aclTensor* ReadTensor(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "tensor");
    if (tok == "null") {
        return nullptr;
    }
    const size_t colon = tok.find(':');
    aclTensor* t = new aclTensor;
    if (colon == std::string::npos || !ParseList(tok.substr(colon + 1), t->shape.dims)) {
        BadToken(tok, "a tensor (<dtype>:<d0,d1,...> or null)");
        return t;
    }
    t->dtype = ParseDtype(tok.substr(0, colon));
    return t;
}

// "null" or "a:<v0,v1,...>"
aclIntArray* ReadIntArray(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "int array");
    if (tok == "null") {
        return nullptr;
    }
    aclIntArray* a = new aclIntArray;
    if (tok.compare(0, 2, "a:") != 0 || !ParseList(tok.substr(2), a->values)) {
        BadToken(tok, "an int array (a:<v0,v1,...> or null)");
    }
    return a;
}

// One whitespace-free token parsed whole by strtod: a decimal or C99 hex-float literal (Python's float.hex),
// nan, inf, -inf; subnormals and values that round to 0 or overflow to inf keep strtod's result (its ERANGE is
// not an error: the token still named a double). Anything else is a read error (ReadFailed), not a silent 0
// that leaves the stream out of step with the parameters.
double ReadDouble(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "double");
    if (tok.empty()) {
        return 0.0;
    }
    char* end = nullptr;
    const double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) {
        BadToken(tok, "a double");
        return 0.0;
    }
    return v;
}

int64_t ReadInt(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "integer");
    if (tok.empty()) {
        return 0;
    }
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (end != tok.c_str() + tok.size() || errno == ERANGE) {
        BadToken(tok, "a 64-bit integer");
        return 0;
    }
    return static_cast<int64_t>(v);
}

bool ReadBool(CaseLine& line)
{
    return ReadInt(line) != 0;
}

bool ReadFailed(CaseLine& line)
{
    std::istream& in = line.in;
    std::string extra;
    if (g_readError.empty() && (in >> extra)) {
        g_readError = "unexpected token '" + extra + "' after the last parameter";
    }
    return !g_readError.empty();
}

void ReportReadError()
{
    std::cout << -1 << "\t" << "case runner: " << g_readError << std::endl;
    g_readError.clear();
}

// "null" or the text itself (no spaces)
const char* ReadString(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "string");
    if (tok == "null") {
        return nullptr;
    }
    return (new std::string(tok))->c_str();
}

const aclScalar* ReadScalar(CaseLine& line)
{
    std::istream& in = line.in;
    const std::string tok = NextToken(in, "scalar");
    if (tok.empty() || tok == "null") {
        return nullptr;
    }
    const size_t colon = tok.find(':');
    const std::string type = colon == std::string::npos ? "" : tok.substr(0, colon);
    const std::string text = colon == std::string::npos ? "" : tok.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    if (type == "float64" || type == "float32") {
        const double v = std::strtod(text.c_str(), &end);
        if (!text.empty() && end == text.c_str() + text.size()) {
            if (type == "float32") {
                float f = static_cast<float>(v);
                return aclCreateScalar(&f, ACL_FLOAT);
            }
            double d = v;
            return aclCreateScalar(&d, ACL_DOUBLE);
        }
    } else if (type == "int64" || type == "int32" || type == "bool") {
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (!text.empty() && end == text.c_str() + text.size() && errno != ERANGE) {
            if (type == "int64") {
                int64_t i = v;
                return aclCreateScalar(&i, ACL_INT64);
            }
            if (type == "int32") {
                int32_t i = static_cast<int32_t>(v);
                return aclCreateScalar(&i, ACL_INT32);
            }
            uint8_t b = v != 0 ? 1 : 0;
            return aclCreateScalar(&b, ACL_BOOL);
        }
    }
    BadToken(tok, "a scalar (<float64|float32|int64|int32|bool>:<value> or null)");
    return nullptr;
}

void ReportResult(aclnnStatus rc)
{
    const std::string& msg = opgen_host::LastAclnnError().message;
    std::cout << rc << "\t" << (rc == ACLNN_SUCCESS ? std::string() : msg) << "\t" << opgen_host::LaunchCount()
              << "\t";
    const std::vector<std::string>& attrs = opgen_host::LaunchAttrs();
    for (size_t i = 0; i < attrs.size(); ++i) {
        std::cout << (i == 0 ? "" : "\x1f") << attrs[i];
    }
    std::cout << std::endl;
    opgen_host::ClearAclnnError();
    opgen_host::LaunchCount() = 0;
    opgen_host::LaunchAttrs().clear();
}
