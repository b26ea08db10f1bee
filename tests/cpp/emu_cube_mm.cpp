// Matmul driver for tests/test_emu_cube.py: runs C = op(A) * op(B) on the emulated cube of
// emu::LaunchCube AIC cores through the low-level path GM -(Nd2Nz)-> L1 NZ -(LoadData)-> L0A ZZ / L0B ZN
// -(Mmad)-> L0C NZ -(Fixpipe)-> GM ND, the way the NSA kernels do (docs/reference/ascendc.md §1.10).
//
//   emu_cube_mm DT OT M N K TA TB KT NT BLOCKDIM MMADM IN OUT
//     DT   f16 | bf16 | s8       input type;   OT  f32 | f16 | bf16  output type (Fixpipe quantPre), s32 for s8
//          (int8 x int8 -> int32 L0C -> int32 NoQuant: C0 = 32, fractals 16 x 32, k padded to 32)
//     M N K                      logical sizes; C is M x N
//     TA   N: A stored [M][K]    T: A stored [K][M] (Aᵀ·B, the Pᵀ·dO / dSᵀ·Q case)
//          V: M = 1, A laid out as a plain vector in L0A (GEMV mode, see MMADM)
//          W: A stored [K][M], int8: L1 NZ of Aᵀ with ceil32(kt) rows, each 32-column piece's squares moved to L0A
//             by one LoadDataWithTranspose (dstGap 0, dstFracGap K1 - 1: two ZZ fractal rows per piece)
//     TB   N: B stored [K][N] (dS·K case, needs LoadData ifTranspose)
//          T: B stored [N][K] (Q·Kᵀ case: K rows in L1 NZ are already the ZN fractals of Kᵀ)
//          X: B stored [K][N] but loaded like T (a layout bug: no fault, wrong numbers)
//          W: B stored [K][N], int8: L1 NZ with ceil32(kt) rows, LoadDataWithTranspose of 32 x 32 squares into ZN
//             (ceil32(nt) columns: Mmad n = ceil32(nt), asc-devkit's load_data_l12l0 int8 B case)
//     KT NT                      k step (accumulated in L0C with cmatrixInitVal=false after the first) and n tile
//     BLOCKDIM                   AIC cores; core c takes n tiles c, c+BLOCKDIM, ...
//     MMADM                      m passed to Mmad (>= M; 2 for M = 1 is the NSA "G == 1" padding; 1 = GEMV)
//     IN                         A bytes then B bytes (stored layouts); OUT: C [M][N] of OT
// Prints the launch report (emu::PrintReport).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

struct Args {
    int m, n, k, kt, nt, blockDim, mm;
    char ta, tb;
};

static uint32_t Up16(uint32_t x) { return (x + 15) / 16 * 16; }
static uint32_t Div16(uint32_t x) { return (x + 15) / 16; }
template <typename T> constexpr uint32_t kC0 = 32 / sizeof(T);        // elements of one 32-B block: a fractal's width
template <typename T> constexpr uint32_t kFrac = 16 * kC0<T>;         // elements of one 512-B L0A / L0B fractal
template <typename T> static uint32_t UpC0(uint32_t x) { return (x + kC0<T> - 1) / kC0<T> * kC0<T>; }
template <typename T> static uint32_t DivC0(uint32_t x) { return (x + kC0<T> - 1) / kC0<T>; }

