// opgen AscendC emulation: DataCopy / DataCopyPad with exact units, atomic add, intra-core sync (the race
// detector's happens-before, emu/pipes.h), core queries.
// Our own code (docs/reference/ascendc.md §1.6-§1.8).
#pragma once
#include <cstdint>

#include "emu/tensor.h"

namespace AscendC {

struct DataCopyParams {
    uint16_t blockCount = 1, blockLen = 0, srcStride = 0, dstStride = 0;
    DataCopyParams() = default;
    DataCopyParams(uint16_t c, uint16_t l, uint16_t s, uint16_t d) : blockCount(c), blockLen(l), srcStride(s), dstStride(d) {}
};
struct DataCopyExtParams {
    uint16_t blockCount = 1; uint32_t blockLen = 0, srcStride = 0, dstStride = 0, rsv = 0;
    DataCopyExtParams() = default;
    DataCopyExtParams(uint16_t c, uint32_t l, uint32_t s, uint32_t d, uint32_t r)   // all five, as the real one
        : blockCount(c), blockLen(l), srcStride(s), dstStride(d), rsv(r) {}
};
template <typename T>
struct DataCopyPadExtParams {
    bool isPad = false; uint8_t leftPadding = 0, rightPadding = 0; T paddingValue{};
    DataCopyPadExtParams() = default;
    DataCopyPadExtParams(bool p, uint8_t l, uint8_t r, T v) : isPad(p), leftPadding(l), rightPadding(r), paddingValue(v) {}
};
struct DataCopyPadParams {
    bool isPad = false; uint8_t leftPadding = 0, rightPadding = 0; uint64_t paddingValue = 0;
    DataCopyPadParams() = default;
    DataCopyPadParams(bool p, uint8_t l, uint8_t r, uint64_t v) : isPad(p), leftPadding(l), rightPadding(r), paddingValue(v) {}
};

namespace emu_detail {
template <typename T> constexpr int AtomicKind()
{
    return std::is_same<T, float>::value ? 1 : std::is_same<T, half>::value ? 2 : std::is_same<T, bfloat16_t>::value ? 3
         : std::is_same<T, int32_t>::value ? 4 : std::is_same<T, int16_t>::value ? 5 : std::is_same<T, int8_t>::value ? 6 : -1;
}
inline uint64_t Up32(uint64_t n) { return (n + emu::kBlock - 1) / emu::kBlock * emu::kBlock; }

// Write n bytes of UB (poison-checked) to GM, overwriting or atomically adding.
template <typename T>
void UbToGm(uint8_t* gm, emu::GmBuffer* buf, const LocalTensor<T>& src, uint64_t ubOff, uint64_t n, const char* what,
            const emu::Instr& in)
{
    emu::UbArena* ub = src.Arena();
    if (ubOff + n > ub->Size()) emu::Fault(emu::Cat(what, ": UB read past the end of UB"));
    emu::TouchT(in, src, ubOff, n, false);
    if (emu::Core().atomicType) emu::SchedJitter();   // the schedule perturbation's point (emu/core.h)
    emu::TouchGm(in, buf, uint64_t(gm - buf->base), n, true,   // an atomic add writes too (read-modify-write)
                 emu::Core().atomicType);
    for (uint64_t i = 0; i < n; ++i)
        if (!ub->written[ubOff + i])
            emu::Fault(emu::Cat(what, ": copies unwritten (poisoned) UB byte at address ", ubOff + i,
                                " to GM tensor '", buf->name, "' byte ", (gm + i) - buf->base));
    int kind = emu::Core().atomicType;
    if (kind == 0) {
        std::memcpy(gm, ub->data.data() + ubOff, n);
    } else {
        if (kind != AtomicKind<T>())
            emu::Fault(emu::Cat(what, ": atomic add type does not match the copied element type"));
        std::lock_guard<std::mutex> l(emu::GmRegistry::Get().atomicMu);
        for (uint64_t i = 0; i + sizeof(T) <= n; i += sizeof(T)) {
            T a, b;
            std::memcpy(&a, gm + i, sizeof(T));
            std::memcpy(&b, ub->data.data() + ubOff + i, sizeof(T));
            T s;
            if constexpr (std::is_integral<T>::value) s = static_cast<T>(a + b);
            else s = T(float(a) + float(b));
            std::memcpy(gm + i, &s, sizeof(T));
        }
    }
    buf->bytesWritten += n;
    emu::CountBurstAt(buf, uint64_t(gm - buf->base), n);
}
template <typename T>
void GmToUb(const LocalTensor<T>& dst, uint64_t ubOff, const uint8_t* gm, emu::GmBuffer* buf, uint64_t n, const char* what,
            const emu::Instr& in)
{
    emu::UbArena* ub = dst.Arena();
    if (ubOff + n > ub->Size()) emu::Fault(emu::Cat(what, ": UB write past the end of UB"));
    emu::TouchT(in, dst, ubOff, n, true);
    emu::TouchGm(in, buf, uint64_t(gm - buf->base), n, false);
    std::memcpy(ub->data.data() + ubOff, gm, n);
    ub->MarkWritten(ubOff, n);
    buf->bytesRead += n;
    emu::CountBurstAt(buf, uint64_t(gm - buf->base), n);
}
template <typename T>
void CheckUbSpan(const LocalTensor<T>& t, uint64_t endByte, const char* what)
{
    if (endByte > uint64_t(t.GetSize()) * sizeof(T))
        emu::Fault(emu::Cat(what, ": UB span of ", endByte, " bytes exceeds the ", uint64_t(t.GetSize()) * sizeof(T),
                            "-byte local tensor at UB address ", t.Offset()));
}
}  // namespace emu_detail

// ---- DataCopy, contiguous count form. Stricter than hardware: count*sizeof(T) not a multiple of 32 B is a
// fault (hardware silently rounds down, which is always a bug in generated code).
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count, emu::Site site = emu::Site::Here())
{
    const emu::Instr in = emu::Issue(emu::kPipeMTE2, "DataCopy GM->UB", site);
    dst.CheckAligned("DataCopy GM->UB");
    uint64_t n = uint64_t(count) * sizeof(T);
    if (n % emu::kBlock) emu::Fault(emu::Cat("DataCopy GM->UB: count*sizeof(T) = ", n, " bytes is not a multiple of 32"));
    if (!n) return;
    emu_detail::CheckUbSpan(dst, n, "DataCopy GM->UB");
    emu_detail::GmToUb(dst, dst.Offset(), src.CheckBytes(0, n, "DataCopy GM->UB"), src.Buffer(), n, "DataCopy GM->UB", in);
}
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count, emu::Site site = emu::Site::Here())
{
    const emu::Instr in = emu::Issue(emu::kPipeMTE3, "DataCopy UB->GM", site);
    src.CheckAligned("DataCopy UB->GM");
    uint64_t n = uint64_t(count) * sizeof(T);
    if (n % emu::kBlock) emu::Fault(emu::Cat("DataCopy UB->GM: count*sizeof(T) = ", n, " bytes is not a multiple of 32"));
    if (!n) return;
    emu_detail::CheckUbSpan(src, n, "DataCopy UB->GM");
    emu_detail::UbToGm(dst.CheckBytes(0, n, "DataCopy UB->GM"), dst.Buffer(), src, src.Offset(), n, "DataCopy UB->GM", in);
}
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count, emu::Site site = emu::Site::Here())
{
    const emu::Instr in = emu::Issue(emu::kPipeV, "DataCopy UB->UB", site);   // UB -> UB runs on PIPE_V (EMU.md)
    dst.CheckAligned("DataCopy UB->UB");
    src.CheckAligned("DataCopy UB->UB");
    uint64_t n = uint64_t(count) * sizeof(T);
    if (n % emu::kBlock) emu::Fault(emu::Cat("DataCopy UB->UB: count*sizeof(T) = ", n, " bytes is not a multiple of 32"));
    emu_detail::CheckUbSpan(dst, n, "DataCopy UB->UB");
    emu_detail::CheckUbSpan(src, n, "DataCopy UB->UB");
    auto* ub = dst.Arena();
    emu::TouchT(in, src, src.Offset(), n, false);
    emu::TouchT(in, dst, dst.Offset(), n, true);
    std::memmove(ub->data.data() + dst.Offset(), ub->data.data() + src.Offset(), n);
    std::memmove(ub->written.data() + dst.Offset(), ub->written.data() + src.Offset(), n);   // poison travels
}
// ---- DataCopy with DataCopyParams: blockLen and gaps in 32-B blocks.
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p,
              emu::Site site = emu::Site::Here())
{
    const emu::Instr in = emu::Issue(emu::kPipeMTE2, "DataCopy GM->UB", site);
    dst.CheckAligned("DataCopy GM->UB");
    if (!p.blockCount || !p.blockLen) return;
    uint64_t len = uint64_t(p.blockLen) * 32, ub = 0, gm = 0;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        emu_detail::CheckUbSpan(dst, ub + len, "DataCopy GM->UB");
        emu_detail::GmToUb(dst, dst.Offset() + ub, src.CheckBytes(int64_t(gm), len, "DataCopy GM->UB"), src.Buffer(), len, "DataCopy GM->UB", in);
        ub += len + uint64_t(p.dstStride) * 32;
        gm += len + uint64_t(p.srcStride) * 32;
    }
}
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p,
              emu::Site site = emu::Site::Here())
{
    const emu::Instr in = emu::Issue(emu::kPipeMTE3, "DataCopy UB->GM", site);
    src.CheckAligned("DataCopy UB->GM");
    if (!p.blockCount || !p.blockLen) return;
    uint64_t len = uint64_t(p.blockLen) * 32, ub = 0, gm = 0;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        emu_detail::CheckUbSpan(src, ub + len, "DataCopy UB->GM");
        emu_detail::UbToGm(dst.CheckBytes(int64_t(gm), len, "DataCopy UB->GM"), dst.Buffer(), src, src.Offset() + ub, len, "DataCopy UB->GM", in);
        ub += len + uint64_t(p.srcStride) * 32;
        gm += len + uint64_t(p.dstStride) * 32;
    }
}

