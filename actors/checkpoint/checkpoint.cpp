#include "actors/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "actors/dataset/tfrecord.hpp"
#include "kernels/sparse.hpp"
#include "messages/errors.hpp"
#include "messages/tensor_bytes.hpp"

namespace actorps::train {

namespace fs = std::filesystem;

namespace {

// ckpt-<step>.tfrecord -> step, or -1.
int64_t step_of(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.rfind("ckpt-", 0) != 0 || p.extension() != ".tfrecord") return -1;
  try {
    return std::stoll(name.substr(5, name.size() - 5 - 9));
  } catch (...) {
    return -1;
  }
}

// Checkpoints of `dir`, newest first.
std::vector<std::pair<int64_t, fs::path>> list(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec))
    if (auto step = step_of(entry.path()); step >= 0) out.emplace_back(step, entry.path());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first > b.first; });
  return out;
}

bool sync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

caf::expected<checkpoint> load(const fs::path& path) {
  auto records = data::read_tfrecords(path.string());
  if (!records) return records.error();
  auto bad = [&](const std::string& what) { return make_error(errc::invalid_config, path.string() + ": " + what); };
  pb::CheckpointHeader header;
  if (records->empty() || !header.ParseFromString((*records)[0])) return bad("no checkpoint header");
  if (records->size() != size_t(header.variables()) + 1)
    return bad(std::to_string(records->size() - 1) + " variables, the header says " +
               std::to_string(header.variables()));
  checkpoint c;
  c.step = header.step();
  c.epoch = header.epoch();
  c.splits = header.splits();
  c.restored_ps.assign(header.restored_ps().begin(), header.restored_ps().end());
  for (size_t i = 1; i < records->size(); ++i) {
    pb::CheckpointVariable v;
    if (!v.ParseFromString((*records)[i])) return bad("record " + std::to_string(i) + ": not a variable");
    saved_variable s{v.name(), {v.shape().begin(), v.shape().end()}, std::vector<float>(v.data().size() / 4), {}, 0};
    s.table.assign(v.table().begin(), v.table().end());
    int64_t elements = 1;
    for (auto d : s.shape) elements *= d;
    if (v.table_size() > 0) elements = 0;  // a dynamic table: its rows
    if (int64_t(v.data().size()) != elements * 4)
      return bad("variable '" + v.name() + "': size does not match its shape");
    std::memcpy(s.values.data(), v.data().data(), v.data().size());
    s.version = v.version();
    for (auto& slot : v.slots()) {
      if (slot.size() != v.data().size()) return bad("variable '" + v.name() + "': a slot's size does not match");
      auto& into = s.slots.emplace_back(slot.size() / 4);
      std::memcpy(into.data(), slot.data(), slot.size());
    }
    c.variables.push_back(std::move(s));
  }
  return c;
}

}  // namespace

caf::expected<const saved_variable*> find_variable(const checkpoint& c, const std::string& dir, const std::string& name,
                                                   const std::vector<int64_t>& shape) {
  auto dynamic = [](const std::vector<int64_t>& s) { return !s.empty() && s[0] == kernels::kVirtualRows; };
  for (auto& v : c.variables) {
    if (v.name != name) continue;
    if (dynamic(v.shape) != dynamic(shape))
      return make_error(errc::invalid_config, dir + ": the checkpoint of step " + std::to_string(c.step) + " holds '" +
                                                  name + "' as a " + (dynamic(v.shape) ? "dynamic" : "fixed") +
                                                  " table, the job's model as a " +
                                                  (dynamic(shape) ? "dynamic" : "fixed") + " one");
    if (v.shape == shape) return &v;
  }
  return make_error(errc::invalid_config, dir + ": the checkpoint of step " + std::to_string(c.step) +
                                              " has no variable '" + name +
                                              "' of the model's shape (another model? delete the directory)");
}

caf::expected<std::vector<const saved_variable*>> model_variables(const checkpoint& c, const std::string& dir,
                                                                  const std::vector<kernels::param_info>& params) {
  std::vector<const saved_variable*> out;
  for (auto& p : params) {
    if (p.dynamic)
      return make_error(errc::invalid_config, dir + ": '" + p.name +
                                                  "' is a dynamic table: its model is evaluated on the cluster "
                                                  "(eval_step), not from a checkpoint alone");
    auto saved = find_variable(c, dir, p.name, p.shape);
    if (!saved) return saved.error();
    out.push_back(*saved);
  }
  for (auto& v : c.variables)
    if (std::none_of(params.begin(), params.end(), [&](auto& p) { return p.name == v.name; }))
      return make_error(errc::invalid_config, dir + ": the checkpoint of step " + std::to_string(c.step) + " holds '" +
                                                  v.name + "', which the job's model does not have (another model?)");
  return out;
}

