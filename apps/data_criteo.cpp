#include "apps/data_criteo.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include "kernels/metrics.hpp"
#include "messages/errors.hpp"

namespace actorps::criteo {
namespace {

struct categorical_field {
  uint32_t vocabulary;
  double missing;  // rate of empty values
  double weight;   // stddev of its per-id weights w_k (0: no effect of its own)
};

// Vocabularies shaped after Criteo's (the largest capped at 100,000).
constexpr categorical_field kCategorical[kCategoricalFields] = {
    {1460, 0, 0.25},       // C1
    {583, 0, 0.25},        // C2
    {100000, 0.03, 0.35},  // C3
    {50000, 0.03, 0.25},   // C4
    {305, 0, 0.25},        // C5
    {24, 0, 0.35},         // C6
    {12517, 0, 0.25},      // C7
    {633, 0, 0},           // C8
    {3, 0, 0.25},          // C9
    {93145, 0, 0.35},      // C10
    {5683, 0, 0.25},       // C11
    {100000, 0.03, 0},     // C12
    {3194, 0, 0.2},        // C13
    {27, 0, 0.25},         // C14
    {14992, 0, 0},         // C15
    {80000, 0.03, 0},      // C16
    {10, 0, 0.25},         // C17
    {5652, 0, 0},          // C18
    {2173, 0.4, 0.25},     // C19
    {4, 0.4, 0},           // C20
    {100000, 0.03, 0.25},  // C21
    {18, 0.7, 0},          // C22
    {15, 0, 0},            // C23
    {28618, 0.03, 0.25},   // C24
    {105, 0.4, 0},         // C25
    {14257, 0.4, 0.2},     // C26
};

struct integer_field {
  double mu, sigma;  // of log(value)
  double missing;
  double coefficient;  // a_j, on log(1 + value)
};

constexpr integer_field kInteger[kIntegerFields] = {
    {0.5, 1.0, 0.3, 0.15},    // I1
    {1.5, 1.5, 0, -0.1},      // I2
    {2.0, 1.2, 0.15, 0.05},   // I3
    {1.5, 1.0, 0.15, -0.1},   // I4
    {7.0, 1.5, 0.02, -0.05},  // I5
    {3.0, 1.5, 0.15, -0.1},   // I6
    {1.2, 1.2, 0.03, 0.1},    // I7
    {2.0, 1.0, 0, 0.1},       // I8
    {3.5, 1.2, 0.03, -0.05},  // I9
    {0.3, 0.8, 0.3, 0.2},     // I10
    {0.8, 1.0, 0.03, 0.15},   // I11
    {0.0, 1.0, 0.5, 0.1},     // I12
    {1.5, 1.2, 0.15, -0.05},  // I13
};

struct cross {
  int a, b;       // categorical fields (0-based)
  double weight;  // stddev of c_ab
  bool factored;  // c_ab = <u_a(id_a), v_b(id_b)> / 2 (rank 4), else one weight per (id_a, id_b)
};

constexpr cross kCrosses[] = {
    {5, 13, 0.55, false},   // C6 x C14
    {16, 22, 0.55, false},  // C17 x C23
    {8, 21, 0.45, false},   // C9 x C22
    {19, 24, 0.45, false},  // C20 x C25
    {0, 1, 0.55, true},     // C1 x C2
    {4, 7, 0.55, true},     // C5 x C8
    {10, 12, 0.45, true},   // C11 x C13
};
constexpr int kRank = 4;
constexpr double kZipf = 1.1;
constexpr double kPositiveRate = 0.25;

uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b) {
  return mix64(seed ^ mix64(tag ^ mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ULL))));
}

// The sum of four uniforms on [0, 1) (Irwin-Hall) centred and scaled: mean
// 0, variance 1, within +-2 sqrt 3; a normal draw's stand-in.
double standardized(double sum_of_four) { return (sum_of_four - 2.0) * std::sqrt(3.0); }

// A normal-ish number from one hash: its four 16-bit quarters as uniforms.
double normalish(uint64_t h) {
  double sum = 0;
  for (int i = 0; i < 4; ++i, h >>= 16) sum += double(h & 0xffff) / 65536.0;
  return standardized(sum);
}

double uniform(std::mt19937_64& gen) { return double(gen() >> 11) * 0x1.0p-53; }

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

double mean_probability(const std::vector<double>& scores, double bias) {
  double sum = 0;
  for (double s : scores) sum += sigmoid(bias + s);
  return sum / double(scores.size());
}

}  // namespace

hidden_model::hidden_model(uint64_t seed) : seed_(seed) {
  for (auto& f : kCategorical) {
    std::vector<double> sums(f.vocabulary);
    double sum = 0;
    for (uint32_t r = 0; r < f.vocabulary; ++r) sums[r] = sum += std::pow(double(r + 1), -kZipf);
    cumulative_.push_back(std::move(sums));
  }
  // The bias by bisection on 20,000 examples of a generator of their own.
  std::mt19937_64 gen(mix64(seed ^ 0xb1a5));
  std::vector<double> scores;
  for (int i = 0; i < 20000; ++i) scores.push_back(score(draw(gen)));
  double low = -20, high = 20;
  for (int i = 0; i < 60; ++i)
    (mean_probability(scores, (low + high) / 2) < kPositiveRate ? low : high) = (low + high) / 2;
  bias_ = (low + high) / 2;
}

