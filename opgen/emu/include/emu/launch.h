// opgen AscendC emulation runtime: run a kernel on blockDim simulated cores (one std::thread each, own UB
// arena and core index), collect faults and GM byte counters. Our own code (docs/reference/ascendc.md §1.3, §1.11).
// LaunchMix (1 AIC : 2 AIV) and LaunchCube (AIC only) with per-SoC cube buffers (CoreMem).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "emu/core.h"
#include "emu/pipes.h"

namespace emu {

struct GmCount {
    int id;
    std::string name;
    uint64_t bytes, bytesRead, bytesWritten;
};
struct LaunchResult {
    bool ok = true;
    std::string firstFault;              // fault (else trap) of the lowest-index faulting core ("" if none)
    std::vector<std::string> faults;     // one per faulting core, in core order
    std::vector<std::string> traps;      // one per core that called AscendC::Trap(), in core order
    std::vector<GmCount> gm;             // per registered buffer, for this launch
    std::vector<uint64_t> vecCycles;     // per core (launch order): vector cycles of the cost model (core.h)
    std::vector<uint64_t> cubeCycles;    // per core: cube cycles (16x16x16 fractals)
    std::vector<uint64_t> ubPeak;        // per core: the most UB bytes its TPipe(s) held at once (0 on an AIC)
    std::vector<IssueCounts> issue;      // per core: issue-cost counters (core.h IssueCounts)
    uint64_t MaxUbPeak() const { uint64_t m = 0; for (auto c : ubPeak) m = c > m ? c : m; return m; }
    uint64_t MaxVecCycles() const { uint64_t m = 0; for (auto c : vecCycles) m = c > m ? c : m; return m; }
    uint64_t MaxCubeCycles() const { uint64_t m = 0; for (auto c : cubeCycles) m = c > m ? c : m; return m; }
    uint64_t TotalRead() const { uint64_t s = 0; for (auto& g : gm) s += g.bytesRead; return s; }
    uint64_t TotalWritten() const { uint64_t s = 0; for (auto& g : gm) s += g.bytesWritten; return s; }
    const GmCount* Find(const std::string& name) const
    {
        for (auto& g : gm) if (g.name == name) return &g;
        return nullptr;
    }
};

// On-chip buffer sizes of one simulated SoC, bytes (docs/reference/ascendc.md §1.2, §3). arch 2201 = Atlas A2/A3
// (ascend910b, ascend910_93), 3510 = Ascend 950 (whose cube layouts emu/cube.h does not emulate).
struct CoreMem {
    uint64_t ub = 196608;    // per AIV
    uint64_t l1 = 524288;    // per AIC (TPosition A1/B1/C1/TSCM)
    uint64_t l0a = 65536;    // A2
    uint64_t l0b = 65536;    // B2
    uint64_t l0c = 131072;   // CO1
    uint64_t bt = 1024;      // C2 (bias table)
    uint64_t fb = 2048;      // C2PIPE2GM (fixpipe buffer)
    int arch = 2201;
    static CoreMem Ascend910B() { return CoreMem(); }
    static CoreMem Ascend950()
    {
        CoreMem m;
        m.ub = 253952; m.l0c = 262144; m.bt = 4096; m.fb = 4096; m.arch = 3510;
        return m;
    }
};

namespace detail {
// Runs the cores of one launch, one std::thread each. Slot order (= fault order) groups the AI Cores:
// mix: AIC c, AIV 2c, AIV 2c+1, ...
inline LaunchResult RunCores(LaunchKind kind, uint32_t blockDim, const CoreMem& mem, const std::function<void()>& fn,
                             uint64_t tilingKey)
{
    LaunchResult res;
    if (blockDim == 0) { res.ok = false; res.firstFault = "Launch: blockDim 0"; res.faults.push_back(res.firstFault); return res; }
    ResetGmCounters();
    struct Spec { CoreKind kind; int64_t idx; int aiCore; int sub; };
    std::vector<Spec> specs;
    for (uint32_t c = 0; c < blockDim; ++c) {
        if (kind == LaunchKind::AIV_ONLY) specs.push_back({CoreKind::AIV, c, int(c), 0});
        else if (kind == LaunchKind::AIC_ONLY) specs.push_back({CoreKind::AIC, c, int(c), 0});
        else {
            specs.push_back({CoreKind::AIC, c, int(c), 0});
            specs.push_back({CoreKind::AIV, 2 * int64_t(c), int(c), 0});
            specs.push_back({CoreKind::AIV, 2 * int64_t(c) + 1, int(c), 1});
        }
    }
    const int n = int(specs.size());
    LaunchState st;
    st.Init(n);
    st.kind = kind;
    st.deterministic = DeterministicAdds();
    st.aicSlot.assign(blockDim, -1);
    st.aivSlots.assign(blockDim, {-1, -1});
    int aivCount = 0;
    for (int i = 0; i < n; ++i) {
        st.aiCore[i] = specs[i].aiCore;
        st.labels[i] = kind == LaunchKind::AIV_ONLY ? Cat("core ", specs[i].idx)
                                                    : Cat(specs[i].kind == CoreKind::AIC ? "AIC " : "AIV ", specs[i].idx);
        if (specs[i].kind == CoreKind::AIC) st.aicSlot[specs[i].aiCore] = i;
        else { st.aivSlots[specs[i].aiCore][specs[i].sub] = i; ++aivCount; }
    }
    st.barrier[0].members = n;
    st.barrier[1].members = aivCount;
    std::vector<std::string> faults(n), traps(n);
    std::vector<uint64_t> vecCycles(n, 0), cubeCycles(n, 0), ubPeak(n, 0);
    std::vector<IssueCounts> issue(n);
    std::vector<std::thread> threads;
    threads.reserve(n);
    std::atomic<int> started{0};
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            const Spec sp = specs[i];
            CoreContext ctx;
            std::unique_ptr<UbArena> ub, l1, l0a, l0b, l0c, bt, fb;
            if (sp.kind == CoreKind::AIV) {
                ub.reset(new UbArena(mem.ub, MemKind::UB));
            } else {
                l1.reset(new UbArena(mem.l1, MemKind::L1));
                l0a.reset(new UbArena(mem.l0a, MemKind::L0A));
                l0b.reset(new UbArena(mem.l0b, MemKind::L0B));
                l0c.reset(new UbArena(mem.l0c, MemKind::L0C));
                bt.reset(new UbArena(mem.bt, MemKind::BT));
                fb.reset(new UbArena(mem.fb, MemKind::FB));
            }
            for (UbArena* a : {ub.get(), l1.get(), l0a.get(), l0b.get(), l0c.get(), bt.get(), fb.get()})
                if (a) a->owner = &ctx;
            ctx.blockIdx = sp.idx;
            ctx.blockNum = blockDim;
            ctx.tilingKey = tilingKey;
            ctx.ub = ub.get();
            ctx.l1 = l1.get(); ctx.l0a = l0a.get(); ctx.l0b = l0b.get(); ctx.l0c = l0c.get();
            ctx.bt = bt.get(); ctx.fb = fb.get();
            ctx.launch = &st;
            ctx.kind = sp.kind;
            ctx.launchKind = kind;
            ctx.slot = i;
            ctx.arch = mem.arch;
            if (kind == LaunchKind::MIX_AIC_1_2 && sp.kind == CoreKind::AIV) {
                ctx.subBlockIdx = sp.sub; ctx.subBlockNum = 2; ctx.taskRatio = 2;
            }
            ctx.label = st.labels[i];
            {
                std::lock_guard<std::mutex> l(st.mu);
                st.cores[i] = &ctx;
            }
            CurrentCorePtr() = &ctx;
            if (SchedSeed() != 0) {   // the schedule perturbation (emu/core.h): every core starts at once, then jitters
                started.fetch_add(1);
                while (started.load() < n) std::this_thread::yield();
            }
            try {
                SchedJitter();
                fn();
                PipesAtKernelEnd();   // every SetFlag consumed (emu/pipes.h)
                if (ctx.keyTests > 0 && ctx.keyMatches == 0)
                    Fault(Cat("tiling key ", ctx.tilingKey, " matched no TILING_KEY_IS test of the kernel (", ctx.keyTests,
                              " evaluated; on the NPU there is no kernel binary for it)"));
            } catch (const EmuAbort&) {
                // another core faulted while this one waited at a barrier
            } catch (const EmuTrap& e) {
                traps[i] = e.what();
                st.Abort(e.what());
            } catch (const EmuFault& e) {
                faults[i] = e.what();
                st.Abort(e.what());
            } catch (const std::exception& e) {
                faults[i] = Cat("[", ctx.label, "] unexpected exception: ", e.what());
                st.Abort(faults[i]);
            } catch (...) {
                faults[i] = Cat("[", ctx.label, "] unknown exception");
                st.Abort(faults[i]);
            }
            CurrentCorePtr() = nullptr;
            vecCycles[i] = ctx.vecCycles;
            cubeCycles[i] = ctx.cubeCycles;
            ctx.issue.spanCycles = uint64_t(TlSpan(ctx) + 0.5);   // the core's time line (core.h)
            issue[i] = ctx.issue;
            ubPeak[i] = ub ? ub->peak : 0;
            st.CoreFinished(i);
            std::lock_guard<std::mutex> l(st.mu);
            st.cores[i] = nullptr;
        });
    }
    for (auto& t : threads) t.join();
    for (auto& f : faults)
        if (!f.empty()) res.faults.push_back(f);
    // CrossCore flags balanced at kernel end: a set no wait consumed leaves a counter (or an unmatched group set)
    // behind, which CANN calls undefined behaviour (CrossCoreSetFlag: sets and waits must be used in pairs).
    if (res.faults.empty() && !st.aborted) {
        for (int i = 0; i < n; ++i) {
            for (int f = 0; f < LaunchState::kFlags; ++f) {
                if (st.flagCount[i][f] != 0)
                    res.faults.push_back(Cat("[", st.labels[i], "] CrossCore flag ", f, ": ", st.flagCount[i][f],
                                             " set(s) for this core never waited for at kernel end (each "
                                             "CrossCoreSetFlag needs its CrossCoreWaitFlag)"));
                for (int mode = 0; mode < 3; ++mode)
                    if (st.flagPending[i][mode][f] != 0)
                        res.faults.push_back(Cat("[", st.labels[i], "] CrossCore flag ", f, " (mode ", mode, "): ",
                                                 st.flagPending[i][mode][f], " set(s) whose group never completed "
                                                 "at kernel end"));
            }
        }
    }
    for (auto& t : traps)
        if (!t.empty()) res.traps.push_back(t);
    res.ok = res.faults.empty() && res.traps.empty();
    if (!res.ok) res.firstFault = res.faults.empty() ? res.traps.front() : res.faults.front();
    auto& reg = GmRegistry::Get();
    std::lock_guard<std::mutex> l(reg.mu);
    for (auto& b : reg.bufs) res.gm.push_back({b->id, b->name, b->bytes, b->bytesRead.load(), b->bytesWritten.load()});
    res.vecCycles = vecCycles;
    res.cubeCycles = cubeCycles;
    res.ubPeak = ubPeak;
    res.issue = issue;
    return res;
}
}  // namespace detail

