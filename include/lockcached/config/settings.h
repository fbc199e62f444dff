// The flags as the server takes them: server::Settings, and the readers of
// the flags whose text needs parsing (the checks use them too).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockcached/consensus/raft_node.h"
#include "lockcached/core/auth.h"
#include "lockcached/server/listen_address.h"
#include "lockcached/server/settings.h"
#include "lockcached/tls/context.h"

namespace lockcached::config {

// Whether any port speaks TLS (--tls, --tls_port, --lock_tls_port).
bool tls_enabled();
// The TLS flags as tls::Context loads them.
tls::Settings tls_settings();

// --listen as memcached's -l has it; nothing (and *error) for a mistake.
std::vector<server::ListenAddress> listen_addresses(std::string* error);
// Octal permission bits (--unix_socket_mask); nullopt for anything else.
std::optional<unsigned> parse_octal_mask(std::string_view text);
// The members of --cluster, or nothing (none given, or a mistake).
std::vector<consensus::Member> cluster_members(std::string* error);
// --cluster_secret_file's first line, at least 16 bytes; true without the
// flag.
bool read_cluster_secret(std::string* secret, std::string* error);

// What config::load loaded from the files the flags name, once, at start,
// for the server to keep.
struct LoadedFiles {
  std::shared_ptr<core::Authenticator> authenticator;  // --auth_file's; nullptr: none
  std::shared_ptr<const tls::Context> tls;  // the certificates; nullptr: no port speaks TLS
};

// The server's settings from the flags, checked by config::load before.
// After logging starts: where the kernel refuses --io=uring or
// --uring_sqpoll, it warns and falls back; which backend --io=auto took,
// and why, is in Settings::io_choice.
server::Settings server_settings(const LoadedFiles& files);

}  // namespace lockcached::config