template <typename T, typename O, typename Acc = float>   // Acc: the L0C type (int32_t for int8 operands)
static emu::LaunchResult Run(const Args& a, uint8_t* gmA, uint8_t* gmB, uint8_t* gmC)
{
    return emu::LaunchCube(a.blockDim, emu::CoreMem::Ascend910B(), [&] {
        KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
        const uint32_t m = a.m, n = a.n, k = a.k, mm = a.mm;
        GlobalTensor<T> A, B;
        GlobalTensor<O> C;
        A.SetGlobalBuffer(reinterpret_cast<T*>(gmA), uint64_t(m) * k);
        B.SetGlobalBuffer(reinterpret_cast<T*>(gmB), uint64_t(k) * n);
        C.SetGlobalBuffer(reinterpret_cast<O*>(gmC), uint64_t(m) * n);
        const uint32_t mA = a.ta == 'W' ? UpC0<T>(mm) : Up16(mm), ktA = std::max(Up16(a.kt), UpC0<T>(a.kt)), ntA = std::max(Up16(a.nt), UpC0<T>(a.nt));
        TPipe pipe;
        TBuf<TPosition::A1> a1; TBuf<TPosition::B1> b1;
        TBuf<TPosition::A2> a2; TBuf<TPosition::B2> b2;
        TBuf<TPosition::CO1> c1;
        pipe.InitBuffer(a1, mA * ktA * sizeof(T));
        pipe.InitBuffer(b1, ktA * ntA * sizeof(T));
        pipe.InitBuffer(a2, mA * ktA * sizeof(T));
        pipe.InitBuffer(b2, ktA * ntA * sizeof(T));
        pipe.InitBuffer(c1, mA * ntA * sizeof(Acc));
        LocalTensor<T> l1a = a1.Get<T>(), l1b = b1.Get<T>(), l0a = a2.Get<T>(), l0b = b2.Get<T>();
        LocalTensor<Acc> l0c = c1.Get<Acc>();
        const uint32_t tiles = (n + a.nt - 1) / a.nt;
        for (uint32_t t = GetBlockIdx(); t < tiles; t += GetBlockNum()) {
            const uint32_t n0 = t * a.nt, nt = std::min<uint32_t>(a.nt, n - n0), N1 = Div16(nt);
            for (uint32_t k0 = 0; k0 < k; k0 += a.kt) {
                const uint32_t kt = std::min<uint32_t>(a.kt, k - k0), K1 = DivC0<T>(kt), M1 = Div16(mm);
                // ---- GM -> L1 (MTE2)
                if (a.ta == 'N')        // A [m][k]: tile rows 0..m, cols k0..k0+kt -> NZ with ceil16(mm) rows
                    DataCopy(l1a, A[k0], Nd2NzParams(1, m, kt, 0, k, mA, 1, 0));
                else if (a.ta == 'T')   // A stored [k][m]: tile rows k0..k0+kt -> NZ of Aᵀ (kt x m)
                    DataCopy(l1a, A[uint64_t(k0) * m], Nd2NzParams(1, kt, m, 0, m, Up16(kt), 1, 0));
                else if (a.ta == 'W')   // A stored [k][m] int8: NZ of Aᵀ with ceil32(kt) rows (whole squares)
                    DataCopy(l1a, A[uint64_t(k0) * m], Nd2NzParams(1, kt, m, 0, m, UpC0<T>(kt), 1, 0));
                else                    // 'V': one row, pieces at consecutive 32-B blocks = ND vector
                    DataCopy(l1a, A[k0], Nd2NzParams(1, 1, kt, 0, k, 1, 1, 0));
                if (a.tb == 'W')        // B [k][n] int8: kt x nt tile -> NZ with ceil32(kt) rows (whole squares)
                    DataCopy(l1b, B[uint64_t(k0) * n + n0], Nd2NzParams(1, kt, nt, 0, n, UpC0<T>(kt), 1, 0));
                else if (a.tb != 'T')   // B [k][n]: kt x nt tile -> NZ with ceil16(kt) rows
                    DataCopy(l1b, B[uint64_t(k0) * n + n0], Nd2NzParams(1, kt, nt, 0, n, Up16(kt), 1, 0));
                else                    // B stored [n][k]: nt x kt tile -> NZ with ceil16(nt) rows
                    DataCopy(l1b, B[uint64_t(n0) * k + k0], Nd2NzParams(1, nt, kt, 0, k, Up16(nt), 1, 0));
                SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
                WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
                // ---- L1 -> L0A (ZZ: fractal (m1, k1) at m1*K1 + k1)
                if (a.ta == 'N') {
                    for (uint32_t m1 = 0; m1 < M1; ++m1)   // NZ fractal (m1, k1) sits at k1*M1 + m1
                        LoadData(l0a[m1 * K1 * kFrac<T>], l1a, LoadData2DParams(m1, K1, M1, 0, 0, false, 0));
                } else if (a.ta == 'T') {
                    for (uint32_t m1 = 0; m1 < M1; ++m1)   // NZ of Aᵀ: fractal (k1, m1) at m1*K1 + k1, transposed
                        LoadData(l0a[m1 * K1 * kFrac<T>], l1a, LoadData2DParams(m1 * K1, K1, 1, 0, 0, true, 0));
                } else if (a.ta == 'W') {
                    // NZ square (k1, p) of Aᵀ at p*K1 + k1 (32 k-rows of a 32-column m piece), transposed: its first
                    // fractal is ZZ fractal (2p, k1), its second (2p + 1, k1), K1 fractals on
                    for (uint32_t p = 0; p < UpC0<T>(mm) / 32; ++p)
                        LoadDataWithTranspose(l0a[p * 2 * K1 * kFrac<T>], l1a,
                                              LoadData2dTransposeParams(p * K1, K1, 1, 0, K1 - 1));
                } else {
                    LoadData(l0a, l1a, LoadData2DParams(0, (kt * sizeof(T) + 511) / 512, 1, 0, 0, false, 0));
                }
                // ---- L1 -> L0B (ZN: fractal (k1, n1) at k1*N1 + n1, column-major inside)
                if (a.tb == 'N') {
                    for (uint32_t k1 = 0; k1 < K1; ++k1)   // NZ fractal (k1, n1) at n1*K1 + k1, transposed
                        LoadData(l0b[k1 * N1 * kFrac<T>], l1b, LoadData2DParams(k1, N1, K1, 0, 0, true, 0));
                } else if (a.tb == 'W') {
                    // NZ square (k1, s) at s*K1 + k1 (32 rows of a 32-column piece: 1024 B), transposed into two ZN
                    // fractals; a k row of ZN holds ceil32(nt) / 16 fractals
                    for (uint32_t k1 = 0; k1 < K1; ++k1)
                        LoadDataWithTranspose(l0b[k1 * (UpC0<T>(nt) / 16) * kFrac<T>], l1b,
                                              LoadData2dTransposeParams(k1, UpC0<T>(nt) / 32, K1, 1, 0));
                } else {
                    for (uint32_t f = 0; f < K1 * N1; f += 255)   // already ZN: contiguous
                        LoadData(l0b[f * kFrac<T>], l1b, LoadData2DParams(f, std::min<uint32_t>(255, K1 * N1 - f), 1, 0, 0, false, 0));
                }
                SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
                WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
                SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);   // L1 read: the next k step may overwrite it
                WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
                // ---- Mmad: first k step initialises L0C, the others accumulate
                Mmad(l0c, l0a, l0b, MmadParams(mm, a.tb == 'W' ? UpC0<T>(nt) : nt, kt, 0, false, k0 == 0));
                PipeBarrier<PIPE_M>();
                SetFlag<HardEvent::M_MTE1>(EVENT_ID0);   // L0A/L0B read: the next k step may overwrite them
                WaitFlag<HardEvent::M_MTE1>(EVENT_ID0);
            }
            SetFlag<HardEvent::M_FIX>(EVENT_ID0);
            WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
            // ---- L0C NZ -> GM ND (m rows of the Mmad's ceil16(mm)-row NZ)
            FixpipeParamsV220 fp(nt, m, Up16(mm), n, false);
            if (std::is_same<O, half>::value) fp.quantPre = QuantMode_t::F322F16;
            if (std::is_same<O, bfloat16_t>::value) fp.quantPre = QuantMode_t::F322BF16;
            Fixpipe<O, Acc, CFG_ROW_MAJOR>(C[n0], l0c, fp);
            SetFlag<HardEvent::FIX_M>(EVENT_ID0);
            WaitFlag<HardEvent::FIX_M>(EVENT_ID0);
        }
    });
}

