// opgen AscendC emulation: mixed (cube + vector) kernels — core kind queries, kernel type declaration, and the
// cross-core flags CrossCoreSetFlag / CrossCoreWaitFlag with real blocking semantics (docs/reference/ascendc.md
// §1.1, §1.3, §1.6). Our own code.
//
// Launch model (emu/launch.h): emu::LaunchMix(n, mem, fn) runs n AIC cores and 2n AIV cores concurrently; AI Core
// c = AIC c + AIV 2c (sub-block 0) + AIV 2c+1 (sub-block 1). emu::Launch runs AIV cores only, emu::LaunchCube AIC
// cores only.
//
// Cross-core flags (docs/reference/ascendc.md §1.6; CANN AscendC API doc "CrossCoreSetFlag(ISASI)"): every core has one counter
// per flag id. CrossCoreWaitFlag(id) blocks while its own counter is 0, then decrements it. CrossCoreSetFlag<mode,
// pipe>(id) increments counters according to the mode:
//   mode 0: all cores of the caller's kind (all AICs, or all AIVs): once every one of them has set id, each of
//           their counters goes up by 1;
//   mode 1: the two AIVs of one AI Core: once both have set id, both counters go up by 1 (AIV only, mix launch);
//   mode 2: AIC <-> its AIVs: an AIC set raises the counters of both its AIVs; once both AIVs have set id, the
//           AIC's counter goes up by 1 (mix launch);
//   mode 4 (Ascend 950 only: AIC <-> one AIV) is not emulated and faults.
// Deliberately strict (faults where hardware would hang or misbehave):
//   * flag ids outside 0..10 (CANN's CrossCoreSetFlag page allows 0-15 in modes 0/1/2, but SyncAll uses 11-14
//     itself; opgen keeps its kernels' ids below those);
//   * a flag set no wait consumed by the end of the launch (CANN: sets and waits used in pairs, undefined
//     behaviour otherwise): emu/launch.h faults naming the core and the id;
//   * a counter (or a count of unmatched sets) that would exceed 15 (CANN: "the counter of one flagId can be set
//     at most 15 times" without a matching wait);
//   * CrossCoreSetFlag with pipe PIPE_S or PIPE_ALL (not allowed by the CANN doc), or with a pipe the core kind
//     does not have (an AIV has no PIPE_M/PIPE_MTE1/PIPE_FIX, an AIC no PIPE_V);
//   * a wait that can never be satisfied: when every live core of the launch is blocked (in CrossCoreWaitFlag or
//     SyncAll) on an unsatisfied condition, each blocked core faults with "... deadlock: ..." at once; a wait
//     longer than emu::WaitTimeoutSeconds() also faults.
// Data written to GM before CrossCoreSetFlag is visible to the waiter after CrossCoreWaitFlag (the mutex of the
// launch state orders them); the pipe template argument only names the pipe the set is issued on: the flags order
// cores, not the pipes of one core, so the race detector (emu/pipes.h) takes no in-core ordering from them.
#pragma once
#include <cstdint>

#include "emu/core.h"
#include "emu/datacopy.h"

// ---------------------------------------------------------------- kernel type (docs/reference/ascendc.md §1.3)
// KERNEL_TASK_TYPE_DEFAULT(type) inside a kernel entry checks that the emulation launched the kernel as
// declared: KERNEL_TYPE_AIV_ONLY -> emu::Launch, KERNEL_TYPE_AIC_ONLY -> emu::LaunchCube,
// KERNEL_TYPE_MIX_AIC_1_2 -> emu::LaunchMix. Other mix ratios are not emulated (fault).
enum KernelMetaType : int {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_MAX
};

