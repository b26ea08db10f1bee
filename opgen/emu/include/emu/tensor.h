// opgen AscendC emulation: GlobalTensor, LocalTensor, TPipe, TQue, TBuf (docs/reference/ascendc.md §1.4, §1.5).
// Our own code (per-position buffers UB / L1 / L0A / L0B / L0C for the cube side).
#pragma once
#include <cstdint>
#include <deque>
#include <type_traits>
#include <vector>

#include "emu/core.h"
#include "emu/pipes.h"
#include "emu/types.h"

namespace AscendC {

using ::half;
using ::bfloat16_t;

enum class TPosition : int32_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM, TSCM, C2PIPE2GM, MAX };
using QuePosition = TPosition;

template <typename T> class LocalTensor;

// ---------------------------------------------------------------- GlobalTensor
// Every access is bounds-checked against the registered GM buffer the pointer lies in
// (not against the count given to SetGlobalBuffer, which kernels use loosely).
template <typename T>
class GlobalTensor {
public:
    using PrimType = T;
    GlobalTensor() = default;
    void SetGlobalBuffer(T* ptr, uint64_t count = 0)
    {
        ptr_ = ptr;
        size_ = count;
        buf_ = ptr ? emu::FindGm(ptr) : nullptr;
        if (ptr && !buf_)
            emu::Fault(emu::Cat("SetGlobalBuffer: pointer ", static_cast<const void*>(ptr),
                                " is not inside any registered GM buffer"));
    }
    GlobalTensor operator[](uint64_t off) const
    {
        GlobalTensor g(*this);
        g.ptr_ = ptr_ + off;
        g.size_ = size_ > off ? size_ - off : 0;
        return g;
    }
    T* GetPhyAddr() const { return ptr_; }
    T* GetPhyAddr(uint64_t off) const { return ptr_ + off; }
    uint64_t GetSize() const { return size_; }
    void SetSize(uint64_t n) { size_ = n; }

    T GetValue(uint64_t i) const
    {
        uint8_t* p = Check(int64_t(i), 1, "GetValue");
        T v; std::memcpy(&v, p, sizeof(T));
        buf_->bytesRead += sizeof(T);
        emu::CountBurstAt(buf_, uint64_t(p - buf_->base), sizeof(T));   // a scalar GM access is one burst (§1)
        return v;
    }
    void SetValue(uint64_t i, T v) const
    {
        uint8_t* p = Check(int64_t(i), 1, "SetValue");
        std::memcpy(p, &v, sizeof(T));
        buf_->bytesWritten += sizeof(T);
        emu::CountBurstAt(buf_, uint64_t(p - buf_->base), sizeof(T));
    }

    // Emulator internals: address of element i (relative to this view) for n elements, bounds-checked.
    uint8_t* Check(int64_t i, uint64_t n, const char* what) const
    {
        if (!buf_)
            emu::Fault(emu::Cat(what, ": GM tensor has no registered buffer (null or unset GlobalTensor)"));
        int64_t byteOff = (reinterpret_cast<const uint8_t*>(ptr_) - buf_->base) + i * int64_t(sizeof(T));
        int64_t end = byteOff + int64_t(n * sizeof(T));
        if (byteOff < 0 || end > int64_t(buf_->bytes))
            emu::Fault(emu::Cat(what, ": GM out of range on tensor '", buf_->name, "' (buffer #", buf_->id,
                                "): element offset ", byteOff / int64_t(sizeof(T)), " (byte ", byteOff, ", ",
                                n * sizeof(T), " bytes) outside buffer of ", buf_->bytes, " bytes"));
        return buf_->base + byteOff;
    }
    // Bounds-checked byte range [byteOff, byteOff+n) relative to this view.
    uint8_t* CheckBytes(int64_t byteOff, uint64_t n, const char* what) const
    {
        if (!buf_)
            emu::Fault(emu::Cat(what, ": GM tensor has no registered buffer (null or unset GlobalTensor)"));
        int64_t off = (reinterpret_cast<const uint8_t*>(ptr_) - buf_->base) + byteOff;
        if (off < 0 || off + int64_t(n) > int64_t(buf_->bytes))
            emu::Fault(emu::Cat(what, ": GM out of range on tensor '", buf_->name, "' (buffer #", buf_->id,
                                "): element offset ", off / int64_t(sizeof(T)), " (byte ", off, ", ", n,
                                " bytes) outside buffer of ", buf_->bytes, " bytes"));
        return buf_->base + off;
    }
    emu::GmBuffer* Buffer() const { return buf_; }

private:
    T* ptr_ = nullptr;
    uint64_t size_ = 0;
    emu::GmBuffer* buf_ = nullptr;
};

