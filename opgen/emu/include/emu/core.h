// opgen AscendC emulation: faults, GM buffer registry with byte counters, per-core UB arena with
// poison tracking, and the thread-local core context. Our own code (docs/reference/ascendc.md §1.2, §1.11).
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace emu {

// Every fidelity violation is thrown as an EmuFault; emu::Launch catches it per core.
struct EmuFault : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Thrown by AscendC::Trap(): the kernel stopped itself (its own check failed). Not a fidelity fault: reported
// separately ("trap"), and it aborts the launch like a fault.
struct EmuTrap : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Thrown into cores waiting at a barrier when another core faulted (not reported as a fault).
struct EmuAbort : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename... A>
inline std::string Cat(const A&... a) { std::ostringstream s; (s << ... << a); return s.str(); }

// ---------------------------------------------------------------- GM
// One access of a workspace block by some core, for the race check between cores (emu/pipes.h XTouchGm): the
// core's slot (-1: none), pipe and clock, and its statement (name, file, line: static strings).
struct XAccess {
    int16_t core = -1;
    int8_t pipe = 0;
    uint32_t clock = 0;
    const char* name = "?";
    const char* file = "?";
    unsigned line = 0;
};
// An access and the bytes of the 32-B block it covers (bit i: byte i).
struct XRec {
    XAccess acc;
    uint32_t mask = 0;
};
struct XBlock {
    std::vector<XRec> w, a, r;   // the last plain writers, the kept atomic adders, the kept readers (by bytes)
};

struct GmBuffer {
    int id = 0;
    std::string name;
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
    std::atomic<uint64_t> bytesRead{0}, bytesWritten{0};
    // One flag per 32-B block: some core's DMA or scalar access has touched it in this launch, so the data is in
    // the L2 cache for a later access (docs/reference/kernel_cost.md §3, the L2 term).
    std::unique_ptr<std::atomic<uint8_t>[]> touched;
    uint64_t blocks = 0;
    // Races between cores (emu/pipes.h XTouchGm): on the workspace only (the buffer cores exchange data through),
    // per 32-B block the last plain writer, atomic adder and kept reader of any core; pages made on first touch.
    bool crossCore = false;
    std::mutex xmu;
    std::unordered_map<uint64_t, std::unique_ptr<XBlock[]>> xpages;
};

struct GmRegistry {
    std::mutex mu;
    std::vector<std::unique_ptr<GmBuffer>> bufs;
    std::mutex atomicMu;   // serialises atomic-add read-modify-writes to GM
    static GmRegistry& Get() { static GmRegistry r; return r; }
};

// Register host memory as a GM buffer (inputs, outputs, workspace, tiling). Returns its id.
inline int RegisterGm(void* ptr, uint64_t bytes, const std::string& name)
{
    auto& r = GmRegistry::Get();
    std::lock_guard<std::mutex> l(r.mu);
    auto b = std::make_unique<GmBuffer>();
    b->id = static_cast<int>(r.bufs.size());
    b->name = name;
    b->crossCore = name == "workspace";
    b->base = static_cast<uint8_t*>(ptr);
    b->bytes = bytes;
    b->blocks = (bytes + 31) / 32;
    b->touched.reset(new std::atomic<uint8_t>[b->blocks]);
    for (uint64_t i = 0; i < b->blocks; ++i) b->touched[i].store(0, std::memory_order_relaxed);
    r.bufs.push_back(std::move(b));
    return r.bufs.back()->id;
}
inline void ClearGm() { auto& r = GmRegistry::Get(); std::lock_guard<std::mutex> l(r.mu); r.bufs.clear(); }
inline void ResetGmCounters()
{
    auto& r = GmRegistry::Get();
    std::lock_guard<std::mutex> l(r.mu);
    for (auto& b : r.bufs) {
        b->bytesRead = 0;
        b->bytesWritten = 0;
        for (uint64_t i = 0; i < b->blocks; ++i) b->touched[i].store(0, std::memory_order_relaxed);
    }
}
// The registered buffer containing ptr, or nullptr.
inline GmBuffer* FindGm(const void* ptr)
{
    auto& r = GmRegistry::Get();
    std::lock_guard<std::mutex> l(r.mu);
    auto p = static_cast<const uint8_t*>(ptr);
    GmBuffer* best = nullptr;
    for (auto& b : r.bufs)
        if (p >= b->base && p < b->base + b->bytes) best = b.get();   // later registrations win
    if (!best)
        for (auto& b : r.bufs)
            if (p == b->base) best = b.get();                          // zero-sized buffer
    return best;
}

// Bytes of system workspace the framework puts in front of the user workspace (AscendC::GetUserWorkspace
// skips them; docs/reference/ascendc.md §1.3). 0 by default; a driver emulating CANN's launch sets it before
// emu::Launch (opgen check: the TilingFunc's SYS_WORKSPACE_BYTES, 16 MiB).
inline uint64_t& SysWorkspaceBytes() { static uint64_t bytes = 0; return bytes; }

// ---------------------------------------------------------------- on-chip buffers
constexpr uint64_t kBlock = 32;
constexpr uint8_t kPoisonByte = 0xA5;

// The physical on-chip buffers (docs/reference/ascendc.md §1.2). UB lives in each AIV; L1, L0A, L0B, L0C, the bias
// table and the fixpipe buffer live in each AIC (the cube side, emu/cube.h).
enum class MemKind : int { UB, L1, L0A, L0B, L0C, BT, FB };
inline const char* MemName(MemKind k)
{
    switch (k) {
    case MemKind::UB: return "UB";
    case MemKind::L1: return "L1";
    case MemKind::L0A: return "L0A";
    case MemKind::L0B: return "L0B";
    case MemKind::L0C: return "L0C";
    case MemKind::BT: return "BiasTable";
    case MemKind::FB: return "FixpipeBuffer";
    }
    return "?";
}

// Issue-cost counters of one core (docs/reference/kernel_cost.md §1): vector instruction issues (one per 255 repeats
// of an instruction, at least one), PipeBarrier calls, WaitFlag calls (one intra-core pipe hand-off each), GM
// bursts moved by DMA and their bytes rounded up to whole 32-B blocks, SyncAll calls, CrossCoreWaitFlag calls, and
// of those burst bytes the 32-B blocks some core had touched before in the launch (retouchBytes32: L2 hits when the
// launch's footprint fits the L2, docs/reference/kernel_cost.md §3).
// spanCycles: the core's time line (PipeState::tm, below): the cycle its last pipe finished, copies and compute
// overlapping only as far as the kernel's queues and flags let them (docs/design.md "Copy/compute overlap").
struct IssueCounts {
    uint64_t vecIssues = 0, barriers = 0, flagWaits = 0, bursts = 0, burstBytes32 = 0, syncAlls = 0, crossWaits = 0,
             retouchBytes32 = 0, spanCycles = 0;
};
enum class IssueKind { Barrier, FlagWait, SyncAll, CrossWait };

struct CoreContext;

// ---------------------------------------------------------------- pipe asynchrony (race detector state)
// The model and its rules are in emu/pipes.h (docs/reference/ascendc.md §1.6); these are its data.
// Pipe indices of the detector: S, V, M, MTE1, MTE2, MTE3, FIX (AscendC::pipe_t minus PIPE_ALL).
constexpr int kPipes = 7;
// One access of a 32-byte block: the issuing pipe's clock (1-based; 0 = none) and the statement (index into
// PipeState::stmts).
struct ShadowAccess {
    uint32_t clock = 0;
    int32_t stmt = -1;
};
// Shadow of one 32-byte block of an on-chip buffer (or of a GM buffer, per core): its last writer and, per pipe,
// the latest reader since; and PIPE_V's read before its latest one (an in-place vector instruction, reading then
// writing the block, is checked against the read before its own, emu/pipes.h TouchBlock).
struct BlockShadow {
    ShadowAccess w;
    int8_t wpipe = -1;
    ShadowAccess r[kPipes];
    ShadowAccess prevV;
};
// The GM shadow of one core, allocated by pages of kGmPageBlocks blocks on first touch (emu/pipes.h TouchGm).
constexpr uint64_t kGmPageBlocks = 128;
struct GmShadowPage {
    BlockShadow b[kGmPageBlocks];
};
// A statement of the kernel source: the emulated instruction's name and its call site (file basename, line).
struct Stmt {
    const char* name;
    const char* file;
    unsigned line;
    int pipe;
};
// Per-core happens-before state: vector clocks per pipe, the one-bit event flags, the statement table.
struct PipeState {
    uint32_t clk[kPipes] = {};               // instructions issued on each pipe
    uint32_t know[kPipes][kPipes] = {};      // know[p][q]: q's instructions up to this clock complete before p's next
    struct Flag {
        bool set = false;
        uint32_t tok[kPipes] = {};
        double time = 0;   // the setting pipe's time (tm) at the SetFlag
        int32_t stmt = -1;
        bool queue = false;   // set by a TQue's EnQue / FreeTensor (its event id from the pool: QueueTakeFlag)
    };
    static constexpr int kEvents = 35;
    Flag flags[kEvents][8];
    uint8_t queueHeld[kEvents] = {};   // per event: the ids the queues hold (TPipe::AllocEventID, lowest free first)
    uint8_t allocHeld[kEvents] = {};   // per event: the ids the kernel took by TPipe::AllocEventID (ReleaseEventID)
    std::vector<Stmt> stmts;
    struct Key {
        const char* file; unsigned line; const char* name;
        bool operator==(const Key& o) const { return file == o.file && line == o.line && name == o.name; }
    };
    struct KeyHash {
        size_t operator()(const Key& k) const
        {
            return std::hash<const void*>()(k.file) * 31 + k.line * 131 + std::hash<const void*>()(k.name);
        }
    };
    std::unordered_map<Key, int32_t, KeyHash> index;
    // The time line of the cost model (docs/design.md "Copy/compute overlap"): tm[p] is the cycle at which pipe p
    // has finished what was issued on it. An instruction starts when its pipe is free and after every hand-off it
    // waited for (a WaitFlag, DeQue or AllocTensor joins the producer's time, as the vector clocks join its
    // clock); a scalar wait holds every pipe. `cur`: the pipe of the last issued instruction (a DMA burst's).
    double tm[kPipes] = {};
    int cur = -1;
    // GM shadow: (buffer id, page of kGmPageBlocks 32-byte blocks from the buffer's start) -> page; only touched
    // pages exist. The last page used is cached (a copy touches consecutive blocks).
    std::unordered_map<uint64_t, std::unique_ptr<GmShadowPage>> gm;
    uint64_t gmLastKey = ~uint64_t(0);
    GmShadowPage* gmLast = nullptr;
};

// One core's on-chip buffer (UB, or on an AIC one of L1/L0A/L0B/L0C/...): data bytes plus a per-byte "written"
// map (0 = poisoned). The name UbArena is historical: every on-chip buffer uses it.
struct UbArena {
    std::vector<uint8_t> data, written;
    uint64_t used = 0;     // bump pointer of the live TPipe(s)
    uint64_t peak = 0;     // the most bytes `used` reached (what the kernel's InitBuffer calls took at once)
    MemKind kind = MemKind::UB;
    const char* name = "UB";
    const CoreContext* owner = nullptr;   // the simulated core whose buffer this is (null: not checked)
    std::vector<BlockShadow> shadow;      // per 32-byte block: the race detector's last accesses (emu/pipes.h)
    // TBufPool sharing (emu/tensor.h): per byte, the pool (1-based) whose buffer wrote it last; empty until a pool
    // is carved from this buffer. A read through another pool's buffer of those bytes is a fault (OwnedAccess).
    std::vector<uint8_t> poolOf;
    uint8_t pools = 0;                    // pools made from this memory so far (their ids are 1..pools)
    explicit UbArena(uint64_t bytes, MemKind k = MemKind::UB)
        : data(bytes, kPoisonByte), written(bytes, 0), kind(k), name(MemName(k)), shadow((bytes + kBlock - 1) / kBlock) {}
    uint64_t Size() const { return data.size(); }
    void Poison(uint64_t off, uint64_t n)
    {
        std::memset(data.data() + off, kPoisonByte, n);
        std::memset(written.data() + off, 0, n);
    }
    bool IsWritten(uint64_t off, uint64_t n) const { return n == 0 || !std::memchr(written.data() + off, 0, n); }
    void MarkWritten(uint64_t off, uint64_t n, bool w = true) { std::memset(written.data() + off, w ? 1 : 0, n); }
};
using LocalArena = UbArena;

// ---------------------------------------------------------------- cores and barrier
struct LaunchState;

// Which unit a simulated core is (docs/reference/ascendc.md §1.1: an AI Core = 1 AIC + 2 AIV on arch 2201).
enum class CoreKind : int { AIV = 0, AIC = 1 };
// How the launch was made: emu::Launch (AIV only), emu::LaunchCube (AIC only), emu::LaunchMix (1 AIC : 2 AIV).
enum class LaunchKind : int { AIV_ONLY = 0, AIC_ONLY = 1, MIX_AIC_1_2 = 2 };

struct CoreContext {
    void* tpipe = nullptr;   // the core's live AscendC::TPipe (GetTPipePtr), set by its constructor
    int64_t blockIdx = 0;
    int64_t blockNum = 1;
    uint64_t tilingKey = 0;
    int keyTests = 0;      // TILING_KEY_IS evaluations, and how many held: a kernel that tests keys but matches
    int keyMatches = 0;    // none has no binary for this key on the NPU (the launch fails there): a fault here
    bool typeByKey = false;  // a KERNEL_TASK_TYPE(key, type) of this launch's tiling key was declared (emu/mix.h)
    UbArena* ub = nullptr;
    LaunchState* launch = nullptr;
    int atomicType = 0;    // 0 none, else AtomicKind
    // mixed kernels, cube side
    CoreKind kind = CoreKind::AIV;
    LaunchKind launchKind = LaunchKind::AIV_ONLY;
    int64_t subBlockIdx = 0;   // GetSubBlockIdx(): 0/1 for the two AIVs of an AI Core in a mix launch, else 0
    int64_t subBlockNum = 1;   // GetSubBlockNum()
    int64_t taskRatio = 1;     // GetTaskRatio(): 2 on AIV in a MIX_AIC_1_2 launch, else 1
    int slot = 0;              // index of this core in its LaunchState
    std::string label;         // fault prefix: "core 3" (AIV-only launch), "AIC 1", "AIV 5"
    UbArena *l1 = nullptr, *l0a = nullptr, *l0b = nullptr, *l0c = nullptr, *bt = nullptr, *fb = nullptr;
    int arch = 2201;           // NPU arch of the simulated SoC (emu::CoreMem::arch)
    // Instruction cost counters for the roofline estimate (opgen bench; docs/reference/ascendc.md §3):
    uint64_t vecCycles = 0;    // vector unit: one cycle per 256-byte repeat, Exp/Ln/Sqrt/Div at 32 lanes/cycle
    uint64_t cubeCycles = 0;   // cube unit: one cycle per 16x16x16 fractal multiply-accumulate
    IssueCounts issue;         // issue-cost counters (docs/reference/kernel_cost.md §1)
    PipeState pipes;           // happens-before state of this core's pipes (emu/pipes.h)
    uint64_t sched = 0;        // the schedule perturbation's random state (SchedJitter; 0: not seeded yet)
};

inline CoreContext*& CurrentCorePtr() { thread_local CoreContext* c = nullptr; return c; }
inline CoreContext& Core()
{
    CoreContext* c = CurrentCorePtr();
    if (!c) throw EmuFault("AscendC device API called outside emu::Launch (no simulated core)");
    return *c;
}
// Constants of the time line, in AI Core cycles: opgen/platforms/cost.py's (docs/reference/kernel_cost.md §2;
// tests/test_cost_overlap.py checks that they agree).
constexpr double kTlHbmBytesPerCycle = 1.6e12 / 1.8e9;                 // HBM_BYTES_PER_S / CLOCK_HZ
constexpr double kTlL2BytesPerCycle = kTlHbmBytesPerCycle * 110 / 32;  // L2_BYTES_PER_S / CLOCK_HZ
constexpr double kTlBurstOverheadBytes = 256, kTlVecIssueCycles = 8, kTlBarrierCycles = 16, kTlFlagWaitCycles = 32,
                 kTlSyncAllCycles = 1800, kTlCrossWaitCycles = 900;
// The time line's share of the GM bandwidth a core's DMA gets (defined with LaunchState below).
inline double TlShare(const CoreContext& c);
// Pipe p of the calling core waits until cycle t (a hand-off from a pipe that finished then); p = S (a scalar
// wait) holds every pipe.
inline void TlJoin(int p, double t)
{
    CoreContext* c = CurrentCorePtr();
    if (!c || p < 0) return;
    for (int q = 0; q < kPipes; ++q)
        if ((q == p || p == 0) && c->pipes.tm[q] < t) c->pipes.tm[q] = t;
}
// Every pipe of the calling core at the latest one's time, plus `cost` cycles (PipeBarrier<PIPE_ALL>, SyncAll).
inline double TlAll(double cost = 0)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return 0;
    double m = 0;
    for (double t : c->pipes.tm) m = t > m ? t : m;
    for (double& t : c->pipes.tm) t = m + cost;
    return m;
}
// The core's span: the time its last pipe finished (IssueCounts::spanCycles).
inline double TlSpan(const CoreContext& c)
{
    double m = 0;
    for (double t : c.pipes.tm) m = t > m ? t : m;
    return m;
}
// Cost of one vector instruction over `elems` elements of `bytes` each: 256-byte repeats; `slow` = 2 for float
// / 4 for half of Exp, Ln, Sqrt and Div (32 lanes per cycle instead of 256 bytes; docs/reference/ascendc.md §3).
inline void CountVector(uint64_t elems, uint64_t bytes, bool slow = false)
{
    if (CoreContext* c = CurrentCorePtr()) {
        const uint64_t repeats = (elems * bytes + 255) / 256;
        const uint64_t cyc = repeats * (slow ? (bytes == 2 ? 4 : 2) : 1), issues = repeats > 255 ? (repeats + 254) / 255 : 1;
        c->vecCycles += cyc;
        c->issue.vecIssues += issues;   // repeatTimes is at most 255
        c->pipes.tm[1] += double(cyc) + double(issues) * kTlVecIssueCycles;   // PIPE_V (emu/pipes.h kPipeV)
    }
}
// One synchronisation call of `kind` on this core (docs/reference/kernel_cost.md §1).
inline void CountIssue(IssueKind kind)
{
    if (CoreContext* c = CurrentCorePtr()) {
        IssueCounts& n = c->issue;
        (kind == IssueKind::Barrier ? n.barriers : kind == IssueKind::FlagWait ? n.flagWaits
                                                : kind == IssueKind::SyncAll ? n.syncAlls : n.crossWaits) += 1;
    }
}
// One DMA burst of `bytes` GM bytes (a contiguous run; docs/reference/kernel_cost.md §1): 32-B blocks, rounded up.
inline void CountBurst(uint64_t bytes)
{
    if (CoreContext* c = CurrentCorePtr()) {
        c->issue.bursts += 1;
        c->issue.burstBytes32 += (bytes + 31) / 32 * 32;
        // on the pipe that issued it, at this core's share of the HBM bandwidth (CountBurstAt moves its L2 hits)
        c->pipes.tm[c->pipes.cur >= 0 ? c->pipes.cur : 0] += (double((bytes + 31) / 32 * 32) + kTlBurstOverheadBytes)
                                                             / (kTlHbmBytesPerCycle * TlShare(*c));
    }
}
// One DMA burst of `bytes` GM bytes at byte `off` of GM buffer `buf` (CountBurst), and the L2 record: the 32-B blocks
// of [off, off + bytes) that some core touched before in this launch count as retouched (retouchBytes32), the
// others are marked touched. The count over all cores is the same whatever order the cores run in for bursts on
// whole 32-B blocks (a burst that straddles one more block than its rounded bytes marks it touched but counts at
// most its rounded bytes as retouched, so the order can move the sum by a block a burst).
inline void CountBurstAt(GmBuffer* buf, uint64_t off, uint64_t bytes)
{
    CountBurst(bytes);
    CoreContext* c = CurrentCorePtr();
    if (!c || !buf || !buf->touched || bytes == 0) return;
    const uint64_t first = off / 32, last = std::min<uint64_t>((off + bytes + 31) / 32, buf->blocks);
    const uint64_t counted = (bytes + 31) / 32;   // the blocks CountBurst charged
    uint64_t again = 0;
    for (uint64_t b = first; b < last; ++b)
        if (buf->touched[b].exchange(1, std::memory_order_relaxed)) ++again;
    c->issue.retouchBytes32 += std::min(again, counted) * 32;
    // the time line: retouched bytes come from the L2 (docs/reference/kernel_cost.md §3, the L2 taken to hold them),
    // and so does their share of the burst's overhead, as the memory term shares it out by bytes
    const double l2 = double(std::min(again, counted) * 32), share = TlShare(*c);
    const double moved = l2 * (1.0 + kTlBurstOverheadBytes / double(counted * 32));
    c->pipes.tm[c->pipes.cur >= 0 ? c->pipes.cur : 0] -= moved / (kTlHbmBytesPerCycle * share) - moved / (kTlL2BytesPerCycle * share);
}
// Cost of one Mmad of m x n x k: 16x16x16 fractal MACs (4096 MAC/cycle per AIC, docs/reference/ascendc.md §3).
inline void CountCube(uint64_t m, uint64_t n, uint64_t k)
{
    if (CoreContext* c = CurrentCorePtr())
    {
        const uint64_t f = ((m + 15) / 16) * ((n + 15) / 16) * ((k + 15) / 16);
        c->cubeCycles += f;
        c->pipes.tm[2] += double(f);   // PIPE_M (emu/pipes.h kPipeM)
    }
}

