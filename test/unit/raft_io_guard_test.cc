// consensus::RaftIoGuard over a fake libraft I/O: an AppendEntries result
// sent from the callback of a write that began in an earlier term is
// dropped (libraft 0.15 sent it), one of a write of the current term goes
// out, and nothing is sent to a null address; a leader's libraft hears no
// AppendEntries result until an entry of its term is on disk.
#include "lockcached/consensus/raft_io_guard.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using lockcached::consensus::RaftIoGuard;

// What the fake I/O was asked, and the writes it holds until a test ends
// them.
struct FakeIo {
  static inline std::vector<struct raft_io_append*> writes;
  static inline std::vector<raft_io_append_cb> callbacks;
  static inline std::vector<int> sent;  // message types
  static inline raft_io_recv_cb deliver = nullptr;  // what the network calls

  static int start(struct raft_io*, unsigned, raft_io_tick_cb, raft_io_recv_cb recv) {
    deliver = recv;
    return 0;
  }

  static int append(struct raft_io*, struct raft_io_append* request, const struct raft_entry*,
                    unsigned, raft_io_append_cb callback) {
    writes.push_back(request);
    callbacks.push_back(callback);
    return 0;
  }
  static int send(struct raft_io*, struct raft_io_send*, const struct raft_message* message,
                  raft_io_send_cb) {
    sent.push_back(message->type);
    return 0;
  }
};

// libraft's follower, as far as the guard sees it: its write's callback
// answers the leader, with its return code kept.
struct Follower {
  struct raft_io* io;
  const char* leader_address = "127.0.0.1:7000";
  int answer_rv = -1;
};

Follower* follower = nullptr;

// libraft's receiving end.
std::vector<int> heard;  // message types
void hear(struct raft_io*, struct raft_message* message) {
  heard.push_back(message->type);
}

void answer_leader(struct raft_io_append*, int) {
  struct raft_message message {};
  message.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  message.server_id = 1;
  message.server_address = follower->leader_address;
  struct raft_io_send request {};
  follower->answer_rv = follower->io->send(follower->io, &request, &message, nullptr);
}

class RaftIoGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeIo::writes.clear();
    FakeIo::callbacks.clear();
    FakeIo::sent.clear();
    heard.clear();
    io_.start = FakeIo::start;
    io_.append = FakeIo::append;
    io_.send = FakeIo::send;
    io_.data = &raft_;  // as raft_init does
    raft_.current_term = 5;
    guard_.install(&io_);
    ASSERT_EQ(io_.start(&io_, 100, nullptr, hear), 0);
    follower_.io = &io_;
    follower = &follower_;
  }

  // A write of one entry through the guarded I/O; true if it started.
  bool write(struct raft_io_append* request, raft_term term = 5) {
    struct raft_entry entry {};
    entry.term = term;
    return io_.append(&io_, request, &entry, 1, answer_leader) == 0;
  }
  // The fake disk finishes write `i`.
  void finish(size_t i) { FakeIo::callbacks.at(i)(FakeIo::writes.at(i), 0); }
  // A follower's answer reaches this node.
  void answer_arrives() {
    struct raft_message message {};
    message.type = RAFT_IO_APPEND_ENTRIES_RESULT;
    message.server_id = 2;
    message.server_address = "127.0.0.1:7002";
    FakeIo::deliver(&io_, &message);
  }

  struct raft raft_ {};
  struct raft_io io_ {};
  RaftIoGuard guard_;
  Follower follower_;
};

TEST_F(RaftIoGuardTest, AWriteOfTheCurrentTermIsAnswered) {
  struct raft_io_append request {};
  ASSERT_TRUE(write(&request));
  finish(0);
  EXPECT_EQ(follower_.answer_rv, 0);
  EXPECT_EQ(FakeIo::sent, std::vector<int>{RAFT_IO_APPEND_ENTRIES_RESULT});
  EXPECT_EQ(guard_.stale_answers_dropped(), 0u);
}

