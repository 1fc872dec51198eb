#include "actors/shard/ps_shard.hpp"
#include "messages/tensor_bytes.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "kernels/initializers.hpp"
#include "kernels/ops.hpp"
#include "kernels/sparse.hpp"
#include "kernels/tensor.hpp"

namespace actorps {
namespace {

using kernels::optimizer_kind;

struct variable {
  pb::VariableSpec spec;
  kernels::tensor value;
  std::vector<kernels::tensor> slots;
  optimizer_kind kind = optimizer_kind::sgd;
  kernels::optimizer_params params;
  int64_t row_size = 1;
  uint64_t version = 0;
  std::vector<float> sum;  // SYNC: gradients of the current step
  int64_t received = 0;    // SYNC: elements received this step

  int64_t size() const { return value.size(); }
  int64_t rows() const { return spec.shape_size() == 0 ? 1 : spec.shape(0); }
  float* slot(int i) { return slots[size_t(i)].data(); }
};

struct waiting_pull {
  pb::Pull request;
  caf::typed_response_promise<pb::Values> promise;
  caf::node_id from;
};

struct waiting_push {
  pb::Push request;
  caf::typed_response_promise<pb::PushAck> promise;
  caf::node_id from;
};

// step -> (variable, offset) applied.
using steps_seen = std::map<int64_t, std::set<std::pair<std::string, int64_t>>>;

struct shard_state {
  static inline const char* name = "ps_shard";
  uint32_t index = 0;
  pb::Consistency consistency;
  std::map<std::string, variable> vars;  // ordered: "all variables" come back in name order
  // Slices already applied, by push key (see pb::ClosureStep): per closure
  // (the most recent ones) or per worker, then per step (the most recent ones).
  std::map<uint64_t, steps_seen> seen_closures;
  std::unordered_map<uint32_t, steps_seen> seen_workers;
  int64_t step = 0;             // SYNC: the step being aggregated
  std::vector<int64_t> clocks;  // BOUNDED_STALENESS: per worker, last pushed step + 1
  std::vector<waiting_pull> pulls;
  std::vector<waiting_push> pushes;
  std::vector<float> scratch;   // aligned copy of a gradient slice
  pb::ShardStats stats;
  std::string where;  // "ps shard <index>: ", the prefix of its errors
  peer_table_ptr peers;
  std::map<caf::node_id, uint32_t> held;  // waiting pulls and pushes per peer process
  caf::actor_addr parent;                 // the node: the one actor whose exit stops this shard
};

using shard_actor = ps_shard_actor::stateful_pointer<shard_state>;

constexpr int64_t kRememberedSteps = 64;      // per worker or closure, for duplicate detection
constexpr size_t kRememberedClosures = 4096;  // closures in flight are far fewer

const std::string& where(shard_actor self) { return self->state.where; }

// A refused request, counted against its sender.
caf::error refuse(shard_actor self, const caf::strong_actor_ptr& sender, errc code, const std::string& what) {
  auto err = make_error(code, where(self) + what);
  self->state.peers->count(sender, self->node(), err);
  return err;
}

// The same for the request being handled (before any make_response_promise,
// which takes the sender out of it).
caf::error fail(shard_actor self, errc code, const std::string& what) {
  return refuse(self, self->current_sender(), code, what);
}

// Who may send what (actors/peer_table.hpp).
constexpr std::initializer_list<Role> kCoordinator = {pb::COORDINATOR, pb::CLIENT};
constexpr std::initializer_list<Role> kReaders = {pb::COORDINATOR, pb::WORKER, pb::EVALUATOR, pb::CLIENT};
constexpr std::initializer_list<Role> kWriters = {pb::WORKER, pb::COORDINATOR, pb::CLIENT};  // the coordinator may do anything

// The first check of every request: its sender's role and its size.
template <class Msg>
caf::error admit(shard_actor self, const Msg& msg, std::initializer_list<Role> roles, const char* what) {
  return check_request(self, *self->state.peers, msg, roles, where(self), what);
}

// A request of `sender` about to wait for a step: within the sender's
// share (max_in_flight_per_peer).
caf::expected<caf::node_id> hold(shard_actor self, const caf::strong_actor_ptr& sender) {
  auto& st = self->state;
  auto from = sender->node();
  const auto limit = st.peers->limits().max_in_flight_per_peer;
  auto& held = st.held[from];
  if (held >= limit)
    return refuse(self, sender, errc::too_busy,
                  std::to_string(limit) + " requests of " + st.peers->peer_name(sender, self->node()) +
                      " wait already (max_in_flight_per_peer)");
  ++held;
  st.stats.set_waiting(st.stats.waiting() + 1);
  return from;
}

void unhold(shard_state& st, const caf::node_id& from) {
  auto i = st.held.find(from);
  if (i != st.held.end() && --i->second == 0) st.held.erase(i);
}

// ---- variables ----

std::string check_spec(const pb::VariableSpec& v) {
  if (v.name().empty()) return "a variable needs a name";
  if (v.dtype() != pb::FLOAT32) return "variable '" + v.name() + "': dtype must be FLOAT32";
  for (auto d : v.shape())
    if (d < 1) return "variable '" + v.name() + "': dimensions must be >= 1";
  if (v.full_shape_size() != v.shape_size()) return "variable '" + v.name() + "': full_shape rank differs from shape";
  for (int i = 1; i < v.shape_size(); ++i)
    if (v.full_shape(i) != v.shape(i)) return "variable '" + v.name() + "': only axis 0 may be partitioned";
  if (v.shape_size() > 0 && (v.first_row() < 0 || v.first_row() + v.shape(0) > v.full_shape(0)))
    return "variable '" + v.name() + "': rows [first_row, first_row + shape[0]) outside full_shape[0]";
  if (v.optimizer().learning_rate() <= 0) return "variable '" + v.name() + "': learning_rate must be > 0";
  return {};
}

kernels::initializer to_kernels(const pb::Initializer& i) {
  kernels::initializer out;
  out.type = static_cast<kernels::initializer::kind>(i.kind());
  out.value = i.value();
  out.low = i.low(), out.high = i.high();
  out.mean = i.mean(), out.stddev = i.stddev();
  out.seed = i.seed();
  return out;
}

variable make_variable(const pb::VariableSpec& spec) {
  variable v;
  v.spec = spec;
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  std::vector<int64_t> full(spec.full_shape().begin(), spec.full_shape().end());
  v.value = kernels::tensor(shape);
  for (size_t i = 1; i < shape.size(); ++i) v.row_size *= shape[i];
  kernels::initialize_rows(to_kernels(spec.initializer()), full, spec.first_row(), v.rows(), v.value.data());
  auto& o = spec.optimizer();
  v.kind = static_cast<optimizer_kind>(o.kind());
  v.params.lr = o.learning_rate();
  v.params.momentum = o.momentum();
  v.params.nesterov = o.nesterov();
  if (o.beta1() > 0) v.params.beta1 = o.beta1();
  if (o.beta2() > 0) v.params.beta2 = o.beta2();
  if (o.epsilon() > 0) v.params.epsilon = o.epsilon();
  if (o.initial_accumulator() > 0) v.params.initial_accumulator = o.initial_accumulator();
  for (int i = 0; i < kernels::slot_count(v.kind); ++i) {
    v.slots.emplace_back(shape);
    if (v.kind == optimizer_kind::adagrad) std::fill_n(v.slots.back().data(), v.size(), v.params.initial_accumulator);
  }
  return v;
}

// ---- validation (nothing changes until a whole request passed) ----

caf::expected<variable*> find(shard_actor self, const std::string& name) {
  auto i = self->state.vars.find(name);
  if (i == self->state.vars.end()) return fail(self, errc::unknown_variable, "no variable '" + name + "' on this shard");
  return &i->second;
}

// Elements [offset, offset + count) of a variable of `size`, compared
// without computing offset + count (a peer's numbers may overflow it).
caf::error check_range(shard_actor self, const std::string& name, int64_t offset, int64_t count, int64_t size) {
  if (offset >= 0 && offset <= size && count >= 1 && count <= size - offset) return caf::none;
  return fail(self, errc::out_of_range,
              "'" + name + "': " + std::to_string(count) + " elements at offset " + std::to_string(offset) +
                  " outside its " + std::to_string(size));
}

// Step numbers a peer sends: non-negative and far from overflowing when
// the shard adds to them (clocks, staleness).
constexpr int64_t kMaxStep = int64_t(1) << 60;

caf::error check_step(shard_actor self, int64_t step) {
  if (step >= 0 && step < kMaxStep) return caf::none;
  return fail(self, errc::out_of_range, "step " + std::to_string(step) + " outside [0, 2^60)");
}

// A push's step, and its closure key's step when it has one.
template <class Push>
caf::error check_steps(shard_actor self, const Push& push) {
  if (auto err = check_step(self, push.step())) return err;
  return push.has_closure_step() ? check_step(self, push.closure_step().step()) : caf::none;
}

caf::error check_slice(shard_actor self, const pb::TensorSlice& s) {
  auto v = find(self, s.name());
  if (!v) return v.error();
  if (s.dtype() != pb::FLOAT32) return fail(self, errc::bad_tensor, "'" + s.name() + "': dtype must be FLOAT32");
  if (auto err = check_range(self, s.name(), s.offset(), s.count(), (*v)->size())) return err;
  if (int64_t(s.data().size()) != s.count() * 4)
    return fail(self, errc::bad_tensor,
                "'" + s.name() + "': " + std::to_string(s.data().size()) + " bytes for " + std::to_string(s.count()) +
                    " float32 elements (want " + std::to_string(s.count() * 4) + ")");
  return caf::none;
}

const float* floats(shard_actor self, const std::string& bytes) { return float_view(bytes, self->state.scratch); }

// ---- applying ----

void apply(variable& v, int64_t offset, int64_t count, const float* grad) {
  if (offset == 0) ++v.version;  // once per gradient (slices of one gradient arrive in order)
  v.params.step = int64_t(std::max<uint64_t>(v.version, 1));
  float* slots[2] = {nullptr, nullptr};
  for (int i = 0; i < kernels::slot_count(v.kind); ++i) slots[i] = v.slot(i) + offset;
  kernels::cpu_ops().apply_dense(v.kind, v.params, count, v.value.data() + offset, slots, grad);
}

// Whether `push` (a Push or SparsePush) already brought the slice at
// (name, offset) of its key; counts the key's examples when it is new here.
template <class Push>
bool seen_before(shard_actor self, const Push& push, const std::string& name, int64_t offset) {
  auto& st = self->state;
  steps_seen* steps = nullptr;
  int64_t step = push.step();
  if (push.has_closure_step()) {
    const auto& key = push.closure_step();
    auto& closures = st.seen_closures;
    // Closure ids grow: one older than every remembered closure was applied long ago.
    if (closures.size() >= kRememberedClosures && key.closure() < closures.begin()->first) return true;
    steps = &closures[key.closure()];
    while (closures.size() > kRememberedClosures) closures.erase(closures.begin());
    step = key.step();
    if (steps->count(step) == 0) st.stats.set_examples_applied(st.stats.examples_applied() + key.examples());
  } else {
    steps = &st.seen_workers[push.worker()];
  }
  if (!steps->empty() && step < steps->rbegin()->first - kRememberedSteps) return true;  // too old to be new
  bool fresh = (*steps)[step].emplace(name, offset).second;
  while (steps->size() > size_t(kRememberedSteps)) steps->erase(steps->begin());
  return !fresh;
}

// BOUNDED_STALENESS: a lost worker's clock, until its respawn pushes again.
constexpr int64_t kWorkerGone = INT64_MAX;

// The slowest clock of the workers not lost (0 when none is left).
int64_t slowest_clock(shard_actor self) {
  int64_t slowest = kWorkerGone;
  for (auto c : self->state.clocks) slowest = std::min(slowest, c);
  return slowest == kWorkerGone ? 0 : slowest;
}

int64_t visible_step(shard_actor self) {
  return self->state.consistency.mode() == pb::Consistency::SYNC ? self->state.step : slowest_clock(self);
}

bool pull_ready(shard_actor self, const pb::Pull& p) {
  auto& c = self->state.consistency;
  switch (c.mode()) {
    case pb::Consistency::SYNC: return p.step() <= self->state.step;
    case pb::Consistency::BOUNDED_STALENESS: return p.step() - slowest_clock(self) <= int64_t(c.staleness());
    default: return true;
  }
}

caf::expected<pb::Values> read_values(shard_actor self, const pb::Pull& p) {
  auto& vars = self->state.vars;
  std::vector<variable*> chosen;
  if (p.names().empty()) {
    for (auto& [name, v] : vars) chosen.push_back(&v);
  } else {
    for (auto& name : p.names()) {
      auto v = find(self, name);
      if (!v) return v.error();
      chosen.push_back(*v);
    }
  }
  const bool ranged = p.offset() != 0 || p.count() != 0;
  if (ranged && chosen.size() != 1) return fail(self, errc::out_of_range, "a ranged pull names exactly one variable");
  pb::Values out;
  for (auto* v : chosen) {
    if (p.slot() > uint32_t(kernels::slot_count(v->kind)))
      return fail(self, errc::out_of_range, "'" + v->spec.name() + "': its optimizer has " +
                                                std::to_string(kernels::slot_count(v->kind)) + " slot(s), slot " +
                                                std::to_string(p.slot()) + " asked");
    const int64_t offset = p.offset(), count = p.count() == 0 ? v->size() - offset : p.count();
    if (auto err = check_range(self, v->spec.name(), offset, count, v->size())) return err;
    auto* t = out.add_tensors();
    t->set_name(v->spec.name());
    t->set_dtype(pb::FLOAT32);
    t->set_offset(offset);
    t->set_count(count);
    const float* from = p.slot() == 0 ? v->value.data() : v->slot(int(p.slot()) - 1);
    t->set_data(reinterpret_cast<const char*>(from + offset), size_t(count) * 4);
    t->set_slot(p.slot());
    out.add_versions(v->version);
  }
  out.set_step(visible_step(self));
  return out;
}

// SYNC: when every variable holds replicas_to_aggregate full gradients,
// apply their mean once and advance the step.
bool maybe_advance(shard_actor self) {
  auto& st = self->state;
  const int64_t replicas = st.consistency.replicas_to_aggregate();
  if (st.vars.empty()) return false;
  for (auto& [name, v] : st.vars)
    if (v.received < replicas * v.size()) return false;
  for (auto& [name, v] : st.vars) {
    for (auto& g : v.sum) g /= float(replicas);
    apply(v, 0, v.size(), v.sum.data());
    std::fill(v.sum.begin(), v.sum.end(), 0.0f);
    v.received = 0;
  }
  ++st.step;
  return true;
}

// BOUNDED_STALENESS: `worker` has finished `step`.
void advance_clock(shard_actor self, uint32_t worker, int64_t step) {
  auto& st = self->state;
  if (st.consistency.mode() == pb::Consistency::BOUNDED_STALENESS && worker < st.clocks.size())
    st.clocks[worker] = st.clocks[worker] == kWorkerGone ? step + 1 : std::max(st.clocks[worker], step + 1);
}

pb::PushAck apply_push(shard_actor self, const pb::Push& push) {
  auto& st = self->state;
  pb::PushAck ack;
  const bool sync = st.consistency.mode() == pb::Consistency::SYNC;
  if (sync && push.step() < st.step) {
    ack.set_stale(uint32_t(push.gradients_size()));
    st.stats.set_stale_dropped(st.stats.stale_dropped() + uint64_t(push.gradients_size()));
    return ack;
  }
  for (auto& g : push.gradients()) {
    if (seen_before(self, push, g.name(), g.offset())) {
      ack.set_duplicates(ack.duplicates() + 1);
      continue;
    }
    auto& v = st.vars.at(g.name());
    const float* grad = floats(self, g.data());
    if (sync) {
      if (v.sum.empty()) v.sum.assign(size_t(v.size()), 0.0f);
      for (int64_t i = 0; i < g.count(); ++i) v.sum[size_t(g.offset() + i)] += grad[i];
      v.received += g.count();
    } else {
      apply(v, g.offset(), g.count(), grad);
    }
    ack.set_applied(ack.applied() + 1);
  }
  st.stats.set_pushes_applied(st.stats.pushes_applied() + ack.applied());
  st.stats.set_duplicates(st.stats.duplicates() + ack.duplicates());
  advance_clock(self, push.worker(), push.step());
  return ack;
}

// Answers whatever waited for a step that has now come.
void release_waiters(shard_actor self) {
  auto& st = self->state;
  bool progress = true;
  while (progress) {
    progress = false;
    if (st.consistency.mode() == pb::Consistency::SYNC) {
      auto pushes = std::move(st.pushes);
      st.pushes.clear();
      for (auto& w : pushes) {
        if (w.request.step() > st.step) {
          st.pushes.push_back(std::move(w));
          continue;
        }
        unhold(st, w.from);
        w.promise.deliver(apply_push(self, w.request));
        progress = maybe_advance(self) || progress;
      }
    }
    auto pulls = std::move(st.pulls);
    st.pulls.clear();
    for (auto& w : pulls) {
      if (!pull_ready(self, w.request)) {
        st.pulls.push_back(std::move(w));
        continue;
      }
      unhold(st, w.from);
      auto values = read_values(self, w.request);
      if (values)
        w.promise.deliver(std::move(*values));
      else
        w.promise.deliver(values.error());
    }
  }
  st.stats.set_waiting(uint32_t(st.pulls.size() + st.pushes.size()));
}

// ---- handlers ----

caf::result<pb::Created> on_create(shard_actor self, const pb::CreateVariables& req) {
  if (auto err = admit(self, req, kCoordinator, "CreateVariables")) return err;
  auto& vars = self->state.vars;
  for (auto& spec : req.variables()) {
    auto problem = check_spec(spec);
    if (!problem.empty()) return fail(self, errc::bad_tensor, problem);
    auto i = vars.find(spec.name());
    if (i != vars.end() && !google::protobuf::util::MessageDifferencer::Equals(i->second.spec, spec))
      return fail(self, errc::bad_tensor, "variable '" + spec.name() + "' exists with another spec");
  }
  for (auto& spec : req.variables())
    if (vars.count(spec.name()) == 0) vars.emplace(spec.name(), make_variable(spec));
  pb::Created out;
  out.set_count(uint32_t(vars.size()));
  return out;
}

// SYNC and BOUNDED_STALENESS count workers: the id must be one of the job's.
caf::error check_worker(shard_actor self, uint32_t worker) {
  auto& c = self->state.consistency;
  if (c.mode() == pb::Consistency::ASYNC || worker < c.num_workers()) return caf::none;
  return fail(self, errc::out_of_range,
              "worker " + std::to_string(worker) + " outside the job's " + std::to_string(c.num_workers()) + " workers");
}

// A pull answered now, or held until its step comes.
caf::result<pb::Values> on_pull(shard_actor self, const pb::Pull& pull) {
  if (auto err = admit(self, pull, kReaders, "Pull")) return err;
  if (auto err = check_step(self, pull.step())) return err;
  if (pull_ready(self, pull)) return read_values(self, pull);
  auto from = hold(self, self->current_sender());
  if (!from) return from.error();
  auto promise = self->make_response_promise<pb::Values>();
  self->state.pulls.push_back({pull, promise, *from});
  return promise;
}

// A push applied now (its ack sent after the waiters it released were
// answered), or held until its step comes (SYNC).
caf::result<pb::PushAck> on_push(shard_actor self, const pb::Push& push) {
  auto& st = self->state;
  auto& c = st.consistency;
  if (auto err = admit(self, push, kWriters, "Push")) return err;
  if (auto err = check_worker(self, push.worker())) return err;
  if (auto err = check_steps(self, push)) return err;
  for (auto& g : push.gradients())
    if (auto err = check_slice(self, g)) return err;
  if (c.mode() == pb::Consistency::SYNC && push.step() > st.step) {
    auto from = hold(self, self->current_sender());
    if (!from) return from.error();
    auto promise = self->make_response_promise<pb::PushAck>();
    st.pushes.push_back({push, promise, *from});
    return promise;
  }
  auto promise = self->make_response_promise<pb::PushAck>();
  promise.deliver(apply_push(self, push));
  if (c.mode() == pb::Consistency::SYNC) maybe_advance(self);
  release_waiters(self);
  return promise;
}

caf::result<pb::Rows> on_sparse_pull(shard_actor self, const pb::SparsePull& req) {
  if (auto err = admit(self, req, kReaders, "SparsePull")) return err;
  auto v = find(self, req.name());
  if (!v) return v.error();
  pb::Rows out;
  out.set_name(req.name());
  out.set_dim(int32_t((*v)->row_size));
  for (auto id : req.ids())
    if (id < 0 || id >= (*v)->rows())
      return fail(self, errc::out_of_range,
                  "'" + req.name() + "': row " + std::to_string(id) + " outside [0, " + std::to_string((*v)->rows()) + ")");
  auto* data = out.mutable_data();
  data->resize(size_t(req.ids_size()) * size_t((*v)->row_size) * 4);
  for (int i = 0; i < req.ids_size(); ++i)
    std::memcpy(&(*data)[size_t(i) * size_t((*v)->row_size) * 4], (*v)->value.data() + req.ids(i) * (*v)->row_size,
                size_t((*v)->row_size) * 4);
  *out.mutable_ids() = req.ids();
  return out;
}

caf::result<pb::PushAck> on_sparse_push(shard_actor self, const pb::SparsePush& req) {
  if (auto err = admit(self, req, kWriters, "SparsePush")) return err;
  if (auto err = check_worker(self, req.worker())) return err;
  if (auto err = check_steps(self, req)) return err;
  auto& g = req.gradient();
  auto v = find(self, g.name());
  if (!v) return v.error();
  if (g.dim() != (*v)->row_size)
    return fail(self, errc::bad_tensor,
                "'" + g.name() + "': rows of " + std::to_string(g.dim()) + " floats, the variable's have " +
                    std::to_string((*v)->row_size));
  if (int64_t(g.data().size()) != int64_t(g.ids_size()) * g.dim() * 4)
    return fail(self, errc::bad_tensor, "'" + g.name() + "': " + std::to_string(g.data().size()) + " bytes for " +
                                            std::to_string(g.ids_size()) + " rows of " + std::to_string(g.dim()));
  for (auto id : g.ids())
    if (id < 0 || id >= (*v)->rows())
      return fail(self, errc::out_of_range,
                  "'" + g.name() + "': row " + std::to_string(id) + " outside [0, " + std::to_string((*v)->rows()) + ")");
  pb::PushAck ack;
  if (seen_before(self, req, g.name(), -1)) {
    ack.set_duplicates(1);
    self->state.stats.set_duplicates(self->state.stats.duplicates() + 1);
    return ack;
  }
  kernels::sparse_rows merged;  // duplicate ids summed, as TF does
  kernels::merge_rows(g.ids().data(), floats(self, g.data()), g.ids_size(), g.dim(), merged);
  auto& var = **v;
  ++var.version;
  var.params.step = int64_t(var.version);
  float* slots[2] = {nullptr, nullptr};
  for (int i = 0; i < kernels::slot_count(var.kind); ++i) slots[i] = var.slot(i);
  kernels::cpu_ops().apply_sparse(var.kind, var.params, int64_t(merged.ids.size()), g.dim(), merged.ids.data(),
                                  var.value.data(), slots, merged.rows.data());
  ack.set_applied(1);
  self->state.stats.set_pushes_applied(self->state.stats.pushes_applied() + 1);
  advance_clock(self, req.worker(), req.step());
  release_waiters(self);
  return ack;
}

caf::result<pb::Assigned> on_assign(shard_actor self, const pb::Assign& req) {
  if (auto err = admit(self, req, kCoordinator, "Assign")) return err;
  for (auto& s : req.values()) {
    if (auto err = check_slice(self, s)) return err;
    auto& v = self->state.vars.at(s.name());
    if (s.slot() > uint32_t(kernels::slot_count(v.kind)))
      return fail(self, errc::out_of_range, "'" + s.name() + "': its optimizer has " +
                                                std::to_string(kernels::slot_count(v.kind)) + " slot(s), slot " +
                                                std::to_string(s.slot()) + " assigned");
  }
  for (auto& s : req.values()) {
    auto& v = self->state.vars.at(s.name());
    float* into = s.slot() == 0 ? v.value.data() : v.slot(int(s.slot()) - 1);
    std::memcpy(into + s.offset(), s.data().data(), s.data().size());
    if (s.slot() == 0) v.version = s.version() > 0 ? s.version() : v.version + 1;
  }
  pb::Assigned out;
  out.set_count(uint32_t(req.values_size()));
  return out;
}

pb::ShardStats on_stats(shard_actor self) {
  auto& st = self->state;
  pb::ShardStats out = st.stats;
  out.set_variables(uint32_t(st.vars.size()));
  int64_t bytes = 0;
  for (auto& [name, v] : st.vars) bytes += v.size() * 4 * int64_t(1 + v.slots.size());
  out.set_bytes(bytes);
  out.set_step(visible_step(self));
  return out;
}

ps_shard_actor::behavior_type shard_behavior(shard_actor self, shard_options opts) {
  auto& st = self->state;
  st.index = opts.index;
  st.where = "ps shard " + std::to_string(opts.index) + ": ";
  st.consistency = std::move(opts.consistency);
  st.step = opts.first_step;
  st.peers = std::move(opts.peers);
  st.parent = opts.parent;
  // Stopping (its node exits): whatever waits for a step gets an error, not
  // silence. (Exits from anyone else never get here: shard_process.)
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    auto err = make_error(errc::unreachable, where(self) + "stopping");
    for (auto& w : self->state.pulls) w.promise.deliver(err);
    for (auto& w : self->state.pushes) w.promise.deliver(err);
    self->state.pulls.clear();
    self->state.pushes.clear();
    self->quit(msg.reason);
  });
  if (st.consistency.mode() == pb::Consistency::BOUNDED_STALENESS) st.clocks.assign(st.consistency.num_workers(), 0);
  return {
      [self](const pb::CreateVariables& req) { return on_create(self, req); },
      [self](const pb::Pull& req) { return on_pull(self, req); },
      [self](const pb::Push& req) { return on_push(self, req); },
      [self](const pb::SparsePull& req) { return on_sparse_pull(self, req); },
      [self](const pb::SparsePush& req) { return on_sparse_push(self, req); },
      [self](const pb::Assign& req) { return on_assign(self, req); },
      [self](const pb::SetLearningRate& req) -> caf::result<pb::LearningRateSet> {
        if (auto err = admit(self, req, kCoordinator, "SetLearningRate")) return err;
        if (!(req.learning_rate() > 0))
          return fail(self, errc::invalid_argument, "learning_rate must be > 0, got " + std::to_string(req.learning_rate()));
        pb::LearningRateSet out;
        for (auto& [name, v] : self->state.vars) v.params.lr = req.learning_rate();
        out.set_variables(uint32_t(self->state.vars.size()));
        return out;
      },
      [self](const pb::ShardStatsRequest& req) -> caf::result<pb::ShardStats> {
        if (auto err = admit(self, req, kCoordinator, "ShardStatsRequest")) return err;
        return on_stats(self);
      },
      // BOUNDED_STALENESS: a lost worker's clock stops holding the others
      // back until its respawn pushes (the steps of its pinned closures).
      [self](const pb::WorkerLost& lost) -> caf::result<pb::ShardStats> {
        if (auto err = admit(self, lost, kCoordinator, "WorkerLost")) return err;
        auto& st = self->state;
        if (st.consistency.mode() == pb::Consistency::BOUNDED_STALENESS && lost.worker() < st.clocks.size()) {
          st.clocks[lost.worker()] = kWorkerGone;
          release_waiters(self);
        }
        return on_stats(self);
      },
  };
}

