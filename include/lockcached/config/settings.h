// The flags as the server takes them: server::Settings, from the flags,
// the flags config::load parsed (parsed_flags.h) and the files it loaded.
#pragma once

#include <memory>
#include <string>

#include "lockcached/config/parsed_flags.h"
#include "lockcached/core/auth.h"
#include "lockcached/server/settings.h"
#include "lockcached/tls/context.h"

namespace lockcached::config {

// Whether any port speaks TLS (--tls, --tls_port, --lock_tls_port).
bool tls_enabled();

// What config::load loaded from the files the flags name, once, at start,
// for the server to keep.
struct LoadedFiles {
  std::shared_ptr<core::Authenticator> authenticator;  // --auth_file's; nullptr: none
  std::shared_ptr<const tls::Context> tls;  // the certificates; nullptr: no port speaks TLS
  std::string cluster_secret;               // --cluster_secret_file's first line; empty: none
};

// The server's settings from the flags, checked and `parsed` by
// config::load before. After logging starts: where the kernel refuses
// --io=uring or --uring_sqpoll, it warns and falls back; which backend
// --io=auto took, and why, is in Settings::io_choice.
server::Settings server_settings(const ParsedFlags& parsed, const LoadedFiles& files);

}  // namespace lockcached::config
