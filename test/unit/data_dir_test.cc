// consensus/data_dir.h: a data directory's member claim, and the
// incarnations a member remembers of its peers.
#include "lockcached/consensus/data_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace lockcached::consensus {
namespace {

namespace fs = std::filesystem;

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::path(::testing::TempDir()) / ("data_dir_test." + std::string(test));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DataDirTest, AClaimIsReadBackAndNamesItsNode) {
  DataDirClaim claim;
  EXPECT_EQ(read_data_dir_claim(dir_, &claim), "");
  EXPECT_EQ(claim.node_id, 0u);  // nobody's yet
  EXPECT_EQ(data_dir_claim_problem(dir_, 2), "");
  std::string incarnation = new_incarnation();
  EXPECT_EQ(incarnation.size(), 32u);
  EXPECT_NE(new_incarnation(), incarnation);
  ASSERT_EQ(write_data_dir_claim(dir_, {3, incarnation}), "");
  EXPECT_EQ(read_data_dir_claim(dir_, &claim), "");
  EXPECT_EQ(claim.node_id, 3u);
  EXPECT_EQ(claim.incarnation, incarnation);
  EXPECT_EQ(data_dir_claim_problem(dir_, 3), "");
  EXPECT_NE(data_dir_claim_problem(dir_, 2).find("holds node 3's state, not node 2's"),
            std::string::npos);
  std::ofstream(dir_ / "member") << "something else\n";
  EXPECT_NE(read_data_dir_claim(dir_, &claim).find("is not a member's claim"), std::string::npos);
}

TEST_F(DataDirTest, APeerIsKnownByTheFirstIncarnationItSpokeWith) {
  std::string first = new_incarnation();
  std::string second = new_incarnation();
  {
    PeerBook book;
    ASSERT_EQ(book.load(dir_), "");
    EXPECT_TRUE(book.admit(2, first));
    EXPECT_TRUE(book.admit(2, first));
    EXPECT_FALSE(book.admit(2, second));  // an emptied or another directory
    EXPECT_TRUE(book.admit(3, second));   // another node: its own
    EXPECT_FALSE(book.admit(4, "not hex"));
  }
  PeerBook again;  // what a restart reads back
  ASSERT_EQ(again.load(dir_), "");
  EXPECT_TRUE(again.admit(2, first));
  EXPECT_FALSE(again.admit(2, second));
  EXPECT_FALSE(again.admit(3, first));
}

}  // namespace
}  // namespace lockcached::consensus
