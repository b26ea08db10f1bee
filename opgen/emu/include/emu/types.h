// opgen AscendC emulation: bit-exact 16-bit float types and the rounding kernel shared by Cast.
// Our own code (docs/reference/ascendc.md §1.4, §1.9 Cast).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace emu {

// Round modes, numbered like AscendC::RoundMode (re-exported there).
enum class Round : int { NONE = 0, RINT = 1, FLOOR = 2, CEIL = 3, ROUND = 4, TRUNC = 5, ODD = 6 };

// Round the exact value (-1)^sign * mant * 2^e to a binary float format with M stored mantissa bits and
// E exponent bits (IEEE layout, subnormals, inf/nan), returning the encoded bits. NONE means RINT here.
inline uint32_t RoundBinary(bool sign, uint64_t mant, int e, int M, int E, Round mode)
{
    const uint32_t signBit = sign ? (1u << (M + E)) : 0u;
    const int bias = (1 << (E - 1)) - 1;
    const int emin = 1 - bias;
    const uint32_t expAll = (1u << E) - 1u;
    if (mant == 0) return signBit;
    int bitlen = 64 - __builtin_clzll(mant);
    int ue = e + bitlen - 1;               // floor(log2 |x|)
    int te = ue < emin ? emin : ue;        // target exponent
    int qe = te - M;                       // exponent of one unit in the last place
    int shift = qe - e;
    uint64_t q;
    bool inexact = false, gtHalf = false, eqHalf = false;
    if (shift <= 0) {
        q = mant << (-shift);
    } else if (shift > 62) {
        q = 0; inexact = true;             // far below half an ulp
    } else {
        q = mant >> shift;
        uint64_t rem = mant & ((uint64_t(1) << shift) - 1);
        uint64_t halfUlp = uint64_t(1) << (shift - 1);
        inexact = rem != 0; gtHalf = rem > halfUlp; eqHalf = rem == halfUlp;
    }
    bool up = false;
    switch (mode) {
    case Round::NONE:
    case Round::RINT: up = gtHalf || (eqHalf && (q & 1)); break;
    case Round::ROUND: up = gtHalf || eqHalf; break;
    case Round::TRUNC: up = false; break;
    case Round::FLOOR: up = sign && inexact; break;
    case Round::CEIL: up = !sign && inexact; break;
    case Round::ODD: if (inexact) q |= 1; break;
    }
    q += up ? 1 : 0;
    if (q >> (M + 1)) { q >>= 1; ++te; }
    uint32_t expField;
    if (q < (uint64_t(1) << M)) {
        expField = 0;                      // subnormal (or zero after rounding down)
    } else {
        expField = static_cast<uint32_t>(te + bias);
        q -= uint64_t(1) << M;
    }
    if (expField >= expAll) {              // overflow
        bool toInf = mode == Round::NONE || mode == Round::RINT || mode == Round::ROUND ||
                     (mode == Round::FLOOR && sign) || (mode == Round::CEIL && !sign);
        if (toInf) return signBit | (expAll << M);
        return signBit | ((expAll - 1) << M) | ((1u << M) - 1);
    }
    return signBit | (expField << M) | static_cast<uint32_t>(q);
}

inline uint32_t FloatBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float BitsFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// float -> format with M mantissa / E exponent bits.
inline uint32_t RoundFloat(float f, int M, int E, Round mode)
{
    uint32_t u = FloatBits(f);
    bool sign = u >> 31;
    uint32_t ex = (u >> 23) & 0xFF, fr = u & 0x7FFFFF;
    const uint32_t signBit = sign ? (1u << (M + E)) : 0u;
    const uint32_t expAll = (1u << E) - 1u;
    if (ex == 0xFF) {
        if (fr) return signBit | (expAll << M) | (1u << (M - 1));   // quiet NaN
        return signBit | (expAll << M);                                 // inf
    }
    uint64_t mant = ex ? (fr | 0x800000u) : fr;
    int e = ex ? int(ex) - 127 - 23 : -126 - 23;
    return RoundBinary(sign, mant, e, M, E, mode);
}

// Decode 1+E+M bits to float (exact for half and bf16).
inline float DecodeSmall(uint32_t b, int M, int E)
{
    bool sign = (b >> (M + E)) & 1;
    uint32_t ex = (b >> M) & ((1u << E) - 1), fr = b & ((1u << M) - 1);
    const int bias = (1 << (E - 1)) - 1;
    float v;
    if (ex == (1u << E) - 1) v = fr ? NAN : INFINITY;
    else if (ex == 0) v = std::ldexp(float(fr), 1 - bias - M);
    else v = std::ldexp(float(fr | (1u << M)), int(ex) - bias - M);
    return sign ? -v : v;
}

}  // namespace emu

// 16-bit IEEE binary16; storage is exactly 16 bits, conversions from float are round-to-nearest-even.
struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(static_cast<uint16_t>(emu::RoundFloat(f, 10, 5, emu::Round::RINT))) {}
    half(double d) : half(static_cast<float>(d)) {}
    half(int i) : half(static_cast<float>(i)) {}
    operator float() const { return emu::DecodeSmall(bits, 10, 5); }
    static half FromBits(uint16_t b) { half h; h.bits = b; return h; }
};

// bfloat16 (8 exponent bits, 7 mantissa bits); conversions from float are round-to-nearest-even.
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(static_cast<uint16_t>(emu::RoundFloat(f, 7, 8, emu::Round::RINT))) {}
    bfloat16_t(double d) : bfloat16_t(static_cast<float>(d)) {}
    bfloat16_t(int i) : bfloat16_t(static_cast<float>(i)) {}
    operator float() const { return emu::BitsFloat(uint32_t(bits) << 16); }
    static bfloat16_t FromBits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit storage");
