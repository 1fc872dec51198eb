// A PS shard's state and rules without an actor: its variables (values and
// optimizer slots), validation, the optimizers, pushes applied once per
// key, SYNC sums and BOUNDED_STALENESS clocks (see ps_shard.hpp for the
// modes). Every request is validated whole before anything changes: a bad
// one gets a typed error naming what is wrong and leaves the shard as it
// was. Whether a request may be answered now or waits for a step is
// decided here (ready, waits); holding it is the actor's business.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/metrics/registry.hpp"
#include "actors/shard/dynamic_table.hpp"
#include "actors/shard/range_load.hpp"
#include "actors/shard/staleness.hpp"
#include "kernels/ops.hpp"
#include "kernels/tensor.hpp"
#include "messages/tensor_bytes.hpp"
#include "messages/wire.hpp"

namespace actorps {

class shard_core {
 public:
  /// The shard of PS task `index`; SYNC starts at `first_step` (a restored
  /// shard joins the others' step).
  shard_core(uint32_t index, pb::Consistency consistency, int64_t first_step);

  /// "ps shard <index>: ", the prefix of its errors.
  const std::string& where() const { return where_; }
  const pb::Consistency& consistency() const { return consistency_; }

  /// Creates the variables (an identical spec again is accepted).
  [[nodiscard]] caf::expected<pb::Created> create(const pb::CreateVariables& req);

  /// A pull's step is one a peer may send.
  [[nodiscard]] caf::error check(const pb::Pull& pull) const;
  /// SYNC: its step has come; BOUNDED_STALENESS: within the bound; ASYNC: always.
  bool ready(const pb::Pull& pull) const;
  [[nodiscard]] caf::expected<pb::Values> read(const pb::Pull& pull);

  /// A whole push checked: its worker, steps, variables, ranges and bytes.
  [[nodiscard]] caf::error check(const pb::Push& push);
  /// SYNC: it is for a step still to come.
  bool waits(const pb::Push& push) const;
  /// Applies a checked push (SYNC: adds it to its step's sums; a past
  /// step's is dropped as stale); a slice seen before is counted, not applied.
  pb::PushAck apply(const pb::Push& push);
  /// Writes into `push` the staleness of each gradient whose pull this
  /// shard remembers (TensorSlice.staleness, at offset 0; Rows.staleness),
  /// before it is applied and forwarded: backups and move targets, which
  /// saw no pulls, then apply the same step.
  void stamp(pb::Push& push) const;
  void stamp(pb::SparsePush& push) const;
  /// SYNC: once every variable pushed whole holds replicas_to_aggregate
  /// gradients, applies their mean and moves to the next step; whether it
  /// did. A variable pushed by rows (an embedding) applies each push as it
  /// comes and is not waited for.
  bool advance();

  [[nodiscard]] caf::expected<pb::Rows> read_rows(const pb::SparsePull& req);
  [[nodiscard]] caf::expected<pb::PushAck> apply_rows(const pb::SparsePush& req);
  [[nodiscard]] caf::expected<pb::Assigned> assign(const pb::Assign& req);
  /// A dynamic table's rows in pages, least recently updated first, and
  /// back (shard_dynamic.cpp; ps.proto TableRead, TableLoad).
  [[nodiscard]] caf::expected<pb::TableData> table_page(const pb::TableRead& req);
  [[nodiscard]] caf::expected<pb::TableLoaded> load_table(const pb::TableLoad& req);
  [[nodiscard]] caf::expected<pb::LearningRateSet> set_learning_rate(const pb::SetLearningRate& req);
  /// BOUNDED_STALENESS: the worker's clock stops holding the others back
  /// until its respawn pushes.
  void worker_lost(uint32_t worker, uint64_t incarnation);

  /// Where the staleness of each dense gradient goes from now on: the
  /// variable's updates between the values that worker pulled for that
  /// step and the gradient's apply (pulls and pushes name worker and step).
  void observe_staleness(metrics::histogram* h) { staleness_ = h; }
  /// Where each variable's load per row range goes from now on
  /// (range_load::observe), labelled with `shard`.
  void observe_load(metrics::family<metrics::counter>& requests, metrics::family<metrics::counter>& bytes,
                    const std::string& shard);

