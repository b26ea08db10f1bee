// opgen check: opgen_check::Main compiled once for every op's launch driver (check_main.h). Our own code.
#include "check_driver.h"
#include "check_main.h"

int opgen_check::SharedMain(int argc, char** argv, const char* opType, const std::vector<std::string>& inputNames,
                            const std::vector<std::string>& outputNames, const Kernel& kernel, int launchKind)
{
    return Main(argc, argv, opType, inputNames, outputNames, kernel,
                launchKind == 1 ? LaunchKind::Mix12 : launchKind == 2 ? LaunchKind::AicOnly : LaunchKind::AivOnly);
}
