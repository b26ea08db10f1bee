// opgen AscendC emulation: pipe asynchrony as a race detector (docs/reference/ascendc.md §1.6, §1.11). Our own
// code. Every instruction still executes synchronously (the data are computed in program order); what the detector
// adds is the order the device would NOT guarantee, so a kernel missing a barrier or flag faults although its
// results here are right.
//
// The model, per simulated core (deterministic, independent of thread timing, like a thread sanitizer):
//  * Every emulated instruction is issued on one pipe (EMU.md "Pipes and races" lists which): the pipe's clock
//    advances by one per instruction.
//  * know[p][q] = c: every instruction of pipe q with clock <= c has completed before pipe p's next instruction
//    starts (a vector clock per pipe).
//  * Same pipe: MTE1, MTE2, MTE3, M, FIX and S complete in issue order (a queue each; chosen, see EMU.md); V issues
//    in order but does not complete in order (§1.6), so a V instruction is ordered after an earlier one only
//    through PipeBarrier<PIPE_V> (or a V_V flag).
//  * PipeBarrier<P>: know[P][P] = clk[P]; PipeBarrier<PIPE_ALL>: every pipe knows every pipe's clock.
//  * SetFlag<SRC_DST>(id) records a token = know[SRC] with SRC's own clock; WaitFlag<SRC_DST>(id) consumes it and
//    joins it into know[DST] (into every pipe when DST is S: the scalar unit stops, so nothing later is issued).
//    The flag is one bit (§1.6): a second SetFlag before the WaitFlag, a WaitFlag with no SetFlag, and a flag still
//    set when the kernel returns are faults.
//  * TQue hand-offs carry the same tokens: EnQue (producer pipe) -> DeQue (consumer pipe), FreeTensor (consumer)
//    -> the next AllocTensor of that buffer (producer), by queue position (tensor.h, HandOffPipes).
//  * Scalar reads (GetValue) are synchronous: the scalar unit waits for the value, so nothing issued later can
//    overtake one; scalar writes (SetValue) are posted and need S_* flags like any other pipe.
//  * Shadow memory: per 32-byte block of UB / L1 / L0A / L0B / L0C, the last writer (pipe, clock, statement) and
//    the latest reader of each pipe since (and the one before it, for an instruction reading then writing the
//    block). A read races with an unordered earlier write (RAW), a write with an unordered earlier write (WAW) or
//    read (WAR). Tensors start 32-byte aligned (§1.2), so a block is the finest unit two instructions can share
//    without touching the same bytes' neighbours; sharing a block is a conflict.
//  * GM, per core: the same shadow per 32-byte block of each GM buffer this core's DMAs touched (MTE2 reads, MTE3
//    and FIX writes), so a reload of bytes the core stored needs MTE3_MTE2 (or FIX_MTE2). Other cores' accesses
//    are not checked here; on the workspace, accesses of different cores are checked against the cross-core
//    happens-before (SyncAll, cross-core flags: XTouchGm below, EMU.md "Races between cores").
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "emu/core.h"

