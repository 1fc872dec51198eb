// `actorps bench data`: how fast a dataset actor in a worker node process
// feeds this process (the consumer, as a worker would be) with
// Fashion-MNIST batches, beside how fast the seed CNN eats them here.
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/launch/subprocess.hpp"
#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "apps/bench_cluster.hpp"
#include "apps/bench_record.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"

namespace actorps {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr uint32_t kBatch = 64, kShuffle = 10000, kPrefetch = 4;

pb::DatasetSpec fashion_spec(const std::string& dir) {
  pb::DatasetSpec spec;
  spec.mutable_idx()->set_images(dir + "/fashion/train-images-idx3-ubyte");
  spec.mutable_idx()->set_labels(dir + "/fashion/train-labels-idx1-ubyte");
  auto* scale = spec.add_ops()->mutable_map();
  scale->set_kind(pb::Map::SCALE);
  scale->set_factor(1.0f / 255);
  auto* shuffle = spec.add_ops()->mutable_shuffle();
  shuffle->set_buffer_size(kShuffle);
  shuffle->set_seed(1);
  spec.add_ops()->mutable_repeat()->set_count(-1);
  spec.add_ops()->mutable_batch()->set_size(kBatch);
  spec.add_ops()->mutable_prefetch()->set_batches(kPrefetch);
  return spec;
}

// Batches per second over `count` batches with `ahead` requests in flight.
caf::expected<double> fetch_rate(caf::scoped_actor& self, const dataset_actor& d, uint32_t count, uint32_t ahead) {
  for (uint32_t i = 0; i < ahead; ++i) self->send(d, pb::NextBatch{});
  caf::error failed;
  auto start = clock_type::now();
  for (uint32_t got = 0; got < count && !failed;)
    self->receive(
        [&](pb::BatchData& b) {
          if (b.end() || b.size() != int(kBatch)) failed = make_error(errc::internal, "the endless pipeline ended");
          ++got;
          self->send(d, pb::NextBatch{});
        },
        [&](caf::error& err) { failed = std::move(err); },
        caf::after(std::chrono::seconds(30)) >> [&] { failed = make_error(errc::timeout, "no batch within 30 s"); });
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (uint32_t i = 0; i < ahead; ++i)  // the requests still in flight
    self->receive([](pb::BatchData&) {}, [](caf::error&) {}, caf::after(std::chrono::seconds(30)) >> [] {});
  if (failed) return failed;
  return count / seconds;
}

}  // namespace

int run_bench_data(const data_bench_options& opts) {
  auto fail = [](const std::string& what, const caf::error& err) {
    fmt::print(stderr, "bench data: {}: {}\n", what, describe(err));
    return 1;
  };
  if (!std::ifstream(opts.data_dir + "/fashion/train-images-idx3-ubyte"))
    return fail(opts.data_dir,
                make_error(errc::invalid_argument, "no Fashion-MNIST here: run tools/fetch_data.sh first"));
  bench_cluster cluster({"coordinator", "worker"});
  if (auto err = cluster.start(opts.self_exe, {"worker:0"})) return fail("worker node", err);
  const cluster_spec* spec = &cluster.spec();
  std::vector<double> rates;
  {
    system_config cfg(spec->runtime);
    caf::actor_system sys(cfg);
    caf::scoped_actor self(sys);
    auto node = dial_node_now(self, *spec, task_id{pb::COORDINATOR, 0}, 1);
    if (!node) return fail("dialing worker:0", node.error());
    pb::SpawnDataset req;
    req.set_worker(0);
    *req.mutable_spec() = fashion_spec(opts.data_dir);
    auto d = request_now<dataset_actor>(self, *node, std::chrono::seconds(10), req);
    if (!d) return fail("spawning the dataset", d.error());
    if (auto info = request_now<pb::DatasetInfo>(self, *d, std::chrono::seconds(60), pb::DatasetInfoRequest{}); !info)
      return fail("building the dataset", info.error());
    if (auto warm = fetch_rate(self, *d, 200, kPrefetch); !warm) return fail("warm-up", warm.error());
    for (uint32_t rep = 0; rep < opts.repetitions; ++rep) {
      auto rate = fetch_rate(self, *d, opts.batches, kPrefetch);
      if (!rate) return fail("fetching batches", rate.error());
      rates.push_back(*rate);
    }
  }
  (void)cluster.stop();  // the CNN below gets the machine to itself
  kernels_bench_options cnn;
  cnn.iterations = 20;
  cnn.repetitions = 3;
  const int threads = int(std::thread::hardware_concurrency());
  const double cnn_rate = cnn_samples_per_second(int(kBatch), threads, cnn) / kBatch;
  const double data_rate = median(rates);
  fmt::print(
      "Fashion-MNIST IDX -> scale 1/255 -> shuffle {} -> repeat -> batch {} -> {} requests in flight;\n"
      "dataset actor in a worker node process, this process consuming; medians of {} x {} batches\n",
      kShuffle, kBatch, kPrefetch, opts.repetitions, opts.batches);
  fmt::print("{:<44} {:>12}\n", "", "batches/s");
  fmt::print("{:<44} {:>12.0f}\n", "dataset actor delivers", data_rate);
  fmt::print("{:<44} {:>12.0f}\n", fmt::format("seed CNN train step consumes ({} threads)", threads), cnn_rate);
  bench::print_target({"data_vs_cnn", fmt::format("{:.1f}", data_rate / cnn_rate), "x", ">= 10"});
  return 0;
}

}  // namespace actorps
