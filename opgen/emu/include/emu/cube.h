// opgen AscendC emulation: the cube side of arch 2201 (Atlas A2/A3) — GM ND -> L1 NZ (DataCopy with Nd2NzParams),
// L1 -> L0A/L0B fractal loads (LoadData with LoadData2DParams), the matrix multiply into L0C (Mmad with MmadParams)
// and L0C -> GM (Fixpipe with FixpipeParamsV220). Our own code (docs/reference/ascendc.md §1.2, §1.10, §1.11;
// parameter units from the CANN AscendC API pages "随路转换ND2NZ搬运", "Load2D", "Mmad", "Fixpipe").
//
// Layouts are real bytes in the simulated buffers, so a kernel that gets a stride or a layout wrong gets wrong
// numbers (or a poison fault), as on hardware. Notation: C0 = 32 B / sizeof(T) (16 for half/bf16, 8 for float);
// a fractal is 512 B (16 x C0) in L1/L0A/L0B and 16 x 16 floats (1 KB) in L0C.
//   L1  "NZ": an (R x C) matrix is cut into 16-row x C0-column fractals; fractals column-major (all row-fractals of
//        fractal-column 0 first), elements inside row-major. Produced by DataCopy(L1, GM, Nd2NzParams).
//   L0A "ZZ": left matrix A (m x k): fractals row-major over (m/16, k/C0), inside row-major:
//        A(i, kk) at ((i/16)*K1 + kk/C0)*16*C0 + (i%16)*C0 + kk%C0, K1 = ceil(k/C0).
//        m == 1 selects GEMV mode: A is read as a plain vector, A(0, kk) at kk (CANN Mmad doc).
//   L0B "ZN": right matrix B (k x n): fractals row-major over (k/C0, n/16), inside column-major:
//        B(kk, j) at ((kk/C0)*N1 + j/16)*C0*16 + (j%16)*C0 + kk%C0, N1 = ceil(n/16).
//   L0C "NZ": result C (m x n) float: C(i, j) at ((j/16)*M1 + i/16)*256 + (i%16)*16 + j%16, M1 = ceil(m/16).
// LoadData moves whole 512-B fractals (optionally transposing each 16x16 b16 fractal), so NZ -> ZZ (A as stored)
// is "one LoadData per fractal row, srcStride = M1"; NZ -> ZN of a B stored k x n needs ifTranspose; a B stored
// n x k (the Q·Kᵀ case) is already ZN in L1 and loads contiguously without transpose.
//
// Poison (like UB, emu/core.h): L1/L0 buffers start unwritten; copies carry the written-map along. Mmad computes
// only the valid m x n x k region and ignores the rest of partial fractals (CANN: "invalid data is ignored"); an
// output element is unwritten if its A row or B column had an unwritten element in the valid k range, or if it
// accumulated (cmatrixInitVal=false) into an unwritten L0C element. Reading unwritten L0C in Fixpipe is a fault.
//
// Deliberately strict (faults): operands in the wrong buffer (Mmad fm not in L0A, ...), misaligned addresses
// (L0A/L0B 512 B, Mmad L0C destination 1024 B, Fixpipe L0C source 64 B, L1 32 B), parameters outside the
// documented ranges, Nd2Nz writes that overlap inside one instruction, a Fixpipe dtype/quantPre mismatch, and
// features not emulated (channel split, int quantisation, COLUMN_MAJOR, LoadData addrMode 1, arch 3510).
// Bias table (C2, BiasTable: 1 KB per AIC on 2201, its arena; an InitBuffer past it faults like the UB's):
// DataCopy(C2 float, C1 half/float, DataCopyParams) fills it on MTE1, blockLen counting 64-B blocks of the source,
// half converted to float (bfloat16_t faults: arch 3510 only); Mmad(dst, fm, filter, bias, params) starts C at the
// bias row broadcast over the m rows (cmatrixSource; docs/reference/ascendc.md §1.10 "Bias on the cube").
// int8_t operands (C0 = 32, a fractal 16 x 32 = 512 B) accumulate exactly into an int32_t L0C (ops-nn
// quant_batch_matmul_v3 arch20 kernel: int32_t l0c, k rounded to 32); Fixpipe writes such an L0C only as int32_t
// with NoQuant (the DEQF16 / VDEQF16 / REQ8 dequantising modes are not emulated: they fault).
// Accumulation: products are exact (fp16/bf16 products fit fp32); each C0-wide k chunk is summed in double and
// added to the fp32 accumulator with one rounding (the hardware's internal order is not documented; results agree
// with a float64 reference to fp32 accuracy, not bit-exactly with the device). Fixpipe fp32 -> fp16/bf16 rounds to
// nearest even (inferred; CANN documents no other mode for F322F16/F322BF16).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "emu/core.h"
#include "emu/datacopy.h"
#include "emu/tensor.h"
#include "emu/types.h"

// Fixpipe quantisation modes (CANN: QuantMode_t). Only NoQuant (float -> float, int32 -> int32), F322F16 and
// F322BF16 are emulated.
enum class QuantMode_t : int { NoQuant = 0, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };

namespace AscendC {

constexpr int32_t BLOCK_CUBE = 16;       // fractal edge in rows / columns
constexpr int32_t CUBE_MAX_SIZE = 256;   // elements of a 16x16 fractal

// ---------------------------------------------------------------- parameter structs (field order = CANN's)
// DataCopy GM -> L1 (or UB) with ND -> NZ conversion. Units: nValue/dValue = rows/columns of each ND matrix
// (elements); srcNdMatrixStride, srcDValue (source row pitch) and dstNzMatrixStride in ELEMENTS; dstNzC0Stride
// (distance between the C0-column pieces of one source row) and dstNzNStride (distance between consecutive source
// rows) in 32-B BLOCKS. Ranges: ndNum <= 4095, nValue <= 16384, srcDValue >= 1, dstNzC0Stride/dstNzNStride in
// [1, 16384]. A row's last 32-B block is zero-filled past dValue.
struct Nd2NzParams {
    uint16_t ndNum = 0, nValue = 0, dValue = 0, srcNdMatrixStride = 0, srcDValue = 0, dstNzC0Stride = 0,
             dstNzNStride = 0, dstNzMatrixStride = 0;
    Nd2NzParams() = default;
    Nd2NzParams(uint16_t ndNumIn, uint16_t nValueIn, uint16_t dValueIn, uint16_t srcNdMatrixStrideIn,
                uint16_t srcDValueIn, uint16_t dstNzC0StrideIn, uint16_t dstNzNStrideIn, uint16_t dstNzMatrixStrideIn)
        : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn), srcNdMatrixStride(srcNdMatrixStrideIn),
          srcDValue(srcDValueIn), dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn) {}
};

