#include "lockcached/consensus/raft_node.h"

#include <arpa/inet.h>
#include <uv.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <glog/logging.h>

#include "consensus/authenticated_transport.h"
#include "lockcached/consensus/data_dir.h"
#include "lockcached/consensus/raft_io_guard.h"

namespace lockcached::consensus {
namespace {

// How often the role, term and leader are looked at: a step-down reaches
// the application this much after libraft made it, at most.
constexpr uint64_t kStatusPollMs = 10;
// Entries proposed and not yet applied, at most: while they are on their
// way, new commands pile up and go together in the next one.
constexpr unsigned kMaxEntriesInFlight = 8;
// How long a node waits before it tries a peer that refused it again.
constexpr unsigned kConnectRetryMs = 250;
// Election timeouts a snapshot's install may take before it is sent again.
constexpr unsigned kSnapshotTimeouts = 10;

void put32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void put64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get(const char* bytes, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

uint64_t unix_ms() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

// An entry: [stamp u64][count u32] then count x [length u32][command],
// then zeros up to a multiple of 8 bytes. libraft 0.15 writes each entry
// padded to 8 bytes but, loading a closed segment at start-up, steps over
// the entries by their unpadded lengths: an entry of any other length made
// the next batch unreadable, and the node could not start again.
constexpr size_t kEntryAlignment = 8;

bool decode_entry(std::string_view entry, uint64_t* stamp, std::vector<std::string_view>* out) {
  if (entry.size() < 12) return false;
  *stamp = get(entry.data(), 8);
  uint64_t count = get(entry.data() + 8, 4);
  size_t pos = 12;
  for (uint64_t i = 0; i < count; ++i) {
    if (entry.size() - pos < 4) return false;
    uint64_t length = get(entry.data() + pos, 4);
    pos += 4;
    if (entry.size() - pos < length) return false;
    out->push_back(entry.substr(pos, length));
    pos += length;
  }
  return entry.size() - pos < kEntryAlignment &&
         entry.find_first_not_of('\0', pos) == std::string_view::npos;
}

Role role_of(int state) {
  switch (state) {
    case RAFT_FOLLOWER:
      return Role::kFollower;
    case RAFT_CANDIDATE:
      return Role::kCandidate;
    case RAFT_LEADER:
      return Role::kLeader;
    default:
      return Role::kUnavailable;
  }
}

// What the directory's last configuration says of this node, against what
// the flags say: "" when it lists node `id` at `address`, or lists nobody
// (a new directory, or a joining node's before the leader's entries came).
// A node it does not list was removed (its peers ignore it: it would stay
// a candidate for good), or the directory is another cluster's.
std::string stored_membership_problem(const struct raft_configuration& stored, raft_id id,
                                      const std::string& address) {
  if (stored.n == 0) return "";
  for (unsigned i = 0; i < stored.n; ++i) {
    if (stored.servers[i].id != id) continue;
    if (address == stored.servers[i].address) return "";
    return "node " + std::to_string(id) + " is at " + stored.servers[i].address +
           " in its configuration, not at " + address + " (--cluster)";
  }
  return "node " + std::to_string(id) +
         " is not in its configuration: removed from the cluster, or another cluster's "
         "directory (to bring the machine back, empty the directory and add it with "
         "--cluster_join under a new id)";
}

}  // namespace

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kFollower:
      return "follower";
    case Role::kCandidate:
      return "candidate";
    case Role::kLeader:
      return "leader";
    case Role::kUnavailable:
      break;
  }
  return "unavailable";
}

uint64_t member_after(const std::vector<Member>& members, uint64_t id, uint64_t self) {
  uint64_t next = 0;   // the smallest id above `id`
  uint64_t first = 0;  // the smallest id of all: where the order starts again
  for (const Member& member : members) {
    if (member.id == self) continue;
    if (member.id > id && (next == 0 || member.id < next)) next = member.id;
    if (first == 0 || member.id < first) first = member.id;
  }
  return next != 0 ? next : first;
}

