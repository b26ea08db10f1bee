// opgen host-side emulation of platform_ascendc::PlatformAscendC (docs/reference/ascendc.md §2.5): core counts
// and on-chip memory sizes come from the PlatFormInfos the caller filled from opgen/platforms.
#pragma once
#include <cstdint>
#include "register/op_impl_registry.h"

namespace platform_ascendc {
enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6 };
class PlatformAscendC {
public:
    explicit PlatformAscendC(fe::PlatFormInfos* p) : p_(p) {}
    uint32_t GetCoreNumAiv() const { return static_cast<uint32_t>(p_->aivNum); }
    uint32_t GetCoreNumAic() const { return static_cast<uint32_t>(p_->aicNum); }
    void GetCoreMemSize(CoreMemType t, uint64_t& size) const { size = t == CoreMemType::UB ? p_->ubBytes : 0; }
    // Bytes of GM workspace AscendC's library APIs reserve (the platform's system workspace).
    uint32_t GetLibApiWorkSpaceSize() const { return p_->libApiWorkspaceBytes; }
private:
    fe::PlatFormInfos* p_;
};
}  // namespace platform_ascendc
