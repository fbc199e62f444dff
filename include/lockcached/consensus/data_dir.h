// Which member's state a Raft data directory holds, and which directories
// the other members have heard from.
//
// libraft's files do not say whose they are: it takes whatever id it is
// started with. A directory moved to another member (two swapped, one
// copied) would go on as that member, its votes and log spoken for by a
// node that never cast or wrote them; and a member whose disk was lost,
// started again under its old id with an empty directory, has forgotten
// the votes it gave. Raft's safety survives neither. So:
//
// - the first start of a member with a directory claims it: a file
//   `member` beside libraft's names the node and a random incarnation of
//   the directory. Every later start checks the claim before libraft reads
//   anything (another node's directory stops the start);
// - every connection between members carries the connector's incarnation
//   (authenticated_transport.h), and each member remembers the first it
//   heard from each node (a file `peers`): a node that comes back with
//   another directory than the one its peers knew is refused by them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace lockcached::consensus {

struct DataDirClaim {
  uint64_t node_id = 0;     // 0: no member claimed the directory yet
  std::string incarnation;  // hex; "" in a claim written before incarnations
};

// The claim in `dir` (node_id 0 when there is none); "" or why it cannot
// be read, for the one line that stops the start.
std::string read_data_dir_claim(const std::string& dir, DataDirClaim* claim);
// "" when no member or node `id` claimed `dir`; otherwise why it is not
// node `id`'s. Reads only: the configuration's checks, before any bind,
// and the Raft node's start, which takes the claim read (`claim`).
std::string data_dir_claim_problem(const std::string& dir, uint64_t id,
                                   DataDirClaim* claim = nullptr);
// Claims `dir` (written whole, owned as the directory is); "" or why not.
std::string write_data_dir_claim(const std::string& dir, const DataDirClaim& claim);
// A new random incarnation, hex.
std::string new_incarnation();

// The incarnation each peer first spoke with, kept in `dir`/peers.
class PeerBook {
 public:
  // "" or why the file cannot be read.
  std::string load(const std::string& dir);
  // True when node `id` may speak with `incarnation`: the one it spoke with
  // before, or the first heard from it (recorded, on disk before this
  // returns; false if it cannot be).
  bool admit(uint64_t id, const std::string& incarnation);

 private:
  std::string dir_;
  std::map<uint64_t, std::string> known_;
};

}  // namespace lockcached::consensus
