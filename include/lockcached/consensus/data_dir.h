// Which member's state a Raft data directory holds.
//
// libraft's files do not say: it takes whatever id it is started with. A
// directory moved to another member (two swapped, one copied) would go on
// as that member, its votes and log spoken for by a node that never cast
// or wrote them, which Raft's safety does not survive. So the first start
// of a member with a directory claims it (a file `member` beside libraft's),
// and every later start checks the claim before libraft reads anything.
#pragma once

#include <cstdint>
#include <string>

namespace lockcached::consensus {

// "" when no member or node `id` claimed `dir`; otherwise why it is not
// node `id`'s, for the one line that stops the start. Reads only: the
// configuration's checks, before anything is bound.
std::string data_dir_claim_problem(const std::string& dir, uint64_t id);
// The same, and then claims `dir` for node `id` if nobody had (a new
// directory, or one from before the claim existed): the Raft node's start.
std::string claim_data_dir(const std::string& dir, uint64_t id);

}  // namespace lockcached::consensus