// LoadData L1 -> L0A/L0B. Units: startIndex, srcStride (start-to-start of consecutive source fractals) and dstGap
// (end-to-start of consecutive destination fractals) in 512-B FRACTALS; repeatTimes = fractals moved (0 = NOP,
// <= 255). ifTranspose transposes each 16x16 fractal (b16 types only). sid ignored; addrMode must be 0.
struct LoadData2DParams {
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = false;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
    LoadData2DParams() = default;
    LoadData2DParams(uint16_t startIndexIn, uint8_t repeatTimesIn, uint16_t srcStrideIn, uint8_t sidIn,
                     uint16_t dstGapIn, bool ifTransposeIn, uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn), ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
};
using LoadData2dParams = LoadData2DParams;

// LoadDataWithTranspose L1 -> L0A/L0B (field order = CANN's kernel_struct_mm.h). Units: startIndex and srcStride
// (start-to-start) in SQUARES (1024 B for int8: 32 x 32, two consecutive 16 x 32 fractals, asc-devkit's
// load_data_l12l0 example, fractalNum 2 for B8); dstGap in 512-B fractals, the distance from one repeat's first
// destination fractal to the next one's is (1 + dstGap) * 512 B (CANN's matmul passes dstGap 1 for int8 squares,
// 3 for int4's four fractals: contiguous squares); dstFracGap the gap between a square's fractals (only 0 is
// modelled). repeatTimes = squares moved (0 = NOP, <= 255). addrMode must be 0.
struct LoadData2dTransposeParams {
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
    LoadData2dTransposeParams() = default;
    LoadData2dTransposeParams(uint16_t startIndexIn, uint8_t repeatTimesIn, uint16_t srcStrideIn, uint16_t dstGapIn,
                              uint16_t dstFracGapIn, uint8_t addrModeIn)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstFracGapIn), addrMode(addrModeIn) {}
    LoadData2dTransposeParams(uint16_t startIndexIn, uint8_t repeatTimesIn, uint16_t srcStrideIn, uint16_t dstGapIn,
                              uint16_t dstFracGapIn)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstFracGapIn) {}
};

// Mmad: C (m x n, L0C) = A (m x k, L0A) * B (k x n, L0B) [+ C]. m, n, k in ELEMENTS, each <= 4095 (any 0 = NOP).
// cmatrixInitVal true: C starts at 0; false: accumulate into L0C (cmatrixSource false) — the deprecated isBias=true
// also accumulates. cmatrixSource true is set by the bias overload of Mmad (a C2 bias tensor: C starts at its row);
// set by hand in the 4-argument form it faults. unitFlag 0/2/3 accepted (no timing).
// kDirectionAlign (float inputs only): k padded to 16 instead of 8 in L0A/L0B.
struct MmadParams {
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
    MmadParams() = default;
    MmadParams(uint16_t mIn, uint16_t nIn, uint16_t kIn, uint8_t unitFlagIn, bool cmatrixSourceIn, bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn), cmatrixInitVal(cmatrixInitValIn) {}
    MmadParams(uint16_t mIn, uint16_t nIn, uint16_t kIn, bool isBiasIn, int32_t fmOffsetIn, bool enSsparseIn,
               bool enWinogradAIn, bool enWinogradBIn)
        : m(mIn), n(nIn), k(kIn), isBias(isBiasIn), fmOffset(fmOffsetIn), enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn), enWinogradB(enWinogradBIn) {}
};

// Fixpipe L0C -> GM. config CFG_ROW_MAJOR (default): NZ -> ND; CFG_NZ: keep NZ.
enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
struct FixpipeConfig { CO2Layout format; };
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

// Units: nSize / mSize = columns / rows moved (ELEMENTS; ROW_MAJOR: nSize <= 4095, mSize <= 8192; NZ: nSize a
// multiple of 16). srcStride = distance between consecutive 16-column blocks of the L0C NZ matrix in C0_SIZE units
// (16 * sizeof(src) bytes, i.e. rows: normally ceil(m/16)*16 of the Mmad). dstStride: ROW_MAJOR = elements per
// destination row (row pitch, ELEMENTS); NZ = distance between destination 16-column blocks in 32-B BLOCKS.
// quantPre: NoQuant (float -> float), F322F16 (float -> half), F322BF16 (float -> bfloat16_t). ndNum > 1
// (ROW_MAJOR): matrix nd starts at src + nd*srcNdStride*1024 B and dst + nd*dstNdStride ELEMENTS. reluEn clamps
// negatives to 0 before the conversion. Honours SetAtomicAdd<T>() (atomic add into GM).
struct FixpipeParamsV220 {
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
    FixpipeParamsV220() = default;
    FixpipeParamsV220(uint16_t nSizeIn, uint16_t mSizeIn, uint16_t srcStrideIn, uint32_t dstStrideIn, bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn) {}
    FixpipeParamsV220(uint16_t nSizeIn, uint16_t mSizeIn, uint16_t srcStrideIn, uint32_t dstStrideIn, bool reluEnIn,
                      QuantMode_t quantPreIn, int64_t deqScalarIn, uint16_t ndNumIn, uint16_t srcNdStrideIn,
                      uint16_t dstNdStrideIn, uint8_t unitFlagIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), quantPre(quantPreIn),
          deqScalar(uint64_t(deqScalarIn)), ndNum(ndNumIn), srcNdStride(srcNdStrideIn), dstNdStride(dstNdStrideIn),
          reluEn(reluEnIn), unitFlag(unitFlagIn) {}
};
using FixpipeParamsM300 = FixpipeParamsV220;

