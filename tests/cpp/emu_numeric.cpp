// Numeric driver for tests/test_emu.py: `emu_numeric MODE RM IN OUT` reads raw little-endian input, runs one
// kernel on the emulation (GM -> DataCopyPad -> UB -> op -> DataCopyPad -> GM) and writes raw output.
// Modes: f2h f2bf f2i i2f h2f bf2f (Cast with RoundMode RM), vec (float a,b -> 16 result arrays),
// vech (half a,b -> Add/Mul/Div/Sqrt half results), reduce (float -> 1 float), reduceh (half -> 1 half).
#include <cstdio>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;

// Pipe synchronisation between producer and consumer (docs/reference/ascendc.md §1.6; the race detector of
// emu/pipes.h faults without it).
template <HardEvent E>
static void Sync()
{
    SetFlag<E>(EVENT_ID0);
    WaitFlag<E>(EVENT_ID0);
}

template <typename S, typename D>
static void RunCast(std::vector<uint8_t>& in, std::vector<uint8_t>& out, RoundMode rm, emu::LaunchResult& r)
{
    uint32_t n = in.size() / sizeof(S);
    out.assign(n * sizeof(D), 0);
    emu::RegisterGm(in.data(), in.size(), "in");
    emu::RegisterGm(out.data(), out.size(), "out");
    r = emu::Launch(1, 196608, [&] {
        TPipe pipe; TBuf<> a, b; pipe.InitBuffer(a, n * sizeof(S)); pipe.InitBuffer(b, n * sizeof(D));
        GlobalTensor<S> gi; gi.SetGlobalBuffer(reinterpret_cast<S*>(in.data()), n);
        GlobalTensor<D> go; go.SetGlobalBuffer(reinterpret_cast<D*>(out.data()), n);
        LocalTensor<S> s = a.Get<S>(); LocalTensor<D> d = b.Get<D>();
        DataCopyPad(s, gi, DataCopyExtParams(1, n * sizeof(S), 0, 0, 0), DataCopyPadExtParams<S>());
        Sync<HardEvent::MTE2_V>();
        Cast(d, s, rm, n);
        Sync<HardEvent::V_MTE3>();
        DataCopyPad(go, d, DataCopyExtParams(1, n * sizeof(D), 0, 0, 0));
    });
}

template <typename T>
static void RunVec(std::vector<uint8_t>& in, std::vector<uint8_t>& out, bool full, emu::LaunchResult& r)
{
    uint32_t n = in.size() / sizeof(T) / 2;
    int nOut = full ? 16 : 4;
    out.assign(size_t(nOut) * n * sizeof(T), 0);
    emu::RegisterGm(in.data(), in.size(), "in");
    emu::RegisterGm(out.data(), out.size(), "out");
    r = emu::Launch(1, 196608, [&] {
        TPipe pipe; TQue<QuePosition::VECIN, 1> qa, qb; TQue<QuePosition::VECOUT, 1> qo;
        pipe.InitBuffer(qa, 1, n * sizeof(T)); pipe.InitBuffer(qb, 1, n * sizeof(T)); pipe.InitBuffer(qo, 2, n * sizeof(T));
        GlobalTensor<T> ga, gb, go;
        ga.SetGlobalBuffer(reinterpret_cast<T*>(in.data()), n);
        gb.SetGlobalBuffer(reinterpret_cast<T*>(in.data()) + n, n);
        go.SetGlobalBuffer(reinterpret_cast<T*>(out.data()), size_t(nOut) * n);
        auto a = qa.AllocTensor<T>(); auto b = qb.AllocTensor<T>();
        DataCopyPad(a, ga, DataCopyExtParams(1, n * sizeof(T), 0, 0, 0), DataCopyPadExtParams<T>());
        DataCopyPad(b, gb, DataCopyExtParams(1, n * sizeof(T), 0, 0, 0), DataCopyPadExtParams<T>());
        qa.EnQue(a); qb.EnQue(b); a = qa.DeQue<T>(); b = qb.DeQue<T>();
        T sc = T(1.5f);
        for (int k = 0; k < nOut; ++k) {
            auto o = qo.AllocTensor<T>();
            if (full) {
                switch (k) {
                case 0: Add(o, a, b, n); break;   case 1: Sub(o, a, b, n); break;
                case 2: Mul(o, a, b, n); break;   case 3: Div(o, a, b, n); break;
                case 4: Max(o, a, b, n); break;   case 5: Min(o, a, b, n); break;
                case 6: Adds(o, a, sc, n); break; case 7: Muls(o, a, sc, n); break;
                case 8: Maxs(o, a, sc, n); break; case 9: Mins(o, a, sc, n); break;
                case 10: Exp(o, a, n); break;     case 11: Abs(o, a, n); break;
                case 12: Ln(o, o, n); break;      // placeholder, replaced below
                default: break;
                }
                PipeBarrier<PIPE_V>();   // the k = 12 placeholder wrote o
                if (k == 12) { Abs(o, b, n); PipeBarrier<PIPE_V>(); Ln(o, o, n); }
                if (k == 13) { Abs(o, b, n); PipeBarrier<PIPE_V>(); Sqrt(o, o, n); }
                if (k == 14) { Abs(o, b, n); PipeBarrier<PIPE_V>(); Rsqrt(o, o, n); }
                if (k == 15) Reciprocal(o, b, n);
            } else {
                switch (k) {
                case 0: Add(o, a, b, n); break; case 1: Mul(o, a, b, n); break;
                case 2: Div(o, a, b, n); break; case 3: Abs(o, b, n); PipeBarrier<PIPE_V>(); Sqrt(o, o, n); break;
                }
            }
            qo.EnQue(o); o = qo.DeQue<T>();
            DataCopyPad(go[size_t(k) * n], o, DataCopyExtParams(1, n * sizeof(T), 0, 0, 0));
            qo.FreeTensor(o);
        }
        qa.FreeTensor(a); qb.FreeTensor(b);
    });
}

