// Scenario driver for tests/test_emu_bufpool.py: `emu_bufpool NAME` runs one tiny kernel whose UB buffers share bytes
// through two TBufPools (TPipe::InitBufPool(b, len, a): b starts where a starts) and prints the launch report
// (emu::PrintReport). The emulation marks every UB byte with the pool whose buffer wrote it last; a read of bytes a
// buffer of the other pool wrote is a fault (emu/core.h OwnedAccess), as a sanitizer reports a reused region read
// after another buffer sharing it was written.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;
static constexpr uint64_t kUb = 196608;

int main(int argc, char** argv)
{
    const std::string s = argc > 1 ? argv[1] : "";
    std::vector<float> x(256), y(256, 0.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::RegisterGm(y.data(), y.size() * 4, "y");
    emu::LaunchResult r;
    bool known = true;
    // a: pool 1 (TBuf ta, 1 KB), b: pool 2 over the same bytes (TQue qb, 1 KB): ta and qb share UB bytes [0, 1024)
    auto run = [&](const std::function<void(TPipe&, TBufPool<TPosition::VECCALC>&, TBufPool<TPosition::VECCALC>&,
                                            GlobalTensor<float>&, GlobalTensor<float>&)>& body) {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe;
            TBufPool<TPosition::VECCALC> a, b;
            GlobalTensor<float> gx, gy;
            gx.SetGlobalBuffer(x.data(), 256);
            gy.SetGlobalBuffer(y.data(), 256);
            pipe.InitBufPool(a, 1024);
            pipe.InitBufPool(b, 1024, a);
            body(pipe, a, b, gx, gy);
        });
    };
    if (s == "phases" || s == "reuse_read") {
        // phase 1 uses ta, phase 2 the queue qb over the same bytes; "reuse_read" reads ta again after qb wrote
        const bool bad = s == "reuse_read";
        run([&](TPipe&, TBufPool<TPosition::VECCALC>& a, TBufPool<TPosition::VECCALC>& b, GlobalTensor<float>& gx,
                GlobalTensor<float>& gy) {
            TBuf<TPosition::VECCALC> ta;
            TQue<TPosition::VECIN, 1> qb;
            a.InitBuffer(ta, 1024);
            b.InitBuffer(qb, 1, 1024);
            LocalTensor<float> t = ta.Get<float>();
            Duplicate(t, 2.0f, 256);
            PipeBarrier<PIPE_V>();
            Muls(t, t, 3.0f, 256);                    // phase 1: ta written and read
            PipeBarrier<PIPE_ALL>();
            LocalTensor<float> q = qb.AllocTensor<float>();
            DataCopy(q, gx, 256);                     // phase 2: qb (the same bytes) written by MTE2
            qb.EnQue(q);
            q = qb.DeQue<float>();
            if (bad) {
                Adds(q, t, 1.0f, 256);                // ta read after qb wrote its bytes: poison
            } else {
                Adds(q, q, 1.0f, 256);
            }
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(gy, q, 256);
            qb.FreeTensor(q);
        });
        if (r.ok) std::printf("val y1 %g\n", double(y[1]));
    } else if (s == "copy_out_stale") {
        // qb written, then ta's view copied to GM: the copy reads bytes the other pool's buffer wrote
        run([&](TPipe&, TBufPool<TPosition::VECCALC>& a, TBufPool<TPosition::VECCALC>& b, GlobalTensor<float>&,
                GlobalTensor<float>& gy) {
            TBuf<TPosition::VECCALC> ta;
            TBuf<TPosition::VECCALC> tb;
            a.InitBuffer(ta, 1024);
            b.InitBuffer(tb, 1024);
            Duplicate(ta.Get<float>(), 1.0f, 256);
            PipeBarrier<PIPE_V>();
            Duplicate(tb.Get<float>(), 5.0f, 256);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(gy, ta.Get<float>(), 256);
        });
    } else if (s == "share_longer") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe;
            TBufPool<TPosition::VECCALC> a, b;
            pipe.InitBufPool(a, 1024);
            pipe.InitBufPool(b, 2048, a);           // longer than the pool it shares
        });
    } else if (s == "pool_overflow") {
        run([&](TPipe&, TBufPool<TPosition::VECCALC>& a, TBufPool<TPosition::VECCALC>&, GlobalTensor<float>&,
                GlobalTensor<float>&) {
            TBuf<TPosition::VECCALC> t1, t2;
            a.InitBuffer(t1, 768);
            a.InitBuffer(t2, 512);                    // 1280 bytes in a 1024-byte pool
        });
    } else if (s == "pipe_after_pools") {
        // the pipe's own buffers start after the pools' bytes: no sharing with them
        run([&](TPipe& pipe, TBufPool<TPosition::VECCALC>& a, TBufPool<TPosition::VECCALC>&, GlobalTensor<float>&,
                GlobalTensor<float>& gy) {
            TBuf<TPosition::VECCALC> ta, own;
            a.InitBuffer(ta, 1024);
            pipe.InitBuffer(own, 1024);
            LocalTensor<float> o = own.Get<float>();
            Duplicate(ta.Get<float>(), 1.0f, 256);
            Duplicate(o, 7.0f, 256);
            PipeBarrier<PIPE_V>();
            Add(o, o, ta.Get<float>(), 256);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(gy, o, 256);
            std::printf("addr %llu %llu\n", (unsigned long long)ta.Get<float>().GetPhyAddr(),
                        (unsigned long long)o.GetPhyAddr());
        });
        if (r.ok) std::printf("val y0 %g\n", double(y[0]));
    } else {
        known = false;
    }
    if (!known) {
        std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
        return 2;
    }
    emu::PrintReport(r);
    return 0;
}