namespace emu_detail {
// The tensor must be allocated, belong to the calling core and live in buffer `k`.
template <typename T>
emu::UbArena* CubeOperand(const LocalTensor<T>& t, emu::MemKind k, const char* what, const char* role, const char* pos)
{
    emu::UbArena* a = t.Arena();
    if (!a) emu::Fault(emu::Cat(what, ": ", role, " LocalTensor is not allocated"));
    t.CheckOwner(what);
    if (a->kind != k)
        emu::Fault(emu::Cat(what, ": ", role, " must be in ", emu::MemName(k), " (TPosition ", pos, ") but lives in ",
                            a->name));
    return a;
}
template <typename T>
void CubeAlign(const LocalTensor<T>& t, uint64_t align, const char* what, const char* role)
{
    if (t.Offset() % align)
        emu::Fault(emu::Cat(what, ": ", role, " address ", t.Offset(), " in ", t.Arena()->name, " is not ", align,
                            "-byte aligned"));
}
template <typename T>
void CubeSpan(const LocalTensor<T>& t, uint64_t endByte, const char* what, const char* role)
{
    uint64_t have = uint64_t(t.GetSize()) * sizeof(T);
    if (endByte > have)
        emu::Fault(emu::Cat(what, ": ", role, " access up to byte ", endByte, " past the end of the ", have,
                            "-byte tensor at ", t.Arena()->name, " address ", t.Offset()));
}
// The destination of an L1 -> L0A / L0B load (LoadData, LoadDataWithTranspose): allocated, owned by this core, in
// L0A (TPosition A2) or L0B (TPosition B2) and 512-B aligned; its arena.
template <typename T>
emu::UbArena* L0Destination(const LocalTensor<T>& dst, const char* what)
{
    emu::UbArena* da = dst.Arena();
    if (!da) emu::Fault(emu::Cat(what, ": destination LocalTensor is not allocated"));
    dst.CheckOwner(what);
    if (da->kind != emu::MemKind::L0A && da->kind != emu::MemKind::L0B)
        emu::Fault(emu::Cat(what, ": destination must be in L0A (TPosition A2) or L0B (TPosition B2), not ", da->name));
    CubeAlign(dst, 512, what, da->kind == emu::MemKind::L0A ? "L0A destination" : "L0B destination");
    return da;
}
inline void RequireCubeArch(const char* what)
{
    if (emu::Core().arch != 2201)
        emu::Fault(emu::Cat(what, ": the cube layouts of arch ", emu::Core().arch,
                            " (Ascend 950: NZ L0A, no GM->L0) are not emulated; only arch 2201 (Atlas A2/A3)"));
}
template <typename T> inline float CubeToFloat(T v) { return static_cast<float>(v); }
template <typename T> constexpr bool IsB16() { return sizeof(T) == 2; }
}  // namespace emu_detail

// ---------------------------------------------------------------- GM ND -> L1 NZ (MTE2)
// Reference §1.8/§1.10; units in Nd2NzParams. dst in L1 (A1/B1/C1/TSCM) or UB (VECIN..., also legal on A2),
// 32-B aligned; T of 1, 2 or 4 bytes. For ND matrix i, row r, 32-B piece b (C0 elements):
//   source elements  i*srcNdMatrixStride + r*srcDValue + b*C0 .. +min(C0, dValue-b*C0)
//   destination byte i*dstNzMatrixStride*sizeof(T) + r*dstNzNStride*32 + b*dstNzC0Stride*32 (zero-filled to 32 B)
// Canonical use for an (R x D) ND tile with row pitch P: {1, R, D, 0, P, ceil16(R), 1, 0}.
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p,
              emu::Site site = emu::Site::Here())
{
    const char* what = "DataCopy(Nd2NzParams)";
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "Nd2Nz: 1-, 2- or 4-byte element types");
    emu::UbArena* a = dst.Arena();
    if (!a) emu::Fault(emu::Cat(what, ": destination LocalTensor is not allocated"));
    dst.CheckOwner(what);
    if (a->kind != emu::MemKind::L1 && a->kind != emu::MemKind::UB)
        emu::Fault(emu::Cat(what, ": destination must be in L1 (TPosition A1/B1) or UB, not ", a->name));
    emu_detail::CubeAlign(dst, emu::kBlock, what, "destination");
    if (!p.ndNum || !p.nValue || !p.dValue) return;
    if (p.ndNum > 4095) emu::Fault(emu::Cat(what, ": ndNum ", p.ndNum, " outside [0, 4095]"));
    if (p.nValue > 16384) emu::Fault(emu::Cat(what, ": nValue ", p.nValue, " outside [0, 16384]"));
    if (p.srcDValue < 1) emu::Fault(emu::Cat(what, ": srcDValue 0 (the source row pitch, elements, must be >= 1)"));
    if (p.dstNzC0Stride < 1 || p.dstNzC0Stride > 16384)
        emu::Fault(emu::Cat(what, ": dstNzC0Stride ", p.dstNzC0Stride, " outside [1, 16384] (32-B blocks)"));
    if (p.dstNzNStride < 1 || p.dstNzNStride > 16384)
        emu::Fault(emu::Cat(what, ": dstNzNStride ", p.dstNzNStride, " outside [1, 16384] (32-B blocks)"));
    if (p.ndNum > 1 && (p.dstNzMatrixStride < 1 || (uint64_t(p.dstNzMatrixStride) * sizeof(T)) % emu::kBlock))
        emu::Fault(emu::Cat(what, ": dstNzMatrixStride ", p.dstNzMatrixStride, " elements must be >= 1 and a multiple "
                            "of 32 B when ndNum > 1"));
    constexpr uint64_t C0 = emu::kBlock / sizeof(T);
    const uint64_t pieces = (uint64_t(p.dValue) + C0 - 1) / C0;
    const uint64_t viewBytes = uint64_t(dst.GetSize()) * sizeof(T);
    std::vector<uint8_t> hit(viewBytes / emu::kBlock + 1, 0);
    uint8_t* dbase = a->data.data() + dst.Offset();
    uint8_t* wbase = a->written.data() + dst.Offset();
    const emu::Instr in = emu::Issue(emu::kPipeMTE2, what, site);
    for (uint64_t i = 0; i < p.ndNum; ++i) {
        for (uint64_t r = 0; r < p.nValue; ++r) {
            for (uint64_t b = 0; b < pieces; ++b) {
                uint64_t n = std::min<uint64_t>(C0, p.dValue - b * C0);
                int64_t srcElem = int64_t(i * p.srcNdMatrixStride + r * p.srcDValue + b * C0);
                uint64_t d = i * p.dstNzMatrixStride * sizeof(T) + (r * p.dstNzNStride + b * p.dstNzC0Stride) * emu::kBlock;
                emu_detail::CubeSpan(dst, d + emu::kBlock, what, "destination");
                if (hit[d / emu::kBlock])
                    emu::Fault(emu::Cat(what, ": two pieces of the conversion write the same 32-B block at ", a->name,
                                        " byte ", dst.Offset() + d, " (matrix ", i, ", row ", r, ", piece ", b,
                                        "): dstNzC0Stride ", p.dstNzC0Stride, " / dstNzNStride ", p.dstNzNStride,
                                        " overlap (dstNzC0Stride is normally the padded row count, ceil16(nValue))"));
                hit[d / emu::kBlock] = 1;
                emu::Touch(in, a, dst.Offset() + d, emu::kBlock, true);
                const uint8_t* g = src.CheckBytes(srcElem * int64_t(sizeof(T)), n * sizeof(T), what);
                emu::TouchGm(in, src.Buffer(), uint64_t(g - src.Buffer()->base), n * sizeof(T), false);
                std::memcpy(dbase + d, g, n * sizeof(T));
                std::memset(dbase + d + n * sizeof(T), 0, emu::kBlock - n * sizeof(T));
                std::memset(wbase + d, 1, emu::kBlock);
                src.Buffer()->bytesRead += n * sizeof(T);
            }
            const uint8_t* row = src.CheckBytes(int64_t(i * p.srcNdMatrixStride + r * p.srcDValue) * int64_t(sizeof(T)),
                                                uint64_t(p.dValue) * sizeof(T), what);
            emu::CountBurstAt(src.Buffer(), uint64_t(row - src.Buffer()->base),
                              uint64_t(p.dValue) * sizeof(T));   // the source row is one contiguous GM run
        }
    }
}