std::vector<Member> parse_members(std::string_view text, std::string* error) {
  std::vector<Member> members;
  std::set<uint64_t> ids;
  std::set<std::string> addresses;
  if (text.starts_with(',') || text.ends_with(',') || text.find(",,") != std::string_view::npos) {
    *error = "'" + std::string(text) + "' has an empty entry";
    return {};
  }
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t at = item.find('@');
    size_t colon = item.rfind(':');
    Member member;
    uint64_t port = 0;
    in_addr ip{};
    bool ok = at != std::string_view::npos && colon != std::string_view::npos && colon > at;
    if (ok) {
      auto [id_end, id_error] = std::from_chars(item.data(), item.data() + at, member.id);
      auto [port_end, port_error] =
          std::from_chars(item.data() + colon + 1, item.data() + item.size(), port);
      std::string host(item.substr(at + 1, colon - at - 1));
      ok = id_error == std::errc() && id_end == item.data() + at && member.id >= 1 &&
           port_error == std::errc() && port_end == item.data() + item.size() && port >= 1 &&
           port <= 65535 && inet_pton(AF_INET, host.c_str(), &ip) == 1;
    }
    if (!ok) {
      *error = "'" + std::string(item) + "' is not ID@IPV4:PORT (ID 1 or more)";
      return {};
    }
    member.address = std::string(item.substr(at + 1));
    if (!ids.insert(member.id).second) {
      *error = "node id " + std::to_string(member.id) + " is listed twice";
      return {};
    }
    if (!addresses.insert(member.address).second) {
      *error = "address " + member.address + " is listed twice";
      return {};
    }
    members.push_back(std::move(member));
  }
  if (members.empty()) *error = "lists no node";
  return members;
}

struct RaftNode::Impl final : timing::Scheduler {
  Impl(RaftSettings config, StateMachine& state_machine)
      : settings(std::move(config)), machine(state_machine) {}

  // ---- timing::Scheduler, on the node's thread ----
  struct Timer {
    Impl* node;
    TimerId id;
    Task task;
    uv_timer_t handle;
  };
  int64_t now_ms() const override { return static_cast<int64_t>(uv_now(&loop)); }
  TimerId after(int64_t delay_ms, Task task) override {
    auto* timer = new Timer{this, next_timer++, std::move(task), {}};
    timer->handle.data = timer;
    uv_timer_init(&loop, &timer->handle);
    uv_timer_start(&timer->handle, on_timer, static_cast<uint64_t>(std::max<int64_t>(delay_ms, 0)),
                   0);
    timers.emplace(timer->id, timer);
    return timer->id;
  }
  void cancel(TimerId id) override {
    auto found = timers.find(id);
    if (found == timers.end()) return;
    Timer* timer = found->second;
    timers.erase(found);
    close_timer(timer);
  }
  static void close_timer(Timer* timer) {
    uv_timer_stop(&timer->handle);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer->handle),
             [](uv_handle_t* handle) { delete static_cast<Timer*>(handle->data); });
  }
  static void on_timer(uv_timer_t* handle) {
    auto* timer = static_cast<Timer*>(handle->data);
    timer->node->timers.erase(timer->id);
    Task task = std::move(timer->task);
    close_timer(timer);
    task();
  }

  // ---- start and stop ----
  bool open(std::string* error);
  void run(std::promise<std::string>* started);
  void close_all();
  // A stop closes libraft once the entries in flight have ended (committed,
  // or failed as leadership is lost, which check-quorum bounds), or after
  // two election timeouts at most. libraft 0.15 closing a leader with
  // appends in flight crashed in raft_close (a SIGSEGV in its log's entry
  // references: 10 of 40 runs of a leader stopping while a thread proposed,
  // RaftNodeTest.ALeaderStoppingRefusesWhatIsProposedMeanwhile; 0 of 40
  // once it waited).
  void close_when_drained();
  static void on_raft_closed(struct raft* r);
  void close_handles();

  // ---- proposals and tasks ----
  struct Proposal {
    struct raft_apply request;
    Impl* node;
  };
  static void on_wake(uv_async_t* handle);
  void drain();
  void submit_entry();
  static void on_applied(struct raft_apply* request, int status, void* result);
#ifdef LOCKCACHED_TEST_EARLY_ANSWER
  void apply_early(const char* entry, size_t size);
  uint64_t early_applied = 0;
