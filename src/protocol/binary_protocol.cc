#include "lockcached/protocol/binary_protocol.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

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

bool is_quiet(uint8_t opcode) {
  switch (opcode) {
    case kGetQ:
    case kGetKQ:
    case kSetQ:
    case kAddQ:
    case kReplaceQ:
    case kDeleteQ:
    case kIncrementQ:
    case kDecrementQ:
    case kQuitQ:
    case kFlushQ:
    case kAppendQ:
    case kPrependQ:
    case kGatQ:
    case kGatKQ:
    case kLockQ:
    case kUnlockQ:
    case kUnlockAllQ:
    case kLaGQ:
    case kLaGKQ:
    case kRaUQ:
      return true;
    default:
      return false;
  }
}

bool is_sasl(uint8_t opcode) {
  return opcode == kSaslListMechs || opcode == kSaslAuth || opcode == kSaslStep;
}

bool carries_value(uint8_t opcode) {
  switch (opcode) {
    case kSet:
    case kSetQ:
    case kAdd:
    case kAddQ:
    case kReplace:
    case kReplaceQ:
    case kAppend:
    case kAppendQ:
    case kPrepend:
    case kPrependQ:
    case kRaU:
    case kRaUQ:
      return true;
    default:
      return false;
  }
}

// kInvalid closes the connection, as memcached does; kUnknown and kRefused
// are answered (Unknown command, Invalid arguments) and the body skipped.
enum class Shape { kUnknown, kValid, kInvalid, kRefused };

// The sizes each opcode allows, as memcached checks them before doing
// anything. Value-carrying opcodes only check what precedes the value.
Shape check_shape(const Header& h) {
  uint32_t ext = h.extras_length;
  uint32_t key = h.key_length;
  uint32_t body = h.body_length;
  bool ok;
  switch (h.opcode) {
    case kGet:
    case kGetQ:
    case kGetK:
    case kGetKQ:
    case kDelete:
    case kDeleteQ:
    case kLock:
    case kLockQ:
    case kUnlock:
    case kUnlockQ:
      ok = ext == 0 && key > 0 && body == key;
      break;
    case kSet:
    case kSetQ:
    case kAdd:
    case kAddQ:
    case kReplace:
    case kReplaceQ:
      ok = ext == 8 && key > 0 && body >= key + 8;
      break;
    case kRaU:
    case kRaUQ:
      // locking.md: RaU MUST have a value; yrmcds refuses one without.
      if (ext == 8 && key > 0 && body == key + 8) return Shape::kRefused;
      ok = ext == 8 && key > 0 && body > key + 8;
      break;
    case kAppend:
    case kAppendQ:
    case kPrepend:
    case kPrependQ:
      ok = ext == 0 && key > 0 && body >= key;
      break;
    case kIncrement:
    case kIncrementQ:
    case kDecrement:
    case kDecrementQ:
      ok = ext == 20 && key > 0 && body == key + 20;
      break;
    case kQuit:
    case kQuitQ:
    case kNoop:
    case kVersion:
    case kUnlockAll:
    case kUnlockAllQ:
      ok = ext == 0 && key == 0 && body == 0;
      break;
    case kFlush:
    case kFlushQ:
      ok = key == 0 && (ext == 0 || ext == 4) && body == ext;
      break;
    case kStat:
    case kKeys:
      ok = ext == 0 && body == key;
      break;
    case kSaslListMechs:
      ok = ext == 0 && key == 0 && body == 0;
      break;
    case kSaslAuth:
    case kSaslStep:
      // A message past the bound cannot be a user:password of ours.
      ok = ext == 0 && key > 0 && body >= key &&
           body - key <= BinaryProtocol::kMaxSaslMessage;
      break;
    case kVerbosity:
      // memcached answers a malformed one "Unknown command" and goes on.
      if (ext != 4 || key != 0 || body != 4) return Shape::kUnknown;
      ok = true;
      break;
    case kTouch:
    case kGat:
    case kGatQ:
    case kGatK:
    case kGatKQ:
      ok = ext == 4 && key > 0 && body == key + 4;
      break;
    case kLaG:
    case kLaGQ:
    case kLaGK:
    case kLaGKQ:
      ok = (ext == 0 || ext == 4) && key > 0 && body == key + ext;
      break;
    default:
      return Shape::kUnknown;
  }
  return ok ? Shape::kValid : Shape::kInvalid;
}