// ---------------------------------------------------------------- LocalTensor
// A view into the simulated core's UB arena: byte offset + element count. Element accesses are
// bounds-checked against the view (which extends to the end of its allocation) and poison-checked.
template <typename T>
class LocalTensor {
public:
    using PrimType = T;
    LocalTensor() = default;
    LocalTensor(emu::UbArena* ub, uint64_t off, uint64_t count, int tag = -1, uint8_t pool = 0)
        : ub_(ub), off_(off), size_(count), tag_(tag), pool_(pool) {}

    LocalTensor operator[](uint64_t i) const
    {
        if (i > size_) emu::Fault(emu::Cat("LocalTensor operator[", i, "] past the end of a ", size_, "-element tensor"));
        return LocalTensor(ub_, off_ + i * sizeof(T), size_ - i, tag_, pool_);
    }
    uint32_t GetSize() const { return static_cast<uint32_t>(size_); }
    void SetSize(uint32_t n) { size_ = n; }
    uint64_t GetPhyAddr() const { return off_; }   // UB byte address
    template <typename U>
    LocalTensor<U> ReinterpretCast() const { return LocalTensor<U>(ub_, off_, size_ * sizeof(T) / sizeof(U), tag_, pool_); }

    // Scalar accesses run on PIPE_S (docs/reference/ascendc.md §1.4); the trailing emu::Site is emulation-only.
    T GetValue(uint64_t i, emu::Site site = emu::Site::Here()) const
    {
        uint64_t a = Addr(i, 1, "GetValue");
        emu::Touch(emu::Issue(emu::kPipeS, "GetValue", site), ub_, a, sizeof(T), false);
        emu::OwnedAccess(ub_, a, sizeof(T), pool_, false, "GetValue");
        if (!ub_->IsWritten(a, sizeof(T)))
            emu::Fault(emu::Cat("GetValue: read of unwritten (poisoned) ", ub_->name, " at byte address ", a, " (element ", i, ")"));
        T v; std::memcpy(&v, ub_->data.data() + a, sizeof(T));
        return v;
    }
    void SetValue(uint64_t i, T v, emu::Site site = emu::Site::Here()) const
    {
        uint64_t a = Addr(i, 1, "SetValue");
        emu::Touch(emu::Issue(emu::kPipeS, "SetValue", site), ub_, a, sizeof(T), true);
        emu::OwnedAccess(ub_, a, sizeof(T), pool_, true, "SetValue");
        std::memcpy(ub_->data.data() + a, &v, sizeof(T));
        ub_->MarkWritten(a, sizeof(T));
    }
    // AscendC's operator() is a scalar reference; we support reads only via GetValue/SetValue.

