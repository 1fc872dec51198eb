// A dynamic embedding table on the shard core (VariableSpec.dynamic), the
// worker's side of it (routing by virtual row, a batch's 64-bit ids as
// rows): closed forms, no actors.
#define BOOST_TEST_MODULE dynamic_shard
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <functional>

#include "actors/shard/shard_core.hpp"
#include "actors/variables/ps_client.hpp"
#include "kernels/id_remap.hpp"
#include "tests/ps_check.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

constexpr int kDim = 4;
constexpr float kLr = 0.5f;

// Shard `part` of 2 of a dynamic [2^31, kDim] table under SGD.
pb::VariableSpec table_spec(int part, uint32_t min_count, uint64_t max_rows = 0,
                            pb::Optimizer::Kind kind = pb::Optimizer::SGD) {
  auto v = variable_spec("t", {kernels::kVirtualRows / 2, kDim}, kind, kLr);
  v.set_full_shape(0, kernels::kVirtualRows);
  v.set_first_row(part * (kernels::kVirtualRows / 2));
  v.mutable_initializer()->set_kind(pb::Initializer::UNIFORM);
  v.mutable_initializer()->set_low(-1);
  v.mutable_initializer()->set_high(1);
  v.mutable_initializer()->set_seed(7);
  v.mutable_dynamic()->set_min_count(min_count);
  v.mutable_dynamic()->set_max_rows(max_rows);
  return v;
}

// Ids whose virtual rows fall in part `part` of 2.
std::vector<int64_t> ids_of_part(int part, size_t n) {
  std::vector<int64_t> out;
  for (int64_t id = 1000; out.size() < n; ++id)
    if ((kernels::virtual_row(id) >= kernels::kVirtualRows / 2) == (part == 1)) out.push_back(id);
  return out;
}

shard_core table_core(int part, uint32_t min_count, uint64_t max_rows = 0,
                      pb::Optimizer::Kind kind = pb::Optimizer::SGD) {
  shard_core core(0, {}, 0);
  pb::CreateVariables req;
  *req.add_variables() = table_spec(part, min_count, max_rows, kind);
  BOOST_REQUIRE(core.create(req));
  return core;
}

// The same sparse push of `g` to `ids` of "t", keyed by `closure`, on each of `cores`.
void push_all(std::initializer_list<shard_core*> cores, uint64_t closure, const std::vector<int64_t>& ids, float g) {
  for (auto* core : cores) {
    auto done = core->apply_rows(rows_push(closure, "t", ids, kDim, g));
    BOOST_REQUIRE_MESSAGE(done, (done ? "" : to_string(done.error())));
  }
}

std::vector<float> read(shard_core& core, const std::vector<int64_t>& ids) {
  pb::SparsePull pull;
  pull.set_name("t");
  for (auto id : ids) pull.add_ids(id);
  pull.set_step(-1);
  auto rows = core.read_rows(pull);
  BOOST_REQUIRE_MESSAGE(rows, (rows ? "" : to_string(rows.error())));
  return floats(rows->data());
}

}  // namespace

BOOST_AUTO_TEST_CASE(unseen_ids_read_their_seeded_initial_values_on_any_shard) {
  auto ids = ids_of_part(0, 3);
  auto a = table_core(0, 1), b = table_core(0, 3);
  const auto first = read(a, ids);
  BOOST_TEST(first == read(b, ids), boost::test_tools::per_element());
  BOOST_TEST(first != read(a, {ids[1], ids[0], ids[2]}));  // each id its own row
  for (auto x : first) BOOST_TEST((x >= -1 && x <= 1));
  BOOST_TEST(a.stats().tables(0).rows() == 0);  // reading makes no row
}

BOOST_AUTO_TEST_CASE(a_row_is_made_at_its_min_count_th_push_and_steps_from_its_initial_values) {
  auto core = table_core(0, 2);
  auto ids = ids_of_part(0, 2);
  const auto initial = read(core, ids);
  BOOST_REQUIRE(core.apply_rows(rows_push(1, "t", {ids[0]}, kDim, 1.0f)));  // 1st sighting: dropped
  BOOST_TEST(read(core, ids) == initial, boost::test_tools::per_element());
  BOOST_REQUIRE(core.apply_rows(rows_push(2, "t", {ids[0], ids[1]}, kDim, 1.0f)));  // ids[0] admitted
  auto now = read(core, ids);
  for (int k = 0; k < kDim; ++k) {
    BOOST_TEST(now[size_t(k)] == initial[size_t(k)] - kLr);
    BOOST_TEST(now[size_t(kDim + k)] == initial[size_t(kDim + k)]);  // ids[1]: seen once
  }
  const auto t = core.stats().tables(0);
  BOOST_TEST(t.rows() == 1);
  BOOST_TEST(t.admitted() == 1u);
  BOOST_TEST(t.dropped() == 2u);  // ids[0] once, ids[1] once
  BOOST_TEST(t.bytes() > 0);
}

