#include "actors/shard/shard_core.hpp"

#include <algorithm>
#include <cstring>

#include <google/protobuf/util/message_differencer.h>

#include "kernels/initializers.hpp"
#include "kernels/sparse.hpp"
#include "messages/tensor_bytes.hpp"

namespace actorps {
namespace {

using kernels::optimizer_kind;

constexpr int64_t kRememberedSteps = 64;      // per worker or closure, for duplicate detection
constexpr size_t kRememberedClosures = 4096;  // closures in flight are far fewer
// Step numbers a peer sends: non-negative and far from overflowing when
// the shard adds to them (clocks, staleness).
constexpr int64_t kMaxStep = int64_t(1) << 60;
// BOUNDED_STALENESS: a lost worker's clock, until its respawn pushes again.
constexpr int64_t kWorkerGone = INT64_MAX;

// errc::bad_tensor, `where` (the shard) and the variable named, when `v`
// cannot be created.
caf::error check_spec(const pb::VariableSpec& v, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return make_error(errc::bad_tensor, where + (v.name().empty() ? what : "variable '" + v.name() + "': " + what));
  };
  if (v.name().empty()) return bad("a variable needs a name");
  if (v.dtype() != pb::FLOAT32) return bad("dtype must be FLOAT32");
  for (auto d : v.shape())
    if (d < 1) return bad("dimensions must be >= 1");
  if (v.full_shape_size() != v.shape_size()) return bad("full_shape rank differs from shape");
  for (int i = 1; i < v.shape_size(); ++i)
    if (v.full_shape(i) != v.shape(i)) return bad("only axis 0 may be partitioned");
  if (v.shape_size() > 0 && (v.first_row() < 0 || v.first_row() + v.shape(0) > v.full_shape(0)))
    return bad("rows [first_row, first_row + shape[0]) outside full_shape[0]");
  if (v.optimizer().learning_rate() <= 0) return bad("learning_rate must be > 0");
  if (v.has_dynamic()) {
    if (v.shape_size() != 2 || v.full_shape(0) != kernels::kVirtualRows)
      return bad("a dynamic table is [2^31 virtual rows, dim], split along its virtual rows");
    if (v.dynamic().min_count() > 255) return bad("dynamic.min_count must be in [1, 255]");
    if (v.optimizer().kind() == pb::Optimizer::ACCUMULATE) return bad("a dynamic table is trained");
  }
  return caf::none;
}

}  // namespace

kernels::initializer initializer_of(const pb::Initializer& i) {
  kernels::initializer out;
  out.type = static_cast<kernels::initializer::kind>(i.kind());
  out.value = i.value();
  out.low = i.low(), out.high = i.high();
  out.mean = i.mean(), out.stddev = i.stddev();
  out.seed = i.seed();
  return out;
}

kernels::optimizer_params optimizer_params_of(const pb::Optimizer& o) {
  kernels::optimizer_params p;
  p.lr = o.learning_rate();
  p.momentum = o.momentum();
  p.nesterov = o.nesterov();
  if (o.beta1() > 0) p.beta1 = o.beta1();
  if (o.beta2() > 0) p.beta2 = o.beta2();
  if (o.epsilon() > 0) p.epsilon = o.epsilon();
  if (o.initial_accumulator() > 0) p.initial_accumulator = o.initial_accumulator();
  p.l1 = o.l1();
  p.l2 = o.l2();
  if (o.has_lr_power()) p.lr_power = o.lr_power();  // unset: -0.5; 0 is a fixed rate
  p.beta = o.beta();
  return p;
}

shard_core::shard_core(uint32_t index, pb::Consistency consistency, int64_t first_step)
    : consistency_(std::move(consistency)), where_("ps shard " + std::to_string(index) + ": "), step_(first_step) {
  if (consistency_.mode() == pb::Consistency::BOUNDED_STALENESS) clocks_.assign(consistency_.num_workers(), 0);
}

caf::error shard_core::error(errc code, const std::string& what) const { return make_error(code, where_ + what); }

// ---- variables ----