    // Emulator internals.
    uint64_t Addr(uint64_t i, uint64_t n, const char* what) const
    {
        if (!ub_) emu::Fault(emu::Cat(what, ": LocalTensor is not allocated"));
        CheckOwner(what);
        if (i + n > size_)
            emu::Fault(emu::Cat(what, ": ", ub_->name, " access of elements [", i, ", ", i + n, ") past the end of a ", size_,
                                "-element tensor at ", ub_->name, " byte address ", off_));
        return off_ + i * sizeof(T);
    }
    void CheckAligned(const char* what) const
    {
        if (!ub_) emu::Fault(emu::Cat(what, ": LocalTensor is not allocated"));
        CheckOwner(what);
        if (off_ % emu::kBlock)
            emu::Fault(emu::Cat(what, ": ", ub_->name, " address ", off_, " is not 32-byte aligned"));
    }
    // A core can only address its own on-chip buffers (an AIV has no L1/L0, an AIC no UB: docs/reference/ascendc.md §1.1).
    void CheckOwner(const char* what) const
    {
        const emu::CoreContext* c = emu::CurrentCorePtr();
        if (ub_->owner && c && ub_->owner != c)
            emu::Fault(emu::Cat(what, ": LocalTensor lives in the ", ub_->name, " of another core (",
                                emu::CoreLabel(*ub_->owner), "); a core can only address its own on-chip buffers"));
    }
    // Load element i; ok &= whether all its bytes were written.
    T Ld(uint64_t i, bool& ok) const
    {
        uint64_t a = off_ + i * sizeof(T);
        ok = ok && ub_->IsWritten(a, sizeof(T));
        T v; std::memcpy(&v, ub_->data.data() + a, sizeof(T));
        return v;
    }
    // Store element i; written = false keeps (propagates) poison.
    void St(uint64_t i, T v, bool written) const
    {
        uint64_t a = off_ + i * sizeof(T);
        std::memcpy(ub_->data.data() + a, &v, sizeof(T));
        ub_->MarkWritten(a, sizeof(T), written);
    }
    emu::UbArena* Arena() const { return ub_; }
    uint64_t Offset() const { return off_; }
    int Tag() const { return tag_; }
    uint8_t Pool() const { return pool_; }

private:
    emu::UbArena* ub_ = nullptr;
    uint64_t off_ = 0;
    uint64_t size_ = 0;
    int tag_ = -1;   // index of the TQue buffer it came from
    uint8_t pool_ = 0;   // the TBufPool (1-based, per memory) its buffer was carved from; 0: the pipe's own
};

// ---------------------------------------------------------------- TPipe, TQue, TBuf
class TPipe;

namespace emu_detail {
struct BufferSet {
    emu::UbArena* ub = nullptr;
    std::vector<uint64_t> offs;
    uint64_t len = 0;
    uint8_t pool = 0;   // the TBufPool the buffer was carved from (emu::UbArena::poolOf), 0: the pipe's own
};
}  // namespace emu_detail

// As the real header: the depth has no default (TQue<pos, depth>), FreeTensor takes a non-const reference, EnQue
// returns bool.
namespace emu_detail {
// The pipes a queue hands a buffer between (docs/reference/ascendc.md §1.5): the producer writes what it copies in
// or computes, the consumer reads it. VECIN: MTE2 -> V; VECOUT: V -> MTE3; A1/B1/C1/TSCM (L1): MTE2 -> MTE1;
// A2/B2 (L0A/L0B): MTE1 -> M; CO1 (L0C): M -> FIX; VECCALC: none (-1). A TQueBind<src, dst> takes the producer of
// src and the consumer of dst (VECIN -> VECOUT: MTE2 -> MTE3).
inline int ProducerPipe(TPosition p)
{
    switch (p) {
    case TPosition::VECIN: case TPosition::A1: case TPosition::B1: case TPosition::C1: case TPosition::TSCM: return emu::kPipeMTE2;
    case TPosition::VECOUT: case TPosition::VECCALC: return emu::kPipeV;
    case TPosition::A2: case TPosition::B2: case TPosition::C2: return emu::kPipeMTE1;
    case TPosition::CO1: return emu::kPipeM;
    default: return -1;
    }
}
inline int ConsumerPipe(TPosition p)
{
    switch (p) {
    case TPosition::VECIN: case TPosition::VECCALC: return emu::kPipeV;
    case TPosition::VECOUT: return emu::kPipeMTE3;
    case TPosition::A1: case TPosition::B1: case TPosition::C1: case TPosition::TSCM: return emu::kPipeMTE1;
    case TPosition::A2: case TPosition::B2: case TPosition::C2: return emu::kPipeM;
    case TPosition::CO1: return emu::kPipeFIX;
    default: return -1;
    }
}
}  // namespace emu_detail