// ---------------------------------------------------------------- L1 -> L0A / L0B (MTE1)
// Reference §1.10 step 3; units in LoadData2DParams. src in L1 (32-B aligned), dst in L0A or L0B (512-B aligned).
// Fractal r (r < repeatTimes) moves 512 B from src byte (startIndex + r*srcStride)*512 to dst byte
// r*(1 + dstGap)*512; with ifTranspose the 16x16 b16 fractal is transposed (element (row, col) -> (col, row)).
template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p,
              emu::Site site = emu::Site::Here())
{
    const char* what = "LoadData";
    emu::UbArena* sa = emu_detail::CubeOperand(src, emu::MemKind::L1, what, "source", "A1/B1");
    emu::UbArena* da = emu_detail::L0Destination(dst, what);
    emu_detail::CubeAlign(src, emu::kBlock, what, "L1 source");
    if (p.addrMode != 0)
        emu::Fault(emu::Cat(what, ": addrMode ", int(p.addrMode), " (decrementing) is only for GM->L1; use 0"));
    if (p.repeatTimes == 0) return;
    if (p.ifTranspose && !emu_detail::IsB16<T>())
        emu::Fault(emu::Cat(what, ": ifTranspose needs a 2-byte type (half/bfloat16_t/int16_t/uint16_t), got ",
                            sizeof(T), "-byte elements"));
    const uint64_t F = 512;
    const emu::Instr in = emu::Issue(emu::kPipeMTE1, what, site);
    for (uint64_t r = 0; r < p.repeatTimes; ++r) {
        uint64_t s = (uint64_t(p.startIndex) + r * p.srcStride) * F;
        uint64_t d = r * (1 + uint64_t(p.dstGap)) * F;
        emu_detail::CubeSpan(src, s + F, what, "L1 source");
        emu_detail::CubeSpan(dst, d + F, what, "destination");
        emu::Touch(in, sa, src.Offset() + s, F, false);
        emu::Touch(in, da, dst.Offset() + d, F, true);
        const uint8_t* sd = sa->data.data() + src.Offset() + s;
        const uint8_t* sw = sa->written.data() + src.Offset() + s;
        uint8_t* dd = da->data.data() + dst.Offset() + d;
        uint8_t* dw = da->written.data() + dst.Offset() + d;
        if (!p.ifTranspose) {
            std::memmove(dd, sd, F);
            std::memmove(dw, sw, F);
        } else {
            uint8_t tmp[512], tw[512];
            for (int row = 0; row < 16; ++row)
                for (int col = 0; col < 16; ++col) {
                    int from = (row * 16 + col) * 2, to = (col * 16 + row) * 2;
                    tmp[to] = sd[from]; tmp[to + 1] = sd[from + 1];
                    tw[to] = sw[from]; tw[to + 1] = sw[from + 1];
                }
            std::memcpy(dd, tmp, F);
            std::memcpy(dw, tw, F);
        }
    }
}

