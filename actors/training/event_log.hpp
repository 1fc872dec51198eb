// TensorBoard event files: TFRecord files of tf.Event records, the first a
// file_version, then one scalar Summary per logged value. Point TensorBoard
// at the directory (`tensorboard --logdir DIR`).
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

namespace actorps::train {

class event_log {
 public:
  /// Creates DIR/events.out.tfevents.<seconds>.<host> (DIR must exist).
  [[nodiscard]] static caf::expected<event_log> create(const std::string& dir);

  /// Appends one scalar and flushes (a crash loses at most this record).
  [[nodiscard]] caf::error scalar(const std::string& tag, int64_t step, float value);
  /// A scalar per (tag, value) that has a value (none: a figure the run lacks), in order.
  using figure = std::pair<const char*, std::optional<double>>;
  [[nodiscard]] caf::error scalars(int64_t step, const std::vector<figure>& figures);
  const std::string& path() const { return path_; }

 private:
  [[nodiscard]] caf::error append(const std::string& record);
  std::string path_;
  std::ofstream out_;
};

struct scalar_point {
  std::string tag;
  int64_t step = 0;
  float value = 0;
};

/// Every scalar of an event file, CRCs checked; the file must start with a
/// file_version event.
[[nodiscard]] caf::expected<std::vector<scalar_point>> read_scalars(const std::string& path);

}  // namespace actorps::train