  pb::ShardStats stats() const;
  /// The dynamic table of variable shard `name`, for its metrics (one map
  /// look-up); nullptr when there is no such variable or it is not dynamic.
  const dynamic_table* table(const std::string& name) const {
    auto i = vars_.find(name);
    return i == vars_.end() ? nullptr : i->second.table.get();
  }
  /// Everything it holds, for a new replica (shard_snapshot.cpp); restore()
  /// makes an empty core that copy: the same values, slots, update counts,
  /// learning rates, applied push keys and counters.
  pb::ShardSnapshot snapshot() const;
  [[nodiscard]] caf::error restore(const pb::ShardSnapshot& snap);
  /// Moving a variable shard to another PS task (ps.proto MoveOut; in
  /// shard_snapshot.cpp, a dynamic table's pages in table_move.cpp). At
  /// the source: BEGIN freezes a copy and logs every change applied to
  /// the shard from then on; FINISH makes every request naming it an
  /// errc::moved naming the target. A `replica` (a
  /// backup, which gets its primary's FINISH, DROP and ABORT) only marks.
  /// SPLIT cuts a table's shard in two here (a backup too).
  [[nodiscard]] caf::expected<pb::MoveData> move_out(const pb::MoveOut& req, bool replica);
  /// A move's log outgrowing this many tensor bytes is given up (the
  /// coordinator that drains it is gone).
  static constexpr int64_t kMaxMoveLog = int64_t(1) << 30;
  /// At the target: the shard from BEGIN's header, its chunks, its logged changes.
  [[nodiscard]] caf::expected<pb::MoveData> move_in(const pb::MoveIn& req);

  /// How many requests the actor holds for a step (shown in stats).
  void set_waiting(uint32_t n) { stats_.set_waiting(n); }

 private:
  struct variable {
    pb::VariableSpec spec;
    kernels::tensor value;
    std::vector<kernels::tensor> slots;
    kernels::optimizer_kind kind = kernels::optimizer_kind::sgd;
    kernels::optimizer_params params;
    int64_t row_size = 1;
    uint64_t version = 0;
    range_load load{1, 1};                 // what its pulls and pushes touched
    std::vector<float> sum;                // SYNC: gradients of the current step
    int64_t received = 0;                  // SYNC: elements received this step
    bool by_rows = false;                  // pushed by rows (apply_rows): not part of SYNC's step
    pull_versions pulled;                  // for each worker's latest steps (staleness)
    std::vector<uint32_t> row_updates;     // scales_rows(): each row's update count
    std::optional<uint64_t> staleness;     // the gradient being applied's (its slice at offset 0 says)
    std::unique_ptr<dynamic_table> table;  // a dynamic table's rows (spec.dynamic set): `value` stays empty
    uint64_t rows_read = 0;                // a table's: rows its SparsePulls read

    int64_t size() const { return value.size(); }
    int64_t rows() const { return spec.shape_size() == 0 ? 1 : spec.shape(0); }
    float* slot(int i) { return slots[size_t(i)].data(); }
    /// The update counts of rows `ids`, 0 for rows never pushed.
    std::vector<uint32_t> row_counts(const google::protobuf::RepeatedField<int64_t>& ids) const;
  };
  // step -> (variable, offset) applied.
  using steps_seen = std::map<int64_t, std::set<std::pair<std::string, int64_t>>>;

  static variable make_variable(const pb::VariableSpec& spec);
  static void apply_dense(variable& v, int64_t offset, int64_t count, const float* grad);
  caf::error error(errc code, const std::string& what) const;
  caf::expected<variable*> find(const std::string& name);
  caf::error check_range(const std::string& name, int64_t offset, int64_t count, int64_t size) const;
  caf::error check_step(int64_t step) const;
  template <class Push>
  caf::error check_steps(const Push& push) const;
  caf::error check_worker(uint32_t worker) const;
  caf::error check_slice(const pb::TensorSlice& s);
  caf::error check_rows(const std::string& name, const google::protobuf::RepeatedField<int64_t>& ids,
                        const variable& v) const;
  // A dynamic table's (shard_dynamic.cpp): ids this shard's hash range
  // holds; rows read (their initial values where they have none); merged
  // gradient rows applied to the rows admitted, then eviction.
  caf::error check_ids(const std::string& name, const google::protobuf::RepeatedField<int64_t>& ids,
                       const variable& v) const;
  caf::error refuse_dense(const variable& v) const;
  /// Every row of dynamic table `v` (named `name`), as a page of all of them.
  static pb::TableData table_rows(const std::string& name, const variable& v);
  /// A split of table `from` (its spec already cut): the rows of the
  /// virtual rows `tail` holds go there, in their eviction order, with
  /// the admission sketch.
  static void split_table(variable& from, variable& tail);
  static std::unique_ptr<dynamic_table> make_table(const variable& v);
  /// Adds `table`'s figures to `out`; its bytes.
  static int64_t table_stats(const std::string& name, const variable& v, pb::ShardStats& out);
  void read_table(variable& v, const pb::SparsePull& req, std::string& data) const;
  void apply_table(variable& v, const kernels::sparse_rows& merged, const std::vector<uint64_t>& staleness);
  template <class Push>
  bool seen_before(const Push& push, const std::string& name, int64_t offset);
  std::optional<uint64_t> staleness_of(const variable& v, uint32_t worker, int64_t step) const;
  /// Each of `push`'s ids' staleness: its stamp, else from the pull this
  /// shard remembers; empty when neither is there.
  std::vector<uint64_t> row_staleness(const variable& v, const pb::SparsePush& push) const;
  /// Whether `v`'s rows step by their staleness (SCALE_LR, not sync): only
  /// then are row update counts and pulled rows kept.
  bool scales_rows(const variable& v) const;
  int64_t slowest_clock() const;
  int64_t visible_step() const;
  void advance_clock(uint32_t worker, int64_t step);
  const float* floats(const std::string& bytes) { return float_view(bytes, scratch_); }
  // A change applied to the shard being moved goes to its log.
  bool logging(const std::string& name) const { return moving_ && !moving_->finished && moving_->name == name; }
  void log_change(pb::MoveChange change);
  caf::expected<pb::MoveData> begin_move(const std::string& name);
  caf::expected<pb::MoveData> read_frozen(const pb::MoveOut& req) const;
  // A dynamic table's move (table_move.cpp): at BEGIN its rows in their
  // eviction order and its counters; pages of them; a page put in order at
  // the target; the counters the target's table starts from.
  static pb::TableData freeze_table(const std::string& name, const variable& v, pb::ShardStats& counters);
  caf::expected<pb::MoveData> read_frozen_table(const pb::MoveOut& req) const;
  caf::error write_table(const pb::TableData& page);
  static void import_table_counts(variable& v, const pb::ShardSnapshot& header);
  pb::MoveData drain_log();
  caf::error import(const pb::ShardSnapshot& header);
  caf::expected<pb::MoveData> split(const pb::MoveOut& req);
  bool whole_again(const pb::VariableSpec& held, const pb::VariableSpec& wanted) const;
  caf::error replay(const google::protobuf::RepeatedPtrField<pb::MoveChange>& log);

