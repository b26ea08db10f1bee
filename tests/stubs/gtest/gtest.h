// opgen's own minimal stand-in for <gtest/gtest.h>, only for syntax-checking the emitted UT sources
// (tests/test_ut_sources.py): the fixture base class and the macros those sources use, each expanding to code that
// type-checks its operands. Not googletest; nothing here runs a test.
#pragma once
#include <cstdint>

namespace testing {
class Test {
public:
    virtual ~Test() = default;

protected:
    static void SetUpTestCase() {}
    static void TearDownTestCase() {}
};
}  // namespace testing

namespace opgen_gtest_stub {
struct Sink {
    template <typename T>
    Sink& operator<<(const T&)
    {
        return *this;
    }
};
}  // namespace opgen_gtest_stub

#define TEST_F(fixture, name)                              \
    class fixture##_##name##_Test : public fixture {       \
    public:                                                \
        void TestBody();                                   \
    };                                                     \
    void fixture##_##name##_Test::TestBody()
#define OPGEN_STUB_CHECK_(cond) \
    if (static_cast<bool>(cond)) {} else opgen_gtest_stub::Sink()
#define EXPECT_EQ(a, b) OPGEN_STUB_CHECK_((a) == (b))
#define ASSERT_EQ(a, b) OPGEN_STUB_CHECK_((a) == (b))
#define EXPECT_NE(a, b) OPGEN_STUB_CHECK_((a) != (b))
#define ASSERT_NE(a, b) OPGEN_STUB_CHECK_((a) != (b))
#define EXPECT_GT(a, b) OPGEN_STUB_CHECK_((a) > (b))
#define EXPECT_TRUE(c) OPGEN_STUB_CHECK_(c)
#define ASSERT_TRUE(c) OPGEN_STUB_CHECK_(c)
