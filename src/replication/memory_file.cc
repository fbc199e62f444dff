#include "lockcached/replication/memory_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include <openssl/evp.h>

#include "lockcached/protocol/binary_wire.h"
#include "lockcached/replication/applier.h"
#include "lockcached/replication/encoder.h"
#include "lockcached/replication/snapshot.h"
#include "lockcached/version.h"

namespace lockcached::replication {
namespace {

// The header: magic, format, the writer's version (NUL-padded), the
// settings a loading store must share, when it was written, the store's
// CAS counter. The footer: magic, items, body bytes (the frames between
// header and footer), and a SHA-256 of every byte before the digest.
constexpr std::string_view kMagic = "LCMEMORY";
constexpr std::string_view kEndMagic = "LCMEMEND";
// A change to the frames or to what they mean (SavedState's bits) makes a
// new format; a lockcached that reads another starts cold.
constexpr uint32_t kFormat = 1;
constexpr size_t kVersionSize = 32;
constexpr size_t kHeaderSize = kMagic.size() + 4 + kVersionSize + 4 * 8;
constexpr size_t kDigestSize = 32;
constexpr size_t kFooterSize = kEndMagic.size() + 2 * 8 + kDigestSize;
// The smallest an item's frame can be: a SetQ's header, its extras and a
// key of one byte. A count of more than the body holds is a writer's bug.
constexpr size_t kMinItemFrame = wire::kHeaderSize + wire::kSetExtras + 1;
// Bytes gathered before each write.
constexpr size_t kWriteChunk = size_t{1} << 20;

int64_t unix_now(const store::Clock& clock) { return clock.unix_epoch_of_zero() + clock.now(); }

using protocol::binary::append_u32;
using protocol::binary::append_u64;
using protocol::binary::u32_at;
using protocol::binary::u64_at;

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

struct DigestDeleter {
  void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
};

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr); }
  void add(std::string_view bytes) { EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()); }
  std::string digest() {
    unsigned char digest[kDigestSize];
    unsigned int length = 0;
    EVP_DigestFinal_ex(context_.get(), digest, &length);
    return std::string(reinterpret_cast<const char*>(digest), length);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, DigestDeleter> context_;
};

// A new file written in order and hashed on the way, made durable before
// it takes its name: a machine that crashes after the rename still finds
// either the old name's file or the whole new one.
class HashedFile {
 public:
  ~HashedFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool create(const std::string& path, std::string* error) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) *error = errno_text("cannot create " + path);
    return fd_ >= 0;
  }

  bool write(std::string_view bytes, std::string* error) {
    hash_.add(bytes);
    written_ += bytes.size();
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        *error = errno_text("cannot write");
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Appends the digest of everything written, syncs and closes.
  bool finish(std::string* error) {
    std::string digest = hash_.digest();
    if (!write(digest, error)) return false;
    if (::fsync(fd_) != 0) {
      *error = errno_text("cannot sync");
      return false;
    }
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) {
      *error = errno_text("cannot close");
      return false;
    }
    return true;
  }

  uint64_t written() const { return written_; }

 private:
  int fd_ = -1;
  Sha256 hash_;
  uint64_t written_ = 0;
};

std::string header(const store::Store& store, size_t memory_limit) {
  std::string out(kMagic);
  append_u32(kFormat, out);
  std::string version = LOCKCACHED_VERSION;
  version.resize(kVersionSize, '\0');
  out += version;
  append_u64(memory_limit, out);
  append_u64(store.max_item_size(), out);
  append_u64(static_cast<uint64_t>(unix_now(store.clock())), out);
  append_u64(store.cas_counter(), out);
  return out;
}

// The items, a walk piece at a time, gathered into chunks.
bool write_items(store::Store& store, HashedFile& file, uint64_t* items, std::string* error) {
  Encoder encoder(store.clock());
  std::string chunk;
  chunk.reserve(kWriteChunk + store.max_item_size() + 512);
  // Before the items, as it came before them: the loading store applies it
  // at its moment, which may have passed meanwhile.
  if (store::RelTime moment = store.pending_flush()) encoder.append_flush(moment, chunk);
  store::RelTime now = store.now();
  uint64_t cursor = 0;
  while (cursor != store::Store::kScanDone) {
    cursor = store.walk_items(cursor, Snapshot::kPieceItems, [&](const store::Item& item) {
      encoder.append_saved(item, now, chunk);
      ++*items;
    });
    if (chunk.size() >= kWriteChunk || cursor == store::Store::kScanDone) {
      if (!file.write(chunk, error)) return false;
      chunk.clear();
    }
  }
  return true;
}

// The directory entry of a rename, made durable.
void sync_directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// A read-only mapping of a whole file.
class Mapping {
 public:
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  bool map(int fd, size_t size, std::string* error) {
    if (size == 0) return true;
    void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      *error = errno_text("cannot map it");
      return false;
    }
    data_ = data;
    size_ = size;
    ::madvise(data_, size_, MADV_SEQUENTIAL);
    return true;
  }
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// What the file holds, once its checks passed; empty `why` then.
struct Contents {
  std::string why;
  std::string_view body;
  uint64_t items = 0;
  int64_t saved_unix = 0;
  uint64_t cas_counter = 0;
  std::string written_by;
};

