#include "kernels/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace actorps::kernels {
namespace {

void check_labels(const char* metric, size_t scores, const std::vector<int32_t>& labels) {
  if (scores != labels.size())
    throw std::invalid_argument(std::string(metric) + ": " + std::to_string(scores) + " scores for " +
                                std::to_string(labels.size()) + " labels");
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] != 0 && labels[i] != 1)
      throw std::invalid_argument(std::string(metric) + ": label " + std::to_string(i) + " is " +
                                  std::to_string(labels[i]) + ", expected 0 or 1");
}

}  // namespace

double roc_auc(const std::vector<double>& scores, const std::vector<int32_t>& labels) {
  check_labels("roc_auc", scores.size(), labels);
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  if (std::any_of(scores.begin(), scores.end(), [](double s) { return std::isnan(s); })) return nan;
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Walk groups of equal scores upwards: each positive of a group beats the
  // negatives below it and ties with the group's own.
  double negatives_below = 0, pairs_won = 0, positives = 0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    double group_positives = 0, group_negatives = 0;
    for (; end < order.size() && scores[order[end]] == scores[order[begin]]; ++end)
      (labels[order[end]] == 1 ? group_positives : group_negatives) += 1;
    pairs_won += group_positives * (negatives_below + 0.5 * group_negatives);
    negatives_below += group_negatives;
    positives += group_positives;
    begin = end;
  }
  if (positives == 0 || negatives_below == 0) return nan;
  return pairs_won / (positives * negatives_below);
}

double log_loss(const std::vector<double>& probabilities, const std::vector<int32_t>& labels) {
  check_labels("log_loss", probabilities.size(), labels);
  if (labels.empty()) return std::numeric_limits<double>::quiet_NaN();
  constexpr double eps = 1e-15;
  double sum = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double p = std::clamp(probabilities[i], eps, 1 - eps);
    sum -= labels[i] == 1 ? std::log(p) : std::log1p(-p);
  }
  return sum / double(labels.size());
}

void scored_labels::merge(const scored_labels& part) {
  scores.insert(scores.end(), part.scores.begin(), part.scores.end());
  labels.insert(labels.end(), part.labels.begin(), part.labels.end());
}

binary_metrics binary_metrics_of_logits(const scored_labels& logits) {
  std::vector<double> probabilities(logits.scores.size());
  std::transform(logits.scores.begin(), logits.scores.end(), probabilities.begin(),
                 [](double z) { return 1 / (1 + std::exp(-z)); });
  return {roc_auc(logits.scores, logits.labels), log_loss(probabilities, logits.labels)};
}

}  // namespace actorps::kernels
