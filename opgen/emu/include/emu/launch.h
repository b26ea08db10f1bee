// opgen AscendC emulation runtime: run a kernel on blockDim simulated cores (one std::thread each, own UB
// arena and core index), collect faults and GM byte counters. Our own code (issue 4; reference §1.3, §1.11).
#pragma once
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "emu/core.h"

namespace emu {

struct GmCount {
    int id;
    std::string name;
    uint64_t bytes, bytesRead, bytesWritten;
};
struct LaunchResult {
    bool ok = true;
    std::string firstFault;              // fault of the lowest-index faulting core ("" if none)
    std::vector<std::string> faults;     // one per faulting core, in core order
    std::vector<GmCount> gm;             // per registered buffer, for this launch
    uint64_t TotalRead() const { uint64_t s = 0; for (auto& g : gm) s += g.bytesRead; return s; }
    uint64_t TotalWritten() const { uint64_t s = 0; for (auto& g : gm) s += g.bytesWritten; return s; }
    const GmCount* Find(const std::string& name) const
    {
        for (auto& g : gm) if (g.name == name) return &g;
        return nullptr;
    }
};

// Runs fn() on blockDim cores concurrently; GetBlockIdx()/GetBlockNum()/TILING_KEY_IS see the core's
// values; each core gets a fresh, fully poisoned UB of ubBytes. Counters of registered GM buffers are reset
// at the start. Faults (EmuFault, or any std::exception) are caught per core; never crashes the process.
inline LaunchResult Launch(uint32_t blockDim, uint64_t ubBytes, const std::function<void()>& fn, uint64_t tilingKey = 0)
{
    LaunchResult res;
    if (blockDim == 0) { res.ok = false; res.firstFault = "Launch: blockDim 0"; res.faults.push_back(res.firstFault); return res; }
    ResetGmCounters();
    LaunchState st;
    st.live = st.total = static_cast<int>(blockDim);
    std::vector<std::string> faults(blockDim);
    std::vector<std::thread> threads;
    threads.reserve(blockDim);
    for (uint32_t c = 0; c < blockDim; ++c) {
        threads.emplace_back([&, c] {
            UbArena ub(ubBytes);
            CoreContext ctx;
            ctx.blockIdx = c;
            ctx.blockNum = blockDim;
            ctx.tilingKey = tilingKey;
            ctx.ub = &ub;
            ctx.launch = &st;
            CurrentCorePtr() = &ctx;
            try {
                fn();
            } catch (const EmuAbort&) {
                // another core faulted while this one waited at a barrier
            } catch (const EmuFault& e) {
                faults[c] = e.what();
                st.Abort(e.what());
            } catch (const std::exception& e) {
                faults[c] = Cat("[core ", c, "] unexpected exception: ", e.what());
                st.Abort(faults[c]);
            } catch (...) {
                faults[c] = Cat("[core ", c, "] unknown exception");
                st.Abort(faults[c]);
            }
            CurrentCorePtr() = nullptr;
            st.CoreFinished();
        });
    }
    for (auto& t : threads) t.join();
    for (auto& f : faults)
        if (!f.empty()) res.faults.push_back(f);
    res.ok = res.faults.empty();
    if (!res.ok) res.firstFault = res.faults.front();
    auto& reg = GmRegistry::Get();
    std::lock_guard<std::mutex> l(reg.mu);
    for (auto& b : reg.bufs) res.gm.push_back({b->id, b->name, b->bytes, b->bytesRead.load(), b->bytesWritten.load()});
    return res;
}

// One line per fact, stable for tools: "ok 1" / "fault <msg>" then "gm <name> <read> <written>".
inline void PrintReport(const LaunchResult& r, FILE* f = stdout)
{
    std::fprintf(f, "ok %d\n", r.ok ? 1 : 0);
    for (auto& m : r.faults) std::fprintf(f, "fault %s\n", m.c_str());
    for (auto& g : r.gm)
        std::fprintf(f, "gm %s %llu %llu\n", g.name.c_str(), (unsigned long long)g.bytesRead, (unsigned long long)g.bytesWritten);
}

}  // namespace emu