// TILING_KEY_IS(k) (kernel_operator.h): whether the launch's tiling key is k, counted for the no-branch fault.
inline bool TilingKeyIs(uint64_t k)
{
    CoreContext& c = Core();
    ++c.keyTests;
    const bool hit = c.tilingKey == k;
    c.keyMatches += hit ? 1 : 0;
    return hit;
}

inline std::string CoreLabel(const CoreContext& c) { return c.label.empty() ? Cat("core ", c.blockIdx) : c.label; }

[[noreturn]] inline void Fault(const std::string& what)
{
    CoreContext* c = CurrentCorePtr();
    throw EmuFault(c ? Cat("[", CoreLabel(*c), "] ", what) : what);
}

template <typename W>
inline std::string Name(const W& what)
{
    if constexpr (std::is_invocable_v<W>) return what();
    else return std::string(what);
}
// An access of bytes [off, off + n) of `a` through a buffer of TBufPool `pool` (0: a buffer of the pipe's own):
// a write marks the bytes as that pool's; a read of written bytes another pool's buffer wrote last faults -- two
// pools sharing bytes (InitBufPool(p, len, shared)) hold buffers that must never be live at once, and such a read is
// what a sanitizer reports on the device (the bytes are the other buffer's data: poison to this one).
// `what` names the reading statement: a string, or a callable giving one (made only when there is a fault).
template <typename W>
inline void OwnedAccess(UbArena* a, uint64_t off, uint64_t n, uint8_t pool, bool write, const W& what)
{
    if (!a || a->poolOf.empty() || n == 0 || off >= a->poolOf.size()) return;
    if (off + n > a->poolOf.size()) n = a->poolOf.size() - off;
    if (write) { std::memset(a->poolOf.data() + off, pool, n); return; }
    for (uint64_t i = off; i < off + n; ++i) {
        const uint8_t o = a->poolOf[i];
        if (o && o != pool && a->written[i])
            Fault(Cat(Name(what), ": reads ", a->name, " byte ", i, " through a buffer of ",
                      pool ? "TBufPool " + std::to_string(pool) : std::string("no TBufPool"),
                      ", last written through a buffer of TBufPool ", int(o), " sharing it (poisoned: reused ",
                      a->name, " read after another buffer sharing its bytes was written)"));
    }
}
// Deterministic computation: set by the driver before a launch when the framework asks for deterministic
// computation (CANN's deterministic-compute setting, which TilingContext::GetDeterministic() reports; opgen check
// --deterministic). The launch then faults on two float atomic adds of different cores to the same GM bytes that
// no SyncAll or cross-core flag orders (emu/pipes.h XTouchGm): their sum would depend on the timing. Off: such adds
// commute and pass, as before.
inline bool& DeterministicAdds() { static bool on = false; return on; }

