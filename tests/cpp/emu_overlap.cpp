// The cost model's time line (docs/design.md "Copy/compute overlap", emu/core.h PipeState::tm) on one small
// hand-made kernel, for tests/test_cost_overlap.py: one core, four passes, each copies 16384 floats into a VECIN
// queue of `num` buffers (argv[1]: 1 or 2), then on PIPE_V a barrier, Muls over 64 of them, a Duplicate of 8192
// floats into a scratch buffer and Muls over 64 again, and frees the queue's buffer after that last read.
// Prints "span <num> <spanCycles>".
// With argv[2] = "wait" or "prefetch" (two buffers, a queue of depth 2): three passes, each compute ending in a scalar
// wait for PIPE_V (SetFlag / WaitFlag<V_S>, as a GetValue of a row reduction); "wait" copies each pass in right
// before its compute, "prefetch" copies the first pass in before the loop and the next pass in before each compute
// (opgen.kernel.rowsched.pass_loop's order). Prints "span <mode> <spanCycles>".
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

static int Waits(bool prefetch)
{
    constexpr int kPass = 16384, kPasses = 3;
    std::vector<float> x(size_t(kPass) * kPasses, 0.5f);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::LaunchResult r = emu::Launch(1, 196608, [&] {
        TPipe pipe;
        TQue<TPosition::VECIN, 2> inQue;
        TBuf<> ba, bb, bc;
        pipe.InitBuffer(inQue, 2, kPass * 4);
        pipe.InitBuffer(ba, 256); pipe.InitBuffer(bb, 32768); pipe.InitBuffer(bc, 256);
        LocalTensor<float> a = ba.Get<float>(), b = bb.Get<float>(), c = bc.Get<float>();
        GlobalTensor<float> gx;
        gx.SetGlobalBuffer(x.data(), x.size());
        auto copyIn = [&](int i) {
            LocalTensor<float> t = inQue.AllocTensor<float>();
            DataCopy(t, gx[size_t(i) * kPass], kPass);   // one burst of 65536 B
            inQue.EnQue(t);
        };
        auto compute = [&] {
            LocalTensor<float> s = inQue.DeQue<float>();
            PipeBarrier<PIPE_V>();                         // 16 cycles
            Muls(a, s, 2.0f, 64);                          // 9 cycles
            Duplicate(b, 1.0f, 8192);                      // 136 cycles
            Muls(c, s, 3.0f, 64);                          // 9 cycles: the last read of s
            inQue.FreeTensor(s);
            SetFlag<HardEvent::V_S>(0);                    // the scalar unit waits for PIPE_V: 32 cycles on every pipe
            WaitFlag<HardEvent::V_S>(0);
        };
        if (prefetch) {
            copyIn(0);
            for (int i = 0; i < kPasses; ++i) {
                if (i + 1 < kPasses) copyIn(i + 1);
                compute();
            }
        } else {
            for (int i = 0; i < kPasses; ++i) {
                copyIn(i);
                compute();
            }
        }
    });
    if (!r.ok) {
        std::printf("fault %s\n", r.firstFault.c_str());
        return 1;
    }
    std::printf("span %s %llu\n", prefetch ? "prefetch" : "wait", (unsigned long long)r.issue[0].spanCycles);
    return 0;
}

int main(int argc, char** argv)
{
    if (argc > 2) return Waits(std::string(argv[2]) == "prefetch");
    const int num = argc > 1 ? std::atoi(argv[1]) : 2;
    constexpr int kPass = 16384, kPasses = 4;
    std::vector<float> x(size_t(kPass) * kPasses, 0.5f);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::LaunchResult r = emu::Launch(1, 196608, [&] {
        TPipe pipe;
        TQue<TPosition::VECIN, 1> inQue;
        TBuf<> ba, bb, bc;
        pipe.InitBuffer(inQue, num, kPass * 4);
        pipe.InitBuffer(ba, 256); pipe.InitBuffer(bb, 32768); pipe.InitBuffer(bc, 256);
        LocalTensor<float> a = ba.Get<float>(), b = bb.Get<float>(), c = bc.Get<float>();
        GlobalTensor<float> gx;
        gx.SetGlobalBuffer(x.data(), x.size());
        for (int i = 0; i < kPasses; ++i) {
            LocalTensor<float> t = inQue.AllocTensor<float>();
            DataCopy(t, gx[size_t(i) * kPass], kPass);   // one burst of 65536 B
            inQue.EnQue(t);
            LocalTensor<float> s = inQue.DeQue<float>();
            PipeBarrier<PIPE_V>();                         // 16 cycles
            Muls(a, s, 2.0f, 64);                          // 1 repeat + 1 issue: 9 cycles
            Duplicate(b, 1.0f, 8192);                      // 128 repeats + 1 issue: 136 cycles
            Muls(c, s, 3.0f, 64);                          // 9 cycles: the last read of s
            inQue.FreeTensor(s);
        }
    });
    if (!r.ok) {
        std::printf("fault %s\n", r.firstFault.c_str());
        return 1;
    }
    std::printf("span %d %llu\n", num, (unsigned long long)r.issue[0].spanCycles);
    return 0;
}
