// opgen's own minimal stand-in for <gtest/gtest.h>: the fixture base class and the macros the emitted UT sources
// use. tests/test_ut_sources.py only syntax-checks sources with it; tests/test_op_api_ut.py runs the emitted op_api
// UTs with it: TEST_F registers the case, EXPECT_* / ASSERT_* report a failed comparison with its file and line,
// and opgen_gtest_stub::RunAll() runs every registered case and returns the number that failed. Not googletest.
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

namespace testing {
class Test {
public:
    virtual ~Test() = default;

protected:
    static void SetUpTestCase() {}
    static void TearDownTestCase() {}
};
// What the repositories' op_api UT framework asks of the running case (its OP_API_UT macro); names only here.
class TestInfo {
public:
    const char* test_case_name() const { return ""; }
    const char* name() const { return ""; }
};
class UnitTest {
public:
    static UnitTest* GetInstance()
    {
        static UnitTest instance;
        return &instance;
    }
    const TestInfo* current_test_info() const
    {
        static TestInfo info;
        return &info;
    }
};
}  // namespace testing

namespace opgen_gtest_stub {
struct Case {
    const char* name;
    void (*run)();
};
inline std::vector<Case>& Registry()
{
    static std::vector<Case> cases;
    return cases;
}
inline int& FailedChecks()
{
    static int failed = 0;
    return failed;
}
struct Register {
    Register(const char* name, void (*run)()) { Registry().push_back({name, run}); }
};
struct Sink {
    template <typename T>
    Sink& operator<<(const T&)
    {
        return *this;
    }
};
inline Sink Fail(const char* file, int line, const char* what)
{
    std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
    ++FailedChecks();
    return Sink();
}
// Runs every registered case; prints one line per case; returns the number of failed cases.
inline int RunAll()
{
    int failedCases = 0;
    for (const Case& c : Registry()) {
        int before = FailedChecks();
        c.run();
        bool ok = FailedChecks() == before;
        std::printf("[ %s ] %s\n", ok ? "    OK" : "FAILED", c.name);
        failedCases += ok ? 0 : 1;
    }
    return failedCases;
}
}  // namespace opgen_gtest_stub

#define TEST_F(fixture, name)                                                                \
    class fixture##_##name##_Test : public fixture {                                         \
    public:                                                                                  \
        void TestBody();                                                                     \
        static void Run()                                                                    \
        {                                                                                    \
            fixture##_##name##_Test t;                                                       \
            t.TestBody();                                                                    \
        }                                                                                    \
    };                                                                                       \
    static const opgen_gtest_stub::Register fixture##_##name##_registered(#fixture "." #name, \
                                                                          &fixture##_##name##_Test::Run); \
    void fixture##_##name##_Test::TestBody()
#define OPGEN_STUB_CHECK_(cond) \
    if (static_cast<bool>(cond)) {} else opgen_gtest_stub::Fail(__FILE__, __LINE__, #cond)
#define EXPECT_EQ(a, b) OPGEN_STUB_CHECK_((a) == (b))
// ASSERT_* report like EXPECT_* and do not stop the case.
#define ASSERT_EQ(a, b) OPGEN_STUB_CHECK_((a) == (b))
#define EXPECT_NE(a, b) OPGEN_STUB_CHECK_((a) != (b))
#define ASSERT_NE(a, b) OPGEN_STUB_CHECK_((a) != (b))
#define EXPECT_GT(a, b) OPGEN_STUB_CHECK_((a) > (b))
#define EXPECT_TRUE(c) OPGEN_STUB_CHECK_(c)
#define ASSERT_TRUE(c) OPGEN_STUB_CHECK_(c)