BOOST_AUTO_TEST_CASE(rows_beyond_max_rows_go_least_recently_updated_first) {
  auto core = table_core(0, 1, 2);
  auto ids = ids_of_part(0, 3);
  const auto initial = read(core, ids);
  for (size_t i = 0; i < 3; ++i) BOOST_REQUIRE(core.apply_rows(rows_push(10 + i, "t", {ids[i]}, kDim, 1.0f)));
  const auto t = core.stats().tables(0);
  BOOST_TEST(t.rows() == 2);
  BOOST_TEST(t.evicted() == 1u);
  BOOST_TEST(t.admitted() == t.evicted() + uint64_t(t.rows()));
  const auto now = read(core, ids);
  BOOST_TEST(now[0] == initial[0]);                      // ids[0], the oldest, went: its initial values again
  BOOST_TEST(now[2 * kDim] == initial[2 * kDim] - kLr);  // the newest stayed
}

BOOST_AUTO_TEST_CASE(ids_of_another_shard_and_dense_requests_are_refused_whole) {
  auto core = table_core(0, 1);
  auto mine = ids_of_part(0, 1), theirs = ids_of_part(1, 1);
  auto bad = core.apply_rows(rows_push(1, "t", {mine[0], theirs[0]}, kDim, 1.0f));
  BOOST_REQUIRE(!bad);
  BOOST_TEST(to_string(bad.error()).find("outside this shard") != std::string::npos, to_string(bad.error()));
  BOOST_TEST(core.stats().tables(0).rows() == 0);  // nothing applied
  pb::Pull dense;
  dense.add_names("t");
  auto refused = core.read(dense);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(to_string(refused.error()).find("dynamic table") != std::string::npos, to_string(refused.error()));
  pb::Pull all;  // "every variable": the dense ones, none here
  BOOST_REQUIRE(core.read(all));
  BOOST_TEST(core.read(all)->tensors_size() == 0);
}

BOOST_AUTO_TEST_CASE(workers_send_each_id_to_the_shard_of_its_virtual_row) {
  sharded_variable var;
  var.name = "t";
  var.dynamic = true;
  var.shape = {kernels::kVirtualRows, kDim};
  for (int s = 0; s < 2; ++s)
    var.shards.push_back({s, s, s * (kernels::kVirtualRows / 2), {kernels::kVirtualRows / 2, kDim}});
  auto a = ids_of_part(0, 3), b = ids_of_part(1, 2);
  std::vector<int64_t> ids{a[0], b[0], a[1], b[1], a[2]};
  auto pulls = split_sparse_pull(var, ids);
  BOOST_REQUIRE(pulls.size() == 2u);
  for (auto& [ps, pull] : pulls) {
    const auto& want = ps == 0 ? a : b;
    BOOST_TEST(std::vector<int64_t>(pull.ids().begin(), pull.ids().end()) == want, boost::test_tools::per_element());
    BOOST_TEST(pull.name() == "t/part_" + std::to_string(ps));
  }
}