// The detector's functions are out of line ([[gnu::noinline]]): one copy per translation unit instead of one per
// call site keeps the emitted kernel's compile time (opgen check) close to what it was without the detector.
namespace emu {

enum PipeIdx : int { kPipeS = 0, kPipeV = 1, kPipeM = 2, kPipeMTE1 = 3, kPipeMTE2 = 4, kPipeMTE3 = 5, kPipeFIX = 6 };

inline const char* PipeLabel(int p)
{
    static const char* const n[kPipes] = {"PIPE_S", "PIPE_V", "PIPE_M", "PIPE_MTE1", "PIPE_MTE2", "PIPE_MTE3", "PIPE_FIX"};
    return p >= 0 && p < kPipes ? n[p] : "PIPE_?";
}
// HardEvent spelling of a pipe ("MTE2" in MTE2_V).
inline const char* PipeEventName(int p)
{
    static const char* const n[kPipes] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX"};
    return p >= 0 && p < kPipes ? n[p] : "?";
}

// The call site of an emulated instruction: a hidden, emulation-only trailing parameter of the device API,
// defaulted with the caller's file and line (GCC/Clang __builtin_FILE / __builtin_LINE). It converts from nothing,
// so no call that the real headers reject compiles here.
class Site {
public:
    static Site Here(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
    {
        Site s;
        s.file = file;
        s.line = line;
        return s;
    }
    const char* file = "?";
    unsigned line = 0;

private:
    Site() = default;
};

// One issued instruction: its pipe (-1: not tracked, outside a launch), clock and statement.
struct Instr {
    int pipe = -1;
    uint32_t clock = 0;
    int32_t stmt = -1;
};

inline const char* Basename(const char* f)
{
    const char* b = f;
    for (const char* p = f; *p; ++p)
        if (*p == '/' || *p == '\\') b = p + 1;
    return b;
}

[[gnu::noinline]] inline int32_t InternStmt(PipeState& ps, const char* name, const Site& s, int pipe)
{
    PipeState::Key k{s.file, s.line, name};
    auto it = ps.index.find(k);
    if (it != ps.index.end()) return it->second;
    const int32_t id = int32_t(ps.stmts.size());
    ps.stmts.push_back(Stmt{name, Basename(s.file), s.line, pipe});
    ps.index.emplace(k, id);
    return id;
}
[[gnu::noinline]] inline std::string StmtText(const PipeState& ps, int32_t id)
{
    if (id < 0 || size_t(id) >= ps.stmts.size()) return "?";
    const Stmt& s = ps.stmts[id];
    return Cat(s.name, " (", s.file, ":", s.line, ", ", PipeLabel(s.pipe), ")");
}

// Issues one instruction named `name` on pipe `pipe` (kPipe*) at call site s.
[[gnu::noinline]] inline Instr Issue(int pipe, const char* name, const Site& s)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return Instr{};
    PipeState& ps = c->pipes;
    Instr in;
    in.pipe = pipe;
    in.clock = ++ps.clk[pipe];
    in.stmt = InternStmt(ps, name, s, pipe);
    ps.cur = pipe;   // the time line charges this instruction's DMA bursts to its pipe (core.h CountBurst)
    return in;
}

// Whether the instruction of pipe `earlier` with clock `clock` completed before pipe `later`'s current one starts.
inline bool Ordered(const PipeState& ps, int later, int earlier, uint32_t clock)
{
    if (earlier == later) return later != kPipeV || ps.know[kPipeV][kPipeV] >= clock;
    return ps.know[later][earlier] >= clock;
}

// The synchronisation that orders an access of pipe `earlier` before one of pipe `later` (docs/reference/ascendc.md §1.6).
[[gnu::noinline]] inline std::string NeededSync(int earlier, int later)
{
    if (earlier == later) return Cat("PipeBarrier<", PipeLabel(later), ">");
    static const int pairs[][2] = {
        {kPipeMTE2, kPipeV}, {kPipeV, kPipeMTE2}, {kPipeMTE3, kPipeV}, {kPipeV, kPipeMTE3}, {kPipeMTE2, kPipeMTE3},
        {kPipeMTE3, kPipeMTE2}, {kPipeS, kPipeV}, {kPipeV, kPipeS}, {kPipeS, kPipeMTE2}, {kPipeMTE2, kPipeS},
        {kPipeS, kPipeMTE3}, {kPipeMTE3, kPipeS}, {kPipeMTE2, kPipeMTE1}, {kPipeMTE1, kPipeMTE2}, {kPipeMTE1, kPipeM},
        {kPipeM, kPipeMTE1}, {kPipeM, kPipeFIX}, {kPipeFIX, kPipeM}, {kPipeMTE2, kPipeFIX}, {kPipeFIX, kPipeMTE2},
        {kPipeFIX, kPipeMTE3}, {kPipeFIX, kPipeS}, {kPipeM, kPipeS}, {kPipeMTE1, kPipeFIX}, {kPipeFIX, kPipeMTE1},
        {kPipeM, kPipeV}, {kPipeV, kPipeM}, {kPipeMTE3, kPipeMTE1}, {kPipeMTE1, kPipeMTE3}, {kPipeMTE1, kPipeV},
        {kPipeMTE2, kPipeM}, {kPipeM, kPipeMTE2}, {kPipeV, kPipeMTE1}};
    for (auto& pr : pairs)
        if (pr[0] == earlier && pr[1] == later)
            return Cat("SetFlag/WaitFlag<HardEvent::", PipeEventName(earlier), "_", PipeEventName(later), ">");
    return "PipeBarrier<PIPE_ALL>";
}

// `mem` names the on-chip memory ("UB", "L1", ...); a GM buffer `gm` is named "GM tensor '<name>'" instead (its
// bytes then count from the buffer's start).
[[noreturn]] [[gnu::noinline]] inline void Race(const PipeState& ps, const char* mem, const GmBuffer* gm,
                                              uint64_t block, const Instr& now, bool nowWrite, int earlierPipe,
                                              const ShadowAccess& e, bool earlierWrite)
{
    const char* kind = nowWrite ? (earlierWrite ? "write-after-write" : "write-after-read") : "read-after-write";
    const std::string where = gm ? Cat("GM tensor '", gm->name, "'") : std::string(mem);
    Fault(Cat("race (", kind, ") on ", where, " bytes [", block * kBlock, ", ", (block + 1) * kBlock, "): ",
              StmtText(ps, now.stmt), nowWrite ? " writes" : " reads", " what ", StmtText(ps, e.stmt),
              earlierWrite ? " wrote" : " read", " with nothing ordering them: needs ", NeededSync(earlierPipe, now.pipe),
              " between them (docs/reference/ascendc.md §1.6)"));
}

// Checks instruction `in` reading or writing one 32-byte block against the block's shadow, then records it.
// A read checks the last writer (RAW); a write the last writer (WAW) and every pipe's latest reader since (WAR).
// Exact with one reader per pipe: Ordered() is monotone in the earlier clock, so the latest read of a pipe is
// ordered only if every earlier one is, and a write's earlier accesses were checked by it (happens-before is
// transitive through the tokens). The one exception is the writing instruction's own read of the block (an
// in-place Adds(t, t), a Mmad accumulating into L0C): it is no race with itself, so the pipe's read before it is
// the one to check. Only PIPE_V needs it kept (`prevV`): on every other pipe an earlier read of the same pipe is
// ordered anyway (in-order completion). `mem` / `gm` / `block` name the block in a fault (Race).
inline void TouchBlock(const PipeState& ps, BlockShadow& sh, const Instr& in, bool write, const char* mem,
                       const GmBuffer* gm, uint64_t block)
{
    if (sh.w.clock && !(sh.wpipe == in.pipe && sh.w.clock == in.clock) && !Ordered(ps, in.pipe, sh.wpipe, sh.w.clock))
        Race(ps, mem, gm, block, in, write, sh.wpipe, sh.w, true);
    if (write) {
        for (int q = 1; q < kPipes; ++q) {   // q = 0 (S): scalar reads are synchronous, never overtaken
            const ShadowAccess* r = &sh.r[q];
            if (q == in.pipe && r->clock == in.clock) {
                if (q != kPipeV) continue;   // in order: the pipe's earlier reads completed before
                r = &sh.prevV;
            }
            if (r->clock && !Ordered(ps, in.pipe, q, r->clock)) Race(ps, mem, gm, block, in, write, q, *r, false);
        }
        sh.w.clock = in.clock;
        sh.w.stmt = in.stmt;
        sh.wpipe = int8_t(in.pipe);
        for (auto& r : sh.r) r = ShadowAccess{};
        sh.prevV = ShadowAccess{};
    } else {
        ShadowAccess& r = sh.r[in.pipe];
        if (r.clock != in.clock) {   // a second touch by the same instruction keeps the read before it
            if (in.pipe == kPipeV) sh.prevV = r;
            r.clock = in.clock;
            r.stmt = in.stmt;
        }
    }
}

// Records instruction `in` reading (write = false) or writing bytes [off, off + n) of on-chip buffer a, checking
// each touched 32-byte block against its shadow first. Bounds are checked by the caller.
[[gnu::noinline]] inline void Touch(const Instr& in, UbArena* a, uint64_t off, uint64_t n, bool write)
{
    if (in.pipe < 0 || !a || n == 0 || a->shadow.empty()) return;
    const PipeState& ps = CurrentCorePtr()->pipes;
    uint64_t b0 = off / kBlock, b1 = (off + n - 1) / kBlock;
    if (b1 >= a->shadow.size()) b1 = a->shadow.size() - 1;
    for (uint64_t b = b0; b <= b1; ++b) TouchBlock(ps, a->shadow[b], in, write, a->name, nullptr, b);
}

// Races between cores on the workspace (GmBuffer::crossCore), the buffer cores exchange data through: a
// happens-before of vector clocks per (core, pipe) (LaunchState::xknow): CrossCoreSetFlag releases what its pipe is
// ordered after, CrossCoreWaitFlag acquires it (emu/mix.h), SyncAll joins its members' (LaunchState::SyncAll). Per
// byte of the workspace: a read of what another core wrote (or atomically added), a write of what another
// core wrote, added or read, with no release / acquire chain from that access to this one is a fault naming both
// statements -- the device would read stale or torn data. Independent of thread timing: whichever of two unordered
// accesses comes second faults. By byte (a 32-bit mask per record: cores writing neighbouring bytes of one block
// do not conflict); per byte the last writer, and the readers / adders not ordered before a later one of them, are
// kept, as the Kernel IR interpreter does per byte (opgen.kernel.kir_interp _Launch.gm_access).
inline bool XOrdered(const LaunchState& st, int me, const XAccess& x)
{
    if (x.core < 0 || x.core == me) return true;   // this core's own order: the per-core shadow (TouchGm)
    return st.xknow[(size_t(me) * st.total + x.core) * kPipes + x.pipe] >= x.clock;
}
[[noreturn]] [[gnu::noinline]] inline void XRace(const LaunchState& st, const PipeState& ps, const GmBuffer* buf,
                                               uint64_t block, const Instr& in, bool write, const XAccess& x,
                                               const char* kind, const char* did)
{
    const bool adds = std::strcmp(kind, "add-after-add") == 0;
    Fault(Cat("race (", kind, ") between cores on GM tensor '", buf->name, "' bytes [", block * kBlock, ", ",
              (block + 1) * kBlock, "): ", StmtText(ps, in.stmt), adds ? " adds to" : write ? " writes" : " reads",
              " what ", st.labels[x.core], "'s ", x.name, " (", x.file, ":", x.line, ", ", PipeLabel(x.pipe), ") ",
              did, " with no SyncAll or cross-core flag ordering them (a CrossCoreSetFlag orders what its pipe has "
              "completed; docs/reference/ascendc.md §1.6)",
              adds ? "; the launch is deterministic (emu::DeterministicAdds(): the framework asked for deterministic "
                     "computation) and float atomic adds in an order the timing picks round to different bits "
                     "(docs/reference/ascendc.md §1.7)"
                   : ""));
}
// Atomic adds (atomic = the AtomicKind of SetAtomicAdd, 0: none): adds of several cores commute, so an unordered
// adder of another core stays -- unless the launch is deterministic (LaunchState::deterministic, from
// emu::DeterministicAdds(): the framework asked for deterministic computation) and the adds are floating-point
// (float, half, bfloat16_t: AtomicKind 1..3): their sum then depends on the order, so two float adds of different
// cores to the same bytes with nothing ordering them are a fault (add-after-add) naming both statements.
inline bool FloatAtomic(int atomic) { return atomic >= 1 && atomic <= 3; }
[[gnu::noinline]] inline void XTouchGm(const Instr& in, GmBuffer* buf, uint64_t off, uint64_t n, bool write,
                                       int atomic)
{
    CoreContext* c = CurrentCorePtr();
    if (!c || !c->launch || c->launch->xknow.empty()) return;
    const LaunchState& st = *c->launch;
    const PipeState& ps = c->pipes;
    const int me = c->slot;
    const Stmt& sm = ps.stmts[in.stmt];
    XAccess now;
    now.core = int16_t(me);
    now.pipe = int8_t(in.pipe);
    now.clock = in.clock;
    now.name = sm.name;
    now.file = sm.file;
    now.line = sm.line;
    // drop the bytes `m` from every record of `v` (a later access supersedes them there)
    auto clear = [](std::vector<XRec>& v, uint32_t m) {
        size_t k = 0;
        for (XRec& x : v)
            if ((x.mask &= ~m) != 0) v[k++] = x;
        v.resize(k);
    };
    // keep `now` on bytes m; a record of the same role this access is ordered after gives way on those bytes
    auto keep = [&](std::vector<XRec>& v, uint32_t m) {
        size_t k = 0;
        for (XRec& x : v) {
            if (XOrdered(st, me, x.acc)) x.mask &= ~m;
            if (x.mask) v[k++] = x;
        }
        v.resize(k);
        v.push_back(XRec{now, m});
    };
    auto check = [&](const std::vector<XRec>& v, uint32_t m, uint64_t blk, const char* kind, const char* did) {
        for (const XRec& x : v)
            if ((x.mask & m) && !XOrdered(st, me, x.acc)) XRace(st, ps, buf, blk, in, write, x.acc, kind, did);
    };
    std::lock_guard<std::mutex> l(buf->xmu);
    const uint64_t b0 = off / kBlock, b1 = (off + n - 1) / kBlock;
    for (uint64_t b = b0; b <= b1; ++b) {
        std::unique_ptr<XBlock[]>& pg = buf->xpages[b / kGmPageBlocks];
        if (!pg) pg.reset(new XBlock[kGmPageBlocks]);
        XBlock& x = pg[b % kGmPageBlocks];
        const uint64_t lo = std::max(off, b * kBlock) - b * kBlock, hi = std::min(off + n, (b + 1) * kBlock) - b * kBlock;
        const uint32_t m = uint32_t(((uint64_t(1) << hi) - 1) & ~((uint64_t(1) << lo) - 1));
        const char* raw = write ? "write-after-write" : "read-after-write";
        check(x.w, m, b, raw, "wrote");
        if (!atomic) check(x.a, m, b, raw, "added");
        else if (st.deterministic && FloatAtomic(atomic))
            check(x.a, m, b, "add-after-add", "added");
        if (write) check(x.r, m, b, "write-after-read", "read");
        if (atomic) {   // adds of several cores commute (see above): an unordered adder of another core stays
            keep(x.a, m);
            clear(x.r, m);
        } else if (write) {
            clear(x.w, m);
            clear(x.a, m);
            clear(x.r, m);
            x.w.push_back(XRec{now, m});
        } else {
            keep(x.r, m);
        }
    }
}

// Records instruction `in` reading or writing bytes [off, off + n) of GM buffer `buf` (off from the buffer's start),
// on the calling core's GM shadow: per 32-byte block of the buffer (GM allocations are 32-byte aligned on the
// device), the same rules as on-chip (TouchBlock), so an MTE2 reload of bytes an MTE3 copy-out wrote needs
// MTE3_MTE2 (docs/reference/ascendc.md §1.6). Only this core's accesses are seen: other cores' GM accesses are
// ordered by SyncAll / cross-core flags and not checked here. Pages of the shadow are made on first touch.
[[gnu::noinline]] inline void TouchGm(const Instr& in, const GmBuffer* buf, uint64_t off, uint64_t n, bool write,
                                      int atomic = 0)
{
    if (in.pipe < 0 || !buf || n == 0) return;
    if (buf->crossCore) XTouchGm(in, const_cast<GmBuffer*>(buf), off, n, write, atomic);
    PipeState& ps = CurrentCorePtr()->pipes;
    const uint64_t b0 = off / kBlock, b1 = (off + n - 1) / kBlock;
    for (uint64_t b = b0; b <= b1; ++b) {
        const uint64_t key = (uint64_t(uint32_t(buf->id)) << 40) | (b / kGmPageBlocks);
        if (key != ps.gmLastKey) {
            std::unique_ptr<GmShadowPage>& pg = ps.gm[key];
            if (!pg) pg.reset(new GmShadowPage());
            ps.gmLast = pg.get();
            ps.gmLastKey = key;
        }
        TouchBlock(ps, ps.gmLast->b[b % kGmPageBlocks], in, write, "GM", buf, b);
    }
}
// Touch through a LocalTensor's arena (byte offset relative to the arena), and the TBufPool owner check of its bytes.
template <typename L>
inline void TouchT(const Instr& in, const L& t, uint64_t byteOff, uint64_t n, bool write)
{
    Touch(in, t.Arena(), byteOff, n, write);
    OwnedAccess(t.Arena(), byteOff, n, t.Pool(), write, [&] {   // TBufPool sharing (emu/core.h)
        const CoreContext* c = CurrentCorePtr();
        return c && in.stmt >= 0 ? StmtText(c->pipes, in.stmt) : std::string("an instruction");
    });
}

// A hand-off token: what the producing pipe knew, its own clock included (SetFlag, EnQue, FreeTensor).
struct Token {
    bool valid = false;
    uint32_t t[kPipes] = {};
    double time = 0;   // the producing pipe's time on the time line (PipeState::tm)
};
[[gnu::noinline]] inline Token MakeToken(int src)
{
    Token k;
    CoreContext* c = CurrentCorePtr();
    if (!c) return k;
    const PipeState& ps = c->pipes;
    k.valid = true;
    for (int q = 0; q < kPipes; ++q) k.t[q] = ps.know[src][q];
    k.t[src] = ps.clk[src];
    k.time = ps.tm[src];
    return k;
}
// Pipe `dst` waits for the token (WaitFlag, DeQue, AllocTensor). A scalar wait stops the issue of everything after.
[[gnu::noinline]] inline void JoinToken(int dst, const uint32_t* tok)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;
    PipeState& ps = c->pipes;
    for (int p = 0; p < kPipes; ++p) {
        if (p != dst && dst != kPipeS) continue;
        for (int q = 0; q < kPipes; ++q)
            if (tok[q] > ps.know[p][q]) ps.know[p][q] = tok[q];
    }
}
inline void JoinToken(int dst, const Token& k)
{
    if (!k.valid) return;
    JoinToken(dst, k.t);
    TlJoin(dst, k.time);
}

