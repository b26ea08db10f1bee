// Scenario driver for tests/test_emu.py: `emu_scenarios NAME` runs one small kernel on the emulation and
// prints the launch report (emu::PrintReport) plus "val ..." lines with results.
#include <cstdio>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;
static constexpr uint64_t kUb = 196608;

// The pipe synchronisation a kernel needs between a producer and a consumer pipe (docs/reference/ascendc.md §1.6):
// the emulation's race detector (emu/pipes.h) faults without it.
template <HardEvent E>
static void Sync()
{
    SetFlag<E>(EVENT_ID0);
    WaitFlag<E>(EVENT_ID0);
}

static void Vals(const char* tag, const std::vector<float>& v)
{
    std::printf("val %s", tag);
    for (float x : v) std::printf(" %.9g", x);
    std::printf("\n");
}

int main(int argc, char** argv)
{
    std::string s = argc > 1 ? argv[1] : "";
    std::vector<float> x(1024), y(1024, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::RegisterGm(y.data(), y.size() * 4, "y");
    emu::LaunchResult r;

    if (s == "ub_overflow") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; TBuf<TPosition::VECCALC> b;
            pipe.InitBuffer(q, 2, 64 * 1024);
            pipe.InitBuffer(b, 64 * 1024 + 1);   // rounds to 65568: total 196640 > 196608
        });
    } else if (s == "ub_fits") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; TBuf<TPosition::VECCALC> b;
            pipe.InitBuffer(q, 2, 64 * 1024);
            pipe.InitBuffer(b, 64 * 1024);
            std::printf("val used %llu\n", (unsigned long long)pipe.UsedBytes());
        });
    } else if (s == "misaligned_datacopy") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 4096);
            GlobalTensor<float> gx; gx.SetGlobalBuffer(x.data(), 1024);
            LocalTensor<float> t = b.Get<float>();
            DataCopy(t[3], gx, 8);               // UB byte address 12
        });
    } else if (s == "datacopy_count") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 4096);
            GlobalTensor<float> gx; gx.SetGlobalBuffer(x.data(), 1024);
            DataCopy(b.Get<float>(), gx, 10);    // 40 bytes
        });
    } else if (s == "gm_oob") {
        r = emu::Launch(2, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 4096);
            GlobalTensor<float> gx; gx.SetGlobalBuffer(x.data() + 512 * GetBlockIdx(), 512);
            DataCopyPad(b.Get<float>(), gx[500], DataCopyExtParams(1, 40 * 4, 0, 0, 0), DataCopyPadExtParams<float>());
        });
    } else if (s == "gm_oob_scalar") {
        r = emu::Launch(1, kUb, [&] {
            GlobalTensor<float> gy; gy.SetGlobalBuffer(y.data(), 1024);
            gy.SetValue(1024, 1.0f);
        });
    } else if (s == "poison_getvalue") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 256);
            LocalTensor<float> t = b.Get<float>();
            t.SetValue(0, 1.0f);
            Vals("v0", {t.GetValue(0)});
            (void)t.GetValue(1);
        });
    } else if (s == "poison_copyout") {
        // 5 floats in, no padding: lanes 5..7 of the block stay poisoned; copying 8 out must fault.
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; pipe.InitBuffer(q, 1, 256);
            GlobalTensor<float> gx, gy; gx.SetGlobalBuffer(x.data(), 1024); gy.SetGlobalBuffer(y.data(), 1024);
            LocalTensor<float> t = q.AllocTensor<float>();
            DataCopyPad(t, gx, DataCopyExtParams(1, 5 * 4, 0, 0, 0), DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
            Sync<HardEvent::MTE2_MTE3>();
            DataCopyPad(gy, t, DataCopyExtParams(1, 5 * 4, 0, 0, 0));   // fine
            Sync<HardEvent::MTE3_V>();
            Adds(t, t, 1.0f, 8);                                         // computing on pad lanes is fine
            Sync<HardEvent::V_MTE3>();
            DataCopyPad(gy, t, DataCopyExtParams(1, 8 * 4, 0, 0, 0));   // observing them is not
        });
    } else if (s == "poison_reduce") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> b, o, w; pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 32); pipe.InitBuffer(w, 256);
            GlobalTensor<float> gx; gx.SetGlobalBuffer(x.data(), 1024);
            LocalTensor<float> t = b.Get<float>(), d = o.Get<float>();
            DataCopyPad(t, gx, DataCopyExtParams(1, 5 * 4, 0, 0, 0), DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
            Sync<HardEvent::MTE2_V>();
            ReduceSum(d, t, w.Get<float>(), 8);
            Sync<HardEvent::V_S>();
            (void)d.GetValue(0);
        });
    } else if (s == "poison_realloc") {
        // AllocTensor re-poisons: data of the previous tile must not leak into the next.
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; pipe.InitBuffer(q, 1, 256);
            LocalTensor<float> t = q.AllocTensor<float>();
            Duplicate(t, 2.0f, 64);
            q.EnQue(t); t = q.DeQue<float>(); q.FreeTensor(t);
            t = q.AllocTensor<float>();
            Sync<HardEvent::V_S>();
            (void)t.GetValue(0);
        });
    } else if (s == "que_overalloc") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; pipe.InitBuffer(q, 2, 256);
            auto a = q.AllocTensor<float>(); auto b = q.AllocTensor<float>(); auto c = q.AllocTensor<float>();
        });
    } else if (s == "que_rotation") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; pipe.InitBuffer(q, 2, 100);
            std::printf("val addr");
            for (int i = 0; i < 4; ++i) {
                auto t = q.AllocTensor<float>();
                std::printf(" %llu", (unsigned long long)t.GetPhyAddr());
                Duplicate(t, float(i), 8);
                q.EnQue(t);
                auto u = q.DeQue<float>();
                Sync<HardEvent::V_S>();
                std::printf(" %g", u.GetValue(0));
                q.FreeTensor(u);
            }
            std::printf("\n");
        });
    } else if (s == "sync_deadlock") {
        r = emu::Launch(4, kUb, [&] { if (GetBlockIdx() != 2) SyncAll(); });
    } else if (s == "fault_aborts_barrier") {
        r = emu::Launch(4, kUb, [&] {
            if (GetBlockIdx() == 1) { GlobalTensor<float> g; g.SetGlobalBuffer(y.data(), 4); g.GetValue(5000); }
            SyncAll();
        });
    } else if (s == "lanewise_alias") {
        // In-place, overlapping and partly poisoned operands of the lane-wise ops (vector.h fast path and
        // per-lane loop must agree with sequential per-lane semantics).
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> ba, bb, bc; pipe.InitBuffer(ba, 64 * 4); pipe.InitBuffer(bb, 64 * 4); pipe.InitBuffer(bc, 64 * 4);
            LocalTensor<float> a = ba.Get<float>(), b = bb.Get<float>(), c = bc.Get<float>();
            for (int i = 0; i < 40; ++i) a.SetValue(i, float(i + 1));
            for (int i = 0; i < 64; ++i) b.SetValue(i, 0.5f * float(i));
            Sync<HardEvent::S_V>();
            auto dump = [](const char* tag, const LocalTensor<float>& t, int n) {
                std::vector<float> v;
                for (int i = 0; i < n; ++i) { bool ok = true; float x = t.Ld(i, ok); v.push_back(ok ? x : -999.0f); }
                Vals(tag, v);
            };
            Mul(c, a, b, 48);             // lanes 40..47 of a unwritten -> poisoned in c
            dump("mul", c, 48);
            PipeBarrier<PIPE_V>();
            Add(b, b, a, 36);             // in place (dst == src0)
            dump("add_inplace", b, 36);
            PipeBarrier<PIPE_V>();
            Adds(a[8], a, 1.0f, 24);      // dst overlaps src, 8 lanes ahead: sequential semantics
            dump("adds_overlap", a, 40);
            PipeBarrier<PIPE_V>();
            Cast(b.ReinterpretCast<half>(), b, RoundMode::CAST_RINT, 32);   // float -> half at the same address
            Sync<HardEvent::V_S>();
            LocalTensor<half> h = b.ReinterpretCast<half>();
            std::vector<float> hv;
            for (int i = 0; i < 32; ++i) hv.push_back(float(h.GetValue(i)));
            Vals("cast_same_addr", hv);
        });
    } else if (s == "tiling_key_no_branch") {
        r = emu::Launch(2, kUb, [&] {
            if (TILING_KEY_IS(1)) {
                SyncAll();
            } else if (TILING_KEY_IS(2)) {
                SyncAll();
            }
        }, 7);
    } else if (s == "trap_aborts_barrier") {
        r = emu::Launch(4, kUb, [&] {
            if (GetBlockIdx() == 2) Trap();
            SyncAll();
        });
    } else if (s == "bf16_cast_none") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256);
            LocalTensor<float> s = a.Get<float>(); Duplicate(s, 1.5f, 64);
            Cast(b.Get<bfloat16_t>(), s, RoundMode::CAST_NONE, 64);
        });
    } else if (s == "strided_roundtrip") {
        // 6 rows of 13 floats out of a 20-float-pitch GM matrix: GM stride 7*4 bytes, UB stride 1 block.
        // Each 52-B row is padded to 64 B in UB, then a 1-block gap: row pitch 96 B = 24 floats.
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q; pipe.InitBuffer(q, 1, 6 * 96);
            GlobalTensor<float> gx, gy; gx.SetGlobalBuffer(x.data(), 1024); gy.SetGlobalBuffer(y.data(), 1024);
            LocalTensor<float> t = q.AllocTensor<float>();
            DataCopyPad(t, gx[3], DataCopyExtParams(6, 13 * 4, 7 * 4, 1, 0), DataCopyPadExtParams<float>(true, 0, 3, -7.0f));
            std::vector<float> ub;
            for (int i = 0; i < 24 * 2; ++i) {
                bool ok = true; float v = t.Ld(i, ok); ub.push_back(ok ? v : -999.0f);
            }
            Vals("ub", ub);
            // Out again: UB stride 1 block (gap), GM gap 7 floats -> same layout as the source.
            Sync<HardEvent::MTE2_MTE3>();
            DataCopyPad(gy[3], t, DataCopyExtParams(6, 13 * 4, 1, 7 * 4, 0));
        });
        std::vector<float> out(y.begin(), y.begin() + 130);
        Vals("y", out);
    } else if (s == "leftpad") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 64);
            GlobalTensor<float> gx; gx.SetGlobalBuffer(x.data(), 1024);
            LocalTensor<float> t = b.Get<float>();
            DataCopyPad(t, gx[10], DataCopyExtParams(1, 3 * 4, 0, 0, 0), DataCopyPadExtParams<float>(true, 2, 3, 5.0f));
            std::vector<float> ub;
            for (int i = 0; i < 16; ++i) { bool ok = true; float v = t.Ld(i, ok); ub.push_back(ok ? v : -999.0f); }
            Vals("ub", ub);
        });
    } else if (s == "brcb") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b; pipe.InitBuffer(a, 64); pipe.InitBuffer(b, 4096);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            for (int i = 0; i < 16; ++i) src.SetValue(i, float(i + 1));
            Sync<HardEvent::S_V>();
            Duplicate(dst, 0.0f, 1024);
            PipeBarrier<PIPE_V>();
            Brcb(dst, src, 2, BrcbRepeatParams(2, 20));   // blocks at r*20 + j*2
            Sync<HardEvent::V_S>();
            std::vector<float> v;
            for (int i = 0; i < 40 * 8; ++i) v.push_back(dst.GetValue(i));
            Vals("dst", v);
        });
    } else if (s == "gather") {
        // float and half: a pair swap of 12 lanes with srcBaseAddr 0, a half swap read from base byte 64,
        // lanes past count untouched, a poisoned source lane poisons its destination lane only.
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b, o, h; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 256);
            pipe.InitBuffer(h, 256);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            for (int i = 0; i < 32; ++i) src.SetValue(i, float(i + 1));
            Duplicate(dst, -5.0f, 64);
            for (int j = 0; j < 12; ++j) off.SetValue(j, uint32_t((j ^ 1) * 4));
            Sync<HardEvent::S_V>();
            PipeBarrier<PIPE_V>();
            Gather(dst, src, off, 0, 12);
            Sync<HardEvent::V_S>();
            std::vector<float> v;
            for (int i = 0; i < 16; ++i) v.push_back(dst.GetValue(i));
            Vals("pair", v);
            for (int j = 0; j < 6; ++j) off.SetValue(j, uint32_t(((j + 3) % 6) * 4));
            Sync<HardEvent::S_V>();
            Gather(dst, src, off, 64, 6);   // base byte 64 = element 16
            Sync<HardEvent::V_S>();
            v.clear();
            for (int i = 0; i < 8; ++i) v.push_back(dst.GetValue(i));
            Vals("half", v);
            LocalTensor<half> hs = h.Get<half>(), hd = b.Get<half>();
            for (int i = 0; i < 8; ++i) hs.SetValue(i, half(float(i) * 0.5f));
            for (int j = 0; j < 8; ++j) off.SetValue(j, uint32_t((7 - j) * 2));
            Sync<HardEvent::S_V>();
            Gather(hd, hs, off, 0, 8);
            Sync<HardEvent::V_S>();
            v.clear();
            for (int i = 0; i < 8; ++i) v.push_back(float(hd.GetValue(i)));
            Vals("rev16", v);
        });
    } else if (s == "gather_poison_lane") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b, o; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 256);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            for (int i = 0; i < 4; ++i) src.SetValue(i, float(i));   // src[4..] unwritten
            for (int j = 0; j < 8; ++j) off.SetValue(j, uint32_t(j * 4));
            Sync<HardEvent::S_V>();
            Gather(dst, src, off, 0, 8);
            Sync<HardEvent::V_S>();
            std::printf("val lane3 %g\n", dst.GetValue(3));
            (void)dst.GetValue(4);   // poisoned: fault
        });
    } else if (s == "gather_misaligned") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b, o; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 256);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            Duplicate(src, 1.0f, 64);
            for (int j = 0; j < 8; ++j) off.SetValue(j, uint32_t(j * 4 + (j == 5 ? 2 : 0)));
            Sync<HardEvent::S_V>();
            PipeBarrier<PIPE_V>();
            Gather(dst, src, off, 0, 8);
        });
    } else if (s == "gather_oob") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b, o; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 256);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            Duplicate(src, 1.0f, 64);
            for (int j = 0; j < 8; ++j) off.SetValue(j, uint32_t(j * 4));
            Sync<HardEvent::S_V>();
            PipeBarrier<PIPE_V>();
            Gather(dst, src, off, 240, 8);   // lane 4 reads byte 256: past the 64-element tensor
        });
    } else if (s == "gather_inplace") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, o; pipe.InitBuffer(a, 256); pipe.InitBuffer(o, 256);
            LocalTensor<float> src = a.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            Duplicate(src, 1.0f, 64);
            for (int j = 0; j < 8; ++j) off.SetValue(j, uint32_t((j ^ 1) * 4));
            Sync<HardEvent::S_V>();
            PipeBarrier<PIPE_V>();
            Gather(src, src, off, 0, 8);
        });
    } else if (s == "gather_poison_offset") {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe; TBuf<> a, b, o; pipe.InitBuffer(a, 256); pipe.InitBuffer(b, 256); pipe.InitBuffer(o, 256);
            LocalTensor<float> src = a.Get<float>(), dst = b.Get<float>();
            LocalTensor<uint32_t> off = o.Get<uint32_t>();
            Duplicate(src, 1.0f, 64);
            for (int j = 0; j < 6; ++j) off.SetValue(j, uint32_t(j * 4));   // off[6], off[7] unwritten
            Sync<HardEvent::S_V>();
            PipeBarrier<PIPE_V>();
            Gather(dst, src, off, 0, 8);
        });
    } else if (s == "atomic_syncall") {
        // 8 cores: core 0 zeroes y[0..64), SyncAll, every core atomically adds (c+1)*(i+1) to y[i].
        // Expected y[i] = 36*(i+1) exactly (small integers in float).
        r = emu::Launch(8, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 256);
            GlobalTensor<float> gy; gy.SetGlobalBuffer(y.data(), 64);
            LocalTensor<float> t = b.Get<float>();
            if (GetBlockIdx() == 0) { Duplicate(t, 0.0f, 64); Sync<HardEvent::V_MTE3>(); DataCopy(gy, t, 64); }
            SyncAll();
            for (int i = 0; i < 64; ++i) t.SetValue(i, float((GetBlockIdx() + 1) * (i + 1)));
            for (int rep = 0; rep < 20; ++rep) {
                SyncAll();
                SetAtomicAdd<float>();
                DataCopyPad(gy, t, DataCopyExtParams(1, 64 * 4, 0, 0, 0));
                SetAtomicNone();
            }
        });
        Vals("y", std::vector<float>(y.begin(), y.begin() + 64));
    } else if (s == "gm_counters") {
        // 4 cores, each reads its 256-float slice in tiles of 100 floats (tail 56) and writes it back out.
        r = emu::Launch(4, kUb, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> qi; TQue<QuePosition::VECOUT, 1> qo;
            pipe.InitBuffer(qi, 2, 400); pipe.InitBuffer(qo, 2, 400);
            GlobalTensor<float> gx, gy;
            gx.SetGlobalBuffer(x.data() + 256 * GetBlockIdx(), 256);
            gy.SetGlobalBuffer(y.data() + 256 * GetBlockIdx(), 256);
            for (int off = 0; off < 256; off += 100) {
                uint32_t n = std::min(100, 256 - off);
                auto a = qi.AllocTensor<float>();
                DataCopyPad(a, gx[off], DataCopyExtParams(1, n * 4, 0, 0, 0), DataCopyPadExtParams<float>());
                qi.EnQue(a); a = qi.DeQue<float>();
                auto o = qo.AllocTensor<float>();
                Muls(o, a, 2.0f, n);
                qo.EnQue(o); qi.FreeTensor(a);
                o = qo.DeQue<float>();
                DataCopyPad(gy[off], o, DataCopyExtParams(1, n * 4, 0, 0, 0));
                qo.FreeTensor(o);
            }
            if (GetBlockIdx() == 3) { GlobalTensor<float> g; g.SetGlobalBuffer(x.data(), 1024); (void)g.GetValue(7); }
        });
        float mx = 0; for (int i = 0; i < 1024; ++i) mx = std::max(mx, std::fabs(y[i] - 2 * x[i]));
        Vals("maxerr", {mx});
    } else if (s == "tiling") {
        struct TD { int64_t a; int64_t b; } td{7, 11};
        emu::RegisterGm(&td, sizeof(td), "tiling");
        r = emu::Launch(2, kUb, [&] {
            GM_ADDR tiling = reinterpret_cast<GM_ADDR>(&td);
            GET_TILING_DATA_WITH_STRUCT(TD, t, tiling);
            if (GetBlockIdx() == 0) std::printf("val td %lld %lld %d %d %lld\n", (long long)t.a, (long long)t.b,
                                                 int(TILING_KEY_IS(42)), int(TILING_KEY_IS(1)), (long long)GetBlockNum());
            PipeBarrier<PIPE_V>(); SetFlag<HardEvent::V_MTE3>(EVENT_ID0); WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
        }, 42);
    } else if (s == "outside_launch") {
        try { TPipe p; std::printf("val outside no-fault\n"); }
        catch (const emu::EmuFault& e) { std::printf("val outside fault\n"); }
        return 0;
    } else {
        std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
        return 2;
    }
    std::fflush(stdout);
    emu::PrintReport(r);
    return 0;
}