shard_core::variable shard_core::make_variable(const pb::VariableSpec& spec) {
  variable v;
  v.spec = spec;
  std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
  std::vector<int64_t> full(spec.full_shape().begin(), spec.full_shape().end());
  for (size_t i = 1; i < shape.size(); ++i) v.row_size *= shape[i];
  v.load = range_load(v.rows(), v.row_size);
  v.kind = static_cast<optimizer_kind>(spec.optimizer().kind());
  v.params = optimizer_params_of(spec.optimizer());
  if (spec.has_dynamic()) {
    v.table = make_table(v);
    v.by_rows = true;  // never part of a SYNC step's dense sums
    return v;
  }
  v.value = kernels::tensor(shape);
  kernels::initialize_rows(initializer_of(spec.initializer()), full, spec.first_row(), v.rows(), v.value.data());
  for (int i = 0; i < kernels::slot_count(v.kind); ++i) {
    v.slots.emplace_back(shape);
    if (const float start = kernels::initial_slot_value(v.kind, i, v.params); start != 0)
      std::fill_n(v.slots.back().data(), v.size(), start);
  }
  return v;
}

caf::expected<pb::Created> shard_core::create(const pb::CreateVariables& req) {
  for (auto& spec : req.variables()) {
    if (auto err = check_spec(spec, where_)) return err;
    auto i = vars_.find(spec.name());
    if (i != vars_.end() && !google::protobuf::util::MessageDifferencer::Equals(i->second.spec, spec) &&
        !whole_again(i->second.spec, spec))
      return error(errc::bad_tensor, "variable '" + spec.name() + "' exists with another spec");
  }
  for (auto& spec : req.variables()) {
    moved_.erase(spec.name());  // placed here again (a restarted coordinator's layout)
    if (auto i = vars_.find(spec.name()); i != vars_.end() && whole_again(i->second.spec, spec)) {
      vars_.erase(i);
      rows_before_split_.erase(spec.name());
    }
    if (vars_.count(spec.name()) > 0) continue;
    auto& v = vars_.emplace(spec.name(), make_variable(spec)).first->second;
    if (load_metrics_.requests != nullptr)
      v.load.observe(*load_metrics_.requests, *load_metrics_.bytes, load_metrics_.shard, spec.name());
  }
  pb::Created out;
  out.set_count(uint32_t(vars_.size()));
  return out;
}

// ---- validation (nothing changes until a whole request passed) ----

caf::expected<shard_core::variable*> shard_core::find(const std::string& name) {
  if (auto to = moved_.find(name); to != moved_.end())
    return error(errc::moved, "'" + name + "' moved to ps:" + std::to_string(to->second));
  auto i = vars_.find(name);
  if (i == vars_.end()) return error(errc::unknown_variable, "no variable '" + name + "' on this shard");
  return &i->second;
}

// Elements [offset, offset + count) of a variable of `size`, compared
// without computing offset + count (a peer's numbers may overflow it).
caf::error shard_core::check_range(const std::string& name, int64_t offset, int64_t count, int64_t size) const {
  if (offset >= 0 && offset <= size && count >= 1 && count <= size - offset) return caf::none;
  return error(errc::out_of_range, "'" + name + "': " + std::to_string(count) + " elements at offset " +
                                       std::to_string(offset) + " outside its " + std::to_string(size));
}

caf::error shard_core::check_step(int64_t step) const {
  if (step >= 0 && step < kMaxStep) return caf::none;
  return error(errc::out_of_range, "step " + std::to_string(step) + " outside [0, 2^60)");
}

// A push's step, and its closure key's step when it has one.
template <class Push>
caf::error shard_core::check_steps(const Push& push) const {
  if (auto err = check_step(push.step())) return err;
  return push.has_closure_step() ? check_step(push.closure_step().step()) : caf::none;
}

// SYNC and BOUNDED_STALENESS count workers: the id must be one of the job's.
caf::error shard_core::check_worker(uint32_t worker) const {
  if (consistency_.mode() == pb::Consistency::ASYNC || worker < consistency_.num_workers()) return caf::none;
  return error(errc::out_of_range, "worker " + std::to_string(worker) + " outside the job's " +
                                       std::to_string(consistency_.num_workers()) + " workers");
}

caf::error shard_core::check_slice(const pb::TensorSlice& s) {
  auto v = find(s.name());
  if (!v) return v.error();
  if (auto err = refuse_dense(**v)) return err;
  if (s.dtype() != pb::FLOAT32) return error(errc::bad_tensor, "'" + s.name() + "': dtype must be FLOAT32");
  if (auto err = check_range(s.name(), s.offset(), s.count(), (*v)->size())) return err;
  if (int64_t(s.data().size()) != s.count() * 4)
    return error(errc::bad_tensor, "'" + s.name() + "': " + std::to_string(s.data().size()) + " bytes for " +
                                       std::to_string(s.count()) + " float32 elements (want " +
                                       std::to_string(s.count() * 4) + ")");
  return caf::none;
}

