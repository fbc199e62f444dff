// An io_uring with one buffer group of provided buffers, for the --io=uring
// paths of the floor server and the load generator (bench/README.md).
//
// Multishot receives pick their buffer from the group when data arrives, so
// that an idle connection holds no buffer and one armed receive serves a
// connection for as long as buffers last. Debian 12's liburing 2.3 has no
// io_uring_setup_buf_ring: the buffer ring is mapped here and registered
// with io_uring_register_buf_ring.
//
// One object belongs to one thread for its whole life: the ring is set up
// with IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN where the
// kernel has them (6.1+), so completions are only produced while that thread
// waits in io_uring_enter, in one batch per wait.
#pragma once

#include <liburing.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace bench {

class Uring {
 public:
  static constexpr uint16_t kGroup = 0;

  Uring() = default;
  ~Uring() { close(); }
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  // A ring of `entries` submission slots and `buffers` (a power of two)
  // provided buffers of `buffer_size` bytes; false and a message when the
  // kernel refuses.
  bool open(unsigned entries, unsigned buffers, unsigned buffer_size, std::string& error) {
    if (!init_ring(entries, error)) return false;
    ready_ = true;
    buffers_ = buffers;
    buffer_size_ = buffer_size;
    ring_bytes_ = buffers * sizeof(io_uring_buf);
    void* ring = mmap(nullptr, ring_bytes_ + size_t{buffers} * buffer_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ring == MAP_FAILED) return failed("mmap", errno, error);
    buf_ring_ = static_cast<io_uring_buf_ring*>(ring);
    // The ring's array is page aligned (mmap); the buffers follow it.
    data_ = static_cast<char*>(ring) + ring_bytes_;
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(buf_ring_);
    reg.ring_entries = buffers;
    reg.bgid = kGroup;
    const int ret = io_uring_register_buf_ring(&ring_, &reg, 0);
    if (ret != 0) return failed("io_uring_register_buf_ring", -ret, error);
    io_uring_buf_ring_init(buf_ring_);
    for (unsigned id = 0; id < buffers; ++id)
      recycle(id);
    publish();
    return true;
  }

  void close() {
    if (ready_) io_uring_queue_exit(&ring_);  // cancels what is still armed
    ready_ = false;
    if (buf_ring_ != nullptr) munmap(buf_ring_, ring_bytes_ + size_t{buffers_} * buffer_size_);
    buf_ring_ = nullptr;
  }

  io_uring* ring() { return &ring_; }

  // A free submission slot. When the queue is full, what is queued is
  // submitted first, so this never fails.
  io_uring_sqe* sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
  }

  // Arms a multishot receive on `fd` that fills buffers of the group.
  void recv_multishot(int fd, uint64_t user_data) {
    io_uring_sqe* s = sqe();
    io_uring_prep_recv_multishot(s, fd, nullptr, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = kGroup;
    io_uring_sqe_set_data64(s, user_data);
  }

  void send(int fd, const void* data, size_t size, uint64_t user_data) {
    io_uring_sqe* s = sqe();
    io_uring_prep_send(s, fd, data, size, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, user_data);
  }

  // The buffer a receive completion filled, when it carries one
  // (IORING_CQE_F_BUFFER); it stays ours until recycle().
  static bool has_buffer(const io_uring_cqe* cqe) { return cqe->flags & IORING_CQE_F_BUFFER; }
  static unsigned buffer_id(const io_uring_cqe* cqe) {
    return cqe->flags >> IORING_CQE_BUFFER_SHIFT;
  }
  const char* buffer(unsigned id) const { return data_ + size_t{id} * buffer_size_; }

  // Gives a buffer back; the kernel sees it at the next publish(), so that
  // one turn's buffers go back with one store.
  void recycle(unsigned id) {
    io_uring_buf_ring_add(buf_ring_, data_ + size_t{id} * buffer_size_, buffer_size_,
                          static_cast<unsigned short>(id), io_uring_buf_ring_mask(buffers_),
                          static_cast<int>(recycled_++));
  }
  void publish() {
    if (recycled_ > 0) io_uring_buf_ring_advance(buf_ring_, static_cast<int>(recycled_));
    recycled_ = 0;
  }

 private:
  // DEFER_TASKRUN batches the completions of a turn into the thread's own
  // wait; older kernels get COOP_TASKRUN (no interrupting IPIs), then none.
  // The completion queue is 8 times the submission queue: multishot
  // requests post many completions per submission.
  bool init_ring(unsigned entries, std::string& error) {
    const unsigned tries[] = {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
                              IORING_SETUP_COOP_TASKRUN, 0};
    int ret = -EINVAL;
    for (const unsigned flags : tries) {
      io_uring_params params{};
      params.flags = flags | IORING_SETUP_CQSIZE;
      params.cq_entries = 8 * entries;
      ret = io_uring_queue_init_params(entries, &ring_, &params);
      if (ret != -EINVAL) break;
    }
    return ret == 0 || failed("io_uring_queue_init_params", -ret, error);
  }

  static bool failed(const char* what, int error_number, std::string& error) {
    error = std::string(what) + ": " + std::strerror(error_number);
    return false;
  }

  io_uring ring_{};
  bool ready_ = false;
  io_uring_buf_ring* buf_ring_ = nullptr;
  char* data_ = nullptr;
  size_t ring_bytes_ = 0;
  unsigned buffers_ = 0;
  unsigned buffer_size_ = 0;
  unsigned recycled_ = 0;
};

}  // namespace bench