  pb::Consistency consistency_;
  std::string where_;
  std::map<std::string, variable> vars_;  // ordered: "all variables" come back in name order
  // Slices already applied, by push key (see pb::ClosureStep): per closure
  // (the most recent ones) or per worker, then per step (the most recent ones).
  std::map<uint64_t, steps_seen> seen_closures_;
  // The closure keys (closure -> steps) whose examples this shard counted
  // (ShardStats.examples_applied). Apart from seen_closures_: a variable
  // moved here brings the keys its source saw for it, whose examples this
  // shard counts when their own push for its other variables comes.
  std::map<uint64_t, std::set<int64_t>> counted_closures_;
  std::unordered_map<uint32_t, steps_seen> seen_workers_;
  std::unordered_map<uint32_t, uint64_t> live_incarnation_;  // per worker: older incarnations were lost
  int64_t step_ = 0;                                         // SYNC: the step being aggregated
  std::vector<int64_t> clocks_;                              // BOUNDED_STALENESS: per worker, last pushed step + 1
  std::vector<float> scratch_;                               // aligned copy of a gradient slice
  pb::ShardStats stats_;
  // The shard being moved away (one at a time): its copy as BEGIN froze it
  // (values, then slots; a dynamic table's rows), the changes applied
  // since, and whether FINISH came.
  struct outgoing {
    std::string name;
    std::vector<kernels::tensor> frozen;
    std::optional<pb::TableData> table;  // a dynamic table's: every row, least recently updated first
    std::deque<pb::MoveChange> log;
    int64_t log_bytes = 0;  // of the tensors in it
    bool finished = false;
    bool drained = false;  // a CATCH_UP took changes from the log
    pb::MoveData begun;    // BEGIN's answer, given again to a BEGIN that came twice
  };
  std::optional<outgoing> moving_;
  std::map<std::string, uint32_t> moved_;  // shards moved away: the ps task each went to
  // Shards split (MoveOut SPLIT): the rows each had before, and each part
  // split off, by name: its shard and the row it starts at there.
  std::map<std::string, int64_t> rows_before_split_;
  std::map<std::string, std::pair<std::string, int64_t>> split_off_;
  metrics::histogram* staleness_ = nullptr;
  struct {
    metrics::family<metrics::counter>* requests = nullptr;
    metrics::family<metrics::counter>* bytes = nullptr;
    std::string shard;
  } load_metrics_;
};

/// The kernels' hyper-parameters of `o` (its zero fields: the kernels'
/// defaults); `step` is the caller's.
kernels::optimizer_params optimizer_params_of(const pb::Optimizer& o);
/// The kernels' initializer `i` describes.
kernels::initializer initializer_of(const pb::Initializer& i);

/// Whether `c` is usable (errc::invalid_argument naming the field otherwise).
[[nodiscard]] caf::error check_consistency(const pb::Consistency& c);

}  // namespace actorps