// Runs fn() on blockDim AIV cores concurrently (KERNEL_TYPE_AIV_ONLY); GetBlockIdx()/GetBlockNum()/TILING_KEY_IS
// see the core's values; each core gets a fresh, fully poisoned UB of ubBytes and no cube buffers. Counters of
// registered GM buffers are reset at the start. Faults (EmuFault, or any std::exception) are caught per core;
// never crashes the process.
inline LaunchResult Launch(uint32_t blockDim, uint64_t ubBytes, const std::function<void()>& fn, uint64_t tilingKey = 0)
{
    CoreMem mem;
    mem.ub = ubBytes;
    return detail::RunCores(LaunchKind::AIV_ONLY, blockDim, mem, fn, tilingKey);
}

// Mixed kernel (KERNEL_TYPE_MIX_AIC_1_2, docs/reference/ascendc.md §1.1, §1.3): blockDim AI Cores = blockDim AIC cores (L1/L0
// buffers of mem, no UB) and 2*blockDim AIV cores (UB of mem.ub, no cube buffers), all running fn() concurrently;
// ASCEND_IS_AIC / ASCEND_IS_AIV tell them apart. Fault prefixes "[AIC c]" / "[AIV v]".
inline LaunchResult LaunchMix(uint32_t blockDim, const CoreMem& mem, const std::function<void()>& fn,
                              uint64_t tilingKey = 0)
{
    return detail::RunCores(LaunchKind::MIX_AIC_1_2, blockDim, mem, fn, tilingKey);
}

