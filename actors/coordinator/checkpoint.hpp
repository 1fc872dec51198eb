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

#include "messages/checkpoint.pb.h"

namespace actorps::train {

struct saved_variable {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::vector<std::vector<float>> slots;  // the optimizer's, each shaped like values
  uint64_t version = 0;                   // updates applied (Adam's step count); 0: unknown
};

struct checkpoint {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<saved_variable> variables;
  pb::SplitStatus splits;
};

/// The variable `name` of `shape` in `c` (read from `dir`), or an error
/// naming them: the checkpoint belongs to another model.
[[nodiscard]] caf::expected<const saved_variable*> find_variable(const checkpoint& c, const std::string& dir,
                                                                 const std::string& name,
                                                                 const std::vector<int64_t>& shape);

/// Writes `c` into `dir` (created with its parents), then deletes the
/// oldest checkpoints beyond `keep_max` (>= 1).
[[nodiscard]] caf::error save_checkpoint(const std::string& dir, const checkpoint& c, int keep_max);

struct restored {
  std::optional<checkpoint> latest;  // none: start fresh
  std::vector<std::string> skipped;  // damaged files passed over, with why
};

/// The newest intact checkpoint of `dir` (a missing dir: none).
[[nodiscard]] restored restore_latest(const std::string& dir);

/// DIR/FINAL: the step of the job's last checkpoint, written (atomically)
/// once training finished, removed when it starts again. The sidecar
/// evaluator exits after evaluating that step.
[[nodiscard]] caf::error mark_final(const std::string& dir, int64_t step);
void clear_final(const std::string& dir);
[[nodiscard]] std::optional<int64_t> final_step(const std::string& dir);

}  // namespace actorps::train
