"""The mutation harness of the tests that delete one sync of an emitted kernel at a time (tests/test_headsched.py,
tests/test_emu_pipes.py): GUARD is C++ prepended to a kernel header after its `#include "kernel_operator.h"`;
a sync site rewritten as `if (OpgenKeep(i)) { ... }` runs unless the environment variable OPGEN_MUTANT is i, and
with OPGEN_MUTANT_LOG set each site reached is appended to that file once. One build serves every mutant: the
kernel is compiled once, each run picks the site it skips."""

GUARD = """#include <cstdio>
#include <cstdlib>
#include <mutex>
// Test harness only (tests/mutants.py): sync site i runs unless OPGEN_MUTANT = i; the sites reached are
// appended to the file OPGEN_MUTANT_LOG names.
static inline bool OpgenKeep(int i)
{
    static const int cut = [] { const char* e = std::getenv("OPGEN_MUTANT"); return e ? std::atoi(e) : -1; }();
    static const char* log = std::getenv("OPGEN_MUTANT_LOG");
    static bool seen[4096] = {};
    static std::mutex mu;
    if (log != nullptr) {
        std::lock_guard<std::mutex> g(mu);
        if (!seen[i]) {
            seen[i] = true;
            if (FILE* f = std::fopen(log, "a")) {
                std::fprintf(f, "%d\\n", i);
                std::fclose(f);
            }
        }
    }
    return i != cut;
}
"""