#endif

  // ---- membership ----
  struct MembershipRequest {
    Impl* node;
    MembershipChange change;
    MembershipDone done;
    bool promoting = false;  // kAdd: added as a spare, being made a voter
    struct raft_change change_request {};
  };
  void start_change(MembershipRequest* request);
  void assign_voter(MembershipRequest* request);
  static std::string left_a_spare(uint64_t id, int rv);
  static void on_changed(struct raft_change* change, int status);
  static void on_transferred(struct raft_transfer* transfer);
  static void finish(MembershipRequest* request, const std::string& error);

  // ---- libraft's state machine hooks ----
  static int fsm_apply(struct raft_fsm* fsm, const struct raft_buffer* buffer, void** result);
  static int fsm_snapshot(struct raft_fsm* fsm, struct raft_buffer* buffers[], unsigned* count);
  static int fsm_restore(struct raft_fsm* fsm, struct raft_buffer* buffer);

  // ---- status ----
  static void on_poll(uv_timer_t* handle);
  RaftStatus read_status();

  const RaftSettings settings;
  StateMachine& machine;
  std::string address;  // this member's, from settings.members
  mutable uv_loop_t loop{};
  struct raft_uv_transport transport{};
  struct raft_io io{};
  RaftIoGuard io_guard;  // two bugs of libraft 0.15 (raft_io_guard.h)
  struct raft_fsm fsm{};
  struct raft raft{};
  uv_async_t wake{};
  uv_timer_t poll{};
  // The leadership transfer, one at a time as libraft runs them. Not in a
  // MembershipRequest, which ends with the transfer: libraft's TimeoutNow
  // message lives in it (transfer.send), and a message queued while the
  // link to its target reconnects goes out, or is failed, later, reading
  // the struct then. So it lasts as long as the node.
  struct raft_transfer transfer {};
  std::thread thread;
  bool transport_ready = false;
  bool io_ready = false;
  bool raft_ready = false;
  bool closing = false;
  bool drain_deadline_armed = false;
  bool fresh = false;  // bootstrapped by this start (set before start() returns)
  // open() failed on the operator's mistake, not the machine's: exit 64.
  bool configuration_mistake = false;
  PeerBook peers;  // the directory each peer first spoke with (data_dir.h)

  std::unordered_map<TimerId, Timer*> timers;
  TimerId next_timer = 1;
  unsigned in_flight = 0;
  RaftStatus last_reported;

  mutable std::mutex mutex;  // guards what follows
  std::string pending;       // framed commands for the next entry
  uint32_t pending_count = 0;
  std::vector<std::function<void()>> tasks;
  bool stop_requested = false;
  // Set as `wake` closes: another thread's uv_async_send must not reach a
  // closed handle, so they send under the mutex, while this is false.
  bool wake_closed = false;
  RaftStatus shared_status;
  std::atomic<bool> leading{false};
};

