// The Redis lock with a replica, in RESP (lock_apis.h).
#include <charconv>
#include <string_view>

#include "lock_apis.h"

namespace loadgen {
namespace {

// Deletes the name only while it still holds this client's token.
constexpr std::string_view kUnlockScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";
constexpr std::string_view kExpiryMs = "30000";  // as etcd's lease: longer than any run
constexpr std::string_view kWaitMs = "1000";     // a replica that has not acked by then fails

void bulk(std::string_view text, Buffer& out) {
  char length[24];
  const auto end = std::to_chars(length, length + sizeof length, text.size()).ptr;
  out.append('$');
  out.append(length, static_cast<size_t>(end - length));
  out.append("\r\n", 2);
  out.append(text.data(), text.size());
  out.append("\r\n", 2);
}

void command(std::initializer_list<std::string_view> words, Buffer& out) {
  out.append('*');
  out.append(static_cast<char>('0' + words.size()));  // at most 9 words
  out.append("\r\n", 2);
  for (const std::string_view word : words)
    bulk(word, out);
}

// One RESP2 reply: a status (+), an error (-), an integer (:) or a bulk
// string ($, "$-1" for nil). `text` is what follows the type byte, or the
// bulk string's bytes.
struct Item {
  size_t end = 0;  // offset past it; 0: incomplete
  size_t need = 0;
  char type = 0;
  std::string_view text{};
  bool nil = false;
};

Item next_item(const char* data, size_t size, size_t from) {
  const std::string_view rest(data + from, size - from);
  const size_t line_end = rest.find("\r\n");
  if (line_end == std::string_view::npos || line_end == 0) return {};
  Item item{from + line_end + 2, 0, rest[0], rest.substr(1, line_end - 1)};
  if (item.type != '$') return item;
  long long length = 0;
  std::from_chars(item.text.data(), item.text.data() + item.text.size(), length);
  if (length < 0) {
    item.nil = true;
    item.text = {};
    return item;
  }
  const size_t end = item.end + static_cast<size_t>(length) + 2;
  if (size < end) return {0, end};
  item.text = std::string_view(data + item.end, static_cast<size_t>(length));
  item.end = end;
  return item;
}

bool is_one(const Item& item) {
  return item.type == ':' && item.text == "1";
}

}  // namespace

void write_redis(Op op, std::string_view name, const Session& session, Buffer& out) {
  switch (op) {
    case Op::kSetup:
      command({"SCRIPT", "LOAD", kUnlockScript}, out);
      return;
    case Op::kSvcLock:
      command({"SET", name, session.token, "NX", "PX", kExpiryMs}, out);
      command({"WAIT", "1", kWaitMs}, out);
      return;
    case Op::kSvcUnlock:
      command({"EVALSHA", session.setup, "1", name, session.token}, out);
      command({"WAIT", "1", kWaitMs}, out);
      return;
    default:
      return;  // Options::check allows no other request with --protocol=redis
  }
}

// kSetup: the SHA1 (a bulk string). The lock and the unlock: two replies,
// the command's and WAIT's, which must count one replica.
Reply parse_redis(Op op, const char* data, size_t size) {
  const Item first = next_item(data, size, 0);
  if (first.end == 0) return {0, first.need, Verdict::kOk};
  if (op == Op::kSetup) {
    Reply reply{first.end, 0, first.type == '$' && !first.nil ? Verdict::kOk : Verdict::kError};
    reply.token = first.text;
    return reply;
  }
  const Item wait = next_item(data, size, first.end);
  if (wait.end == 0) return {0, wait.need, Verdict::kOk};
  Reply reply{wait.end, 0, is_one(wait) ? Verdict::kOk : Verdict::kError};
  if (op == Op::kSvcLock && first.nil) {
    reply.retry = true;
  } else if (op == Op::kSvcLock ? first.text != "OK" || first.type != '+' : !is_one(first)) {
    reply.verdict = Verdict::kError;  // an error, or an unlock of a name this client lost
  }
  return reply;
}

}  // namespace loadgen