// ---------------------------------------------------------------- L1 -> L0A / L0B with transpose (MTE1)
// LoadDataWithTranspose(dst, src, LoadData2dTransposeParams): int8_t / uint8_t only here (the b16 / b32 / b4 squares
// are not modelled: a fault). Square r (r < repeatTimes): the 1024 B from src byte (startIndex + r*srcStride)*1024,
// a 32 x 32 byte matrix, transposed (element (i, j) -> (j, i)); rows 0-15 of the result (its first fractal) go to
// dst byte r*(1 + dstGap)*512, rows 16-31 (its second) 1 + dstFracGap fractals after that (512-B units; reference
// §1.10). dstGap 1, dstFracGap 0: the squares contiguous (an int8 B [K, N] in L1 NZ becomes B's L0B ZN); dstGap 0,
// dstFracGap k1 - 1: the k1 squares of a 32-column piece of an int8 Aᵀ [K, M] become two L0A ZZ fractal rows.
// src in L1 (32-B aligned), dst in L0A or L0B (512-B aligned: CANN's CheckLoadDataWithTranspose); two fractals of
// one instruction on one destination fractal (dstGap 0 with dstFracGap 0: a square's second fractal overwritten by
// the next square's first) and addrMode != 0 fault.
template <typename T>
void LoadDataWithTranspose(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2dTransposeParams& p,
                           emu::Site site = emu::Site::Here())
{
    const char* what = "LoadDataWithTranspose";
    emu::UbArena* sa = emu_detail::CubeOperand(src, emu::MemKind::L1, what, "source", "A1/B1");
    emu::UbArena* da = emu_detail::L0Destination(dst, what);
    emu_detail::CubeAlign(src, emu::kBlock, what, "L1 source");
    if (sizeof(T) != 1)
        emu::Fault(emu::Cat(what, ": ", sizeof(T), "-byte elements; the emulation models int8_t / uint8_t squares of "
                            "32 x 32 only"));
    if (p.addrMode != 0) emu::Fault(emu::Cat(what, ": addrMode ", int(p.addrMode), " not modelled; use 0"));
    if (p.repeatTimes == 0) return;
    const uint64_t step = 1 + uint64_t(p.dstGap), apart = 1 + uint64_t(p.dstFracGap);
    if (apart % step == 0 && apart / step < p.repeatTimes)   // square r's second fractal is square r + apart/step's first
        emu::Fault(emu::Cat(what, ": dstGap ", p.dstGap, " with dstFracGap ", p.dstFracGap, " writes two fractals of ",
                            int(p.repeatTimes), " squares to one destination fractal"));
    const uint64_t SQ = 1024, FR = 512;
    const emu::Instr in = emu::Issue(emu::kPipeMTE1, what, site);
    for (uint64_t r = 0; r < p.repeatTimes; ++r) {
        uint64_t s = (uint64_t(p.startIndex) + r * p.srcStride) * SQ;
        uint64_t d0 = r * step * FR, d1 = d0 + apart * FR;
        emu_detail::CubeSpan(src, s + SQ, what, "L1 source");
        emu_detail::CubeSpan(dst, d1 + FR, what, "destination");
        emu::Touch(in, sa, src.Offset() + s, SQ, false);
        emu::Touch(in, da, dst.Offset() + d0, FR, true);
        emu::Touch(in, da, dst.Offset() + d1, FR, true);
        const uint8_t* sd = sa->data.data() + src.Offset() + s;
        const uint8_t* sw = sa->written.data() + src.Offset() + s;
        uint8_t tmp[1024], tw[1024];
        for (int i = 0; i < 32; ++i)
            for (int j = 0; j < 32; ++j) {
                tmp[j * 32 + i] = sd[i * 32 + j];
                tw[j * 32 + i] = sw[i * 32 + j];
            }
        std::memcpy(da->data.data() + dst.Offset() + d0, tmp, FR);
        std::memcpy(da->written.data() + dst.Offset() + d0, tw, FR);
        std::memcpy(da->data.data() + dst.Offset() + d1, tmp + FR, FR);
        std::memcpy(da->written.data() + dst.Offset() + d1, tw + FR, FR);
    }
}

// ---------------------------------------------------------------- Mmad (PIPE_M)
// Reference §1.10 step 5, layouts in the header comment. Types: (half, half) -> float, (bfloat16_t, bfloat16_t)
// -> float, (float, float) -> float, (int8_t, int8_t) -> int32_t (C0 = 32: a 16 x 32 fractal of 512 B in L0A / L0B,
// k padded to 32; the products summed exactly in int64 and the int32 result wrapping on overflow, which the docs
// leave open -- |sum| < 2^31 for K < 2^17, where it is exact either way). dst (L0C, CO1) 1024-B aligned, fm (L0A, A2) and filter (L0B, B2) 512-B
// aligned.
namespace emu_detail {
// The bias row of a Mmad with a bias-table operand: its arena and byte offset (arena null: no bias).
struct BiasRow { emu::UbArena* a = nullptr; uint64_t off = 0; };
template <typename T, typename U, typename S>
void MmadImpl(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter, const MmadParams& p,
              BiasRow bias, emu::Site site);
}  // namespace emu_detail

template <typename T, typename U, typename S>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter, const MmadParams& p,
          emu::Site site = emu::Site::Here())
{
    if (p.cmatrixSource)
        emu::Fault("Mmad: cmatrixSource=true without a bias tensor (use the Mmad overload taking the C2 bias)");
    emu_detail::MmadImpl(dst, fm, filter, p, emu_detail::BiasRow{}, site);
}

// Mmad with a bias (reference §1.10 "Bias on the cube"): the bias tensor lies in the bias table (C2, 64-B aligned,
// of the result's type: float, or int32_t for int8 operands); C starts at its first n values broadcast over the m rows (cmatrixSource = true; the bias replaces
// cmatrixInitVal's zero or L0C's value), then A x B is added. A bias in L0C (CO1) is not emulated.
template <typename T, typename U, typename S, typename V>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter, const LocalTensor<V>& bias,
          const MmadParams& p, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<V, T>::value && (std::is_same<V, float>::value || std::is_same<V, int32_t>::value),
                  "Mmad: the emulated bias-table row has the result's type (float, or int32_t for int8 operands)");
    emu::UbArena* ba = emu_detail::CubeOperand(bias, emu::MemKind::BT, "Mmad", "bias", "C2");
    emu_detail::CubeAlign(bias, 64, "Mmad", "bias (bias table)");
    emu_detail::CubeSpan(bias, uint64_t(p.n) * sizeof(V), "Mmad", "bias (bias table)");
    emu_detail::MmadImpl(dst, fm, filter, p, emu_detail::BiasRow{ba, bias.Offset()}, site);
}

