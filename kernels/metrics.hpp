// Exact metrics of a binary classifier over a whole evaluation set: ROC AUC
// (ties counted as half) and log loss (sklearn's clipping). Plain functions
// on the host, no ops_table: they rank or average the set once.
#pragma once

#include <cstdint>
#include <vector>

namespace actorps::kernels {

/// Area under the ROC curve of `scores` (any score that ranks: a
/// probability or a logit) for `labels` (0 or 1): the probability that a
/// random positive scores above a random negative, a tie counting 1/2
/// (the Mann-Whitney U over positives x negatives; sklearn's roc_auc_score).
/// Exact, by sorting: O(n log n). NaN when the set lacks a class (no
/// positive or no negative: the AUC is undefined; sklearn raises) or a
/// score is NaN. Throws std::invalid_argument when the sizes differ or a
/// label is neither 0 nor 1.
double roc_auc(const std::vector<double>& scores, const std::vector<int32_t>& labels);

/// Mean binary cross-entropy of `probabilities` (of label 1) for `labels`
/// (0 or 1), each probability clipped to [1e-15, 1 - 1e-15] first (sklearn's
/// log_loss with eps = 1e-15), natural log. NaN for an empty set. Throws as
/// roc_auc does.
double log_loss(const std::vector<double>& probabilities, const std::vector<int32_t>& labels);

/// The (score, label) pairs of one part of an evaluation sharded over
/// workers: each keeps its part, `merge` appends another's, and roc_auc /
/// log_loss of the merged whole are exact (AUC does not average over parts).
struct scored_labels {
  std::vector<double> scores;
  std::vector<int32_t> labels;

  void add(double score, int32_t label) {
    scores.push_back(score);
    labels.push_back(label);
  }
  void merge(const scored_labels& part);
};

/// A binary classifier's figures over a whole evaluation set.
struct binary_metrics {
  double auc = 0;       // roc_auc of the logits
  double log_loss = 0;  // log_loss of their sigmoids, 1 / (1 + e^-logit) in double
};
/// The figures of `logits` (scored_labels of logits, as a sigmoid_bce
/// model's forward gives them). Throws as roc_auc does.
binary_metrics binary_metrics_of_logits(const scored_labels& logits);

}  // namespace actorps::kernels