// As the real header: the depth has no default (TQue<pos, depth>), FreeTensor takes a non-const reference, EnQue
// returns bool. The trailing emu::Site parameters are emulation-only (the race detector's statements).
// Synchronisation (docs/reference/ascendc.md §1.5, §1.6): EnQue hands the producer pipe's work to the consumer
// pipe at DeQue; FreeTensor hands the consumer's reads back to the producer at the next AllocTensor of the buffer.
template <TPosition pos, int32_t depth, auto mask = 0>
class TQue {
public:
    TQue() { SetHandOff(pos, pos); }
    template <typename T>
    LocalTensor<T> AllocTensor(emu::Site site = emu::Site::Here())
    {
        (void)site;
        if (set_.offs.empty()) emu::Fault("TQue::AllocTensor on a queue that was not InitBuffer'ed");
        size_t n = set_.offs.size();
        for (size_t k = 0; k < n; ++k) {
            size_t b = (next_ + k) % n;
            if (!inUse_[b]) {
                inUse_[b] = true;
                next_ = (b + 1) % n;
                if (prod_ >= 0) emu::JoinToken(prod_, freeTok_[b]);   // WAR: the previous user's reads are done
                if (freeId_[b] >= 0) emu::QueueWaitFlag(emu::EventOf(cons_, prod_), freeId_[b]);
                freeId_[b] = -1;
                // A fresh allocation holds the previous tile's data on hardware: treat it as undefined.
                set_.ub->Poison(set_.offs[b], set_.len);
                return LocalTensor<T>(set_.ub, set_.offs[b], set_.len / sizeof(T), int(b), set_.pool);
            }
        }
        emu::Fault(emu::Cat("TQue::AllocTensor: all ", n, " buffers are in use (missing FreeTensor; hardware would hang)"));
    }
    template <typename T>
    bool EnQue(const LocalTensor<T>& t, emu::Site site = emu::Site::Here())
    {
        (void)site;
        CheckOwned(t.Tag(), t.Offset(), "EnQue");
        if (depth > 0 && int32_t(queued_.size()) >= depth)
            emu::Fault(emu::Cat("TQue::EnQue: more than depth=", depth, " tensors enqueued without DeQue"));
        queued_.push_back(t.Tag());
        if (prod_ >= 0) enqTok_[t.Tag()] = emu::MakeToken(prod_);
        if (prod_ >= 0 && depth > 0)
            enqId_[t.Tag()] = emu::QueueTakeFlag(emu::EventOf(prod_, cons_), "TQue::EnQue");
        return true;
    }
    template <typename T>
    LocalTensor<T> DeQue(emu::Site site = emu::Site::Here())
    {
        (void)site;
        if (queued_.empty()) emu::Fault("TQue::DeQue on an empty queue (hardware would hang)");
        int b = queued_.front();
        queued_.pop_front();
        if (cons_ >= 0) emu::JoinToken(cons_, enqTok_[b]);
        if (enqId_[b] >= 0) emu::QueueWaitFlag(emu::EventOf(prod_, cons_), enqId_[b]);
        enqId_[b] = -1;
        return LocalTensor<T>(set_.ub, set_.offs[b], set_.len / sizeof(T), b, set_.pool);
    }
    template <typename T>
    void FreeTensor(LocalTensor<T>& t, emu::Site site = emu::Site::Here())
    {
        (void)site;
        CheckOwned(t.Tag(), t.Offset(), "FreeTensor");
        if (!inUse_[t.Tag()]) emu::Fault("TQue::FreeTensor of a buffer that is not allocated (double free)");
        inUse_[t.Tag()] = false;
        if (cons_ >= 0) freeTok_[t.Tag()] = emu::MakeToken(cons_);
        if (cons_ >= 0 && depth > 0)
            freeId_[t.Tag()] = emu::QueueTakeFlag(emu::EventOf(cons_, prod_), "TQue::FreeTensor");
    }
    bool VacantInQue() const { return int32_t(queued_.size()) < (depth > 0 ? depth : 1 << 30); }
    bool HasTensorInQue() const { return !queued_.empty(); }

protected:
    // Producer and consumer pipes of the hand-off (emu_detail::ProducerPipe / ConsumerPipe); none when equal.
    void SetHandOff(TPosition src, TPosition dst)
    {
        prod_ = emu_detail::ProducerPipe(src);
        cons_ = emu_detail::ConsumerPipe(dst);
        if (prod_ == cons_ || prod_ < 0 || cons_ < 0) prod_ = cons_ = -1;
    }

private:
    friend class TPipe;
    template <TPosition, uint32_t> friend class TBufPool;
    // The hand-out state of `num` fresh buffers (TPipe::InitBuffer, TBufPool::InitBuffer): none allocated or queued.
    void ResetBlocks(uint8_t num)
    {
        inUse_.assign(num, false);
        queued_.clear();
        next_ = 0;
        enqTok_.assign(num, emu::Token{});
        freeTok_.assign(num, emu::Token{});
        enqId_.assign(num, -1);
        freeId_.assign(num, -1);
    }
    void CheckOwned(int tag, uint64_t off, const char* what) const
    {
        if (tag < 0 || size_t(tag) >= set_.offs.size() || off != set_.offs[tag])
            emu::Fault(emu::Cat("TQue::", what, ": tensor was not allocated from this queue (or is an offset view)"));
    }
    emu_detail::BufferSet set_;
    std::vector<bool> inUse_;
    std::deque<int> queued_;
    size_t next_ = 0;
    int prod_ = -1, cons_ = -1;
    std::vector<emu::Token> enqTok_, freeTok_;   // per buffer: the EnQue and FreeTensor hand-offs
    std::vector<int> enqId_, freeId_;             // per buffer: the event id its EnQue / FreeTensor holds (-1: none)
};

