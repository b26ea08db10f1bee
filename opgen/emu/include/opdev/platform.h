// opgen host-side emulation: the current-SoC query of the aclnn layer. Our own minimal declarations, not
// CANN's headers. The SoC defaults to ASCEND910B; a caller emulating another product sets it with
// op::SetCurrentSocVersion.
#pragma once

namespace op {
enum class SocVersion { ASCEND910B, ASCEND910_93, ASCEND910_95, ASCEND310P, RESERVED_VERSION };
class PlatformInfo {
public:
    SocVersion GetSocVersion() const { return soc_; }
    void SetSocVersion(SocVersion soc) { soc_ = soc; }

private:
    SocVersion soc_ = SocVersion::ASCEND910B;
};
inline PlatformInfo& MutablePlatformInfo()
{
    static PlatformInfo info;
    return info;
}
inline const PlatformInfo& GetCurrentPlatformInfo() { return MutablePlatformInfo(); }
inline void SetCurrentSocVersion(SocVersion soc) { MutablePlatformInfo().SetSocVersion(soc); }
}  // namespace op