caf::error shard_core::check_rows(const std::string& name, const google::protobuf::RepeatedField<int64_t>& ids,
                                  const variable& v) const {
  for (auto id : ids) {
    if (id >= 0 && id < v.rows()) continue;
    if (auto before = rows_before_split_.find(name);
        before != rows_before_split_.end() && id >= 0 && id < before->second)  // only a bad row looks up splits
      return error(errc::moved, "'" + name + "': row " + std::to_string(id) + " is in a shard split off from it");
    return error(errc::out_of_range,
                 "'" + name + "': row " + std::to_string(id) + " outside [0, " + std::to_string(v.rows()) + ")");
  }
  return caf::none;
}

caf::error shard_core::check(const pb::Pull& pull) const { return check_step(pull.step()); }

caf::error shard_core::check(const pb::Push& push) {
  if (auto err = check_worker(push.worker())) return err;
  if (auto err = check_steps(push)) return err;
  for (auto& g : push.gradients())
    if (auto err = check_slice(g)) return err;
  return caf::none;
}

// ---- reading ----

int64_t shard_core::slowest_clock() const {
  int64_t slowest = kWorkerGone;
  for (auto c : clocks_) slowest = std::min(slowest, c);
  return slowest == kWorkerGone ? 0 : slowest;  // 0 when no worker is left
}

int64_t shard_core::visible_step() const {
  return consistency_.mode() == pb::Consistency::SYNC ? step_ : slowest_clock();
}

// ---- applying ----

void shard_core::apply_dense(variable& v, int64_t offset, int64_t count, const float* grad) {
  if (offset == 0) ++v.version;  // once per gradient (slices of one gradient arrive in order)
  v.params.step = int64_t(std::max<uint64_t>(v.version, 1));
  float* slots[2] = {nullptr, nullptr};
  for (int i = 0; i < kernels::slot_count(v.kind); ++i) slots[i] = v.slot(i) + offset;
  kernels::cpu_ops().apply_dense(v.kind, step_params(v.params, v.spec.optimizer(), v.staleness), count,
                                 v.value.data() + offset, slots, grad);
}

// Whether `push` (a Push or SparsePush) already brought the slice at
// (name, offset) of its key; counts the key's examples when it is new here.
template <class Push>
bool shard_core::seen_before(const Push& push, const std::string& name, int64_t offset) {
  steps_seen* steps = nullptr;
  int64_t step = push.step();
  if (push.has_closure_step()) {
    const auto& key = push.closure_step();
    if (auto live = live_incarnation_.find(push.worker());
        live != live_incarnation_.end() && key.incarnation() < live->second)
      return true;  // from a worker declared lost: its closures ran again elsewhere
    // Closure ids grow: one older than every remembered closure was applied long ago.
    if (seen_closures_.size() >= kRememberedClosures && key.closure() < seen_closures_.begin()->first) return true;
    steps = &seen_closures_[key.closure()];
    while (seen_closures_.size() > kRememberedClosures) seen_closures_.erase(seen_closures_.begin());
    step = key.step();
    if (counted_closures_[key.closure()].insert(step).second)
      stats_.set_examples_applied(stats_.examples_applied() + key.examples());
    while (counted_closures_.size() > kRememberedClosures) counted_closures_.erase(counted_closures_.begin());
  } else {
    steps = &seen_workers_[push.worker()];
  }
  if (!steps->empty() && step < steps->rbegin()->first - kRememberedSteps) return true;  // too old to be new
  bool fresh = (*steps)[step].emplace(name, offset).second;
  while (steps->size() > size_t(kRememberedSteps)) steps->erase(steps->begin());
  return !fresh;
}

// BOUNDED_STALENESS: `worker` has finished `step`.
void shard_core::advance_clock(uint32_t worker, int64_t step) {
  if (consistency_.mode() == pb::Consistency::BOUNDED_STALENESS && worker < clocks_.size())
    clocks_[worker] = clocks_[worker] == kWorkerGone ? step + 1 : std::max(clocks_[worker], step + 1);
}

bool shard_core::waits(const pb::Push& push) const {
  return consistency_.mode() == pb::Consistency::SYNC && push.step() > step_;
}

