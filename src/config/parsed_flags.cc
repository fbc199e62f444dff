#include "lockcached/config/parsed_flags.h"

#include <charconv>

#include "lockcached/config/flags.h"

namespace lockcached::config {
namespace {

// --listen's addresses from `text`; the error where it does not parse.
std::string parse_listen(const std::string& text, std::vector<server::ListenAddress>* listen) {
  std::string error;
  if (server::parse_listen_addresses(text, listen, &error)) return "";
  listen->clear();
  return error;
}

// --cluster's members from `text` (none where it is empty); the error
// where it does not parse.
std::string parse_cluster(const std::string& text, std::vector<consensus::Member>* cluster) {
  if (text.empty()) return "";
  std::string error;
  *cluster = consensus::parse_members(text, &error);
  return cluster->empty() ? error : "";
}

constexpr const char* kMaskProblem = "must be octal permission bits, 0 to 0777";

void note(ParsedFlags* parsed, const char* flag, const std::string& problem) {
  if (!problem.empty()) parsed->problems[flag] = problem;
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
  note(&parsed, "listen", parse_listen(FLAGS_listen, &parsed.listen));
  note(&parsed, "cluster", parse_cluster(FLAGS_cluster, &parsed.cluster));
  if (std::optional<unsigned> mask = parse_octal_mask(FLAGS_unix_socket_mask)) {
    parsed.unix_socket_mask = *mask;
  } else {
    note(&parsed, "unix_socket_mask", kMaskProblem);
  }
  parsed.tls = tls_settings();
  return parsed;
}

std::string parse_problem(std::string_view flag, const std::string& text) {
  if (flag == "listen") {
    std::vector<server::ListenAddress> listen;
    return parse_listen(text, &listen);
  }
  if (flag == "cluster") {
    std::vector<consensus::Member> cluster;
    return parse_cluster(text, &cluster);
  }
  if (flag == "unix_socket_mask") return parse_octal_mask(text) ? "" : kMaskProblem;
  return "";
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