int main(int argc, char** argv)
{
    if (argc != 14) {
        std::fprintf(stderr, "usage: emu_cube_mm DT OT M N K TA TB KT NT BLOCKDIM MMADM IN OUT\n");
        return 2;
    }
    std::string dt = argv[1], ot = argv[2];
    Args a{std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[8]), std::atoi(argv[9]),
           std::atoi(argv[10]), std::atoi(argv[11]), argv[6][0], argv[7][0]};
    std::ifstream f(argv[12], std::ios::binary);
    std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t isz = dt == "s8" ? 1 : 2;
    const size_t aBytes = size_t(a.m) * a.k * isz, bBytes = size_t(a.k) * a.n * isz;
    if (in.size() != aBytes + bBytes) { std::fprintf(stderr, "input size %zu != %zu\n", in.size(), aBytes + bBytes); return 2; }
    std::vector<uint8_t> A(in.begin(), in.begin() + aBytes), B(in.begin() + aBytes, in.end());
    const size_t osz = ot == "f32" || ot == "s32" ? 4 : 2;
    std::vector<uint8_t> C(size_t(a.m) * a.n * osz, 0xEE);
    emu::RegisterGm(A.data(), A.size(), "a");
    emu::RegisterGm(B.data(), B.size(), "b");
    emu::RegisterGm(C.data(), C.size(), "c");
    emu::LaunchResult r;
    if (dt == "s8") {
        r = Run<int8_t, int32_t, int32_t>(a, A.data(), B.data(), C.data());
    } else if (dt == "f16") {
        if (ot == "f32") r = Run<half, float>(a, A.data(), B.data(), C.data());
        else if (ot == "f16") r = Run<half, half>(a, A.data(), B.data(), C.data());
        else r = Run<half, bfloat16_t>(a, A.data(), B.data(), C.data());
    } else {
        if (ot == "f32") r = Run<bfloat16_t, float>(a, A.data(), B.data(), C.data());
        else if (ot == "f16") r = Run<bfloat16_t, half>(a, A.data(), B.data(), C.data());
        else r = Run<bfloat16_t, bfloat16_t>(a, A.data(), B.data(), C.data());
    }
    std::ofstream o(argv[13], std::ios::binary);
    o.write(reinterpret_cast<const char*>(C.data()), std::streamsize(C.size()));
    emu::PrintReport(r);
    return 0;
}
