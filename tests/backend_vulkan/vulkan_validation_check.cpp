// Linked into every Vulkan test binary: with MINFER_VULKAN_VALIDATE=1 (scripts/tiers.sh, the `vulkan`
// tier), a message of the Khronos validation layer during a test fails it. The message itself is in the
// log above the failure (device.cpp logs it as an error with the rule, the call and the objects).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/vulkan/device.h"
#include "backend_vulkan/vulkan_harness.h"

namespace minfer::backend::test {
namespace {

uint64_t expected_total = 0;  // messages tests provoked on purpose (expect_validation_messages)
uint64_t expected_in_test = 0;

class ValidationCheck : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override {
    before_ = vk::validation_messages();
    expected_in_test = 0;
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const uint64_t during = vk::validation_messages() - before_ - expected_in_test;
    if (during != 0) failed_.push_back(fmt::format("{}.{}: {}", info.test_suite_name(), info.name(), during));
  }
  uint64_t before_ = 0;

 public:
  std::vector<std::string> failed_;
};

// A listener sees each test's messages; the environment's TearDown turns any into a failure of the run,
// which ctest (one process per test) reports as that test's.
class ValidationEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    listener_ = new ValidationCheck();
    ::testing::UnitTest::GetInstance()->listeners().Append(listener_);  // gtest owns it
  }
  void TearDown() override {
    for (const std::string& f : listener_->failed_) ADD_FAILURE() << "Vulkan validation messages in " << f;
    EXPECT_EQ(vk::validation_messages(), expected_total) << "Vulkan validation messages (see the log)";
  }

 private:
  ValidationCheck* listener_ = nullptr;
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ValidationEnvironment());

}  // namespace

void expect_validation_messages(uint64_t n) {
  expected_total += n;
  expected_in_test += n;
}

}  // namespace minfer::backend::test