// ---- DataCopyPad GM->UB: blockLen BYTES, srcStride BYTES (GM gap), dstStride 32-B BLOCKS (UB gap).
// Block k lands at UB offset k*(Up32(left*sz + blockLen + right*sz) + dstStride*32), data after leftPadding
// elements. With isPad every other byte of the 32-B-rounded block gets paddingValue; without, the pad lanes
// stay unwritten (poisoned) — hardware leaves them unspecified.
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                 const DataCopyPadExtParams<T>& pad, emu::Site site = emu::Site::Here())
{
    const char* what = "DataCopyPad GM->UB";
    const emu::Instr in = emu::Issue(emu::kPipeMTE2, what, site);
    dst.CheckAligned(what);
    if (!p.blockCount || !p.blockLen) return;
    if (p.blockLen % sizeof(T)) emu::Fault(emu::Cat(what, ": blockLen ", p.blockLen, " bytes is not a multiple of sizeof(T)"));
    if (p.blockLen > 2097151) emu::Fault(emu::Cat(what, ": blockLen ", p.blockLen, " exceeds 2097151"));
    if (pad.leftPadding * sizeof(T) > 32 || pad.rightPadding * sizeof(T) > 32)
        emu::Fault(emu::Cat(what, ": left/right padding exceeds 32 bytes"));
    uint64_t left = pad.leftPadding * sizeof(T);
    uint64_t blk = emu_detail::Up32(left + p.blockLen + pad.rightPadding * sizeof(T));
    uint64_t gm = 0, ub = 0;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        emu_detail::CheckUbSpan(dst, ub + blk, what);
        emu::TouchT(in, dst, dst.Offset() + ub, blk, true);   // the padded block: the pad lanes are written too
        emu_detail::GmToUb(dst, dst.Offset() + ub + left, src.CheckBytes(int64_t(gm), p.blockLen, what), src.Buffer(), p.blockLen, what, in);
        if (pad.isPad) {
            uint64_t first = ub / sizeof(T), dataBegin = (ub + left) / sizeof(T), dataEnd = (ub + left + p.blockLen) / sizeof(T);
            for (uint64_t e = first; e < first + blk / sizeof(T); ++e)
                if (e < dataBegin || e >= dataEnd) dst.St(e, pad.paddingValue, true);
        }
        gm += p.blockLen + p.srcStride;
        ub += blk + uint64_t(p.dstStride) * 32;
    }
}
// ---- DataCopyPad UB->GM: blockLen BYTES (exactly that many written), srcStride 32-B BLOCKS (UB gap),
// dstStride BYTES (GM gap). Honours SetAtomicAdd.
template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p,
                 emu::Site site = emu::Site::Here())
{
    const char* what = "DataCopyPad UB->GM";
    const emu::Instr in = emu::Issue(emu::kPipeMTE3, what, site);
    src.CheckAligned(what);
    if (!p.blockCount || !p.blockLen) return;
    if (p.blockLen % sizeof(T)) emu::Fault(emu::Cat(what, ": blockLen ", p.blockLen, " bytes is not a multiple of sizeof(T)"));
    uint64_t blk = emu_detail::Up32(p.blockLen);
    uint64_t gm = 0, ub = 0;
    for (uint32_t b = 0; b < p.blockCount; ++b) {
        emu_detail::CheckUbSpan(src, ub + p.blockLen, what);
        emu_detail::UbToGm(dst.CheckBytes(int64_t(gm), p.blockLen, what), dst.Buffer(), src, src.Offset() + ub, p.blockLen, what, in);
        gm += p.blockLen + p.dstStride;
        ub += blk + uint64_t(p.srcStride) * 32;
    }
}
// Legacy 16-bit parameter forms (blockLen in BYTES with DataCopyPad).
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p, const DataCopyPadParams& pad,
                 emu::Site site = emu::Site::Here())
{
    T v; uint64_t raw = pad.paddingValue; std::memcpy(&v, &raw, sizeof(T));
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0),
                DataCopyPadExtParams<T>(pad.isPad, pad.leftPadding, pad.rightPadding, v), site);
}
template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p,
                 emu::Site site = emu::Site::Here())
{
    DataCopyPad(dst, src, DataCopyExtParams(p.blockCount, p.blockLen, p.srcStride, p.dstStride, 0), site);
}