example hidden_model::draw(std::mt19937_64& gen, fresh_ids* fresh) const {
  example e;
  for (int j = 0; j < kIntegerFields; ++j) {
    const bool missing = uniform(gen) < kInteger[j].missing;
    double n = 0;
    for (int i = 0; i < 4; ++i) n += uniform(gen);
    const double log_value = kInteger[j].mu + kInteger[j].sigma * standardized(n);
    e.integers[size_t(j)] = missing ? -1 : int64_t(std::floor(std::exp(log_value)));
  }
  for (int k = 0; k < kCategoricalFields; ++k) {
    const bool missing = uniform(gen) < kCategorical[k].missing;
    auto& sums = cumulative_[size_t(k)];
    const double u = uniform(gen) * sums.back();
    const auto r = std::min(size_t(std::upper_bound(sums.begin(), sums.end(), u) - sums.begin()), sums.size() - 1);
    e.ids[size_t(k)] = missing ? -1 : int32_t(r);
    // The extra draw only with a tail: F = 0 keeps today's stream of draws.
    if (!missing && fresh != nullptr && fresh->rate > 0 && uniform(gen) < fresh->rate)
      e.ids[size_t(k)] = fresh->next[size_t(k)]++;
  }
  return e;
}

fresh_ids hidden_model::tail(double rate) const {
  fresh_ids f;
  f.rate = rate;
  for (int k = 0; k < kCategoricalFields; ++k) f.next[size_t(k)] = int32_t(kCategorical[k].vocabulary);
  return f;
}

bool hidden_model::known(int field, int32_t id) const {
  return id >= 0 && uint32_t(id) < kCategorical[field].vocabulary;
}

double hidden_model::score(const example& e) const {
  double z = 0;
  for (int j = 0; j < kIntegerFields; ++j)
    if (e.integers[size_t(j)] >= 0) z += kInteger[j].coefficient * std::log1p(double(e.integers[size_t(j)]));
  for (int k = 0; k < kCategoricalFields; ++k)
    if (known(k, e.ids[size_t(k)]) && kCategorical[k].weight > 0)
      z += kCategorical[k].weight * normalish(hash(seed_, uint64_t(k), uint64_t(e.ids[size_t(k)]), 0));
  for (size_t c = 0; c < std::size(kCrosses); ++c) {
    auto& x = kCrosses[c];
    const int32_t a = e.ids[size_t(x.a)], b = e.ids[size_t(x.b)];
    if (!known(x.a, a) || !known(x.b, b)) continue;  // missing or fresh: no cross term
    double w = 0;
    if (!x.factored) {
      w = normalish(hash(seed_, 100 + c, uint64_t(a), uint64_t(b)));
    } else {
      for (int d = 0; d < kRank; ++d)
        w += normalish(hash(seed_, 200 + c * kRank + d, uint64_t(a), 0)) *
             normalish(hash(seed_, 300 + c * kRank + d, uint64_t(b), 0));
      w /= std::sqrt(double(kRank));
    }
    z += x.weight * w;
  }
  return z;
}

double hidden_model::probability(const example& e) const { return sigmoid(bias_ + score(e)); }

uint32_t hidden_model::vocabulary(int field) const { return kCategorical[field].vocabulary; }

std::string hidden_model::hex(int field, int32_t id) const {
  // Bijective on 32 bits: field and id packed (ids < 2^27), then xor with a
  // key of the seed and murmur3's finalizer (invertible steps only).
  uint32_t x = (uint32_t(field) << 27 | uint32_t(id)) ^ uint32_t(mix64(seed_));
  x = (x ^ (x >> 16)) * 0x85ebca6bU;
  x = (x ^ (x >> 13)) * 0xc2b2ae35U;
  return fmt::format("{:08x}", x ^ (x >> 16));
}

std::string format_line(const hidden_model& model, const example& e) {
  std::string line = std::to_string(e.label);
  for (auto v : e.integers) line += v < 0 ? "\t" : "\t" + std::to_string(v);
  for (int k = 0; k < kCategoricalFields; ++k)
    line += e.ids[size_t(k)] < 0 ? "\t" : "\t" + model.hex(k, e.ids[size_t(k)]);
  return line;
}

