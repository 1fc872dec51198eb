// PS shards in real PS node processes: the test process plays the
// coordinator (spawns shards, creates a partitioned variable) and two
// workers, pushing and pulling over loopback TCP in chunks.
#define BOOST_TEST_MODULE ps_cluster
#include <boost/test/unit_test.hpp>

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/net/bulk_client.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/system_config.hpp"
#include "actors/variables/ps_client.hpp"
#include "messages/fd_io.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

std::string why(const caf::error& e) { return describe(e); }

// A bulk request of one range.
pb::BulkRequest one_range(uint32_t shard, uint32_t worker, int64_t step, const std::string& name, int64_t offset,
                          int64_t count) {
  pb::BulkRequest head;
  head.set_shard(shard);
  head.set_worker(worker);
  head.set_step(step);
  auto* r = head.add_ranges();
  r->set_name(name);
  r->set_offset(offset);
  r->set_count(count);
  return head;
}

constexpr int64_t kChunk = 48;  // bytes: forces every shard of w into several messages

}  // namespace

BOOST_AUTO_TEST_CASE(async_pushes_from_two_workers_give_the_closed_form_across_ps_processes) {
  local_cluster cluster({"coordinator", "ps", "ps", "worker"});
  cluster.start("ps:0");
  cluster.start("ps:1");
  cluster_client coord(cluster.config);
  std::vector<ps_shard_actor> shards;
  for (uint32_t i = 0; i < 2; ++i) {
    auto node = coord.must_dial("ps:" + std::to_string(i));
    auto shard = coord.spawn_shard(node, i, pb::Consistency{});
    BOOST_REQUIRE_MESSAGE(shard, (shard ? "" : why(shard.error())));
    shards.push_back(*shard);
    auto status = call<pb::NodeStatus>(coord.self, node, pb::StatusRequest{});
    BOOST_TEST(status->actors(1) == "ps_shard:" + std::to_string(i));
    auto again = coord.spawn_shard(node, i, pb::Consistency{});  // idempotent: the same shard
    BOOST_TEST(bool(again));
  }
  auto vars = two_ps_variables();
  BOOST_TEST(vars[0].shards[1].ps_task == 1);
  BOOST_TEST(vars[1].shards[0].ps_task == 0);  // round-robin goes on after w's two shards
  for (auto& [ps, req] : create_requests(vars)) {
    auto created = call<pb::Created>(coord.self, shards[size_t(ps)], req);
    BOOST_REQUIRE_MESSAGE(created, (created ? "" : why(created.error())));
  }
  std::vector<const sharded_variable*> view{&vars[0], &vars[1]};
  // Two workers, K = 5 steps each; SGD lr 0.5; values chosen so float sums are exact.
  const float gw[2] = {1.0f, 0.5f}, gb[2] = {2.0f, 0.25f};
  const int K = 5;
  caf::scoped_actor workers[2] = {caf::scoped_actor{coord.sys}, caf::scoped_actor{coord.sys}};
  for (int step = 0; step < K; ++step)
    for (uint32_t w = 0; w < 2; ++w) {
      std::vector<float> grad_w(40, gw[w]), grad_b(4, gb[w]);
      for (auto& [ps, msgs] : split_push(w, step, view, {grad_w.data(), grad_b.data()}, kChunk)) {
        BOOST_TEST(msgs.size() == 2u);  // chunked: 24 and 20 floats in messages of at most 12
        for (auto& m : msgs) {
          auto ack = call<pb::PushAck>(workers[w], shards[size_t(ps)], m);
          BOOST_REQUIRE_MESSAGE(ack, (ack ? "" : why(ack.error())));
          BOOST_TEST(ack->duplicates() == 0u);
        }
      }
    }
  // A retried message (same worker, step, slices) is applied once.
  std::vector<float> retry_w(40, 100.0f), retry_b(4, 100.0f);
  auto retry = split_push(1, K - 1, view, {retry_w.data(), retry_b.data()}, kChunk);
  auto dup = call<pb::PushAck>(workers[1], shards[1], retry[1][0]);
  BOOST_TEST(dup->duplicates() == uint32_t(retry[1][0].gradients_size()));
  std::vector<float> w(40, -1.0f), b(4, -1.0f);
  for (auto& [ps, pulls] : split_pull(view, kChunk))
    for (auto& p : pulls) {
      auto values = call<pb::Values>(coord.self, shards[size_t(ps)], p);
      BOOST_REQUIRE_MESSAGE(values, (values ? "" : why(values.error())));
      BOOST_REQUIRE(!scatter_values(*values, view, {w.data(), b.data()}));
    }
  BOOST_TEST(w == std::vector<float>(40, -0.5f * K * (gw[0] + gw[1])));
  BOOST_TEST(b == std::vector<float>(4, -0.5f * K * (gb[0] + gb[1])));
  // SIGTERM stops a PS node and its shard cleanly.
  cluster.node("ps:1").signal(SIGTERM);
  auto code = cluster.node("ps:1").wait(10s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0);
}

