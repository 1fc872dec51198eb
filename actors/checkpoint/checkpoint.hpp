// Checkpoints the coordinator writes: DIR/ckpt-<step>.tfrecord holding the
// step, epoch, every variable and the exactly-once split state. Written to a
// temporary file, synced and renamed into place (a crash leaves either the
// old or the new checkpoint, never half of one); every record CRC-checked on
// restore, and a damaged newest checkpoint falls back to the one before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "kernels/model.hpp"
#include "messages/checkpoint.pb.h"

namespace actorps::train {

struct saved_variable {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;  // the optimizer's, each shaped like values
  uint64_t version = 0;                   // updates applied (Adam's step count); 0: unknown
  std::vector<pb::TableData> table;       // a dynamic table's rows per table shard (values, slots empty)
};

struct checkpoint {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<saved_variable> variables;
  pb::SplitStatus splits;
  std::vector<uint32_t> restored_ps;  // CheckpointHeader.restored_ps: shards that may lack steps
  // Incremental (CheckpointHeader.base_step): its tables hold the rows
  // changed since the checkpoint of this step. Never set in a restored one
  // (restoring resolves the chain).
  std::optional<int64_t> base_step;
};

/// The variable `name` of `shape` in `c` (read from `dir`), or an error
/// naming them: the checkpoint belongs to another model, or holds a fixed
/// table where the job has a dynamic one (shape[0] = 2^31) or the other way.
[[nodiscard]] caf::expected<const saved_variable*> find_variable(const checkpoint& c, const std::string& dir,
                                                                 const std::string& name,
                                                                 const std::vector<int64_t>& shape);

/// Where each of `params` (a model's parameters, in order) is in `c` (read
/// from `dir`). A checkpoint of another model is an error naming what
/// differs: a parameter missing or shaped otherwise, or a variable the model lacks.
[[nodiscard]] caf::expected<std::vector<const saved_variable*>> model_variables(
    const checkpoint& c, const std::string& dir, const std::vector<kernels::param_info>& params);

/// `given`, else `job_dir` (the job's training.checkpoint_dir); an error
/// when neither names a directory.
[[nodiscard]] caf::expected<std::string> checkpoint_dir_of(const std::string& job_dir, const std::string& given);

/// Writes `c` into `dir` (created with its parents), then deletes the
/// oldest checkpoints beyond `keep_max` (>= 1) but those a kept
/// incremental one builds on.
[[nodiscard]] caf::error save_checkpoint(const std::string& dir, const checkpoint& c, int keep_max);

struct restored {
  std::optional<checkpoint> latest;  // none: start fresh
  std::vector<std::string> skipped;  // damaged files passed over, with why
};

/// The newest intact checkpoint of `dir` (a missing dir: none), whole: an
/// incremental one resolved against the chain it builds on (a chain with a
/// damaged or missing link is skipped, saying which).
[[nodiscard]] restored restore_latest(const std::string& dir);

/// The same for a command that needs one: damaged newer ones logged as
/// skipped by `who`, an error when none is intact.
[[nodiscard]] caf::expected<checkpoint> newest_checkpoint(const std::string& dir, const std::string& who);

/// DIR/FINAL: the step of the job's last checkpoint, written (atomically)
/// once training finished, removed when it starts again. The sidecar
/// evaluator exits after evaluating that step.
[[nodiscard]] caf::error mark_final(const std::string& dir, int64_t step);
void clear_final(const std::string& dir);
[[nodiscard]] std::optional<int64_t> final_step(const std::string& dir);

}  // namespace actorps::train
