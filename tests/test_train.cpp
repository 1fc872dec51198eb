// The coordinator's files: checkpoints (atomic, CRC-checked, keep_max,
// fallback past a damaged one) and TensorBoard event files; the tests'
// wait for a checkpoint (tests/job_files.hpp).
#define BOOST_TEST_MODULE train
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <tuple>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/launch/local_host.hpp"
#include "actors/training/event_log.hpp"
#include "actors/training/job_report.hpp"
#include "kernels/sparse.hpp"
#include "messages/errors.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::train;
namespace fs = std::filesystem;

namespace {

checkpoint at_step(int64_t step) {
  checkpoint c;
  c.step = step;
  c.epoch = step / 10;
  c.variables.push_back({"dense_0/kernel", {2, 3}, {1, 2, 3, 4, 5, float(step)}, {}, 0});
  c.variables.push_back({"dense_0/bias", {3}, {0.5f, -0.5f, 0}, {{0.1f, 0.2f, 0.3f}, {1, 2, float(step)}}, 0});
  c.splits.add_finished(7);
  c.splits.mutable_plan()->set_split_size(9);
  c.restored_ps = {1};
  return c;
}

void flip_byte(const std::string& path, size_t from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = size_t(f.tellg());
  f.seekp(long(size - from_end));
  char c = 0;
  f.seekg(long(size - from_end));
  f.read(&c, 1);
  c = char(c ^ 0x10);
  f.seekp(long(size - from_end));
  f.write(&c, 1);
}

}  // namespace

BOOST_AUTO_TEST_CASE(checkpoints_round_trip_keep_the_newest_and_fall_back_past_damage) {
  const std::string dir = make_temp_dir("test") + "/ckpt";
  BOOST_TEST(!restore_latest(dir).latest);  // no directory yet: a fresh start
  for (int64_t step : {10, 20, 30, 40}) BOOST_REQUIRE(!save_checkpoint(dir, at_step(step), 3));
  BOOST_TEST(!fs::exists(dir + "/ckpt-10.tfrecord"));  // keep_max 3
  BOOST_TEST(fs::exists(dir + "/ckpt-20.tfrecord"));
  auto r = restore_latest(dir);
  BOOST_REQUIRE(r.latest);
  BOOST_TEST(r.latest->step == 40);
  BOOST_TEST(r.latest->epoch == 4);
  BOOST_REQUIRE(r.latest->variables.size() == 2u);
  BOOST_TEST(r.latest->variables[0].name == "dense_0/kernel");
  BOOST_TEST((r.latest->variables[0].shape == std::vector<int64_t>{2, 3}));
  BOOST_TEST((r.latest->variables[0].values == std::vector<float>{1, 2, 3, 4, 5, 40}));
  BOOST_TEST(r.latest->variables[0].slots.empty());          // SGD: none
  BOOST_REQUIRE(r.latest->variables[1].slots.size() == 2u);  // Adam's m and v
  BOOST_TEST((r.latest->variables[1].slots[1] == std::vector<float>{1, 2, 40}));
  BOOST_TEST(r.latest->splits.finished(0) == 7u);
  BOOST_TEST(r.latest->restored_ps == std::vector<uint32_t>{1}, boost::test_tools::per_element());
  BOOST_TEST(r.skipped.empty());
  // A damaged newest checkpoint: restore names it and takes the one before.
  flip_byte(dir + "/ckpt-40.tfrecord", 6);
  r = restore_latest(dir);
  BOOST_REQUIRE(r.latest);
  BOOST_TEST(r.latest->step == 30);
  BOOST_REQUIRE(r.skipped.size() == 1u);
  BOOST_TEST(r.skipped[0].find("ckpt-40.tfrecord: record 2: data CRC mismatch") != std::string::npos, r.skipped[0]);
  // A crash mid-write leaves only a temporary file, which restore ignores.
  std::ofstream(dir + "/.ckpt-50.tmp") << "half";
  BOOST_TEST(restore_latest(dir).latest->step == 30);
  std::ofstream(dir + "/a-file") << "not a directory";
  auto nowhere = save_checkpoint(dir + "/a-file/ckpt", at_step(1), 1);
  BOOST_REQUIRE(nowhere);
  BOOST_TEST(describe(nowhere) == "checkpoint directory " + dir + "/a-file/ckpt cannot be created: Not a directory");
}