// A log write that failed stops the member (libraft 0.15 would keep a
// leader that cannot write, and reuse the failed entry's index and term);
// one cancelled because the log closes does not.
TEST_F(RaftIoGuardTest, AFailedLogWriteStopsTheMember) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // glog and the sanitizers keep threads
  struct raft_io_append cancelled {};
  ASSERT_TRUE(write(&cancelled));
  FakeIo::callbacks.at(0)(FakeIo::writes.at(0), RAFT_CANCELED);
  struct raft_io_append failed {};
  ASSERT_TRUE(write(&failed));
  // libraft's I/O leaves the cause where the guard reads it.
  std::snprintf(io_.errmsg, sizeof io_.errmsg, "%s", "no space left on device");
  EXPECT_DEATH(FakeIo::callbacks.at(1)(FakeIo::writes.at(1), RAFT_IOERR),
               "writing the Raft log failed \\(I/O error: no space left on device\\)");
}

TEST_F(RaftIoGuardTest, AWriteOfAnEndedTermIsNotAnswered) {
  struct raft_io_append request {};
  ASSERT_TRUE(write(&request));
  raft_.current_term = 6;  // a vote came while the entries were written
  finish(0);
  EXPECT_NE(follower_.answer_rv, 0);  // libraft then frees the request
  EXPECT_TRUE(FakeIo::sent.empty());
  EXPECT_EQ(guard_.stale_answers_dropped(), 1u);
}

TEST_F(RaftIoGuardTest, OnlyTheStaleWriteIsSilenced) {
  struct raft_io_append old_write {};
  ASSERT_TRUE(write(&old_write));
  raft_.current_term = 6;
  struct raft_io_append new_write {};
  ASSERT_TRUE(write(&new_write));
  finish(0);
  finish(1);
  EXPECT_EQ(FakeIo::sent, std::vector<int>{RAFT_IO_APPEND_ENTRIES_RESULT});
  EXPECT_EQ(guard_.stale_answers_dropped(), 1u);
  // Outside a write's callback, results and other messages go out.
  struct raft_message vote {};
  vote.type = RAFT_IO_REQUEST_VOTE_RESULT;
  vote.server_address = "127.0.0.1:7001";
  struct raft_io_send request {};
  EXPECT_EQ(io_.send(&io_, &request, &vote, nullptr), 0);
  EXPECT_EQ(FakeIo::sent.size(), 2u);
}

TEST_F(RaftIoGuardTest, NothingIsSentToANullAddress) {
  follower_.leader_address = nullptr;  // a new term's leader not known yet
  struct raft_io_append request {};
  ASSERT_TRUE(write(&request));
  finish(0);
  EXPECT_NE(follower_.answer_rv, 0);
  EXPECT_TRUE(FakeIo::sent.empty());
}

TEST_F(RaftIoGuardTest, ANewLeaderHearsNoResultBeforeAnEntryOfItsTermIsOnDisk) {
  raft_.state = RAFT_LEADER;
  // Its last entry on disk is of term 4 (written as a follower).
  struct raft_io_append old_entry {};
  ASSERT_TRUE(write(&old_entry, 4));
  finish(0);
  answer_arrives();
  EXPECT_TRUE(heard.empty()) << "libraft 0.15 would count it towards the term 4 entry";
  EXPECT_EQ(guard_.early_results_dropped(), 1u);
  // Its first entry of term 5, written but not yet on disk.
  struct raft_io_append first_entry {};
  ASSERT_TRUE(write(&first_entry, 5));
  answer_arrives();
  EXPECT_TRUE(heard.empty());
  finish(1);
  answer_arrives();
  EXPECT_EQ(heard, std::vector<int>{RAFT_IO_APPEND_ENTRIES_RESULT});
  EXPECT_EQ(guard_.early_results_dropped(), 2u);
}

TEST_F(RaftIoGuardTest, OnlyALeadersResultsAreHeldBack) {
  raft_.state = RAFT_FOLLOWER;  // a result comes from a term it left
  answer_arrives();
  raft_.state = RAFT_LEADER;
  struct raft_message vote {};
  vote.type = RAFT_IO_REQUEST_VOTE;
  vote.server_address = "127.0.0.1:7002";
  FakeIo::deliver(&io_, &vote);
  EXPECT_EQ(heard, (std::vector<int>{RAFT_IO_APPEND_ENTRIES_RESULT, RAFT_IO_REQUEST_VOTE}));
  EXPECT_EQ(guard_.early_results_dropped(), 0u);
}

}  // namespace
