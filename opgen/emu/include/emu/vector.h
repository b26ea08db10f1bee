// opgen AscendC emulation: vector instructions, count forms (docs/reference/ascendc.md §1.9). Our own code.
// Poison semantics: a vector op reading an unwritten lane does not fault; the result lane becomes unwritten
// too (computing on pad lanes is legal). The fault fires where an undefined value becomes observable:
// GetValue, or a copy UB->GM.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "emu/tensor.h"

namespace AscendC {

// As the real header for arch 2201 (Atlas A2/A3): no CAST_HYBRID (it exists for arch 3510/5102/3003 only).
enum class RoundMode : uint8_t { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

namespace emu_detail {
template <typename T> inline float ToF(T v) { return static_cast<float>(v); }
// Race detector (emu/pipes.h): the V instruction `in` reads / writes n elements of t from element 0.
template <typename T>
inline void VRead(const emu::Instr& in, const LocalTensor<T>& t, uint64_t n) { emu::TouchT(in, t, t.Offset(), n * sizeof(T), false); }
template <typename T>
inline void VWrite(const emu::Instr& in, const LocalTensor<T>& t, uint64_t n) { emu::TouchT(in, t, t.Offset(), n * sizeof(T), true); }
template <typename T> inline T FromF(float f) { return static_cast<T>(f); }
template <typename T>
void CheckOperand(const LocalTensor<T>& t, uint64_t count, const char* what)
{
    t.CheckAligned(what);
    t.Addr(0, count, what);   // bounds
}
// Lane-wise fast path. When every source lane is written and each source either is dst itself (same
// address, same element size) or does not overlap dst, the result equals the per-lane loop's: the lanes are
// computed in chunks of typed copies and dst is marked written once. Otherwise the per-lane loop runs
// (poison propagates lane by lane; overlapping operands keep their sequential semantics).
template <typename D, typename S>
bool SameOrDisjoint(const LocalTensor<D>& d, const LocalTensor<S>& s, uint64_t n)
{
    if (d.Arena() != s.Arena()) return true;
    const uint64_t d0 = d.Offset(), d1 = d0 + n * sizeof(D), s0 = s.Offset(), s1 = s0 + n * sizeof(S);
    return (d0 == s0 && sizeof(D) == sizeof(S)) || d1 <= s0 || s1 <= d0;
}
template <typename T>
bool AllWritten(const LocalTensor<T>& t, uint64_t n) { return t.Arena()->IsWritten(t.Offset(), n * sizeof(T)); }
constexpr uint64_t kChunk = 256;
// dst[i] = f(src0[i], src1[i]) computed in float, rounded to T (RNE for half/bf16).
template <typename T, typename F>
void Binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t count, const char* what, F f,
            const emu::Site& site)
{
    if (count <= 0) return;
    emu::CountVector(uint64_t(count), sizeof(T), what[0] == 'D' && what[1] == 'i');   // Div is slow
    CheckOperand(dst, count, what); CheckOperand(a, count, what); CheckOperand(b, count, what);
    const uint64_t n = uint64_t(count);
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    VRead(in, a, n); VRead(in, b, n); VWrite(in, dst, n);
    if (AllWritten(a, n) && AllWritten(b, n) && SameOrDisjoint(dst, a, n) && SameOrDisjoint(dst, b, n)) {
        T x[kChunk], y[kChunk];
        uint8_t* ad = a.Arena()->data.data() + a.Offset();
        uint8_t* bd = b.Arena()->data.data() + b.Offset();
        uint8_t* dd = dst.Arena()->data.data() + dst.Offset();
        for (uint64_t i = 0; i < n; i += kChunk) {
            const uint64_t m = std::min(kChunk, n - i);
            std::memcpy(x, ad + i * sizeof(T), m * sizeof(T));
            std::memcpy(y, bd + i * sizeof(T), m * sizeof(T));
            for (uint64_t j = 0; j < m; ++j) x[j] = f(x[j], y[j]);
            std::memcpy(dd + i * sizeof(T), x, m * sizeof(T));
        }
        dst.Arena()->MarkWritten(dst.Offset(), n * sizeof(T));
        return;
    }
    for (int32_t i = 0; i < count; ++i) {
        bool ok = true;
        T x = a.Ld(i, ok), y = b.Ld(i, ok);
        dst.St(i, f(x, y), ok);
    }
}
// dst[i] = f(src[i]); D and S may differ (Cast).
template <typename D, typename S, typename F>
void Lanewise(const LocalTensor<D>& dst, const LocalTensor<S>& a, uint64_t n, F f)
{
    if (AllWritten(a, n) && SameOrDisjoint(dst, a, n)) {
        S x[kChunk];
        D y[kChunk];
        uint8_t* ad = a.Arena()->data.data() + a.Offset();
        uint8_t* dd = dst.Arena()->data.data() + dst.Offset();
        for (uint64_t i = 0; i < n; i += kChunk) {
            const uint64_t m = std::min(kChunk, n - i);
            std::memcpy(x, ad + i * sizeof(S), m * sizeof(S));
            for (uint64_t j = 0; j < m; ++j) y[j] = f(x[j]);
            std::memcpy(dd + i * sizeof(D), y, m * sizeof(D));
        }
        dst.Arena()->MarkWritten(dst.Offset(), n * sizeof(D));
        return;
    }
    for (uint64_t i = 0; i < n; ++i) {
        bool ok = true;
        S x = a.Ld(i, ok);
        dst.St(i, f(x), ok);
    }
}
template <typename T, typename F>
void Unary(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t count, const char* what, F f, const emu::Site& site)
{
    if (count <= 0) return;
    const std::string w(what);
    emu::CountVector(uint64_t(count), sizeof(T), w == "Exp" || w == "Ln" || w == "Sqrt");
    CheckOperand(dst, count, what); CheckOperand(a, count, what);
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    VRead(in, a, uint64_t(count)); VWrite(in, dst, uint64_t(count));
    Lanewise(dst, a, uint64_t(count), f);
}
template <typename T> inline T Fl(float v) { if constexpr (std::is_integral<T>::value) return static_cast<T>(v); else return T(v); }
// The larger / smaller of two values as Max / Min / Maxs / Mins and the max / min reductions give them in the
// INF/NAN mode (asc-devkit boundary-value tables of the Memory vector APIs, docs/reference/ascendc.md §1.13): a NaN
// operand gives NaN, and +0.0 is above -0.0 (IEEE 754-2019 maximum / minimum).
template <typename T> inline T MaxOf(T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        return a > b ? a : b;
    } else {
        const float x = float(a), y = float(b);
        if (std::isnan(x)) return a;
        if (std::isnan(y)) return b;
        if (x == y) return std::signbit(x) ? b : a;
        return x > y ? a : b;
    }
}
template <typename T> inline T MinOf(T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        return a < b ? a : b;
    } else {
        const float x = float(a), y = float(b);
        if (std::isnan(x)) return a;
        if (std::isnan(y)) return b;
        if (x == y) return std::signbit(x) ? a : b;
        return x < y ? a : b;
    }
}
}  // namespace emu_detail

#define EMU_BINARY(NAME, EXPR)                                                                              \
    template <typename T>                                                                                   \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, int32_t count, \
              emu::Site site = emu::Site::Here())                                                           \
    {                                                                                                       \
        emu_detail::Binary(dst, src0, src1, count, #NAME, [](T a0, T b0) -> T {                             \
            if constexpr (std::is_integral<T>::value) { T a = a0, b = b0; return static_cast<T>(EXPR); }   \
            else { float a = float(a0), b = float(b0); return T(static_cast<float>(EXPR)); }                \
        }, site);                                                                                           \
    }
EMU_BINARY(Add, a + b)
EMU_BINARY(Sub, a - b)
EMU_BINARY(Mul, a * b)
EMU_BINARY(Div, a / b)
EMU_BINARY(Max, emu_detail::MaxOf(a, b))
EMU_BINARY(Min, emu_detail::MinOf(a, b))
#undef EMU_BINARY