// The shard's actor: an exit message from anyone but its node is dropped
// and counted before CAF acts on it (CAF 0.17 quits on any exit_reason::kill,
// and a connected peer can send one to any actor it has a handle of).
class shard_process : public caf::stateful_actor<shard_state, ps_shard_actor::base> {
 public:
  using super = caf::stateful_actor<shard_state, ps_shard_actor::base>;
  shard_process(caf::actor_config& cfg, shard_options opts) : super(cfg), opts_(std::move(opts)) {}
  behavior_type make_behavior() override { return shard_behavior(this, std::move(opts_)); }

 protected:
  using super::consume;
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    auto& msg = x.content();
    if (msg.match_elements<caf::exit_msg>() && msg.get_as<caf::exit_msg>(0).source != state.parent) {
      refuse(this, x.sender, errc::forbidden,
             "an exit message from " + caf::to_string(msg.get_as<caf::exit_msg>(0).source) + ", not from its node");
      return caf::invoke_message_result::dropped;
    }
    return super::consume(x);
  }

 private:
  shard_options opts_;
};

}  // namespace

std::string check_consistency(const pb::Consistency& c) {
  switch (c.mode()) {
    case pb::Consistency::SYNC:
      if (c.replicas_to_aggregate() < 1) return "sync: replicas_to_aggregate must be >= 1";
      if (c.num_workers() < c.replicas_to_aggregate()) return "sync: num_workers must be >= replicas_to_aggregate";
      return {};
    case pb::Consistency::BOUNDED_STALENESS:
      if (c.num_workers() < 1) return "bounded_staleness: num_workers must be >= 1";
      return {};
    default: return {};
  }
}

ps_shard_actor spawn_ps_shard(caf::actor_system& sys, shard_options opts) {
  return sys.spawn<shard_process>(std::move(opts));
}

}  // namespace actorps