namespace emu {

inline const char* LaunchKindName(LaunchKind k)
{
    switch (k) {
    case LaunchKind::AIV_ONLY: return "emu::Launch (AIV only)";
    case LaunchKind::AIC_ONLY: return "emu::LaunchCube (AIC only)";
    case LaunchKind::MIX_AIC_1_2: return "emu::LaunchMix (1 AIC : 2 AIV)";
    }
    return "?";
}

inline void CheckKernelType(int type, const char* spelled, const char* macro = "KERNEL_TASK_TYPE_DEFAULT")
{
    CoreContext* c = CurrentCorePtr();
    if (!c) return;   // outside a launch (e.g. a host-side compile check): nothing to compare with
    if (c->typeByKey) return;   // KERNEL_TASK_TYPE(key, ...) of this launch's key declared the type
    LaunchKind want;
    switch (type) {
    case KERNEL_TYPE_AIV_ONLY: want = LaunchKind::AIV_ONLY; break;
    case KERNEL_TYPE_AIC_ONLY: want = LaunchKind::AIC_ONLY; break;
    case KERNEL_TYPE_MIX_AIC_1_2: want = LaunchKind::MIX_AIC_1_2; break;
    default: Fault(Cat(macro, "(", spelled, "): this kernel type is not emulated "
                       "(supported: KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_2)"));
    }
    if (want != c->launchKind)
        Fault(Cat(macro, "(", spelled, ") but the kernel was launched with ",
                  LaunchKindName(c->launchKind), "; launch it with ", LaunchKindName(want)));
}

// KERNEL_TASK_TYPE(key, type): the kernel type of tiling key `key` (CANN: ENABLE_FEATURE_FOR_COMPILE(key, type),
// asc-devkit kernel_utils_macros.h; the runtime launches that key's binary as that type). When `key` is the
// launch's tiling key it is checked as KERNEL_TASK_TYPE_DEFAULT is, and a KERNEL_TASK_TYPE_DEFAULT after it is not
// (the default is checked where it is declared: an entry declares its keys' types before the default here).
inline void CheckKernelTypeOfKey(uint64_t key, int type, const char* spelled)
{
    CoreContext* c = CurrentCorePtr();
    if (!c || c->tilingKey != key) return;
    c->typeByKey = false;
    CheckKernelType(type, Cat(key, ", ", spelled).c_str(), "KERNEL_TASK_TYPE");
    c->typeByKey = true;
}

// ASCEND_IS_AIV / ASCEND_IS_AIC: the kind of the calling simulated core. Outside a launch they keep the old
// AIV-only defaults (AIV true, AIC false).
inline bool IsAivCore() { CoreContext* c = CurrentCorePtr(); return !c || c->kind == CoreKind::AIV; }
inline bool IsAicCore() { CoreContext* c = CurrentCorePtr(); return c && c->kind == CoreKind::AIC; }

namespace mix_detail {
constexpr int kMaxFlagId = 10;     // CANN API doc, Atlas A2/A3
constexpr int kMaxCount = 15;      // CANN API doc: at most 15 sets outstanding per flag

inline const char* PipeName(int p)
{
    switch (p) {
    case AscendC::PIPE_S: return "PIPE_S"; case AscendC::PIPE_V: return "PIPE_V"; case AscendC::PIPE_M: return "PIPE_M";
    case AscendC::PIPE_MTE1: return "PIPE_MTE1"; case AscendC::PIPE_MTE2: return "PIPE_MTE2";
    case AscendC::PIPE_MTE3: return "PIPE_MTE3"; case AscendC::PIPE_ALL: return "PIPE_ALL"; case AscendC::PIPE_FIX: return "PIPE_FIX";
    }
    return "PIPE_?";
}
inline void CheckFlagId(int flag, const char* what)
{
    if (flag < 0 || flag > kMaxFlagId)
        Fault(Cat(what, ": flag id ", flag, " outside 0..", kMaxFlagId, " (Atlas A2/A3 cross-core flag range)"));
}
inline void CheckMode(int mode, const char* what)
{
    if (mode == 4) Fault(Cat(what, ": mode 4 (AIC <-> one AIV) exists only on Ascend 950 and is not emulated"));
    if (mode < 0 || mode > 2) Fault(Cat(what, ": modeId ", mode, " outside 0..2"));
}
// mu held: raise the counter of `slot` for flag f and queue the token `tok` the raise carries (LaunchState::xtok)
// with the time line's cycle `tm` of its set (LaunchState::xtokTime).
inline void Raise(LaunchState& st, int slot, int f, const LaunchState::XToken& tok, double tm, const char* what)
{
    int& c = st.flagCount[slot][f];
    if (c >= kMaxCount)
        Fault(Cat(what, ": the counter of flag ", f, " on ", st.labels[slot], " would exceed ", kMaxCount,
                  " (more sets than waits; hardware limit)"));
    ++c;
    st.xtok[size_t(slot) * LaunchState::kFlags + f].push_back(tok);
    st.xtokTime[size_t(slot) * LaunchState::kFlags + f].push_back(tm);
}
// mu held: one more unmatched mode-`mode` set of flag f by `slot`, carrying the setter's token and its time `tm`.
inline void AddPending(LaunchState& st, int slot, int mode, int f, LaunchState::XToken tok, double tm,
                       const char* what)
{
    int& p = st.flagPending[slot][mode][f];
    if (p >= kMaxCount)
        Fault(Cat(what, ": ", kMaxCount, " unmatched mode-", mode, " sets of flag ", f, " on ",
                  st.labels[slot], " (the partner core never sets it; hardware limit)"));
    ++p;
    st.xset[(size_t(slot) * 3 + mode) * LaunchState::kFlags + f].push_back(std::move(tok));
    st.xsetTime[(size_t(slot) * 3 + mode) * LaunchState::kFlags + f].push_back(tm);
}
// mu held: while every slot of `group` has an unmatched set, consume the oldest of each and raise `targets` with
// one token: the join of exactly those sets' tokens (the group's k-th completed set carries the members' k-th).
inline void Match(LaunchState& st, const std::vector<int>& group, int mode, int f, const std::vector<int>& targets,
                  const char* what)
{
    for (;;) {
        for (int s : group)
            if (st.flagPending[s][mode][f] == 0) return;
        LaunchState::XToken tok(size_t(st.total) * kPipes, 0u);
        double tm = 0;   // the group's set completes at its last member's set (the time line)
        for (int s : group) {
            --st.flagPending[s][mode][f];
            auto& q = st.xset[(size_t(s) * 3 + mode) * LaunchState::kFlags + f];
            for (size_t i = 0; i < tok.size(); ++i) tok[i] = std::max(tok[i], q.front()[i]);
            q.pop_front();
            auto& qt = st.xsetTime[(size_t(s) * 3 + mode) * LaunchState::kFlags + f];
            tm = std::max(tm, qt.front());
            qt.pop_front();
        }
        for (int t : targets) Raise(st, t, f, tok, tm, what);
    }
}
}  // namespace mix_detail

// CrossCoreSetFlag body (see the header comment for the modes).
inline void CrossCoreSet(int mode, int pipe, int flag)
{
    using namespace mix_detail;
    const char* what = "CrossCoreSetFlag";
    CoreContext& c = Core();
    CheckMode(mode, what);
    CheckFlagId(flag, what);
    if (pipe == AscendC::PIPE_S || pipe == AscendC::PIPE_ALL)
        Fault(Cat(what, "<", mode, ", ", PipeName(pipe), ">: PIPE_S and PIPE_ALL are not allowed"));
    if (c.kind == CoreKind::AIV && (pipe == AscendC::PIPE_M || pipe == AscendC::PIPE_MTE1 || pipe == AscendC::PIPE_FIX))
        Fault(Cat(what, "<", mode, ", ", PipeName(pipe), "> on an AIV core: the AIV has no ", PipeName(pipe),
                  " (use PIPE_MTE3 / PIPE_V / PIPE_MTE2)"));
    if (c.kind == CoreKind::AIC && pipe == AscendC::PIPE_V)
        Fault(Cat(what, "<", mode, ", PIPE_V> on an AIC core: the AIC has no vector pipe (use PIPE_FIX / PIPE_M / ...)"));
    LaunchState& st = *c.launch;
    SchedJitter();
    std::lock_guard<std::mutex> l(st.mu);
    if (st.aborted) throw EmuAbort("launch aborted");
    const int self = c.slot;
    const bool isMix = st.kind == LaunchKind::MIX_AIC_1_2;
    // the release (LaunchState::xknow): what this core knows of the others, and of its own pipes what `pipe` is
    // ordered after (the set runs on that pipe after its earlier work, §1.6), carried to every core it may raise
    const int kp = pipe == AscendC::PIPE_FIX ? kPipeFIX : pipe;
    LaunchState::XToken tok(st.xknow.begin() + size_t(self) * st.total * kPipes,
                            st.xknow.begin() + size_t(self + 1) * st.total * kPipes);
    for (int q = 0; q < kPipes; ++q)
        tok[size_t(self) * kPipes + q] = std::max(tok[size_t(self) * kPipes + q],
                                                  q == kp ? c.pipes.clk[q] : c.pipes.know[kp][q]);
    const double tm = c.pipes.tm[kp];   // the time line: the set's pipe's time, joined by the wait that consumes it
    if (mode == 0) {
        std::vector<int> group;   // every core of the caller's kind
        for (int s = 0; s < st.total; ++s)
            if ((st.aicSlot[st.aiCore[s]] == s) == (c.kind == CoreKind::AIC)) group.push_back(s);
        AddPending(st, self, 0, flag, std::move(tok), tm, what);
        Match(st, group, 0, flag, group, what);
    } else if (mode == 1) {
        if (!isMix || c.kind != CoreKind::AIV)
            Fault(Cat(what, "<1>: mode 1 synchronises the two AIVs of one AI Core and needs an AIV core of a mix "
                      "launch (emu::LaunchMix)"));
        const auto& pair = st.aivSlots[st.aiCore[self]];
        std::vector<int> group{pair[0], pair[1]};
        AddPending(st, self, 1, flag, std::move(tok), tm, what);
        Match(st, group, 1, flag, group, what);
    } else {
        if (!isMix)
            Fault(Cat(what, "<2>: mode 2 synchronises an AIC with its AIVs and needs a mix launch (emu::LaunchMix, "
                      "KERNEL_TYPE_MIX_AIC_1_2)"));
        const int core = st.aiCore[self];
        const auto& pair = st.aivSlots[core];
        if (c.kind == CoreKind::AIC) {
            Raise(st, pair[0], flag, tok, tm, what);
            Raise(st, pair[1], flag, tok, tm, what);
        } else {
            AddPending(st, self, 2, flag, std::move(tok), tm, what);
            Match(st, {pair[0], pair[1]}, 2, flag, {st.aicSlot[core]}, what);
        }
    }
    st.cv.notify_all();
}

// CrossCoreWaitFlag body: block while this core's counter of flag is 0, then decrement it.
inline void CrossCoreWait(int mode, int flag)
{
    using namespace mix_detail;
    const char* what = "CrossCoreWaitFlag";
    CoreContext& c = Core();
    CountIssue(IssueKind::CrossWait);
    CheckMode(mode, what);
    CheckFlagId(flag, what);
    LaunchState& st = *c.launch;
    SchedJitter();
    std::unique_lock<std::mutex> l(st.mu);
    if (st.aborted) throw EmuAbort("launch aborted");
    int& cnt = st.flagCount[c.slot][flag];
    std::function<bool()> ready = [&cnt] { return cnt > 0; };
    std::string hint;
    if (st.kind == LaunchKind::MIX_AIC_1_2)
        hint = c.kind == CoreKind::AIC
                   ? Cat("flag ", flag, " of this AIC is raised only when both its AIVs CrossCoreSetFlag<2>(", flag,
                         ") (or all AICs CrossCoreSetFlag<0>), and no core can do that any more")
                   : Cat("flag ", flag, " of this AIV is raised only by its AIC's CrossCoreSetFlag<2>(", flag,
                         ") (or mode 0/1 sets of AIVs), and no core can do that any more");
    else
        hint = Cat("no core can set flag ", flag, " for this core any more");
    st.WaitLocked(l, ready, Cat("CrossCoreWaitFlag(", flag, ")"), hint);
    --cnt;
    // the acquire: the oldest token of this flag (LaunchState::xtok), i.e. what the set this wait consumes carried
    auto& q = st.xtok[size_t(c.slot) * LaunchState::kFlags + flag];
    uint32_t* k = &st.xknow[size_t(c.slot) * st.total * kPipes];
    for (size_t i = 0; i < size_t(st.total) * kPipes; ++i) k[i] = std::max(k[i], q.front()[i]);
    q.pop_front();
    auto& qt = st.xtokTime[size_t(c.slot) * LaunchState::kFlags + flag];   // the time line: the consumed set's time
    TlJoin(kPipeS, qt.front());
    qt.pop_front();
    TlAll(kTlCrossWaitCycles);
}

}  // namespace emu

namespace AscendC {
// Cross-core synchronisation of separated-architecture cores (docs/reference/ascendc.md §1.6). modeId 0/1/2, flagId 0..10.
template <uint8_t modeId, pipe_t pipe>
inline void CrossCoreSetFlag(uint16_t flagId) { emu::CrossCoreSet(modeId, pipe, flagId); }
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
inline void CrossCoreWaitFlag(uint16_t flagId) { emu::CrossCoreWait(modeId, flagId); }
}  // namespace AscendC
