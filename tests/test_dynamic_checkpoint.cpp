// Checkpoints of dynamic tables across real processes: a SYNC job over a
// dynamic table (1 worker, so rows apply in one order) stopped after epoch
// 1 and resumed ends where one never stopped ends, bit for bit: its rows,
// their optimizer slots, update counts, the admission sketch and the
// eviction order, on the same PS tasks; on another number of PS tasks
// (rows routed by virtual row) with Adagrad and no cap, the same rows;
// from an incremental checkpoint (its chain resolved), bit for bit too.
#define BOOST_TEST_MODULE dynamic_checkpoint
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/dataset/tfrecord.hpp"
#include "kernels/sparse.hpp"
#include "tests/job_files.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// 128 examples of 3 ids each (of 40 ids spread over 64-bit space), two
// floats per id; label 1 when the first id is odd. 16 batches of 8: one
// pass per epoch of 16 SYNC steps.
pb::DatasetSpec id_examples() {
  pb::DatasetSpec spec;
  auto* s = spec.mutable_slices();
  s->set_features(6);
  std::mt19937 gen(5);
  for (int e = 0; e < 128; ++e) {
    int64_t ids[3];
    for (auto& id : ids) id = int64_t(gen() % 40) * 0x9E3779B97F4A7Cll;  // ids far apart
    float x[6];
    std::memcpy(x, ids, sizeof ids);
    for (float f : x) s->add_x(f);
    s->add_labels(int32_t((ids[0] / 0x9E3779B97F4A7Cll) % 2));
  }
  spec.add_ops()->mutable_repeat()->set_count(-1);
  spec.add_ops()->mutable_batch()->set_size(8);
  return spec;
}

kernels::model_spec id_model(uint64_t max_rows) {
  kernels::model_spec m;
  m.inputs = {{"ids", {3}, kernels::input_kind::ids64}};
  kernels::layer_spec table;
  table.kind = kernels::layer_kind::embedding;
  table.name = "table";
  table.inputs = {"ids"};
  table.units = 4;
  table.comb = kernels::combiner::sum;
  table.dynamic = true;
  table.vocabulary = 8 * 3;  // a batch's ids
  table.rules = {2, 0, max_rows};
  kernels::layer_spec out;
  out.units = 2;
  m.layers = {table, out};
  return m;
}

struct run {
  pb::Optimizer::Kind optimizer;
  int ps;
  uint64_t max_rows;         // per shard; 0: no cap
  uint32_t every_steps = 0;  // checkpoint_steps
  uint32_t full_every = 1;   // checkpoint_full_every
};

// Each table row by id: its values and slots, and its update count.
using rows_by_id = std::map<int64_t, std::pair<std::string, uint32_t>>;

// `epochs` epochs of the job `r` on a fresh cluster, checkpointing into
// `dir`: its dense values and its table's rows at the end.
std::pair<std::vector<std::vector<float>>, rows_by_id> fit_ids(uint32_t epochs, const std::string& dir, run r) {
  std::vector<std::string> roles{"coordinator", "worker"};
  roles.insert(roles.end(), size_t(r.ps), "ps");
  local_cluster cluster(roles);
  cluster.start_nodes();
  cluster_client client(cluster.config);
  job_spec job;
  job.cluster = client.spec;
  job.model = id_model(r.max_rows);
  job.train = id_examples();
  auto& t = job.training;
  t.threads_per_worker = 1;
  t.epochs = epochs;
  t.steps_per_epoch = 16;
  t.steps_per_execution = r.every_steps > 0 ? 1 : t.steps_per_execution;  // callbacks see every step
  t.optimizer.set_kind(r.optimizer);
  t.optimizer.set_learning_rate(0.1f);
  t.consistency.set_mode(pb::Consistency::SYNC);
  t.consistency.set_num_workers(1);
  t.consistency.set_replicas_to_aggregate(1);
  auto c = train::connect_job(client.sys, job);
  BOOST_REQUIRE_MESSAGE(c, (c ? "" : describe(c.error())));
  train::backup_and_restore backup(dir, 10, r.every_steps, r.full_every);
  auto fitted = train::fit(**c, job, {&backup});
  BOOST_REQUIRE_MESSAGE(fitted, (fitted ? "" : describe(fitted.error())));
  auto values = (*c)->placement().pull_values();
  auto tables = (*c)->placement().pull_tables();
  BOOST_REQUIRE(values && tables);
  rows_by_id rows;
  for (auto& shard : (*tables)[0]) {
    const size_t bytes = size_t(shard.floats()) * 4;
    for (int i = 0; i < shard.ids_size(); ++i)
      rows[shard.ids(i)] = {shard.rows().substr(size_t(i) * bytes, bytes), shard.updates(i)};
  }
  return {*values, rows};
}