BOOST_AUTO_TEST_CASE(sync_mode_across_processes_applies_one_mean_per_step) {
  local_cluster cluster({"coordinator", "ps", "ps", "worker"});
  cluster.start("ps:0");
  cluster.start("ps:1");
  cluster_client coord(cluster.config);
  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  sync.set_replicas_to_aggregate(2);
  sync.set_num_workers(2);
  std::vector<ps_shard_actor> shards;
  for (uint32_t i = 0; i < 2; ++i) {
    auto node = coord.must_dial("ps:" + std::to_string(i));
    shards.push_back(*coord.spawn_shard(node, i, sync));
  }
  auto vars = two_ps_variables();
  for (auto& [ps, req] : create_requests(vars)) BOOST_REQUIRE(call<pb::Created>(coord.self, shards[size_t(ps)], req));
  std::vector<const sharded_variable*> view{&vars[0], &vars[1]};
  float expected = 0;
  for (int step = 0; step < 3; ++step) {
    for (uint32_t w = 0; w < 2; ++w) {
      std::vector<float> gw(40, float(w + 1)), gb(4, float(w + 1));  // mean over workers = 1.5
      for (auto& [ps, msgs] : split_push(w, step, view, {gw.data(), gb.data()}, kChunk))
        for (auto& m : msgs) BOOST_REQUIRE(call<pb::PushAck>(coord.self, shards[size_t(ps)], m));
    }
    expected -= 0.5f * 1.5f;
    std::vector<float> w(40), b(4);
    for (auto& [ps, pulls] : split_pull(view, kChunk))
      for (auto p : pulls) {
        p.set_step(step + 1);  // the step's update is visible
        auto values = call<pb::Values>(coord.self, shards[size_t(ps)], p);
        BOOST_REQUIRE(values);
        BOOST_TEST(values->step() == step + 1);
        BOOST_REQUIRE(!scatter_values(*values, view, {w.data(), b.data()}));
      }
    BOOST_TEST(w == std::vector<float>(40, expected));
    BOOST_TEST(b == std::vector<float>(4, expected));
  }
}