// PipeBarrier<P> (pipe = kPipe*) / PipeBarrier<PIPE_ALL> (pipe = -1).
[[gnu::noinline]] inline void BarrierOn(int pipe)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;
    PipeState& ps = c->pipes;
    if (pipe >= 0) {
        ps.know[pipe][pipe] = ps.clk[pipe];
        ps.tm[pipe] += kTlBarrierCycles;   // the time line: the pipe drains
        return;
    }
    TlAll(kTlBarrierCycles);
    for (int p = 0; p < kPipes; ++p)
        for (int q = 0; q < kPipes; ++q) ps.know[p][q] = ps.clk[q];
}

// The (src, dst) pipes of AscendC::HardEvent value e, in the enum's order (datacopy.h).
inline void EventPipes(int e, int& src, int& dst)
{
    static const int tab[PipeState::kEvents][2] = {
        {kPipeMTE2, kPipeV}, {kPipeV, kPipeMTE2}, {kPipeMTE3, kPipeV}, {kPipeV, kPipeMTE3}, {kPipeMTE2, kPipeMTE3},
        {kPipeMTE3, kPipeMTE2}, {kPipeS, kPipeV}, {kPipeV, kPipeS}, {kPipeS, kPipeMTE2}, {kPipeMTE2, kPipeS},
        {kPipeS, kPipeMTE3}, {kPipeMTE3, kPipeS}, {kPipeMTE2, kPipeMTE1}, {kPipeMTE1, kPipeMTE2}, {kPipeMTE1, kPipeM},
        {kPipeM, kPipeMTE1}, {kPipeM, kPipeFIX}, {kPipeFIX, kPipeM}, {kPipeMTE2, kPipeFIX}, {kPipeFIX, kPipeMTE2},
        {kPipeFIX, kPipeMTE3}, {kPipeFIX, kPipeS}, {kPipeM, kPipeS}, {kPipeMTE1, kPipeFIX}, {kPipeFIX, kPipeMTE1},
        {kPipeM, kPipeV}, {kPipeV, kPipeM}, {kPipeV, kPipeV}, {kPipeMTE3, kPipeMTE1}, {kPipeMTE1, kPipeMTE3},
        {kPipeMTE1, kPipeV}, {kPipeMTE2, kPipeM}, {kPipeM, kPipeMTE2}, {kPipeV, kPipeMTE1}, {kPipeFIX, kPipeFIX}};
    src = tab[e][0];
    dst = tab[e][1];
}
[[gnu::noinline]] inline std::string EventText(int e)
{
    int s, d;
    EventPipes(e, s, d);
    return Cat("HardEvent::", PipeEventName(s), "_", PipeEventName(d));
}

