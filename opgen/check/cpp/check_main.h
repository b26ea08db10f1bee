// opgen check: the declaration every op's generated driver.cpp calls. opgen_check::SharedMain is
// opgen_check::Main of check_driver.h compiled once per build root (check_main.cpp, linked into every op's
// launch driver), so an op's driver.cpp compiles in a fraction of a second. Our own code.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#ifndef GM_ADDR
#define GM_ADDR uint8_t*
#endif

namespace opgen_check {

// launchKind: 0 = LaunchKind::AivOnly, 1 = LaunchKind::Mix12, 2 = LaunchKind::AicOnly (check_driver.h); the rest as Main.
int SharedMain(int argc, char** argv, const char* opType, const std::vector<std::string>& inputNames,
               const std::vector<std::string>& outputNames,
               const std::function<void(const std::vector<uint8_t*>& args)>& kernel, int launchKind);

}  // namespace opgen_check