pb::PushAck shard_core::apply(const pb::Push& push) {
  pb::PushAck ack;
  const bool sync = consistency_.mode() == pb::Consistency::SYNC;
  if (sync && push.step() < step_) {
    ack.set_stale(uint32_t(push.gradients_size()));
    stats_.set_stale_dropped(stats_.stale_dropped() + uint64_t(push.gradients_size()));
    return ack;
  }
  for (auto& g : push.gradients()) {
    if (seen_before(push, g.name(), g.offset())) {
      ack.set_duplicates(ack.duplicates() + 1);
      continue;
    }
    auto& v = vars_.at(g.name());
    const float* grad = floats(g.data());
    v.load.elements(g.offset(), g.count());
    if (g.offset() == 0) {  // the gradient's first slice: its staleness holds for the rest
      v.staleness = g.has_staleness() ? g.staleness() : staleness_of(v, push.worker(), push.step());
      if (v.staleness && staleness_ != nullptr) staleness_->observe(double(*v.staleness));
      if (sync) v.staleness.reset();  // the step's mean of fresh gradients: nothing to scale by
    }
    if (sync) {
      if (v.sum.empty()) v.sum.assign(size_t(v.size()), 0.0f);
      for (int64_t i = 0; i < g.count(); ++i) v.sum[size_t(g.offset() + i)] += grad[i];
      v.received += g.count();
    } else {
      apply_dense(v, g.offset(), g.count(), grad);
    }
    if (logging(g.name())) {
      pb::MoveChange change;
      auto& one = *change.mutable_push();
      one.set_worker(push.worker());
      one.set_step(push.step());
      *one.mutable_closure_step() = push.closure_step();
      *one.add_gradients() = g;
      log_change(std::move(change));
    }
    ack.set_applied(ack.applied() + 1);
  }
  stats_.set_pushes_applied(stats_.pushes_applied() + ack.applied());
  stats_.set_duplicates(stats_.duplicates() + ack.duplicates());
  advance_clock(push.worker(), push.step());
  return ack;
}

bool shard_core::advance() {
  const int64_t replicas = consistency_.replicas_to_aggregate();
  if (consistency_.mode() != pb::Consistency::SYNC) return false;
  bool whole = false;  // a variable the step waits for: without one, no step to finish
  for (auto& [name, v] : vars_) {
    if (v.by_rows) continue;
    if (v.received < replicas * v.size()) return false;
    whole = true;
  }
  if (!whole) return false;
  for (auto& [name, v] : vars_) {
    if (v.by_rows) continue;
    for (auto& g : v.sum) g /= float(replicas);
    apply_dense(v, 0, v.size(), v.sum.data());
    std::fill(v.sum.begin(), v.sum.end(), 0.0f);
    v.received = 0;
  }
  ++step_;
  return true;
}

caf::expected<pb::PushAck> shard_core::apply_rows(const pb::SparsePush& req) {
  if (auto err = check_worker(req.worker())) return err;
  if (auto err = check_steps(req)) return err;
  auto& g = req.gradient();
  auto v = find(g.name());
  if (!v) return v.error();
  if (g.dim() != (*v)->row_size)
    return error(errc::bad_tensor, "'" + g.name() + "': rows of " + std::to_string(g.dim()) +
                                       " floats, the variable's have " + std::to_string((*v)->row_size));
  if (int64_t(g.data().size()) != int64_t(g.ids_size()) * g.dim() * 4)
    return error(errc::bad_tensor, "'" + g.name() + "': " + std::to_string(g.data().size()) + " bytes for " +
                                       std::to_string(g.ids_size()) + " rows of " + std::to_string(g.dim()));
  if (auto err = (*v)->table ? check_ids(g.name(), g.ids(), **v) : check_rows(g.name(), g.ids(), **v)) return err;
  pb::PushAck ack;
  if (seen_before(req, g.name(), -1)) {
    ack.set_duplicates(1);
    stats_.set_duplicates(stats_.duplicates() + 1);
    return ack;
  }
  kernels::sparse_rows merged;  // duplicate ids summed, as TF does
  kernels::merge_rows(g.ids().data(), floats(g.data()), g.ids_size(), g.dim(), merged);
  // SYNC averages a step's gradients over its replicas, rows too: each
  // replica's share is applied as it comes (exact for plain SGD).
  if (consistency_.mode() == pb::Consistency::SYNC)
    for (auto& x : merged.rows) x /= float(consistency_.replicas_to_aggregate());
  auto& var = **v;
  std::vector<uint64_t> stale;  // of each merged row, when the rule needs it
  if (scales_rows(var)) stale = staleness_of_merged(g.ids().data(), row_staleness(var, req), merged);
  var.by_rows = true;
  ++var.version;
  var.params.step = int64_t(var.version);
  if (var.table) {
    apply_table(var, merged, stale);
  } else {
    var.load.rows(g.ids().data(), g.ids_size());
    float* slots[2] = {nullptr, nullptr};
    for (int i = 0; i < kernels::slot_count(var.kind); ++i) slots[i] = var.slot(i);
    step_rows(var.kind, var.params, var.spec.optimizer(), merged, stale, var.value.data(), slots);
  }
  if (scales_rows(var) && !var.table) {
    if (var.row_updates.empty()) var.row_updates.assign(size_t(var.rows()), 0);
    for (auto id : merged.ids) ++var.row_updates[size_t(id)];
  }
  if (logging(g.name())) {
    pb::MoveChange change;
    *change.mutable_sparse_push() = req;
    log_change(std::move(change));
  }
  ack.set_applied(1);
  stats_.set_pushes_applied(stats_.pushes_applied() + 1);
  advance_clock(req.worker(), req.step());
  return ack;
}