namespace {

// A checkpoint at `step` of one dynamic table "emb" (dim 2, one shard):
// rows {id, last update, value}; with `base`, an incremental one holding
// the values of the rows updated after update `since` only.
checkpoint table_at(int64_t step, uint64_t version, std::vector<std::tuple<int64_t, uint64_t, float>> rows,
                    std::optional<int64_t> base = std::nullopt, uint64_t since = 0) {
  checkpoint c;
  c.step = step;
  c.base_step = base;
  pb::TableData t;
  t.set_name("emb/part_0");
  t.set_floats(2);
  t.set_version(version);
  t.set_virtual_rows(kernels::kVirtualRows);
  if (base) t.set_since(since);
  for (auto [id, last, value] : rows) {
    t.add_ids(id);
    t.add_last_update(last);
    t.add_updates(uint32_t(last));
    const float row[2] = {value, -value};
    if (!base || last > since) t.mutable_rows()->append(reinterpret_cast<const char*>(row), sizeof(row));
  }
  c.variables.push_back({"emb", {kernels::kVirtualRows, 2}, {}, {}, version, {t}});
  return c;
}

// The restored table's rows as {id, last update, value}, in order.
std::vector<std::tuple<int64_t, uint64_t, float>> rows_of(const checkpoint& c) {
  std::vector<std::tuple<int64_t, uint64_t, float>> out;
  const auto& t = c.variables.at(0).table.at(0);
  BOOST_TEST(!t.has_since());
  BOOST_REQUIRE(t.rows().size() == size_t(t.ids_size()) * 8);
  for (int i = 0; i < t.ids_size(); ++i) {
    float row[2];
    std::memcpy(row, t.rows().data() + size_t(i) * 8, 8);
    BOOST_TEST(row[1] == -row[0]);
    out.emplace_back(t.ids(i), t.last_update(i), row[0]);
  }
  return out;
}

}  // namespace