template <typename T>
static void RunReduce(std::vector<uint8_t>& in, std::vector<uint8_t>& out, emu::LaunchResult& r)
{
    uint32_t n = in.size() / sizeof(T);
    out.assign(sizeof(T), 0);
    emu::RegisterGm(in.data(), in.size(), "in");
    emu::RegisterGm(out.data(), out.size(), "out");
    r = emu::Launch(1, 196608, [&] {
        TPipe pipe; TBuf<> a, d, w; pipe.InitBuffer(a, n * sizeof(T)); pipe.InitBuffer(d, 32); pipe.InitBuffer(w, n * sizeof(T));
        GlobalTensor<T> gi, go;
        gi.SetGlobalBuffer(reinterpret_cast<T*>(in.data()), n);
        go.SetGlobalBuffer(reinterpret_cast<T*>(out.data()), 1);
        LocalTensor<T> s = a.Get<T>(), o = d.Get<T>();
        DataCopyPad(s, gi, DataCopyExtParams(1, n * sizeof(T), 0, 0, 0), DataCopyPadExtParams<T>());
        Sync<HardEvent::MTE2_V>();
        ReduceSum(o, s, w.Get<T>(), n);
        Sync<HardEvent::V_MTE3>();
        DataCopyPad(go, o, DataCopyExtParams(1, sizeof(T), 0, 0, 0));
    });
}

int main(int argc, char** argv)
{
    if (argc != 5) { std::fprintf(stderr, "usage: emu_numeric MODE RM IN OUT\n"); return 2; }
    std::string mode = argv[1];
    RoundMode rm = static_cast<RoundMode>(std::stoi(argv[2]));
    std::vector<uint8_t> in, out;
    FILE* f = std::fopen(argv[3], "rb");
    if (!f) return 2;
    int c;
    while ((c = std::fgetc(f)) != EOF) in.push_back(uint8_t(c));
    std::fclose(f);
    emu::LaunchResult r;
    if (mode == "f2h") RunCast<float, half>(in, out, rm, r);
    else if (mode == "f2bf") RunCast<float, bfloat16_t>(in, out, rm, r);
    else if (mode == "f2i") RunCast<float, int32_t>(in, out, rm, r);
    else if (mode == "i2f") RunCast<int32_t, float>(in, out, rm, r);
    else if (mode == "h2f") RunCast<half, float>(in, out, rm, r);
    else if (mode == "bf2f") RunCast<bfloat16_t, float>(in, out, rm, r);
    else if (mode == "vec") RunVec<float>(in, out, true, r);
    else if (mode == "vech") RunVec<half>(in, out, false, r);
    else if (mode == "reduce") RunReduce<float>(in, out, r);
    else if (mode == "reduceh") RunReduce<half>(in, out, r);
    else { std::fprintf(stderr, "unknown mode\n"); return 2; }
    emu::PrintReport(r);
    f = std::fopen(argv[4], "wb");
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
    return r.ok ? 0 : 1;
}