#define EMU_SCALAR(NAME, EXPR)                                                                              \
    template <typename T>                                                                                   \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, int32_t count,         \
              emu::Site site = emu::Site::Here())                                                           \
    {                                                                                                       \
        T s = scalar;                                                                                       \
        emu_detail::Unary(dst, src, count, #NAME, [s](T a0) -> T {                                          \
            if constexpr (std::is_integral<T>::value) { T a = a0, b = s; return static_cast<T>(EXPR); }    \
            else { float a = float(a0), b = float(s); return T(static_cast<float>(EXPR)); }                 \
        }, site);                                                                                           \
    }
EMU_SCALAR(Adds, a + b)
EMU_SCALAR(Muls, a * b)
EMU_SCALAR(Maxs, emu_detail::MaxOf(a, b))
EMU_SCALAR(Mins, emu_detail::MinOf(a, b))
#undef EMU_SCALAR

// Axpy(dst, src, scalar, count) (docs/reference/ascendc.md §1.9): dst[i] = dst[i] + src[i] * scalar, computed in
// float with the product rounded to float before the sum (the emulation's model: the bits of Muls then Add;
// docs/reference/kernel_cost.md §4), one vector pass.
template <typename T>
void Axpy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, int32_t count,
          emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "Axpy: half / float only");
    const float s = float(scalar);
    emu_detail::Binary(dst, dst, src, count, "Axpy", [s](T d0, T x0) -> T {
        const float prod = float(x0) * s;
        return T(static_cast<float>(float(d0) + prod));
    }, site);
}

#define EMU_UNARY(NAME, EXPR)                                                                               \
    template <typename T>                                                                                   \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t count, emu::Site site = emu::Site::Here()) \
    {                                                                                                       \
        emu_detail::Unary(dst, src, count, #NAME, [](T a0) -> T { float a = float(a0); return T(static_cast<float>(EXPR)); }, site); \
    }
EMU_UNARY(Exp, std::exp(a))
EMU_UNARY(Ln, std::log(a))
EMU_UNARY(Sqrt, std::sqrt(a))
EMU_UNARY(Rsqrt, 1.0f / std::sqrt(a))
EMU_UNARY(Reciprocal, 1.0f / a)
EMU_UNARY(Abs, std::fabs(a))
EMU_UNARY(Relu, a > 0.0f ? a : 0.0f)
#undef EMU_UNARY

// ---- And / Or / Not count forms (docs/reference/ascendc.md §1.9): bitwise per element, int16_t / uint16_t operands
// only (a Compare's bit mask is combined as uint16_t words: count = mask bits / 16).
template <typename T>
void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, int32_t count,
         emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, int16_t>::value || std::is_same<T, uint16_t>::value, "And: int16_t or uint16_t operands");
    emu_detail::Binary(dst, src0, src1, count, "And", [](T a, T b) -> T { return static_cast<T>(a & b); }, site);
}
template <typename T>
void Or(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, int32_t count,
        emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, int16_t>::value || std::is_same<T, uint16_t>::value, "Or: int16_t or uint16_t operands");
    emu_detail::Binary(dst, src0, src1, count, "Or", [](T a, T b) -> T { return static_cast<T>(a | b); }, site);
}
template <typename T>
void Not(const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t count, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, int16_t>::value || std::is_same<T, uint16_t>::value, "Not: int16_t or uint16_t operands");
    emu_detail::Unary(dst, src, count, "Not", [](T a) -> T { return static_cast<T>(~a); }, site);
}

template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalar, int32_t count, emu::Site site = emu::Site::Here())
{
    if (count <= 0) return;
    emu::CountVector(uint64_t(count), sizeof(T));
    emu_detail::CheckOperand(dst, count, "Duplicate");
    emu_detail::VWrite(emu::Issue(emu::kPipeV, "Duplicate", site), dst, uint64_t(count));
    uint8_t* d = dst.Arena()->data.data() + dst.Offset();
    for (int32_t i = 0; i < count; ++i) std::memcpy(d + uint64_t(i) * sizeof(T), &scalar, sizeof(T));
    dst.Arena()->MarkWritten(dst.Offset(), uint64_t(count) * sizeof(T));
}

// CreateVecIndex (docs/reference/ascendc.md §1.9): dst[i] = firstValue + i for i < count; T half / int16_t / float /
// int32_t (the device asserts the type). Float sums are rounded once to T (exact for integers below 2^24 / 2^11).
// The device writes the first 32-B block with SetValue on the scalar unit, syncs S -> V itself (its own
// SetFlag / WaitFlag<S_V>), then fills the rest with Adds on PIPE_V reading that block: emulated as a scalar write of
// the first block (a vector instruction still reading it without a V -> S wait is a race), the S -> V hand-off, and a
// PIPE_V write of all count elements.
template <typename T>
void CreateVecIndex(LocalTensor<T> dst, const T& firstValue, uint32_t count, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, half>::value || std::is_same<T, int16_t>::value || std::is_same<T, float>::value ||
                      std::is_same<T, int32_t>::value,
                  "CreateVecIndex: dst half / int16_t / float / int32_t");
    if (count == 0) return;
    emu::CountVector(uint64_t(count), sizeof(T));
    emu_detail::CheckOperand(dst, int32_t(count), "CreateVecIndex");
    const uint64_t first = std::min<uint64_t>(count, 32 / sizeof(T));
    emu::TouchT(emu::Issue(emu::kPipeS, "CreateVecIndex (first block: SetValue)", site), dst, dst.Offset(),
               first * sizeof(T), true);
    emu::JoinToken(emu::kPipeV, emu::MakeToken(emu::kPipeS));
    emu_detail::VWrite(emu::Issue(emu::kPipeV, "CreateVecIndex", site), dst, uint64_t(count));
    uint8_t* d = dst.Arena()->data.data() + dst.Offset();
    for (uint32_t i = 0; i < count; ++i) {
        T v;
        if constexpr (std::is_same<T, half>::value) v = half(float(double(float(firstValue)) + double(i)));
        else if constexpr (std::is_same<T, float>::value) v = float(double(firstValue) + double(i));
        else v = static_cast<T>(int64_t(firstValue) + int64_t(i));
        std::memcpy(d + uint64_t(i) * sizeof(T), &v, sizeof(T));
    }
    dst.Arena()->MarkWritten(dst.Offset(), uint64_t(count) * sizeof(T));
}

