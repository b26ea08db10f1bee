// The cost model's time line (docs/design.md "Copy/compute overlap", emu/core.h PipeState::tm) on one small
// hand-made kernel, for tests/test_cost_timeline.py: one core; each pass copies 16384 floats into a VECIN queue
// (depth 1) of `num` buffers, then on PIPE_V a barrier, Muls over 64 of them, a Duplicate of 8192 floats into a
// scratch buffer and Muls over 64 again, and frees the queue's buffer after that last read.
// argv[1] = num (1 or 2), no argv[2]: four passes, each copied in right before its compute. Prints "span <num> <spanCycles>".
// argv[2] = "wait" or "prefetch" (two buffers): three passes, each compute ending in a scalar wait for PIPE_V
// (SetFlag / WaitFlag<V_S>, as a GetValue of a row reduction); "wait" copies each pass in right before its
// compute, "prefetch" copies the first pass in before the loop and, in each pass, dequeues this pass's buffer, then
// copies the next pass in, then computes (opgen.kernel.rowsched.pass_loop's order). Prints "span <mode> <spanCycles>".
// argv[2] = "reread" (argv[1] buffers): four passes as without argv[2], each copying the same 128 bursts of 512 B
// (every other 512 B of the first 128 KB of x: DataCopyParams blockCount 128, blockLen 16, srcStride 16), so the
// first copy-in reads HBM and the other three are L2 hits (emu/core.h CountBurstAt). Prints "span reread <spanCycles>".
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

namespace {
constexpr int kPass = 16384;           // floats a pass copies in: one burst of 65536 B
constexpr int kUbBytes = 196608;       // UB of an AIV (ascend910b1)
constexpr int kPlainPasses = 4;
constexpr int kWaitPasses = 3;

enum class Order { kPlain, kWait, kPrefetch, kReread };

int Run(int num, int passes, Order order, const std::string& label)
{
    std::vector<float> x(size_t(kPass) * passes, 0.5f);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::LaunchResult r = emu::Launch(1, kUbBytes, [&] {
        TPipe pipe;
        TQue<TPosition::VECIN, 1> inQue;
        TBuf<> ba, bb, bc;
        pipe.InitBuffer(inQue, num, kPass * 4);
        pipe.InitBuffer(ba, 256); pipe.InitBuffer(bb, 32768); pipe.InitBuffer(bc, 256);
        LocalTensor<float> a = ba.Get<float>(), b = bb.Get<float>(), c = bc.Get<float>();
        GlobalTensor<float> gx;
        gx.SetGlobalBuffer(x.data(), x.size());
        auto copyIn = [&](int i) {
            LocalTensor<float> t = inQue.AllocTensor<float>();
            if (order == Order::kReread)
                DataCopy(t, gx, DataCopyParams(128, 16, 16, 0));   // 128 bursts of 512 B, 64 KB into t
            else
                DataCopy(t, gx[size_t(i) * kPass], kPass);
            inQue.EnQue(t);
        };
        auto compute = [&](LocalTensor<float>& s) {
            PipeBarrier<PIPE_V>();                         // 16 cycles
            Muls(a, s, 2.0f, 64);                          // 1 repeat + 1 issue: 9 cycles
            Duplicate(b, 1.0f, 8192);                      // 128 repeats + 1 issue: 136 cycles
            Muls(c, s, 3.0f, 64);                          // 9 cycles: the last read of s
            inQue.FreeTensor(s);
            if (order == Order::kWait || order == Order::kPrefetch) {
                SetFlag<HardEvent::V_S>(0);                // the scalar unit waits for PIPE_V: 32 cycles on every pipe
                WaitFlag<HardEvent::V_S>(0);
            }
        };
        if (order == Order::kPrefetch) copyIn(0);
        for (int i = 0; i < passes; ++i) {
            if (order != Order::kPrefetch) copyIn(i);
            LocalTensor<float> s = inQue.DeQue<float>();
            if (order == Order::kPrefetch && i + 1 < passes) copyIn(i + 1);
            compute(s);
        }
    });
    if (!r.ok) {
        std::printf("fault %s\n", r.firstFault.c_str());
        return 1;
    }
    std::printf("span %s %llu\n", label.c_str(), (unsigned long long)r.issue[0].spanCycles);
    return 0;
}
}  // namespace

int main(int argc, char** argv)
{
    if (argc > 2) {
        const std::string mode = argv[2];
        if (mode == "reread") return Run(std::atoi(argv[1]), kPlainPasses, Order::kReread, mode);
        return Run(2, kWaitPasses, mode == "prefetch" ? Order::kPrefetch : Order::kWait, mode);
    }
    const std::string num = argc > 1 ? argv[1] : "2";
    return Run(std::atoi(num.c_str()), kPlainPasses, Order::kPlain, num);
}
