// The shipped models' architectures at test sizes, for tests/test_parity.cpp's
// graph route (models in TOML, actorps' initial values): the residual CNN
// (config/zoo/resnet.toml: one block and the strided step down), Wide & Deep
// and DLRM (config/zoo/wide_deep.toml, dlrm.toml: 13 numeric and 26
// categorical ids in one shared table), and their data: the test images or a
// Criteo-shaped TSV.
#pragma once

#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>

namespace actorps::test {

// resnet.toml's layers, 4 and 8 filters, one residual block: a conv
// (stride 1, same) -> batchnorm, relu -> conv -> batchnorm -> add (skip) ->
// relu, then a stride-2 same conv -> batchnorm, relu -> global average
// pooling -> dense 10.
inline const char* kResnetModel = R"([model]
input = [28, 28, 1]
[[model.layers]]
name = "stem_conv"
type = "conv2d"
filters = 4
kernel = 3
padding = "same"
[[model.layers]]
name = "stem_bn"
type = "batchnorm"
activation = "relu"
[[model.layers]]
name = "pool"
type = "maxpool2d"
pool = 2
[[model.layers]]
name = "block_conv1"
type = "conv2d"
filters = 4
kernel = 3
padding = "same"
[[model.layers]]
name = "block_bn1"
type = "batchnorm"
activation = "relu"
[[model.layers]]
name = "block_conv2"
type = "conv2d"
filters = 4
kernel = 3
padding = "same"
[[model.layers]]
name = "block_bn2"
type = "batchnorm"
[[model.layers]]
name = "block_add"
type = "add"
inputs = ["pool", "block_bn2"]
[[model.layers]]
name = "block"
type = "relu"
[[model.layers]]
name = "down_conv"
type = "conv2d"
filters = 8
kernel = 3
padding = "same"
stride = 2
[[model.layers]]
name = "down"
type = "batchnorm"
activation = "relu"
[[model.layers]]
type = "global_avgpool2d"
[[model.layers]]
type = "dense"
units = 10
)";

// Both recommenders' inputs and loss. Vocabulary: 26 fields of 6 buckets.
inline const char* kRecsysInputs = R"([model]
loss = "sigmoid_bce"
[[model.inputs]]
name = "numeric"
shape = [13]
[[model.inputs]]
name = "categorical"
shape = [26]
kind = "ids"
)";

// wide_deep.toml's graph: the wide sum of dim-1 rows plus an MLP over the
// numbers and the fields' rows of 4 (both tables over the shared ids).
inline const char* kWideDeepLayers = R"([[model.layers]]
name = "wide"
type = "embedding"
inputs = ["categorical"]
vocabulary = 156
dim = 1
combiner = "sum"
[[model.layers]]
name = "fields"
type = "embedding"
inputs = ["categorical"]
vocabulary = 156
dim = 4
combiner = "none"
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "concat"
inputs = ["numeric", "flatten_0"]
[[model.layers]]
type = "dense"
units = 16
activation = "relu"
[[model.layers]]
name = "deep"
type = "dense"
units = 1
[[model.layers]]
type = "add"
inputs = ["wide", "deep"]
)";

// dlrm.toml's graph: a bottom MLP to 4, the fields' rows of 4, their pair
// dots beside the bottom vector, a top MLP.
inline const char* kDlrmLayers = R"([[model.layers]]
name = "bottom_1"
type = "dense"
units = 8
activation = "relu"
inputs = ["numeric"]
[[model.layers]]
name = "bottom"
type = "dense"
units = 4
activation = "relu"
[[model.layers]]
name = "fields"
type = "embedding"
inputs = ["categorical"]
vocabulary = 156
dim = 4
combiner = "none"
[[model.layers]]
name = "interaction"
type = "dot_interaction"
inputs = ["bottom", "fields"]
[[model.layers]]
type = "dense"
units = 8
activation = "relu"
[[model.layers]]
type = "dense"
units = 1
)";

// A Criteo-shaped TSV of `rows` lines: a label 0/1, 13 counts (some
// missing), 26 categorical fields of 8 hex digits, each drawn from 3 values,
// so some of a field's 6 buckets are never read.
inline void write_criteo_tsv(const std::string& path, int rows) {
  std::ofstream out(path);
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> count(0, 40), coin(0, 9), pick(0, 2);
  for (int r = 0; r < rows; ++r) {
    out << coin(gen) % 2;
    for (int i = 0; i < 13; ++i) out << '\t' << (coin(gen) == 0 ? "" : std::to_string(count(gen)));
    for (int c = 0; c < 26; ++c) out << '\t' << fmt::format("{:08x}", 0x9e3779b9u * uint32_t(c * 3 + pick(gen) + 1));
    out << '\n';
  }
}

// The [dataset] of that TSV: log1p of the counts, batches of `batch`, no
// shuffle; [eval_dataset] (the job needs one; evaluated, not compared) the
// same file whole.
inline std::string criteo_dataset(const std::string& path, int batch) {
  std::string text;
  for (auto [table, size] : {std::pair{"dataset", batch}, std::pair{"eval_dataset", 1000}}) {
    text += fmt::format(
        "[{}]\nsource = \"csv\"\nfiles = [\"{}\"]\ndelimiter = \"\\t\"\nheader = false\nshared_ids = true\n"
        "columns = [\n  {{ name = \"label\", kind = \"label\" }},\n",
        table, path);
    for (int i = 1; i <= 13; ++i) text += fmt::format("  {{ name = \"I{}\", kind = \"numeric\" }},\n", i);
    for (int c = 1; c <= 26; ++c)
      text += fmt::format("  {{ name = \"C{}\", kind = \"categorical\", hash_buckets = 6 }},\n", c);
    text += fmt::format(
        "]\n[[{0}.ops]]\ntype = \"map\"\ntransform = \"log1p\"\nfirst = 0\ncount = 13\n"
        "[[{0}.ops]]\ntype = \"batch\"\nsize = {1}\n",
        table, size);
  }
  return text;
}

}  // namespace actorps::test
