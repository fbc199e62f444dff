#include "lockcached/protocol/binary_protocol.h"

#include <endian.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>

#include <glog/logging.h>

#include "lockcached/core/verbosity.h"
#include "lockcached/protocol/text_parser.h"
#include "lockcached/store/store.h"
#include "lockcached/version.h"

namespace lockcached::protocol {
namespace {

using namespace binary;

uint32_t read_be32(std::string_view bytes, size_t at) {
  uint32_t value;
  std::memcpy(&value, bytes.data() + at, 4);
  return be32toh(value);
}

uint64_t read_be64(std::string_view bytes, size_t at) {
  uint64_t value;
  std::memcpy(&value, bytes.data() + at, 8);
  return be64toh(value);
}

// Binary exptimes are unsigned 32-bit; the memcached rules then apply.
int64_t exptime_at(std::string_view extras, size_t at) {
  return read_be32(extras, at);
}

constexpr uint32_t kNoAutoCreate = 0xffffffff;

bool is_sasl(uint8_t opcode) {
  return opcode == kSaslListMechs || opcode == kSaslAuth || opcode == kSaslStep;
}

// kInvalid closes the connection, as memcached does; kUnknown and kRefused
// are answered (Unknown command, Invalid arguments) and the body skipped.
enum class Shape : uint8_t { kUnknown, kValid, kInvalid, kRefused };

enum class KeyRule : uint8_t { kRequired, kForbidden, kOptional };

// What the body holds after the extras and the key.
enum class BodyRule : uint8_t {
  kNothing,
  kValue,          // a value of any length, read straight into an item
  kNonEmptyValue,  // the same, but an empty one is refused (RaU)
  kSaslMessage,    // at most kMaxSaslMessage bytes, buffered
};

// The longest value a body rule allows. A SASL message past the bound
// cannot be a user:password of ours.
constexpr uint32_t longest_value(BodyRule body) {
  switch (body) {
    case BodyRule::kNothing:
      return 0;
    case BodyRule::kSaslMessage:
      return BinaryProtocol::kMaxSaslMessage;
    default:
      return UINT32_MAX;
  }
}

// What may precede the value: the extras lengths allowed (all below 32)
// and the key rule, as one set of bits, so that checking a request is one
// test: bit 2 * length + 1 allows that length with a key, 2 * length
// without one.
constexpr uint64_t fixed_part(std::initializer_list<uint8_t> extras,
                              KeyRule key = KeyRule::kRequired) {
  uint64_t allowed = 0;
  for (uint8_t length : extras) {
    if (key != KeyRule::kRequired) allowed |= uint64_t{1} << (2 * length);
    if (key != KeyRule::kForbidden) allowed |= uint64_t{1} << (2 * length + 1);
  }
  return allowed;
}

std::string_view status_text(uint16_t status) {
  switch (status) {
    case kNotFound:
      return "Not found";
    case kExists:
      return "Data exists for key.";
    case kTooLarge:
      return "Too large.";
    case kInvalid:
      return "Invalid arguments";
    case kNotStored:
      return "Not stored.";
    case kNonNumeric:
      return "Non-numeric server-side value for incr or decr";
    case kLocked:
      return "Locked";
    case kNotLocked:
      return "Not locked";
    case kUnknownCommand:
      return "Unknown command";
    case kOutOfMemory:
      return "Out of memory";
    case kTemporaryFailure:
      return kReadOnlyReason;
    case kAuthError:
      return "Auth failure.";
    default:
      return "Unhandled error";
  }
}

// What a storage request's result is answered. A refused add found the
// key, a refused replace (or RaU) did not, as memcached words them.
uint16_t store_status(store::StoreStatus status, store::StoreCommand command) {
  switch (status) {
    case store::StoreStatus::kStored:
      return kSuccess;
    case store::StoreStatus::kExists:
      return kExists;
    case store::StoreStatus::kNotFound:
      return kNotFound;
    case store::StoreStatus::kNotStored:
      if (command == store::StoreCommand::kAdd) return kExists;
      if (command == store::StoreCommand::kReplace) return kNotFound;
      return kNotStored;
    case store::StoreStatus::kLocked:
      return kLocked;
    case store::StoreStatus::kNotLocked:
      return kNotLocked;
    case store::StoreStatus::kNoMemory:
      return kOutOfMemory;
  }
  return kOutOfMemory;
}

// Lock and LaG: an item that is not there cannot be locked.
uint16_t lock_status(store::LockStatus status) {
  switch (status) {
    case store::LockStatus::kOk:
      return kSuccess;
    case store::LockStatus::kLocked:
      return kLocked;
    case store::LockStatus::kNotFound:
    case store::LockStatus::kNotLocked:
      return kNotFound;
  }
  return kNotFound;
}

// Unlock: a lock another connection holds is not this one's to end.
uint16_t unlock_status(store::LockStatus status) {
  switch (status) {
    case store::LockStatus::kOk:
      return kSuccess;
    case store::LockStatus::kNotFound:
      return kNotFound;
    case store::LockStatus::kLocked:
    case store::LockStatus::kNotLocked:
      return kNotLocked;
  }
  return kNotLocked;
}

void append_header(OutputQueue& out, const Header& request, uint16_t status, size_t extras_length,
                   size_t key_length, size_t body_length, uint64_t cas) {
  Header reply{.magic = kResponseMagic,
               .opcode = request.opcode,
               .key_length = static_cast<uint16_t>(key_length),
               .extras_length = static_cast<uint8_t>(extras_length),
               .data_type = 0,
               .status = status,
               .body_length = static_cast<uint32_t>(body_length),
               .opaque = request.opaque,
               .cas = cas};
  char* at = out.reserve(kHeaderSize);
  encode_header(reply, at);
  out.commit(at + kHeaderSize);
}

}  // namespace

// What consume() and the handlers need to know of an opcode, in one row:
// adding an opcode is adding its row.
struct BinaryProtocol::OpInfo {
  using Handler = void (BinaryProtocol::*)(const Request&, OutputQueue&);
  Handler handler = nullptr;  // null: not an opcode of ours (Unknown command)
  // The sizes allowed, as memcached checks them before doing anything; a
  // value-carrying opcode only has what precedes the value checked.
  uint64_t fixed = fixed_part({0});
  BodyRule body = BodyRule::kNothing;
  Shape malformed = Shape::kInvalid;  // what a request of another shape gets
  bool quiet = false;                 // a success goes unanswered
  bool with_key = false;              // a hit, or a miss, is answered with the key
  // Deny by default: a replica refuses whatever is not marked as a read.
  bool writes = true;
  store::StoreCommand store = store::StoreCommand::kSet;  // what a value is stored by

