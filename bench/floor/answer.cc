#include "answer.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "../common/value.h"

namespace floor_server {
namespace {

constexpr size_t kHeader = 24;

// Quiet storage commands (SetQ, AddQ, ReplaceQ, LockQ, UnlockQ, RaUQ) answer
// nothing on success.
bool is_quiet(uint8_t opcode) {
  return opcode == 0x11 || opcode == 0x12 || opcode == 0x13 || opcode == 0x41 || opcode == 0x43 ||
         opcode == 0x4b;
}

// The next space-separated word of a request line from `at`; empty at the end.
std::string_view next_word(std::string_view line, size_t& at) {
  while (at < line.size() && line[at] == ' ')
    ++at;
  const size_t begin = at;
  while (at < line.size() && line[at] != ' ')
    ++at;
  return line.substr(begin, at - begin);
}

}  // namespace

Answerer::Answerer(size_t value_size) : filler_(bench::make_filler(value_size)) {
  value_header_ = " 0 " + std::to_string(value_size) + "\r\n";
  value_header_cas_ = " 0 " + std::to_string(value_size) + " 1\r\n";
}

void Answerer::answer(Requests& conn, const char* data, size_t size, Output& out) {
  if (conn.partial.empty()) {
    const size_t used = consume(conn, data, size, out);
    conn.partial.assign(data + used, size - used);
    return;
  }
  conn.partial.append(data, size);
  const size_t used = consume(conn, conn.partial.data(), conn.partial.size(), out);
  conn.partial.erase(0, used);
}

size_t Answerer::consume(Requests& conn, const char* data, size_t size, Output& out) {
  size_t at = 0;
  while (at < size && !conn.closing) {
    if (conn.skip > 0) {
      at += skip_data(conn, size - at, out);
      continue;
    }
    const size_t used = static_cast<uint8_t>(data[at]) == 0x80
                            ? consume_binary(conn, data + at, size - at, out)
                            : consume_text(conn, data + at, size - at, out);
    if (used == 0) break;
    at += used;
  }
  return at;
}

size_t Answerer::consume_text(Requests& conn, const char* data, size_t size, Output& out) {
  const void* newline = std::memchr(data, '\n', size);
  if (newline == nullptr) return 0;
  const size_t line_end = static_cast<const char*>(newline) - data + 1;
  std::string_view line(data, line_end - 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t at = 0;
  const std::string_view command = next_word(line, at);
  if (command == "get" || command == "gets") {
    for (std::string_view key = next_word(line, at); !key.empty(); key = next_word(line, at)) {
      reply_value(key, command == "gets", out);
    }
    out.append("END\r\n");
  } else if (command == "set" || command == "add" || command == "replace" || command == "append" ||
             command == "prepend" || command == "cas") {
    std::string_view bytes_word;
    for (int i = 0; i < 4; ++i)
      bytes_word = next_word(line, at);  // key flags exptime bytes
    size_t bytes = 0;
    std::from_chars(bytes_word.data(), bytes_word.data() + bytes_word.size(), bytes);
    const bool reply = line.find(" noreply") == std::string_view::npos;
    if (size < line_end + bytes + 2) {
      // The rest of the block is skipped as it arrives, never buffered.
      conn.skip = line_end + bytes + 2 - size;
      conn.after = reply ? After::kStored : After::kNothing;
      return size;
    }
    if (reply) out.append("STORED\r\n");
    return line_end + bytes + 2;
  } else if (command == "lock" || command == "unlock" || command == "unlock_all") {
    out.append("OK\r\n");
  } else if (command == "version") {
    out.append("VERSION floor\r\n");
  } else if (command == "quit") {
    conn.closing = true;
  } else {
    out.append("ERROR\r\n");
  }
  return line_end;
}

void Answerer::reply_value(std::string_view key, bool with_cas, Output& out) {
  out.append("VALUE ");
  out.append(key);
  out.append(with_cas ? value_header_cas_ : value_header_);
  bench::value_for(key, filler_, out.grow(filler_.size()));
  out.append("\r\n");
}

size_t Answerer::consume_binary(Requests& conn, const char* data, size_t size, Output& out) {
  if (size < kHeader) return 0;
  uint32_t body = 0;
  for (int i = 8; i < 12; ++i)
    body = body << 8 | static_cast<uint8_t>(data[i]);
  const auto opcode = static_cast<uint8_t>(data[1]);
  const bool get = opcode == 0x00 || opcode == 0x09 || opcode == 0x0c || opcode == 0x0d;
  if (size < kHeader + body) {
    if (get) return 0;  // the key is needed for the reply
    conn.skip = kHeader + body - size;
    std::memcpy(conn.header, data, kHeader);
    conn.after = is_quiet(opcode) ? After::kNothing : After::kBinary;
    return size;
  }
  const size_t key_size = static_cast<uint8_t>(data[2]) << 8 | static_cast<uint8_t>(data[3]);
  const size_t extras = static_cast<uint8_t>(data[4]);
  const std::string_view key(data + kHeader + extras, key_size);
  switch (opcode) {
    case 0x00:  // Get, GetQ, GetK, GetKQ: a hit
    case 0x09:
    case 0x0c:
    case 0x0d:
      reply_binary(data, opcode >= 0x0c ? key : std::string_view(), true, out);
      break;
    default:  // Set, Add, Replace, Lock, Unlock, RaU, Noop, Version, ...: success
      if (!is_quiet(opcode)) reply_binary(data, {}, false, out);
  }
  return kHeader + body;
}

size_t Answerer::skip_data(Requests& conn, size_t available, Output& out) {
  const size_t n = std::min(conn.skip, available);
  conn.skip -= n;
  if (conn.skip > 0) return n;
  if (conn.after == After::kStored) out.append("STORED\r\n");
  if (conn.after == After::kBinary) reply_binary(conn.header, {}, false, out);
  return n;
}

void Answerer::reply_binary(const char* request, std::string_view key, bool value, Output& out) {
  const size_t extras = value ? 4 : 0;
  const size_t value_size = value ? filler_.size() : 0;
  const size_t body = extras + key.size() + value_size;
  char header[kHeader] = {};
  header[0] = static_cast<char>(0x81);
  header[1] = request[1];
  header[2] = static_cast<char>(key.size() >> 8);
  header[3] = static_cast<char>(key.size());
  header[4] = static_cast<char>(extras);
  for (int i = 0; i < 4; ++i)
    header[8 + i] = static_cast<char>(body >> (24 - 8 * i));
  std::memcpy(header + 12, request + 12, 4);  // opaque
  header[23] = 1;                             // CAS 1
  out.append({header, kHeader});
  out.append(extras, '\0');
  out.append(key);
  if (!value) return;
  char* value_at = out.grow(value_size);
  const size_t key_size = static_cast<uint8_t>(request[2]) << 8 | static_cast<uint8_t>(request[3]);
  const size_t request_extras = static_cast<uint8_t>(request[4]);
  bench::value_for({request + kHeader + request_extras, key_size}, filler_, value_at);
}

}  // namespace floor_server
