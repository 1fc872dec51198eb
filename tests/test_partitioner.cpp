// Partitioners and placement against TensorFlow's documented examples
// (tf.distribute.experimental.partitioners, ParameterServerStrategy).
#define BOOST_TEST_MODULE partitioner
#include <boost/test/unit_test.hpp>

#include "config/partitioner.hpp"
#include "messages/errors.hpp"

using namespace actorps;

namespace {

std::vector<int64_t> rows(const std::vector<int64_t>& shape, const partitioner& p, int64_t element_bytes = 4) {
  auto r = shard_rows(shape, element_bytes, p);
  BOOST_REQUIRE_MESSAGE(r, (r ? std::string() : describe(r.error())));
  return *r;
}

using v = std::vector<int64_t>;

}  // namespace

BOOST_AUTO_TEST_CASE(fixed_shards_as_tf) {
  BOOST_TEST(rows({10, 3}, partitioner::fixed(2)) == v({5, 5}));     // TF doc: [10, 3], 2 shards -> [2, 1]
  BOOST_TEST(rows({10, 4}, partitioner::fixed(2)) == v({5, 5}));     // the case: [5, 4] + [5, 4]
  BOOST_TEST(rows({10, 4}, partitioner::fixed(3)) == v({4, 3, 3}));  // extra rows first
  BOOST_TEST(rows({11, 2}, partitioner::fixed(4)) == v({3, 3, 3, 2}));
  BOOST_TEST(rows({2, 8}, partitioner::fixed(5)) == v({1, 1}));  // never more shards than rows
}

BOOST_AUTO_TEST_CASE(min_size_as_tf) {
  // TF doc: MinSizePartitioner(min_shard_bytes=4, max_shards=2)([6, 1], float32) -> [2, 1]
  BOOST_TEST(rows({6, 1}, partitioner::min_size(4, 2)) == v({3, 3}));
  // Defaults (256 KiB, max_shards 1): never splits.
  BOOST_TEST(rows({100000, 64}, partitioner::min_size()) == v({100000}));
  // 1000 x 64 floats = 256,000 B; 64 KiB minimum -> ceil(3.9) = 4 shards (cap 8).
  BOOST_TEST(rows({1000, 64}, partitioner::min_size(64 << 10, 8)) == v({250, 250, 250, 250}));
  // Small variable: one shard even with a high cap.
  BOOST_TEST(rows({10, 4}, partitioner::min_size(1 << 20, 8)) == v({10}));
}

BOOST_AUTO_TEST_CASE(max_size_as_tf) {
  // TF doc: MaxSizePartitioner(max_shard_bytes=4)([6, 1], float32) -> [6, 1]
  BOOST_TEST(rows({6, 1}, partitioner::max_size(4)) == v({1, 1, 1, 1, 1, 1}));
  // ... with max_shards=2 -> [2, 1]
  BOOST_TEST(rows({6, 1}, partitioner::max_size(4, 2)) == v({3, 3}));
  // A row bigger than the limit still gets a shard of its own.
  BOOST_TEST(rows({3, 100}, partitioner::max_size(16)) == v({1, 1, 1}));
  // 10 rows of 16 B, 48 B per shard -> 3 rows per shard -> 4 shards.
  BOOST_TEST(rows({10, 4}, partitioner::max_size(48)) == v({3, 3, 2, 2}));
}

BOOST_AUTO_TEST_CASE(unpartitioned_and_scalars_stay_whole) {
  BOOST_TEST(rows({10, 4}, partitioner{}) == v({10}));
  BOOST_TEST(rows({}, partitioner::fixed(3)) == v({1}));
}

BOOST_AUTO_TEST_CASE(bad_partitioners_are_errors) {
  for (auto& [p, part] :
       std::vector<std::pair<partitioner, std::string>>{{partitioner::fixed(0), "num_shards must be >= 1, got 0"},
                                                        {partitioner::min_size(0, 2), "min_shard_bytes must be >= 1"},
                                                        {partitioner::min_size(4, 0), "max_shards must be >= 1"},
                                                        {partitioner::max_size(0), "max_shard_bytes must be >= 1"}}) {
    auto r = shard_rows({10, 4}, 4, p);
    BOOST_REQUIRE(!r);
    BOOST_TEST(describe(r.error()).find(part) != std::string::npos, describe(r.error()));
  }
  BOOST_TEST(!shard_rows({-1, 4}, 4, partitioner{}));
  BOOST_TEST(!placement(0).place({4}, 4, partitioner{}));
}

BOOST_AUTO_TEST_CASE(round_robin_over_ps_tasks_continues_across_variables) {
  placement place(2);
  auto a = place.place({10, 4}, 4, partitioner::fixed(3));
  BOOST_REQUIRE(a);
  BOOST_REQUIRE(a->size() == 3u);
  BOOST_TEST((*a)[0].ps_task == 0);
  BOOST_TEST((*a)[1].ps_task == 1);
  BOOST_TEST((*a)[2].ps_task == 0);
  BOOST_TEST((*a)[1].first_row == 4);
  BOOST_TEST((*a)[2].first_row == 7);
  BOOST_TEST((*a)[2].shape == v({3, 4}));
  auto b = place.place({64}, 4, partitioner{});
  BOOST_REQUIRE(b);
  BOOST_TEST((*b)[0].ps_task == 1);
  BOOST_TEST((*b)[0].shape == v({64}));
  auto c = place.place({3, 3}, 4, partitioner{});
  BOOST_TEST((*c)[0].ps_task == 0);
}

// partitioner = "load": big variables in num_shards parts, small ones
// whole; each shard to the task holding the fewest bytes so far.
BOOST_AUTO_TEST_CASE(the_load_partitioner_places_parts_by_bytes) {
  partitioner load;
  load.type = partitioner::kind::load;
  load.num_shards = 4;
  load.min_shard_bytes = 1024;
  BOOST_TEST(rows({1000, 8}, load) == v({250, 250, 250, 250}));
  BOOST_TEST(rows({10, 8}, load) == v({10}));  // 320 bytes: whole
  placement place(3);
  auto big = place.place({16}, 4, load);  // 64 bytes: whole, on ps:0
  BOOST_REQUIRE(big);
  BOOST_TEST((*big)[0].ps_task == 0);
  auto table = place.place({1000, 8}, 4, load);  // 4 parts of 8,000 bytes
  BOOST_REQUIRE(table);
  std::vector<int> tasks;
  for (auto& s : *table) tasks.push_back(s.ps_task);
  BOOST_TEST(tasks == std::vector<int>({1, 2, 0, 1}));  // ps:0 held 64 bytes more than the empty ones
}