  constexpr bool carries_value() const {
    return body == BodyRule::kValue || body == BodyRule::kNonEmptyValue;
  }
  Shape check_shape(const Header& h) const;
  static constexpr std::array<OpInfo, 256> table();
};

// memcached's opcodes and the locking extension's (binary_wire.h).
constexpr std::array<BinaryProtocol::OpInfo, 256> BinaryProtocol::OpInfo::table() {
  using P = BinaryProtocol;
  using store::StoreCommand;
  std::array<OpInfo, 256> ops{};
  // `row` for `opcode` and for its quiet twin.
  auto twins = [&ops](uint8_t opcode, uint8_t quiet, OpInfo row) {
    ops[opcode] = row;
    row.quiet = true;
    ops[quiet] = row;
  };
  constexpr uint64_t kBare = fixed_part({0}, KeyRule::kForbidden);  // no extras, no key
  // The opcodes whose value goes into an item: after flags and exptime, or
  // straight after the key (append, prepend).
  auto storage = [](uint64_t fixed, StoreCommand store) {
    return OpInfo{
        .handler = &P::start_value, .fixed = fixed, .body = BodyRule::kValue, .store = store};
  };
  constexpr uint64_t kFlagsExptime = fixed_part({8});  // and a key
  twins(kGet, kGetQ, {.handler = &P::get, .writes = false});
  twins(kGetK, kGetKQ, {.handler = &P::get, .with_key = true, .writes = false});
  twins(kSet, kSetQ, storage(kFlagsExptime, StoreCommand::kSet));
  twins(kAdd, kAddQ, storage(kFlagsExptime, StoreCommand::kAdd));
  twins(kReplace, kReplaceQ, storage(kFlagsExptime, StoreCommand::kReplace));
  twins(kAppend, kAppendQ, storage(fixed_part({0}), StoreCommand::kAppend));
  twins(kPrepend, kPrependQ, storage(fixed_part({0}), StoreCommand::kPrepend));
  twins(kDelete, kDeleteQ, {.handler = &P::remove});
  twins(kIncrement, kIncrementQ, {.handler = &P::arith, .fixed = fixed_part({20})});
  twins(kDecrement, kDecrementQ, {.handler = &P::arith, .fixed = fixed_part({20})});
  twins(kQuit, kQuitQ, {.handler = &P::quit, .fixed = kBare, .writes = false});
  twins(kFlush, kFlushQ, {.handler = &P::flush, .fixed = fixed_part({0, 4}, KeyRule::kForbidden)});
  ops[kNoop] = {.handler = &P::noop, .fixed = kBare, .writes = false};
  ops[kVersion] = {.handler = &P::version, .fixed = kBare, .writes = false};
  ops[kStat] = {.handler = &P::stat, .fixed = fixed_part({0}, KeyRule::kOptional), .writes = false};
  // memcached answers a malformed one "Unknown command" and goes on.
  ops[kVerbosity] = {.handler = &P::verbosity,
                     .fixed = fixed_part({4}, KeyRule::kForbidden),
                     .malformed = Shape::kUnknown,
                     .writes = false};
  ops[kTouch] = {.handler = &P::touch, .fixed = fixed_part({4})};
  twins(kGat, kGatQ, {.handler = &P::touch, .fixed = fixed_part({4})});
  twins(kGatK, kGatKQ, {.handler = &P::touch, .fixed = fixed_part({4}), .with_key = true});
  ops[kSaslListMechs] = {.handler = &P::sasl, .fixed = kBare, .writes = false};
  ops[kSaslAuth] = {.handler = &P::sasl, .body = BodyRule::kSaslMessage, .writes = false};
  ops[kSaslStep] = ops[kSaslAuth];
  // The locking extension's: a malformed one is refused (0x04) and the
  // connection goes on, as yrmcds does; closing it, as memcached does for
  // its own opcodes, would also end every lock the connection holds.
  constexpr Shape kLockMalformed = Shape::kRefused;
  twins(kLock, kLockQ, {.handler = &P::lock, .malformed = kLockMalformed});
  twins(kUnlock, kUnlockQ, {.handler = &P::unlock, .malformed = kLockMalformed});
  twins(kUnlockAll, kUnlockAllQ,
        {.handler = &P::unlock_all, .fixed = kBare, .malformed = kLockMalformed});
  twins(kLaG, kLaGQ,
        {.handler = &P::lock_and_get, .fixed = fixed_part({0, 4}), .malformed = kLockMalformed});
  twins(kLaGK, kLaGKQ,
        {.handler = &P::lock_and_get,
         .fixed = fixed_part({0, 4}),
         .malformed = kLockMalformed,
         .with_key = true});
  // Replaces and unlocks (a refused one leaves the item be). locking.md:
  // RaU MUST have a value; yrmcds refuses one without.
  OpInfo replace_and_unlock = storage(kFlagsExptime, StoreCommand::kReplace);
  replace_and_unlock.body = BodyRule::kNonEmptyValue;
  replace_and_unlock.malformed = kLockMalformed;
  twins(kRaU, kRaUQ, replace_and_unlock);
  ops[kKeys] = {.handler = &P::keys, .fixed = fixed_part({0}, KeyRule::kOptional), .writes = false};
  return ops;
}

const BinaryProtocol::OpInfo& BinaryProtocol::op(uint8_t opcode) {
  static constexpr std::array<OpInfo, 256> kOps = OpInfo::table();
  return kOps[opcode];
}

Shape BinaryProtocol::OpInfo::check_shape(const Header& h) const {
  if (handler == nullptr) return Shape::kUnknown;
  unsigned bit = 2u * h.extras_length + (h.key_length != 0 ? 1 : 0);
  uint32_t fixed_length = uint32_t{h.extras_length} + h.key_length;
  if (bit >= 64 || (fixed >> bit & 1) == 0 || h.body_length < fixed_length) return malformed;
  uint32_t value = h.body_length - fixed_length;
  if (value == 0 && body == BodyRule::kNonEmptyValue) return Shape::kRefused;
  return value <= longest_value(body) ? Shape::kValid : malformed;
}

size_t BinaryProtocol::consume(std::string_view input, OutputQueue& out) {
  budget_.start_turn();
  ReadAhead read_ahead(core_);  // this read's: nothing kept between reads
  // Two requests at least, or nothing to look ahead of.
  bool looked_ahead = state_ == State::kHeader && input.size() >= 2 * kHeaderSize;
  if (looked_ahead) note_gets(input, read_ahead);
  size_t pos = 0;
  while (pos < input.size() && !close_ && !has_unfinished_work()) {
    if (state_ == State::kValue) {
      pos += fill_value(input.substr(pos), out);
      continue;
    }
    if (state_ == State::kSwallow) {
      size_t skip = std::min(swallow_left_, input.size() - pos);
      pos += skip;
      swallow_left_ -= skip;
      if (swallow_left_ == 0) state_ = State::kHeader;
      continue;
    }
    std::string_view rest = input.substr(pos);
    if (rest.size() < kHeaderSize) break;
    // Counted before it is known to be complete: an incomplete one ends
    // the turn anyway.
    if (!budget_.take(out)) break;
    Header header = decode_header(rest.data());
    if (header.magic != kRequestMagic) {  // not a request: nothing to recover
      close_ = true;
      break;
    }
    const OpInfo& info = op(header.opcode);
    Shape shape = info.check_shape(header);
    // Without an auth file the SASL opcodes are unknown, as in memcached
    // without -S, whatever their body (the bound on a SASL message is ours).
    if (is_sasl(header.opcode) && !core_.auth_enabled()) shape = Shape::kUnknown;
    if (header.key_length > store::kMaxKeyLength) {
      shape = info.malformed == Shape::kRefused ? Shape::kRefused : Shape::kInvalid;
    }
    if (shape == Shape::kInvalid) {
      protocol_error(out, header);
      break;
    }
    // memcached's -S: before authenticating, only the SASL opcodes are
    // served; everything else, quiet opcodes included, is answered 0x20.
    if (core_.auth_required() && !is_sasl(header.opcode)) [[unlikely]] {
      refuse(out, header, kAuthError);
      pos += kHeaderSize;
      continue;
    }
    if (shape == Shape::kUnknown || shape == Shape::kRefused) {
      refuse(out, header, shape == Shape::kUnknown ? kUnknownCommand : kInvalid);
      pos += kHeaderSize;
      continue;
    }
    if (core_.read_only() && info.writes) {
      // Answered even for a quiet opcode: a write is never lost silently.
      refuse(out, header, kTemporaryFailure);
      pos += kHeaderSize;
      continue;
    }
    // Everything but the value is small (at most 255 + 250 bytes): wait for it.
    size_t fixed = header.extras_length + header.key_length;
    bool has_value = info.carries_value();
    size_t needed = kHeaderSize + (has_value ? fixed : header.body_length);
    if (rest.size() < needed) break;
    Request request{header,
                    rest.substr(kHeaderSize, header.extras_length),
                    rest.substr(kHeaderSize + header.extras_length, header.key_length),
                    rest.substr(kHeaderSize + fixed, needed - kHeaderSize - fixed),
                    {}};
    if (looked_ahead) {
      if (const ReadAhead::Get* noted = read_ahead.running(pos)) request.key_hash = noted->hash;
    }
    pos += needed;
    if (has_value) {
      start_value(request, out);
    } else {
      dispatch(request, out);
    }
  }
  return close_ ? input.size() : pos;
}

void BinaryProtocol::note_gets(std::string_view input, ReadAhead& read_ahead) const {
  size_t pos = 0;
  for (bool first = true; input.size() - pos >= kHeaderSize && !read_ahead.full(); first = false) {
    Header header = decode_header(input.data() + pos);
    size_t end = pos + kHeaderSize + header.body_length;
    if (header.magic != kRequestMagic || end > input.size()) return;
    if (!first && op(header.opcode).handler == &BinaryProtocol::get && header.key_length != 0 &&
        size_t{header.extras_length} + header.key_length <= header.body_length) {
      read_ahead.note(pos,
                      input.substr(pos + kHeaderSize + header.extras_length, header.key_length));
    }
    pos = end;
  }
}

void BinaryProtocol::dispatch(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  // -vv: the opcode (hex, as protocol_binary.txt lists them) and the key.
  LOCKCACHED_VLOG(2) << '<' << core_.owner() << " opcode 0x" << std::hex << int{h.opcode} << std::dec
          << " key " << escape_for_log(request.key);
  (this->*op(h.opcode).handler)(request, out);
}

void BinaryProtocol::quit(const Request& request, OutputQueue& out) {
  core_.release_all_locks(core::UnlockReason::kDisconnect);  // as a text `quit` logs it
  respond_status(out, request.header, kSuccess);
  close_ = true;
}

void BinaryProtocol::noop(const Request& request, OutputQueue& out) {
  respond(out, request.header, kSuccess);
}

void BinaryProtocol::version(const Request& request, OutputQueue& out) {
  respond(out, request.header, kSuccess, {}, {}, LOCKCACHED_PROTOCOL_VERSION);
}

void BinaryProtocol::verbosity(const Request& request, OutputQueue& out) {
  core::set_log_verbosity(read_be32(request.extras, 0));
  respond(out, request.header, kSuccess);
}

void BinaryProtocol::unlock_all(const Request& request, OutputQueue& out) {
  core_.release_all_locks();
  respond_status(out, request.header, kSuccess);
}

// memcached's -X covers its dumps; this is lockcached's, refused as
// memcached's binary protocol refuses a disabled flush.
void BinaryProtocol::keys(const Request& request, OutputQueue& out) {
  if (!core_.policy().dumps) return respond_error(out, request.header, kAuthError);
  keys_header_ = request.header;
  keys_.start(request.key);
  continue_work(out);
}

void BinaryProtocol::get(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  const OpInfo& info = op(h.opcode);
  bool with_key = info.with_key;
  // Answered under the store's lock: no reference to the item is taken
  // unless its value is large enough to be sent from the item.
  uint64_t hash = request.key_hash ? *request.key_hash : core_.key_hash(request.key);
  bool hit = core_.read_hashed(request.key, hash, [&](const store::Item& item) {
    respond_item(out, h, item, with_key, true);
  });
  if (!hit && !info.quiet) respond_miss(out, request);
}

void BinaryProtocol::touch(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  const OpInfo& info = op(h.opcode);
  store::ItemRef item = core_.get_and_touch(request.key, exptime_at(request.extras, 0));
  core_.detail_get(request.key, static_cast<bool>(item));  // a touch too, as memcached
  if (item) return respond_item(out, h, *item, info.with_key, h.opcode != kTouch);
  if (!info.quiet) respond_miss(out, request);
}

void BinaryProtocol::remove(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  core_.detail_delete(request.key);
  switch (core_.remove(request.key, h.cas)) {
    case store::DeleteStatus::kDeleted:
      return respond_status(out, h, kSuccess);
    case store::DeleteStatus::kNotFound:
      return respond_error(out, h, kNotFound);
    case store::DeleteStatus::kExists:
      return respond_error(out, h, kExists);
    case store::DeleteStatus::kLocked:
      return respond_error(out, h, kLocked);
  }
}

void BinaryProtocol::arith(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  store::ArithRequest arith;
  arith.increment = h.opcode == kIncrement || h.opcode == kIncrementQ;
  arith.delta = read_be64(request.extras, 0);
  arith.initial = read_be64(request.extras, 8);
  uint32_t exptime = read_be32(request.extras, 16);
  arith.compare_cas = h.cas;
  arith.create = exptime != kNoAutoCreate;
  arith.exptime = core_.rel_time(exptime);
  store::ArithResult result = core_.arith(request.key, arith);
  switch (result.status) {
    case store::ArithStatus::kOk: {
      if (op(h.opcode).quiet) return;
      uint64_t value = htobe64(result.value);
      return respond(out, h, kSuccess, {}, {}, {reinterpret_cast<char*>(&value), 8}, result.cas);
    }
    case store::ArithStatus::kNotFound:
      return respond_error(out, h, kNotFound);
    case store::ArithStatus::kNonNumeric:
      return respond_error(out, h, kNonNumeric);
    case store::ArithStatus::kExists:
      return respond_error(out, h, kExists);
    case store::ArithStatus::kLocked:
      return respond_error(out, h, kLocked);
    case store::ArithStatus::kNoMemory:
      return respond_error(out, h, kOutOfMemory);
  }
}

void BinaryProtocol::flush(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  // memcached's -F: its binary refusal, not counted in cmd_flush.
  if (!core_.policy().flush_all) return respond_error(out, h, kAuthError);
  core_.flush_all(request.extras.empty() ? 0 : exptime_at(request.extras, 0));
  respond_status(out, h, kSuccess);
}

// One reply per statistic, the name as key, then an empty reply as the end.
void BinaryProtocol::stat(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  core::StatList list;
  if (request.key.empty()) {
    core_.collect_stats(core::StatsGroup::kGeneral, list);
  } else if (request.key == "settings") {
    core_.collect_stats(core::StatsGroup::kSettings, list);
  } else if (request.key == "replication") {
    core_.collect_stats(core::StatsGroup::kReplication, list);
  } else if (request.key == "cluster") {
    core_.collect_stats(core::StatsGroup::kCluster, list);
  } else if (request.key == "reset") {
    core_.reset_stats();
  } else if (request.key == "items") {
    core_.collect_stats(core::StatsGroup::kItems, list);
  } else if (request.key == "slabs") {
    core_.collect_stats(core::StatsGroup::kSlabs, list);
  } else if (request.key == "sizes") {
    core_.collect_stats(core::StatsGroup::kSizes, list);
  } else if (request.key.starts_with("detail ")) {
    return stat_detail(request.key.substr(7), h, out);
  } else {
    return respond_error(out, h, kNotFound);
  }
  for (const auto& [name, value] : list)
    respond(out, h, kSuccess, {}, name, value);
  respond(out, h, kSuccess);
}

// "detail on|off|dump", as memcached: on and off answer the end alone;
// dump sends the text command's whole reply as one statistic, "detailed".
void BinaryProtocol::stat_detail(std::string_view what, const Header& h, OutputQueue& out) {
  core::PrefixStats* prefixes = core_.prefix_stats();
  if (prefixes == nullptr || (what != "on" && what != "off" && what != "dump")) {
    return respond_error(out, h, kNotFound);
  }
  if (what == "dump") {
    respond(out, h, kSuccess, {}, "detailed", prefixes->dump_text());
  } else {
    prefixes->set_enabled(what == "on");
  }
  respond(out, h, kSuccess);
}

void BinaryProtocol::lock(const Request& request, OutputQueue& out) {
  respond_status(out, request.header, lock_status(core_.lock(request.key)));
}

void BinaryProtocol::unlock(const Request& request, OutputQueue& out) {
  respond_status(out, request.header, unlock_status(core_.unlock(request.key)));
}

// LaG answers like Get (LaGK like GetK). Its quiet forms still report a
// miss: a client that asked for a lock must learn that it did not get one.
void BinaryProtocol::lock_and_get(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  int64_t exptime = request.extras.empty() ? 0 : exptime_at(request.extras, 0);
  store::LockStatus locked;
  store::ItemRef item =
      core_.lock_and_get(request.key, request.extras.empty() ? nullptr : &exptime, &locked);
  uint16_t status = lock_status(locked);
  if (status == kSuccess) return respond_item(out, h, *item, op(h.opcode).with_key, true);
  if (status == kNotFound) return respond_miss(out, request);
  respond_error(out, h, status);
}

// SASL PLAIN as memcached's -S answers it: LIST_MECHS "PLAIN", AUTH with
// the mechanism as key and the PLAIN message as value, "Authenticated" or
// 0x20. PLAIN has no steps, so a STEP is a failed attempt. Without an auth
// file these opcodes never come here (consume: unknown).
void BinaryProtocol::sasl(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  if (h.opcode == kSaslListMechs) return respond(out, h, kSuccess, {}, {}, "PLAIN");
  std::string_view user;
  std::string_view password;
  bool well_formed = h.opcode == kSaslAuth && request.key == "PLAIN" &&
                     core::parse_sasl_plain(request.value, &user, &password);
  core::AuthResult result =
      well_formed ? core_.authenticate(user, password) : core_.auth_malformed();
  if (result == core::AuthResult::kAccepted) {
    return respond(out, h, kSuccess, {}, {}, "Authenticated");
  }
  respond_error(out, h, kAuthError);
  // The third failure closes the connection, after its answer.
  if (result == core::AuthResult::kLockedOut) close_ = true;
}

void BinaryProtocol::refuse(OutputQueue& out, const Header& header, uint16_t status) {
  respond_error(out, header, status);
  // Skip the body without buffering it, however large it claims to be.
  swallow_left_ = header.body_length;
  state_ = State::kSwallow;
}

void BinaryProtocol::continue_work(OutputQueue& out) {
  if (budget_.yielded()) return budget_.resume();
  bool done = keys_.step(
      core_, [this, &out](std::string_view key) { respond(out, keys_header_, kSuccess, {}, key); });
  if (done) respond(out, keys_header_, kSuccess);
}

void BinaryProtocol::start_value(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  size_t value_length = h.body_length - h.extras_length - h.key_length;
  uint32_t flags = request.extras.empty() ? 0 : read_be32(request.extras, 0);
  int64_t exptime = request.extras.empty() ? 0 : exptime_at(request.extras, 4);
  core_.detail_set(request.key);
  store::ItemRef item = core_.allocate(request.key, flags, exptime, value_length);
  if (!item) {
    respond_error(out, h, value_length > core_.max_item_size() ? kTooLarge : kOutOfMemory);
    core_.drop_stale(op(h.opcode).store, request.key);
    swallow_left_ = value_length;
    state_ = swallow_left_ > 0 ? State::kSwallow : State::kHeader;
    return;
  }
  value_header_ = h;
  value_item_ = std::move(item);
  value_filled_ = 0;
  state_ = State::kValue;
  if (value_length == 0) finish_value(out);
}

size_t BinaryProtocol::fill_value(std::string_view input, OutputQueue& out) {
  size_t take = std::min(size_t{value_item_->value_len} - value_filled_, input.size());
  std::memcpy(value_item_->value() + value_filled_, input.data(), take);
  value_filled_ += take;
  if (value_filled_ == value_item_->value_len) finish_value(out);
  return take;
}

void BinaryProtocol::finish_value(OutputQueue& out) {
  state_ = State::kHeader;
  store::ItemRef item = std::move(value_item_);
  const Header& h = value_header_;
  if (h.opcode == kRaU || h.opcode == kRaUQ) {
    return respond_store(out, h, core_.replace_and_unlock(item, h.cas));
  }
  store::StoreCommand command = op(h.opcode).store;
  // memcached treats any storage request that carries a CAS as a cas;
  // under its -C the item takes no CAS, so the request's goes unseen.
  uint64_t cas = core_.cas_enabled() ? h.cas : 0;
  if (cas != 0 && command != store::StoreCommand::kAppend &&
      command != store::StoreCommand::kPrepend) {
    command = store::StoreCommand::kCas;
  }
  respond_store(out, h, core_.store(command, item, cas));
}

void BinaryProtocol::respond_store(OutputQueue& out, const Header& h, store::StoreResult result) {
  const OpInfo& info = op(h.opcode);
  uint16_t status = store_status(result.status, info.store);
  if (status != kSuccess) return respond_error(out, h, status);
  if (!info.quiet) respond(out, h, kSuccess, {}, {}, {}, result.cas);
}

void BinaryProtocol::respond_status(OutputQueue& out, const Header& h, uint16_t status) {
  if (status != kSuccess) return respond_error(out, h, status);
  if (!op(h.opcode).quiet) respond(out, h, kSuccess);
}

// memcached answers a GetK miss with the key instead of a message.
void BinaryProtocol::respond_miss(OutputQueue& out, const Request& request) {
  if (op(request.header.opcode).with_key)
    return respond(out, request.header, kNotFound, {}, request.key);
  respond_error(out, request.header, kNotFound);
}

void BinaryProtocol::respond(OutputQueue& out, const Header& request, uint16_t status,
                             std::string_view extras, std::string_view key, std::string_view value,
                             uint64_t cas) {
  append_header(out, request, status, extras.size(), key.size(),
                extras.size() + key.size() + value.size(), cas);
  out.append(extras);
  out.append(key);
  out.append(value);
}

void BinaryProtocol::respond_item(OutputQueue& out, const Header& request, const store::Item& item,
                                  bool with_key, bool with_value) {
  uint32_t flags = htobe32(item.flags);
  std::string_view key = with_key ? item.key() : std::string_view();
  size_t value_length = with_value ? item.value_len : 0;
  append_header(out, request, kSuccess, 4, key.size(), 4 + key.size() + value_length,
                core_.cas_of(item));
  out.append({reinterpret_cast<const char*>(&flags), 4});
  out.append(key);
  // The value is sent from the item itself, not copied.
  if (value_length > 0) {
    out.append_item(const_cast<store::Item*>(&item), item.value(), value_length);
  }
}

void BinaryProtocol::respond_error(OutputQueue& out, const Header& request, uint16_t status) {
  respond(out, request, status, {}, {}, status_text(status));
}

void BinaryProtocol::protocol_error(OutputQueue& out, const Header& request) {
  respond_error(out, request, kInvalid);
  close_ = true;
}

}  // namespace lockcached::protocol
