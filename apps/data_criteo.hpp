// `actorps data criteo`: a data set in the Criteo display-ads format (the
// one Wide & Deep and DLRM are trained on), drawn from a stated hidden
// model so that the best any model can do on it is known. One example per
// line, tab-separated: the label (0/1), 13 integer counts I1..I13, 26
// categorical values C1..C26 as 8 lowercase hex digits; an empty field is
// a missing value, as in Criteo's files.
//
// The hidden model of a seed: categorical field k draws id r of its own
// vocabulary with probability ~ 1 / (r + 1)^1.1 (Zipf; vocabularies from
// 3 to 100,000 ids, shaped after Criteo's), written as a seeded bijective
// hash of (k, r); integer j is floor(exp(mu_j + sigma_j * n)), n a
// normal-ish draw (a sum of 4 uniforms). The label is Bernoulli(sigmoid(z)),
//   z = bias + sum_j a_j * log(1 + I_j) + sum_k w_k(id_k)
//         + sum over crosses (a, b) of c_ab(id_a, id_b),
// w and c drawn per (field, id) and per (id_a, id_b) from a hash of the
// seed (missing values add nothing). Crosses of small fields have a weight
// per combination (what a wide part's crossed columns memorize); crosses
// of larger fields a rank-4 product of per-id vectors (what embeddings and
// DLRM's dot products learn). No logistic regression over the fields alone
// can express them. `bias` is set so that the mean probability is 0.25
// (without fresh ids, below).
//
// An unbounded tail of ids (`--new-ids F`, 0 <= F < 1, default 0): a
// present categorical value is, with probability F, an id never seen
// before in the data set (train.tsv, then test.tsv): its field's next id
// past the vocabulary (vocabulary, vocabulary + 1, ...), written by the
// same bijective hash. The distinct values of a field then grow with the
// file's size, as real users' and items' ids do. A fresh id contributes
// nothing to z (its w and every cross term with it are 0, as a missing
// value's), so best_auc and best_log_loss stay the hidden model's. The
// model (w, c, bias) depends on the seed only; with F > 0 each present
// categorical value takes one more uniform draw, so F = 0 writes the bytes
// it always did.
//
// Determinism: std::mt19937_64 and this file's own arithmetic only (no
// std::*_distribution), so a seed gives the same bytes on any machine whose
// libm rounds exp/log/pow alike; a last-bit difference there changes a draw
// only when a uniform lands within that bit.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace actorps::criteo {

constexpr int kIntegerFields = 13, kCategoricalFields = 26;
constexpr int kGeneratorVersion = 1;  // bumped whenever a seed's bytes change

struct example {
  int32_t label = 0;
  std::array<int64_t, kIntegerFields> integers{};  // -1: missing
  std::array<int32_t, kCategoricalFields> ids{};   // -1: missing; >= the field's vocabulary: a fresh id
};

/// The tail of fresh ids: the rate F and each field's next fresh id.
struct fresh_ids {
  double rate = 0;                                 // F, in [0, 1)
  std::array<int32_t, kCategoricalFields> next{};  // starts at the field's vocabulary
};

/// Fresh ids are below 2^27 (hex() packs the field above them): the
/// examples of one data set with F > 0 are at most this many.
constexpr uint64_t kMaxFreshExamples = (uint64_t(1) << 27) - 100000;

class hidden_model {
 public:
  explicit hidden_model(uint64_t seed);

  /// The features of one example (label 0), drawn from `gen`; with
  /// `fresh` (rate > 0), a present value is its next fresh id with
  /// probability fresh->rate.
  example draw(std::mt19937_64& gen, fresh_ids* fresh = nullptr) const;
  /// A tail of fresh ids at `rate`, each field's starting past its vocabulary.
  fresh_ids tail(double rate) const;
  /// The true probability of label 1 for `e`'s features (fresh ids add nothing).
  double probability(const example& e) const;
  /// Ids of categorical field `field` (0-based: C1 is 0).
  uint32_t vocabulary(int field) const;
  /// The 8 hex digits of id `id` (< 2^27) of `field`: distinct ids, distinct strings.
  std::string hex(int field, int32_t id) const;

 private:
  double score(const example& e) const;     // z without the bias
  bool known(int field, int32_t id) const;  // in the field's vocabulary (not missing, not fresh)

  uint64_t seed_;
  std::vector<std::vector<double>> cumulative_;  // per field: Zipf weights summed over ids 0..r
  double bias_ = 0;
};

/// One line of the data set (no newline).
std::string format_line(const hidden_model& model, const example& e);

struct options {
  std::string out = "data/criteo";
  uint32_t train = 200000, test = 50000;
  uint64_t seed = 1;
  double new_ids = 0;  // F of --new-ids: the rate of fresh categorical ids, in [0, 1)
};

struct file_summary {
  uint32_t examples = 0;
  double positive_rate = 0;
  double best_auc = 0;       // the hidden model's probabilities, scored on this file
  double best_log_loss = 0;  // likewise (natural log)
  std::string sha256;        // of the file's bytes, as sha256sum prints it
};

struct summary {
  file_summary train, test;
};

/// Draws train.tsv, then test.tsv (one generator seeded with opts.seed,
/// one tail of fresh ids) into opts.out (created when missing), and writes
/// meta.json beside them. A new_ids outside [0, 1), or more than
/// kMaxFreshExamples examples with new_ids > 0: errc::invalid_argument.
[[nodiscard]] caf::expected<summary> write_data(const options& opts);

/// `actorps data criteo`: write_data, then its summary printed (exit 0; 1
/// when a file cannot be written; 2 for bad options).
int run_data_criteo(const options& opts);

}  // namespace actorps::criteo
