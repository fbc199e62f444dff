// What users pick instead of a lock service, spoken by the load generator
// (--mode=lockservice --protocol=etcd|redis), so that one engine, with the
// same connections and the same names, drives lockcached, etcd and Redis
// (bench/lock_compare.py). Each connection sends Op::kSetup once before the
// run, then lock + unlock cycles; what a reply hands on (a lease, a script's
// SHA1, the key of a held lock) comes back in Reply::token and waits in the
// connection's Session.
#pragma once

#include <string_view>

#include "buffer.h"
#include "protocol.h"

namespace loadgen {

// etcd.cc: etcd's v3 lock API through its JSON gateway on the client port,
// HTTP/1.1 keep-alive. kSetup: POST /v3/lease/grant {"TTL":30}, the lease
// kept; kSvcLock: POST /v3/lock/lock {"name": base64, "lease": ID}, which
// waits while another lease holds the name, the reply's "key" kept;
// kSvcUnlock: POST /v3/lock/unlock {"key": that key}.
void write_etcd(Op op, std::string_view name, const Session& session, std::string_view host,
                Buffer& out);
Reply parse_etcd(Op op, const char* data, size_t size);

// redis.cc: the single-instance Redis lock made safe against the primary's
// loss by a replica. kSetup: SCRIPT LOAD of the compare-and-delete script,
// its SHA1 kept; kSvcLock: SET name token NX PX 30000 and WAIT 1 in one
// write (a nil reply: the name is held, Reply::retry); kSvcUnlock: EVALSHA
// of the script (GET == token, then DEL) and WAIT 1. WAIT must answer 1.
void write_redis(Op op, std::string_view name, const Session& session, Buffer& out);
Reply parse_redis(Op op, const char* data, size_t size);

}  // namespace loadgen