// ---- Cast. Supported pairs (A2/A3 rules, docs/reference/ascendc.md §1.9): half/bf16->float (CAST_NONE only),
// float->half (all modes; NONE = RINT), float->bf16 (no CAST_NONE), float<->int32 (float->int32 needs an
// explicit mode; out-of-range saturates, NaN -> 0 [assumption]), int32->float (NONE = RINT, no ODD), half->int8/uint8
// (every mode but ODD, NONE = RINT, saturating: §1.12), int16->float (CAST_NONE only, exact), float->int16 and
// float->int64 (RINT / FLOOR / CEIL / ROUND / TRUNC, saturating as float->int32), int64->float (RINT / FLOOR /
// CEIL / ROUND / TRUNC, rounded once). Anything else is a fault.
namespace emu_detail {
inline emu::Round ToRound(RoundMode m)
{
    switch (m) {
    case RoundMode::CAST_NONE: return emu::Round::NONE;
    case RoundMode::CAST_RINT: return emu::Round::RINT;
    case RoundMode::CAST_FLOOR: return emu::Round::FLOOR;
    case RoundMode::CAST_CEIL: return emu::Round::CEIL;
    case RoundMode::CAST_ROUND: return emu::Round::ROUND;
    case RoundMode::CAST_TRUNC: return emu::Round::TRUNC;
    case RoundMode::CAST_ODD: return emu::Round::ODD;
    default: emu::Fault("Cast: unknown round mode");
    }
}
template <typename I = int32_t>
inline I FloatToInt(float f, emu::Round m)
{
    if (std::isnan(f)) return 0;
    double x = f, r;
    switch (m) {
    case emu::Round::FLOOR: r = std::floor(x); break;
    case emu::Round::CEIL: r = std::ceil(x); break;
    case emu::Round::TRUNC: r = std::trunc(x); break;
    case emu::Round::ROUND: r = std::round(x); break;   // ties away from zero
    default: {                                          // ties to even
        r = std::floor(x);
        double d = x - r;
        if (d > 0.5 || (d == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
    }
    }
    if (r >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    if (r <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    return static_cast<I>(r);
}
template <typename D, typename S>
D CastOne(S v, RoundMode mode)
{
    constexpr bool sF = std::is_same<S, float>::value, dF = std::is_same<D, float>::value;
    if constexpr ((std::is_same<S, half>::value || std::is_same<S, bfloat16_t>::value) && dF) {
        return float(v);
    } else if constexpr (sF && std::is_same<D, half>::value) {
        return half::FromBits(uint16_t(emu::RoundFloat(v, 10, 5, ToRound(mode))));
    } else if constexpr (sF && std::is_same<D, bfloat16_t>::value) {
        return bfloat16_t::FromBits(uint16_t(emu::RoundFloat(v, 7, 8, ToRound(mode))));
    } else if constexpr (sF && (std::is_same<D, int32_t>::value || std::is_same<D, int16_t>::value ||
                                 std::is_same<D, int64_t>::value)) {
        return FloatToInt<D>(v, ToRound(mode));
    } else if constexpr (std::is_same<S, int16_t>::value && dF) {
        return float(v);   // int16 -> float: exact (CAST_NONE)
    } else if constexpr (std::is_same<S, int64_t>::value && dF) {
        bool neg = v < 0;
        uint64_t mag = neg ? uint64_t(0) - uint64_t(v) : uint64_t(v);
        return emu::BitsFloat(emu::RoundBinary(neg, mag, 0, 23, 8, ToRound(mode)));
    } else if constexpr (std::is_same<S, half>::value && (std::is_same<D, int8_t>::value || std::is_same<D, uint8_t>::value)) {
        return FloatToInt<D>(float(v), ToRound(mode));   // half -> int8 / uint8: the mode, then saturation (§1.12)
    } else if constexpr ((std::is_same<S, uint8_t>::value || std::is_same<S, int8_t>::value) &&
                         std::is_same<D, half>::value) {
        return half(float(v));   // uint8 / int8 -> half: exact (every value is a half), CAST_NONE (§1.12)
    } else if constexpr (std::is_same<S, int32_t>::value && dF) {
        int64_t i = v;
        bool neg = i < 0;
        uint64_t mag = neg ? uint64_t(-i) : uint64_t(i);
        return emu::BitsFloat(emu::RoundBinary(neg, mag, 0, 23, 8, ToRound(mode)));
    } else {
        static_assert(sizeof(D) == 0, "Cast: unsupported dtype pair in the emulation");
    }
}
}  // namespace emu_detail

template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, uint32_t count,
          emu::Site site = emu::Site::Here())
{
    emu::CountVector(count, sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S));
    constexpr bool sF = std::is_same<S, float>::value, dF = std::is_same<D, float>::value;
    if constexpr (!sF && dF && !std::is_same<S, int32_t>::value && !std::is_same<S, int64_t>::value) {
        if (mode != RoundMode::CAST_NONE)
            emu::Fault("Cast half/bf16/int16 -> float: only CAST_NONE is supported on A2/A3");
    }
    if constexpr (std::is_same<S, int32_t>::value && dF) {   // asc-devkit dav_c220 vconv: no s322f32 round-to-odd
        if (mode == RoundMode::CAST_ODD) emu::Fault("Cast int32 -> float: CAST_ODD is not supported on A2/A3");
    }
    if constexpr (std::is_same<S, int64_t>::value && dF) {
        if (mode == RoundMode::CAST_NONE || mode == RoundMode::CAST_ODD)
            emu::Fault("Cast int64 -> float: needs CAST_RINT/FLOOR/CEIL/ROUND/TRUNC");
    }
    if constexpr (sF && (std::is_same<D, int16_t>::value || std::is_same<D, int64_t>::value)) {
        if (mode == RoundMode::CAST_NONE || mode == RoundMode::CAST_ODD)
            emu::Fault("Cast float -> int16/int64: needs CAST_RINT/FLOOR/CEIL/ROUND/TRUNC");
    }
    if constexpr (sF && std::is_same<D, bfloat16_t>::value) {
        if (mode == RoundMode::CAST_NONE) emu::Fault("Cast float -> bfloat16_t: CAST_NONE is not supported on A2/A3 (use CAST_RINT)");
        if (mode == RoundMode::CAST_ODD) emu::Fault("Cast float -> bfloat16_t: CAST_ODD is not supported on A2/A3");
    }
    if constexpr (sF && std::is_same<D, int32_t>::value) {
        if (mode == RoundMode::CAST_NONE || mode == RoundMode::CAST_ODD)
            emu::Fault("Cast float -> int32: needs CAST_RINT/FLOOR/CEIL/ROUND/TRUNC");
    }
    if constexpr (std::is_same<S, half>::value && (std::is_same<D, int8_t>::value || std::is_same<D, uint8_t>::value)) {
        if (mode == RoundMode::CAST_ODD) emu::Fault("Cast half -> int8/uint8: CAST_ODD is not a mode of this conversion");
    }
    if constexpr ((std::is_same<S, uint8_t>::value || std::is_same<S, int8_t>::value) && std::is_same<D, half>::value) {
        if (mode != RoundMode::CAST_NONE) emu::Fault("Cast int8/uint8 -> half: only CAST_NONE (the conversion is exact)");
    }
    if (count == 0) return;
    emu_detail::CheckOperand(dst, count, "Cast");
    emu_detail::CheckOperand(src, count, "Cast");
    const emu::Instr in = emu::Issue(emu::kPipeV, "Cast", site);
    emu_detail::VRead(in, src, count);
    emu_detail::VWrite(in, dst, count);
    emu_detail::Lanewise(dst, src, count, [mode](S v) { return emu_detail::CastOne<D, S>(v, mode); });
}

// ---- Compare / Compares (CompareScalar) / Select count forms (docs/reference/ascendc.md §1.9): the compare writes one bit
// per element into a uint8_t mask, element i in bit i % 8 of byte i / 8; Select reads the same layout (modes 1 and
// 2 consume 256 / sizeof(T) bits a repeat, so in a count form bit i belongs to element i). Types: half / float every
// mode, int32_t EQ only (Compare; CompareScalar takes int32_t too on arch 220). The count must cover whole
// 256-byte repeats: the documented rule for Compare (a partial repeat is ignored on the device), taken for
// Compares and Select too (chosen: stricter than any documented tail behaviour). A mask byte whose source
// lanes are not all written stays unwritten (poison).
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
constexpr uint64_t kSelectScratchOffset = 184 * 1024;   // Select modes 1 / 2 scratch on A2/A3 (8 KB reserved)
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };

namespace emu_detail {
template <typename T>
inline bool CmpOne(T a, T b, CMPMODE m)
{
    const double x = double(ToF(a)), y = double(ToF(b));
    switch (m) {
    case CMPMODE::LT: return x < y;
    case CMPMODE::GT: return x > y;
    case CMPMODE::EQ: return x == y;
    case CMPMODE::LE: return x <= y;
    case CMPMODE::GE: return x >= y;
    case CMPMODE::NE: return x != y;
    }
    emu::Fault("Compare: unknown CMPMODE");
}
template <> inline bool CmpOne<int32_t>(int32_t a, int32_t b, CMPMODE m)
{
    if (m != CMPMODE::EQ) emu::Fault("Compare int32_t: only CMPMODE::EQ is supported on A2/A3");
    return a == b;
}
template <typename T>
void CheckWholeRepeats(uint32_t count, const char* what)
{
    if ((uint64_t(count) * sizeof(T)) % 256 != 0)
        emu::Fault(emu::Cat(what, ": count ", count, " x ", sizeof(T), " bytes is not a multiple of 256 bytes (whole "
                                  "repeats only; a partial repeat is ignored on the device)"));
}
template <typename T, typename GetB>
void CompareImpl(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& a, GetB getb, CMPMODE mode, uint32_t count,
                 const char* what, const emu::Site& site)
{
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value || std::is_same<T, int32_t>::value,
                  "Compare: half, float or int32_t operands");
    CheckWholeRepeats<T>(count, what);
    if (count == 0) return;
    emu::CountVector(count, sizeof(T));
    CheckOperand(dst, count / 8, what);
    CheckOperand(a, count, what);
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    VRead(in, a, count);
    VWrite(in, dst, count / 8);
    for (uint32_t byte = 0; byte < count / 8; ++byte) {
        bool ok = true;
        uint8_t v = 0;
        for (uint32_t k = 0; k < 8; ++k) {
            const uint32_t i = byte * 8 + k;
            T x = a.Ld(i, ok);
            T y = getb(i, ok);
            if (CmpOne<T>(x, y, mode)) v = uint8_t(v | (1u << k));
        }
        dst.St(byte, v, ok);
    }
}
}  // namespace emu_detail