caf::expected<std::string> checkpoint_dir_of(const std::string& job_dir, const std::string& given) {
  const auto& dir = given.empty() ? job_dir : given;
  if (dir.empty())
    return make_error(errc::invalid_argument, "the job has no training.checkpoint_dir (or pass --checkpoint DIR)");
  return dir;
}

caf::error save_checkpoint(const std::string& dir, const checkpoint& c, int keep_max) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    return make_error(errc::io_error, "checkpoint directory " + dir + " cannot be created: " + ec.message());
  pb::CheckpointHeader header;
  header.set_step(c.step);
  header.set_epoch(c.epoch);
  header.set_variables(uint32_t(c.variables.size()));
  *header.mutable_splits() = c.splits;
  *header.mutable_restored_ps() = {c.restored_ps.begin(), c.restored_ps.end()};
  const std::string final_path = dir + "/ckpt-" + std::to_string(c.step) + ".tfrecord";
  const std::string tmp = dir + "/.ckpt-" + std::to_string(c.step) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(errc::io_error, tmp + ": cannot create");
    out << data::tfrecord_frame(header.SerializeAsString());
    for (auto& v : c.variables) {
      pb::CheckpointVariable record;
      record.set_name(v.name);
      for (auto d : v.shape) record.add_shape(d);
      assign_floats(record.mutable_data(), v.values.data(), int64_t(v.values.size()));
      for (auto& slot : v.slots) assign_floats(record.add_slots(), slot.data(), int64_t(slot.size()));
      record.set_version(v.version);
      *record.mutable_table() = {v.table.begin(), v.table.end()};
      out << data::tfrecord_frame(record.SerializeAsString());
    }
    if (!out.flush()) return make_error(errc::io_error, tmp + ": write failed (disk full?)");
  }
  if (!sync_path(tmp, O_RDONLY) || std::rename(tmp.c_str(), final_path.c_str()) != 0 ||
      !sync_path(dir, O_RDONLY | O_DIRECTORY))
    return make_error(errc::io_error, final_path + ": cannot commit the checkpoint");
  auto all = list(dir);
  for (size_t i = size_t(std::max(keep_max, 1)); i < all.size(); ++i) fs::remove(all[i].second, ec);
  return caf::none;
}

restored restore_latest(const std::string& dir) {
  restored out;
  for (auto& [step, path] : list(dir)) {
    auto c = load(path);
    if (c) {
      out.latest = std::move(*c);
      break;
    }
    out.skipped.push_back(describe(c.error()));
  }
  return out;
}

caf::expected<checkpoint> newest_checkpoint(const std::string& dir, const std::string& who) {
  auto r = restore_latest(dir);
  for (auto& why : r.skipped) spdlog::warn("{}: skipped a damaged checkpoint: {}", who, why);
  if (!r.latest) return make_error(errc::invalid_argument, "no intact checkpoint in " + dir);
  return std::move(*r.latest);
}

namespace {
std::string final_file(const std::string& dir) { return dir + "/FINAL"; }
}  // namespace

caf::error mark_final(const std::string& dir, int64_t step) {
  const auto tmp = dir + "/.FINAL.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << step << '\n';
    if (!out.flush()) return make_error(errc::io_error, tmp + ": write failed");
  }
  if (!sync_path(tmp, O_RDONLY) || std::rename(tmp.c_str(), final_file(dir).c_str()) != 0 ||
      !sync_path(dir, O_RDONLY | O_DIRECTORY))
    return make_error(errc::io_error, final_file(dir) + ": cannot commit");
  return caf::none;
}

void clear_final(const std::string& dir) {
  std::error_code ec;
  fs::remove(final_file(dir), ec);
}

std::optional<int64_t> final_step(const std::string& dir) {
  std::ifstream in(final_file(dir));
  int64_t step = 0;
  if (in >> step) return step;
  return std::nullopt;
}

}  // namespace actorps::train