caf::expected<pb::Assigned> shard_core::assign(const pb::Assign& req) {
  for (auto& s : req.values()) {
    if (auto err = check_slice(s)) return err;
    auto& v = vars_.at(s.name());
    if (s.slot() > uint32_t(kernels::slot_count(v.kind)))
      return error(errc::out_of_range, "'" + s.name() + "': its optimizer has " +
                                           std::to_string(kernels::slot_count(v.kind)) + " slot(s), slot " +
                                           std::to_string(s.slot()) + " assigned");
  }
  for (auto& s : req.values()) {
    auto& v = vars_.at(s.name());
    float* into = s.slot() == 0 ? v.value.data() : v.slot(int(s.slot()) - 1);
    std::memcpy(into + s.offset(), s.data().data(), s.data().size());
    if (s.slot() == 0) v.version = s.version() > 0 ? s.version() : v.version + 1;
    if (logging(s.name())) {
      pb::MoveChange change;
      *change.mutable_assign() = s;
      log_change(std::move(change));
    }
  }
  pb::Assigned out;
  out.set_count(uint32_t(req.values_size()));
  return out;
}

caf::expected<pb::LearningRateSet> shard_core::set_learning_rate(const pb::SetLearningRate& req) {
  if (!(req.learning_rate() > 0))
    return error(errc::invalid_argument, "learning_rate must be > 0, got " + std::to_string(req.learning_rate()));
  for (auto& [name, v] : vars_) v.params.lr = req.learning_rate();
  pb::LearningRateSet out;
  out.set_variables(uint32_t(vars_.size()));
  return out;
}

void shard_core::worker_lost(uint32_t worker, uint64_t incarnation) {
  auto& live = live_incarnation_[worker];
  live = std::max(live, incarnation + 1);
  if (consistency_.mode() == pb::Consistency::BOUNDED_STALENESS && worker < clocks_.size())
    clocks_[worker] = kWorkerGone;
}

pb::ShardStats shard_core::stats() const {
  pb::ShardStats out = stats_;
  out.set_variables(uint32_t(vars_.size()));
  int64_t bytes = 0;
  for (auto& [name, v] : vars_) {
    bytes += v.size() * 4 * int64_t(1 + v.slots.size());
    if (v.table) bytes += table_stats(name, v, out);
  }
  out.set_bytes(bytes);
  out.set_step(visible_step());
  for (auto& [name, v] : vars_) v.load.fill(name, out);
  return out;
}

void shard_core::observe_load(metrics::family<metrics::counter>& requests, metrics::family<metrics::counter>& bytes,
                              const std::string& shard) {
  load_metrics_ = {&requests, &bytes, shard};
  for (auto& [name, v] : vars_) v.load.observe(requests, bytes, shard, name);
}

caf::error check_consistency(const pb::Consistency& c) {
  auto bad = [](const char* what) { return make_error(errc::invalid_argument, what); };
  switch (c.mode()) {
    case pb::Consistency::SYNC:
      if (c.replicas_to_aggregate() < 1) return bad("sync: replicas_to_aggregate must be >= 1");
      if (c.num_workers() < c.replicas_to_aggregate()) return bad("sync: num_workers must be >= replicas_to_aggregate");
      return caf::none;
    case pb::Consistency::BOUNDED_STALENESS:
      if (c.num_workers() < 1) return bad("bounded_staleness: num_workers must be >= 1");
      return caf::none;
    default: return caf::none;
  }
}

}  // namespace actorps