bool RaftNode::Impl::open(std::string* error) {
#ifdef LOCKCACHED_TEST_EARLY_ANSWER
  LOG(WARNING) << "cluster: a test build that answers before the log commits: NOT SAFE";
#endif
  for (const Member& member : settings.members)
    if (member.id == settings.id) address = member.address;
  if (address.empty()) {
    *error = "node " + std::to_string(settings.id) + " is not in the cluster's list";
    return false;
  }
  uv_loop_init(&loop);
  uv_async_init(&loop, &wake, on_wake);
  wake.data = this;
  uv_timer_init(&loop, &poll);
  poll.data = this;
  auto fail = [&](const std::string& what, int rv, const char* message) {
    // libraft leaves the detail in the raft object or in its I/O's.
    if (!message || !*message) message = io.errmsg;
    *error = what + ": " + raft_strerror(rv) + (message && *message ? std::string(": ") + message : "");
    return false;
  };
  // Before libraft reads the directory: whose is it?
  DataDirClaim claim;
  std::string problem = data_dir_claim_problem(settings.data_dir, settings.id, &claim);
  if (problem.empty()) problem = peers.load(settings.data_dir);
  if (!problem.empty()) {
    *error = "--data_dir " + problem;
    configuration_mistake = true;
    return false;
  }
  bool claimed = claim.node_id == settings.id && !claim.incarnation.empty();
  if (!claimed) claim = {settings.id, new_incarnation()};
  int rv = authenticated_transport_init(
      &transport, &loop, settings.secret, claim.incarnation,
      [this](raft_id id, const std::string& incarnation) { return peers.admit(id, incarnation); });
  if (rv != 0) return fail("cluster transport", rv, transport.errmsg);
  transport_ready = true;
  rv = raft_uv_init(&io, &loop, settings.data_dir.c_str(), &transport);
  if (rv != 0) return fail("--data_dir " + settings.data_dir, rv, io.errmsg);
  io_ready = true;
  io_guard.install(&io);
  raft_uv_set_connect_retry_delay(&io, kConnectRetryMs);
  fsm.version = 1;
  fsm.data = this;
  fsm.apply = fsm_apply;
  fsm.snapshot = fsm_snapshot;
  fsm.restore = fsm_restore;
  rv = raft_init(&raft, &io, &fsm, settings.id, address.c_str());
  if (rv != 0) return fail("raft", rv, raft.errmsg);
  raft_ready = true;
  raft.data = this;
  raft_set_election_timeout(&raft, settings.election_timeout_ms);
  raft_set_heartbeat_timeout(&raft, settings.heartbeat_ms);
  raft_set_pre_vote(&raft, true);
  // A snapshot sent to a follower that did not answer is sent again after
  // this (libraft's default, 30 s, left a member that came back just as the
  // leader first sent it behind for half a minute).
  raft_set_install_snapshot_timeout(&raft, settings.election_timeout_ms * kSnapshotTimeouts);
  raft_set_snapshot_threshold(&raft, settings.snapshot_threshold);
  raft_set_snapshot_trailing(&raft, settings.snapshot_trailing);
  struct raft_configuration configuration;
  raft_configuration_init(&configuration);
  for (const Member& member : settings.members)
    raft_configuration_add(&configuration, member.id, member.address.c_str(), RAFT_VOTER);
  // A joining node starts with no configuration: the leader's entries
  // bring it (raft_add), with everything before them.
  rv = settings.join ? RAFT_CANTBOOTSTRAP : raft_bootstrap(&raft, &configuration);
  raft_configuration_close(&configuration);
  if (rv != 0 && rv != RAFT_CANTBOOTSTRAP) return fail("bootstrap", rv, raft.errmsg);
  fresh = rv == 0;
  rv = raft_start(&raft);
  if (rv != 0) return fail("start", rv, raft.errmsg);
  problem = stored_membership_problem(raft.configuration, settings.id, address);
  if (!problem.empty()) {
    *error = "--data_dir " + settings.data_dir + ": " + problem;
    configuration_mistake = true;
    return false;
  }
  // Claimed only once it proved this node's: a refused start claims nothing.
  if (!claimed && !(problem = write_data_dir_claim(settings.data_dir, claim)).empty()) {
    *error = "--data_dir " + problem;
    return false;
  }
  uv_timer_start(&poll, on_poll, kStatusPollMs, kStatusPollMs);
  return true;
}

void RaftNode::Impl::run(std::promise<std::string>* started) {
  std::string error;
  if (!open(&error)) {
    close_all();
    uv_run(&loop, UV_RUN_DEFAULT);  // until every handle closed
    uv_loop_close(&loop);
    started->set_value(error);
    return;
  }
  started->set_value("");
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}

// libraft first (it closes the I/O, which closes the transport), then our
// own handles; the loop ends once none is left.
void RaftNode::Impl::close_all() {
  if (closing) return;
  closing = true;
  uv_timer_stop(&poll);
  for (auto& [id, timer] : timers)
    close_timer(timer);
  timers.clear();
  leading.store(false);
  if (raft_ready) return raft_close(&raft, on_raft_closed);
  close_handles();
}

void RaftNode::Impl::close_when_drained() {
  if (in_flight == 0) return close_all();
  // Each entry that ends wakes the loop; the deadline closes regardless
  // (close_all, which cancels it if the entries end first, runs once).
  if (closing || drain_deadline_armed) return;
  drain_deadline_armed = true;
  after(2 * static_cast<int64_t>(settings.election_timeout_ms), [this] { close_all(); });
}

void RaftNode::Impl::on_raft_closed(struct raft* r) {
  static_cast<Impl*>(r->data)->close_handles();
}