template <typename T, typename U>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
             uint32_t count, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<U, uint8_t>::value, "Compare: the destination is a uint8_t bit mask");
    emu_detail::CheckOperand(src1, count, "Compare");
    emu_detail::CompareImpl<T>(dst, src0, [&](uint32_t i, bool& ok) { return src1.Ld(i, ok); }, cmpMode, count,
                               "Compare", site);
}

template <typename T, typename U>
void Compares(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode,
              uint32_t count, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<U, uint8_t>::value, "Compares: the destination is a uint8_t bit mask");
    emu_detail::CompareImpl<T>(dst, src0, [&](uint32_t, bool&) { return src1Scalar; }, cmpMode, count,
                               "Compares", site);
}
// CompareScalar: CANN's deprecated name of Compares (kept so older kernels build).
template <typename T, typename U>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode,
                   uint32_t count, emu::Site site = emu::Site::Here())
{
    Compares(dst, src0, src1Scalar, cmpMode, count, site);
}

namespace emu_detail {
template <typename T, typename U, typename GetB>
void SelectImpl(const LocalTensor<T>& dst, const LocalTensor<U>& mask, const LocalTensor<T>& a, GetB getb,
                uint32_t count, const char* what, const emu::Site& site)
{
    static_assert(std::is_same<U, uint8_t>::value, "Select: the mask is a uint8_t bit mask");
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value, "Select: half or float operands");
    CheckWholeRepeats<T>(count, what);
    // Modes 1 and 2 use a scratch block at UB byte 184 KB on A2/A3 (Select's constraints: keep 8 KB of UB free):
    // a kernel whose buffers reach past it would have a live buffer overwritten.
    if (dst.Arena()->kind == emu::MemKind::UB && dst.Arena()->used > kSelectScratchOffset)
        emu::Fault(emu::Cat(what, ": the kernel's UB buffers take ", dst.Arena()->used, " bytes, past byte ",
                            kSelectScratchOffset, " where Select keeps its scratch on A2/A3 (reserve 8 KB of UB)"));
    if (count == 0) return;
    emu::CountVector(count, sizeof(T));
    CheckOperand(dst, count, what);
    CheckOperand(mask, count / 8, what);
    CheckOperand(a, count, what);
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    VRead(in, a, count);
    VRead(in, mask, count / 8);
    VWrite(in, dst, count);
    for (uint32_t i = 0; i < count; ++i) {
        bool ok = true;
        const uint8_t m = mask.Ld(i / 8, ok);
        T x = a.Ld(i, ok);
        T y = getb(i, ok);
        dst.St(i, ((m >> (i % 8)) & 1u) ? x : y, ok);
    }
}
}  // namespace emu_detail

// Tensor-tensor form (VSEL_TENSOR_TENSOR_MODE): dst[i] = bit i of selMask ? src0[i] : src1[i].
template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
            const LocalTensor<T>& src1, SELMODE selMode, uint32_t count, emu::Site site = emu::Site::Here())
{
    if (selMode != SELMODE::VSEL_TENSOR_TENSOR_MODE)
        emu::Fault("Select with two tensors: the emulation implements SELMODE::VSEL_TENSOR_TENSOR_MODE only");
    emu_detail::CheckOperand(src1, count, "Select");
    emu_detail::SelectImpl(dst, selMask, src0, [&](uint32_t i, bool& ok) { return src1.Ld(i, ok); }, count, "Select",
                           site);
}

// Tensor-scalar form (VSEL_TENSOR_SCALAR_MODE): dst[i] = bit i of selMask ? src0[i] : src1.
template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, T src1,
            SELMODE selMode, uint32_t count, emu::Site site = emu::Site::Here())
{
    if (selMode != SELMODE::VSEL_TENSOR_SCALAR_MODE)
        emu::Fault("Select with a scalar: the mode must be SELMODE::VSEL_TENSOR_SCALAR_MODE");
    emu_detail::SelectImpl(dst, selMask, src0, [&](uint32_t, bool&) { return src1; }, count, "Select", site);
}

// ---- ReduceSum count form: sum of src[0..count) -> dst[0]. Order: per 256-B repeat a pairwise tree, then
// the per-repeat sums reduced again the same way (an assumption about hardware order; float accumulation,
// rounded to T after every add).
template <typename T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& tmp, int32_t count,
               emu::Site site = emu::Site::Here())
{
    if (count <= 0) return;
    emu::CountVector(uint64_t(count), sizeof(T));
    emu::CountVector(uint64_t(count) * sizeof(T) / 256, sizeof(T));   // the second pass over per-repeat sums
    emu_detail::CheckOperand(src, count, "ReduceSum");
    if (dst.Offset() % sizeof(T)) emu::Fault("ReduceSum: dst not element-aligned");
    dst.Addr(0, 1, "ReduceSum");
    // tmp receives at least the first round's per-repeat sums (align_up(ceil(count / per-repeat), per-block)
    // elements; the exact size formula is the implementation's, §1.9): a lower bound, bounds-checked and written
    // on the vector pipe, so an unsynchronised access to it by another instruction is a race.
    const uint64_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    const uint64_t need = ((uint64_t(count) + perRepeat - 1) / perRepeat + perBlock - 1) / perBlock * perBlock;
    tmp.Addr(0, need, "ReduceSum tmp");
    {
        const emu::Instr in = emu::Issue(emu::kPipeV, "ReduceSum", site);
        emu_detail::VRead(in, src, uint64_t(count));
        emu_detail::VWrite(in, tmp, need);
        emu_detail::VWrite(in, dst, 1);
    }
    std::vector<T> cur(count);
    const bool ok = emu_detail::AllWritten(src, uint64_t(count));
    std::memcpy(cur.data(), src.Arena()->data.data() + src.Offset(), uint64_t(count) * sizeof(T));
    const size_t lanes = 256 / sizeof(T);
    while (cur.size() > 1) {
        std::vector<T> next;
        for (size_t r = 0; r < cur.size(); r += lanes) {
            std::vector<T> v(cur.begin() + r, cur.begin() + std::min(cur.size(), r + lanes));
            while (v.size() > 1) {
                size_t h = (v.size() + 1) / 2;
                for (size_t k = 0; k + h < v.size(); ++k) v[k] = T(float(v[k]) + float(v[k + h]));
                v.resize(h);
            }
            next.push_back(v[0]);
        }
        cur.swap(next);
    }
    dst.St(0, cur[0], ok);
}