template <typename T, typename U, typename S>
void emu_detail::MmadImpl(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                          const MmadParams& p, BiasRow bias, emu::Site site)
{
    static_assert(std::is_same<U, S>::value, "Mmad: fm and filter must have the same type");
    static_assert((std::is_same<T, float>::value &&
                   (std::is_same<U, half>::value || std::is_same<U, bfloat16_t>::value || std::is_same<U, float>::value)) ||
                      (std::is_same<T, int32_t>::value && std::is_same<U, int8_t>::value),
                  "Mmad: emulated type combinations are half/bfloat16_t/float inputs with a float result and int8_t "
                  "inputs with an int32_t result");
    constexpr bool integral = std::is_same<T, int32_t>::value;   // int8 x int8 -> int32: exact integer sums
    const char* what = "Mmad";
    emu_detail::RequireCubeArch(what);
    emu::CountCube(p.m, p.n, p.k);
    emu::UbArena* ca = emu_detail::CubeOperand(dst, emu::MemKind::L0C, what, "dst (result C)", "CO1");
    emu::UbArena* aa = emu_detail::CubeOperand(fm, emu::MemKind::L0A, what, "fm (left matrix A)", "A2");
    emu::UbArena* ba = emu_detail::CubeOperand(filter, emu::MemKind::L0B, what, "filter (right matrix B)", "B2");
    emu_detail::CubeAlign(dst, 1024, what, "dst (L0C)");
    emu_detail::CubeAlign(fm, 512, what, "fm (L0A)");
    emu_detail::CubeAlign(filter, 512, what, "filter (L0B)");
    if (p.m > 4095 || p.n > 4095 || p.k > 4095)
        emu::Fault(emu::Cat(what, ": m/n/k = ", p.m, "/", p.n, "/", p.k, " outside [0, 4095]"));
    if (p.unitFlag != 0 && p.unitFlag != 2 && p.unitFlag != 3)
        emu::Fault(emu::Cat(what, ": unitFlag ", int(p.unitFlag), " (valid: 0, 2, 3)"));
    if (!p.m || !p.n || !p.k) return;
    const bool accumulate = !bias.a && (!p.cmatrixInitVal || p.isBias);
    const uint64_t m = p.m, n = p.n, k = p.k;
    constexpr uint64_t C0 = emu::kBlock / sizeof(U);
    const uint64_t kAlign = sizeof(U) == 4 ? (p.kDirectionAlign ? 16 : 8) : C0;
    const uint64_t K1 = (k + kAlign - 1) / kAlign * (kAlign / C0);
    const uint64_t M1 = (m + 15) / 16, N1 = (n + 15) / 16;
    const bool gemv = m == 1;
    const uint64_t aElems = gemv ? k : M1 * K1 * 16 * C0, bElems = K1 * N1 * C0 * 16, cElems = M1 * N1 * 256;
    emu_detail::CubeSpan(fm, aElems * sizeof(U), what, gemv ? "fm (GEMV vector, m = 1)" : "fm (L0A)");
    emu_detail::CubeSpan(filter, bElems * sizeof(U), what, "filter (L0B)");
    emu_detail::CubeSpan(dst, cElems * sizeof(T), what, "dst (L0C)");
    {
        const emu::Instr in = emu::Issue(emu::kPipeM, what, site);
        emu::Touch(in, aa, fm.Offset(), aElems * sizeof(U), false);
        emu::Touch(in, ba, filter.Offset(), bElems * sizeof(U), false);
        if (accumulate) emu::Touch(in, ca, dst.Offset(), cElems * sizeof(T), false);
        if (bias.a) emu::Touch(in, bias.a, bias.off, n * sizeof(T), false);
        emu::Touch(in, ca, dst.Offset(), cElems * sizeof(T), true);
    }
    auto load = [](const emu::UbArena* ar, uint64_t base, uint64_t e, bool& ok) -> double {
        const uint64_t at = base + e * sizeof(U);
        ok = ok && ar->IsWritten(at, sizeof(U));
        U v; std::memcpy(&v, ar->data.data() + at, sizeof(U));
        return double(emu_detail::CubeToFloat(v));
    };
    std::vector<double> av(m * k), bt(n * k);   // A row-major, B transposed (column j contiguous)
    std::vector<char> rowOk(m, 1), colOk(n, 1);
    for (uint64_t i = 0; i < m; ++i) {
        bool ok = true;
        for (uint64_t kk = 0; kk < k; ++kk) {
            uint64_t e = gemv ? kk : ((i / 16) * K1 + kk / C0) * 16 * C0 + (i % 16) * C0 + kk % C0;
            av[i * k + kk] = load(aa, fm.Offset(), e, ok);
        }
        rowOk[i] = ok;
    }
    for (uint64_t j = 0; j < n; ++j) {
        bool ok = true;
        for (uint64_t kk = 0; kk < k; ++kk) {
            uint64_t e = ((kk / C0) * N1 + j / 16) * C0 * 16 + (j % 16) * C0 + kk % C0;
            bt[j * k + kk] = load(ba, filter.Offset(), e, ok);
        }
        colOk[j] = ok;
    }
    uint8_t* cd = ca->data.data() + dst.Offset();
    uint8_t* cw = ca->written.data() + dst.Offset();
    for (uint64_t i = 0; i < m; ++i) {
        const double* ar = &av[i * k];
        for (uint64_t j = 0; j < n; ++j) {
            const double* br = &bt[j * k];
            const uint64_t at = (((j / 16) * M1 + i / 16) * 256 + (i % 16) * 16 + j % 16) * sizeof(T);
            T acc = T(0);
            bool ok = rowOk[i] && colOk[j];
            if (accumulate) {
                std::memcpy(&acc, cd + at, sizeof(T));
                ok = ok && ca->IsWritten(dst.Offset() + at, sizeof(T));
            } else if (bias.a) {   // the bias row (of T: float, or int32_t for int8 operands), broadcast over the rows
                std::memcpy(&acc, bias.a->data.data() + bias.off + j * sizeof(T), sizeof(T));
                ok = ok && bias.a->IsWritten(bias.off + j * sizeof(T), sizeof(T));
            }
            if constexpr (integral) {   // int8 products summed exactly; the int32 sum wraps (two's complement)
                int64_t sum = acc;
                for (uint64_t kk = 0; kk < k; ++kk) sum += int64_t(ar[kk]) * int64_t(br[kk]);
                acc = T(int32_t(uint32_t(uint64_t(sum))));
            } else {
                for (uint64_t k0 = 0; k0 < k; k0 += C0) {
                    double part = 0.0;
                    const uint64_t k1 = std::min(k, k0 + C0);
                    for (uint64_t kk = k0; kk < k1; ++kk) part += ar[kk] * br[kk];
                    acc = static_cast<float>(double(acc) + part);
                }
            }
            std::memcpy(cd + at, &acc, sizeof(T));
            std::memset(cw + at, ok ? 1 : 0, sizeof(T));
        }
    }
}

