// opgen check: the launch driver every op's generated driver.cpp calls (opgen/check/driver.py writes a
// main() that passes its kernel to opgen_check::Main). Our own code.
//
//   <exe> CASE_FILE OUT_DIR
//
// Reads the case (format: opgen/check/caseio.py), fills a gert::TilingContext (with the case's deterministic
// flag for GetDeterministic()) and runs the op's registered TilingFunc (linked in from op_host/<op>_tiling.cpp),
// allocates every GM buffer at its exact size (inputs with the case's bytes; outputs and workspace poisoned
// with 0xFF bytes, a NaN in every float format), registers them with emu::RegisterGm under the spec's parameter
// names plus "workspace" and "tiling",
// sets emu::SysWorkspaceBytes() and runs the kernel with emu::Launch on blockDim simulated cores (emu::LaunchMix
// on blockDim AI Cores for a mixed kernel: Main's launchKind).
// Writes OUT_DIR/report.txt (one fact per line, flushed as it goes so a crash leaves what was known;
// "end" last) and OUT_DIR/out<k>.bin (raw bytes of present output k). Exit status 0 when the report is
// complete (faults are in the report), 2 on an unreadable case file.
#pragma once
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "emu/launch.h"
#include "register/op_impl_registry.h"

#ifndef GM_ADDR
#define GM_ADDR uint8_t*  // as kernel_operator.h defines it
#endif

