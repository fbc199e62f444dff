#include "lockcached/server/plain_transport.h"

namespace lockcached::server {

Input PlainTransport::read(int fd, InputBuffer& input) {
  InputRoom room = input.room(InputBuffer::kMinCapacity);
  ssize_t received = net::read_some(fd, room.data, room.size);
  if (received <= 0) return unread(received);
  return {Input::Status::kBytes, {room.data, static_cast<size_t>(received)}};
}

Input PlainTransport::decode(const char* raw, size_t size, InputBuffer& /*input*/) {
  // Nothing to decode: what keep() kept is in the input buffer already.
  if (size == 0) return {Input::Status::kAgain};
  return {Input::Status::kBytes, {raw, size}};
}

void PlainTransport::keep(const char* raw, size_t size, InputBuffer& input) {
  input.append({raw, size});
}

int PlainTransport::send(int fd, protocol::OutputQueue& replies) {
  return send_gathered(*this, fd, replies);
}

int PlainTransport::gather(protocol::OutputQueue& replies, iovec* iov, int max) {
  return replies.gather(iov, max);
}

bool PlainTransport::consume(protocol::OutputQueue& replies, size_t bytes) {
  bytes_written_.add(bytes);
  replies.consume(bytes);
  return !replies.empty();
}

}  // namespace lockcached::server