// SetFlag<e>(id) at site s: the one-bit flag takes SRC's token; a flag still set is a fault (the set is lost).
[[gnu::noinline]] inline void FlagSet(int e, int id, const Site& s)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;
    PipeState& ps = c->pipes;
    int src, dst;
    EventPipes(e, src, dst);
    PipeState::Flag& f = ps.flags[e][id];
    const int32_t stmt = InternStmt(ps, "SetFlag", s, src);
    if (f.set && f.queue)
        Fault(Cat("SetFlag<", EventText(e), ">(", id, ") at ", Basename(s.file), ":", s.line,
                  ": a queue holds this event id (a TQue's EnQue / FreeTensor took it from the TPipe's pool, lowest "
                  "free id first, until its DeQue / next AllocTensor); the set is lost and that wait would hang"));
    if (f.set)
        Fault(Cat("SetFlag<", EventText(e), ">(", id, ") at ", Basename(s.file), ":", s.line,
                  ": the flag is still set by the SetFlag at ", ps.stmts[f.stmt].file, ":", ps.stmts[f.stmt].line,
                  " (no WaitFlag consumed it); an event flag is one bit (docs/reference/ascendc.md §1.6), so this set "
                  "is lost and the second WaitFlag would hang"));
    const Token k = MakeToken(src);
    f.set = true;
    std::memcpy(f.tok, k.t, sizeof f.tok);
    f.time = k.time;
    f.stmt = stmt;
}
// WaitFlag<e>(id) at site s: consumes the flag and orders DST after it; no flag to consume is a hang.
[[gnu::noinline]] inline void FlagWait(int e, int id, const Site& s)
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;
    PipeState& ps = c->pipes;
    int src, dst;
    EventPipes(e, src, dst);
    PipeState::Flag& f = ps.flags[e][id];
    if (f.set && f.queue)
        Fault(Cat("WaitFlag<", EventText(e), ">(", id, ") at ", Basename(s.file), ":", s.line,
                  " consumes the flag a queue set under this event id (TQue EnQue / FreeTensor): the queue's own "
                  "wait would hang"));
    if (!f.set)
        Fault(Cat("WaitFlag<", EventText(e), ">(", id, ") at ", Basename(s.file), ":", s.line,
                  " has no earlier SetFlag<", EventText(e), ">(", id, ") to consume: PIPE_", PipeEventName(dst),
                  " would wait forever on the device (docs/reference/ascendc.md §1.6)"));
    f.set = false;
    JoinToken(dst, f.tok);
    TlJoin(dst, f.time);
    for (int q = 0; q < kPipes; ++q)   // the hand-off's cost on the waiting pipe (every pipe for a scalar wait)
        if (q == dst || dst == kPipeS) ps.tm[q] += kTlFlagWaitCycles;
}
// The HardEvent from pipe src to pipe dst, -1 when none.
[[gnu::noinline]] inline int EventOf(int src, int dst)
{
    for (int e = 0; e < PipeState::kEvents; ++e) {
        int s, d;
        EventPipes(e, s, d);
        if (s == src && d == dst) return e;
    }
    return -1;
}
// The TPipe's event-id pool of HardEvent e (docs/reference/ascendc.md §1.5-§1.6): the lowest id neither a queue
// nor an AllocEventID holds (TPipe::FetchEventID; it takes nothing). `what` names the caller (TPipe::FetchEventID,
// TPipe::AllocEventID, TQue::EnQue, TQue::FreeTensor) for the fault when all 8 are held: the device's AllocEventID
// checks that by a debug assertion only, a release build hands out an id past 7 (EMU.md "Event ids"). The Kernel-IR
// interpreter (opgen/kernel/kir_interp.py pool_free) faults with the same text.
[[gnu::noinline]] inline int PoolFree(int e, const char* what)
{
    PipeState& ps = Core().pipes;
    const unsigned held = unsigned(ps.queueHeld[e]) | unsigned(ps.allocHeld[e]);
    int id = 0;
    while (id < 8 && (held >> id & 1)) ++id;
    if (id == 8)
        Fault(Cat(what, ": all 8 ids of ", EventText(e), " are held (queues: mask ", unsigned(ps.queueHeld[e]),
                  ", AllocEventID: mask ", unsigned(ps.allocHeld[e]), "): the device's pool has no id to give "
                  "(a release build hands out one past EVENT_ID7; docs/reference/ascendc.md §1.5)"));
    return id;
}
// TPipe::AllocEventID<e>(): the pool's lowest free id, taken until ReleaseEventID.
[[gnu::noinline]] inline int PoolAlloc(int e)
{
    const int id = PoolFree(e, "TPipe::AllocEventID");
    Core().pipes.allocHeld[e] = uint8_t(Core().pipes.allocHeld[e] | (1u << id));
    return id;
}
// TPipe::ReleaseEventID<e>(id): an id AllocEventID took back to the pool; any other id is a fault.
[[gnu::noinline]] inline void PoolRelease(int e, int id)
{
    PipeState& ps = Core().pipes;
    if (id < 0 || id > 7 || !(ps.allocHeld[e] >> id & 1))
        Fault(Cat("TPipe::ReleaseEventID<", EventText(e), ">(", id, "): the id was not taken by AllocEventID"));
    if (ps.flags[e][id].set)
        Fault(Cat("TPipe::ReleaseEventID<", EventText(e), ">(", id, "): its flag is still set (no WaitFlag yet)"));
    ps.allocHeld[e] = uint8_t(ps.allocHeld[e] & ~(1u << id));
}
// A TQue's EnQue / FreeTensor (depth > 0; `what` names which): TPipe::AllocEventID's id (the lowest the pool has
// free) set; all 8 held is a fault (PoolFree).
[[gnu::noinline]] inline int QueueTakeFlag(int e, const char* what)
{
    CoreContext* c = CurrentCorePtr();
    if (!c || e < 0) return -1;
    PipeState& ps = c->pipes;
    const int id = PoolFree(e, what);
    PipeState::Flag& f = ps.flags[e][id];
    if (f.set) {
        const Stmt& st = ps.stmts[f.stmt];
        Fault(Cat("a TQue takes ", EventText(e), " id ", id, " (the lowest its pool has free) while the SetFlag at ",
                  st.file, ":", st.line, " holds that flag set: the queue's set is lost and its wait would hang"));
    }
    ps.queueHeld[e] = uint8_t(ps.queueHeld[e] | (1u << id));
    f.set = true;
    f.queue = true;
    return id;
}
// The matching DeQue / AllocTensor: the queue's flag consumed and its id released.
[[gnu::noinline]] inline void QueueWaitFlag(int e, int id)
{
    CoreContext* c = CurrentCorePtr();
    if (!c || e < 0 || id < 0) return;
    PipeState& ps = c->pipes;
    PipeState::Flag& f = ps.flags[e][id];
    if (!f.set || !f.queue)
        Fault(Cat("a TQue waits on ", EventText(e), " id ", id, " but a hand-placed WaitFlag consumed it (hang)"));
    f.set = false;
    f.queue = false;
    ps.queueHeld[e] = uint8_t(ps.queueHeld[e] & ~(1u << id));
}
// At kernel end (emu/launch.h): a flag still set was never waited for (§1.6: SetFlag and WaitFlag pair).
[[gnu::noinline]] inline void PipesAtKernelEnd()
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;
    PipeState& ps = c->pipes;
    for (int e = 0; e < PipeState::kEvents; ++e)
        for (int id = 0; id < 8; ++id)
            if (ps.flags[e][id].set && !ps.flags[e][id].queue) {
                const Stmt& st = ps.stmts[ps.flags[e][id].stmt];
                Fault(Cat("SetFlag<", EventText(e), ">(", id, ") at ", st.file, ":", st.line,
                          " is never consumed by a WaitFlag before the kernel returns: SetFlag and WaitFlag must pair "
                          "(docs/reference/ascendc.md §1.6; a later kernel on this core would see the flag set)"));
            }
}

}  // namespace emu