namespace opgen_check {

struct CaseTensor {
    bool present = false;
    int32_t dtype = ge::DT_UNDEFINED;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;  // inputs only
};

struct Case {
    int64_t aivNum = 0, aicNum = 0, ubBytes = 0, sysWorkspaceBytes = 0;
    int64_t deterministic = 0;  // the framework's deterministic flag for TilingContext::GetDeterministic()
    std::vector<CaseTensor> inputs;
    std::vector<double> attrs;
    std::vector<std::pair<uint32_t, std::vector<int64_t>>> lists;   // list attributes by OpDef index
    std::vector<std::pair<uint32_t, std::string>> strs;   // string attributes by OpDef index (GetStr)
    std::vector<CaseTensor> outputs;
};

inline size_t ElementBytes(int32_t dtype)
{
    switch (dtype) {
        case ge::DT_FLOAT: case ge::DT_INT32: return 4;
        case ge::DT_FLOAT16: case ge::DT_BF16: case ge::DT_INT16: return 2;
        case ge::DT_INT64: return 8;
        default: return 1;  // DT_INT8, DT_UINT8, DT_BOOL
    }
}

inline uint64_t Elements(const std::vector<int64_t>& dims)
{
    uint64_t n = 1;
    for (int64_t d : dims) n *= static_cast<uint64_t>(d < 0 ? 0 : d);
    return n;
}

class Reader {
public:
    explicit Reader(const char* path) : in_(path, std::ios::binary) {}
    bool Ok() const { return static_cast<bool>(in_); }
    template <typename T>
    T Get()
    {
        T v{};
        in_.read(reinterpret_cast<char*>(&v), sizeof(T));
        return v;
    }
    void Bytes(void* p, size_t n) { in_.read(static_cast<char*>(p), static_cast<std::streamsize>(n)); }

private:
    std::ifstream in_;
};

inline CaseTensor ReadTensorHead(Reader& r)
{
    CaseTensor t;
    t.present = r.Get<uint8_t>() != 0;
    t.dtype = r.Get<int32_t>();
    uint32_t rank = r.Get<uint32_t>();
    for (uint32_t i = 0; i < rank && r.Ok(); ++i) t.dims.push_back(r.Get<int64_t>());
    return t;
}

inline bool ReadCase(const char* path, Case& c)
{
    Reader r(path);
    char magic[8] = {};
    r.Bytes(magic, 8);
    if (!r.Ok() || std::memcmp(magic, "OPGCASE4", 8) != 0) return false;
    c.aivNum = r.Get<int64_t>();
    c.aicNum = r.Get<int64_t>();
    c.ubBytes = r.Get<int64_t>();
    c.sysWorkspaceBytes = r.Get<int64_t>();
    c.deterministic = r.Get<int64_t>();
    uint32_t n = r.Get<uint32_t>();
    for (uint32_t i = 0; i < n && r.Ok(); ++i) {
        CaseTensor t = ReadTensorHead(r);
        uint64_t bytes = r.Get<uint64_t>();
        if (bytes != (t.present ? Elements(t.dims) * ElementBytes(t.dtype) : 0)) return false;
        t.data.resize(bytes);
        r.Bytes(t.data.data(), bytes);
        c.inputs.push_back(std::move(t));
    }
    n = r.Get<uint32_t>();
    for (uint32_t i = 0; i < n && r.Ok(); ++i) c.attrs.push_back(r.Get<double>());
    n = r.Get<uint32_t>();
    for (uint32_t i = 0; i < n && r.Ok(); ++i) {   // list attributes (CANN's ListInt): index, length, values
        const uint32_t index = r.Get<uint32_t>();
        const uint32_t length = r.Get<uint32_t>();
        std::vector<int64_t> values;
        for (uint32_t k = 0; k < length && r.Ok(); ++k) values.push_back(r.Get<int64_t>());
        c.lists.emplace_back(index, std::move(values));
    }
    n = r.Get<uint32_t>();
    for (uint32_t i = 0; i < n && r.Ok(); ++i) {   // string attributes: index, length, text (no NUL)
        const uint32_t index = r.Get<uint32_t>();
        const uint32_t length = r.Get<uint32_t>();
        if (length > (1u << 20)) return false;
        std::string text(length, '\0');
        r.Bytes(&text[0], length);
        c.strs.emplace_back(index, std::move(text));
    }
    n = r.Get<uint32_t>();
    for (uint32_t i = 0; i < n && r.Ok(); ++i) c.outputs.push_back(ReadTensorHead(r));
    return r.Ok();
}

// A GM buffer of exactly `bytes` (512-byte aligned, like device allocations), so AddressSanitizer sees
// any access past its end.
class GmAlloc {
public:
    explicit GmAlloc(size_t bytes) : bytes_(bytes)
    {
        p_ = static_cast<uint8_t*>(::operator new(bytes ? bytes : 1, std::align_val_t(512)));
    }
    ~GmAlloc() { ::operator delete(p_, std::align_val_t(512)); }
    GmAlloc(const GmAlloc&) = delete;
    GmAlloc& operator=(const GmAlloc&) = delete;
    uint8_t* Data() const { return p_; }
    size_t Size() const { return bytes_; }

private:
    uint8_t* p_ = nullptr;
    size_t bytes_ = 0;
};

constexpr uint8_t kOutputPoison = 0xFF;  // NaN in fp32/fp16/bf16, -1 in integers

inline std::string OneLine(std::string s)
{
    for (char& ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return s;
}

// Per output, the index of the input it updates in place (the output's GM address is that input's), -1 for an
// ordinary output; empty when the op has none (SetOutputRefs of check_main.h).
inline std::vector<int>& OutputRefs()
{
    static std::vector<int> refs;
    return refs;
}

// Per input, 1 when the OpDef declares it ValueDepend (a host array): TilingFunc's GetInputTensor /
// GetOptionalInputTensor then carry its values' host address, as CANN's do; nullptr for the others. Empty when the
// op has none (SetValueDepend of check_main.h).
inline std::vector<int>& ValueDepend()
{
    static std::vector<int> flags;
    return flags;
}

using Kernel = std::function<void(const std::vector<uint8_t*>& args)>;

// How the kernel is launched: the type its entry declares with KERNEL_TASK_TYPE_DEFAULT (opgen/check/driver.py).
// AivOnly: emu::Launch on blockDim AIV cores; Mix12: emu::LaunchMix, blockDim AI Cores of 1 AIC + 2 AIV with the
// platform's UB and the Atlas A2 cube buffers (emu::CoreMem); AicOnly: emu::LaunchCube, blockDim AIC cores with
// those cube buffers.
enum class LaunchKind { AivOnly, Mix12, AicOnly };

// The driver: see the file comment. inputNames / outputNames: the spec's parameter names in OpDef order;
// kernel: calls the op's entry with (inputs..., outputs..., workspace, tiling).
inline int Main(int argc, char** argv, const char* opType, const std::vector<std::string>& inputNames,
                const std::vector<std::string>& outputNames, const Kernel& kernel,
                LaunchKind launchKind = LaunchKind::AivOnly,
                const std::vector<std::pair<uint64_t, LaunchKind>>& byKey = {})
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s CASE_FILE OUT_DIR\n", argv[0]);
        return 2;
    }
    Case c;
    if (!ReadCase(argv[1], c) || c.inputs.size() != inputNames.size() || c.outputs.size() != outputNames.size()) {
        std::fprintf(stderr, "%s: unreadable case file %s (or wrong input/output count for %s)\n", argv[0], argv[1],
                     opType);
        return 2;
    }
    const std::string outDir = argv[2];
    FILE* rep = std::fopen((outDir + "/report.txt").c_str(), "w");
    if (rep == nullptr) {
        std::fprintf(stderr, "%s: cannot write %s/report.txt\n", argv[0], outDir.c_str());
        return 2;
    }
    auto say = [&](const std::string& line) {
        std::fprintf(rep, "%s\n", line.c_str());
        std::fflush(rep);
    };

