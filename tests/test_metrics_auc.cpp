// kernels/metrics.hpp: exact ROC AUC and log loss on sets small enough to
// work out by hand, ties, one-class sets, bad input, and an evaluation
// sharded in parts that merges to the whole's figures.
#define BOOST_TEST_MODULE metrics_auc
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/metrics.hpp"

using namespace actorps::kernels;

namespace {

// AUC by its definition: every (positive, negative) pair, O(P * N).
double pairwise_auc(const std::vector<double>& s, const std::vector<int32_t>& y) {
  double won = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (y[i] == 1 && y[j] == 0) {
        won += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
        pairs += 1;
      }
  return won / pairs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(auc_of_small_sets_by_hand) {
  // sklearn's doc example: scores 0.1 0.4 0.35 0.8, labels 0 0 1 1 -> 0.75
  // (of the 4 pairs, the positive 0.35 loses to the negative 0.4).
  BOOST_TEST(roc_auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}) == 0.75);
  BOOST_TEST(roc_auc({0.9, 0.8, 0.1}, {1, 1, 0}) == 1.0);
  BOOST_TEST(roc_auc({0.9, 0.8, 0.1}, {0, 0, 1}) == 0.0);
  // Logits rank as the probabilities do: the same AUC.
  BOOST_TEST(roc_auc({-2.2, -0.4, -0.6, 1.4}, {0, 0, 1, 1}) == 0.75);
}

BOOST_AUTO_TEST_CASE(ties_count_half) {
  BOOST_TEST(roc_auc({0.5, 0.5}, {1, 0}) == 0.5);
  BOOST_TEST(roc_auc({0.3, 0.3, 0.3, 0.3}, {1, 0, 1, 0}) == 0.5);
  // Pairs (p, n): (0.5, 0.5) tie 1/2, (0.5, 0.2) win, (0.7, 0.5) win,
  // (0.7, 0.2) win: 3.5 / 4.
  BOOST_TEST(roc_auc({0.5, 0.7, 0.5, 0.2}, {1, 1, 0, 0}) == 0.875);
  // Many ties on random sets against the pairwise definition.
  std::mt19937_64 gen(7);
  for (int n : {2, 3, 17, 200}) {
    std::vector<double> s;
    std::vector<int32_t> y;
    for (int i = 0; i < n; ++i) {
      s.push_back(double(gen() % 5) / 4);  // 5 distinct scores: ties everywhere
      y.push_back(i < 2 ? i : int32_t(gen() % 2));
    }
    BOOST_TEST(roc_auc(s, y) == pairwise_auc(s, y), boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(one_class_or_nan_scores_give_nan) {
  BOOST_TEST(std::isnan(roc_auc({0.2, 0.9}, {1, 1})));
  BOOST_TEST(std::isnan(roc_auc({0.2, 0.9}, {0, 0})));
  BOOST_TEST(std::isnan(roc_auc({}, {})));
  BOOST_TEST(std::isnan(roc_auc({0.2, std::nan("")}, {1, 0})));
  BOOST_TEST(std::isnan(log_loss({}, {})));
}

BOOST_AUTO_TEST_CASE(bad_input_throws) {
  BOOST_CHECK_THROW(roc_auc({0.1, 0.2}, {1}), std::invalid_argument);
  BOOST_CHECK_THROW(roc_auc({0.1, 0.2}, {1, 2}), std::invalid_argument);
  BOOST_CHECK_THROW(log_loss({0.1}, {-1}), std::invalid_argument);
  BOOST_CHECK_THROW(log_loss({0.1, 0.2}, {0}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(log_loss_by_hand_and_clipped) {
  // -(log 0.8 + log(1 - 0.3)) / 2
  BOOST_TEST(log_loss({0.8, 0.3}, {1, 0}) == -(std::log(0.8) + std::log(0.7)) / 2, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(log_loss({0.5}, {1}) == std::log(2.0), boost::test_tools::tolerance(1e-14));
  // A confident mistake costs -log(1e-15), not infinity; a confident hit ~0.
  BOOST_TEST(log_loss({0.0}, {1}) == -std::log(1e-15), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(log_loss({1.0}, {0}) == -std::log(1e-15), boost::test_tools::tolerance(1e-3));
  BOOST_TEST(log_loss({1.0, 0.0}, {1, 0}) < 1e-14);
}

BOOST_AUTO_TEST_CASE(merged_parts_equal_the_whole) {
  std::mt19937_64 gen(3);
  scored_labels whole, parts[3];
  for (int i = 0; i < 1000; ++i) {
    const int32_t y = int32_t(gen() % 4 == 0);
    const double p = std::min(0.99, double(gen() % 1000) / 1000 + 0.3 * y);
    whole.add(p, y);
    parts[i % 3].add(p, y);
  }
  scored_labels merged;
  for (auto& part : parts) merged.merge(part);
  BOOST_TEST(merged.scores.size() == whole.scores.size());
  // Sorting ties by score alone: the order of the parts cannot move the AUC.
  BOOST_TEST(roc_auc(merged.scores, merged.labels) == roc_auc(whole.scores, whole.labels));
  BOOST_TEST(log_loss(merged.scores, merged.labels) == log_loss(whole.scores, whole.labels),
             boost::test_tools::tolerance(1e-12));
  // Averaging the parts' AUCs is not the whole's: why parts keep their pairs.
  double mean = 0;
  for (auto& part : parts) mean += roc_auc(part.scores, part.labels) / 3;
  BOOST_TEST(mean != roc_auc(whole.scores, whole.labels));
  BOOST_TEST(roc_auc(whole.scores, whole.labels) == pairwise_auc(whole.scores, whole.labels),
             boost::test_tools::tolerance(1e-12));
}
