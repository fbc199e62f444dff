#include "lockcached/consensus/data_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

namespace lockcached::consensus {
namespace {

constexpr std::string_view kClaimPrefix = "lockcached member ";

std::string claim_path(const std::string& dir) {
  return dir + "/member";
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Written whole or not at all: a start cut off while claiming leaves no
// half-written claim for the next to misread. The directory's owner's, as
// everything in it must be (a server started as root with --user claims
// it before it drops to that user, who owns the directory).
std::string write_claim(const std::string& dir, uint64_t id) {
  std::string path = claim_path(dir);
  std::string temporary = path + ".tmp";
  std::string text = std::string(kClaimPrefix) + std::to_string(id) + "\n";
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

}  // namespace

std::string data_dir_claim_problem(const std::string& dir, uint64_t id) {
  const std::string path = claim_path(dir);
  std::ifstream file(path);
  if (!file) return errno == ENOENT ? "" : errno_text("cannot read " + path);
  std::string line;
  std::getline(file, line);
  uint64_t owner = 0;
  const char* digits = line.data() + std::min(line.size(), kClaimPrefix.size());
  const char* end = line.data() + line.size();
  if (!line.starts_with(kClaimPrefix) || std::from_chars(digits, end, owner).ptr != end ||
      owner == 0) {
    return path + " is not a member's claim: \"" + line + "\"";
  }
  if (owner == id) return "";
  return dir + " holds node " + std::to_string(owner) + "'s state, not node " +
         std::to_string(id) + "'s (--node_id): give each node its own directory back";
}

std::string claim_data_dir(const std::string& dir, uint64_t id) {
  if (std::string problem = data_dir_claim_problem(dir, id); !problem.empty()) return problem;
  if (::access(claim_path(dir).c_str(), F_OK) == 0) return "";
  return write_claim(dir, id);
}

}  // namespace lockcached::consensus