// Everything but the reads, stat, version, noop, verbosity, quit and keys.
bool changes_the_cache(uint8_t opcode) {
  switch (opcode) {
    case kGet:
    case kGetQ:
    case kGetK:
    case kGetKQ:
    case kQuit:
    case kQuitQ:
    case kNoop:
    case kVersion:
    case kStat:
    case kVerbosity:
    case kKeys:
    case kSaslListMechs:
    case kSaslAuth:
    case kSaslStep:
      return false;
    default:
      return true;
  }
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

store::StoreCommand store_command(uint8_t opcode) {
  switch (opcode) {
    case kAdd:
    case kAddQ:
      return store::StoreCommand::kAdd;
    case kReplace:
    case kReplaceQ:
      return store::StoreCommand::kReplace;
    case kAppend:
    case kAppendQ:
      return store::StoreCommand::kAppend;
    case kPrepend:
    case kPrependQ:
      return store::StoreCommand::kPrepend;
    case kRaU:  // replaces (and unlocks); a refused one leaves the item be
    case kRaUQ:
      return store::StoreCommand::kReplace;
    default:
      return store::StoreCommand::kSet;
  }
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

size_t BinaryProtocol::consume(std::string_view input, OutputQueue& out) {
  budget_.start_turn();
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
    if (!budget_.take()) break;
    Header header = decode_header(rest.data());
    if (header.magic != kRequestMagic) {  // not a request: nothing to recover
      close_ = true;
      break;
    }
    Shape shape = check_shape(header);
    if (header.key_length > store::kMaxKeyLength || shape == Shape::kInvalid) {
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
    if (core_.read_only() && changes_the_cache(header.opcode)) {
      // Answered even for a quiet opcode: a write is never lost silently.
      refuse(out, header, kTemporaryFailure);
      pos += kHeaderSize;
      continue;
    }
    // Everything but the value is small (at most 255 + 250 bytes): wait for it.
    size_t fixed = header.extras_length + header.key_length;
    bool has_value = carries_value(header.opcode);
    size_t needed = kHeaderSize + (has_value ? fixed : header.body_length);
    if (rest.size() < needed) break;
    Request request{header, rest.substr(kHeaderSize, header.extras_length),
                    rest.substr(kHeaderSize + header.extras_length, header.key_length),
                    rest.substr(kHeaderSize + fixed, needed - kHeaderSize - fixed)};
    pos += needed;
    if (has_value) {
      start_value(request, out);
    } else {
      dispatch(request, out);
    }
  }
  return close_ ? input.size() : pos;
}

void BinaryProtocol::dispatch(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  // -vv: the opcode (hex, as protocol_binary.txt lists them) and the key.
  LOCKCACHED_VLOG(2) << '<' << core_.owner() << " opcode 0x" << std::hex << int{h.opcode} << std::dec
          << " key " << escape_for_log(request.key);
  switch (h.opcode) {
    case kGet:
    case kGetQ:
    case kGetK:
    case kGetKQ:
      return get(request, out);
    case kTouch:
    case kGat:
    case kGatQ:
    case kGatK:
    case kGatKQ:
      return touch(request, out);
    case kDelete:
    case kDeleteQ:
      return remove(request, out);
    case kIncrement:
    case kIncrementQ:
    case kDecrement:
    case kDecrementQ:
      return arith(request, out);
    case kQuit:
    case kQuitQ:
      core_.release_all_locks();
      if (h.opcode == kQuit) respond(out, h, kSuccess);
      close_ = true;
      return;
    case kFlush:
    case kFlushQ:
      return flush(request, out);
    case kNoop:
      return respond(out, h, kSuccess);
    case kVersion:
      return respond(out, h, kSuccess, {}, {}, LOCKCACHED_PROTOCOL_VERSION);
    case kStat:
      return stat(request, out);
    case kVerbosity:
      core::set_log_verbosity(read_be32(request.extras, 0));
      return respond(out, h, kSuccess);
    case kLock:
    case kLockQ:
      return lock(request, out);
    case kUnlock:
    case kUnlockQ:
      return unlock(request, out);
    case kUnlockAll:
    case kUnlockAllQ:
      core_.release_all_locks();
      if (h.opcode == kUnlockAll) respond(out, h, kSuccess);
      return;
    case kLaG:
    case kLaGQ:
    case kLaGK:
    case kLaGKQ:
      return lock_and_get(request, out);
    case kSaslListMechs:
    case kSaslAuth:
    case kSaslStep:
      return sasl(request, out);
    case kKeys:
      // memcached's -X covers its dumps; this is lockcached's, refused as
      // memcached's binary protocol refuses a disabled flush.
      if (!core_.policy().dumps) return respond_error(out, h, kAuthError);
      keys_header_ = h;
      keys_.start(request.key);
      return continue_work(out);
    default:
      return respond_error(out, h, kUnknownCommand);
  }
}

void BinaryProtocol::get(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  bool with_key = h.opcode == kGetK || h.opcode == kGetKQ;
  // Answered under the store's lock: no reference to the item is taken
  // unless its value is large enough to be sent from the item.
  bool hit = core_.read(
      request.key, [&](const store::Item& item) { respond_item(out, h, item, with_key, true); });
  if (hit || is_quiet(h.opcode)) return;
  // memcached answers a GetK miss with the key instead of a message.
  if (with_key) return respond(out, h, kNotFound, {}, request.key);
  respond_error(out, h, kNotFound);
}

void BinaryProtocol::touch(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  store::ItemRef item = core_.get_and_touch(request.key, exptime_at(request.extras, 0));
  bool with_key = h.opcode == kGatK || h.opcode == kGatKQ;
  if (item) return respond_item(out, h, *item, with_key, h.opcode != kTouch);
  if (is_quiet(h.opcode)) return;
  if (with_key) return respond(out, h, kNotFound, {}, request.key);
  respond_error(out, h, kNotFound);
}

void BinaryProtocol::remove(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  switch (core_.remove(request.key, h.cas)) {
    case store::DeleteStatus::kDeleted:
      if (!is_quiet(h.opcode)) respond(out, h, kSuccess);
      return;
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
      if (is_quiet(h.opcode)) return;
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
  if (h.opcode == kFlush) respond(out, h, kSuccess);
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
  const Header& h = request.header;
  switch (core_.lock(request.key)) {
    case store::LockStatus::kOk:
      if (h.opcode == kLock) respond(out, h, kSuccess);
      return;
    case store::LockStatus::kLocked:
      return respond_error(out, h, kLocked);
    case store::LockStatus::kNotFound:
    case store::LockStatus::kNotLocked:
      return respond_error(out, h, kNotFound);
  }
}

void BinaryProtocol::unlock(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  switch (core_.unlock(request.key)) {
    case store::LockStatus::kOk:
      if (h.opcode == kUnlock) respond(out, h, kSuccess);
      return;
    case store::LockStatus::kNotFound:
      return respond_error(out, h, kNotFound);
    case store::LockStatus::kLocked:
    case store::LockStatus::kNotLocked:
      return respond_error(out, h, kNotLocked);
  }
}

// LaG answers like Get (LaGK like GetK). Its quiet forms still report a
// miss: a client that asked for a lock must learn that it did not get one.
void BinaryProtocol::lock_and_get(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  int64_t exptime = request.extras.empty() ? 0 : exptime_at(request.extras, 0);
  store::LockStatus status;
  store::ItemRef item =
      core_.lock_and_get(request.key, request.extras.empty() ? nullptr : &exptime, &status);
  bool with_key = h.opcode == kLaGK || h.opcode == kLaGKQ;
  switch (status) {
    case store::LockStatus::kOk:
      return respond_item(out, h, *item, with_key, true);
    case store::LockStatus::kLocked:
      return respond_error(out, h, kLocked);
    case store::LockStatus::kNotFound:
    case store::LockStatus::kNotLocked:
      if (with_key) return respond(out, h, kNotFound, {}, request.key);
      return respond_error(out, h, kNotFound);
  }
}

// SASL PLAIN as memcached's -S answers it: LIST_MECHS "PLAIN", AUTH with
// the mechanism as key and the PLAIN message as value, "Authenticated" or
// 0x20. PLAIN has no steps, so a STEP is a failed attempt. Without an auth
// file these opcodes are unknown, as in memcached without -S.
void BinaryProtocol::sasl(const Request& request, OutputQueue& out) {
  const Header& h = request.header;
  if (!core_.auth_enabled()) return respond_error(out, h, kUnknownCommand);
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
  store::ItemRef item = core_.allocate(request.key, flags, exptime, value_length);
  if (!item) {
    respond_error(out, h, value_length > core_.max_item_size() ? kTooLarge : kOutOfMemory);
    core_.drop_stale(store_command(h.opcode), request.key);
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
  store::StoreCommand command = store_command(h.opcode);
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
  switch (result.status) {
    case store::StoreStatus::kStored:
      if (!is_quiet(h.opcode)) respond(out, h, kSuccess, {}, {}, {}, result.cas);
      return;
    case store::StoreStatus::kExists:
      return respond_error(out, h, kExists);
    case store::StoreStatus::kNotFound:
      return respond_error(out, h, kNotFound);
    case store::StoreStatus::kNotStored: {
      store::StoreCommand command = store_command(h.opcode);
      if (command == store::StoreCommand::kAdd) return respond_error(out, h, kExists);
      if (command == store::StoreCommand::kReplace) return respond_error(out, h, kNotFound);
      return respond_error(out, h, kNotStored);
    }
    case store::StoreStatus::kLocked:
      return respond_error(out, h, kLocked);
    case store::StoreStatus::kNotLocked:
      return respond_error(out, h, kNotLocked);
    case store::StoreStatus::kNoMemory:
      return respond_error(out, h, kOutOfMemory);
  }
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
