// opgen host-side emulation: ge::AscendString, the string type CANN's op::ToString functions return. Our own
// minimal declaration, not CANN's header.
#pragma once
#include <string>

namespace ge {
class AscendString {
public:
    AscendString() = default;
    explicit AscendString(const char* text) : text_(text == nullptr ? "" : text) {}
    const char* GetString() const { return text_.c_str(); }

private:
    std::string text_;
};
}  // namespace ge
