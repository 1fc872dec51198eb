#include "actors/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <unordered_map>

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
  if (header.has_base_step()) c.base_step = header.base_step();
  for (size_t i = 1; i < records->size(); ++i) {
    pb::CheckpointVariable v;
    if (!v.ParseFromString((*records)[i])) return bad("record " + std::to_string(i) + ": not a variable");
    saved_variable s{v.name(), {v.shape().begin(), v.shape().end()}, std::vector<float>(v.data().size() / 4), {}, 0,
                     {}};
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

fs::path path_of(const fs::path& dir, int64_t step) { return dir / ("ckpt-" + std::to_string(step) + ".tfrecord"); }

caf::expected<pb::CheckpointHeader> read_header(const fs::path& path) {
  auto records = data::read_tfrecords(path.string(), 1);
  if (!records) return records.error();
  pb::CheckpointHeader header;
  if (records->empty() || !header.ParseFromString((*records)[0]))
    return make_error(errc::invalid_config, path.string() + ": no checkpoint header");
  return header;
}

// `path` and the checkpoints it builds on, the full one first.
caf::expected<std::vector<fs::path>> chain_of(const fs::path& path) {
  std::vector<fs::path> chain{path};
  for (;;) {
    auto header = read_header(chain.back());
    if (!header && chain.size() > 1)
      return make_error(errc::invalid_config,
                        path.string() + " builds on a damaged checkpoint: " + describe(header.error()));
    if (!header) return header.error();
    if (!header->has_base_step()) break;
    if (header->base_step() >= header->step() || header->base_step() < 0)
      return make_error(errc::invalid_config, chain.back().string() + ": builds on step " +
                                                  std::to_string(header->base_step()) + ", not an earlier one");
    chain.push_back(path_of(path.parent_path(), header->base_step()));
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// Makes the incremental table shards of `inc` (of one variable) whole: a
// row it holds no values of is as `base` (the variable in the checkpoint it
// builds on, whole) holds it, updated as long ago.
caf::error resolve_table(std::vector<pb::TableData>& inc, const std::vector<pb::TableData>& base,
                         const std::string& where) {
  std::unordered_map<int64_t, std::pair<const pb::TableData*, int>> rows;
  for (auto& t : base)
    for (int i = 0; i < t.ids_size(); ++i) rows.emplace(t.ids(i), std::make_pair(&t, i));
  for (auto& t : inc) {
    if (!t.has_since()) continue;
    const size_t bytes = size_t(t.floats()) * sizeof(float);
    std::string whole;
    whole.reserve(size_t(t.ids_size()) * bytes);
    size_t changed = 0;
    for (int i = 0; i < t.ids_size(); ++i) {
      if (t.last_update(i) > t.since()) {
        if ((changed + 1) * bytes > t.rows().size()) break;  // (counted below)
        whole.append(t.rows(), changed++ * bytes, bytes);
        continue;
      }
      auto it = rows.find(t.ids(i));
      if (it == rows.end() || it->second.first->last_update(it->second.second) != t.last_update(i) ||
          it->second.first->floats() != t.floats())
        return make_error(errc::invalid_config, where + ": table shard '" + t.name() + "': row " +
                                                    std::to_string(t.ids(i)) + " (last updated at " +
                                                    std::to_string(t.last_update(i)) +
                                                    ") is not so in the checkpoint it builds on");
      whole.append(it->second.first->rows(), size_t(it->second.second) * bytes, bytes);
    }
    if (changed * bytes != t.rows().size() || whole.size() != size_t(t.ids_size()) * bytes)
      return make_error(errc::invalid_config, where + ": table shard '" + t.name() + "' holds " +
                                                  std::to_string(t.rows().size()) + " bytes of changed rows, " +
                                                  std::to_string(changed) + " rows of " + std::to_string(bytes) +
                                                  " bytes changed");
    t.set_rows(std::move(whole));
    t.clear_since();
  }
  return caf::none;
}

// Makes `next` whole (each of its incremental tables), given `whole`: the
// checkpoint it builds on, whole.
caf::error resolve(checkpoint& next, const checkpoint& whole, const std::string& where) {
  for (auto& v : next.variables) {
    auto base = std::find_if(whole.variables.begin(), whole.variables.end(),
                             [&](const saved_variable& b) { return b.name == v.name; });
    const bool incremental = std::any_of(v.table.begin(), v.table.end(), [](auto& t) { return t.has_since(); });
    if (!incremental) continue;
    if (base == whole.variables.end())
      return make_error(errc::invalid_config, where + ": '" + v.name + "' is not in the checkpoint it builds on");
    if (auto err = resolve_table(v.table, base->table, where)) return err;
  }
  next.base_step.reset();
  return caf::none;
}

// `path` whole: a full checkpoint as it is, an incremental one resolved
// against its chain (two checkpoints in memory at a time).
caf::expected<checkpoint> load_whole(const fs::path& path) {
  auto linked = [&](const caf::error& err) {
    return make_error(errc::invalid_config, path.string() + " builds on a damaged checkpoint: " + describe(err));
  };
  auto chain = chain_of(path);
  if (!chain) return chain.error();
  auto whole = load(chain->front());
  if (!whole) return chain->size() == 1 ? whole.error() : linked(whole.error());
  for (size_t k = 1; k < chain->size(); ++k) {
    auto next = load((*chain)[k]);
    if (!next) return k + 1 == chain->size() ? next.error() : linked(next.error());
    if (auto err = resolve(*next, *whole, (*chain)[k].string())) return err;
    whole = std::move(next);
  }
  return whole;
}

// Deletes the checkpoints of `dir` but its newest `keep_max` and those
// they build on.
void prune(const std::string& dir, int keep_max) {
  auto all = list(dir);
  std::set<int64_t> needed;
  for (size_t i = 0; i < all.size() && i < size_t(std::max(keep_max, 1)); ++i)
    for (std::optional<int64_t> step = all[i].first; step && needed.insert(*step).second;) {
      auto header = read_header(path_of(dir, *step));
      step = header && header->has_base_step() ? std::optional<int64_t>(header->base_step()) : std::nullopt;
    }
  std::error_code ec;
  for (auto& [step, path] : all)
    if (needed.count(step) == 0) fs::remove(path, ec);
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
  if (c.base_step) header.set_base_step(*c.base_step);
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
  prune(dir, keep_max);
  return caf::none;
}

restored restore_latest(const std::string& dir) {
  restored out;
  for (auto& [step, path] : list(dir)) {
    auto c = load_whole(path);
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