// Schedule perturbation (a test knob): with OPGEN_EMU_SCHED_SEED=<n>, n != 0, in the environment, the cores of a
// launch start together (each thread waits until all are created, emu/launch.h) and every core sleeps a
// pseudo-random 0..1023 microseconds when it starts and at each cross-core point (CrossCoreSetFlag,
// CrossCoreWaitFlag, SyncAll, an atomic add to GM), from a generator seeded by n and the core's slot: another n
// gives the cores' threads another interleaving (which core's atomic add lands first, ...). Unset or 0: no
// perturbation (the threads run as the OS schedules them, mostly in creation order). Read once per process.
inline uint64_t SchedSeed()
{
    static const uint64_t seed = [] {
        const char* e = std::getenv("OPGEN_EMU_SCHED_SEED");
        return e ? uint64_t(std::strtoull(e, nullptr, 10)) : uint64_t(0);
    }();
    return seed;
}
inline void SchedJitter()
{
    const uint64_t seed = SchedSeed();
    CoreContext* c = CurrentCorePtr();
    if (seed == 0 || !c) return;
    if (c->sched == 0) c->sched = seed * 0x9E3779B97F4A7C15ull + uint64_t(c->slot + 1) * 0xBF58476D1CE4E5B9ull;
    uint64_t z = (c->sched += 0x9E3779B97F4A7C15ull);   // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::this_thread::sleep_for(std::chrono::microseconds((z >> 8) & 1023));
}

