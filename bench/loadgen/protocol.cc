#include "protocol.h"

#include <charconv>
#include <cstdio>
#include <cstring>

#include "../common/value.h"
#include "lock_apis.h"

namespace loadgen {
namespace {

constexpr uint8_t kRequestMagic = 0x80;
constexpr uint8_t kResponseMagic = 0x81;
constexpr size_t kHeader = 24;
constexpr uint8_t kGet = 0x00, kSet = 0x01, kNoop = 0x0a, kVersion = 0x0b, kGetKQ = 0x0d;
constexpr uint8_t kLock = 0x40, kRaU = 0x4a;
constexpr uint16_t kNotFound = 0x0001;

struct Line {
  std::string_view text;  // without "\r\n"
  size_t end = 0;         // offset just past "\r\n"; 0 when incomplete
};

Line next_line(const char* data, size_t size, size_t from) {
  const void* newline = std::memchr(data + from, '\n', size - from);
  if (newline == nullptr) return {};
  const size_t at = static_cast<const char*>(newline) - data;
  if (at == from || data[at - 1] != '\r') return {{data + from, 0}, at + 1};
  return {{data + from, at - 1 - from}, at + 1};
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

uint16_t load16(const char* p) {
  return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
}

uint32_t load32(const char* p) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value = (value << 8) | static_cast<uint8_t>(p[i]);
  return value;
}

void store16(char* p, uint16_t value) {
  p[0] = static_cast<char>(value >> 8);
  p[1] = static_cast<char>(value);
}

void store32(char* p, uint32_t value) {
  for (int i = 3; i >= 0; --i, value >>= 8)
    p[i] = static_cast<char>(value);
}

// "VALUE <key> <flags> <bytes>[ <cas>]": the key and the byte count.
bool parse_value_line(std::string_view line, std::string_view& key, size_t& bytes) {
  line.remove_prefix(6);
  const size_t key_end = line.find(' ');
  if (key_end == std::string_view::npos) return false;
  key = line.substr(0, key_end);
  const size_t flags_end = line.find(' ', key_end + 1);
  if (flags_end == std::string_view::npos) return false;
  const char* first = line.data() + flags_end + 1;
  const char* last = line.data() + line.size();
  auto [end, error] = std::from_chars(first, last, bytes);
  return error == std::errc() && end != first && (end == last || *end == ' ');
}

Reply simple_text(const char* data, size_t size, std::string_view expected, bool prefix) {
  const Line line = next_line(data, size, 0);
  if (line.end == 0) return {};
  const bool ok = prefix ? starts_with(line.text, expected) : line.text == expected;
  return {line.end, 0, ok ? Verdict::kOk : Verdict::kError};
}

}  // namespace

Codec::Codec(const Options& options)
    : protocol_(options.protocol),
      host_(options.host + ":" + std::to_string(options.port)),
      keys_(options.key_prefix, options.keys),
      hot_names_("hot:", static_cast<uint64_t>(std::max(options.hot_names, 1))),
      filler_(bench::make_filler(options.value_size)),
      set_suffix_(" 0 0 " + std::to_string(options.value_size) + "\r\n"),
      lock_suffix_("\r\n"),
      svc_names_(options.hot_names > 0 ? &hot_names_ : &keys_) {
  if (options.hot_names > 0) {
    char wait[32];
    std::snprintf(wait, sizeof wait, " %g\r\n", options.lock_wait_s);
    lock_suffix_ = wait;
  }
}

// ---------------------------------------------------------------------------
// Requests

void Codec::write(const Request& request, const uint64_t* multi, Buffer& out) const {
  if (needs_setup()) {
    write_lock_api(request, out);
  } else if (protocol_ == Protocol::kBinary && request.op != Op::kSvcLock &&
             request.op != Op::kSvcUnlock) {
    write_binary(request, multi, out);
  } else {
    write_text(request, multi, out);
  }
}

void Codec::write_lock_api(const Request& request, Buffer& out) const {
  char name[kMaxKey];
  svc_names_->write(request.key, name);
  const std::string_view named(name, svc_names_->size());
  if (protocol_ == Protocol::kEtcd) {
    write_etcd(request.op, named, *request.session, host_, out);
  } else {
    write_redis(request.op, named, *request.session, out);
  }
}

void Codec::write_key(const KeyFormat& format, uint64_t key, Buffer& out) const {
  out.ensure(format.size());
  format.write(key, out.tail());
  out.commit(format.size());
}

void Codec::write_value(uint64_t key, Buffer& out) const {
  char name[kMaxKey];
  keys_.write(key, name);
  out.ensure(filler_.size());
  bench::value_for({name, keys_.size()}, filler_, out.tail());
  out.commit(filler_.size());
}

void Codec::write_text(const Request& request, const uint64_t* multi, Buffer& out) const {
  switch (request.op) {
    case Op::kGet:
      out.append("get", 3);
      for (uint32_t i = 0; i < request.width; ++i) {
        out.append(' ');
        write_key(keys_, request.width == 1 ? request.key : multi[i], out);
      }
      out.append("\r\n", 2);
      return;
    case Op::kSet:
    case Op::kRaU:  // text has no RaU: the holder's set keeps the lock
      out.append("set ", 4);
      write_key(keys_, request.key, out);
      out.append(set_suffix_.data(), set_suffix_.size());
      write_value(request.key, out);
      out.append("\r\n", 2);
      return;
    case Op::kLock:
    case Op::kUnlock:
      if (request.op == Op::kLock) out.append("lock ", 5);
      if (request.op == Op::kUnlock) out.append("unlock ", 7);
      write_key(keys_, request.key, out);
      out.append("\r\n", 2);
      return;
    case Op::kSvcLock:
      out.append("lock ", 5);
      write_key(*svc_names_, request.key, out);
      out.append(lock_suffix_.data(), lock_suffix_.size());
      return;
    case Op::kSvcUnlock:
      out.append("unlock ", 7);
      write_key(*svc_names_, request.key, out);
      out.append("\r\n", 2);
      return;
    case Op::kVersion:
      out.append("version\r\n", 9);
      return;
    case Op::kSetup:
      return;  // etcd and Redis only (write_lock_api)
  }
}

void Codec::write_header(uint8_t opcode, uint64_t key, uint8_t extras, size_t value,
                         uint32_t opaque, Buffer& out) const {
  const size_t key_size = opcode == kNoop || opcode == kVersion ? 0 : keys_.size();
  char header[kHeader] = {};
  header[0] = static_cast<char>(kRequestMagic);
  header[1] = static_cast<char>(opcode);
  store16(header + 2, static_cast<uint16_t>(key_size));
  header[4] = static_cast<char>(extras);
  store32(header + 8, static_cast<uint32_t>(extras + key_size + value));
  store32(header + 12, opaque);
  out.append(header, kHeader);
  if (extras > 0) {
    static constexpr char kZeros[8] = {};  // flags 0, exptime 0
    out.append(kZeros, extras);
  }
  if (key_size > 0) write_key(keys_, key, out);
}

void Codec::write_binary(const Request& request, const uint64_t* multi, Buffer& out) const {
  switch (request.op) {
    case Op::kGet:
      if (request.width == 1) {
        write_header(kGet, request.key, 0, 0, request.opaque, out);
        return;
      }
      for (uint32_t i = 0; i < request.width; ++i)
        write_header(kGetKQ, multi[i], 0, 0, i, out);
      write_header(kNoop, 0, 0, 0, request.opaque, out);
      return;
    case Op::kSet:
    case Op::kRaU:
      write_header(request.op == Op::kSet ? kSet : kRaU, request.key, 8, filler_.size(),
                   request.opaque, out);
      write_value(request.key, out);
      return;
    case Op::kLock:
      write_header(kLock, request.key, 0, 0, request.opaque, out);
      return;
    case Op::kUnlock:
      write_header(kLock + 2, request.key, 0, 0, request.opaque, out);
      return;
    case Op::kVersion:
      write_header(kVersion, 0, 0, 0, request.opaque, out);
      return;
    case Op::kSvcLock:
    case Op::kSvcUnlock:
    case Op::kSetup:
      return;  // text, etcd or Redis; write() never gets here
  }
}

// ---------------------------------------------------------------------------
// Replies

Reply Codec::parse(const Request& request, const uint64_t* multi, const char* data,
                   size_t size) const {
  if (protocol_ == Protocol::kEtcd) return parse_etcd(request.op, data, size);
  if (protocol_ == Protocol::kRedis) return parse_redis(request.op, data, size);
  if (protocol_ == Protocol::kBinary && request.op != Op::kSvcLock &&
      request.op != Op::kSvcUnlock) {
    return parse_binary(request, multi, data, size);
  }
  return parse_text(request, multi, data, size);
}

Verdict Codec::check_value(uint64_t key, const char* data, size_t size) const {
  if (size != filler_.size()) return Verdict::kMismatch;
  char name[kMaxKey];
  keys_.write(key, name);
  return bench::is_value_of({name, keys_.size()}, filler_, data) ? Verdict::kOk
                                                                 : Verdict::kMismatch;
}

Reply Codec::parse_text(const Request& request, const uint64_t* multi, const char* data,
                        size_t size) const {
  switch (request.op) {
    case Op::kGet:
      return parse_text_get(request, multi, data, size);
    case Op::kSet:
    case Op::kRaU:
      return simple_text(data, size, "STORED", false);
    case Op::kLock:
    case Op::kUnlock:
      return simple_text(data, size, "OK", false);
    case Op::kSvcLock:
      return simple_text(data, size, "200 Acquired ", true);
    case Op::kSvcUnlock:
      return simple_text(data, size, "200 Released", false);
    case Op::kVersion:
      return simple_text(data, size, "VERSION ", true);
    case Op::kSetup:
      break;  // etcd and Redis only (parse)
  }
  return {0, 0, Verdict::kMalformed};
}

Reply Codec::parse_text_get(const Request& request, const uint64_t* multi, const char* data,
                            size_t size) const {
  Reply reply;
  uint32_t next = 0;  // the requested key the next VALUE may be (misses are skipped)
  size_t at = 0;
  for (;;) {
    const Line line = next_line(data, size, at);
    if (line.end == 0) return {0, 0, Verdict::kOk};
    if (line.text == "END") {
      reply.consumed = line.end;
      reply.misses = request.width - reply.hits;
      return reply;
    }
    if (!starts_with(line.text, "VALUE ")) {
      // An error line is the whole reply (memcached's SERVER_ERROR, ERROR, ...).
      return {line.end, 0, Verdict::kError};
    }
    std::string_view key;
    size_t bytes = 0;
    if (!parse_value_line(line.text, key, bytes)) return {line.end, 0, Verdict::kMalformed};
    const size_t block_end = line.end + bytes + 2;
    if (size < block_end) return {0, block_end, Verdict::kOk};
    if (data[block_end - 2] != '\r' || data[block_end - 1] != '\n') {
      return {block_end, 0, Verdict::kMalformed};
    }
    const uint64_t* wanted = request.width == 1 ? &request.key : multi;
    while (next < request.width && !keys_.is(key, wanted[next]))
      ++next;
    if (next == request.width) {
      reply.verdict = Verdict::kMismatch;  // a key not asked for, or out of order
    } else {
      ++reply.hits;
      if (check_value(wanted[next], data + line.end, bytes) != Verdict::kOk) {
        reply.verdict = Verdict::kMismatch;
      }
      ++next;
    }
    at = block_end;
  }
}

Reply Codec::parse_binary(const Request& request, const uint64_t* multi, const char* data,
                          size_t size) const {
  if (request.op == Op::kGet && request.width > 1) {
    return parse_binary_multiget(request, multi, data, size);
  }
  if (size < kHeader) return {};
  const size_t total = kHeader + load32(data + 8);
  if (size < total) return {0, total, Verdict::kOk};
  if (static_cast<uint8_t>(data[0]) != kResponseMagic) return {total, 0, Verdict::kMalformed};
  Reply reply{total, 0, Verdict::kOk};
  const uint16_t status = load16(data + 6);
  if (load32(data + 12) != request.opaque) {
    reply.verdict = Verdict::kMismatch;
  } else if (request.op == Op::kGet && status == kNotFound) {
    reply.misses = 1;
  } else if (status != 0) {
    reply.verdict = Verdict::kError;
  } else if (request.op == Op::kGet) {
    const size_t extras = static_cast<uint8_t>(data[4]);
    const size_t key_size = load16(data + 2);
    reply.hits = 1;
    reply.verdict = check_value(request.key, data + kHeader + extras + key_size,
                                total - kHeader - extras - key_size);
  }
  return reply;
}

Reply Codec::parse_binary_multiget(const Request& request, const uint64_t* multi, const char* data,
                                   size_t size) const {
  Reply reply;
  uint32_t next = 0;
  size_t at = 0;
  for (;;) {
    if (size - at < kHeader) return {};
    const char* packet = data + at;
    const size_t total = kHeader + load32(packet + 8);
    if (size - at < total) return {0, at + total, Verdict::kOk};
    const auto opcode = static_cast<uint8_t>(packet[1]);
    if (static_cast<uint8_t>(packet[0]) != kResponseMagic ||
        (opcode != kGetKQ && opcode != kNoop)) {
      return {at + total, 0, Verdict::kMalformed};
    }
    at += total;
    if (opcode == kNoop) {
      reply.consumed = at;
      reply.misses = request.width - reply.hits;
      if (load32(packet + 12) != request.opaque) reply.verdict = Verdict::kMismatch;
      return reply;
    }
    const size_t extras = static_cast<uint8_t>(packet[4]);
    const size_t key_size = load16(packet + 2);
    const std::string_view key(packet + kHeader + extras, key_size);
    while (next < request.width && !keys_.is(key, multi[next]))
      ++next;
    if (load16(packet + 6) != 0) {
      reply.verdict = Verdict::kError;
    } else if (next == request.width) {
      reply.verdict = Verdict::kMismatch;
    } else {
      ++reply.hits;
      const char* value = packet + kHeader + extras + key_size;
      if (check_value(multi[next], value, total - kHeader - extras - key_size) != Verdict::kOk) {
        reply.verdict = Verdict::kMismatch;
      }
      ++next;
    }
  }
}

}  // namespace loadgen