template <TPosition pos, TPosition dst, int32_t depth, auto mask = 0>
class TQueBind : public TQue<pos, depth, mask> {
public:
    TQueBind() { this->SetHandOff(pos, dst); }
};

template <TPosition pos = TPosition::VECCALC>
class TBuf {
public:
    // Non-const members, as the real header's (a const member function of a kernel class cannot call them).
    template <typename T>
    LocalTensor<T> Get() { Need(); return LocalTensor<T>(set_.ub, set_.offs[0], set_.len / sizeof(T), -1, set_.pool); }
    template <typename T>
    LocalTensor<T> Get(uint32_t count)
    {
        Need();
        if (uint64_t(count) * sizeof(T) > set_.len)
            emu::Fault(emu::Cat("TBuf::Get(", count, "): ", count * sizeof(T), " bytes exceed the buffer's ", set_.len));
        return LocalTensor<T>(set_.ub, set_.offs[0], count, -1, set_.pool);
    }
    template <typename T>
    LocalTensor<T> GetWithOffset(uint32_t count, uint32_t byteOffset)
    {
        Need();
        if (byteOffset + uint64_t(count) * sizeof(T) > set_.len)
            emu::Fault(emu::Cat("TBuf::GetWithOffset(", count, ", ", byteOffset, ") exceeds the buffer's ", set_.len, " bytes"));
        return LocalTensor<T>(set_.ub, set_.offs[0] + byteOffset, count, -1, set_.pool);
    }

private:
    friend class TPipe;
    template <TPosition, uint32_t> friend class TBufPool;
    void Need() const { if (set_.offs.empty()) emu::Fault("TBuf::Get on a buffer that was not InitBuffer'ed"); }
    emu_detail::BufferSet set_;
};

namespace emu_detail {
// The physical buffer of a TPosition (docs/reference/ascendc.md §1.2): VECIN/VECOUT/VECCALC -> UB (AIV); A1/B1/C1/TSCM -> L1,
// A2 -> L0A, B2 -> L0B, CO1 -> L0C, C2 -> bias table, C2PIPE2GM -> fixpipe buffer (AIC).
inline bool PosMem(TPosition pos, emu::MemKind& k)
{
    switch (pos) {
    case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: k = emu::MemKind::UB; return true;
    case TPosition::A1: case TPosition::B1: case TPosition::C1: case TPosition::TSCM: k = emu::MemKind::L1; return true;
    case TPosition::A2: k = emu::MemKind::L0A; return true;
    case TPosition::B2: k = emu::MemKind::L0B; return true;
    case TPosition::CO1: k = emu::MemKind::L0C; return true;
    case TPosition::C2: k = emu::MemKind::BT; return true;
    case TPosition::C2PIPE2GM: k = emu::MemKind::FB; return true;
    default: return false;
    }
}
inline const char* PosName(TPosition pos)
{
    switch (pos) {
    case TPosition::GM: return "GM"; case TPosition::A1: return "A1"; case TPosition::A2: return "A2";
    case TPosition::B1: return "B1"; case TPosition::B2: return "B2"; case TPosition::C1: return "C1";
    case TPosition::C2: return "C2"; case TPosition::CO1: return "CO1"; case TPosition::CO2: return "CO2";
    case TPosition::VECIN: return "VECIN"; case TPosition::VECOUT: return "VECOUT"; case TPosition::VECCALC: return "VECCALC";
    case TPosition::SPM: return "SPM"; case TPosition::SHM: return "SHM"; case TPosition::TSCM: return "TSCM";
    case TPosition::C2PIPE2GM: return "C2PIPE2GM"; default: return "?";
    }
}
inline emu::UbArena* CoreArena(emu::CoreContext& c, emu::MemKind k)
{
    switch (k) {
    case emu::MemKind::UB: return c.ub;
    case emu::MemKind::L1: return c.l1;
    case emu::MemKind::L0A: return c.l0a;
    case emu::MemKind::L0B: return c.l0b;
    case emu::MemKind::L0C: return c.l0c;
    case emu::MemKind::BT: return c.bt;
    case emu::MemKind::FB: return c.fb;
    }
    return nullptr;
}
}  // namespace emu_detail

