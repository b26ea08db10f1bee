// opgen AscendC emulation: faults, GM buffer registry with byte counters, per-core UB arena with
// poison tracking, and the thread-local core context. Our own code (issue 4; reference/ascendc.md §1.2, §1.11).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace emu {

// Every fidelity violation is thrown as an EmuFault; emu::Launch catches it per core.
struct EmuFault : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Thrown into cores waiting at a barrier when another core faulted (not reported as a fault).
struct EmuAbort : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <typename... A>
inline std::string Cat(const A&... a) { std::ostringstream s; (s << ... << a); return s.str(); }

// ---------------------------------------------------------------- GM
struct GmBuffer {
    int id = 0;
    std::string name;
    uint8_t* base = nullptr;
    uint64_t bytes = 0;
    std::atomic<uint64_t> bytesRead{0}, bytesWritten{0};
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
    b->base = static_cast<uint8_t*>(ptr);
    b->bytes = bytes;
    r.bufs.push_back(std::move(b));
    return r.bufs.back()->id;
}
inline void ClearGm() { auto& r = GmRegistry::Get(); std::lock_guard<std::mutex> l(r.mu); r.bufs.clear(); }
inline void ResetGmCounters()
{
    auto& r = GmRegistry::Get();
    std::lock_guard<std::mutex> l(r.mu);
    for (auto& b : r.bufs) { b->bytesRead = 0; b->bytesWritten = 0; }
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

// ---------------------------------------------------------------- UB
constexpr uint64_t kBlock = 32;
constexpr uint8_t kPoisonByte = 0xA5;

// One core's unified buffer: data bytes plus a per-byte "written" map (0 = poisoned).
struct UbArena {
    std::vector<uint8_t> data, written;
    uint64_t used = 0;     // bump pointer of the live TPipe(s)
    explicit UbArena(uint64_t bytes) : data(bytes, kPoisonByte), written(bytes, 0) {}
    uint64_t Size() const { return data.size(); }
    void Poison(uint64_t off, uint64_t n)
    {
        std::memset(data.data() + off, kPoisonByte, n);
        std::memset(written.data() + off, 0, n);
    }
    bool IsWritten(uint64_t off, uint64_t n) const
    {
        for (uint64_t i = 0; i < n; ++i)
            if (!written[off + i]) return false;
        return true;
    }
    void MarkWritten(uint64_t off, uint64_t n, bool w = true) { std::memset(written.data() + off, w ? 1 : 0, n); }
};

// ---------------------------------------------------------------- cores and barrier
struct LaunchState;

struct CoreContext {
    int64_t blockIdx = 0;
    int64_t blockNum = 1;
    uint64_t tilingKey = 0;
    UbArena* ub = nullptr;
    LaunchState* launch = nullptr;
    int atomicType = 0;    // 0 none, else AtomicKind
};

inline CoreContext*& CurrentCorePtr() { thread_local CoreContext* c = nullptr; return c; }
inline CoreContext& Core()
{
    CoreContext* c = CurrentCorePtr();
    if (!c) throw EmuFault("AscendC device API called outside emu::Launch (no simulated core)");
    return *c;
}

[[noreturn]] inline void Fault(const std::string& what)
{
    CoreContext* c = CurrentCorePtr();
    throw EmuFault(c ? Cat("[core ", c->blockIdx, "] ", what) : what);
}

// Barrier over the cores of one launch. A core that returns (or faults) while others wait makes the
// waiters fail instead of hanging: on hardware that is a deadlock.
struct LaunchState {
    std::mutex mu;
    std::condition_variable cv;
    int total = 0;         // cores of the launch
    int live = 0;          // cores still running
    int arrived = 0;
    uint64_t generation = 0;
    bool aborted = false;
    bool deadlock = false;
    std::string abortReason;

    void Abort(const std::string& why)
    {
        std::lock_guard<std::mutex> l(mu);
        if (!aborted) { aborted = true; abortReason = why; }
        cv.notify_all();
    }
    void CoreFinished()
    {
        std::lock_guard<std::mutex> l(mu);
        --live;
        if (!aborted && arrived > 0 && arrived == live) { deadlock = true; aborted = true; abortReason = "deadlock"; }
        cv.notify_all();
    }
    void SyncAll()
    {
        std::unique_lock<std::mutex> l(mu);
        if (aborted) throw EmuAbort("launch aborted");
        uint64_t gen = generation;
        if (++arrived == total) {
            arrived = 0; ++generation; cv.notify_all(); return;
        }
        if (arrived == live) { deadlock = true; aborted = true; abortReason = "deadlock"; cv.notify_all(); }
        cv.wait(l, [&] { return generation != gen || aborted; });
        if (generation == gen) {
            if (deadlock)
                throw EmuFault(Cat("[core ", Core().blockIdx,
                                   "] SyncAll deadlock: another core returned without reaching this SyncAll"));
            throw EmuAbort("launch aborted");
        }
    }
};

}  // namespace emu