// ---- ReduceMax count form: max of src[0..count) -> dst[0] (CANN API "ReduceMax", tensor-front-n form). The
// sharedTmpBuffer must hold the first round's (value, index) pairs: align_up(ceil(count / per-repeat) * 2, per-block)
// elements; a smaller one is a fault, as is calIndex (the index output is not emulated). A NaN lane gives NaN,
// +0.0 is above -0.0 (emu_detail::MaxOf).
template <typename T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& sharedTmpBuffer,
               const int32_t count, bool calIndex = 0, emu::Site site = emu::Site::Here())
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "ReduceMax: half/float only");
    if (calIndex) emu::Fault("ReduceMax: calIndex = true is not emulated");
    if (count <= 0) return;
    emu::CountVector(uint64_t(count), sizeof(T));
    emu_detail::CheckOperand(src, count, "ReduceMax");
    src.CheckAligned("ReduceMax");
    sharedTmpBuffer.CheckAligned("ReduceMax");
    const uint64_t perRepeat = 256 / sizeof(T), perBlock = 32 / sizeof(T);
    const uint64_t need = (((uint64_t(count) + perRepeat - 1) / perRepeat) * 2 + perBlock - 1) / perBlock * perBlock;
    sharedTmpBuffer.Addr(0, need, "ReduceMax sharedTmpBuffer");
    dst.Addr(0, 1, "ReduceMax");
    {
        const emu::Instr in = emu::Issue(emu::kPipeV, "ReduceMax", site);
        emu_detail::VRead(in, src, uint64_t(count));
        emu_detail::VWrite(in, sharedTmpBuffer, need);
        emu_detail::VWrite(in, dst, 1);
    }
    const bool ok = emu_detail::AllWritten(src, uint64_t(count));
    bool first = true;
    T best{};
    for (int32_t i = 0; i < count; ++i) {
        bool good = true;
        const T v = src.Ld(uint64_t(i), good);
        best = first ? v : emu_detail::MaxOf(best, v);
        first = false;
    }
    dst.St(0, best, ok);
}

// ---- Gather, count form (docs/reference/ascendc.md §1.9): for i < count, dst[i] = the element of src at byte
// offset srcBaseAddr + srcOffset[i] from src's start. Offsets are BYTES (uint32). dst, src and srcOffset
// start 32-byte aligned; 16/32-bit element types (A2/A3 list: int16/uint16/half/bf16/int32/uint32/float).
// Lanes >= count are untouched. Stricter than hardware (which leaves these unspecified): an offset that
// is not a multiple of sizeof(T) or points past the end of src's tensor is a fault, an unwritten
// (poisoned) offset is a fault (it would address garbage), and a source element inside dst's written
// range is a fault (an in-place permutation would read lanes already overwritten). A poisoned source
// element poisons its dst lane (like every vector op).
template <typename T>
void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& srcOffset,
            const uint32_t srcBaseAddr, const uint32_t count, emu::Site site = emu::Site::Here())
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Gather: 16/32-bit element types only");
    if (count == 0) return;
    emu::CountVector(count, sizeof(T));
    emu_detail::CheckOperand(dst, count, "Gather");
    emu_detail::CheckOperand(srcOffset, count, "Gather");
    src.CheckAligned("Gather");
    const uint64_t dstLo = dst.Offset(), dstHi = dst.Offset() + uint64_t(count) * sizeof(T);
    const emu::Instr in = emu::Issue(emu::kPipeV, "Gather", site);
    emu_detail::VRead(in, srcOffset, count);
    std::vector<T> vals(count);
    std::vector<char> good(count);
    for (uint32_t i = 0; i < count; ++i) {
        bool okOff = true;
        const uint32_t off = srcOffset.Ld(i, okOff);
        if (!okOff) emu::Fault(emu::Cat("Gather: srcOffset[", i, "] is unwritten (poisoned) UB"));
        const uint64_t byte = uint64_t(srcBaseAddr) + off;
        if (byte % sizeof(T))
            emu::Fault(emu::Cat("Gather: byte offset ", byte, " of lane ", i, " is not a multiple of ", sizeof(T)));
        const uint64_t idx = byte / sizeof(T);
        if (idx >= src.GetSize())
            emu::Fault(emu::Cat("Gather: byte offset ", byte, " of lane ", i, " is past the end of the ",
                                src.GetSize(), "-element source tensor"));
        const uint64_t at = src.Offset() + byte;
        if (dst.Arena() == src.Arena() && at + sizeof(T) > dstLo && at < dstHi)
            emu::Fault(emu::Cat("Gather: lane ", i, " reads UB byte ", at, " inside the destination [", dstLo, ", ",
                                dstHi, ") (in-place gather)"));
        bool ok = true;
        emu::TouchT(in, src, at, sizeof(T), false);
        vals[i] = src.Ld(idx, ok);
        good[i] = ok;
    }
    emu_detail::VWrite(in, dst, count);
    for (uint32_t i = 0; i < count; ++i) dst.St(i, vals[i], good[i] != 0);
}

// ---- Brcb: repeat r takes src[r*8 .. r*8+8); element j fills the 32-B block at
// (r*dstRepStride + j*dstBlkStride) blocks of dst.
struct BrcbRepeatParams {
    uint16_t dstBlkStride = 1, dstRepStride = 8;
    BrcbRepeatParams() = default;
    BrcbRepeatParams(uint16_t b, uint16_t r) : dstBlkStride(b), dstRepStride(r) {}
};
template <typename T>
void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint8_t repeatTime, const BrcbRepeatParams& p,
          emu::Site site = emu::Site::Here())
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "Brcb: 16/32-bit types only");
    dst.CheckAligned("Brcb");
    src.CheckAligned("Brcb");
    if (dst.Arena() == src.Arena() && dst.Offset() == src.Offset()) emu::Fault("Brcb: src must not alias dst");
    const uint64_t per = 32 / sizeof(T);
    src.Addr(0, uint64_t(repeatTime) * 8, "Brcb");
    emu::CountVector(uint64_t(repeatTime) * 8 * per, sizeof(T));   // a repeat writes 8 blocks: 256 B
    const emu::Instr in = emu::Issue(emu::kPipeV, "Brcb", site);
    emu_detail::VRead(in, src, uint64_t(repeatTime) * 8);
    for (uint32_t r = 0; r < repeatTime; ++r)
        for (uint32_t j = 0; j < 8; ++j) {
            bool ok = true;
            T v = src.Ld(r * 8 + j, ok);
            uint64_t base = (uint64_t(r) * p.dstRepStride + uint64_t(j) * p.dstBlkStride) * per;
            dst.Addr(base, per, "Brcb");
            emu::TouchT(in, dst, dst.Offset() + base * sizeof(T), emu::kBlock, true);
            for (uint64_t k = 0; k < per; ++k) dst.St(base + k, v, ok);
        }
}

// ---- Mask / repeat forms (docs/reference/ascendc.md §1.9; the real headers' `(dst, src0, src1, uint64_t mask,
// uint8_t repeatTime, const BinaryRepeatParams&)` and WholeReduceSum / WholeReduceMax, normal mask mode with a
// continuous mask): repeat r, block b (0..7) and lane j of a block address element (r * repStride + b * blkStride) *
// perBlock + j of each operand, strides in 32-byte blocks; the lanes b * perBlock + j < mask are active, the others
// keep dst's contents. mask 1..256 / sizeof(T) (else a fault), repeatTime 0..255; tensor operands 32-byte aligned
// (a WholeReduce destination: element-aligned, §1.9 table); dstBlkStride not 0; the address-overlap rules
// (OverlapGuard).
// Every touched element is bounds-checked and race-tracked.
struct BinaryRepeatParams {
    uint32_t blockNumber = 8;
    uint8_t dstBlkStride = 1, src0BlkStride = 1, src1BlkStride = 1;
    uint8_t dstRepStride = 8, src0RepStride = 8, src1RepStride = 8;
    bool repeatStrideMode = false, strideSizeMode = false;
    BinaryRepeatParams() = default;
    BinaryRepeatParams(uint8_t dstBlk, uint8_t src0Blk, uint8_t src1Blk, uint8_t dstRep, uint8_t src0Rep, uint8_t src1Rep)
        : dstBlkStride(dstBlk), src0BlkStride(src0Blk), src1BlkStride(src1Blk), dstRepStride(dstRep),
          src0RepStride(src0Rep), src1RepStride(src1Rep) {}
};
enum class ReduceOrder : uint8_t { ORDER_VALUE_INDEX = 0, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };

namespace emu_detail {
template <typename T>
void CheckMask(uint64_t mask, const char* what)
{
    const uint64_t lanes = 256 / sizeof(T);
    if (mask < 1 || mask > lanes)
        emu::Fault(emu::Cat(what, ": mask ", mask, " outside 1..", lanes, " (a continuous mask of one repeat)"));
}
// The device's address-overlap rules for one repeat-form instruction (asc-devkit docs, SIMD-API/通用说明和约束.md,
// 通用地址重叠约束): within a repeat a source and dst overlap 100 % (lane l at the same address for every l) or not
// at all; no repeat reads a byte an earlier repeat of the same instruction wrote, except the binary Add / Sub / Mul /
// Max / Min on half / float / int32 reading src1 with dst's or src1's repeat stride 0 (accumulation). What the
// device leaves undefined faults here. Addresses are (arena, byte offset) of the lane's element.
namespace overlap_detail {
// Byte-offset tables reused by every OverlapGuard of a thread: an entry is current when its stamp is the guard's (or
// the Reads call's) generation, so no instruction allocates or clears a table (a new generation retires the old
// entries; at the 2^32nd one the table is cleared).
struct Stamp {
    uint32_t gen = 0;
    uint32_t repeat = 0;
};
inline std::vector<Stamp>& WrittenTable() { thread_local std::vector<Stamp> t; return t; }
inline std::vector<uint32_t>& LaneTable() { thread_local std::vector<uint32_t> t; return t; }
inline uint32_t& WrittenGen() { thread_local uint32_t g = 0; return g; }
inline uint32_t& LaneGen() { thread_local uint32_t g = 0; return g; }
inline uint32_t NextWritten()
{
    uint32_t& g = WrittenGen();
    if (++g == 0) {
        std::fill(WrittenTable().begin(), WrittenTable().end(), Stamp{});
        g = 1;
    }
    return g;
}
inline uint32_t NextLanes()
{
    uint32_t& g = LaneGen();
    if (++g == 0) {
        std::fill(LaneTable().begin(), LaneTable().end(), 0u);
        g = 1;
    }
    return g;
}
template <typename V>
void Fit(V& t, uint64_t i)
{
    if (i >= t.size()) t.resize(std::max<uint64_t>(i + 1, 2 * t.size() + 4096));
}
}  // namespace overlap_detail
struct OverlapGuard {
    const void* arena = nullptr;
    const char* what = "";
    const uint32_t gen = overlap_detail::NextWritten();   // this instruction's writes (byte offset -> first repeat)
    // Source `name`'s lanes `src` (byte offsets in `srcArena`) of repeat r against dst's lanes `dst` of the same
    // repeat and against what earlier repeats wrote; `accumulate`: the documented src1 exception applies.
    void Reads(const void* srcArena, const std::vector<uint64_t>& src, const std::vector<uint64_t>& dst, uint64_t r,
               const char* name, bool accumulate, bool sameLanesOk) const
    {
        if (srcArena != arena) return;
        const std::vector<overlap_detail::Stamp>& written = overlap_detail::WrittenTable();
        if (!accumulate)
            for (uint64_t a : src) {
                if (a < written.size() && written[a].gen == gen)
                    emu::Fault(emu::Cat(what, ": repeat ", r, " of ", name, " (byte ", a, ") reads what repeat ",
                                        written[a].repeat, " of the same instruction wrote (undefined on the device: "
                                        "docs/reference/ascendc.md §1.9 operand rules)"));
            }
        if (sameLanesOk && src == dst) return;   // 100 % overlap within the repeat
        const uint32_t lanes = overlap_detail::NextLanes();
        std::vector<uint32_t>& table = overlap_detail::LaneTable();
        for (uint64_t a : src) {
            overlap_detail::Fit(table, a);
            table[a] = lanes;
        }
        for (uint64_t d : dst)
            if (d < table.size() && table[d] == lanes)
                emu::Fault(emu::Cat(what, ": in repeat ", r, " dst ",
                                    sameLanesOk ? "partly overlaps " : "overlaps the lanes of ", name, " at byte ", d,
                                    " (only a 100 % overlap of a repeat's lanes is allowed)"));
    }
    void Wrote(const std::vector<uint64_t>& dst, uint64_t r)
    {
        std::vector<overlap_detail::Stamp>& written = overlap_detail::WrittenTable();
        for (uint64_t d : dst) {
            overlap_detail::Fit(written, d);
            if (written[d].gen != gen) written[d] = overlap_detail::Stamp{gen, static_cast<uint32_t>(r)};
        }
    }
};
// Element index of lane `lane` of repeat r for a block stride and repeat stride (in 32-byte blocks).
template <typename T>
inline uint64_t LaneAt(uint64_t r, uint64_t lane, uint64_t blk, uint64_t rep)
{
    const uint64_t per = 32 / sizeof(T);
    return (r * rep + (lane / per) * blk) * per + lane % per;
}
template <typename T, typename F>
void BinaryRepeat(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, uint64_t mask,
                  uint8_t repeatTime, const BinaryRepeatParams& p, const char* what, F f, const emu::Site& site,
                  bool accumulates)
{
    // the device also takes int16 / int32 (not Div), which this float-computing loop would get wrong: refused
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value,
                  "binary mask / repeat forms: the emulation implements half / float only");
    CheckMask<T>(mask, what);
    dst.CheckAligned(what); a.CheckAligned(what); b.CheckAligned(what);
    if (p.dstBlkStride == 0)
        emu::Fault(emu::Cat(what, ": dstBlkStride 0 (a destination block stride must not be 0; §1.9)"));
    if (repeatTime == 0) return;
    emu::CountVector(uint64_t(repeatTime) * (256 / sizeof(T)), sizeof(T), what[0] == 'D' && what[1] == 'i');
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    std::vector<T> out(mask);
    std::vector<char> good(mask);
    OverlapGuard guard;
    guard.arena = dst.Arena(); guard.what = what;
    const bool acc1 = accumulates && (std::is_same<T, float>::value || std::is_same<T, half>::value ||
                                      std::is_same<T, int32_t>::value) && (p.dstRepStride == 0 || p.src1RepStride == 0);
    std::vector<uint64_t> la(mask), lb(mask), ld(mask);
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t l = 0; l < mask; ++l) {
            la[l] = a.Offset() + LaneAt<T>(r, l, p.src0BlkStride, p.src0RepStride) * sizeof(T);
            lb[l] = b.Offset() + LaneAt<T>(r, l, p.src1BlkStride, p.src1RepStride) * sizeof(T);
            ld[l] = dst.Offset() + LaneAt<T>(r, l, p.dstBlkStride, p.dstRepStride) * sizeof(T);
        }
        guard.Reads(a.Arena(), la, ld, r, "src0", false, true);
        guard.Reads(b.Arena(), lb, ld, r, "src1", acc1, true);
        // a repeat reads its sources, then writes; the active lanes of one 32-byte block are contiguous, so each
        // block's lanes are bounds-checked and race-tracked as one range
        const uint64_t per = 32 / sizeof(T);
        for (uint64_t l0 = 0; l0 < mask; l0 += per) {
            const uint64_t n = std::min<uint64_t>(per, mask - l0);
            const uint64_t ia = LaneAt<T>(r, l0, p.src0BlkStride, p.src0RepStride);
            const uint64_t ib = LaneAt<T>(r, l0, p.src1BlkStride, p.src1RepStride);
            a.Addr(ia, n, what); b.Addr(ib, n, what);
            emu::TouchT(in, a, a.Offset() + ia * sizeof(T), n * sizeof(T), false);
            emu::TouchT(in, b, b.Offset() + ib * sizeof(T), n * sizeof(T), false);
            for (uint64_t j = 0; j < n; ++j) {
                bool ok = true;
                const T x = a.Ld(ia + j, ok), y = b.Ld(ib + j, ok);
                out[l0 + j] = f(x, y);
                good[l0 + j] = ok;
            }
        }
        for (uint64_t l0 = 0; l0 < mask; l0 += per) {
            const uint64_t n = std::min<uint64_t>(per, mask - l0);
            const uint64_t id = LaneAt<T>(r, l0, p.dstBlkStride, p.dstRepStride);
            dst.Addr(id, n, what);
            emu::TouchT(in, dst, dst.Offset() + id * sizeof(T), n * sizeof(T), true);
            for (uint64_t j = 0; j < n; ++j) dst.St(id + j, out[l0 + j], good[l0 + j] != 0);
        }
        guard.Wrote(ld, r);
    }
}
template <typename T, typename F>
void WholeReduce(const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t mask, int32_t repeatTime,
                 int32_t dstRepStride, int32_t srcBlkStride, int32_t srcRepStride, const char* what, F combine,
                 const emu::Site& site)
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value, "WholeReduce: half/float only");
    CheckMask<T>(uint64_t(mask < 0 ? 0 : mask), what);
    if (repeatTime < 0 || repeatTime > 255)
        emu::Fault(emu::Cat(what, ": repeatTime ", repeatTime, " outside 0..255"));
    const int32_t strides[3] = {dstRepStride, srcBlkStride, srcRepStride};
    const char* const names[3] = {"dstRepStride", "srcBlkStride", "srcRepStride"};
    for (int s = 0; s < 3; ++s)   // the device's range (asc-devkit docs, ReduceRepeat: [0, 2^16 - 1])
        if (strides[s] < 0 || strides[s] > 65535)
            emu::Fault(emu::Cat(what, ": ", names[s], " ", strides[s], " outside 0..65535"));
    src.CheckAligned(what);
    if (dst.Offset() % sizeof(T)) emu::Fault(emu::Cat(what, ": dst not element-aligned"));
    if (repeatTime == 0) return;
    emu::CountVector(uint64_t(repeatTime) * (256 / sizeof(T)), sizeof(T));
    const emu::Instr in = emu::Issue(emu::kPipeV, what, site);
    OverlapGuard guard;
    guard.arena = dst.Arena(); guard.what = what;
    std::vector<uint64_t> ls(static_cast<uint64_t>(mask));
    std::vector<T> v;
    v.reserve(static_cast<uint64_t>(mask));
    for (uint64_t r = 0; r < uint64_t(repeatTime); ++r) {
        v.clear();
        bool ok = true;
        for (uint64_t l = 0; l < uint64_t(mask); ++l)
            ls[l] = src.Offset() + LaneAt<T>(r, l, uint64_t(srcBlkStride), uint64_t(srcRepStride)) * sizeof(T);
        const std::vector<uint64_t> ld{dst.Offset() + r * uint64_t(dstRepStride) * sizeof(T)};
        guard.Reads(src.Arena(), ls, ld, r, "src", false, false);
        for (uint64_t l = 0; l < uint64_t(mask); ++l) {
            const uint64_t i = LaneAt<T>(r, l, uint64_t(srcBlkStride), uint64_t(srcRepStride));
            src.Addr(i, 1, what);
            emu::TouchT(in, src, src.Offset() + i * sizeof(T), sizeof(T), false);
            v.push_back(src.Ld(i, ok));
        }
        const T res = combine(v);
        const uint64_t id = r * uint64_t(dstRepStride);
        dst.Addr(id, 1, what);
        emu::TouchT(in, dst, dst.Offset() + id * sizeof(T), sizeof(T), true);
        dst.St(id, res, ok);
        guard.Wrote(ld, r);
    }
}
}  // namespace emu_detail