// Incremental checkpoints (training.checkpoint_full_every): restore reads
// the chain back to its full checkpoint; keep_max keeps what a kept one
// builds on; a damaged link skips the checkpoints built on it, saying so.
BOOST_AUTO_TEST_CASE(incremental_checkpoints_resolve_their_chain_and_keep_their_bases) {
  const std::string dir = make_temp_dir("test") + "/ckpt";
  using rows = std::vector<std::tuple<int64_t, uint64_t, float>>;
  BOOST_REQUIRE(!save_checkpoint(dir, table_at(10, 3, {{1, 1, 1.f}, {2, 2, 2.f}, {3, 3, 3.f}}), 1));
  // Row 1 evicted, 3 updated, 4 admitted; 2 unchanged (its values stay in step 10's file).
  BOOST_REQUIRE(!save_checkpoint(dir, table_at(20, 6, {{2, 2, 0.f}, {3, 5, 30.f}, {4, 6, 40.f}}, 10, 3), 1));
  BOOST_REQUIRE(!save_checkpoint(dir, table_at(30, 7, {{2, 2, 0.f}, {4, 6, 0.f}, {3, 7, 300.f}}, 20, 6), 1));
  BOOST_TEST(fs::exists(dir + "/ckpt-10.tfrecord"));  // keep_max 1, but step 30 builds on 20, 20 on 10
  BOOST_TEST(fs::exists(dir + "/ckpt-20.tfrecord"));
  BOOST_TEST(fs::file_size(dir + "/ckpt-30.tfrecord") < fs::file_size(dir + "/ckpt-10.tfrecord"));
  auto r = restore_latest(dir);
  BOOST_REQUIRE(r.latest);
  BOOST_TEST(r.skipped.empty());
  BOOST_TEST(r.latest->step == 30);
  BOOST_TEST(!r.latest->base_step);
  BOOST_TEST((rows_of(*r.latest) == rows{{2, 2, 2.f}, {4, 6, 40.f}, {3, 7, 300.f}}));
  BOOST_TEST(r.latest->variables[0].table[0].version() == 7u);

  // Step 20's file damaged: 30 cannot be resolved, 20 cannot be read; 10 is restored.
  flip_byte(dir + "/ckpt-20.tfrecord", 6);
  r = restore_latest(dir);
  BOOST_REQUIRE(r.latest);
  BOOST_TEST(r.latest->step == 10);
  BOOST_TEST((rows_of(*r.latest) == rows{{1, 1, 1.f}, {2, 2, 2.f}, {3, 3, 3.f}}));
  BOOST_REQUIRE(r.skipped.size() == 2u);
  BOOST_TEST(r.skipped[0].find(dir + "/ckpt-30.tfrecord builds on a damaged checkpoint: " + dir +
                               "/ckpt-20.tfrecord: record 1: data CRC mismatch") == 0u,
             r.skipped[0]);

  // An incremental one whose unchanged row is not so in its base is refused, naming the row.
  BOOST_REQUIRE(!save_checkpoint(dir, table_at(40, 8, {{1, 1, 0.f}, {9, 2, 0.f}}, 10, 3), 3));
  r = restore_latest(dir);
  BOOST_TEST(r.latest->step == 10);
  BOOST_REQUIRE(!r.skipped.empty());
  BOOST_TEST(r.skipped[0] == dir +
                                 "/ckpt-40.tfrecord: table shard 'emb/part_0': row 9 (last updated at 2) is not "
                                 "so in the checkpoint it builds on");

  // A full checkpoint frees the chain before it.
  BOOST_REQUIRE(!save_checkpoint(dir, table_at(50, 9, {{5, 9, 5.f}}), 1));
  BOOST_TEST(!fs::exists(dir + "/ckpt-10.tfrecord"));
  BOOST_TEST(!fs::exists(dir + "/ckpt-30.tfrecord"));
  BOOST_TEST((rows_of(*restore_latest(dir).latest) == rows{{5, 9, 5.f}}));
  fs::remove_all(fs::path(dir).parent_path());
}

BOOST_AUTO_TEST_CASE(event_files_hold_checked_scalars) {
  const std::string dir = make_temp_dir("test");
  auto log = event_log::create(dir);
  BOOST_REQUIRE_MESSAGE(log, (log ? "" : describe(log.error())));
  BOOST_TEST(log->path().find(dir + "/events.out.tfevents.") == 0u);
  BOOST_REQUIRE(!log->scalar("loss", 1, 2.5f));
  BOOST_REQUIRE(!log->scalar("accuracy", 1, 0.75f));
  BOOST_REQUIRE(!log->scalar("loss", 2, 1.25f));
  auto points = read_scalars(log->path());
  BOOST_REQUIRE_MESSAGE(points, (points ? "" : describe(points.error())));
  BOOST_REQUIRE(points->size() == 3u);
  BOOST_TEST((*points)[1].tag == "accuracy");
  BOOST_TEST((*points)[1].value == 0.75f);
  BOOST_TEST((*points)[2].step == 2);
  flip_byte(log->path(), 6);
  auto damaged = read_scalars(log->path());
  BOOST_REQUIRE(!damaged);
  BOOST_TEST(describe(damaged.error()).find("record 3: data CRC mismatch") != std::string::npos,
             describe(damaged.error()));
}

