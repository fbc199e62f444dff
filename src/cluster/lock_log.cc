#include "lockcached/cluster/lock_log.h"

namespace lockcached::cluster {
namespace {

// Little-endian integers; strings as a 32-bit length and the bytes.
class Writer {
 public:
  void u8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void u64(uint64_t value) {
    for (int i = 0; i < 8; ++i)
      out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
  void i64(int64_t value) { u64(static_cast<uint64_t>(value)); }
  void str(std::string_view text) {
    uint64_t size = text.size();
    for (int i = 0; i < 4; ++i)
      out_.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
    out_.append(text);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool u8(uint8_t* value) {
    if (in_.empty()) return fail();
    *value = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool u64(uint64_t* value) { return integer(8, value); }
  bool i64(int64_t* value) {
    uint64_t raw;
    if (!u64(&raw)) return false;
    *value = static_cast<int64_t>(raw);
    return true;
  }
  bool flag(bool* value) {
    uint8_t raw;
    if (!u8(&raw) || raw > 1) return fail();
    *value = raw == 1;
    return true;
  }
  bool str(std::string* text) {
    uint64_t size;
    if (!integer(4, &size) || in_.size() < size) return fail();
    text->assign(in_.substr(0, size));
    in_.remove_prefix(size);
    return true;
  }
  bool done() const { return ok_ && in_.empty(); }

 private:
  bool integer(int bytes, uint64_t* value) {
    if (in_.size() < static_cast<size_t>(bytes)) return fail();
    *value = 0;
    for (int i = bytes - 1; i >= 0; --i)
      *value = (*value << 8) | static_cast<unsigned char>(in_[i]);
    in_.remove_prefix(bytes);
    return true;
  }
  bool fail() {
    ok_ = false;
    return false;
  }

  std::string_view in_;
  bool ok_ = true;
};

// A change of format 2 ends, for kTermStart, with the leader's limits and
// its grace floor; format 3 adds its TLS lock address; format 1 has none of
// them.
constexpr uint8_t kChangeFormatWithoutLimits = 1;
constexpr uint8_t kChangeFormatWithoutTlsAddress = 2;
constexpr uint8_t kChangeFormat = 3;
// A state of format 1 ends after its locks; format 2 adds the announcement;
// format 3 adds the limits in force, and the connections whose waits the
// locks were granted to and each waiter's (give_back_unheard_grant); format
// 4 the announced TLS lock address. Older formats decode with 0s, "" and no
// limits (the member's own stay).
constexpr uint8_t kStateFormatWithoutAnnouncement = 1;
constexpr uint8_t kStateFormatWithoutAttachments = 2;
constexpr uint8_t kStateFormatWithoutTlsAddress = 3;
constexpr uint8_t kStateFormat = 4;
constexpr uint8_t kLastKind = static_cast<uint8_t>(locks::ChangeKind::kTermStart);

// A session's connection, which is only ever reported: its id, and its
// address as net::address_text writes it ("" when unknown), the text the
// log has always carried. An address that does not read back is left
// unknown rather than the entry refused.
void put(Writer& w, const net::ClientInfo& client) {
  w.u64(client.id);
  w.str(client.address.known() ? net::address_text(client.address) : "");
}

bool get(Reader& r, net::ClientInfo* client) {
  std::string address;
  if (!r.u64(&client->id) || !r.str(&address)) return false;
  client->address = net::parse_endpoint(address).value_or(net::Endpoint{});
  return true;
}

void put_limits(Writer& w, const std::optional<locks::LockLimits>& limits) {
  w.u8(limits ? 1 : 0);
  if (!limits) return;
  w.u64(limits->max_locks_per_session);
  w.u64(limits->max_names);
  w.u64(limits->max_empty_sessions_in_grace);
}

bool get_limits(Reader& r, std::optional<locks::LockLimits>* limits) {
  bool present;
  if (!r.flag(&present)) return false;
  if (!present) return true;
  uint64_t per_session, names, empty_in_grace;
  if (!r.u64(&per_session) || !r.u64(&names) || !r.u64(&empty_in_grace)) return false;
  *limits = locks::LockLimits{per_session, names, empty_in_grace};
  return true;
}

}  // namespace

bool LoggedChange::operator==(const LoggedChange& other) const {
  return encode(*this) == encode(other);
}

std::string encode(const LoggedChange& logged) {
  const locks::Change& change = logged.change;
  Writer w;
  w.u8(kChangeFormat);
  w.u8(static_cast<uint8_t>(change.kind));
  w.u64(logged.origin.node);
  w.u64(logged.origin.incarnation);
  w.u64(logged.origin.request);
  w.str(change.serial);
  w.str(change.name);
  w.str(change.id);
  w.i64(change.wait_ms);
  w.i64(change.grace_ms);
  w.u64(change.detachment);
  w.u8(change.timed_out ? 1 : 0);
  put(w, change.client);
  if (change.kind == locks::ChangeKind::kTermStart) {
    put_limits(w, change.limits);
    w.i64(change.grace_floor_ms);
    w.str(change.lock_tls_address);
  }
  return w.take();
}

std::optional<LoggedChange> decode_change(std::string_view bytes) {
  Reader r(bytes);
  LoggedChange logged;
  locks::Change& change = logged.change;
  uint8_t format, kind;
  if (!r.u8(&format) || format < kChangeFormatWithoutLimits || format > kChangeFormat ||
      !r.u8(&kind) || kind < 1 || kind > kLastKind) {
    return std::nullopt;
  }
  change.kind = static_cast<locks::ChangeKind>(kind);
  bool ok = r.u64(&logged.origin.node) && r.u64(&logged.origin.incarnation) &&
            r.u64(&logged.origin.request) && r.str(&change.serial) && r.str(&change.name) &&
            r.str(&change.id) && r.i64(&change.wait_ms) && r.i64(&change.grace_ms) &&
            r.u64(&change.detachment) && r.flag(&change.timed_out) && get(r, &change.client);
  if (ok && format > kChangeFormatWithoutLimits && change.kind == locks::ChangeKind::kTermStart) {
    ok = get_limits(r, &change.limits) && r.i64(&change.grace_floor_ms) &&
         (format == kChangeFormatWithoutTlsAddress || r.str(&change.lock_tls_address));
  }
  if (!ok || !r.done()) return std::nullopt;
  return logged;
}

std::string encode(const locks::FullState& state, const Announcement& announced) {
  Writer w;
  w.u8(kStateFormat);
  w.u64(state.next_token);
  w.u64(state.next_session);
  w.u64(state.grants);
  w.u64(state.timeouts);
  w.u64(state.limit_refusals);
  put_limits(w, state.limits);
  w.u64(state.sessions.size());
  for (const auto& session : state.sessions) {
    w.str(session.id);
    w.i64(session.grace_ms);
    w.u8(session.attached ? 1 : 0);
    put(w, session.client);
    w.u64(session.detachments);
    w.u8(session.empty_in_grace ? 1 : 0);
  }
  w.u64(state.locks.size());
  for (const auto& lock : state.locks) {
    w.str(lock.name);
    w.str(lock.owner);
    w.u64(lock.token);
    w.i64(lock.acquired_ms);
    w.u64(lock.wait_attachment);
    w.u64(lock.waiters.size());
    for (const locks::FullState::Waiter& waiter : lock.waiters) {
      w.str(waiter.serial);
      w.u64(waiter.attachment);
    }
  }
  w.u64(announced.origin.node);
  w.u64(announced.origin.incarnation);
  w.u64(announced.origin.request);
  w.str(announced.lock_address);
  w.str(announced.replication_address);
  w.str(announced.lock_tls_address);
  return w.take();
}

std::optional<locks::FullState> decode_state(std::string_view bytes,
                                             std::optional<Announcement>* announced) {
  Reader r(bytes);
  locks::FullState state;
  uint8_t format;
  uint64_t sessions, locks;
  if (!r.u8(&format) || format < kStateFormatWithoutAnnouncement || format > kStateFormat ||
      !r.u64(&state.next_token) ||
      !r.u64(&state.next_session) || !r.u64(&state.grants) || !r.u64(&state.timeouts) ||
      !r.u64(&state.limit_refusals) ||
      (format > kStateFormatWithoutAttachments && !get_limits(r, &state.limits)) ||
      !r.u64(&sessions)) {
    return std::nullopt;
  }
  for (uint64_t i = 0; i < sessions; ++i) {
    locks::FullState::SessionEntry session;
    if (!r.str(&session.id) || !r.i64(&session.grace_ms) || !r.flag(&session.attached) ||
        !get(r, &session.client) || !r.u64(&session.detachments) ||
        !r.flag(&session.empty_in_grace)) {
      return std::nullopt;
    }
    state.sessions.push_back(std::move(session));
  }
  if (!r.u64(&locks)) return std::nullopt;
  for (uint64_t i = 0; i < locks; ++i) {
    locks::FullState::LockEntry lock;
    uint64_t waiters;
    if (!r.str(&lock.name) || !r.str(&lock.owner) || !r.u64(&lock.token) ||
        !r.i64(&lock.acquired_ms) ||
        (format > kStateFormatWithoutAttachments && !r.u64(&lock.wait_attachment)) ||
        !r.u64(&waiters)) {
      return std::nullopt;
    }
    for (uint64_t j = 0; j < waiters; ++j) {
      locks::FullState::Waiter waiter;
      if (!r.str(&waiter.serial) ||
          (format > kStateFormatWithoutAttachments && !r.u64(&waiter.attachment))) {
        return std::nullopt;
      }
      lock.waiters.push_back(std::move(waiter));
    }
    state.locks.push_back(std::move(lock));
  }
  std::optional<Announcement> leader;
  if (format >= kStateFormatWithoutAttachments) {
    leader.emplace();
    if (!r.u64(&leader->origin.node) || !r.u64(&leader->origin.incarnation) ||
        !r.u64(&leader->origin.request) || !r.str(&leader->lock_address) ||
        !r.str(&leader->replication_address) ||
        (format > kStateFormatWithoutTlsAddress && !r.str(&leader->lock_tls_address))) {
      return std::nullopt;
    }
  }
  if (!r.done()) return std::nullopt;
  if (announced) *announced = std::move(leader);
  return state;
}

}  // namespace lockcached::cluster