#define EMU_BINARY_REPEAT(NAME, ACC, EXPR)                                                                      \
    template <typename T, bool isSetMask = true>                                                                \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,   \
              const uint8_t repeatTime, const BinaryRepeatParams& repeatParams, emu::Site site = emu::Site::Here()) \
    {                                                                                                           \
        static_assert(isSetMask, #NAME ": the emulation implements isSetMask = true only");                    \
        emu_detail::BinaryRepeat(dst, src0, src1, mask, repeatTime, repeatParams, #NAME,                      \
                                 [](T a, T b) { return EXPR; }, site, ACC);                                     \
    }
EMU_BINARY_REPEAT(Add, true, T(float(a) + float(b)))
EMU_BINARY_REPEAT(Sub, true, T(float(a) - float(b)))
EMU_BINARY_REPEAT(Mul, true, T(float(a) * float(b)))
EMU_BINARY_REPEAT(Div, false, T(float(a) / float(b)))
EMU_BINARY_REPEAT(Max, true, emu_detail::MaxOf(a, b))
EMU_BINARY_REPEAT(Min, true, emu_detail::MinOf(a, b))
#undef EMU_BINARY_REPEAT

// ---- Compare / Select mask / repeat forms (BinaryRepeatParams; docs/reference/ascendc.md §1.9, asc-devkit's Compare and
// Select pages). Compare: the mask argument is reserved on A2/A3 (every lane of a repeat is compared), so mask must be
// 256 / sizeof(T); repeat r's 256 / sizeof(T) bits go to dst bytes [r * L / 8, (r + 1) * L / 8) in lane order (the
// layout of the count form, which issues this form with the default strides); what other destination strides do to
// the bit mask is not documented, so dstBlkStride must be 1 and dstRepStride 8. Source lanes at LaneAt with their
// strides (a block stride 0 reads one block for every block of a repeat). Select, VSEL_TENSOR_SCALAR_MODE: lanes <
// mask of each repeat, bit r * L + l of selMask (mode 1 consumes L bits a repeat) picks src0's lane or the scalar;
// other destination elements keep their values; the Select scratch rule of the count form. The bit mask must not
// overlap another operand. A mask byte with an unwritten source lane is poison; a selected element is poison when its
// source lane or its mask byte is.
namespace emu_detail {
inline void MaskApart(const void* arena, uint64_t maskOff, uint64_t maskBytes, const void* other,
                      const std::vector<uint64_t>& lanes, const char* what)
{
    if (arena != other) return;
    for (uint64_t a : lanes)
        if (a >= maskOff && a < maskOff + maskBytes)
            emu::Fault(emu::Cat(what, ": the bit mask overlaps another operand at byte ", a));
}
}  // namespace emu_detail

template <typename T, typename U, bool isSetMask = true>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
             const uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& p,
             emu::Site site = emu::Site::Here())
{
    static_assert(isSetMask, "Compare: the emulation implements isSetMask = true only");
    static_assert(std::is_same<U, uint8_t>::value, "Compare: the destination is a uint8_t bit mask");
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value || std::is_same<T, int32_t>::value,
                  "Compare: half, float or int32_t operands");
    const uint64_t L = 256 / sizeof(T);
    if (mask != L)
        emu::Fault(emu::Cat("Compare: mask ", mask, "; the mask is reserved on A2/A3 and every lane of a repeat is "
                            "compared (pass ", L, ")"));
    if (p.dstBlkStride != 1 || p.dstRepStride != 8)
        emu::Fault("Compare repeat form: dst strides other than the defaults (1, 8) are not documented for the bit mask");
    dst.CheckAligned("Compare"); src0.CheckAligned("Compare"); src1.CheckAligned("Compare");
    if (repeatTime == 0) return;
    emu::CountVector(uint64_t(repeatTime) * L, sizeof(T));
    const uint64_t nbytes = uint64_t(repeatTime) * L / 8;
    dst.Addr(0, nbytes, "Compare");
    const emu::Instr in = emu::Issue(emu::kPipeV, "Compare", site);
    std::vector<uint64_t> la(L), lb(L);
    std::vector<uint8_t> out(nbytes);
    std::vector<char> good(nbytes, 1);
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t l = 0; l < L; ++l) {
            const uint64_t ia = emu_detail::LaneAt<T>(r, l, p.src0BlkStride, p.src0RepStride);
            const uint64_t ib = emu_detail::LaneAt<T>(r, l, p.src1BlkStride, p.src1RepStride);
            src0.Addr(ia, 1, "Compare"); src1.Addr(ib, 1, "Compare");
            la[l] = src0.Offset() + ia * sizeof(T);
            lb[l] = src1.Offset() + ib * sizeof(T);
            emu::TouchT(in, src0, la[l], sizeof(T), false);
            emu::TouchT(in, src1, lb[l], sizeof(T), false);
            bool ok = true;
            const T x = src0.Ld(ia, ok), y = src1.Ld(ib, ok);
            const uint64_t byte = r * L / 8 + l / 8;
            if (emu_detail::CmpOne<T>(x, y, cmpMode)) out[byte] = uint8_t(out[byte] | (1u << (l % 8)));
            if (!ok) good[byte] = 0;
        }
        emu_detail::MaskApart(dst.Arena(), dst.Offset(), nbytes, src0.Arena(), la, "Compare");
        emu_detail::MaskApart(dst.Arena(), dst.Offset(), nbytes, src1.Arena(), lb, "Compare");
    }
    emu::TouchT(in, dst, dst.Offset(), nbytes, true);
    for (uint64_t b = 0; b < nbytes; ++b) dst.St(b, out[b], good[b] != 0);
}