// TBufPool<pos> (docs/reference/ascendc.md §1.5): a range of a vector (UB) or L1 buffer that TPipe::InitBufPool(pool,
// len) takes from the pipe, or InitBufPool(pool, len, shared) gives the same start and length as the pool `shared`
// (its length must not exceed shared's); pool.InitBuffer(que, num, len) / pool.InitBuffer(buf, len) carve queues and
// TBufs from the pool's own start, in order, within its length, each taking buffer handles (a queue its blocks, a
// TBuf 1) of the pool's bufIDSize (default 4, at most QBUFPOOL_MAX_LEN = 16: the real pool's handle array has
// bufIDSize entries, so more is a fault here); Reset() starts carving again. Two pools sharing
// bytes hold buffers that share UB: every pool has an id (1-based, per memory) that marks the bytes its buffers
// write, and reading bytes another pool's buffer wrote last is a fault (emu::OwnedAccess), so a kernel whose two
// sharing buffers are ever live at once fails `check` (as the device's sanitizer would report it).
template <TPosition pos, uint32_t bufIDSize = 4>
class TBufPool {
public:
    static constexpr TPosition poolPos = pos;
    template <TPosition qpos, int32_t depth, auto mask>
    bool InitBuffer(TQue<qpos, depth, mask>& q, uint8_t num, uint32_t len)
    {
        if (num == 0) emu::Fault("TBufPool::InitBuffer: buffer count 0");
        Carve(q.set_, qpos, num, len, "TQue");
        q.ResetBlocks(num);
        return true;
    }
    template <TPosition bpos>
    bool InitBuffer(TBuf<bpos>& b, uint32_t len) { Carve(b.set_, bpos, 1, len, "TBuf"); return true; }
    void Reset() { next_ = start_; handles_ = 0; }

private:
    friend class TPipe;
    void Carve(emu_detail::BufferSet& s, TPosition bpos, uint32_t num, uint32_t len, const char* what)
    {
        emu::MemKind k, mine;
        if (!ub_) emu::Fault(emu::Cat("TBufPool::InitBuffer(", what, "): the pool was not made by InitBufPool"));
        if (!emu_detail::PosMem(bpos, k) || !emu_detail::PosMem(pos, mine) || k != mine)
            emu::Fault(emu::Cat("TBufPool::InitBuffer(", what, "<", emu_detail::PosName(bpos),
                                ">): buffer pos should be same as pos of TbufPool (", emu_detail::PosName(pos), ")"));
        if (len == 0) emu::Fault(emu::Cat("TBufPool::InitBuffer(", what, "): buffer length is 0"));
        if (handles_ + num > bufIDSize || handles_ + num > 16)
            emu::Fault(emu::Cat("TBufPool::InitBuffer(", what, ", num=", int(num), "): ", handles_ + num,
                                " buffer handles, more than the pool's bufIDSize ", bufIDSize,
                                " (at most QBUFPOOL_MAX_LEN = 16): the device writes past TBufPoolImpl::buf_"));
        handles_ += num;
        uint64_t rounded = (uint64_t(len) + emu::kBlock - 1) / emu::kBlock * emu::kBlock;
        if (next_ + rounded * num > start_ + len_)
            emu::Fault(emu::Cat("TBufPool::InitBuffer(", what, ", num=", num, ", len=", len,
                                "): Buffer Init length exceeds limit of BufPool (", len_, " bytes, ", next_ - start_,
                                " taken)"));
        s.ub = ub_;
        s.len = rounded;
        s.pool = id_;
        s.offs.clear();
        for (uint32_t i = 0; i < num; ++i) {
            s.offs.push_back(next_);
            ub_->Poison(next_, rounded);
            next_ += rounded;
        }
    }
    emu::UbArena* ub_ = nullptr;
    uint64_t start_ = 0, len_ = 0, next_ = 0;
    uint32_t handles_ = 0;
    uint8_t id_ = 0;
};