// ---- atomics
template <typename T>
void SetAtomicAdd()
{
    static_assert(emu_detail::AtomicKind<T>() > 0, "SetAtomicAdd: unsupported type");
    emu::Core().atomicType = emu_detail::AtomicKind<T>();
}
inline void SetAtomicNone() { emu::Core().atomicType = 0; }
inline void DisableDmaAtomic() { SetAtomicNone(); }

// ---- synchronisation (docs/reference/ascendc.md §1.6): every instruction executes synchronously; PipeBarrier,
// SetFlag and WaitFlag feed the race detector's happens-before model (emu/pipes.h).
enum pipe_t : int { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };
// HardEvent, TEventID and event_t: emu/tensor.h (the TPipe's event-id pool uses them).

template <pipe_t p> inline void PipeBarrier(emu::Site site = emu::Site::Here())
{
    (void)site;
    emu::CountIssue(emu::IssueKind::Barrier);
    emu::BarrierOn(p == PIPE_ALL ? -1 : p == PIPE_FIX ? emu::kPipeFIX : int(p));
}
template <HardEvent e> inline void SetFlag(int32_t id, emu::Site site = emu::Site::Here())
{
    if (id < 0 || id > 7) emu::Fault(emu::Cat("SetFlag: event id ", id, " outside 0..7"));
    emu::FlagSet(int(e), id, site);
}
template <HardEvent e> inline void WaitFlag(int32_t id, emu::Site site = emu::Site::Here())
{
    if (id < 0 || id > 7) emu::Fault(emu::Cat("WaitFlag: event id ", id, " outside 0..7"));
    emu::CountIssue(emu::IssueKind::FlagWait);
    emu::FlagWait(int(e), id, site);
}

