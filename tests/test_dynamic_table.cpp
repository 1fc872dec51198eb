// A dynamic embedding table's storage (actors/shard/dynamic_table.hpp) as a
// plain class: initial values seeded by the id, the index under churn,
// admission by count-min sketch, TTL and LRU eviction, the for_each/put round
// trip, and the memory a row costs.
#define BOOST_TEST_MODULE dynamic_table
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/shard/dynamic_table.hpp"

using namespace actorps;

namespace {

dynamic_table_options options(int dim, std::vector<float> slot_init, kernels::initializer::kind kind,
                              uint64_t seed = 7) {
  dynamic_table_options o;
  o.dim = dim;
  o.slot_init = std::move(slot_init);
  o.init.type = kind;
  o.init.seed = seed;
  return o;
}

std::vector<float> read(const dynamic_table& t, int64_t id) {
  std::vector<float> v(size_t(t.options().dim));
  t.read(id, v.data());
  return v;
}

std::vector<float> whole_row(const dynamic_table& t, int64_t id) {
  const float* r = t.find(id);
  BOOST_REQUIRE(r != nullptr);
  return std::vector<float>(r, r + t.row_floats());
}

// A row's values and slots, each float a function of the id and its place,
// so that a row moved, overwritten or mixed up with another shows.
void write_pattern(float* row, int64_t id, int n) {
  for (int j = 0; j < n; ++j) row[j] = float(id % 100003) + 0.25f * float(j);
}
bool has_pattern(const float* row, int64_t id, int n) {
  for (int j = 0; j < n; ++j)
    if (row[j] != float(id % 100003) + 0.25f * float(j)) return false;
  return true;
}

// Rows 1..n admitted, row k updated at step k.
void admit_in_order(dynamic_table& t, int64_t n) {
  for (int64_t id = 1; id <= n; ++id) {
    t.admit(id);
    t.touch(id, uint64_t(id));
  }
}

std::vector<int64_t> lru_order(const dynamic_table& t) {
  std::vector<int64_t> ids;
  t.for_each([&](int64_t id, const float*, uint64_t, uint32_t) { ids.push_back(id); });
  return ids;
}

bool names(const std::invalid_argument& e, const std::string& field) {
  return std::string(e.what()).find(field) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(constructor_rejects_bad_options) {
  auto o = options(0, {}, kernels::initializer::kind::zeros);
  BOOST_CHECK_EXCEPTION(dynamic_table{o}, std::invalid_argument, [](auto& e) { return names(e, "dim"); });
  o.dim = -3;
  BOOST_CHECK_EXCEPTION(dynamic_table{o}, std::invalid_argument, [](auto& e) { return names(e, "dim"); });
  o.dim = 4;
  o.min_count = 0;
  BOOST_CHECK_EXCEPTION(dynamic_table{o}, std::invalid_argument, [](auto& e) { return names(e, "min_count"); });
  o.min_count = 256;
  BOOST_CHECK_EXCEPTION(dynamic_table{o}, std::invalid_argument, [](auto& e) { return names(e, "min_count"); });
  o.min_count = 255;
  BOOST_CHECK_NO_THROW(dynamic_table{o});
}

// Placement must agree in every process: pin the function, not just its use.
BOOST_AUTO_TEST_CASE(id_hash_is_splitmix64s_finalizer) {
  // splitmix64 from state 0 first outputs the finalizer of its increment.
  BOOST_TEST(id_hash(int64_t(0x9E3779B97F4A7C15ull)) == 0xE220A8397B1DCDAFull);
  BOOST_TEST(id_hash(1) == 0x5692161D100B05E5ull);
  BOOST_TEST(virtual_row(1) == 726207246);
  BOOST_TEST(virtual_row(42) == int64_t(id_hash(42) >> 33));
  for (int64_t id : {int64_t(0), int64_t(5), int64_t(1) << 40, INT64_MAX}) {
    BOOST_TEST(virtual_row(id) >= 0);
    BOOST_TEST(virtual_row(id) < kVirtualRows);
  }
}

BOOST_AUTO_TEST_CASE(initial_values_depend_on_the_id_and_init_only) {
  auto o = options(8, {0.1f}, kernels::initializer::kind::uniform);
  dynamic_table shard0(o), shard1(o);
  const int64_t id = 123456789012345;
  const auto first = read(shard0, id);
  BOOST_TEST(first == read(shard1, id));  // another shard, or another process
  for (float v : first) {
    BOOST_TEST(v >= o.init.low);
    BOOST_TEST(v < o.init.high);
  }
  // The row admit creates holds exactly those values, then slot_init.
  float* row = shard0.admit(id);
  BOOST_REQUIRE(row != nullptr);
  BOOST_TEST(std::vector<float>(row, row + 8) == first);
  BOOST_TEST(std::vector<float>(row + 8, row + 16) == std::vector<float>(8, 0.1f));
  BOOST_TEST(read(shard0, id) == first);
  // After an update and an erase, re-admission starts from the same values.
  row[0] += 1;
  BOOST_TEST(read(shard0, id) != first);
  BOOST_TEST(shard0.erase(id));
  BOOST_TEST(!shard0.erase(id));
  BOOST_TEST(shard0.find(id) == nullptr);
  const float* again = shard0.admit(id);
  BOOST_TEST(std::vector<float>(again, again + 8) == first);

  // Another id, and another seed, start elsewhere.
  BOOST_TEST(read(shard0, id + 1) != first);
  auto reseeded = o;
  reseeded.init.seed = 8;
  BOOST_TEST(read(dynamic_table(reseeded), id) != first);

  // Two ids of one virtual row (found by the birthday bound: ~58k ids) differ:
  // a row depends on the whole id, not on its virtual row.
  std::unordered_map<int64_t, int64_t> by_virtual_row;
  int64_t a = -1, b = -1;
  for (int64_t i = 0; a < 0; ++i) {
    auto [it, fresh] = by_virtual_row.emplace(virtual_row(i), i);
    if (!fresh) a = it->second, b = i;
  }
  BOOST_TEST_MESSAGE("ids " << a << " and " << b << " share virtual row " << virtual_row(a));
  BOOST_TEST(read(shard0, a) != read(shard0, b));
}

BOOST_AUTO_TEST_CASE(glorot_uses_the_virtual_shape) {
  auto o = options(16, {}, kernels::initializer::kind::glorot_uniform);
  dynamic_table t(o);
  const float limit = kernels::glorot_limit({kVirtualRows, 16});
  BOOST_TEST(limit < 1e-4f);
  const auto v = read(t, 99);
  BOOST_TEST(std::any_of(v.begin(), v.end(), [](float x) { return x != 0; }));
  for (float x : v) BOOST_TEST(std::abs(x) <= limit);
}

// Backward-shift deletion keeps every probe run whole: random puts and
// erases over a small id range (long runs, many holes) against a plain map.
BOOST_AUTO_TEST_CASE(index_survives_random_puts_and_erases) {
  dynamic_table t(options(1, {0.0f}, kernels::initializer::kind::zeros));
  std::unordered_map<int64_t, float> want;
  std::mt19937_64 gen(1);
  for (uint64_t step = 1; step <= 200000; ++step) {
    const int64_t id = int64_t(gen() % 3000) * 1000003;
    if (gen() % 5 < 3) {
      const float row[2] = {float(step), -float(step)};
      t.put(id, row, step, 1);
      want[id] = float(step);
    } else {
      BOOST_REQUIRE(t.erase(id) == (want.erase(id) == 1));
    }
    if (step % 10000 != 0) continue;
    BOOST_REQUIRE(t.rows() == int64_t(want.size()));
    for (auto& [key, value] : want) {
      const float* r = t.find(key);
      BOOST_REQUIRE(r != nullptr);
      BOOST_REQUIRE(r[0] == value);
      BOOST_REQUIRE(r[1] == -value);
    }
  }
  for (int64_t id = 1; id < 3000; ++id) BOOST_REQUIRE(t.find(id) == nullptr);  // not multiples of 1000003
}

BOOST_AUTO_TEST_CASE(rows_need_min_count_sightings) {
  auto o = options(4, {0.1f}, kernels::initializer::kind::normal, 11);
  o.min_count = 3;
  dynamic_table t(o);
  for (int round = 0; round < 2; ++round)
    for (int64_t id = 0; id < 100; ++id) BOOST_TEST(t.admit(id) == nullptr);
  for (int64_t id = 100; id < 200; ++id) BOOST_TEST(t.admit(id) == nullptr);  // seen once
  BOOST_TEST(t.rows() == 0);
  BOOST_TEST(t.counts().dropped == 300u);
  BOOST_TEST(t.counts().admitted == 0u);
  BOOST_TEST(t.memory_bytes() >= size_t(4) << 16);  // the sketch counts

  for (int64_t id = 0; id < 100; ++id) {
    const auto initial = read(t, id);
    const float* row = t.admit(id);  // the third sighting
    BOOST_REQUIRE(row != nullptr);
    BOOST_TEST(std::vector<float>(row, row + 4) == initial);
    BOOST_TEST(std::vector<float>(row + 4, row + 8) == std::vector<float>(4, 0.1f));
    BOOST_TEST(t.admit(id) == row);  // a row is found, not counted again
  }
  BOOST_TEST(t.rows() == 100);
  BOOST_TEST(t.counts().admitted == 100u);
  BOOST_TEST(t.counts().dropped == 300u);
  for (int64_t id = 100; id < 200; ++id) BOOST_TEST(t.find(id) == nullptr);
}

BOOST_AUTO_TEST_CASE(sketch_round_trips) {
  auto o = options(2, {}, kernels::initializer::kind::zeros);
  BOOST_TEST(dynamic_table(o).sketch_bytes().empty());  // min_count 1 keeps none
  o.min_count = 3;
  dynamic_table a(o), b(o), fresh(o);
  for (int round = 0; round < 2; ++round)
    for (int64_t id = 0; id < 50; ++id) a.admit(id);
  BOOST_TEST(a.sketch_bytes().size() == size_t(4) << 16);
  b.set_sketch(a.sketch_bytes());
  for (int64_t id = 0; id < 50; ++id) {
    BOOST_TEST(b.admit(id) != nullptr);  // as a's third sighting would be
    BOOST_TEST(a.admit(id) != nullptr);
    BOOST_TEST(fresh.admit(id) == nullptr);
  }
  BOOST_TEST(a.sketch_bytes() == b.sketch_bytes());
  BOOST_CHECK_THROW(b.set_sketch("abc"), std::invalid_argument);
}

// 200,000 ids seen once each, min_count 2: a capped table's sketch (2 x
// max_rows counters per row) lets few pass as seen twice; the 2^16 one of
// an uncapped table, saturating, many. (Ids admitted here are false
// admissions: no id was seen twice.)
BOOST_AUTO_TEST_CASE(a_capped_tables_sketch_grows_with_max_rows_and_admits_few_ids_seen_once) {
  auto admitted_of_once_seen = [](uint64_t max_rows, size_t sketch_bytes) {
    auto o = options(2, {}, kernels::initializer::kind::zeros);
    o.min_count = 2;
    o.max_rows = max_rows;
    dynamic_table t(o);
    BOOST_TEST(t.sketch_bytes().size() == sketch_bytes);
    for (uint64_t i = 0; i < 200000; ++i) t.admit(int64_t((i * 0x9E3779B97F4A7Cull) >> 1));
    return t.counts().admitted;
  };
  const uint64_t capped = admitted_of_once_seen(100000, size_t(4) << 18);
  const uint64_t uncapped = admitted_of_once_seen(0, size_t(4) << 16);
  BOOST_TEST_MESSAGE("false admissions of 200,000 ids seen once: " << capped << " (2^18) vs " << uncapped << " (2^16)");
  BOOST_TEST(capped < 200000u / 20);  // under 5%
  BOOST_TEST(uncapped > 4 * capped);
  auto o = options(2, {}, kernels::initializer::kind::zeros);
  o.min_count = 2;
  o.max_rows = uint64_t(1) << 40;
  BOOST_TEST(dynamic_table(o).sketch_bytes().size() == size_t(4) << 22);  // at most 16 MiB
}

BOOST_AUTO_TEST_CASE(ttl_evicts_rows_not_updated) {
  auto o = options(2, {}, kernels::initializer::kind::zeros);
  o.ttl_steps = 10;
  dynamic_table t(o);
  admit_in_order(t, 3);
  t.touch(1, 12);
  BOOST_TEST(t.updates(1) == 2u);
  BOOST_TEST(t.last_update(1) == 12u);
  BOOST_TEST(t.evict(13) == 1);  // 2 is 11 steps old; 3 is 10
  BOOST_TEST(t.find(2) == nullptr);
  BOOST_TEST(t.updates(2) == 0u);
  BOOST_TEST(t.last_update(2) == 0u);
  BOOST_TEST(t.evict(14) == 1);
  BOOST_TEST(t.find(3) == nullptr);
  BOOST_TEST(t.find(1) != nullptr);
  BOOST_TEST(t.evict(22) == 0);
  // A row admitted but not yet updated counts as used at the latest step.
  t.admit(4);
  BOOST_TEST(t.last_update(4) == 22u);
  BOOST_TEST(t.updates(4) == 0u);
  BOOST_TEST(t.evict(23) == 1);  // 1, last updated at 12
  BOOST_TEST(lru_order(t) == std::vector<int64_t>{4});
  BOOST_TEST(t.counts().evicted == 3u);
  BOOST_TEST(t.counts().admitted == 4u);
  BOOST_CHECK_THROW(t.touch(1, 24), std::out_of_range);
}

BOOST_AUTO_TEST_CASE(max_rows_evicts_the_least_recently_updated) {
  auto o = options(2, {}, kernels::initializer::kind::zeros);
  o.max_rows = 3;
  dynamic_table t(o);
  admit_in_order(t, 5);
  t.touch(1, 6);
  BOOST_TEST(lru_order(t) == (std::vector<int64_t>{2, 3, 4, 5, 1}));
  BOOST_TEST(t.evict(6) == 2);
  BOOST_TEST(t.rows() == 3);
  BOOST_TEST(lru_order(t) == (std::vector<int64_t>{4, 5, 1}));
  BOOST_TEST(t.evict(6) == 0);
  BOOST_TEST(t.counts().evicted == 2u);
  BOOST_TEST(t.counts().admitted == 5u);
}

// 200k ids, mostly new, through a cap of 10k: memory stays flat once the
// cap is reached, and every row the reference says is live is there,
// unchanged, with its update count.
BOOST_AUTO_TEST_CASE(churn_keeps_memory_flat_and_rows_intact) {
  auto o = options(4, {0.1f}, kernels::initializer::kind::uniform);
  o.max_rows = 10000;
  dynamic_table t(o);
  struct state {
    uint64_t last;
    uint32_t updates;
  };
  std::unordered_map<int64_t, state> live;
  std::mt19937_64 gen(3);
  std::vector<int64_t> hot(100);
  for (auto& id : hot) id = int64_t(gen() >> 1);
  size_t flat_bytes = 0;
  uint64_t evicted = 0;
  for (uint64_t step = 1; step <= 200000; ++step) {
    const int64_t id = gen() % 5 == 0 ? hot[gen() % hot.size()] : int64_t(gen() >> 1);
    float* row = t.admit(id);
    BOOST_REQUIRE(row != nullptr);
    if (!live.count(id)) write_pattern(row, id, t.row_floats());
    t.touch(id, step);
    live[id].last = step;
    ++live[id].updates;
    if (step % 1000 != 0) continue;

    // The reference: the oldest last updates go (one update per step: no ties).
    std::vector<std::pair<uint64_t, int64_t>> by_age;
    for (auto& [key, s] : live) by_age.emplace_back(s.last, key);
    std::sort(by_age.begin(), by_age.end());
    const size_t excess = live.size() > o.max_rows ? live.size() - o.max_rows : 0;
    for (size_t i = 0; i < excess; ++i) live.erase(by_age[i].second);
    BOOST_REQUIRE(t.evict(step) == int64_t(excess));
    evicted += excess;
    BOOST_REQUIRE(t.rows() == int64_t(live.size()));
    for (size_t i = 0; i < excess; ++i) BOOST_REQUIRE(t.find(by_age[i].second) == nullptr);
    if (step == 20000) flat_bytes = t.memory_bytes();
    if (step > 20000) BOOST_REQUIRE(t.memory_bytes() == flat_bytes);
  }
  BOOST_TEST(t.rows() == 10000);
  BOOST_TEST(t.counts().evicted == evicted);
  BOOST_TEST(t.counts().admitted == evicted + 10000);
  for (auto& [id, s] : live) {
    const float* row = t.find(id);
    BOOST_REQUIRE(row != nullptr);
    BOOST_REQUIRE(has_pattern(row, id, t.row_floats()));
    BOOST_REQUIRE(t.last_update(id) == s.last);
    BOOST_REQUIRE(t.updates(id) == s.updates);
  }
  for (int64_t id : hot) BOOST_TEST(t.find(id) != nullptr);  // touched every ~500 steps
  BOOST_TEST_MESSAGE("churn: " << flat_bytes << " bytes for " << o.max_rows << " rows");
}

BOOST_AUTO_TEST_CASE(for_each_and_put_rebuild_the_same_table) {
  auto o = options(3, {0.1f, 0.0f}, kernels::initializer::kind::uniform);
  o.ttl_steps = 50;
  o.max_rows = 20;
  dynamic_table a(o), b(o);
  for (uint64_t step = 1; step <= 60; ++step) {
    const int64_t id = int64_t(step * 7 % 30) << 20;
    a.admit(id)[0] += float(step);
    a.touch(id, step);
  }
  a.for_each([&](int64_t id, const float* row, uint64_t last, uint32_t updates) { b.put(id, row, last, updates); });
  BOOST_TEST(b.rows() == a.rows());
  BOOST_TEST(b.counts().admitted == 0u);  // put is no admission
  BOOST_TEST(lru_order(b) == lru_order(a));
  for (int64_t id : lru_order(a)) {
    BOOST_TEST(whole_row(b, id) == whole_row(a, id));
    BOOST_TEST(b.updates(id) == a.updates(id));
    BOOST_TEST(b.last_update(id) == a.last_update(id));
  }
  // The same rows go next: the TTL the 4 last updated before step 35 (of 31..60), the cap 6 more.
  const int64_t evicted = a.evict(85);
  BOOST_TEST(evicted == 10);
  BOOST_TEST(b.evict(85) == evicted);
  BOOST_TEST(lru_order(b) == lru_order(a));

  // put over an existing row overwrites it whole and makes it the most recent.
  const int64_t oldest = lru_order(b).front();
  std::vector<float> row(size_t(b.row_floats()), 2.5f);
  b.put(oldest, row.data(), 85, 9);
  BOOST_TEST(whole_row(b, oldest) == row);
  BOOST_TEST(lru_order(b).back() == oldest);
  BOOST_TEST(b.updates(oldest) == 9u);
  BOOST_TEST(b.rows() == a.rows());
}

// The acceptance figure: dim 16 with Adagrad's one slot is 128 B of floats
// per row; slabs, index and metadata may add 30% of it and 16 B.
BOOST_AUTO_TEST_CASE(memory_per_row_within_budget) {
  dynamic_table t(options(16, {0.1f}, kernels::initializer::kind::zeros));
  for (int64_t id = 0; id < 1000000; ++id) BOOST_REQUIRE(t.admit(id * 37 + 5) != nullptr);
  BOOST_TEST(t.rows() == 1000000);
  BOOST_TEST(t.sketch_bytes().empty());
  const double per_row = double(t.memory_bytes()) / double(t.rows());
  BOOST_TEST_MESSAGE("memory per row: " << per_row << " B (row 128 B, budget " << 1.3 * 128 + 16 << " B)");
  BOOST_TEST(per_row <= 1.3 * 128 + 16);
  const float* row = t.find(37 * 999999 + 5);
  BOOST_REQUIRE(row != nullptr);
  BOOST_TEST(row[16] == 0.1f);
}