// Allocates from the current core's on-chip buffers (bump allocation per buffer, sizes rounded up to 32 B):
// TQue/TBuf of a vector position from UB, of a cube position from L1/L0A/L0B/L0C/... (emu_detail::PosMem).
// A core only has its own unit's buffers: an AIV allocating A1/A2/B2/CO1/... or an AIC allocating VECIN/... is a
// fault, as is exceeding a buffer's capacity. Destroy() or destruction returns the memory; a later TPipe
// re-partitions.
enum class HardEvent : int {
    MTE2_V, V_MTE2, MTE3_V, V_MTE3, MTE2_MTE3, MTE3_MTE2, S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S,
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, M_FIX, FIX_M, MTE2_FIX, FIX_MTE2, FIX_MTE3, FIX_S, M_S, MTE1_FIX,
    FIX_MTE1, M_V, V_M, V_V, MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, FIX_FIX
};
using TEventID = int8_t;
enum event_t : int { EVENT_ID0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };  // as CCE's event_t

class TPipe {
public:
    static constexpr int kMems = 7;
    TPipe() : core_(&emu::Core())
    {
        for (int k = 0; k < kMems; ++k) {
            emu::UbArena* a = emu_detail::CoreArena(*core_, emu::MemKind(k));
            start_[k] = a ? a->used : 0;
        }
        core_->tpipe = this;
    }
    ~TPipe()
    {
        Release();
        if (core_->tpipe == this) core_->tpipe = nullptr;
    }
    // The TPipe's event-id pool per HardEvent (emu/pipes.h PoolFree; docs/reference/ascendc.md §1.5-§1.6): the
    // queues take the lowest free id at EnQue / FreeTensor and hold it until DeQue / the next AllocTensor.
    // AllocEventID takes the lowest free id until ReleaseEventID; FetchEventID returns it and takes nothing (for a
    // SetFlag its WaitFlag follows at once).
    template <HardEvent evt>
    TEventID AllocEventID() { return TEventID(emu::PoolAlloc(int(evt))); }
    template <HardEvent evt>
    void ReleaseEventID(TEventID id) { emu::PoolRelease(int(evt), id); }
    TEventID FetchEventID(HardEvent evt) { return TEventID(emu::PoolFree(int(evt), "TPipe::FetchEventID")); }
    template <HardEvent evt>
    TEventID FetchEventID() { return FetchEventID(evt); }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