template <typename T, typename U, bool isSetMask = true>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, T src1,
            SELMODE selMode, uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& p,
            emu::Site site = emu::Site::Here())
{
    static_assert(isSetMask, "Select: the emulation implements isSetMask = true only");
    static_assert(std::is_same<U, uint8_t>::value, "Select: the mask is a uint8_t bit mask");
    static_assert(std::is_same<T, half>::value || std::is_same<T, float>::value, "Select: half or float operands");
    if (selMode != SELMODE::VSEL_TENSOR_SCALAR_MODE)
        emu::Fault("Select with a scalar: the mode must be SELMODE::VSEL_TENSOR_SCALAR_MODE");
    emu_detail::CheckMask<T>(mask, "Select");
    dst.CheckAligned("Select"); selMask.CheckAligned("Select"); src0.CheckAligned("Select");
    if (p.dstBlkStride == 0) emu::Fault("Select: dstBlkStride 0 (a destination block stride must not be 0; §1.9)");
    if (dst.Arena()->kind == emu::MemKind::UB && dst.Arena()->used > kSelectScratchOffset)
        emu::Fault(emu::Cat("Select: the kernel's UB buffers take ", dst.Arena()->used, " bytes, past byte ",
                            kSelectScratchOffset, " where Select keeps its scratch on A2/A3 (reserve 8 KB of UB)"));
    if (repeatTime == 0) return;
    emu::CountVector(uint64_t(repeatTime) * (256 / sizeof(T)), sizeof(T));
    const uint64_t L = 256 / sizeof(T);
    const uint64_t nbytes = uint64_t(repeatTime) * L / 8;
    selMask.Addr(0, nbytes, "Select");
    const emu::Instr in = emu::Issue(emu::kPipeV, "Select", site);
    emu::TouchT(in, selMask, selMask.Offset(), nbytes, false);
    emu_detail::OverlapGuard guard;
    guard.arena = dst.Arena(); guard.what = "Select";
    std::vector<uint64_t> la(mask), ld(mask);
    std::vector<T> out(mask);
    std::vector<char> good(mask);
    for (uint64_t r = 0; r < repeatTime; ++r) {
        for (uint64_t l = 0; l < mask; ++l) {
            la[l] = src0.Offset() + emu_detail::LaneAt<T>(r, l, p.src0BlkStride, p.src0RepStride) * sizeof(T);
            ld[l] = dst.Offset() + emu_detail::LaneAt<T>(r, l, p.dstBlkStride, p.dstRepStride) * sizeof(T);
        }
        guard.Reads(src0.Arena(), la, ld, r, "src0", false, true);
        emu_detail::MaskApart(selMask.Arena(), selMask.Offset(), nbytes, dst.Arena(), ld, "Select");
        emu_detail::MaskApart(selMask.Arena(), selMask.Offset(), nbytes, src0.Arena(), la, "Select");
        for (uint64_t l = 0; l < mask; ++l) {
            const uint64_t ia = emu_detail::LaneAt<T>(r, l, p.src0BlkStride, p.src0RepStride);
            src0.Addr(ia, 1, "Select");
            emu::TouchT(in, src0, la[l], sizeof(T), false);
            bool ok = true;
            const uint64_t bit = r * L + l;
            const uint8_t m = selMask.Ld(bit / 8, ok);
            const T x = src0.Ld(ia, ok);
            out[l] = ((m >> (bit % 8)) & 1u) ? x : src1;
            good[l] = ok;
        }
        for (uint64_t l = 0; l < mask; ++l) {
            const uint64_t id = emu_detail::LaneAt<T>(r, l, p.dstBlkStride, p.dstRepStride);
            dst.Addr(id, 1, "Select");
            emu::TouchT(in, dst, ld[l], sizeof(T), true);
            dst.St(id, out[l], good[l] != 0);
        }
        guard.Wrote(ld, r);
    }
}

// WholeReduceSum: repeat r's active lanes summed (a halving tree over the lanes in order, as ReduceSum's per-repeat
// step: an assumption about hardware order, §1.9) into dst[r * dstRepStride] (dstRepStride in elements).
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                    emu::Site site = emu::Site::Here())
{
    static_assert(isSetMask, "WholeReduceSum: the emulation implements isSetMask = true only");
    emu_detail::WholeReduce(dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, "WholeReduceSum",
                            [](std::vector<T> v) {
                                while (v.size() > 1) {
                                    const size_t h = (v.size() + 1) / 2;
                                    for (size_t k = 0; k + h < v.size(); ++k) v[k] = T(float(v[k]) + float(v[k + h]));
                                    v.resize(h);
                                }
                                return v[0];
                            }, site);
}

// WholeReduceMax: repeat r's largest active lane (emu_detail::MaxOf: NaN if any) into dst[r * dstRepStride]; the emulation
// implements ReduceOrder::ORDER_ONLY_VALUE only (the value without its index; the other orders fault).
template <typename T, bool isSetMask = true>
void WholeReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime,
                    const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,
                    ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX, emu::Site site = emu::Site::Here())
{
    static_assert(isSetMask, "WholeReduceMax: the emulation implements isSetMask = true only");
    if (order != ReduceOrder::ORDER_ONLY_VALUE)
        emu::Fault("WholeReduceMax: the emulation implements ReduceOrder::ORDER_ONLY_VALUE only");
    emu_detail::WholeReduce(dst, src, mask, repeatTime, dstRepStride, srcBlkStride, srcRepStride, "WholeReduceMax",
                            [](const std::vector<T>& v) {
                                T best = v[0];
                                for (size_t k = 1; k < v.size(); ++k) best = emu_detail::MaxOf(best, v[k]);
                                return best;
                            }, site);
}

}  // namespace AscendC