    // ---- TilingFunc
    fe::PlatFormInfos plat;
    plat.aivNum = c.aivNum;
    plat.aicNum = c.aicNum;
    plat.ubBytes = static_cast<uint64_t>(c.ubBytes);
    plat.libApiWorkspaceBytes = static_cast<uint32_t>(c.sysWorkspaceBytes);
    gert::TilingContext ctx;
    ctx.platform = &plat;
    // TilingParse first, as the graph framework runs it once per node: it fills the compile info TilingFunc reads.
    std::unique_ptr<void, void (*)(void*)> compileInfo(nullptr, [](void*) {});
    auto parse = gert::TilingParseRegistry().find(opType);
    if (parse != gert::TilingParseRegistry().end() && parse->second.parse != nullptr) {
        compileInfo = std::unique_ptr<void, void (*)(void*)>(parse->second.create(), parse->second.destroy);
        gert::TilingParseContext pctx;
        pctx.platform = &plat;
        pctx.compiledInfo = compileInfo.get();
        if (parse->second.parse(&pctx) != ge::GRAPH_SUCCESS) {
            say("tiling fail TilingParse returned GRAPH_FAILED");
            say("launch 0");
            say("end");
            std::fclose(rep);
            return 0;
        }
        ctx.compileInfo = compileInfo.get();
    }
    ctx.deterministic = c.deterministic != 0 ? 1 : 0;
    std::vector<std::unique_ptr<gert::StorageShape>> shapes;
    std::vector<std::unique_ptr<gert::Tensor>> tensors;
    std::vector<std::unique_ptr<gert::CompileTimeTensorDesc>> descs;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        auto& t = c.inputs[i];
        const bool values = i < ValueDepend().size() && ValueDepend()[i] != 0 && !t.data.empty();
        shapes.emplace_back(t.present ? new gert::StorageShape(gert::Shape(t.dims)) : nullptr);
        tensors.emplace_back(t.present ? new gert::Tensor(gert::Shape(t.dims), values ? t.data.data() : nullptr)
                                       : nullptr);
        descs.emplace_back(t.present ? new gert::CompileTimeTensorDesc(static_cast<ge::DataType>(t.dtype)) : nullptr);
        ctx.inputShapes.push_back(shapes.back().get());
        ctx.inputTensors.push_back(tensors.back().get());
        ctx.inputDescs.push_back(descs.back().get());
    }
    for (size_t i = 0; i < c.attrs.size(); ++i) ctx.attrs.Set(i, c.attrs[i]);
    for (auto& l : c.lists) ctx.attrs.SetListInt(l.first, l.second);
    for (auto& t : c.strs) ctx.attrs.SetStr(t.first, t.second);
    for (auto& t : c.outputs) {
        descs.emplace_back(new gert::CompileTimeTensorDesc(static_cast<ge::DataType>(t.dtype)));
        ctx.outputDescs.push_back(descs.back().get());
    }
    auto it = gert::TilingRegistry().find(opType);
    if (it == gert::TilingRegistry().end()) {
        say(std::string("tiling fail no TilingFunc registered for ") + opType);
        say("launch 0");
        say("end");
        std::fclose(rep);
        return 0;
    }
    if (it->second(&ctx) != ge::GRAPH_SUCCESS) {
        say("tiling fail TilingFunc returned GRAPH_FAILED");
        say("launch 0");
        say("end");
        std::fclose(rep);
        return 0;
    }
    const uint64_t wsBytes = ctx.workspace[0];
    const uint64_t tilingBytes = ctx.raw.GetDataSize();
    say("tiling ok");
    say("block_dim " + std::to_string(ctx.blockDim));
    say("tiling_key " + std::to_string(ctx.tilingKey));
    say("workspace_bytes " + std::to_string(wsBytes));
    say("tiling_bytes " + std::to_string(tilingBytes));
    if (const char* only = std::getenv("OPGEN_CHECK_TILING_ONLY"); only != nullptr && only[0] == '1') {
        // the tiling probe (opgen/check/build.py "asan/probe"): the key picks the kernel build; nothing launched
        say("launch 0");
        say("end");
        std::fclose(rep);
        return 0;
    }
    if (wsBytes < static_cast<uint64_t>(c.sysWorkspaceBytes)) {
        say("launch 0");
        say("fault TilingFunc: workspace size " + std::to_string(wsBytes) + " bytes is smaller than the " +
            std::to_string(c.sysWorkspaceBytes) + " bytes of system workspace");
        say("end");
        std::fclose(rep);
        return 0;
    }

    // ---- GM buffers
    std::vector<std::unique_ptr<GmAlloc>> bufs;
    std::vector<uint8_t*> args;
    emu::ClearGm();
    std::vector<GmAlloc*> inBufs(c.inputs.size(), nullptr);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
        auto& t = c.inputs[i];
        if (!t.present) {
            args.push_back(nullptr);
            continue;
        }
        bufs.emplace_back(new GmAlloc(t.data.size()));
        if (!t.data.empty()) std::memcpy(bufs.back()->Data(), t.data.data(), t.data.size());
        emu::RegisterGm(bufs.back()->Data(), t.data.size(), inputNames[i]);
        inBufs[i] = bufs.back().get();
        args.push_back(bufs.back()->Data());
    }
    std::vector<GmAlloc*> outs(c.outputs.size(), nullptr);
    for (size_t i = 0; i < c.outputs.size(); ++i) {
        auto& t = c.outputs[i];
        if (!t.present) {
            args.push_back(nullptr);
            continue;
        }
        const size_t bytes = Elements(t.dims) * ElementBytes(t.dtype);
        const int ref = i < OutputRefs().size() ? OutputRefs()[i] : -1;
        if (ref >= 0) {   // written in place: the input's buffer (same bytes), read back as this output
            GmAlloc* in = static_cast<size_t>(ref) < inBufs.size() ? inBufs[ref] : nullptr;
            if (in == nullptr || in->Size() != bytes) {
                say("launch 0");
                say("fault driver: output " + outputNames[i] + " is written in place into input " +
                    (static_cast<size_t>(ref) < inputNames.size() ? inputNames[ref] : std::string("?")) +
                    ", which is absent or of another size");
                say("end");
                std::fclose(rep);
                return 0;
            }
            outs[i] = in;
            args.push_back(in->Data());
            continue;
        }
        bufs.emplace_back(new GmAlloc(bytes));
        std::memset(bufs.back()->Data(), kOutputPoison, bytes);
        emu::RegisterGm(bufs.back()->Data(), bytes, outputNames[i]);
        outs[i] = bufs.back().get();
        args.push_back(bufs.back()->Data());
    }
    bufs.emplace_back(new GmAlloc(wsBytes));
    std::memset(bufs.back()->Data(), kOutputPoison, wsBytes);
    emu::RegisterGm(bufs.back()->Data(), wsBytes, "workspace");
    args.push_back(bufs.back()->Data());
    bufs.emplace_back(new GmAlloc(tilingBytes));
    std::memcpy(bufs.back()->Data(), ctx.raw.GetData(), tilingBytes);
    emu::RegisterGm(bufs.back()->Data(), tilingBytes, "tiling");
    args.push_back(bufs.back()->Data());
    emu::SysWorkspaceBytes() = static_cast<uint64_t>(c.sysWorkspaceBytes);
    // the framework's deterministic-computation setting also tells the emulation to check that float atomic adds
    // of different cores are ordered (emu::DeterministicAdds, opgen/emu/include/EMU.md)
    emu::DeterministicAdds() = c.deterministic != 0;

    // ---- launch
    say("launch 1");
    emu::LaunchResult res;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& kk : byKey) {   // the entry's KERNEL_TASK_TYPE(key, type) of this launch's tiling key
        if (kk.first == ctx.tilingKey) launchKind = kk.second;
    }
    if (launchKind == LaunchKind::Mix12) {
        emu::CoreMem mem = emu::CoreMem::Ascend910B();
        mem.ub = static_cast<uint64_t>(c.ubBytes);
        res = emu::LaunchMix(ctx.blockDim, mem, [&] { kernel(args); }, ctx.tilingKey);
    } else if (launchKind == LaunchKind::AicOnly) {
        emu::CoreMem mem = emu::CoreMem::Ascend910B();
        mem.ub = static_cast<uint64_t>(c.ubBytes);
        res = emu::LaunchCube(ctx.blockDim, mem, [&] { kernel(args); }, ctx.tilingKey);
    } else {
        res = emu::Launch(ctx.blockDim, static_cast<uint64_t>(c.ubBytes), [&] { kernel(args); }, ctx.tilingKey);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    say(std::string("ok ") + (res.ok ? "1" : "0"));
    say("seconds " + std::to_string(seconds));
    say("cycles " + std::to_string(res.MaxVecCycles()) + " " + std::to_string(res.MaxCubeCycles()));
    say("ub_peak " + std::to_string(res.MaxUbPeak()));
    for (size_t i = 0; i < res.issue.size(); ++i) {   // issue-cost counters per core (docs/reference/kernel_cost.md §1)
        const emu::IssueCounts& n = res.issue[i];
        std::string line = "core_cost " + std::to_string(i);
        for (uint64_t v : {res.vecCycles[i], res.cubeCycles[i], n.vecIssues, n.barriers, n.flagWaits, n.bursts,
                           n.burstBytes32, n.syncAlls, n.crossWaits, n.retouchBytes32, n.spanCycles})
            line += " " + std::to_string(v);
        say(line);
    }
    for (auto& f : res.faults) say("fault " + OneLine(f));
    for (auto& t : res.traps) say("trap " + OneLine(t));
    for (auto& g : res.gm)
        say("gm " + g.name + " " + std::to_string(g.bytes) + " " + std::to_string(g.bytesRead) + " " +
            std::to_string(g.bytesWritten));
    for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] == nullptr) continue;
        const std::string path = outDir + "/out" + std::to_string(i) + ".bin";
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(outs[i]->Data()), static_cast<std::streamsize>(outs[i]->Size()));
        if (!f) say("fault driver: cannot write " + path);
    }
    say("end");
    std::fclose(rep);
    emu::ClearGm();
    return 0;
}

}  // namespace opgen_check