// Cube-only kernel (KERNEL_TYPE_AIC_ONLY): blockDim AIC cores with the L1/L0 buffers of mem.
inline LaunchResult LaunchCube(uint32_t blockDim, const CoreMem& mem, const std::function<void()>& fn,
                               uint64_t tilingKey = 0)
{
    return detail::RunCores(LaunchKind::AIC_ONLY, blockDim, mem, fn, tilingKey);
}

// One line per fact, stable for tools: "ok 1" / "fault <msg>" / "trap <msg>" then "gm <name> <read> <written>".
inline void PrintReport(const LaunchResult& r, FILE* f = stdout)
{
    std::fprintf(f, "ok %d\n", r.ok ? 1 : 0);
    for (auto& m : r.faults) std::fprintf(f, "fault %s\n", m.c_str());
    for (auto& m : r.traps) std::fprintf(f, "trap %s\n", m.c_str());
    for (auto& g : r.gm)
        std::fprintf(f, "gm %s %llu %llu\n", g.name.c_str(), (unsigned long long)g.bytesRead, (unsigned long long)g.bytesWritten);
    std::fprintf(f, "cycles %llu %llu\n", (unsigned long long)r.MaxVecCycles(), (unsigned long long)r.MaxCubeCycles());
    std::fprintf(f, "ub_peak %llu\n", (unsigned long long)r.MaxUbPeak());
}

}  // namespace emu