// ---------------------------------------------------------------- L1 -> bias table (PIPE_MTE1)
// Reference §1.10 "Bias on the cube". dst in the bias table (C2, float, 64-B aligned), src in L1 (C1 / A1 / B1,
// 32-B aligned): blockCount x blockLen 64-B blocks of the SOURCE (the count CANN's matmul computes for either type),
// gaps srcStride / dstStride in 64-B blocks; U = T copies (float, or an int8 product's int32_t bias), half -> float converts (the destination twice the
// bytes); any other pair (bfloat16_t -> float is arch 3510's) faults. Poison travels per element.
template <typename T, typename U>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<U>& src, const DataCopyParams& p,
              emu::Site site = emu::Site::Here())
{
    const char* what = "DataCopy(L1 -> BiasTable)";
    emu::UbArena* da = emu_detail::CubeOperand(dst, emu::MemKind::BT, what, "destination", "C2");
    emu::UbArena* sa = emu_detail::CubeOperand(src, emu::MemKind::L1, what, "source", "C1");
    emu_detail::CubeAlign(dst, 64, what, "destination (bias table)");
    emu_detail::CubeAlign(src, emu::kBlock, what, "source (L1)");
    constexpr bool same = std::is_same<T, U>::value, conv = std::is_same<T, float>::value && std::is_same<U, half>::value;
    if constexpr (!same && !conv) {
        emu::Fault(emu::Cat(what, ": ", sizeof(U), "-byte source into a ", sizeof(T), "-byte bias table: arch 2201 "
                            "copies one type or converts half to float (bfloat16_t -> float is arch 3510's)"));
    } else {
        const emu::Instr in = emu::Issue(emu::kPipeMTE1, what, site);
        const uint64_t len = uint64_t(p.blockLen) * 64, dlen = len / sizeof(U) * sizeof(T);
        uint64_t s = 0, d = 0;
        for (uint32_t b = 0; b < p.blockCount; ++b) {
            emu_detail::CubeSpan(src, s + len, what, "source (L1)");
            emu_detail::CubeSpan(dst, d + dlen, what, "destination (bias table)");
            emu::Touch(in, sa, src.Offset() + s, len, false);
            emu::Touch(in, da, dst.Offset() + d, dlen, true);
            for (uint64_t e = 0; e < len / sizeof(U); ++e) {
                U v; std::memcpy(&v, sa->data.data() + src.Offset() + s + e * sizeof(U), sizeof(U));
                T w;
                if constexpr (same) w = v;   // one type: the bits as they are (int32_t too)
                else w = static_cast<T>(emu_detail::CubeToFloat(v));
                std::memcpy(da->data.data() + dst.Offset() + d + e * sizeof(T), &w, sizeof(T));
                da->MarkWritten(dst.Offset() + d + e * sizeof(T), sizeof(T),
                                sa->IsWritten(src.Offset() + s + e * sizeof(U), sizeof(U)));
            }
            s += len + uint64_t(p.srcStride) * 64;
            d += dlen + uint64_t(p.dstStride) * 64;
        }
    }
}

