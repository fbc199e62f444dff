#include "lockcached/consensus/data_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <glog/logging.h>

namespace lockcached::consensus {
namespace {

constexpr std::string_view kClaimWord = "lockcached member";
constexpr std::string_view kIncarnationWord = "incarnation";
constexpr size_t kIncarnationBytes = 16;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// `text` as DIR/NAME, written whole or not at all (a start cut off while
// writing leaves nothing half-written to misread), owned as the directory
// is: everything in it must be the server's user's, and a server started
// as root with --user writes before it drops to that user.
std::string write_whole(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::string temporary = path + ".tmp";
  struct stat owner {};
  if (::stat(dir.c_str(), &owner) != 0) return errno_text("cannot stat " + dir);
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno_text("cannot write " + temporary);
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                 (::geteuid() != 0 || ::fchown(fd, owner.st_uid, owner.st_gid) == 0) &&
                 ::fsync(fd) == 0;
  int saved = errno;
  ::close(fd);
  if (!written) {
    errno = saved;
    return errno_text("cannot write " + temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) return errno_text("cannot rename to " + path);
  return "";
}

bool is_incarnation(const std::string& text) {
  return text.size() == 2 * kIncarnationBytes &&
         text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

std::string read_data_dir_claim(const std::string& dir, DataDirClaim* claim) {
  *claim = {};
  const std::string path = dir + "/member";
  std::ifstream file(path);
  if (!file) return errno == ENOENT ? "" : errno_text("cannot read " + path);
  std::string line;
  std::getline(file, line);
  // "lockcached member ID [incarnation HEX]"
  std::istringstream words(line);
  std::string first, second, word;
  words >> first >> second >> claim->node_id;
  bool ok = words && first + " " + second == kClaimWord && claim->node_id != 0;
  if (ok && words >> word) {
    ok = word == kIncarnationWord && words >> claim->incarnation &&
         is_incarnation(claim->incarnation) && !(words >> word);
  }
  if (!ok) {
    *claim = {};
    return path + " is not a member's claim: \"" + line + "\"";
  }
  return "";
}

std::string data_dir_claim_problem(const std::string& dir, uint64_t id, DataDirClaim* claim) {
  DataDirClaim read;
  if (claim == nullptr) claim = &read;
  if (std::string problem = read_data_dir_claim(dir, claim); !problem.empty()) return problem;
  if (claim->node_id == 0 || claim->node_id == id) return "";
  return dir + " holds node " + std::to_string(claim->node_id) + "'s state, not node " +
         std::to_string(id) + "'s (--node_id): give each node its own directory back";
}

std::string write_data_dir_claim(const std::string& dir, const DataDirClaim& claim) {
  return write_whole(dir, "member",
                     std::string(kClaimWord) + " " + std::to_string(claim.node_id) + " " +
                         std::string(kIncarnationWord) + " " + claim.incarnation + "\n");
}

std::string new_incarnation() {
  unsigned char bytes[kIncarnationBytes];
  CHECK_EQ(RAND_bytes(bytes, sizeof bytes), 1) << "no random bytes for a data directory";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : bytes) {
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  return text;
}

std::string PeerBook::load(const std::string& dir) {
  dir_ = dir;
  known_.clear();
  const std::string path = dir + "/peers";
  std::ifstream file(path);
  if (!file) return errno == ENOENT ? "" : errno_text("cannot read " + path);
  uint64_t id;
  std::string incarnation;
  while (file >> id >> incarnation) {
    if (!is_incarnation(incarnation)) return path + ": not an incarnation: " + incarnation;
    known_[id] = incarnation;
  }
  if (!file.eof()) return path + ": not lines of \"ID INCARNATION\"";
  return "";
}

bool PeerBook::admit(uint64_t id, const std::string& incarnation) {
  auto found = known_.find(id);
  if (found != known_.end()) return found->second == incarnation;
  if (!is_incarnation(incarnation)) return false;
  known_[id] = incarnation;
  std::string text;
  for (const auto& [peer, known] : known_)
    text += std::to_string(peer) + " " + known + "\n";
  if (std::string problem = write_whole(dir_, "peers", text); !problem.empty()) {
    LOG(ERROR) << "cluster: " << problem << "; node " << id << " refused until it can be recorded";
    known_.erase(id);
    return false;
  }
  return true;
}

}  // namespace lockcached::consensus
