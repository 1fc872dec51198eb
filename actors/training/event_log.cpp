#include "actors/training/event_log.hpp"

#include <unistd.h>

#include <atomic>

#include <chrono>

#include "actors/dataset/tfrecord.hpp"
#include "messages/errors.hpp"
#include "messages/event.pb.h"

namespace actorps::train {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

caf::expected<event_log> event_log::create(const std::string& dir) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  event_log log;
  // TF's name: <seconds>.<host>.<pid>.<n>, so no two logs share a file.
  static std::atomic<int> created{0};
  log.path_ = dir + "/events.out.tfevents." + std::to_string(int64_t(now_seconds())) + "." + host + "." +
              std::to_string(::getpid()) + "." + std::to_string(created++);
  log.out_.open(log.path_, std::ios::binary | std::ios::trunc);
  if (!log.out_) return make_error(errc::io_error, log.path_ + ": cannot create the event file");
  tf::Event version;
  version.set_wall_time(now_seconds());
  version.set_file_version("brain.Event:2");
  if (auto err = log.append(version.SerializeAsString())) return err;
  return log;
}

caf::error event_log::scalar(const std::string& tag, int64_t step, float value) {
  tf::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return append(e.SerializeAsString());
}

caf::error event_log::scalars(int64_t step, const std::vector<figure>& figures) {
  for (auto& [tag, value] : figures)
    if (value)
      if (auto err = scalar(tag, step, float(*value))) return err;
  return caf::none;
}

caf::error event_log::append(const std::string& record) {
  out_ << data::tfrecord_frame(record);
  if (!out_.flush()) return make_error(errc::io_error, path_ + ": write failed");
  return caf::none;
}

caf::expected<std::vector<scalar_point>> read_scalars(const std::string& path) {
  auto records = data::read_tfrecords(path);
  if (!records) return records.error();
  std::vector<scalar_point> out;
  for (size_t i = 0; i < records->size(); ++i) {
    tf::Event e;
    if (!e.ParseFromString((*records)[i]))
      return make_error(errc::invalid_config, path + ": record " + std::to_string(i) + ": not a tf.Event");
    if (i == 0) {
      if (e.file_version().rfind("brain.Event:", 0) != 0)
        return make_error(errc::invalid_config, path + ": the first event carries no file_version");
      continue;
    }
    for (auto& v : e.summary().value()) out.push_back({v.tag(), e.step(), v.simple_value()});
  }
  return out;
}

}  // namespace actorps::train
