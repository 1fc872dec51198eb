// Data files: IDX round trips and every kind of broken IDX file; the
// Fashion-MNIST JSON conversion, good and bad.
#define BOOST_TEST_MODULE data
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "actors/data/idx.hpp"
#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

using namespace actorps;

namespace {

struct temp_files {
  std::string dir = make_temp_dir("test");
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  }
};

template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string() : describe(x.error());
}

// A class file of `rows` rows of 784 values; `patch` may edit the text.
std::string class_json(int rows, const std::function<void(int, std::string&)>& patch = {}) {
  std::string text = "{\"data\":[";
  for (int r = 0; r < rows; ++r) {
    std::string row = "[";
    for (int i = 0; i < 784; ++i) row += std::to_string((r + i) % 256) + (i < 783 ? "," : "");
    row += "]";
    if (patch) patch(r, row);
    text += row + (r < rows - 1 ? "," : "");
  }
  return text + "]}";
}

}  // namespace

BOOST_AUTO_TEST_CASE(idx_round_trip) {
  temp_files t;
  data::idx_array a{{3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  BOOST_REQUIRE(!data::write_idx(t.dir + "/x.idx", a));
  auto b = data::read_idx(t.dir + "/x.idx");
  BOOST_REQUIRE_MESSAGE(b, why(b));
  BOOST_TEST(b->dims == a.dims);
  BOOST_TEST(b->data == a.data);
  BOOST_TEST(b->count() == 3u);
  BOOST_TEST(b->item_size() == 4u);
}

BOOST_AUTO_TEST_CASE(broken_idx_files_are_named_and_explained) {
  temp_files t;
  const std::string header = std::string("\0\0\x08\x02\0\0\0\x02\0\0\0\x03", 12);
  struct bad_case {
    std::string bytes, part;
  };
  const bad_case cases[] = {
      {"\x01\x02", "not an IDX file: 2 bytes, shorter than the magic"},
      {std::string("\x12\x34\x08\x01", 4), "not an IDX file: magic must start with two zero bytes"},
      {std::string("\0\0\x0d\x01\0\0\0\x01", 8) + "abcd", "unsupported IDX element type 0x0d (only 0x08, unsigned bytes)"},
      {std::string("\0\0\x08\x03\0\0\0\x02", 8), "truncated header: rank 3 needs 16 bytes"},
      {header + "abcde", "header promises 6 bytes of data, the file holds 5 (truncated)"},
      {header + "abcdefg", "header promises 6 bytes of data, the file holds 7 (trailing garbage)"},
  };
  int i = 0;
  for (auto& c : cases) {
    auto path = t.write("bad" + std::to_string(i++), c.bytes);
    auto r = data::read_idx(path);
    BOOST_REQUIRE(!r);
    BOOST_TEST(describe(r.error()) == path + ": " + c.part);
    BOOST_TEST(exit_code(r.error()) == 2);
  }
  auto missing = data::read_idx(t.dir + "/nope");
  BOOST_TEST(describe(missing.error()) == t.dir + "/nope: cannot open file");
}

BOOST_AUTO_TEST_CASE(fashion_class_files_convert_and_refuse_surprises) {
  temp_files t;
  // Class 0 as published: 7,002 rows, empty at 1000 and 7001.
  auto good = t.write("0.json", class_json(7002, [](int r, std::string& row) {
    if (r == 1000 || r == 7001) row = "[]";
  }));
  auto images = read_fashion_class(good, 0);
  BOOST_REQUIRE_MESSAGE(images, why(images));
  BOOST_TEST(images->size() == 7000u);
  BOOST_TEST((*images)[1000][0] == 1001 % 256);  // the row after the dropped one
  BOOST_TEST((*images)[0].size() == 784u);
  struct bad_case {
    std::string text;
    int label;
    std::string part;
  };
  const bad_case cases[] = {
      {class_json(7000), 0, "empty rows at [], expected [1000, 7001]"},
      {class_json(7001, [](int r, std::string& row) { if (r == 5) row = "[]"; }), 3, "empty rows at [5], expected []"},
      {class_json(10), 4, "10 images, expected 7000"},
      {class_json(3, [](int r, std::string& row) { if (r == 2) row = "[1,2,3]"; }), 1, "row 2: 3 values, expected 784"},
      {class_json(3, [](int r, std::string& row) { if (r == 1) row.replace(1, 1, "300"); }), 1,
       "row 1: value 300 outside 0..255"},
      {class_json(3, [](int r, std::string& row) { if (r == 1) row.replace(1, 1, "-4"); }), 1,
       "row 1: value -4 outside 0..255"},
      {"{\"pixels\":[]}", 1, "unexpected key \"pixels\" (want \"data\")"},
      {"{\"data\":[[1,2,", 1, "JSON syntax error"},
  };
  int i = 0;
  for (auto& c : cases) {
    auto path = t.write("bad" + std::to_string(i++) + ".json", c.text);
    auto r = read_fashion_class(path, c.label);
    BOOST_REQUIRE_MESSAGE(!r, "accepted: " << c.part);
    BOOST_TEST(describe(r.error()).find(path + ": " + c.part) == 0u, describe(r.error()) << " / want " << c.part);
  }
}
