#include "lockcached/server/transport.h"

namespace lockcached::server {

Input Transport::unread(ssize_t result) {
  if (result == 0) return {Input::Status::kEnd};  // the client may still read
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {Input::Status::kAgain};
  return {Input::Status::kFailed, {}, errno};
}

}  // namespace lockcached::server