void same_ends(const std::string& dir, run before, run after) {
  auto reference = fit_ids(2, dir + "/reference", before);
  fit_ids(1, dir + "/resumed", before);
  auto resumed = fit_ids(2, dir + "/resumed", after);
  BOOST_TEST(reference.second.size() > 10u);  // rows were admitted
  BOOST_TEST(resumed.second.size() == reference.second.size());
  BOOST_TEST((resumed.second == reference.second), "the table's rows differ");
  for (size_t i = 1; i < reference.first.size(); ++i)  // 0: the table, read by rows
    BOOST_TEST(same_bits(resumed.first[i], reference.first[i]), "variable " << i << " differs");
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_dynamic_table_resumes_bit_for_bit_with_its_sketch_and_eviction_order) {
  const auto dir = make_temp_dir("test");
  same_ends(dir + "/same", {pb::Optimizer::ADAM, 2, 12}, {pb::Optimizer::ADAM, 2, 12});
}

// checkpoint_full_every = 4 with a checkpoint every 5 steps (or a little
// later: a checkpoint counts the steps that finished while the closures
// were held): the first run writes a full one, then ones holding the rows
// changed since the one before; the second run resumes from the last
// through that chain and writes a full one first.
BOOST_AUTO_TEST_CASE(a_dynamic_table_resumes_bit_for_bit_from_an_incremental_checkpoint) {
  const auto dir = make_temp_dir("test");
  const run r{pb::Optimizer::ADAM, 2, 12, 5, 4};
  same_ends(dir + "/incremental", r, r);
  const std::string resumed = dir + "/incremental/resumed";
  std::map<int, int64_t> base_of;  // step -> the step it builds on (-1: full)
  for (auto& f : std::filesystem::directory_iterator(resumed)) {
    const auto name = f.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0) continue;
    auto records = data::read_tfrecords(f.path().string(), 1);
    pb::CheckpointHeader header;
    BOOST_REQUIRE(records && records->size() == 1u && header.ParseFromString(records->front()));
    base_of[int(header.step())] = header.has_base_step() ? header.base_step() : -1;
  }
  BOOST_REQUIRE(base_of.count(16) == 1u);  // the first run's last: what the second resumed from
  int64_t before = -1;
  for (auto [step, base] : base_of) {
    if (step <= 16) BOOST_TEST(base == before, "ckpt-" << step << " builds on " << base);
    if (step > 16 && before <= 16) BOOST_TEST(base == -1, "the second run's first, ckpt-" << step);
    before = step;
  }
  BOOST_TEST(base_of.begin()->first < 16);  // the chain 16 resumed through had an incremental link
  BOOST_TEST(base_of.at(16) != -1);
}

BOOST_AUTO_TEST_CASE(a_dynamic_table_of_2_ps_tasks_resumes_on_3) {
  const auto dir = make_temp_dir("test");
  same_ends(dir + "/2to3", {pb::Optimizer::ADAGRAD, 2, 0}, {pb::Optimizer::ADAGRAD, 3, 0});
}

BOOST_AUTO_TEST_CASE(a_fixed_table_in_a_checkpoint_is_no_dynamic_one_and_the_other_way) {
  train::checkpoint c;
  c.step = 7;
  c.variables.push_back({"fixed", {100, 4}, std::vector<float>(400), {}, 1, {}});
  c.variables.push_back({"dynamic", {kernels::kVirtualRows, 4}, {}, {}, 1, {pb::TableData{}}});
  auto as_dynamic = train::find_variable(c, "ckpt", "fixed", {kernels::kVirtualRows, 4});
  BOOST_REQUIRE(!as_dynamic);
  BOOST_TEST(describe(as_dynamic.error()).find("holds 'fixed' as a fixed table, the job's model as a dynamic one") !=
                 std::string::npos,
             describe(as_dynamic.error()));
  BOOST_CHECK(as_dynamic.error() == errc::invalid_config);
  auto as_fixed = train::find_variable(c, "ckpt", "dynamic", {100, 4});
  BOOST_REQUIRE(!as_fixed);
  BOOST_TEST(describe(as_fixed.error()).find("as a dynamic table, the job's model as a fixed one") != std::string::npos,
             describe(as_fixed.error()));
}
