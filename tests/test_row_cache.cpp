// A worker's cache of dynamic-table rows (actors/worker/row_cache.hpp): a
// row serves max_age steps after the one it was pulled for, then goes;
// its memory is reused.
#define BOOST_TEST_MODULE row_cache
#include <boost/test/unit_test.hpp>

#include <vector>

#include "actors/worker/row_cache.hpp"

using namespace actorps;

BOOST_AUTO_TEST_CASE(a_row_serves_max_age_steps_after_its_pull) {
  row_cache cache(2, 3);
  const std::vector<float> row{1.5f, -2.0f};
  BOOST_TEST(cache.find(7, 10) == nullptr);
  cache.put(7, 10, row.data());
  for (int64_t step = 10; step <= 13; ++step) {
    const float* got = cache.find(7, step);
    BOOST_REQUIRE(got != nullptr);
    BOOST_TEST(got[0] == 1.5f);
    BOOST_TEST(got[1] == -2.0f);
  }
  BOOST_TEST(cache.find(7, 14) == nullptr);  // 4 steps old
  BOOST_TEST(cache.hits() == 4u);
  BOOST_TEST(cache.misses() == 2u);
  BOOST_TEST(cache.rows() == 0u);
}

BOOST_AUTO_TEST_CASE(a_row_pulled_again_counts_from_its_new_pull) {
  row_cache cache(1, 2);
  const float a = 1, b = 2;
  cache.put(5, 0, &a);
  cache.put(5, 2, &b);  // pulled again (a miss at step 2 would do this)
  BOOST_REQUIRE(cache.find(5, 4) != nullptr);
  BOOST_TEST(*cache.find(5, 4) == 2.0f);
  BOOST_TEST(cache.find(5, 5) == nullptr);
}

BOOST_AUTO_TEST_CASE(rows_of_a_stream_of_new_ids_reuse_the_memory_of_expired_ones) {
  row_cache cache(4, 1);
  const std::vector<float> row(4, 0.5f);
  for (int64_t step = 0; step < 1000; ++step) {
    for (int64_t k = 0; k < 10; ++k) cache.put(step * 10 + k, step, row.data());
    cache.find(-1, step);  // expires what is older than a step
    BOOST_TEST(cache.rows() <= 20u);
  }
}