void RaftNode::Impl::close_handles() {
  if (io_ready) raft_uv_close(&io);
  if (transport_ready) authenticated_transport_free(&transport);
  uv_close(reinterpret_cast<uv_handle_t*>(&poll), nullptr);
  {
    std::lock_guard lock(mutex);
    wake_closed = true;
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
}

void RaftNode::Impl::on_wake(uv_async_t* handle) {
  auto* self = static_cast<Impl*>(handle->data);
  std::vector<std::function<void()>> ready;
  bool stop;
  {
    std::lock_guard lock(self->mutex);
    ready.swap(self->tasks);
    stop = self->stop_requested;
  }
  // Tasks first, also when stopping: each is started, and what libraft
  // has started then ends (cancelled) as it closes, so every caller hears.
  for (auto& task : ready)
    task();
  if (stop) return self->close_when_drained();
  self->drain();
}

void RaftNode::Impl::drain() {
  // A leader handing leadership over refuses entries until the transfer
  // ends (raft_apply: RAFT_NOTLEADER). They wait here: proposed if this
  // node still leads then (on_transferred wakes the loop), dropped with
  // the leadership if it moved. Dropping them at once lost a new term's
  // first entry when the transfer failed, and with it the leader's
  // announcement (LockMachine): its lock service stayed unreachable.
  if (raft.transfer != nullptr) return;
#ifdef LOCKCACHED_TEST_EARLY_ANSWER
  // Nothing waits for a majority here, so nothing may stop the answers.
  while (true) {
#else
  while (in_flight < kMaxEntriesInFlight) {
#endif
    {
      std::lock_guard lock(mutex);
      if (pending_count == 0) return;
    }
    submit_entry();
  }
}

void RaftNode::Impl::submit_entry() {
  std::string commands;
  uint32_t count;
  {
    std::lock_guard lock(mutex);
    commands.swap(pending);
    count = pending_count;
    pending_count = 0;
  }
  if (raft_state(&raft) != RAFT_LEADER) return;  // no longer leading: dropped
  std::string header;
  put64(header, unix_ms());
  put32(header, count);
  size_t size = header.size() + commands.size();
  struct raft_buffer buffer;
  buffer.len = (size + kEntryAlignment - 1) / kEntryAlignment * kEntryAlignment;
  buffer.base = raft_calloc(1, buffer.len);  // the padding is zeros
  CHECK(buffer.base) << "out of memory";
  std::memcpy(buffer.base, header.data(), header.size());
  std::memcpy(static_cast<char*>(buffer.base) + header.size(), commands.data(), commands.size());
  auto* proposal = new Proposal{{}, this};
  proposal->request.data = proposal;
  int rv = raft_apply(&raft, &proposal->request, &buffer, 1, on_applied);
  if (rv != 0) {
    raft_free(buffer.base);
    delete proposal;
    LOG(WARNING) << "cluster: an entry of " << count << " commands was not proposed: "
                 << raft_strerror(rv);
    return;
  }
  ++in_flight;
#ifdef LOCKCACHED_TEST_EARLY_ANSWER
  apply_early(static_cast<const char*>(buffer.base), buffer.len);
#endif
}

#ifdef LOCKCACHED_TEST_EARLY_ANSWER
// Test only, and wrong on purpose (-DLOCKCACHED_TEST_EARLY_ANSWER=ON): the
// leader applies an entry, and so answers its clients, as soon as the entry
// is in its own log, before a majority has it. test/ha/raft_faults.py must
// find the grants this loses when the leader dies.
void RaftNode::Impl::apply_early(const char* entry, size_t size) {
  uint64_t index = raft_last_index(&raft);
  uint64_t stamp = 0;
  std::vector<std::string_view> commands;
  if (!decode_entry({entry, size}, &stamp, &commands)) return;
  early_applied = index;
  machine.apply(index, stamp, commands);
}
#endif

void RaftNode::Impl::on_applied(struct raft_apply* request, int, void*) {
  auto* proposal = static_cast<Proposal*>(request->data);
  Impl* self = proposal->node;
  delete proposal;
  --self->in_flight;
  // Not drain() here: libraft calls this from inside itself, also while it
  // fails every request of a leader that is stepping down (still in the
  // leader's state), and a raft_apply then corrupts its request queue
  // (found by test/ha/raft_faults.py: a SIGSEGV in raft_apply).
  uv_async_send(&self->wake);
}

void RaftNode::Impl::start_change(MembershipRequest* request) {
  if (raft_state(&raft) != RAFT_LEADER) return finish(request, std::string(kNotLeader));
  const MembershipChange& change = request->change;
  request->change_request.data = request;
  int rv = 0;
  switch (change.kind) {
    case MembershipChange::Kind::kAdd:
      // A spare first: it gets the log but does not vote, so a node that
      // is slow to catch up never stalls the majority; then a voter.
      rv = raft_add(&raft, &request->change_request, change.id, change.address.c_str(),
                    on_changed);
      break;
    case MembershipChange::Kind::kRemove:
      rv = raft_remove(&raft, &request->change_request, change.id, on_changed);
      break;
    case MembershipChange::Kind::kTransfer:
      // Asked of the node that leads already (an election may have made it
      // leader since the operator looked): done, as the operator wanted.
      // libraft would refuse it as a bad id.
      if (change.id == settings.id) return finish(request, "");
      // libraft refuses a second transfer as it would (not leading), but
      // before `transfer` is handed over again.
      if (raft.transfer != nullptr) {
        rv = RAFT_NOTLEADER;
        break;
      }
      // What was proposed before goes into the log first: a new leader's
      // first entry (the term start) must be on its disk before followers'
      // answers count (RaftIoGuard), and the target must have it.
      drain();
      transfer.data = request;
      rv = raft_transfer(&raft, &transfer, change.id, on_transferred);
      break;
  }
  if (rv != 0) finish(request, raft_strerror(rv));
}

void RaftNode::Impl::assign_voter(MembershipRequest* request) {
  if (raft_state(&raft) != RAFT_LEADER) return finish(request, std::string(kNotLeader));
  request->promoting = true;
  int rv = raft_assign(&raft, &request->change_request, request->change.id, RAFT_VOTER,
                       on_changed);
  if (rv != 0) finish(request, left_a_spare(request->change.id, rv));
}

// The add half done: the node is in the configuration, as a spare (it gets
// the log, it does not vote), and an add of the same id is refused until
// it is removed. The operator must be told, not only libraft's reason.
std::string RaftNode::Impl::left_a_spare(uint64_t id, int rv) {
  return std::string("added as a spare, not made a voter: ") + raft_strerror(rv) +
         " (`cluster remove " + std::to_string(id) + "` before adding it again)";
}

void RaftNode::Impl::on_changed(struct raft_change* change, int status) {
  auto* request = static_cast<MembershipRequest*>(change->data);
  if (status != 0 && request->promoting) {
    return finish(request, left_a_spare(request->change.id, status));
  }
  if (status != 0) return finish(request, raft_strerror(status));
  if (request->change.kind != MembershipChange::Kind::kAdd || request->promoting) {
    return finish(request, "");
  }
  // Not from inside libraft's callback (see on_applied): on the next turn.
  Impl* self = request->node;
  {
    std::lock_guard lock(self->mutex);
    self->tasks.push_back([self, request] { self->assign_voter(request); });
  }
  uv_async_send(&self->wake);
}

void RaftNode::Impl::on_transferred(struct raft_transfer* transfer) {
  auto* request = static_cast<MembershipRequest*>(transfer->data);
  // Called when the target's higher term reached this node, which then
  // no longer leads (and may not yet know who does), or when the election
  // timeout passed without that.
  Impl* self = request->node;
  bool moved = raft_state(&self->raft) != RAFT_LEADER;
  finish(request, moved ? "" : "leadership did not move within an election timeout");
  // What was proposed meanwhile (drain), on the next turn (see on_applied).
  uv_async_send(&self->wake);
}

void RaftNode::Impl::finish(MembershipRequest* request, const std::string& error) {
  MembershipDone done = std::move(request->done);
  delete request;
  done(error);
}

int RaftNode::Impl::fsm_apply(struct raft_fsm* fsm, const struct raft_buffer* buffer, void** result) {
  auto* self = static_cast<Impl*>(fsm->data);
  *result = nullptr;
  // libraft advances last_applied after this returns.
  uint64_t index = raft_last_applied(&self->raft) + 1;
#ifdef LOCKCACHED_TEST_EARLY_ANSWER
  if (index <= self->early_applied) return 0;
#endif
  uint64_t stamp = 0;
  std::vector<std::string_view> commands;
  if (!decode_entry({static_cast<const char*>(buffer->base), buffer->len}, &stamp, &commands)) {
    // Every member skips it alike, so they stay the same.
    LOG(ERROR) << "cluster: entry " << index << " is malformed; skipped";
    return 0;
  }
  self->machine.apply(index, stamp, commands);
  return 0;
}

int RaftNode::Impl::fsm_snapshot(struct raft_fsm* fsm, struct raft_buffer* buffers[],
                                 unsigned* count) {
  auto* self = static_cast<Impl*>(fsm->data);
  std::string data = self->machine.snapshot();
  *buffers = static_cast<struct raft_buffer*>(raft_malloc(sizeof(struct raft_buffer)));
  if (!*buffers) return RAFT_NOMEM;
  (*buffers)[0].len = data.size();
  (*buffers)[0].base = raft_malloc(std::max<size_t>(data.size(), 1));
  if (!(*buffers)[0].base) {
    raft_free(*buffers);
    return RAFT_NOMEM;
  }
  std::memcpy((*buffers)[0].base, data.data(), data.size());
  *count = 1;
  return 0;
}

int RaftNode::Impl::fsm_restore(struct raft_fsm* fsm, struct raft_buffer* buffer) {
  auto* self = static_cast<Impl*>(fsm->data);
  bool restored = self->machine.restore({static_cast<const char*>(buffer->base), buffer->len});
  if (!restored) return RAFT_MALFORMED;  // libraft keeps the buffer then
  raft_free(buffer->base);
  return 0;
}

RaftStatus RaftNode::Impl::read_status() {
  RaftStatus status;
  status.id = settings.id;
  status.role = role_of(raft_state(&raft));
  status.term = raft.current_term;
  raft_id leader_id = 0;
  const char* leader_address = nullptr;
  raft_leader(&raft, &leader_id, &leader_address);
  status.leader_id = leader_id;
  if (leader_address) status.leader_address = leader_address;
  status.commit_index = raft.commit_index;
  status.applied_index = raft_last_applied(&raft);
  status.last_index = raft_last_index(&raft);
  for (unsigned i = 0; i < raft.configuration.n; ++i) {
    const struct raft_server& server = raft.configuration.servers[i];
    status.members.push_back({server.id, server.address});
  }
  return status;
}

void RaftNode::Impl::on_poll(uv_timer_t* handle) {
  auto* self = static_cast<Impl*>(handle->data);
  RaftStatus status = self->read_status();
  self->leading.store(status.role == Role::kLeader, std::memory_order_release);
  bool changed = status.role != self->last_reported.role ||
                 status.term != self->last_reported.term ||
                 status.leader_id != self->last_reported.leader_id;
  {
    std::lock_guard lock(self->mutex);
    self->shared_status = status;
  }
  if (!changed) return;
  LOG(INFO) << "cluster: node " << status.id << " is " << role_name(status.role) << " in term "
            << status.term << (status.leader_id ? ", leader node " : ", no leader")
            << (status.leader_id ? std::to_string(status.leader_id) : std::string());
  self->last_reported = status;
  self->machine.on_status(status);
}

RaftNode::RaftNode(RaftSettings settings, StateMachine& machine)
    : impl_(std::make_unique<Impl>(std::move(settings), machine)) {}

RaftNode::~RaftNode() {
  stop();
}

bool RaftNode::start(std::string* error, bool* configuration_error) {
  std::promise<std::string> started;
  std::future<std::string> outcome = started.get_future();
  impl_->thread = std::thread([this, &started] { impl_->run(&started); });
  *error = outcome.get();
  if (error->empty()) return true;
  impl_->thread.join();
  if (configuration_error) *configuration_error = impl_->configuration_mistake;
  return false;
}

void RaftNode::stop() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop_requested = true;
    if (!impl_->wake_closed) uv_async_send(&impl_->wake);
  }
  impl_->thread.join();
}

bool RaftNode::propose(std::string_view command) {
  if (!impl_->leading.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(impl_->mutex);
  // A node stopping or stopped proposes nothing (connections still close
  // then, and propose their detach).
  if (impl_->stop_requested || impl_->wake_closed) return false;
  put32(impl_->pending, static_cast<uint32_t>(command.size()));
  impl_->pending.append(command);
  ++impl_->pending_count;
  uv_async_send(&impl_->wake);
  return true;
}

void RaftNode::post(std::function<void()> task) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->wake_closed) return;  // stopped: nothing runs tasks any more
  impl_->tasks.push_back(std::move(task));
  uv_async_send(&impl_->wake);
}

void RaftNode::change_members(MembershipChange change, MembershipDone done) {
  auto* request = new Impl::MembershipRequest{impl_.get(), std::move(change), std::move(done)};
  post([this, request] { impl_->start_change(request); });
}

bool RaftNode::started_fresh() const {
  return impl_->fresh;
}

RaftStatus RaftNode::status() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->shared_status;
}

timing::Scheduler& RaftNode::scheduler() {
  return *impl_;
}

}  // namespace lockcached::consensus