Contents check(std::string_view file, const store::Store& store) {
  Contents contents;
  if (file.size() < kHeaderSize + kFooterSize || !file.starts_with(kMagic)) {
    contents.why = "not a lockcached memory file";
    return contents;
  }
  const char* header = file.data() + kMagic.size();
  if (uint32_t format = u32_at(header); format != kFormat) {
    contents.why = "format " + std::to_string(format) + ", this lockcached reads format " +
                   std::to_string(kFormat);
    return contents;
  }
  std::string_view footer = file.substr(file.size() - kFooterSize);
  Sha256 hash;
  hash.add(file.substr(0, file.size() - kDigestSize));
  if (!footer.starts_with(kEndMagic) || hash.digest() != footer.substr(footer.size() - kDigestSize)) {
    contents.why = "damaged (its checksum does not match)";
    return contents;
  }
  contents.items = u64_at(footer.data() + kEndMagic.size());
  uint64_t body_size = u64_at(footer.data() + kEndMagic.size() + 8);
  if (body_size != file.size() - kHeaderSize - kFooterSize) {
    contents.why = "damaged (its length)";
    return contents;
  }
  // Before anything is sized by it (Store::reserve): a count the body
  // cannot hold would ask for memory without bound.
  if (contents.items > body_size / kMinItemFrame) {
    contents.why = "damaged (its item count)";
    return contents;
  }
  contents.body = file.substr(kHeaderSize, body_size);
  const char* version = header + 4;
  contents.written_by.assign(version, strnlen(version, kVersionSize));
  const char* fields = version + kVersionSize;
  uint64_t memory_limit = u64_at(fields);
  uint64_t max_item_size = u64_at(fields + 8);
  contents.saved_unix = static_cast<int64_t>(u64_at(fields + 16));
  contents.cas_counter = u64_at(fields + 24);
  // A store of another size would evict while loading, or refuse items.
  if (memory_limit != store.stats().limit_bytes || max_item_size != store.max_item_size()) {
    contents.why = "written with a memory limit of " + std::to_string(memory_limit >> 20) +
                   " MB and items up to " + std::to_string(max_item_size) +
                   " bytes, this server has " + std::to_string(store.stats().limit_bytes >> 20) +
                   " MB and " + std::to_string(store.max_item_size()) +
                   " bytes (--memory_limit_mb and --max_item_size, memcached's -m and -I, must "
                   "not change across a warm restart)";
  }
  return contents;
}

MemoryFileLoaded refused(std::string why) {
  MemoryFileLoaded loaded;
  loaded.outcome = MemoryFileLoaded::kRefused;
  loaded.why = std::move(why);
  return loaded;
}

}  // namespace

MemoryFileSaved save_memory_file(const std::string& path, store::Store& store,
                                 size_t memory_limit) {
  MemoryFileSaved saved;
  std::string temp = path + ".tmp";
  HashedFile file;
  std::string head = header(store, memory_limit);
  if (!file.create(temp, &saved.error)) return saved;
  uint64_t items = 0;
  bool written = file.write(head, &saved.error) && write_items(store, file, &items, &saved.error);
  if (written) {
    std::string footer(kEndMagic);
    append_u64(items, footer);
    append_u64(file.written() - kHeaderSize, footer);
    written = file.write(footer, &saved.error) && file.finish(&saved.error);
  }
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    saved.error = errno_text("cannot rename " + temp + " to " + path);
    written = false;
  }
  if (!written) {
    ::unlink(temp.c_str());
    return saved;
  }
  sync_directory_of(path);
  saved.ok = true;
  saved.items = items;
  saved.bytes = file.written();
  return saved;
}

MemoryFileLoaded load_memory_file(const std::string& path, store::Store& store) {
  // A save cut off (killed when a service manager's stop timeout ran out)
  // leaves its temporary file, never the file itself.
  ::unlink((path + ".tmp").c_str());
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return {};
  if (fd < 0) return refused(errno_text("cannot open it"));
  struct stat status;
  Mapping mapping;
  std::string error;
  bool mapped = ::fstat(fd, &status) == 0 ? mapping.map(fd, static_cast<size_t>(status.st_size), &error)
                                          : (error = errno_text("cannot stat it"), false);
  ::close(fd);
  // Gone before anything of it is served: a crash from here on finds no
  // file. The mapping keeps the bytes.
  if (::unlink(path.c_str()) != 0) {
    return refused(errno_text("cannot remove it, and a crash after this start would load it "
                              "again"));
  }
  if (!mapped) return refused(error);
  Contents contents = check(mapping.bytes(), store);
  if (!contents.why.empty()) return refused(contents.why);

  MemoryFileLoaded loaded;
  loaded.written_by = contents.written_by;
  loaded.seconds_down =
      std::clamp<int64_t>(unix_now(store.clock()) - contents.saved_unix, 0, UINT32_MAX);
  store.raise_cas_counter(contents.cas_counter);
  store.reserve(contents.items);
  Applier applier(store, MemoryFileFrames{static_cast<uint32_t>(loaded.seconds_down)});
  bool applied = applier.feed(contents.body) && applier.buffered() == 0 &&
                 applier.items_restored() + applier.items_dropped() == contents.items;
  if (!applied) {
    // Only a writer's bug gets here, past the checksum: serve none of it.
    store.flush_all(0);
    std::string why = applier.error().empty() ? "its item count" : std::string(applier.error());
    return refused("damaged (" + why + ")");
  }
  loaded.outcome = MemoryFileLoaded::kLoaded;
  loaded.restored = applier.items_restored();
  loaded.dropped = applier.items_dropped();
  return loaded;
}

}  // namespace lockcached::replication