BOOST_AUTO_TEST_CASE(only_the_coordinator_spawns_shards_and_only_where_a_ps_task_lives) {
  local_cluster cluster({"coordinator", "ps", "worker"});
  cluster.start("ps:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("ps:0");
  auto wrong = coord.spawn_shard(node, 3, pb::Consistency{});
  BOOST_REQUIRE(!wrong);
  BOOST_TEST(why(wrong.error()).find("hosts no task ps:3") != std::string::npos, why(wrong.error()));
  pb::Consistency bad;
  bad.set_mode(pb::Consistency::SYNC);
  auto invalid = coord.spawn_shard(node, 0, bad);
  BOOST_REQUIRE(!invalid);
  BOOST_TEST(why(invalid.error()).find("replicas_to_aggregate must be >= 1") != std::string::npos);
  cluster_client worker(cluster.config);
  auto as_worker = worker.dial("ps:0", task_id{pb::WORKER, 0});
  BOOST_REQUIRE(as_worker);
  auto refused = worker.spawn_shard(*as_worker, 0, pb::Consistency{});
  BOOST_REQUIRE(!refused);
  BOOST_TEST(why(refused.error()).find("spawning PS shards is not for worker:0") != std::string::npos,
             why(refused.error()));
  // The node counted it, and `actorps status` says so.
  auto status = cluster.cli({"status", "--config", cluster.config});
  BOOST_TEST(status.out.find("ps:0 refused from worker:0: forbidden 1\n") != std::string::npos, status.out);
}

BOOST_AUTO_TEST_CASE(bounded_staleness_and_sparse_rows_across_processes) {
  local_cluster cluster({"coordinator", "ps", "worker"});
  cluster.start("ps:0");
  cluster_client coord(cluster.config);
  auto node = coord.must_dial("ps:0");
  pb::Consistency ssp;
  ssp.set_mode(pb::Consistency::BOUNDED_STALENESS);
  ssp.set_staleness(1);
  ssp.set_num_workers(2);
  auto shard = coord.spawn_shard(node, 0, ssp);
  BOOST_REQUIRE(shard);
  auto table = variable_spec("emb", {50, 8}, pb::Optimizer::SGD, 1.0f);
  table.mutable_initializer()->set_kind(pb::Initializer::CONSTANT);
  table.mutable_initializer()->set_value(3.0f);
  pb::CreateVariables create;
  *create.add_variables() = table;
  BOOST_REQUIRE(call<pb::Created>(coord.self, *shard, create));
  // Worker 0 pushes sparse rows for steps 0 and 1 (clock 2); worker 1 has pushed nothing.
  auto sparse_push = [&](uint32_t worker, int64_t step, std::vector<int64_t> ids) {
    pb::SparsePush sp;
    sp.set_worker(worker);
    sp.set_step(step);
    auto* g = sp.mutable_gradient();
    g->set_name("emb");
    g->set_dim(8);
    for (auto id : ids) g->add_ids(id);
    std::vector<float> rows(ids.size() * 8, 1.0f);
    g->set_data(reinterpret_cast<const char*>(rows.data()), rows.size() * 4);
    return call<pb::PushAck>(coord.self, *shard, sp);
  };
  BOOST_REQUIRE(sparse_push(0, 0, {3, 7}));
  BOOST_REQUIRE(sparse_push(0, 1, {7}));
  // Worker 0 wants step 2: 2 - slowest clock 0 > staleness 1, so its pull waits.
  caf::scoped_actor fast{coord.sys};
  pb::Pull ahead;
  ahead.add_names("emb");
  ahead.set_worker(0);
  ahead.set_step(2);
  fast->send(*shard, ahead);
  auto stats = call<pb::ShardStats>(coord.self, *shard, pb::ShardStatsRequest{});
  BOOST_TEST(stats->waiting() == 1u);
  BOOST_REQUIRE(sparse_push(1, 0, {40}));  // worker 1 reaches clock 1: 2 - 1 <= 1
  std::vector<float> values;
  fast->receive([&](const pb::Values& v) { values = floats(v.tensors(0).data()); },
                caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_REQUIRE(values.size() == 400u);
  for (int row = 0; row < 50; ++row) {
    const float want = row == 3 ? 2.0f : row == 7 ? 1.0f : row == 40 ? 2.0f : 3.0f;  // SGD lr 1, one per push
    BOOST_TEST(values[size_t(row * 8)] == want, "row " << row);
  }
  auto after = call<pb::ShardStats>(coord.self, *shard, pb::ShardStatsRequest{});
  BOOST_REQUIRE(after);
  BOOST_TEST(after->waiting() == 0u);
  // The load it saw, from the PS process: 50 rows in 13 ranges of 4 (the
  // last of 2); the pushes' rows {3, 7}, {7}, {40}, then the whole pull.
  BOOST_REQUIRE(after->ranges_size() == 13);
  auto range = [&](int i) { return after->ranges(i); };
  BOOST_TEST((range(0).first_row() == 0 && range(0).requests() == 2u && range(0).rows_touched() == 5u));
  BOOST_TEST((range(1).first_row() == 4 && range(1).requests() == 3u && range(1).rows_touched() == 6u));
  BOOST_TEST(range(1).bytes() == 6u * 32);
  BOOST_TEST((range(10).first_row() == 40 && range(10).requests() == 2u && range(10).rows_touched() == 5u));
  BOOST_TEST((range(12).first_row() == 48 && range(12).rows() == 2 && range(12).requests() == 1u));
  BOOST_REQUIRE(after->hot_rows_size() == 3);
  BOOST_TEST((after->hot_rows(0).row() == 7 && after->hot_rows(0).count() == 2u && after->hot_rows(0).error() == 0u));
  BOOST_TEST((after->hot_rows(1).row() == 3 && after->hot_rows(2).row() == 40 && after->hot_rows(2).count() == 1u));
}

BOOST_AUTO_TEST_CASE(bulk_lane_pushes_and_pulls_through_the_shard) {
  local_cluster cluster({"coordinator", "ps", "worker"});
  cluster.start("ps:0");
  cluster_client coord(cluster.config);
  pb::Welcome welcome;
  auto dialed = coord.dial("ps:0", task_id{pb::COORDINATOR, 0}, &welcome);
  BOOST_REQUIRE(dialed);
  auto node = *dialed;
  BOOST_REQUIRE(welcome.bulk_port() != 0u);
  auto shard = coord.spawn_shard(node, 0, pb::Consistency{});
  BOOST_REQUIRE(shard);
  // 21 MB: several bulk frames, each a slice.
  const int64_t rows = 5243, cols = 1000, n = rows * cols;
  const auto frames = uint32_t((n * 4 + kBulkFrameBytes - 1) / kBulkFrameBytes);
  BOOST_REQUIRE(frames > 2u);
  pb::CreateVariables create;
  *create.add_variables() = variable_spec("big", {rows, cols}, pb::Optimizer::SGD, 0.5f);
  *create.add_variables() = variable_spec("small", {3}, pb::Optimizer::SGD, 0.5f);
  BOOST_REQUIRE(call<pb::Created>(coord.self, *shard, create));
  // By host name, as a cluster spec gives it (Kubernetes: Service names).
  auto lane = bulk_client::connect("localhost", uint16_t(welcome.bulk_port()), welcome.bulk_token());
  BOOST_REQUIRE_MESSAGE(lane, (lane ? "" : why(lane.error())));
  std::vector<float> grad(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) grad[size_t(i)] = float(i % 7);  // small integers: exact sums
  for (uint32_t worker = 0; worker < 2; ++worker)
    for (int step = 0; step < 2; ++step) {
      auto ack = lane->push(one_range(0, worker, step, "big", 0, n), {grad.data()});
      BOOST_REQUIRE_MESSAGE(ack, (ack ? "" : why(ack.error())));
      BOOST_TEST(ack->applied() == frames);
    }
  auto retry = lane->push(one_range(0, 1, 1, "big", 0, n), {grad.data()});
  BOOST_TEST(retry->duplicates() == frames);
  std::vector<float> out(static_cast<size_t>(n), -1.0f);
  auto pulled = lane->pull(one_range(0, 0, 0, "big", 0, n), {out.data()});
  BOOST_REQUIRE_MESSAGE(!pulled, why(pulled));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += out[size_t(i)] != -0.5f * 4 * float(i % 7) ? 1 : 0;
  BOOST_TEST(wrong == 0);
  // Several variables in one request, as a worker's step: the small one and
  // the start of the big tail share a frame, the rest of the tail takes a second.
  const int64_t tail = kBulkFrameBytes / 4 + 1000, from = n - tail;
  auto both = one_range(0, 0, 7, "small", 0, 3);
  *both.add_ranges() = one_range(0, 0, 7, "big", from, tail).ranges(0);
  std::vector<float> small_grad{2, 4, 6};
  auto ack = lane->push(both, {small_grad.data(), grad.data() + from});
  BOOST_REQUIRE_MESSAGE(ack, (ack ? "" : why(ack.error())));
  BOOST_TEST(ack->applied() == 3u);  // slices: small and big's first part, then big's second
  std::vector<float> small_out(3), tail_out(static_cast<size_t>(tail));
  BOOST_REQUIRE(!lane->pull(both, {small_out.data(), tail_out.data()}));
  BOOST_TEST(small_out == (std::vector<float>{-1, -2, -3}));
  for (int64_t i = 0; i < tail; ++i) wrong += tail_out[size_t(i)] != -0.5f * 5 * float((from + i) % 7) ? 1 : 0;
  BOOST_TEST(wrong == 0);
  BOOST_TEST(lane->pull(both, {small_out.data()}).code() == uint8_t(errc::invalid_argument));
  // Bad requests get the shard's typed errors; the lane stays usable.
  auto unknown = lane->push(one_range(0, 0, 9, "nope", 0, 4), {grad.data()});
  BOOST_REQUIRE(!unknown);
  BOOST_TEST(unknown.error().code() == uint8_t(errc::unknown_variable), why(unknown.error()));
  auto beyond = lane->pull(one_range(0, 0, 0, "big", n - 2, 4), {out.data()});
  BOOST_REQUIRE(beyond);
  BOOST_TEST(why(beyond).find("4 elements at offset 5242998 outside its 5243000") != std::string::npos, why(beyond));
  auto no_shard = lane->push(one_range(0 + 7, 0, 9, "big", 0, 4), {grad.data()});
  BOOST_REQUIRE(!no_shard);
  BOOST_TEST(why(no_shard.error()).find("no shard ps:7") != std::string::npos);
  BOOST_TEST(!lane->pull(one_range(0, 0, 0, "big", 0, 4), {out.data()}));  // still fine
  // A frame whose payload never completes: an error back, nothing applied.
  {
    int fd = connect_tcp(uint16_t(welcome.bulk_port()));
    BOOST_REQUIRE(fd >= 0);
    auto frame = [&](const google::protobuf::MessageLite& m) {
      auto head = m.SerializeAsString();
      uint32_t len = uint32_t(head.size());
      return std::string(reinterpret_cast<const char*>(&len), 4) + head;
    };
    pb::BulkHello h;
    h.set_token(welcome.bulk_token());
    auto req = one_range(0, 1, 50, "big", 0, 100);
    req.set_kind(pb::BulkRequest::PUSH);
    req.set_payload_bytes(400);
    auto bytes = frame(h) + frame(req) + std::string(100, '\x01');  // 100 of 400 payload bytes
    BOOST_REQUIRE(write_full(fd, bytes.data(), bytes.size()));
    uint32_t len = 0;
    BOOST_REQUIRE(read_full(fd, reinterpret_cast<char*>(&len), 4));  // within the stall bound
    std::string head(len, '\0');
    BOOST_REQUIRE(read_full(fd, head.data(), len));
    pb::BulkReply reply;
    BOOST_REQUIRE(reply.ParseFromString(head));
    BOOST_TEST(reply.code() == uint32_t(errc::bad_tensor));
    BOOST_TEST(reply.error().find("incomplete") != std::string::npos, reply.error());
    ::close(fd);
    BOOST_TEST(!lane->pull(one_range(0, 0, 0, "big", 0, n), {out.data()}));
    BOOST_TEST(out[1] == -0.5f * 4 * 1.0f);  // unchanged
  }
  // Without the node's token, nothing is served.
  auto intruder = bulk_client::connect("127.0.0.1", uint16_t(welcome.bulk_port()), "guess");
  BOOST_REQUIRE(intruder);
  BOOST_TEST(!intruder->push(one_range(0, 0, 0, "big", 0, 4), {grad.data()}));
  // SIGTERM still stops the node (bulk threads included) cleanly.
  cluster.node("ps:0").signal(SIGTERM);
  auto code = cluster.node("ps:0").wait(10s);
  BOOST_REQUIRE(code);
  BOOST_TEST(*code == 0);
}
