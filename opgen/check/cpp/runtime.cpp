// The aclnn case runner's reader (shared by `opgen check` and tests/test_codegen.py's differential test):
// the runner's main (opgen/check/aclnn.py harness_source) reads one call per line, runs it through the
// emitted aclnn API (compiled against opgen's host emulation, opgen/emu/include) and prints the status
// code and the first logged error message. Our own code.
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

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
    const std::string& msg = opgen_host::LastAclnnError().message;
    std::cout << rc << "\t" << (rc == ACLNN_SUCCESS ? std::string() : msg) << std::endl;
    opgen_host::ClearAclnnError();
}