// ---------------------------------------------------------------- L0C -> GM (PIPE_FIX)
// Reference §1.10 step 6; units in FixpipeParamsV220. T = destination type, U = L0C type (float). src (L0C, CO1)
// 64-B aligned. ROW_MAJOR: element (row i, column j) of matrix nd comes from L0C element
// nd*srcNdStride*1024/sizeof(U) + ((j/16)*srcStride + i)*16 + j%16 and goes to dst element
// nd*dstNdStride + i*dstStride + j. NZ: 16-column block c comes from src + c*srcStride*16 elements (mSize rows of
// 16) and goes to dst byte c*dstStride*32 (mSize rows of 16 T).
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p,
             emu::Site site = emu::Site::Here())
{
    const char* what = "Fixpipe";
    static_assert(std::is_same<U, float>::value || std::is_same<U, int32_t>::value,
                  "Fixpipe: the emulated L0C types are float and int32_t");
    constexpr bool intC = std::is_same<U, int32_t>::value;   // an int8 Mmad's int32 L0C: NoQuant into int32_t only
    emu::UbArena* ca = emu_detail::CubeOperand(src, emu::MemKind::L0C, what, "src", "CO1");
    emu_detail::CubeAlign(src, 64, what, "src (L0C)");
    const bool toHalf = std::is_same<T, half>::value, toBf16 = std::is_same<T, bfloat16_t>::value,
               toFloat = std::is_same<T, float>::value;
    if (intC && (p.quantPre != QuantMode_t::NoQuant || !std::is_same<T, int32_t>::value))
        emu::Fault(emu::Cat(what, ": an int32_t L0C is written as int32_t with quantPre NoQuant here (quantPre ",
                            int(p.quantPre), ", a ", sizeof(T), "-byte destination: the dequantising modes DEQF16 / "
                            "VDEQF16 / REQ8 / VREQ8 are not emulated)"));
    switch (intC ? QuantMode_t::F322F16 : p.quantPre) {   // (int32 -> int32 checked above)
    case QuantMode_t::NoQuant:
        if (!toFloat) emu::Fault(emu::Cat(what, ": quantPre NoQuant keeps float but the destination is a ", sizeof(T),
                                          "-byte type (use QuantMode_t::F322F16 / F322BF16)"));
        break;
    case QuantMode_t::F322F16:
        if (!toHalf && !intC) emu::Fault(emu::Cat(what, ": quantPre F322F16 needs a half destination"));
        break;
    case QuantMode_t::F322BF16:
        if (!toBf16) emu::Fault(emu::Cat(what, ": quantPre F322BF16 needs a bfloat16_t destination"));
        break;
    default:
        emu::Fault(emu::Cat(what, ": quantPre ", int(p.quantPre), " (integer / tensor quantisation) is not emulated"));
    }
    if (p.isChannelSplit) emu::Fault(emu::Cat(what, ": isChannelSplit is not emulated"));
    if (p.unitFlag != 0 && p.unitFlag != 2 && p.unitFlag != 3)
        emu::Fault(emu::Cat(what, ": unitFlag ", int(p.unitFlag), " (valid: 0, 2, 3)"));
    if (config.format == CO2Layout::COLUMN_MAJOR) emu::Fault(emu::Cat(what, ": CFG_COLUMN_MAJOR is not emulated"));
    if (p.ndNum == 0) return;
    const bool nz = config.format == CO2Layout::NZ;
    if (p.nSize < 1 || p.nSize > 4095) emu::Fault(emu::Cat(what, ": nSize ", p.nSize, " outside [1, 4095]"));
    if (p.mSize < 1 || (!nz && p.mSize > 8192))
        emu::Fault(emu::Cat(what, ": mSize ", p.mSize, " outside [1, ", nz ? 65535 : 8192, "]"));
    if (nz && p.nSize % 16) emu::Fault(emu::Cat(what, ": CFG_NZ needs nSize a multiple of 16, got ", p.nSize));
    if (nz && p.ndNum != 1) emu::Fault(emu::Cat(what, ": ndNum applies to CFG_ROW_MAJOR (NZ2ND) only"));
    if (!nz && p.dstStride < p.nSize)
        emu::Fault(emu::Cat(what, ": dstStride ", p.dstStride, " (destination row pitch, elements) < nSize ", p.nSize,
                            ": output rows would overlap"));
    if (nz && p.dstStride == 0) emu::Fault(emu::Cat(what, ": dstStride 0 (32-B blocks between 16-column blocks)"));
    if (p.ndNum > 1 && (p.srcNdStride < 1 || p.srcNdStride > 512))
        emu::Fault(emu::Cat(what, ": srcNdStride ", p.srcNdStride, " outside [1, 512] (1024-B units) with ndNum > 1"));
    const int atomic = emu::Core().atomicType;
    if (atomic && atomic != emu_detail::AtomicKind<T>())
        emu::Fault(emu::Cat(what, ": atomic add type does not match the destination element type"));
    const uint64_t srcElems = src.GetSize();
    const emu::Instr fin = emu::Issue(emu::kPipeFIX, what, site);
    if (atomic) emu::SchedJitter();   // the schedule perturbation's point (emu/core.h)
    {
        // The L0C elements read, as one span from the tensor's start (the last row of the last 16-column block).
        const uint64_t lastBlock = (uint64_t(p.nSize) - 1) / 16;
        uint64_t endElem = nz ? (lastBlock * p.srcStride + p.mSize) * 16
                              : (p.ndNum - 1) * uint64_t(p.srcNdStride) * 1024 / sizeof(U) +
                                    (lastBlock * p.srcStride + p.mSize) * 16;
        if (endElem > srcElems) endElem = srcElems;   // readC faults on the first element past the end
        emu::Touch(fin, ca, src.Offset(), endElem * sizeof(U), false);
    }
    auto readC = [&](uint64_t e, uint64_t row, uint64_t col) -> U {
        if (e >= srcElems)
            emu::Fault(emu::Cat(what, ": L0C read of element ", e, " past the end of the ", srcElems,
                                "-element src tensor (row ", row, ", column ", col, ")"));
        const uint64_t at = src.Offset() + e * sizeof(U);
        if (!ca->IsWritten(at, sizeof(U)))
            emu::Fault(emu::Cat(what, ": reads unwritten (poisoned) L0C element (row ", row, ", column ", col,
                                ") at L0C byte address ", at, ": no Mmad produced it from fully written operands "
                                "(mSize/nSize beyond the Mmad's m/n, a srcStride that differs from the Mmad's "
                                "ceil16(m), an L0A/L0B element never loaded, or cmatrixInitVal=false accumulation into "
                                "an L0C never initialised)"));
        U v; std::memcpy(&v, ca->data.data() + at, sizeof(U));
        return p.reluEn && v < U(0) ? U(0) : v;
    };
    auto conv = [](U v) -> T {
        if constexpr (std::is_same<T, U>::value) return v;
        else return T(v);   // half / bfloat16_t: round to nearest even (emu/types.h)
    };
    std::vector<T> row;
    auto store = [&](uint8_t* g, const T* vals, uint64_t cnt) {
        emu::TouchGm(fin, dst.Buffer(), uint64_t(g - dst.Buffer()->base), cnt * sizeof(T), true, atomic);
        if (!atomic) {
            std::memcpy(g, vals, cnt * sizeof(T));
        } else {
            std::lock_guard<std::mutex> l(emu::GmRegistry::Get().atomicMu);
            for (uint64_t e = 0; e < cnt; ++e) {
                T a; std::memcpy(&a, g + e * sizeof(T), sizeof(T));
                T s;
                if constexpr (intC) s = T(int32_t(uint32_t(a) + uint32_t(vals[e])));   // int32 adds wrap
                else s = conv(U(float(a) + float(vals[e])));
                std::memcpy(g + e * sizeof(T), &s, sizeof(T));
            }
        }
        dst.Buffer()->bytesWritten += cnt * sizeof(T);
        emu::CountBurstAt(dst.Buffer(), uint64_t(g - dst.Buffer()->base), cnt * sizeof(T));
    };
    if (!nz) {
        row.resize(p.nSize);
        for (uint64_t nd = 0; nd < p.ndNum; ++nd) {
            const uint64_t sBase = nd * p.srcNdStride * 1024 / sizeof(U);
            for (uint64_t i = 0; i < p.mSize; ++i) {
                for (uint64_t j = 0; j < p.nSize; ++j)
                    row[j] = conv(readC(sBase + ((j / 16) * p.srcStride + i) * 16 + j % 16, i, j));
                const int64_t d = int64_t(nd * p.dstNdStride + i * uint64_t(p.dstStride));
                store(dst.CheckBytes(d * int64_t(sizeof(T)), p.nSize * sizeof(T), what), row.data(), p.nSize);
            }
        }
    } else {
        row.resize(16);
        for (uint64_t c = 0; c < p.nSize / 16; ++c) {
            for (uint64_t i = 0; i < p.mSize; ++i) {
                for (uint64_t j = 0; j < 16; ++j) row[j] = conv(readC((c * p.srcStride + i) * 16 + j, i, c * 16 + j));
                const int64_t d = int64_t(c * uint64_t(p.dstStride) * emu::kBlock + i * 16 * sizeof(T));
                store(dst.CheckBytes(d, 16 * sizeof(T), what), row.data(), 16);
            }
        }
    }
}

}  // namespace AscendC
