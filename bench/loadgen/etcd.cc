// etcd's v3 lock API over HTTP/1.1 (lock_apis.h).
#include <charconv>
#include <cstdio>
#include <string_view>

#include "lock_apis.h"

namespace loadgen {
namespace {

constexpr char kLeaseGrant[] = "{\"TTL\":30}";  // seconds: longer than any run
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr size_t kMaxBody = 1024;

// A request body built on the stack: no allocation per request.
struct Body {
  char data[kMaxBody];
  size_t size = 0;

  void add(std::string_view text) {
    const size_t n = std::min(text.size(), kMaxBody - size);
    text.copy(data + size, n);
    size += n;
  }
  void add_base64(std::string_view bytes) {
    for (size_t i = 0; i < bytes.size() && size + 4 <= kMaxBody; i += 3) {
      uint32_t group = static_cast<uint8_t>(bytes[i]) << 16;
      if (i + 1 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 1]) << 8;
      if (i + 2 < bytes.size()) group |= static_cast<uint8_t>(bytes[i + 2]);
      data[size++] = kBase64[group >> 18];
      data[size++] = kBase64[(group >> 12) & 63];
      data[size++] = i + 1 < bytes.size() ? kBase64[(group >> 6) & 63] : '=';
      data[size++] = i + 2 < bytes.size() ? kBase64[group & 63] : '=';
    }
  }
  std::string_view view() const { return {data, size}; }
};

void post(std::string_view path, std::string_view body, std::string_view host, Buffer& out) {
  char head[512];
  const int n = std::snprintf(head, sizeof head,
                              "POST %.*s HTTP/1.1\r\nHost: %.*s\r\n"
                              "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                              static_cast<int>(path.size()), path.data(),
                              static_cast<int>(host.size()), host.data(), body.size());
  out.append(head, static_cast<size_t>(n));
  out.append(body.data(), body.size());
}

// The Content-Length header's value, whatever its case.
bool content_length(std::string_view head, size_t& length) {
  constexpr std::string_view kName = "\r\ncontent-length:";
  for (size_t at = head.find("\r\n"); at != std::string_view::npos;
       at = head.find("\r\n", at + 2)) {
    const std::string_view line = head.substr(at, kName.size());
    if (line.size() < kName.size()) return false;
    bool same = true;
    for (size_t i = 0; i < kName.size() && same; ++i)
      same = (line[i] | 0x20) == (kName[i] | 0x20);  // ASCII letters, ':' and CR LF alike
    if (!same) continue;
    const char* first = head.data() + at + kName.size();
    while (first < head.data() + head.size() && *first == ' ')
      ++first;
    const auto [end, error] = std::from_chars(first, head.data() + head.size(), length);
    return error == std::errc() && end != first;
  }
  return false;
}

// The string value of `"field":"..."` in a JSON body; empty when absent.
std::string_view string_field(std::string_view body, std::string_view field) {
  const size_t at = body.find(field);
  if (at == std::string_view::npos) return {};
  const size_t first = at + field.size();
  const size_t end = body.find('"', first);
  return end == std::string_view::npos ? std::string_view() : body.substr(first, end - first);
}

}  // namespace

void write_etcd(Op op, std::string_view name, const Session& session, std::string_view host,
                Buffer& out) {
  Body body;
  switch (op) {
    case Op::kSetup:
      post("/v3/lease/grant", kLeaseGrant, host, out);
      return;
    case Op::kSvcLock:
      body.add("{\"name\":\"");
      body.add_base64(name);
      body.add("\",\"lease\":\"");
      body.add(session.setup);
      body.add("\"}");
      post("/v3/lock/lock", body.view(), host, out);
      return;
    case Op::kSvcUnlock:
      body.add("{\"key\":\"");
      body.add(session.held);
      body.add("\"}");
      post("/v3/lock/unlock", body.view(), host, out);
      return;
    default:
      return;  // Options::check allows no other request with --protocol=etcd
  }
}

// One HTTP/1.1 response with a Content-Length (etcd's gateway sends one for
// these small bodies): 200 and, for the lease and the lock, the field kept.
Reply parse_etcd(Op op, const char* data, size_t size) {
  const std::string_view text(data, size);
  const size_t head_end = text.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return {};
  const std::string_view head = text.substr(0, head_end);
  size_t length = 0;
  if (!content_length(head, length)) return {head_end + 4, 0, Verdict::kMalformed};
  const size_t total = head_end + 4 + length;
  if (size < total) return {0, total, Verdict::kOk};
  Reply reply{total, 0, Verdict::kOk};
  if (!head.starts_with("HTTP/1.1 200 ")) {
    reply.verdict = Verdict::kError;
    return reply;
  }
  if (op != Op::kSetup && op != Op::kSvcLock) return reply;
  reply.token = string_field(text.substr(head_end + 4, length),
                             op == Op::kSetup ? "\"ID\":\"" : "\"key\":\"");
  if (reply.token.empty()) reply.verdict = Verdict::kError;
  return reply;
}

}  // namespace loadgen
