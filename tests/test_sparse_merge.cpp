// Sparse gradients at a recommender's scale: merge_rows (a radix order of
// the ids) against a plain map on thousands of lookups with ids of one to
// six digits, and every fast table's embedding lookup (rows prefetched
// ahead) against the reference on batches long enough to prefetch.
#define BOOST_TEST_MODULE sparse_merge
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <vector>

#include "kernels/ops.hpp"
#include "kernels/sparse.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// `count` ids below `bound`, about a tenth of them padding (-1), drawn
// from a pool small enough that many repeat.
std::vector<int64_t> random_ids(int64_t count, int64_t bound, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> pool(static_cast<size_t>(count / 3 + 1));
  for (auto& id : pool) id = std::uniform_int_distribution<int64_t>(0, bound - 1)(gen);
  pool[0] = 0, pool[1] = bound - 1;  // both ends of the range
  std::vector<int64_t> ids(static_cast<size_t>(count));
  for (auto& id : ids) id = gen() % 10 == 0 ? -1 : pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(gen)];
  return ids;
}

}  // namespace

BOOST_AUTO_TEST_CASE(merge_rows_matches_a_map_for_any_id_width) {
  const int dim = 3;
  for (int64_t bound : {int64_t(5), int64_t(2048), int64_t(1415790), int64_t(1) << 40, INT64_MAX}) {
    BOOST_TEST_CONTEXT("ids below " << bound) {
      const auto ids = random_ids(5000, bound, unsigned(bound % 1000));
      const auto rows = random_vector(int64_t(ids.size()) * dim, 7);
      std::map<int64_t, std::vector<float>> want;  // summed in the lookups' order, as merge_rows must
      for (size_t at = 0; at < ids.size(); ++at) {
        if (ids[at] < 0) continue;
        auto& sum = want.try_emplace(ids[at], dim, 0.0f).first->second;
        for (int d = 0; d < dim; ++d) sum[size_t(d)] += rows[at * dim + size_t(d)];
      }
      sparse_rows got;
      for (int twice = 0; twice < 2; ++twice) {  // the second call reuses the first's memory
        merge_rows(ids.data(), rows.data(), int64_t(ids.size()), dim, got);
        BOOST_REQUIRE(got.ids.size() == want.size());
        BOOST_REQUIRE(got.rows.size() == want.size() * dim);
        size_t r = 0;
        for (auto& [id, sum] : want) {
          BOOST_TEST(got.ids[r] == id);
          for (int d = 0; d < dim; ++d) BOOST_TEST(got.rows[r * dim + size_t(d)] == sum[size_t(d)]);
          ++r;
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(embedding_lookup_matches_reference_on_long_batches) {
  // Wide & Deep's two lookups (26 ids summed into one weight; 26 rows of 16
  // kept, one per id) and a mean over a bag, at 64 examples.
  const int64_t vocab = 100000;
  const auto ids = random_ids(64 * 26, vocab, 3);
  for (auto s :
       {embedding_shape{64, 26, vocab, 1, combiner::sum}, embedding_shape{64 * 26, 1, vocab, 16, combiner::sum},
        embedding_shape{64, 26, vocab, 8, combiner::mean}}) {
    const auto table = random_vector(vocab * s.dim, 11);
    buffer want(int64_t(s.m) * s.dim);
    reference_ops().embedding_forward(s, table.data(), ids.data(), want.data());
    for (auto* ops : fast_tables()) {
      BOOST_TEST_CONTEXT(ops->name << " m " << s.m << " per " << s.per << " dim " << s.dim) {
        buffer got(want.size());
        run(*ops,
            [&](const ops_table& t, device_arrays& d) { t.embedding_forward(s, d.in(table), d.ids(ids), d.out(got)); });
        check_close(got, want, 1e-6);
      }
    }
  }
}