// The multi-process tests wait for a job's first checkpoint: one that never
// comes fails the test, saying what it waited for, where and how long.
BOOST_AUTO_TEST_CASE(a_checkpoint_that_never_comes_fails_the_wait_saying_what_where_and_how_long) {
  const std::string dir = make_temp_dir("test") + "/ckpt";
  std::string why;
  const int line = __LINE__ + 2;
  try {
    test::wait_for_checkpoint(dir, std::chrono::milliseconds(50));
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  BOOST_TEST(why == std::string(__FILE__) + ":" + std::to_string(line) +
                        ": wait_for_checkpoint: no intact checkpoint in " + dir + " after 0.05 s");
  BOOST_REQUIRE(!save_checkpoint(dir, at_step(10), 3));
  test::wait_for_checkpoint(dir, std::chrono::milliseconds(0));  // there: no wait, no failure
  fs::remove_all(fs::path(dir).parent_path());
}

BOOST_AUTO_TEST_CASE(job_reports_round_trip_and_name_what_is_wrong) {
  const std::string dir = make_temp_dir("test");
  job_report rep;
  rep.exit_cause = "completed";
  rep.exit_code = 0;
  rep.epochs = 3;
  rep.first_epoch = 2;
  rep.history.push_back({2, 40, 1.5, 0.5, 0.8, 0.45, 0.82, std::nullopt, std::nullopt});
  rep.history.push_back({3, 60, 1.25, 0.25, 0.9, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  rep.test_accuracy = 0.875;
  rep.test_examples = 2000;
  rep.closures_by_worker = {{0, 7}, {1, 5}};
  rep.shards = {{0, 2000, 3}, {1, 1999, 0}};
  rep.split_examples = 2000;
  rep.worker_respawns = 2;
  rep.ps_restores = 1;
  rep.closures_retried = 4;
  rep.recoveries = {{1.5, "worker:1", "lost"}, {2.25, "worker:1", "respawned"}};
  rep.ended_at = 9.5;
  const std::string path = dir + "/job.report.json";
  BOOST_REQUIRE(!write_report(rep, path));
  auto back = read_report(path);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : describe(back.error())));
  BOOST_TEST(back->exit_cause == "completed");
  BOOST_TEST(back->last_epoch() == 3u);
  BOOST_TEST(back->train_seconds() == 2.75);
  BOOST_REQUIRE(back->history.size() == 2u);
  BOOST_TEST(*back->history[0].test_accuracy == 0.82);
  BOOST_TEST(!back->history[1].test_loss);
  BOOST_TEST(*back->test_accuracy == 0.875);
  BOOST_TEST(back->closures() == 12u);
  BOOST_TEST(back->closures_by_worker.at(1) == 5u);
  BOOST_REQUIRE(back->shards.size() == 2u);
  BOOST_TEST(back->shards[1].examples_applied == 1999);
  BOOST_TEST(back->shards[0].duplicates == 3u);
  BOOST_TEST(back->worker_respawns == 2u);
  BOOST_TEST(back->ps_restores == 1u);
  BOOST_TEST(back->closures_retried == 4u);
  BOOST_REQUIRE(back->recoveries.size() == 2u);
  BOOST_TEST(back->recoveries[1].at == 2.25);
  BOOST_TEST(back->recoveries[1].task == "worker:1");
  BOOST_TEST(back->recoveries[1].what == "respawned");
  BOOST_TEST(back->tasks_with("lost") == std::vector<std::string>{"worker:1"}, boost::test_tools::per_element());
  BOOST_TEST(back->ended_at == 9.5);
  BOOST_TEST(fs::directory_iterator(dir)->path().filename() == "job.report.json");  // no temp file left
  BOOST_TEST(default_report_path("/a/job.toml", "") == "/a/job.report.json");
  BOOST_TEST(default_report_path("/a/job.toml", "/b/logs") == "/b/logs/report.json");
  std::ofstream(path) << R"({"exit": {"cause": "completed"}})";
  auto bad = read_report(path);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(describe(bad.error()).find(path + ": not a job report") != std::string::npos, describe(bad.error()));
  BOOST_TEST(!read_report(dir + "/none.json"));
}
