// The top README's C++ tour, compiled and run: the lines between the tour
// markers below are the README's "From C++" block, word for word (the
// second case checks it), and run here against real node processes.
#define BOOST_TEST_MODULE tour
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "messages/closure_values.hpp"
#include "tests/cluster_harness.hpp"
#include "tests/training_jobs.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

// The README's tour; `result` gets what the closure returned.
caf::error tour(caf::actor_system& sys, const cluster_spec& spec, const kernels::model_spec& model,
                const pb::DatasetSpec& data, values& result) {
  // tour:begin
  auto connected = cluster_coordinator::connect(sys, spec, pb::Consistency{});  // a shard on each PS node
  if (!connected) return connected.error();
  cluster_coordinator& c = **connected;
  pb::Optimizer sgd;
  sgd.set_learning_rate(0.05f);
  if (auto err = c.create_variables(model, /*seed=*/1, sgd)) return err;  // round-robin over the shards
  if (auto err = c.create_workers(model, {/*threads=*/1})) return err;    // each joins when its node answers
  if (auto err = c.wait_for_workers(1)) return err;
  if (auto info = c.create_per_worker_dataset("train", data); !info) return info.error();
  remote_value v = c.schedule("train_step", {per_worker_dataset("train"), integer_value(10)});
  if (auto err = c.join()) return err;  // the first error since the last join, or none
  auto done = v.fetch();                // [loss_sum, correct, examples, steps] or the closure's error
  if (!done) return done.error();
  auto& ps = c.placement();  // PS administration: variables, moves, splits, ps tasks
  auto moved = ps.move_shard(ps.variables()[0].shard_name(0), 1);  // live, while closures run (async)
  if (!moved) return moved.error();
  // tour:end
  result = *done;
  return caf::none;
}

// The lines between the markers of `text`, each without `indent` leading spaces.
std::string between(const std::string& text, const std::string& begin, const std::string& end, size_t indent) {
  std::istringstream in(text);
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.find(begin) != std::string::npos;
      continue;
    }
    if (line.find(end) != std::string::npos) break;
    out += line.substr(std::min(indent, line.size())) + "\n";
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_tour_trains_a_step_and_moves_a_shard_on_real_nodes) {
  local_cluster cluster({"coordinator", "worker", "ps", "ps"});
  cluster.start_nodes();
  cluster_client client(cluster.config);
  values result;
  auto err = tour(client.sys, client.spec, small_model(), learnable(256), result);
  BOOST_REQUIRE_MESSAGE(!err, describe(err));
  BOOST_REQUIRE_EQUAL(result.size(), 4u);
  BOOST_TEST(result[3].integer() == 10);                   // steps
  BOOST_TEST(result[2].integer() == 10 * 32);              // examples: 10 batches of 32
  BOOST_TEST(result[1].integer() <= result[2].integer());  // correct
}

BOOST_AUTO_TEST_CASE(the_readme_quotes_the_tour_as_it_compiles) {
  const auto source = read_file(ACTORPS_SOURCE_DIR "/tests/test_tour.cpp");
  const auto readme = read_file(ACTORPS_SOURCE_DIR "/README.md");
  const auto code = between(source,
                            "// tour:"
                            "begin",
                            "// tour:"
                            "end",
                            2);
  BOOST_REQUIRE(!code.empty());
  const auto quoted = between(readme, "```cpp", "```", 0);
  BOOST_TEST(quoted == code, "README.md's ```cpp block differs from tests/test_tour.cpp's tour");
}
