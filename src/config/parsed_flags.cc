#include "lockcached/config/parsed_flags.h"

#include <charconv>

#include "lockcached/config/flags.h"

namespace lockcached::config {
namespace {

void parse_listen(ParsedFlags* parsed) {
  std::string error;
  if (!server::parse_listen_addresses(FLAGS_listen, &parsed->listen, &error)) {
    parsed->listen.clear();
    parsed->problems["listen"] = error;
  }
}

void parse_cluster(ParsedFlags* parsed) {
  if (FLAGS_cluster.empty()) return;
  std::string error;
  parsed->cluster = consensus::parse_members(FLAGS_cluster, &error);
  if (parsed->cluster.empty()) parsed->problems["cluster"] = error;
}

void parse_unix_socket_mask(ParsedFlags* parsed) {
  if (std::optional<unsigned> mask = parse_octal_mask(FLAGS_unix_socket_mask)) {
    parsed->unix_socket_mask = *mask;
  } else {
    parsed->problems["unix_socket_mask"] = "must be octal permission bits, 0 to 0777";
  }
}

tls::Settings tls_settings() {
  tls::Settings tls;
  tls.cert_file = FLAGS_tls_cert_file;
  tls.key_file = FLAGS_tls_key_file;
  tls.ca_file = FLAGS_tls_ca_file;
  tls.verify_client = FLAGS_tls_verify_client;
  tls.min_version = FLAGS_tls_min_version == "1.3" ? tls::kTls13 : tls::kTls12;
  tls.ciphers = FLAGS_tls_ciphers;
  return tls;
}

}  // namespace

std::string ParsedFlags::problem_of(std::string_view flag) const {
  auto found = problems.find(flag);
  return found == problems.end() ? "" : found->second;
}

ParsedFlags parse_flags() {
  ParsedFlags parsed;
  parse_listen(&parsed);
  parse_cluster(&parsed);
  parse_unix_socket_mask(&parsed);
  parsed.tls = tls_settings();
  return parsed;
}

std::optional<unsigned> parse_octal_mask(std::string_view text) {
  unsigned mask = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), mask, 8);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || mask > 0777) {
    return std::nullopt;
  }
  return mask;
}

}  // namespace lockcached::config
