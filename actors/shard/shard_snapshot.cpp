// shard_core's whole state as one message, and a copy of it: how a new
// backup (ps_replicas = 2) starts where its primary is. And one variable
// shard's state in chunks, with the changes made while they travel: how a
// shard moves to another PS task (ps.proto MoveOut).
#include <algorithm>
#include <cstring>

#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "actors/shard/shard_core.hpp"
#include "kernels/ops.hpp"

namespace actorps {
namespace {

std::string bytes_of(const kernels::tensor& t) {
  return {reinterpret_cast<const char*>(t.data()), size_t(t.size()) * sizeof(float)};
}

// The push keys applied (of variable `only`'s slices, when given).
template <class Key, class Map>
void save_seen(const Map& seen, google::protobuf::RepeatedPtrField<pb::ShardSnapshot::Seen>& out,
               const std::string* only = nullptr) {
  for (auto& [key, steps] : seen) {
    pb::ShardSnapshot::Seen s;
    s.set_key(uint64_t(key));
    for (auto& [step, slices] : steps) {
      pb::ShardSnapshot::Applied a;
      a.set_step(step);
      for (auto& [name, offset] : slices)
        if (only == nullptr || name == *only) {
          a.add_names(name);
          a.add_offsets(offset);
        }
      if (only == nullptr || a.names_size() > 0) *s.add_steps() = std::move(a);
    }
    if (only == nullptr || s.steps_size() > 0) *out.Add() = std::move(s);
  }
}

template <class Key, class Map>
void load_seen(const google::protobuf::RepeatedPtrField<pb::ShardSnapshot::Seen>& in, Map& seen) {
  for (auto& s : in) {
    auto& steps = seen[Key(s.key())];
    for (auto& a : s.steps())
      for (int i = 0; i < a.names_size() && i < a.offsets_size(); ++i)
        steps[a.step()].emplace(a.names(i), a.offsets(i));
  }
}

}  // namespace

pb::ShardSnapshot shard_core::snapshot() const {
  pb::ShardSnapshot out;
  for (auto& [name, v] : vars_) {
    auto& s = *out.add_variables();
    *s.mutable_spec() = v.spec;
    if (v.table) *s.mutable_table() = table_rows(name, v);
    s.set_value(bytes_of(v.value));
    for (auto& slot : v.slots) s.add_slots(bytes_of(slot));
    s.set_version(v.version);
    s.set_learning_rate(v.params.lr);
  }
  save_seen<uint64_t>(seen_closures_, *out.mutable_closures());
  save_seen<uint32_t>(seen_workers_, *out.mutable_workers());
  for (auto& [worker, incarnation] : live_incarnation_) (*out.mutable_incarnations())[worker] = incarnation;
  *out.mutable_stats() = stats_;
  for (auto& [name, v] : vars_)  // a table's counters: a backup's admitted = evicted + rows holds too
    if (v.table) table_stats(name, v, *out.mutable_stats());
  return out;
}

caf::error shard_core::restore(const pb::ShardSnapshot& snap) {
  if (!vars_.empty()) return error(errc::invalid_argument, "holds variables already: a snapshot starts a shard afresh");
  pb::CreateVariables create;
  for (auto& s : snap.variables()) {
    int64_t elements = 1;
    for (auto d : s.spec().shape()) elements *= std::max<int64_t>(d, 0);
    const auto kind = static_cast<kernels::optimizer_kind>(s.spec().optimizer().kind());
    auto fits = [&](const std::string& b) { return b.size() == size_t(elements) * sizeof(float); };
    bool ok = fits(s.value()) && s.slots_size() == kernels::slot_count(kind);
    for (auto& slot : s.slots()) ok = ok && fits(slot);
    if (s.spec().has_dynamic()) ok = s.value().empty() && s.slots_size() == 0;  // its rows: s.table
    if (!ok)
      return error(errc::bad_tensor, "snapshot of '" + s.spec().name() + "': value or slots do not fit its spec");
    *create.add_variables() = s.spec();
  }
  if (auto created = this->create(create); !created) return created.error();
  for (auto& s : snap.variables()) {
    auto& v = vars_.at(s.spec().name());
    if (v.table) {
      pb::TableLoad all;
      *all.mutable_data() = s.table();
      all.set_first(true);
      if (auto loaded = load_table(all); !loaded) return loaded.error();
      import_table_counts(v, snap);
    }
    std::memcpy(v.value.data(), s.value().data(), s.value().size());
    for (int i = 0; i < s.slots_size(); ++i)
      std::memcpy(v.slots[size_t(i)].data(), s.slots(i).data(), s.slots(i).size());
    v.version = s.version();
    v.params.lr = s.learning_rate();
  }
  load_seen<uint64_t>(snap.closures(), seen_closures_);
  load_seen<uint32_t>(snap.workers(), seen_workers_);
  for (auto& [closure, steps] : seen_closures_)  // a whole shard's keys: their examples are in its stats
    for (auto& [step, slices] : steps) counted_closures_[closure].insert(step);
  for (auto& [worker, incarnation] : snap.incarnations()) live_incarnation_[worker] = incarnation;
  stats_ = snap.stats();
  stats_.clear_tables();  // (stats() adds each table's own)
  return caf::none;
}

// ---- moves ----

namespace {

constexpr int64_t kLogReplyBytes = 1 << 20;  // of tensors per CATCH_UP answer (at least one change)

int64_t tensor_bytes(const pb::MoveChange& c) {
  if (c.has_push()) return int64_t(c.push().gradients(0).data().size());
  if (c.has_sparse_push()) return int64_t(c.sparse_push().gradient().data().size());
  return int64_t(c.assign().data().size());
}

}  // namespace

void shard_core::log_change(pb::MoveChange change) {
  moving_->log_bytes += tensor_bytes(change);
  moving_->log.push_back(std::move(change));
  if (moving_->log_bytes <= kMaxMoveLog) return;
  spdlog::error("{}gave up moving '{}': {} bytes of changes waited to be handed over", where_, moving_->name,
                moving_->log_bytes);
  moving_.reset();
}

pb::MoveData shard_core::drain_log() {
  pb::MoveData out;
  moving_->drained = true;
  auto& log = moving_->log;
  for (int64_t bytes = 0; !log.empty() && (out.log_size() == 0 || bytes < kLogReplyBytes); log.pop_front()) {
    bytes += tensor_bytes(log.front());
    moving_->log_bytes -= tensor_bytes(log.front());
    *out.add_log() = std::move(log.front());
  }
  out.set_more(!log.empty());
  return out;
}

caf::expected<pb::MoveData> shard_core::begin_move(const std::string& name) {
  if (consistency_.mode() != pb::Consistency::ASYNC)
    return error(errc::invalid_argument,
                 "moves need consistency async (sync and bounded_staleness count steps "
                 "per shard)");
  // The same shard's BEGIN again: a copy of the one answered (nothing taken
  // from the log since: the frozen copy and the log still make the shard),
  // or a retry of a move the coordinator gave up and whose ABORT was lost.
  if (moving_ && moving_->name == name && !moving_->finished) {
    if (!moving_->drained) return moving_->begun;
    moving_.reset();
  }
  if (moving_) return error(errc::busy, "moving '" + moving_->name + "' already: one move at a time");
  auto v = find(name);
  if (!v) return v.error();
  outgoing out;
  out.name = name;
  auto freeze = [&](const kernels::tensor& t) {
    kernels::tensor copy({t.size()});
    std::memcpy(copy.data(), t.data(), size_t(t.size()) * sizeof(float));
    out.frozen.push_back(std::move(copy));
  };
  pb::MoveData data;
  auto& header = *data.mutable_header();
  if ((*v)->table) {
    out.table = freeze_table(name, **v, *header.mutable_stats());
  } else {
    freeze((*v)->value);
    for (auto& slot : (*v)->slots) freeze(slot);
  }
  auto& var = *header.add_variables();
  *var.mutable_spec() = (*v)->spec;
  var.set_version((*v)->version);
  var.set_learning_rate((*v)->params.lr);
  save_seen<uint64_t>(seen_closures_, *header.mutable_closures(), &name);
  save_seen<uint32_t>(seen_workers_, *header.mutable_workers(), &name);
  for (auto& [worker, incarnation] : live_incarnation_) (*header.mutable_incarnations())[worker] = incarnation;
  out.begun = data;
  moving_ = std::move(out);
  return data;
}

caf::expected<pb::MoveData> shard_core::read_frozen(const pb::MoveOut& req) const {
  if (moving_->table) return read_frozen_table(req);
  const auto& copy = moving_->frozen;
  if (req.slot() >= copy.size())
    return error(errc::out_of_range, "'" + req.name() + "': slot " + std::to_string(req.slot()) + " of its " +
                                         std::to_string(copy.size() - 1) + " optimizer slot(s) read");
  const auto& t = copy[req.slot()];
  if (auto err = check_range(req.name(), req.offset(), req.count(), t.size())) return err;
  pb::MoveData out;
  auto& chunk = *out.mutable_chunk();
  chunk.set_name(req.name());
  chunk.set_dtype(pb::FLOAT32);
  chunk.set_offset(req.offset());
  chunk.set_count(req.count());
  chunk.set_slot(req.slot());
  assign_floats(chunk.mutable_data(), t.data() + req.offset(), req.count());
  return out;
}

caf::expected<pb::MoveData> shard_core::move_out(const pb::MoveOut& req, bool replica) {
  const auto& name = req.name();
  const bool mine = moving_ && moving_->name == name;
  auto no_move = [&] { return error(errc::invalid_argument, "no move of '" + name + "' under way here"); };
  pb::MoveData out;
  switch (req.step()) {
    case pb::MoveOut::BEGIN: return begin_move(name);
    case pb::MoveOut::SPLIT: return split(req);
    case pb::MoveOut::READ:
      if (!mine) return no_move();
      return read_frozen(req);
    case pb::MoveOut::CATCH_UP:
      if (!mine) return no_move();
      return drain_log();
    case pb::MoveOut::FINISH:
      if (replica && vars_.count(name) > 0) {  // a backup marks only
        moved_[name] = req.to_ps();
        return out;
      }
      if (!mine || moving_->finished) return no_move();
      moving_->finished = true;
      moved_[name] = req.to_ps();
      out.set_version(vars_.at(name).version);
      return out;
    case pb::MoveOut::DROP:
      if (moved_.count(name) == 0) return error(errc::invalid_argument, "'" + name + "' has not moved: not dropped");
      vars_.erase(name);
      if (mine) moving_.reset();
      return out;
    case pb::MoveOut::ABORT:
      if (vars_.count(name) == 0) return error(errc::unknown_variable, "no variable '" + name + "' on this shard");
      moved_.erase(name);
      if (mine) moving_.reset();
      return out;
    default: return error(errc::invalid_argument, "unknown MoveOut step " + std::to_string(int(req.step())));
  }
}

namespace {

// Rows [first, first + rows) of `t` (rows of `row_size`) as a tensor of `shape`.
kernels::tensor rows_of(const kernels::tensor& t, int64_t first, int64_t rows, int64_t row_size,
                        std::vector<int64_t> shape) {
  shape[0] = rows;
  kernels::tensor out(shape);
  std::memcpy(out.data(), t.data() + first * row_size, size_t(rows * row_size) * sizeof(float));
  return out;
}

}  // namespace

// Rows [at, rows) of `req.name()` become variable `req.new_name()`, with
// their slots, the update count, the learning rate and the push keys of
// the old shard: a closure that pushed to the whole shard before and runs
// again over the new routing finds its push applied on both parts. Sent
// again (a lost answer), the same split is answered as done.
caf::expected<pb::MoveData> shard_core::split(const pb::MoveOut& req) {
  const auto &name = req.name(), &into = req.new_name();
  const int64_t at = req.offset();
  if (auto done = split_off_.find(into); done != split_off_.end() && done->second == std::make_pair(name, at))
    return pb::MoveData{};
  if (consistency_.mode() != pb::Consistency::ASYNC)
    return error(errc::invalid_argument, "splits need consistency async (sync counts gradients per shard)");
  auto v = find(name);
  if (!v) return v.error();
  auto& var = **v;
  if (moving_ && moving_->name == name) return error(errc::busy, "'" + name + "' is moving: not split");
  if (into.empty() || vars_.count(into) > 0 || moved_.count(into) > 0)
    return error(errc::invalid_argument,
                 "split of '" + name + "': the new shard needs a name not in use, got '" + into + "'");
  if (var.spec.shape_size() < 2 || at <= 0 || at >= var.rows())
    return error(errc::out_of_range, "'" + name + "': a split needs a table and a row in (0, " +
                                         std::to_string(var.rows()) + "), got " + std::to_string(at));
  const std::vector<int64_t> shape(var.spec.shape().begin(), var.spec.shape().end());
  const int64_t rows = var.rows();
  pb::VariableSpec spec = var.spec;
  spec.set_name(into);
  spec.set_shape(0, rows - at);
  spec.set_first_row(var.spec.first_row() + at);
  variable tail = make_variable(spec);
  tail.version = var.version;
  tail.params = var.params;
  var.spec.set_shape(0, at);
  if (var.table) {
    split_table(var, tail);
  } else {
    tail.value = rows_of(var.value, at, rows - at, var.row_size, shape);
    var.value = rows_of(var.value, 0, at, var.row_size, shape);
    for (size_t k = 0; k < var.slots.size(); ++k) {
      tail.slots[k] = rows_of(var.slots[k], at, rows - at, var.row_size, shape);
      var.slots[k] = rows_of(var.slots[k], 0, at, var.row_size, shape);
    }
  }
  var.load = range_load(at, var.row_size);
  auto copy_keys = [&](auto& seen) {
    for (auto& [key, steps] : seen)
      for (auto& [step, slices] : steps) {
        std::vector<std::pair<std::string, int64_t>> mine;
        for (auto& [n, offset] : slices)
          if (n == name) mine.emplace_back(into, offset);
        slices.insert(mine.begin(), mine.end());
      }
  };
  copy_keys(seen_closures_);
  copy_keys(seen_workers_);
  auto& made = vars_.emplace(into, std::move(tail)).first->second;
  if (load_metrics_.requests != nullptr) {
    made.load.observe(*load_metrics_.requests, *load_metrics_.bytes, load_metrics_.shard, into);
    var.load.observe(*load_metrics_.requests, *load_metrics_.bytes, load_metrics_.shard, name);
  }
  rows_before_split_.try_emplace(name, rows);
  split_off_[into] = {name, at};
  return pb::MoveData{};
}

// A coordinator restarted from a checkpoint asks for the shards of its
// first layout: `held` whole again as before it was split (its values
// come from the checkpoint).
bool shard_core::whole_again(const pb::VariableSpec& held, const pb::VariableSpec& wanted) const {
  auto before = rows_before_split_.find(held.name());
  if (before == rows_before_split_.end() || wanted.shape_size() == 0 || wanted.shape(0) != before->second) return false;
  auto whole = held;
  whole.set_shape(0, before->second);
  return google::protobuf::util::MessageDifferencer::Equals(whole, wanted);
}

caf::error shard_core::import(const pb::ShardSnapshot& header) {
  if (header.variables_size() != 1) return error(errc::invalid_argument, "a moved shard's header holds one variable");
  const auto& var = header.variables(0);
  const auto& name = var.spec().name();
  if (vars_.count(name) > 0) return error(errc::invalid_argument, "holds '" + name + "' already: not moved here");
  pb::CreateVariables create;
  *create.add_variables() = var.spec();
  if (auto created = this->create(create); !created) return created.error();
  moved_.erase(name);  // moved back here
  auto& v = vars_.at(name);
  v.version = var.version();
  v.params.lr = var.learning_rate();
  if (v.table) import_table_counts(v, header);
  load_seen<uint64_t>(header.closures(), seen_closures_);
  load_seen<uint32_t>(header.workers(), seen_workers_);
  for (auto& [worker, incarnation] : header.incarnations())
    live_incarnation_[worker] = std::max(live_incarnation_[worker], incarnation);
  return caf::none;
}

caf::error shard_core::replay(const google::protobuf::RepeatedPtrField<pb::MoveChange>& log) {
  for (auto& change : log) {
    if (change.has_push()) {
      if (auto err = check(change.push())) return err;
      apply(change.push());
    } else if (change.has_sparse_push()) {
      if (auto ack = apply_rows(change.sparse_push()); !ack) return ack.error();
    } else if (change.has_assign()) {
      pb::Assign one;
      *one.add_values() = change.assign();
      if (auto done = assign(one); !done) return done.error();
    }
  }
  return caf::none;
}

caf::expected<pb::MoveData> shard_core::move_in(const pb::MoveIn& req) {
  pb::MoveData out;
  switch (req.step()) {
    case pb::MoveIn::IMPORT:
      if (auto err = import(req.header())) return err;
      return out;
    case pb::MoveIn::WRITE: {
      if (req.has_table()) {
        if (auto err = write_table(req.table())) return err;
        return out;
      }
      const auto& c = req.chunk();
      if (auto err = check_slice(c)) return err;
      auto& v = vars_.at(c.name());
      if (c.slot() > uint32_t(v.slots.size()))
        return error(errc::out_of_range, "'" + c.name() + "': slot " + std::to_string(c.slot()) + " written");
      float* into = c.slot() == 0 ? v.value.data() : v.slot(int(c.slot()) - 1);
      std::memcpy(into + c.offset(), c.data().data(), c.data().size());
      return out;
    }
    case pb::MoveIn::REPLAY: {
      if (auto err = replay(req.log())) return err;
      auto v = find(req.name());
      if (!v) return v.error();
      out.set_version((*v)->version);
      return out;
    }
    case pb::MoveIn::ABORT: vars_.erase(req.name()); return out;
    default: return error(errc::invalid_argument, "unknown MoveIn step " + std::to_string(int(req.step())));
  }
}

}  // namespace actorps
