// `actorps data categorical`: a categorical data set with a known ground
// truth, for the embedding job (TF's ParameterServerStrategy tutorial
// trains on such features): every token of a vocabulary has a hidden
// weight w ~ N(0, 1); an example is `features` tokens drawn uniformly (or,
// with --zipf S, token i with probability proportional to 1 / (i + 1)^S:
// the power law of real ids, the most frequent first in the vocabulary),
// and its label is 1 exactly when their weights sum to more than 0. A
// model that learns one number per token can reach 100%.
// Writes OUT/vocabulary.txt (one token per line), OUT/train.csv, OUT/test.csv.
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "apps/commands.hpp"

namespace actorps {

int run_data_categorical(const categorical_data_options& opts) {
  ::mkdir(opts.out.c_str(), 0755);
  std::mt19937_64 gen(opts.seed);
  std::normal_distribution<double> normal;
  std::vector<double> weight(opts.vocabulary);
  for (auto& w : weight) w = normal(gen);
  auto token = [](uint32_t i) { return fmt::format("tok{:06d}", i); };
  std::ofstream vocab(opts.out + "/vocabulary.txt");
  for (uint32_t i = 0; i < opts.vocabulary; ++i) vocab << token(i) << '\n';
  std::uniform_int_distribution<uint32_t> uniform(0, opts.vocabulary - 1);
  std::vector<double> odds;
  for (uint32_t i = 0; opts.zipf > 0 && i < opts.vocabulary; ++i) odds.push_back(std::pow(double(i + 1), -opts.zipf));
  std::discrete_distribution<uint32_t> power_law(odds.begin(), odds.end());
  auto pick = [&](std::mt19937_64& g) { return opts.zipf > 0 ? power_law(g) : uniform(g); };
  auto write = [&](const std::string& name, uint32_t examples) {
    std::ofstream csv(opts.out + "/" + name);
    for (uint32_t f = 0; f < opts.features; ++f) csv << 'f' << f << ',';
    csv << "label\n";
    for (uint32_t e = 0; e < examples; ++e) {
      double sum = 0;
      for (uint32_t f = 0; f < opts.features; ++f) {
        auto t = pick(gen);
        sum += weight[t];
        csv << token(t) << ',';
      }
      csv << (sum > 0 ? 1 : 0) << '\n';
    }
    return bool(csv);
  };
  if (!vocab || !write("train.csv", opts.train) || !write("test.csv", opts.test)) {
    fmt::print(stderr, "data categorical: cannot write into {}\n", opts.out);
    return 1;
  }
  fmt::print("wrote {}/vocabulary.txt ({} tokens), train.csv ({} examples), test.csv ({}); {} tokens each\n", opts.out,
             opts.vocabulary, opts.train, opts.test, opts.features);
  return 0;
}

}  // namespace actorps