// Seconds a core may stay blocked in SyncAll / CrossCoreWaitFlag before the wait is a fault (a backstop: the
// all-cores-blocked detection below catches real deadlocks at once).
inline double& WaitTimeoutSeconds() { static double s = 60.0; return s; }

// Blocking state of one launch: hardware barriers (SyncAll) and the cross-core flag counters
// (CrossCoreSetFlag/WaitFlag, emu/mix.h). A wait that no live core can ever satisfy is a deadlock and faults
// at once in every blocked core instead of hanging: detected when every live core is blocked on an unsatisfied
// condition (a core that returns or faults counts as gone). A core faulting aborts the launch: the others get
// EmuAbort at their next wait (not reported as a fault).
struct LaunchState {
    static constexpr int kFlags = 16;
    std::mutex mu;
    std::condition_variable cv;
    int total = 0;         // cores of the launch
    int live = 0;          // cores still running
    bool aborted = false;
    bool deadlock = false;
    std::string abortReason;
    std::string deadlockBlocked;   // "[AIV 1] CrossCoreWaitFlag(3), ..." when the deadlock was detected
    int deadlockReturned = 0;      // cores that had returned by then
    LaunchKind kind = LaunchKind::AIV_ONLY;

    // per core slot
    std::vector<CoreContext*> cores;                 // null once the core returned
    std::vector<std::string> labels;                 // "core 3" / "AIC 1" / "AIV 5"
    std::vector<char> alive;
    std::vector<const std::function<bool()>*> waiting;   // the unsatisfied condition a blocked core waits for
    std::vector<std::string> waitingOn;
    std::vector<std::array<int, kFlags>> flagCount;                    // CrossCore counters, per waiting core
    std::vector<std::array<std::array<int, kFlags>, 3>> flagPending;   // unmatched sets per [mode 0..2][flag]
    std::vector<int> aiCore;                                           // AI Core index of each slot
    std::vector<int> aicSlot;                                          // per AI Core: slot of its AIC (-1: none)
    std::vector<std::array<int, 2>> aivSlots;                          // per AI Core: slots of its AIVs (-1: none)