// Core indexing (docs/reference/ascendc.md §1.3). Mix launch (emu::LaunchMix, 1 AIC : 2 AIV): GetBlockNum() = number of AI Cores
// on both kinds, GetBlockIdx() in [0, n) on an AIC and [0, 2n) on an AIV, GetSubBlockIdx() = AIV index inside its
// AI Core (0 on the AIC), GetTaskRatio() = 2 on AIV / 1 on AIC. Single-kind launches: 0 and 1.
inline int64_t GetBlockIdx() { return emu::Core().blockIdx; }
// Trap (reference: AscendC "Trap", Atlas A2/A3): the kernel stops the AI Core when it detects a software
// exception; on the NPU the launch then fails, in CPU mode it is an assert. Emulated as EmuTrap: the calling core
// stops, the launch is aborted (cores waiting at a barrier or flag are released), LaunchResult::traps names it.
[[noreturn]] inline void Trap() { throw emu::EmuTrap(emu::Cat("[", emu::CoreLabel(emu::Core()), "] AscendC::Trap()")); }
inline int64_t GetBlockNum() { return emu::Core().blockNum; }
inline int64_t GetSubBlockIdx() { return emu::Core().subBlockIdx; }
inline int64_t GetSubBlockNum() { return emu::Core().subBlockNum; }
inline int64_t GetTaskRatio() { return emu::Core().taskRatio; }
inline int64_t GetTaskRation() { return GetTaskRatio(); }   // older spelling used in [TF]

// Hardware SyncAll: all cores of the launch meet here (mix launch: SyncAll<true> = the AIVs, SyncAll<false> =
// every AIC and AIV).
// In-core it is a full barrier (PipeBarrier<PIPE_ALL>), as EMU.md "Pipes and races" records.
template <bool isAIVOnly = true>
inline void SyncAll()
{
    emu::CountIssue(emu::IssueKind::SyncAll);
    emu::BarrierOn(-1);
    emu::Core().launch->SyncAll(isAIVOnly);
}

}  // namespace AscendC