namespace {

// A file written through a buffer, its SHA-256 (libcrypto) taken on the way.
class hashed_file {
 public:
  explicit hashed_file(const std::string& path)
      : path_(path), out_(path, std::ios::binary), ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    ok_ = out_ && ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void write(const std::string& text) {
    buffer_ += text;
    if (buffer_.size() >= (1 << 20)) flush();
  }
  // The digest as sha256sum prints it, or an error naming the file.
  caf::expected<std::string> finish() {
    flush();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned length = 0;
    out_.close();
    if (!ok_ || !out_ || EVP_DigestFinal_ex(ctx_.get(), digest, &length) != 1)
      return make_error(errc::io_error, path_ + ": cannot write (or SHA-256 failed)");
    std::string hex;
    for (unsigned i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
    return hex;
  }

 private:
  void flush() {
    out_.write(buffer_.data(), std::streamsize(buffer_.size()));
    ok_ = ok_ && EVP_DigestUpdate(ctx_.get(), buffer_.data(), buffer_.size()) == 1;
    buffer_.clear();
  }

  std::string path_;
  std::ofstream out_;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
  std::string buffer_;
  bool ok_ = false;
};

caf::expected<file_summary> write_file(const hidden_model& model, std::mt19937_64& gen, fresh_ids& fresh,
                                       const std::string& path, uint32_t examples) {
  hashed_file file(path);
  kernels::scored_labels best;
  for (uint32_t i = 0; i < examples; ++i) {
    auto e = model.draw(gen, &fresh);
    const double p = model.probability(e);
    e.label = uniform(gen) < p ? 1 : 0;
    best.add(p, e.label);
    file.write(format_line(model, e) + '\n');
  }
  auto sha = file.finish();
  if (!sha) return sha.error();
  file_summary s;
  s.examples = examples;
  s.positive_rate = double(std::count(best.labels.begin(), best.labels.end(), 1)) / std::max(examples, 1u);
  s.best_auc = kernels::roc_auc(best.scores, best.labels);
  s.best_log_loss = kernels::log_loss(best.scores, best.labels);
  s.sha256 = *sha;
  return s;
}

nlohmann::json to_json(const std::string& file, const file_summary& s) {
  return {{"file", file},           {"examples", s.examples},           {"positive_rate", s.positive_rate},
          {"best_auc", s.best_auc}, {"best_log_loss", s.best_log_loss}, {"sha256", s.sha256}};
}

}  // namespace

caf::expected<summary> write_data(const options& opts) {
  if (!(opts.new_ids >= 0 && opts.new_ids < 1))
    return make_error(errc::invalid_argument,
                      fmt::format("--new-ids: expected a rate in [0, 1), got {}", opts.new_ids));
  if (opts.new_ids > 0 && uint64_t(opts.train) + opts.test > kMaxFreshExamples)
    return make_error(errc::invalid_argument,
                      fmt::format("--new-ids: at most {} examples (train + test) with fresh ids (they stay below "
                                  "2^27), got {}",
                                  kMaxFreshExamples, uint64_t(opts.train) + opts.test));
  std::error_code ec;
  std::filesystem::create_directories(opts.out, ec);
  if (ec) return make_error(errc::io_error, opts.out + ": cannot create (" + ec.message() + ")");
  const hidden_model model(opts.seed);
  std::mt19937_64 gen(opts.seed);
  auto fresh = model.tail(opts.new_ids);  // one tail: test.tsv's fresh ids are unseen in train.tsv too
  summary s;
  auto train = write_file(model, gen, fresh, opts.out + "/train.tsv", opts.train);
  if (!train) return train.error();
  auto test = write_file(model, gen, fresh, opts.out + "/test.tsv", opts.test);
  if (!test) return test.error();
  s.train = *train, s.test = *test;
  nlohmann::json vocabularies = nlohmann::json::array();
  for (int k = 0; k < kCategoricalFields; ++k) vocabularies.push_back(model.vocabulary(k));
  const nlohmann::json meta = {{"generator", "actorps data criteo"},
                               {"version", kGeneratorVersion},
                               {"seed", opts.seed},
                               {"new_ids", opts.new_ids},  // F: fresh ids' rate (they add nothing to z)
                               {"vocabularies", vocabularies},
                               {"train", to_json("train.tsv", s.train)},
                               {"test", to_json("test.tsv", s.test)}};
  std::ofstream out(opts.out + "/meta.json");
  out << meta.dump(2) << '\n';
  if (!out) return make_error(errc::io_error, opts.out + "/meta.json: cannot write");
  return s;
}

int run_data_criteo(const options& opts) {
  auto s = write_data(opts);
  if (!s) {
    fmt::print(stderr, "data criteo: {}\n", describe(s.error()));
    return code_of(s.error()) == errc::invalid_argument ? 2 : 1;
  }
  for (auto [name, f] : {std::pair{"train.tsv", &s->train}, std::pair{"test.tsv", &s->test}})
    fmt::print("{}/{}: {} examples, {:.2f}% positive, sha256 {}\n", opts.out, name, f->examples, 100 * f->positive_rate,
               f->sha256);
  fmt::print("best achievable on test.tsv (the hidden model's probabilities): AUC {:.6f}, log loss {:.6f}\n",
             s->test.best_auc, s->test.best_log_loss);
  fmt::print("wrote {}/meta.json (generator version {}, seed {}, new ids {})\n", opts.out, kGeneratorVersion, opts.seed,
             opts.new_ids);
  return 0;
}

}  // namespace actorps::criteo