    // Hardware barriers: [0] all cores of the launch (SyncAll<false>), [1] the AIVs (SyncAll<true> in a mix launch).
    struct Barrier { int members = 0; int arrived = 0; uint64_t generation = 0; std::vector<uint32_t> acc[2];
                     double time[2] = {0, 0}; };   // time: the latest member's arrival (the time line), by parity
    Barrier barrier[2];
    // Happens-before between cores (emu/pipes.h XTouchGm): xknow[(i * total + j) * kPipes + q] is the clock of core
    // j's pipe q that core i knows complete. A CrossCoreSetFlag releases the setter's knowledge (its own pipes as
    // far as the set's pipe is ordered after them: a token of total * kPipes clocks), CrossCoreWaitFlag acquires
    // one token, SyncAll joins its members'. Tokens go by FIFO, one per counter increment, so a wait acquires
    // exactly what the set it consumes released and nothing of a later set of the same flag (the device's counter
    // tells the waiter only that one more set arrived): xtok[t * kFlags + f] holds core t's tokens of flag f (its
    // size is flagCount[t][f]); xset[(s * 3 + mode) * kFlags + f] core s's unmatched mode-`mode` sets of flag f
    // (its size is flagPending[s][mode][f]), each the setter's token at its set, joined with its group's when the
    // group completes (emu/mix.h Match).
    using XToken = std::vector<uint32_t>;
    std::vector<uint32_t> xknow;
    std::vector<std::deque<XToken>> xtok, xset;
    // The launch checks the order of float atomic adds of different cores (emu/pipes.h XTouchGm): set from
    // emu::DeterministicAdds() when the launch starts.
    bool deterministic = false;
    // The time line across cores (the cost model's, not an ordering): beside each token, the time line's cycle of
    // the set(s) it carries — xtokTime parallel to xtok (the set's pipe's time; a group set's: its members' latest),
    // xsetTime parallel to xset — so a wait joins the time of exactly the set it consumes (FIFO, as the tokens):
    // the same whatever order the threads run in (a single latest-set time per flag made the time line depend on
    // whether a second set was already pending when the wait came).
    std::vector<std::deque<double>> xtokTime, xsetTime;