BOOST_AUTO_TEST_CASE(a_batch_of_64_bit_ids_becomes_rows_of_its_distinct_ids) {
  kernels::model_spec spec;
  spec.inputs = {{"dense", {2}, kernels::input_kind::floats}, {"ids", {3}, kernels::input_kind::ids64}};
  kernels::id_remap remap(spec);
  BOOST_TEST(remap.data_features() == 2 + 3 * 2);
  const int64_t big = int64_t(1) << 62, ids[2][3] = {{big, 5, -1}, {5, big + 1, big}};
  std::vector<float> x(2 * 8);
  for (int e = 0; e < 2; ++e) {
    x[size_t(e * 8)] = float(e), x[size_t(e * 8 + 1)] = 0.5f;
    std::memcpy(&x[size_t(e * 8 + 2)], ids[e], sizeof ids[e]);
  }
  std::vector<float> out;
  remap.convert(x.data(), 2, out);
  BOOST_TEST(out == (std::vector<float>{0, 0.5f, 0, 1, -1, 1, 0.5f, 1, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(remap.ids(1) == (std::vector<int64_t>{big, 5, big + 1}), boost::test_tools::per_element());
  BOOST_TEST(remap.index(1, big + 1) == 2);
  BOOST_TEST(remap.index(1, 6) == -1);
}

BOOST_AUTO_TEST_CASE(a_sync_table_under_adam_admits_and_evicts_over_many_pushes) {
  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  sync.set_num_workers(1);
  sync.set_replicas_to_aggregate(1);
  shard_core core(0, sync, 0);
  BOOST_TEST(!core.advance());  // a table alone is no SYNC step to finish (its rows apply as they come)
  auto spec = table_spec(0, 2, 12);
  spec.mutable_optimizer()->set_kind(pb::Optimizer::ADAM);
  pb::CreateVariables req;
  *req.add_variables() = spec;
  BOOST_REQUIRE(core.create(req));
  BOOST_TEST(!core.advance());
  auto ids = ids_of_part(0, 30);
  for (int step = 0; step < 40; ++step) {
    auto p = rows_push(uint64_t(step + 1), "t", {ids[size_t(step % 30)], ids[size_t(step * 7 % 30)]}, kDim, 0.5f);
    p.set_step(step);
    p.mutable_closure_step()->set_step(0);
    auto applied = core.apply_rows(p);
    BOOST_REQUIRE_MESSAGE(applied, (applied ? "" : to_string(applied.error())));
  }
  const auto t = core.stats().tables(0);
  BOOST_TEST(t.rows() <= 12);
  BOOST_TEST(t.admitted() == t.evicted() + uint64_t(t.rows()));
}

BOOST_AUTO_TEST_CASE(a_snapshot_and_a_split_carry_every_row_with_its_order_and_sketch) {
  auto core = table_core(0, 2, 3);
  auto ids = ids_of_part(0, 8);
  for (size_t i = 0; i < 8; ++i)  // ids[0..3] pushed twice: admitted; the rest once
    for (int twice = 0; twice < (i < 4 ? 2 : 1); ++twice)
      BOOST_REQUIRE(core.apply_rows(rows_push(100 + i * 2 + uint64_t(twice), "t", {ids[i]}, kDim, 1.0f)));
  shard_core copy(0, {}, 0);
  BOOST_REQUIRE(!copy.restore(core.snapshot()));
  BOOST_TEST(read(copy, ids) == read(core, ids), boost::test_tools::per_element());
  BOOST_TEST(copy.stats().tables(0).rows() == 3);  // max_rows 3: ids[0] went
  BOOST_TEST(copy.stats().tables_size() == 1);
  BOOST_TEST(copy.stats().tables(0).admitted() == core.stats().tables(0).admitted());  // its counters too
  BOOST_TEST(copy.stats().tables(0).evicted() == 1u);
  BOOST_TEST(copy.stats().tables(0).dropped() == core.stats().tables(0).dropped());
  // The same pushes on both: the same admissions (sketch) and evictions (order).
  for (auto* c : {&core, &copy})
    for (size_t i = 4; i < 8; ++i) BOOST_REQUIRE(c->apply_rows(rows_push(200 + i, "t", {ids[i]}, kDim, 1.0f)));
  BOOST_TEST(read(copy, ids) == read(core, ids), boost::test_tools::per_element());
  // A split by virtual row: each row to the part that owns it, none lost.
  const auto before = read(core, ids);
  pb::MoveOut split;
  split.set_step(pb::MoveOut::SPLIT);
  split.set_name("t");
  split.set_new_name("t2");
  split.set_offset(kernels::kVirtualRows / 4);
  BOOST_REQUIRE(core.move_out(split, false));
  std::vector<int64_t> low, high;
  for (auto id : ids) (kernels::virtual_row(id) < kernels::kVirtualRows / 4 ? low : high).push_back(id);
  BOOST_REQUIRE(!low.empty());
  BOOST_REQUIRE(!high.empty());
  const auto low_rows = read(core, low);
  pb::SparsePull pull;
  pull.set_name("t2");
  for (auto id : high) pull.add_ids(id);
  pull.set_step(-1);
  auto high_rows = core.read_rows(pull);
  BOOST_REQUIRE(high_rows);
  const auto high_values = floats(high_rows->data());
  for (size_t i = 0, l = 0, h = 0; i < ids.size(); ++i) {
    const bool is_low = kernels::virtual_row(ids[i]) < kernels::kVirtualRows / 4;
    for (int k = 0; k < kDim; ++k)
      BOOST_TEST(before[i * kDim + size_t(k)] ==
                 (is_low ? low_rows[l * kDim + size_t(k)] : high_values[h * kDim + size_t(k)]));
    (is_low ? l : h) += 1;
  }
  auto stats = core.stats();
  BOOST_TEST(stats.tables(0).rows() + stats.tables(1).rows() == 3);
  auto moved = core.apply_rows(rows_push(300, "t", {high[0]}, kDim, 1.0f));  // the old part no longer holds it
  BOOST_REQUIRE(!moved);
  BOOST_CHECK_MESSAGE(moved.error() == errc::moved, to_string(moved.error()));
}

BOOST_AUTO_TEST_CASE(table_pages_load_into_another_core_with_their_order_sketch_and_count) {
  auto from = table_core(0, 2, 5, pb::Optimizer::ADAM);  // Adam: the update count matters
  auto ids = ids_of_part(0, 9);
  for (size_t i = 0; i < ids.size(); ++i)  // all admitted (2 pushes each), 5 kept
    for (int twice = 0; twice < 2; ++twice)
      BOOST_REQUIRE(from.apply_rows(rows_push(10 + i * 2 + uint64_t(twice), "t", {ids[i]}, kDim, 1.0f)));
  pb::TableRead ask;
  ask.set_name("t");
  ask.set_max_rows(2);
  auto into = table_core(0, 2, 5, pb::Optimizer::ADAM);
  int pages = 0;
  for (bool first = true;; first = false) {
    ++pages;
    auto page = from.table_page(ask);
    BOOST_REQUIRE(page);
    pb::TableLoad load;
    *load.mutable_data() = *page;
    load.set_first(first);
    BOOST_REQUIRE(into.load_table(load));
    if (!page->has_next()) break;
    ask.set_from(page->next());
  }
  BOOST_TEST(pages == 3);  // 5 rows, 2 per page
  BOOST_TEST(read(into, ids) == read(from, ids), boost::test_tools::per_element());
  // The same next pushes evict and admit alike (order, sketch, update count).
  auto more = ids_of_part(0, 12);
  for (auto* core : {&from, &into})
    for (size_t i = 9; i < 12; ++i)  // admitted at their second push: each evicts the least recently updated
      for (uint64_t twice = 0; twice < 2; ++twice)
        BOOST_REQUIRE(core->apply_rows(rows_push(100 + i * 2 + twice, "t", {more[i]}, kDim, 1.0f)));
  BOOST_TEST(read(into, more) == read(from, more), boost::test_tools::per_element());
  BOOST_TEST(into.stats().tables(0).rows() == from.stats().tables(0).rows());
}

namespace {

pb::MoveOut move_req(pb::MoveOut::Step step, int64_t offset = 0, int64_t count = 0) {
  pb::MoveOut req;
  req.set_step(step);
  req.set_name("t");
  req.set_offset(offset);
  req.set_count(count);
  req.set_to_ps(1);
  return req;
}

// Every change `source` logged for "t" so far, replayed on `target`: the
// target's update count of "t" after.
uint64_t catch_up(shard_core& source, shard_core& target) {
  uint64_t version = 0;
  for (bool more = true; more;) {
    auto log = source.move_out(move_req(pb::MoveOut::CATCH_UP), false);
    BOOST_REQUIRE_MESSAGE(log, (log ? "" : to_string(log.error())));
    more = log->more();
    pb::MoveIn replay;
    replay.set_step(pb::MoveIn::REPLAY);
    replay.set_name("t");
    replay.mutable_log()->Swap(log->mutable_log());
    auto done = target.move_in(replay);
    BOOST_REQUIRE_MESSAGE(done, (done ? "" : to_string(done.error())));
    version = done->version();
  }
  return version;
}

// Table shard "t" from `source` (ps shard 0) to `target` as
// actors/placement/shard_move.cpp moves it: BEGIN, IMPORT, pages of
// `page_rows` rows each written at once, a catch-up round, FINISH, the
// last changes. `during(k)` runs before page k is read and `during(-1)`
// before FINISH: what it pushes to the source is logged and replayed.
// The pages it took.
int move_table(shard_core& source, shard_core& target, int64_t page_rows, const std::function<void(int)>& during) {
  auto begun = source.move_out(move_req(pb::MoveOut::BEGIN), false);
  BOOST_REQUIRE_MESSAGE(begun, (begun ? "" : to_string(begun.error())));
  pb::MoveIn import;
  import.set_step(pb::MoveIn::IMPORT);
  *import.mutable_header() = begun->header();
  BOOST_REQUIRE(target.move_in(import));
  int pages = 0;
  for (int64_t at = 0;; ++pages) {
    during(pages);
    auto read = source.move_out(move_req(pb::MoveOut::READ, at, page_rows), false);
    BOOST_REQUIRE_MESSAGE(read, (read ? "" : to_string(read.error())));
    BOOST_TEST(read->table().ids_size() <= page_rows);
    at += read->table().ids_size();
    pb::MoveIn write;
    write.set_step(pb::MoveIn::WRITE);
    *write.mutable_table() = read->table();
    auto written = target.move_in(write);
    BOOST_REQUIRE_MESSAGE(written, (written ? "" : to_string(written.error())));
    if (!read->table().has_next()) break;
  }
  catch_up(source, target);
  during(-1);
  auto finished = source.move_out(move_req(pb::MoveOut::FINISH), false);
  BOOST_REQUIRE(finished);
  BOOST_TEST(catch_up(source, target) == finished->version());  // the mover's check before the switch
  return pages + 1;
}

// `a` and `b` hold table "t" alike, bit for bit: each row's values and
// optimizer slots, last update and update count, in the same eviction
// order; the same sketch, counters and update count.
void expect_same_table(const shard_core& a, shard_core& b) {
  const auto *x = a.table("t"), *y = b.table("t");
  BOOST_REQUIRE(x != nullptr);
  BOOST_REQUIRE(y != nullptr);
  struct row {
    int64_t id;
    std::string floats;
    uint64_t last;
    uint32_t updates;
  };
  auto rows_of = [](const dynamic_table& t) {
    std::vector<row> out;
    t.for_each([&](int64_t id, const float* r, uint64_t last, uint32_t updates) {
      out.push_back({id, std::string(reinterpret_cast<const char*>(r), size_t(t.row_floats()) * 4), last, updates});
    });
    return out;
  };
  const auto rx = rows_of(*x), ry = rows_of(*y);
  BOOST_REQUIRE(rx.size() == ry.size());
  for (size_t i = 0; i < rx.size(); ++i) {
    BOOST_TEST(rx[i].id == ry[i].id, "row " << i << " of the eviction order");
    BOOST_TEST((rx[i].floats == ry[i].floats), "id " << rx[i].id << ": values and slots differ");
    BOOST_TEST(rx[i].last == ry[i].last, "id " << rx[i].id);
    BOOST_TEST(rx[i].updates == ry[i].updates, "id " << rx[i].id);
  }
  BOOST_TEST((x->sketch_bytes() == y->sketch_bytes()));
  BOOST_TEST(x->counts().admitted == y->counts().admitted);
  BOOST_TEST(x->counts().evicted == y->counts().evicted);
  BOOST_TEST(x->counts().dropped == y->counts().dropped);
  auto version = [](const shard_core& c) {
    const auto snap = c.snapshot();
    for (auto& v : snap.variables())
      if (v.spec().name() == "t") return v.version();
    return uint64_t(0);
  };
  BOOST_TEST(version(a) == version(b));
}

}  // namespace

// An Adam table shard moves while pushes reach it: to rows copied already,
// to rows not copied yet and to ids without a row. The target ends as the
// source was at FINISH and as a core that got every push unmoved, bit for
// bit; the source redirects pushes after FINISH; the same pushes on the
// target and the unmoved core afterwards keep them equal.
BOOST_AUTO_TEST_CASE(a_table_shard_moves_under_adam_with_the_pushes_made_meanwhile) {
  auto source = table_core(0, 1, 0, pb::Optimizer::ADAM), unmoved = table_core(0, 1, 0, pb::Optimizer::ADAM);
  shard_core target(1, {}, 0);
  const auto ids = ids_of_part(0, 20);
  for (size_t i = 0; i < 10; ++i)  // 10 rows, ids[i] updated i % 3 + 1 times
    for (size_t k = 0; k <= i % 3; ++k)
      push_all({&source, &unmoved}, 10 + i * 3 + k, {ids[i]}, 0.1f * float(i + k) - 0.4f);
  uint64_t key = 100;
  const int pages = move_table(source, target, 3, [&](int page) {
    const size_t p = page < 0 ? 4 : size_t(page);  // an id copied, one not yet, one without a row
    push_all({&source, &unmoved}, key++, {ids[0], ids[9 - p], ids[10 + p]}, 0.3f + 0.05f * float(p));
  });
  BOOST_TEST(pages == 4);  // the 10 rows BEGIN froze, 3 a page
  expect_same_table(source, target);
  expect_same_table(unmoved, target);
  BOOST_TEST(target.stats().tables(0).rows() == 15);
  BOOST_TEST(target.stats().tables(0).admitted() == 15u);
  BOOST_TEST(read(target, ids) == read(unmoved, ids), boost::test_tools::per_element());

  auto after = source.apply_rows(rows_push(key, "t", {ids[1]}, kDim, 1.0f));
  BOOST_REQUIRE(!after);
  BOOST_CHECK(after.error() == errc::moved);
  BOOST_TEST(to_string(after.error()).find("'t' moved to ps:1") != std::string::npos, to_string(after.error()));
  BOOST_TEST(target.apply_rows(rows_push(100, "t", {ids[0]}, kDim, 1.0f))->duplicates() == 1u);  // applied meanwhile
  BOOST_REQUIRE(source.move_out(move_req(pb::MoveOut::DROP), false));
  BOOST_TEST(source.table("t") == nullptr);
  for (size_t i = 0; i < 20; i += 3) push_all({&target, &unmoved}, key++, {ids[i], ids[19 - i]}, -0.2f);
  expect_same_table(unmoved, target);
}

// min_count = 2 and max_rows = 6 under Adagrad: ids seen once before the
// move are admitted by their second push during it only if the target
// got the sketch; rows past the cap go in the eviction order the pages
// kept. Bad reads and writes change nothing.
BOOST_AUTO_TEST_CASE(a_table_shard_with_min_count_and_max_rows_moves_with_its_sketch_and_eviction_order) {
  auto source = table_core(0, 2, 6, pb::Optimizer::ADAGRAD), unmoved = table_core(0, 2, 6, pb::Optimizer::ADAGRAD);
  shard_core target(1, {}, 0);
  const auto ids = ids_of_part(0, 16);
  uint64_t key = 1;
  for (size_t i = 0; i < 8; ++i)  // ids[0..7] admitted (2 pushes), 6 kept; ids[8..15] seen once
    for (int twice = 0; twice < 2; ++twice) push_all({&source, &unmoved}, key++, {ids[i]}, 0.25f * float(i) - 1.0f);
  for (size_t i = 8; i < 16; ++i) push_all({&source, &unmoved}, key++, {ids[i]}, 0.5f);
  BOOST_REQUIRE(source.stats().tables(0).rows() == 6);
  const int pages = move_table(source, target, 4, [&](int page) {
    if (page == 1) {                                                            // the bad requests change nothing
      BOOST_TEST(!source.move_out(move_req(pb::MoveOut::READ, 0, 0), false));   // no row asked for
      BOOST_TEST(!source.move_out(move_req(pb::MoveOut::READ, 99, 4), false));  // past its rows
      pb::MoveIn dense;
      dense.set_step(pb::MoveIn::WRITE);
      *dense.mutable_chunk() = slice("t", {1, 2, 3, 4});
      BOOST_TEST(!target.move_in(dense));
    }
    if (page < 0) page = 2;
    // ids seen once: admitted now at their second push, each evicting the least recently updated
    push_all({&source, &unmoved}, key++, {ids[8 + size_t(page) * 2], ids[9 + size_t(page) * 2], ids[7]}, 0.75f);
  });
  BOOST_TEST(pages == 2);
  expect_same_table(source, target);
  expect_same_table(unmoved, target);
  const auto t = target.stats().tables(0);
  BOOST_TEST(t.rows() == 6);
  BOOST_TEST(t.admitted() == t.evicted() + uint64_t(t.rows()));
  BOOST_TEST(t.admitted() == 14u);  // 8 before, 6 during
  BOOST_TEST(t.dropped() == 16u);   // each id's first sighting
  for (size_t i = 0; i < 16; ++i) push_all({&target, &unmoved}, key++, {ids[i], ids[15 - i]}, 0.125f);
  expect_same_table(unmoved, target);
}
