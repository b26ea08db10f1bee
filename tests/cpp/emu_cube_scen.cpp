// Scenario driver for tests/test_emu_cube.py: `emu_cube_scen NAME [ARGS...]` runs one small cube or mix
// kernel on the emulation and prints the launch report (emu::PrintReport) plus "val TAG v..." lines.
// Layout dumps read the simulated L1/L0 bytes through the LocalTensor internals (Arena()): test-only access.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;
static const emu::CoreMem kMem = emu::CoreMem::Ascend910B();
static std::mutex gPrint;

template <typename T>
static void Vals(const char* tag, const std::vector<T>& v)
{
    std::lock_guard<std::mutex> l(gPrint);
    std::printf("val %s", tag);
    for (const T& x : v) std::printf(" %.9g", double(x));
    std::printf("\n");
}
// Dump `n` 16-bit elements of a local tensor: raw bits and the written map ("-1" = unwritten).
static void DumpB16(const char* tag, const LocalTensor<half>& t, uint32_t n)
{
    const emu::UbArena* a = t.Arena();
    std::vector<int> v(n);
    for (uint32_t i = 0; i < n; ++i) {
        uint64_t at = t.Offset() + 2 * i;
        v[i] = a->IsWritten(at, 2) ? int(a->data[at] | (a->data[at + 1] << 8)) : -1;
    }
    Vals(tag, v);
}

// The pipe synchronisation between a producer and a consumer pipe (docs/reference/ascendc.md §1.6, §1.10): the
// race detector of emu/pipes.h faults without it.
template <HardEvent E>
static void Sync()
{
    SetFlag<E>(EVENT_ID0);
    WaitFlag<E>(EVENT_ID0);
}

// One 16 x K times K x N (N, K multiples of 16) f16 matmul on the calling AIC: X (row pitch ldx) from GM, W stored
// [N][K] (Q·Kᵀ style), fp32 result into GM with row pitch ldc.
static void CubeTile(TPipe& pipe, const GlobalTensor<half>& x, uint32_t ldx, const GlobalTensor<half>& w,
                     const GlobalTensor<float>& c, uint32_t ldc, uint32_t K, uint32_t N)
{
    TBuf<TPosition::A1> a1; TBuf<TPosition::B1> b1; TBuf<TPosition::A2> a2; TBuf<TPosition::B2> b2;
    TBuf<TPosition::CO1> c1;
    pipe.InitBuffer(a1, 16 * K * 2); pipe.InitBuffer(b1, N * K * 2);
    pipe.InitBuffer(a2, 16 * K * 2); pipe.InitBuffer(b2, N * K * 2); pipe.InitBuffer(c1, 16 * N * 4);
    auto l1a = a1.Get<half>(); auto l1b = b1.Get<half>(); auto l0a = a2.Get<half>(); auto l0b = b2.Get<half>();
    auto l0c = c1.Get<float>();
    DataCopy(l1a, x, Nd2NzParams(1, 16, K, 0, ldx, 16, 1, 0));
    DataCopy(l1b, w, Nd2NzParams(1, N, K, 0, K, N, 1, 0));
    Sync<HardEvent::MTE2_MTE1>();
    LoadData(l0a, l1a, LoadData2DParams(0, K / 16, 1, 0, 0, false, 0));
    LoadData(l0b, l1b, LoadData2DParams(0, (K / 16) * (N / 16), 1, 0, 0, false, 0));
    Sync<HardEvent::MTE1_M>();
    Mmad(l0c, l0a, l0b, MmadParams(16, N, K, 0, false, true));
    Sync<HardEvent::M_FIX>();
    Fixpipe<float, float, CFG_ROW_MAJOR>(c, l0c, FixpipeParamsV220(N, 16, 16, ldc, false));
    PipeBarrier<PIPE_ALL>();   // every buffer of the tile is free again for the caller's next tile
}

static void PrintIndex()
{
    std::lock_guard<std::mutex> l(gPrint);
    std::printf("val idx %s %lld %lld %lld %lld %lld %d %d\n", ::emu::IsAicCore() ? "AIC" : "AIV", (long long)GetBlockIdx(),
                (long long)GetBlockNum(), (long long)GetSubBlockIdx(), (long long)GetSubBlockNum(),
                (long long)GetTaskRatio(), int(::emu::IsAivCore()), int(::emu::IsAicCore()));
}