    template <TPosition pos, int32_t depth, auto mask>
    bool InitBuffer(TQue<pos, depth, mask>& q, uint8_t num, uint32_t len)
    {
        if (num == 0) emu::Fault("TPipe::InitBuffer: buffer count 0");
        Alloc(q.set_, pos, num, len, "TQue");
        q.ResetBlocks(num);
        return true;
    }
    template <TPosition pos>
    bool InitBuffer(TBuf<pos>& b, uint32_t len) { Alloc(b.set_, pos, 1, len, "TBuf"); return true; }
    // TBufPool (above): a new range of `len` bytes of the pool's memory, or the range of `shared`.
    template <class P>
    bool InitBufPool(P& pool, uint32_t len)
    {
        emu_detail::BufferSet r;
        Alloc(r, P::poolPos, 1, len, "TBufPool");
        MakePool(pool, r.ub, r.offs[0], r.len);
        return true;
    }
    template <class P, class Q>
    bool InitBufPool(P& pool, uint32_t len, Q& shared)
    {
        if (!shared.ub_) emu::Fault("TPipe::InitBufPool(pool, len, shareBuf): shareBuf was not made by InitBufPool");
        if (uint64_t(len) > shared.len_)
            emu::Fault(emu::Cat("TPipe::InitBufPool: Length of input bufPool (", len,
                                ") should be no longer than length of shareBuf, which is ", shared.len_));
        MakePool(pool, shared.ub_, shared.start_, shared.len_);
        return true;
    }
    void Destroy() { Release(); }
    void Reset() { Release(); }
    // Bytes this pipe allocated, summed over the buffers (UB only on an AIV).
    uint64_t UsedBytes() const
    {
        uint64_t s = 0;
        for (int k = 0; k < kMems; ++k) {
            emu::UbArena* a = emu_detail::CoreArena(*core_, emu::MemKind(k));
            if (a && a->used >= start_[k]) s += a->used - start_[k];
        }
        return s;
    }

private:
    template <class P>
    static void MakePool(P& pool, emu::UbArena* ub, uint64_t start, uint64_t len)
    {
        if (ub->kind != emu::MemKind::UB)   // the owner check covers the UB's accesses (vector, DataCopy, scalar) only
            emu::Fault("TPipe::InitBufPool: the emulation models TBufPool of UB positions (VECIN/VECOUT/VECCALC) only");
        if (ub->pools == 255) emu::Fault("TPipe::InitBufPool: more than 255 pools on one memory (emulation limit)");
        if (ub->poolOf.empty()) ub->poolOf.assign(ub->Size(), 0);
        pool.ub_ = ub;
        pool.start_ = pool.next_ = start;
        pool.len_ = len;
        pool.id_ = ++ub->pools;
    }
    void Release()
    {
        for (int k = 0; k < kMems; ++k) {
            emu::UbArena* a = emu_detail::CoreArena(*core_, emu::MemKind(k));
            if (a && a->used >= start_[k]) a->used = start_[k];
        }
    }
    void Alloc(emu_detail::BufferSet& s, TPosition pos, uint32_t num, uint32_t len, const char* what)
    {
        emu::MemKind kind;
        if (!emu_detail::PosMem(pos, kind))
            emu::Fault(emu::Cat("TPipe::InitBuffer(", what, "<", emu_detail::PosName(pos), ">): TPosition ",
                                emu_detail::PosName(pos), " is not an on-chip buffer the emulation models"));
        emu::UbArena* ub = emu_detail::CoreArena(*core_, kind);
        if (!ub) {
            bool aiv = core_->kind == emu::CoreKind::AIV;
            emu::Fault(emu::Cat("TPipe::InitBuffer(", what, "<", emu_detail::PosName(pos), ">): ",
                                aiv ? "an AIV core has no " : "an AIC core has no ", emu::MemName(kind), " (TPosition ",
                                emu_detail::PosName(pos), "): ",
                                aiv ? "cube buffers (L1/L0A/L0B/L0C) exist only on AIC cores"
                                    : "the UB exists only on AIV cores", " (docs/reference/ascendc.md §1.1, §1.2)"));
        }
        uint64_t rounded = (uint64_t(len) + emu::kBlock - 1) / emu::kBlock * emu::kBlock;
        uint64_t need = rounded * num;
        if (ub->used + need > ub->Size())
            emu::Fault(emu::Cat(ub->name, " overflow: InitBuffer(", what, "<", emu_detail::PosName(pos), ">, num=", num,
                                ", len=", len, ") needs ", need, " bytes at ", ub->name, " offset ", ub->used,
                                " but the core's ", ub->name, " is ", ub->Size(), " bytes"));
        s.ub = ub;
        s.len = rounded;
        s.offs.clear();
        for (uint32_t k = 0; k < num; ++k) {
            s.offs.push_back(ub->used);
            ub->Poison(ub->used, rounded);
            ub->used += rounded;
        }
        if (ub->used > ub->peak) ub->peak = ub->used;
    }
    emu::CoreContext* core_;
    uint64_t start_[kMems] = {};
};

// The core's live TPipe (the one its kernel constructed); a fault when there is none.
inline TPipe* GetTPipePtr()
{
    void* p = emu::Core().tpipe;
    if (!p) emu::Fault("GetTPipePtr(): no TPipe is alive on this core");
    return static_cast<TPipe*>(p);
}

}  // namespace AscendC
