// Scalar-unit helpers of the AscendC device API that opgen's kernels call instead of the C++ standard library
// (device code has no libstdc++: docs/reference/ascendc.md §1.4 "Scalar helpers"). Declared with the real
// headers' names and signatures (asc-devkit: AscendC::IsSameType, AscendC::GetScalarBitcodeValue<T, U>,
// AscendC::Std::sqrt / Std::abs); never more permissive: Std::sqrt / Std::abs accept only the types the real
// static_asserts accept.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "emu/types.h"

namespace AscendC {

// Compile-time type equality: IsSameType<T, U>::value.
template <typename T, typename U>
struct IsSameType {
    static constexpr bool value = false;
};
template <typename T>
struct IsSameType<T, T> {
    static constexpr bool value = true;
};

// The bits of `scalarValue` (type T) read as a U: the first sizeof(U) bytes of T's object representation
// (zero-extended when U is wider), converted to U.
template <typename T, typename U>
constexpr inline U GetScalarBitcodeValue(T scalarValue)
{
    U out{};
    std::memcpy(&out, &scalarValue, sizeof(T) < sizeof(U) ? sizeof(T) : sizeof(U));
    return out;
}

namespace Std {
namespace emu_detail {
template <typename T, typename... Us>
constexpr bool OneOf() { return (std::is_same<T, Us>::value || ...); }
}  // namespace emu_detail

// Square root on the scalar unit (float or int64_t).
template <typename T>
inline T sqrt(const T src)
{
    static_assert(emu_detail::OneOf<T, float, int64_t>(),
                  "Std::sqrt: type not supported on the device (float, int64_t)");
    if constexpr (std::is_same<T, float>::value) {
        return ::sqrtf(src);
    } else {
        return static_cast<T>(::sqrt(static_cast<double>(src)));
    }
}

// Absolute value on the scalar unit (int8_t, int16_t, int32_t, float or int64_t).
template <typename T>
inline T abs(const T src)
{
    static_assert(emu_detail::OneOf<T, int8_t, int16_t, int32_t, float, int64_t>(),
                  "Std::abs: type not supported on the device (int8_t, int16_t, int32_t, float, int64_t)");
    if constexpr (std::is_same<T, float>::value) {
        return ::fabsf(src);
    } else {
        return src < T(0) ? static_cast<T>(-src) : src;
    }
}
}  // namespace Std
// A bfloat16 scalar as float on the scalar unit (asc-devkit kernel_scalar_convert.h: ToFloat(const bfloat16_t&),
// the bits shifted into a float's upper half on Atlas A2/A3). Only bfloat16_t, as the real overload.
template <typename T>
inline float ToFloat(const T& value)
{
    static_assert(IsSameType<T, bfloat16_t>::value, "ToFloat only supports bfloat16_t on Atlas A2/A3");
    return static_cast<float>(value);
}

}  // namespace AscendC