int main(int argc, char** argv)
{
    std::string s = argc > 1 ? argv[1] : "";
    auto arg = [&](int i) { return std::atoi(argv[i]); };
    emu::LaunchResult r;
    std::vector<half> xh(64 * 64), wh(64 * 64);
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = half(float(int(i % 7) - 3) * 0.25f);
    for (size_t i = 0; i < wh.size(); ++i) wh[i] = half(float(int(i % 5) - 2) * 0.5f);
    std::vector<float> ws(8 * 16 * 64, -777.0f), out(8 * 16 * 64, -999.0f);
    emu::RegisterGm(xh.data(), xh.size() * 2, "x");
    emu::RegisterGm(wh.data(), wh.size() * 2, "w");
    emu::RegisterGm(ws.data(), ws.size() * 4, "ws");
    emu::RegisterGm(out.data(), out.size() * 4, "out");
    GlobalTensor<half> gx, gw;
    GlobalTensor<float> gws, gout;
    auto bind = [&] {
        gx.SetGlobalBuffer(xh.data(), xh.size()); gw.SetGlobalBuffer(wh.data(), wh.size());
        gws.SetGlobalBuffer(ws.data(), ws.size()); gout.SetGlobalBuffer(out.data(), out.size());
    };

    // ------------------------------------------------------------ layouts
    if (s == "nz_layout") {   // nz_layout ndNum nValue dValue srcNdMatrixStride srcDValue c0Stride nStride matStride
        std::vector<half> src(4096);
        for (size_t i = 0; i < src.size(); ++i) src[i] = half::FromBits(uint16_t(1 + i));
        emu::RegisterGm(src.data(), src.size() * 2, "src");
        Nd2NzParams p(arg(2), arg(3), arg(4), arg(5), arg(6), arg(7), arg(8), arg(9));
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; pipe.InitBuffer(a1, 16384);
            GlobalTensor<half> g; g.SetGlobalBuffer(src.data(), src.size());
            auto t = a1.Get<half>();
            DataCopy(t, g, p);
            DumpB16("l1", t, 8192);
        });
    } else if (s == "load_layout") {   // load_layout dstPos(A|B) startIndex repeat srcStride dstGap transpose
        std::vector<half> src(32 * 48);
        for (size_t i = 0; i < src.size(); ++i) src[i] = half::FromBits(uint16_t(1 + i));
        emu::RegisterGm(src.data(), src.size() * 2, "src");
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::A2> a2; TBuf<TPosition::B2> b2;
            pipe.InitBuffer(a1, 32 * 48 * 2); pipe.InitBuffer(a2, 16384); pipe.InitBuffer(b2, 16384);
            GlobalTensor<half> g; g.SetGlobalBuffer(src.data(), src.size());
            auto l1 = a1.Get<half>();
            DataCopy(l1, g, Nd2NzParams(1, 32, 48, 0, 48, 32, 1, 0));   // 6 fractals: (r1, c1) at c1*2 + r1
            Sync<HardEvent::MTE2_MTE1>();
            auto dst = argv[2][0] == 'A' ? a2.Get<half>() : b2.Get<half>();
            LoadData(dst, l1, LoadData2DParams(arg(3), arg(4), arg(5), 0, arg(6), arg(7) != 0, 0));
            DumpB16("l0", dst, 8192);
        });

    // ------------------------------------------------------------ faults
    } else if (s == "l0a_overflow") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TQue<TPosition::A2, 1> q; pipe.InitBuffer(q, 2, 40 * 1024);
        });
    } else if (s == "l1_overflow") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a; TBuf<TPosition::B1> b;
            pipe.InitBuffer(a, 300 * 1024); pipe.InitBuffer(b, 300 * 1024);
        });
    } else if (s == "l0c_overflow") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::CO1> c; pipe.InitBuffer(c, 128 * 1024 + 32);
        });
    } else if (s == "bt_overflow") {   // the bias table is 1 KB per AIC on arch 2201
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::C2> bt; pipe.InitBuffer(bt, 1024 + 64);
        });
    } else if (s == "bias_bf16") {   // arch 2201's L1 -> bias table converts half only
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::C1> c1; TBuf<TPosition::C2> c2;
            pipe.InitBuffer(c1, 256); pipe.InitBuffer(c2, 256);
            DataCopy(c2.Get<float>(), c1.Get<bfloat16_t>(), DataCopyParams(1, 1, 0, 0));
        });
    } else if (s == "mmad_bias") {   // mmad_bias BIASKIND(h|f): 16 x 32 x 32 f16 + a bias row of 32 through C1 -> C2
        const bool halfBias = argv[2][0] == 'h';
        std::vector<half> bh(32);
        std::vector<float> bf(32);
        for (int j = 0; j < 32; ++j) { bh[j] = half(float(j - 16) * 0.125f); bf[j] = float(j - 16) * 0.375f; }
        emu::RegisterGm(bh.data(), bh.size() * 2, "bh");
        emu::RegisterGm(bf.data(), bf.size() * 4, "bf");
        bind();
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::B1> b1; TBuf<TPosition::A2> a2;
            TBuf<TPosition::B2> b2; TBuf<TPosition::CO1> c1; TBuf<TPosition::C1> l1b; TBuf<TPosition::C2> bt;
            pipe.InitBuffer(a1, 4096); pipe.InitBuffer(b1, 4096); pipe.InitBuffer(a2, 4096);
            pipe.InitBuffer(b2, 4096); pipe.InitBuffer(c1, 8192); pipe.InitBuffer(l1b, 128); pipe.InitBuffer(bt, 128);
            auto l1a = a1.Get<half>(), l1w = b1.Get<half>(), l0a = a2.Get<half>(), l0b = b2.Get<half>();
            DataCopy(l1a, gx, Nd2NzParams(1, 16, 32, 0, 64, 16, 1, 0));   // A = x[0:16, 0:32]
            DataCopy(l1w, gw, Nd2NzParams(1, 32, 32, 0, 64, 32, 1, 0));   // B stored [n][k] = w[0:32, 0:32]
            if (halfBias) {
                GlobalTensor<half> g; g.SetGlobalBuffer(bh.data(), bh.size());
                DataCopy(l1b.Get<half>(), g, Nd2NzParams(1, 1, 32, 0, 32, 1, 1, 0));
            } else {
                GlobalTensor<float> g; g.SetGlobalBuffer(bf.data(), bf.size());
                DataCopy(l1b.Get<float>(), g, Nd2NzParams(1, 1, 32, 0, 32, 1, 1, 0));
            }
            Sync<HardEvent::MTE2_MTE1>();
            LoadData(l0a, l1a, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
            LoadData(l0b, l1w, LoadData2DParams(0, 4, 1, 0, 0, false, 0));
            if (halfBias) DataCopy(bt.Get<float>(), l1b.Get<half>(), DataCopyParams(1, 1, 0, 0));    // 64 B of half
            else DataCopy(bt.Get<float>(), l1b.Get<float>(), DataCopyParams(1, 2, 0, 0));            // 128 B of float
            Sync<HardEvent::MTE1_M>();
            Mmad(c1.Get<float>(), l0a, l0b, bt.Get<float>(), MmadParams(16, 32, 32, 0, false, false));
            Sync<HardEvent::M_FIX>();
            Fixpipe<float, float, CFG_ROW_MAJOR>(gout, c1.Get<float>(), FixpipeParamsV220(32, 16, 16, 32, false));
            PipeBarrier<PIPE_ALL>();
            std::vector<float> o(out.begin(), out.begin() + 16 * 32);
            Vals("c", o);
            std::vector<float> b(32);
            for (int j = 0; j < 32; ++j) b[j] = halfBias ? float(bh[j]) : bf[j];
            Vals("bias", b);
        });
    } else if (s == "l0c_fits_950") {
        r = emu::LaunchCube(1, emu::CoreMem::Ascend950(), [&] {
            TPipe pipe; TBuf<TPosition::CO1> c; pipe.InitBuffer(c, 256 * 1024);
            std::printf("val used %llu\n", (unsigned long long)pipe.UsedBytes());
        });
    } else if (s == "misaligned_fractal") {
        bind();
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::A2> a2;
            pipe.InitBuffer(a1, 4096); pipe.InitBuffer(a2, 4096);
            auto l1 = a1.Get<half>();
            DataCopy(l1, gx, Nd2NzParams(1, 16, 32, 0, 64, 16, 1, 0));
            LoadData(a2.Get<half>()[16], l1, LoadData2DParams(0, 2, 1, 0, 0, false, 0));   // L0A byte 32
        });
    } else if (s == "misaligned_mmad") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A2> a2; TBuf<TPosition::B2> b2; TBuf<TPosition::CO1> c1;
            pipe.InitBuffer(a2, 4096); pipe.InitBuffer(b2, 4096); pipe.InitBuffer(c1, 8192);
            Mmad(c1.Get<float>()[64], a2.Get<half>(), b2.Get<half>(), MmadParams(16, 16, 16, 0, false, true));
        });
    } else if (s == "mmad_wrong_buffer") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::B2> b2; TBuf<TPosition::CO1> c1;
            pipe.InitBuffer(a1, 4096); pipe.InitBuffer(b2, 4096); pipe.InitBuffer(c1, 8192);
            Mmad(c1.Get<float>(), a1.Get<half>(), b2.Get<half>(), MmadParams(16, 16, 16, 0, false, true));
        });
    } else if (s == "l0c_unwritten" || s == "l0c_beyond") {
        bind();
        bool accumulateFirst = s == "l0c_unwritten";
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::B1> b1; TBuf<TPosition::A2> a2;
            TBuf<TPosition::B2> b2; TBuf<TPosition::CO1> c1;
            pipe.InitBuffer(a1, 4096); pipe.InitBuffer(b1, 4096); pipe.InitBuffer(a2, 4096);
            pipe.InitBuffer(b2, 4096); pipe.InitBuffer(c1, 8192);
            auto l1a = a1.Get<half>(), l1b = b1.Get<half>(), l0a = a2.Get<half>(), l0b = b2.Get<half>();
            DataCopy(l1a, gx, Nd2NzParams(1, 16, 32, 0, 64, 16, 1, 0));
            DataCopy(l1b, gw, Nd2NzParams(1, 16, 32, 0, 64, 16, 1, 0));
            Sync<HardEvent::MTE2_MTE1>();
            LoadData(l0a, l1a, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
            LoadData(l0b, l1b, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
            Sync<HardEvent::MTE1_M>();
            // the first k step must initialise L0C (cmatrixInitVal=true); l0c_unwritten forgets it
            Mmad(c1.Get<float>(), l0a, l0b, MmadParams(16, 16, 32, 0, false, !accumulateFirst));
            Sync<HardEvent::M_FIX>();
            uint16_t nSize = accumulateFirst ? 16 : 32;   // l0c_beyond reads columns the Mmad (n=16) never wrote
            Fixpipe<float, float, CFG_ROW_MAJOR>(gout, c1.Get<float>(), FixpipeParamsV220(nSize, 16, 16, 64, false));
        });
    } else if (s == "nd2nz_overlap") {
        bind();
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; pipe.InitBuffer(a1, 8192);
            DataCopy(a1.Get<half>(), gx, Nd2NzParams(1, 20, 32, 0, 64, 8, 1, 0));   // c0Stride 8 < 20 rows
        });
    } else if (s == "fixpipe_quant") {
        std::vector<half> oh(256);
        emu::RegisterGm(oh.data(), oh.size() * 2, "oh");
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::CO1> c1; pipe.InitBuffer(c1, 1024);
            GlobalTensor<half> g; g.SetGlobalBuffer(oh.data(), oh.size());
            Fixpipe<half, float, CFG_ROW_MAJOR>(g, c1.Get<float>(), FixpipeParamsV220(16, 16, 16, 16, false));
        });
    } else if (s == "transpose_float") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1; TBuf<TPosition::B2> b2;
            pipe.InitBuffer(a1, 4096); pipe.InitBuffer(b2, 4096);
            LoadData(b2.Get<float>(), a1.Get<float>(), LoadData2DParams(0, 1, 1, 0, 0, true, 0));
        });
    } else if (s == "transpose_square_half") {   // LoadDataWithTranspose: int8 squares only are modelled
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::B1> b1; TBuf<TPosition::B2> b2;
            pipe.InitBuffer(b1, 4096); pipe.InitBuffer(b2, 4096);
            LoadDataWithTranspose(b2.Get<half>(), b1.Get<half>(), LoadData2dTransposeParams(0, 1, 1, 0, 0));
        });
    } else if (s == "transpose_square_gap0") {   // a square is two fractals: dstGap 0 overlaps the next square
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::B1> b1; TBuf<TPosition::B2> b2;
            pipe.InitBuffer(b1, 4096); pipe.InitBuffer(b2, 4096);
            LoadDataWithTranspose(b2.Get<int8_t>(), b1.Get<int8_t>(), LoadData2dTransposeParams(0, 2, 1, 0, 0));
        });
    } else if (s == "transpose_square_misaligned") {
        r = emu::LaunchCube(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::B1> b1; TBuf<TPosition::B2> b2;
            pipe.InitBuffer(b1, 4096); pipe.InitBuffer(b2, 4096);
            LoadDataWithTranspose(b2.Get<int8_t>()[32], b1.Get<int8_t>(), LoadData2dTransposeParams(0, 1, 1, 1, 0));
        });
    } else if (s == "aiv_touches_l1") {
        r = emu::LaunchMix(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1;
            if ASCEND_IS_AIV { pipe.InitBuffer(a1, 1024); }
        });
    } else if (s == "aic_touches_ub") {
        r = emu::LaunchMix(1, kMem, [&] {
            TPipe pipe; TQue<QuePosition::VECIN, 1> q;
            if ASCEND_IS_AIC { pipe.InitBuffer(q, 1, 1024); }
        });
    } else if (s == "aiv_launch_l0a") {
        r = emu::Launch(1, kMem.ub, [&] { TPipe pipe; TBuf<TPosition::A2> a2; pipe.InitBuffer(a2, 512); });
    } else if (s == "foreign_tensor") {
        LocalTensor<half> shared;
        r = emu::LaunchMix(1, kMem, [&] {
            TPipe pipe; TBuf<TPosition::A1> a1;
            if ASCEND_IS_AIC {
                pipe.InitBuffer(a1, 1024);
                shared = a1.Get<half>();
                shared.SetValue(0, half(1.0f));
                CrossCoreSetFlag<2, PIPE_MTE2>(4);
                CrossCoreWaitFlag(5);   // keep the L1 alive until the AIVs are done
            } else {
                CrossCoreWaitFlag(4);
                if (GetSubBlockIdx() == 0) std::printf("val got %g\n", float(shared.GetValue(0)));
                CrossCoreSetFlag<2, PIPE_MTE3>(5);
            }
        });
    } else if (s == "deadlock_wait") {   // the AIC returns without ever setting flag 3
        r = emu::LaunchMix(2, kMem, [&] { if ASCEND_IS_AIV { CrossCoreWaitFlag(3); } });
    } else if (s == "deadlock_cycle") {   // AIC waits for its AIVs, the AIVs wait for the AIC: nobody returns
        r = emu::LaunchMix(1, kMem, [&] {
            if ASCEND_IS_AIC { CrossCoreWaitFlag(1); CrossCoreSetFlag<2, PIPE_FIX>(2); }
            else { CrossCoreWaitFlag(2); CrossCoreSetFlag<2, PIPE_MTE3>(1); }
        });
    } else if (s == "deadlock_half_set") {   // only sub-block 0 sets the mode-2 flag the AIC waits for
        r = emu::LaunchMix(1, kMem, [&] {
            if ASCEND_IS_AIC { CrossCoreWaitFlag(0); }
            else if (GetSubBlockIdx() == 0) { CrossCoreSetFlag<2, PIPE_MTE3>(0); }
        });
    } else if (s == "deadlock_syncall_vs_flag") {
        r = emu::LaunchMix(1, kMem, [&] {
            if ASCEND_IS_AIC { SyncAll<false>(); CrossCoreSetFlag<2, PIPE_FIX>(1); }
            else { CrossCoreWaitFlag(1); SyncAll<false>(); }
        });
    } else if (s == "wait_timeout") {
        emu::WaitTimeoutSeconds() = 0.3;
        r = emu::LaunchMix(1, kMem, [&] {
            if ASCEND_IS_AIC { CrossCoreWaitFlag(1); }
            else {   // busy elsewhere (never blocked, never sets the flag) until the AIC's wait has timed out
                emu::LaunchState& st = *emu::Core().launch;   // test-only peek at the launch state
                for (int i = 0; i < 1000; ++i) {
                    { std::lock_guard<std::mutex> l(st.mu); if (st.aborted) break; }
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                }
            }
        });
    } else if (s == "flag_range") {
        r = emu::LaunchMix(1, kMem, [&] { if ASCEND_IS_AIC { CrossCoreSetFlag<2, PIPE_FIX>(11); } });
    } else if (s == "flag_pipe") {
        r = emu::LaunchMix(1, kMem, [&] { if ASCEND_IS_AIV { CrossCoreSetFlag<2, PIPE_FIX>(1); } });
    } else if (s == "flag_overflow") {   // 16 sets, no wait: the AIVs' counters pass 15
        r = emu::LaunchMix(1, kMem, [&] { if ASCEND_IS_AIC { for (int i = 0; i < 16; ++i) CrossCoreSetFlag<2, PIPE_FIX>(2); } });
    } else if (s == "mode2_aiv_only") {
        r = emu::Launch(2, kMem.ub, [&] { CrossCoreSetFlag<2, PIPE_MTE3>(1); });
    } else if (s == "kernel_type") {
        r = emu::Launch(1, kMem.ub, [&] { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2); });
    } else if (s == "kernel_type_of_key") {   // key 12 declared AIC only, launched with LaunchMix: a fault
        r = emu::LaunchMix(1, kMem, [&] {
            KERNEL_TASK_TYPE(12, KERNEL_TYPE_AIC_ONLY);
            KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
        }, 12);
    } else if (s == "kernel_type_by_key_ok") {   // key 12 AIC only by its own declaration, key 11 mixed by default
        r = emu::LaunchCube(1, kMem, [&] {
            KERNEL_TASK_TYPE(12, KERNEL_TYPE_AIC_ONLY);
            KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
        }, 12);
        if (r.ok) {
            r = emu::LaunchMix(1, kMem, [&] {
                KERNEL_TASK_TYPE(12, KERNEL_TYPE_AIC_ONLY);
                KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
            }, 11);
        }
    } else if (s == "syncall_aic_true") {
        r = emu::LaunchMix(1, kMem, [&] { SyncAll(); });

    // ------------------------------------------------------------ mixed kernels
    } else if (s == "mix_index") {
        r = emu::LaunchMix(3, kMem, [&] { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2); PrintIndex(); });
    } else if (s == "aiv_index") {
        r = emu::Launch(2, kMem.ub, [&] { KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY); PrintIndex(); });
        Vals("outside", std::vector<int>{int(::emu::IsAivCore()), int(::emu::IsAicCore())});
    } else if (s == "cube_index") {
        r = emu::LaunchCube(2, kMem, [&] { PrintIndex(); });
    } else if (s == "mix_c2v") {
        // AIC c: ws[c] = X[16c:16c+16, 0:32] · Wᵀ (16 x 32, fp32), then signal; AIV sub s of core c waits, takes rows
        // 8s..8s+8 of ws[c] through UB, doubles them and writes out[c] rows. The AIC sleeps first so an AIV that
        // did not really wait would read the -777 fill.
        bind();
        r = emu::LaunchMix(2, kMem, [&] {
            KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
            TPipe pipe;
            if ASCEND_IS_AIC {
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                const int c = GetBlockIdx();
                CubeTile(pipe, gx[c * 16 * 64], 64, gw, gws[c * 16 * 32], 32, 32, 32);
                CrossCoreSetFlag<2, PIPE_FIX>(1);
            }
            if ASCEND_IS_AIV {
                const int c = GetBlockIdx() / GetTaskRatio(), sub = GetSubBlockIdx();
                TQue<QuePosition::VECIN, 1> qi; TQue<QuePosition::VECOUT, 1> qo;
                pipe.InitBuffer(qi, 1, 8 * 32 * 4); pipe.InitBuffer(qo, 1, 8 * 32 * 4);
                CrossCoreWaitFlag(1);
                auto t = qi.AllocTensor<float>();
                DataCopy(t, gws[c * 16 * 32 + sub * 8 * 32], 8 * 32);
                qi.EnQue(t); t = qi.DeQue<float>();
                auto o = qo.AllocTensor<float>();
                Muls(o, t, 2.0f, 8 * 32);
                qo.EnQue(o); o = qo.DeQue<float>();
                DataCopy(gout[c * 16 * 32 + sub * 8 * 32], o, 8 * 32);
                qi.FreeTensor(t); qo.FreeTensor(o);
            }
        });
        Vals("out", std::vector<float>(out.begin(), out.begin() + 2 * 16 * 32));
    } else if (s == "mix_v2c") {
        // AIV sub s of core c: rows 8s..8s+8 of Y_c = half(3 * X_c) (16 x 32) through UB into a GM workspace, then
        // signal; the AIC waits for both, loads Y_c with Nd2Nz and computes out[c] = Y_c · Wᵀ (16 x 32).
        std::vector<half> wsh(2 * 16 * 32, half::FromBits(0x7E00));
        emu::RegisterGm(wsh.data(), wsh.size() * 2, "wsh");
        bind();
        r = emu::LaunchMix(2, kMem, [&] {
            TPipe pipe;
            GlobalTensor<half> gwsh; gwsh.SetGlobalBuffer(wsh.data(), wsh.size());
            if ASCEND_IS_AIV {
                std::this_thread::sleep_for(std::chrono::milliseconds(30));
                const int c = GetBlockIdx() / 2, sub = GetSubBlockIdx();
                TBuf<> a, b, h; pipe.InitBuffer(a, 8 * 32 * 2); pipe.InitBuffer(b, 8 * 32 * 4); pipe.InitBuffer(h, 8 * 32 * 2);
                auto ta = a.Get<half>(); auto tb = b.Get<float>(); auto th = h.Get<half>();
                for (int row = 0; row < 8; ++row)
                    DataCopy(ta[row * 32], gx[(c * 16 + sub * 8 + row) * 64], 32);
                Sync<HardEvent::MTE2_V>();
                Cast(tb, ta, RoundMode::CAST_NONE, 8 * 32);
                PipeBarrier<PIPE_V>();
                Muls(tb, tb, 3.0f, 8 * 32);
                PipeBarrier<PIPE_V>();
                Cast(th, tb, RoundMode::CAST_RINT, 8 * 32);
                Sync<HardEvent::V_MTE3>();
                DataCopy(gwsh[c * 16 * 32 + sub * 8 * 32], th, 8 * 32);
                CrossCoreSetFlag<2, PIPE_MTE3>(0);
            }
            if ASCEND_IS_AIC {
                const int c = GetBlockIdx();
                CrossCoreWaitFlag(0);
                CubeTile(pipe, gwsh[c * 16 * 32], 32, gw, gout[c * 16 * 32], 32, 32, 32);
            }
        });
        Vals("out", std::vector<float>(out.begin(), out.begin() + 2 * 16 * 32));
    } else if (s == "mix_pingpong") {
        // NSA-style pipeline over 4 items with two workspace slots per AI Core: the AIC produces item i into slot
        // i%2 (waiting for the AIVs to free the slot from item i-2), the AIVs consume it (out = ws + i) and free it.
        const int items = 4;
        bind();
        r = emu::LaunchMix(2, kMem, [&] {
            TPipe pipe;
            if ASCEND_IS_AIC {
                const int c = GetBlockIdx();
                for (int i = 0; i < items; ++i) {
                    if (i >= 2) CrossCoreWaitFlag(0);   // slot i%2 released by both AIVs
                    TPipe step;
                    CubeTile(step, gx[(i % 4) * 16 * 64], 64, gw, gws[(c * 2 + i % 2) * 16 * 32], 32, 32, 32);
                    CrossCoreSetFlag<2, PIPE_FIX>(1);
                }
                CrossCoreWaitFlag(0);   // the releases of the last two items: every set is waited for by the end
                CrossCoreWaitFlag(0);
            } else {
                const int c = GetBlockIdx() / 2, sub = GetSubBlockIdx();
                TBuf<> b; pipe.InitBuffer(b, 8 * 32 * 4);
                auto t = b.Get<float>();
                for (int i = 0; i < items; ++i) {
                    CrossCoreWaitFlag(1);
                    DataCopy(t, gws[(c * 2 + i % 2) * 16 * 32 + sub * 8 * 32], 8 * 32);
                    Sync<HardEvent::MTE2_V>();
                    Adds(t, t, float(i), 8 * 32);
                    Sync<HardEvent::V_MTE3>();
                    DataCopy(gout[((c * items + i) * 16 + sub * 8) * 32], t, 8 * 32);
                    Sync<HardEvent::MTE3_MTE2>();   // t is reloaded by the next item
                    CrossCoreSetFlag<2, PIPE_MTE3>(0);
                }
            }
        });
        Vals("out", std::vector<float>(out.begin(), out.begin() + 2 * items * 16 * 32));
    } else if (s == "mix_modes") {
        // mode 1 (the AIV pair), mode 0 (all AIVs / all AICs), SyncAll<true> (AIVs) and SyncAll<false> (all).
        const int n = 3;
        std::vector<int32_t> g(64, -1);
        emu::RegisterGm(g.data(), g.size() * 4, "g");
        r = emu::LaunchMix(n, kMem, [&] {
            GlobalTensor<int32_t> t; t.SetGlobalBuffer(g.data(), g.size());
            const int b = GetBlockIdx();
            if ASCEND_IS_AIV {
                t.SetValue(b, 100 + b);                                    // slots 0..5
                CrossCoreSetFlag<1, PIPE_MTE3>(5); CrossCoreWaitFlag(5);   // the pair
                int partner = t.GetValue(b ^ 1);
                CrossCoreSetFlag<0, PIPE_MTE3>(6); CrossCoreWaitFlag(6);   // all AIVs
                int sum = 0; for (int v = 0; v < 2 * n; ++v) sum += t.GetValue(v);
                t.SetValue(16 + b, 1000 * partner + sum);
                SyncAll<true>();
                int sum2 = 0; for (int v = 0; v < 2 * n; ++v) sum2 += t.GetValue(16 + v);
                t.SetValue(32 + b, sum2);
            } else {
                t.SetValue(8 + b, 200 + b);                                // slots 8..10
                CrossCoreSetFlag<0, PIPE_FIX>(7); CrossCoreWaitFlag(7);    // all AICs
                int sum = 0; for (int c = 0; c < n; ++c) sum += t.GetValue(8 + c);
                t.SetValue(24 + b, sum);
            }
            SyncAll<false>();
            if (::emu::IsAicCore() && b == 0) {
                int total = 0; for (int v = 0; v < 2 * n; ++v) total += t.GetValue(32 + v);
                for (int c = 0; c < n; ++c) total += t.GetValue(24 + c);
                t.SetValue(48, total);
            }
        });
        Vals("g", g);
    } else if (s == "xsync") {   // xsync MODE WAITS: two sets of one flag, data written between them (see below)
        // A writer core stores d1 = workspace floats [0, 128) before its first CrossCoreSetFlag of a flag and d2 =
        // [512, 640) between its first and second; the reader waits WAITS (1 or 2) times, reads d2, then waits the
        // rest (the sets and waits pair either way). One wait is ordered after the first set only, so the read of
        // d2 races the second store; two waits order it. MODE: m0 (mode 0 over the 4 AIVs of LaunchMix(2): AIV 0
        // writes, AIV 3 reads), m1 (mode 1: AIV 0 writes, AIV 1 reads), m2v (mode 2, AIVs -> AIC: AIV 0 writes,
        // its AIC reads with Nd2Nz), m2c (mode 2, AIC -> AIVs: the AIC writes by Fixpipe, both AIVs read).
        const std::string mode = argv[2];
        const int waits = arg(3);
        std::vector<float> wsp(2048, 0.5f);
        emu::RegisterGm(wsp.data(), wsp.size() * 4, "workspace");
        bind();
        const bool m0 = mode == "m0";
        r = emu::LaunchMix(m0 ? 2 : 1, kMem, [&] {
            TPipe pipe;
            GlobalTensor<float> g; g.SetGlobalBuffer(wsp.data(), wsp.size());
            GlobalTensor<half> gh; gh.SetGlobalBuffer(reinterpret_cast<half*>(wsp.data()), wsp.size() * 2);
            const int b = GetBlockIdx();
            auto aivSet = [&] {
                if (mode == "m0") CrossCoreSetFlag<0, PIPE_MTE3>(6);
                else if (mode == "m1") CrossCoreSetFlag<1, PIPE_MTE3>(6);
                else CrossCoreSetFlag<2, PIPE_MTE3>(6);
            };
            auto aivWrite = [&] {   // d1, set, d2, set
                TBuf<> b1, b2; pipe.InitBuffer(b1, 512); pipe.InitBuffer(b2, 512);
                auto t1 = b1.Get<float>(); auto t2 = b2.Get<float>();
                Duplicate(t1, 1.0f, 128); Duplicate(t2, 2.0f, 128);
                Sync<HardEvent::V_MTE3>();
                DataCopy(g[0], t1, 128);
                aivSet();
                DataCopy(g[512], t2, 128);   // @xsync-w2 (d2)
                aivSet();
            };
            auto aivRead = [&] {   // wait(s), read d2, the other wait
                TBuf<> b1; pipe.InitBuffer(b1, 512);
                auto t = b1.Get<float>();
                for (int i = 0; i < waits; ++i) CrossCoreWaitFlag(6);
                DataCopy(t, g[512], 128);   // @xsync-r
                for (int i = waits; i < 2; ++i) CrossCoreWaitFlag(6);
            };
            if (mode == "m0" || mode == "m1") {
                if ASCEND_IS_AIV {
                    const int reader = m0 ? 3 : 1;
                    if (b == 0) aivWrite();
                    else { aivSet(); aivSet(); }   // the other members of the group set too
                    if (b == reader) aivRead();
                    else { CrossCoreWaitFlag(6); CrossCoreWaitFlag(6); }
                }
            } else if (mode == "m2v") {
                if ASCEND_IS_AIV {
                    if (b == 0) aivWrite();
                    else { aivSet(); aivSet(); }
                } else {
                    TBuf<TPosition::A1> a1; pipe.InitBuffer(a1, 16 * 16 * 2);
                    auto l1 = a1.Get<half>();
                    for (int i = 0; i < waits; ++i) CrossCoreWaitFlag(6);
                    DataCopy(l1, gh[1024], Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0));   // @xsync-r2v
                    for (int i = waits; i < 2; ++i) CrossCoreWaitFlag(6);
                }
            } else {
                if ASCEND_IS_AIC {
                    { TPipe step; CubeTile(step, gx, 64, gw, g[0], 32, 32, 32); }
                    CrossCoreSetFlag<2, PIPE_FIX>(6);
                    { TPipe step; CubeTile(step, gx, 64, gw, g[512], 32, 32, 32); }   // @xsync-w2c
                    CrossCoreSetFlag<2, PIPE_FIX>(6);
                } else {
                    aivRead();
                }
            }
        });
    } else if (s == "det_adds") {   // det_adds DET ORDERED TYPE: two AIVs atomically add to the same workspace bytes
        // DET: emu::DeterministicAdds(); ORDERED: core 1 adds after a mode-0 flag barrier that follows core 0's add
        // (else both add at once); TYPE: f (float) or i (int32_t).
        emu::DeterministicAdds() = arg(2) != 0;
        const bool ordered = arg(3) != 0, isFloat = std::string(argv[4]) == "f";
        std::vector<int32_t> wsp(256, 0);
        emu::RegisterGm(wsp.data(), wsp.size() * 4, "workspace");
        auto add = [&](auto one, TPipe& pipe) {
            using T = decltype(one);
            GlobalTensor<T> g; g.SetGlobalBuffer(reinterpret_cast<T*>(wsp.data()), wsp.size());
            TBuf<> b; pipe.InitBuffer(b, 256);
            auto t = b.Get<T>();
            Duplicate(t, one, 64);
            Sync<HardEvent::V_MTE3>();
            SetAtomicAdd<T>();
            DataCopy(g[0], t, 64);   // @det-add
            SetAtomicNone();
        };
        r = emu::Launch(2, kMem.ub, [&] {
            TPipe pipe;
            const int b = GetBlockIdx();
            if (ordered && b == 1) { CrossCoreSetFlag<0, PIPE_MTE3>(3); CrossCoreWaitFlag(3); }
            if (isFloat) add(1.0f, pipe); else add(int32_t(1), pipe);
            if (ordered && b == 0) { CrossCoreSetFlag<0, PIPE_MTE3>(3); CrossCoreWaitFlag(3); }
        });
        Vals("sum", std::vector<float>{isFloat ? reinterpret_cast<float*>(wsp.data())[0] : float(wsp[0])});
    } else if (s == "add_order") {   // 1.0 in GM; core 0 adds -1.0, core 1 adds 2^-30, unordered: the order shows
        std::vector<float> wsp(64, 1.0f);
        emu::RegisterGm(wsp.data(), wsp.size() * 4, "workspace");
        r = emu::Launch(2, kMem.ub, [&] {
            TPipe pipe;
            GlobalTensor<float> g; g.SetGlobalBuffer(wsp.data(), wsp.size());
            TBuf<> b; pipe.InitBuffer(b, 32);
            auto t = b.Get<float>();
            Duplicate(t, GetBlockIdx() == 0 ? -1.0f : 0x1p-30f, 8);
            Sync<HardEvent::V_MTE3>();
            SetAtomicAdd<float>();
            DataCopy(g[0], t, 8);
            SetAtomicNone();
        });
        Vals("sum", std::vector<float>{wsp[0]});
    } else {
        std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
        return 2;
    }
    std::fflush(stdout);
    emu::PrintReport(r);
    return 0;
}