    void Init(int n)
    {
        xknow.assign(size_t(n) * n * kPipes, 0);
        xtok.assign(size_t(n) * kFlags, {});
        xset.assign(size_t(n) * 3 * kFlags, {});
        xtokTime.assign(size_t(n) * kFlags, {});
        xsetTime.assign(size_t(n) * 3 * kFlags, {});
        for (auto& b : barrier) for (auto& a : b.acc) a.assign(size_t(n) * kPipes, 0);
        total = live = n;
        cores.assign(n, nullptr);
        labels.assign(n, "");
        alive.assign(n, 1);
        waiting.assign(n, nullptr);
        waitingOn.assign(n, "");
        flagCount.assign(n, {});
        flagPending.assign(n, {});
        aiCore.assign(n, 0);
    }

    void Abort(const std::string& why)
    {
        std::lock_guard<std::mutex> l(mu);
        if (!aborted) { aborted = true; abortReason = why; }
        cv.notify_all();
    }
    // mu held: true when no live core can make progress but some wait.
    bool StuckLocked() const
    {
        int runnable = 0, blocked = 0;
        for (size_t i = 0; i < alive.size(); ++i) {
            if (!alive[i]) continue;
            if (waiting[i] && !(*waiting[i])()) ++blocked;
            else ++runnable;
        }
        return runnable == 0 && blocked > 0;
    }
    void CheckStuckLocked()
    {
        if (!aborted && StuckLocked()) {
            deadlock = true; aborted = true; abortReason = "deadlock";
            deadlockBlocked = BlockedListLocked();   // snapshot for every blocked core's message
            deadlockReturned = total - live;
            cv.notify_all();
        }
    }
    void CoreFinished(int slot = -1)
    {
        std::lock_guard<std::mutex> l(mu);
        --live;
        if (slot >= 0 && slot < int(alive.size())) alive[slot] = 0;
        CheckStuckLocked();
        cv.notify_all();
    }
    // mu held: "[AIV 1] CrossCoreWaitFlag(3), [AIC 0] SyncAll" for the deadlock message.
    std::string BlockedListLocked() const
    {
        std::string s;
        int shown = 0, more = 0;
        for (size_t i = 0; i < alive.size(); ++i) {
            if (!alive[i] || !waiting[i]) continue;
            if (shown == 8) { ++more; continue; }
            s += Cat(shown ? ", " : "", "[", labels[i], "] ", waitingOn[i]);
            ++shown;
        }
        if (more) s += Cat(", and ", more, " more");
        return s;
    }
    // mu held (through l): block the calling core until ready() holds. Faults (in this core) on deadlock or timeout;
    // EmuAbort when another core faulted. `what` names the wait, `hint` explains a deadlock of this wait.
    void WaitLocked(std::unique_lock<std::mutex>& l, const std::function<bool()>& ready, const std::string& what,
                    const std::string& hint)
    {
        if (aborted) throw EmuAbort("launch aborted");
        if (ready()) return;
        int slot = Core().slot;
        waiting[slot] = &ready;
        waitingOn[slot] = what;
        CheckStuckLocked();
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(WaitTimeoutSeconds()));
        bool timedOut = false;
        while (!ready() && !aborted) {
            if (cv.wait_until(l, deadline) == std::cv_status::timeout && !ready() && !aborted) { timedOut = true; break; }
        }
        std::string blockedList = BlockedListLocked();
        waiting[slot] = nullptr;
        if (ready()) return;
        if (timedOut) {
            aborted = true; abortReason = "timeout"; cv.notify_all();
            Fault(Cat(what, " timed out after ", WaitTimeoutSeconds(), " s (emu::WaitTimeoutSeconds); blocked: ",
                      blockedList));
        }
        if (deadlock)
            Fault(Cat(what, " deadlock: ", hint, deadlockReturned > 0 ? Cat("; ", deadlockReturned, " core(s) returned") : "",
                      "; every live core is blocked: ", deadlockBlocked));
        throw EmuAbort("launch aborted");
    }
    // Hardware SyncAll (docs/reference/ascendc.md §1.6). aivOnly = the isAIVOnly template argument: in a mix launch the AIVs meet
    // (an AIC calling it is a fault); SyncAll<false> meets every core. In single-kind launches both meet every core.
    void SyncAll(bool aivOnly = true)
    {
        SchedJitter();
        std::unique_lock<std::mutex> l(mu);
        if (aborted) throw EmuAbort("launch aborted");
        CoreContext& c = Core();
        int b = 0;
        if (kind == LaunchKind::MIX_AIC_1_2 && aivOnly) {
            if (c.kind == CoreKind::AIC)
                Fault("SyncAll<true> (isAIVOnly) called on an AIC core of a mix kernel: use SyncAll<false>() to "
                      "synchronise AIC and AIV cores");
            b = 1;
        }
        Barrier& B = barrier[b];
        uint64_t gen = B.generation;
        // the members' knowledge joined (the caller ran PipeBarrier<PIPE_ALL>: its own row is every pipe's clock);
        // two accumulators by generation parity: one is reset only when every member has left its generation
        std::vector<uint32_t>& acc = B.acc[gen % 2];
        if (B.arrived == 0) { std::fill(acc.begin(), acc.end(), 0u); B.time[gen % 2] = 0; }
        B.time[gen % 2] = std::max(B.time[gen % 2], TlSpan(c));   // the caller ran PipeBarrier<PIPE_ALL>
        const uint32_t* mine = &xknow[size_t(c.slot) * total * kPipes];
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = std::max(acc[i], mine[i]);
        for (int q = 0; q < kPipes; ++q)
            acc[size_t(c.slot) * kPipes + q] = std::max(acc[size_t(c.slot) * kPipes + q], c.pipes.clk[q]);
        auto join = [&] {
            uint32_t* k = &xknow[size_t(c.slot) * total * kPipes];
            for (size_t i = 0; i < acc.size(); ++i) k[i] = std::max(k[i], acc[i]);
            for (double& t : c.pipes.tm) t = B.time[gen % 2] + kTlSyncAllCycles;   // every member leaves at the last arrival
        };
        if (++B.arrived == B.members) {
            B.arrived = 0; ++B.generation; cv.notify_all(); join(); return;
        }
        std::function<bool()> ready = [&B, gen] { return B.generation != gen; };
        WaitLocked(l, ready, b ? "SyncAll<true>" : "SyncAll",
                   total - live > 0 ? "another core returned without reaching this SyncAll"
                                    : "not every core reaches this SyncAll");
        join();
    }
};

// A core's share of the GM bandwidth on the time line: the HBM (or L2) rate divided among the cores of its kind that
// the launch runs (an AIV-only or AIC-only launch: all of them; a mix launch: the AICs take one share each of the AI
// Cores' count, the AIVs one each of twice that). An estimate: the launch's total bytes over the whole bandwidth
// remain the memory term of the cost model (opgen/check/cost.py), this only places each core's copies in time.
inline double TlShare(const CoreContext& c)
{
    const int n = c.launch ? c.launch->total : 1;
    if (c.launchKind != LaunchKind::MIX_AIC_1_2) return 1.0 / std::max(n, 1);
    const int cores = std::max(n / 3, 1);
    return c.kind == CoreKind::AIC ? 1.0 / cores : 0.5 / cores;
}

}  // namespace emu
