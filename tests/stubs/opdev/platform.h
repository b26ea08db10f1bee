// Stub: current SoC query.
#pragma once

namespace op {
enum class SocVersion { ASCEND910B, ASCEND910_93, ASCEND910_95, ASCEND310P, RESERVED_VERSION };
class PlatformInfo {
public:
    SocVersion GetSocVersion() const;
};
const PlatformInfo& GetCurrentPlatformInfo();
}  // namespace op
