// A worker's model over G devices (kernels/device_model.hpp), with CPU
// devices standing in for GPUs: the batch split over G ∈ {1, 2, 3} gives
// the gradients, loss and predictions of one device on the whole batch, and
// the same parameters after a run of synchronous training steps.
#define BOOST_TEST_MODULE devices
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/device_memory.hpp"
#include "kernels/device_model.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// Each device sums its own part of the batch and the parts are added on
// device 0, each weighted by its rows / batch after that part's mean: the
// same sums in another order, so the last bits differ. 1e-5 of the largest
// element is ~100 float ulps of it, far below any real difference (a
// gradient that missed one example of 17 is off by ~6% of that example's).
constexpr double kReassociated = 1e-5;

std::vector<compute_device> cpu_devices(int g) {
  std::vector<compute_device> out;
  for (int i = 0; i < g; ++i) out.push_back(compute_device::cpu(i));
  return out;
}

double largest(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

void check_near(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  const double tol = kReassociated * std::max(largest(want), 1e-30);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  BOOST_TEST(worst <= tol, what << ": largest difference " << worst << " > " << tol);
}

struct image_batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
  batch_view view() const { return {int(labels.size()), x.data(), labels.data()}; }
};

image_batch images(const model_spec& spec, int n, unsigned seed) {
  image_batch b{random_vector(int64_t(n) * spec.height * spec.width * spec.channels, seed),
                std::vector<int32_t>(size_t(n))};
  for (int i = 0; i < n; ++i) b.labels[size_t(i)] = (i * 7 + int(seed)) % spec.layers.back().units;
  return b;
}

// One device's gradients of the whole batch, and G devices' of the same.
void check_split(int g, int batch) {
  const auto spec = model_spec::seed_cnn();
  graph_model one(spec, cpu_ops());
  device_model split(spec, cpu_devices(g));
  host_parameters want(one.initial_values(3)), got(one.initial_values(3));
  const auto b = images(spec, batch, 5);
  const auto r1 = one.train_step(b.view(), want.params, want.grad_ptrs);
  const auto rg = split.train_step(b.view(), got.params, got.grad_ptrs);
  BOOST_TEST(rg.correct == r1.correct);
  BOOST_TEST(std::abs(rg.loss - r1.loss) <= kReassociated * std::abs(r1.loss));
  for (size_t p = 0; p < want.grads.size(); ++p) check_near(got.grads[p], want.grads[p], one.parameters()[p].name);
  const auto e1 = one.evaluate(b.view(), want.params), eg = split.evaluate(b.view(), got.params);
  BOOST_TEST(eg.correct == e1.correct);
  BOOST_TEST(std::abs(eg.loss - e1.loss) <= kReassociated * std::abs(e1.loss));
}

}  // namespace

BOOST_AUTO_TEST_CASE(g_cpu_devices_give_one_devices_gradients_of_the_whole_batch) {
  for (int g : {1, 2, 3}) {
    BOOST_TEST_CONTEXT("G = " << g) {
      check_split(g, 17);  // parts of 17 / 9 + 8 / 6 + 6 + 5 rows
      check_split(g, 2);   // G = 3: a device without rows
    }
  }
}

BOOST_AUTO_TEST_CASE(a_device_that_skips_its_part_of_the_batch_is_caught) {
  // The check above can fail: the gradient of 16 of the 17 examples (what
  // a split that lost a row would give) is outside its tolerance.
  const auto spec = model_spec::seed_cnn();
  graph_model one(spec, cpu_ops());
  host_parameters all(one.initial_values(3)), fewer(one.initial_values(3));
  auto b = images(spec, 17, 5);
  one.train_step(b.view(), all.params, all.grad_ptrs);
  auto v = b.view();
  v.size = 16;
  one.train_step(v, fewer.params, fewer.grad_ptrs);
  const double tol = kReassociated * largest(all.grads[0]);
  double worst = 0;
  for (size_t i = 0; i < all.grads[0].size(); ++i)
    worst = std::max(worst, std::abs(double(all.grads[0][i]) - fewer.grads[0][i]));
  BOOST_TEST(worst > 100 * tol);
}

BOOST_AUTO_TEST_CASE(sparse_gradients_are_merged_over_the_devices) {
  model_spec spec;
  spec.layers = {{layer_kind::embedding, 4, 3, padding::valid, 2, activation::none, 50, 3, combiner::mean},
                 {layer_kind::dense, 3, 3, padding::valid, 2, activation::none}};
  BOOST_TEST_REQUIRE(!spec.check());
  const int n = 11;
  std::vector<float> ids(size_t(n) * 3);  // ids as the batch carries them: floats
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i % 5 == 4 ? -1.0f : float((i * 13) % 50);  // repeats, padding
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) labels[size_t(i)] = i % 3;
  const batch_view view{n, ids.data(), labels.data()};
  graph_model one(spec, cpu_ops());
  host_parameters want(one.initial_values(7)), got(one.initial_values(7));
  const auto r1 = one.train_step(view, want.params, want.grad_ptrs);
  const auto& s1 = one.sparse_gradient(0);
  for (int g : {2, 3}) {
    BOOST_TEST_CONTEXT("G = " << g) {
      device_model split(spec, cpu_devices(g));
      const auto rg = split.train_step(view, got.params, got.grad_ptrs);
      BOOST_TEST(rg.correct == r1.correct);
      const auto& sg = split.sparse_gradient(0);
      BOOST_TEST(sg.ids == s1.ids);
      check_near(sg.rows, s1.rows, "embedding rows");
      for (size_t p = 1; p < want.grads.size(); ++p) check_near(got.grads[p], want.grads[p], one.parameters()[p].name);
    }
  }
}

// A graph with floats and two ids inputs, each read by its own table of its
// own size: each part's rows come from its own ids (lookups()), per table.
BOOST_AUTO_TEST_CASE(a_graph_of_two_tables_splits_like_one_device) {
  model_spec spec;
  spec.inputs = {{"numeric", {2}}, {"user", {2}, input_kind::ids}, {"item", {1}, input_kind::ids}};
  auto table = [](std::string name, std::string input, int64_t vocabulary) {
    layer_spec l{layer_kind::embedding, 3};
    l.name = std::move(name), l.inputs = {std::move(input)}, l.vocabulary = vocabulary;
    return l;
  };
  layer_spec both{layer_kind::concat};
  both.inputs = {"numeric", "users", "items"};
  spec.layers = {table("users", "user", 40), table("items", "item", 7), both, {layer_kind::dense, 2}};
  BOOST_TEST_REQUIRE(!spec.check());
  const int n = 9;
  std::vector<float> x(size_t(n) * 5);
  for (int e = 0; e < n; ++e) {
    float* row = &x[size_t(e) * 5];
    row[0] = 0.1f * float(e), row[1] = -0.2f * float(e);
    row[2] = float(e * 11 % 40), row[3] = e % 4 == 0 ? -1.0f : float(e * 7 % 40), row[4] = float(e % 7);
  }
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) labels[size_t(i)] = i % 2;
  const batch_view view{n, x.data(), labels.data()};
  graph_model one(spec, cpu_ops());
  host_parameters want(one.initial_values(5)), got(one.initial_values(5));
  const auto r1 = one.train_step(view, want.params, want.grad_ptrs);
  device_model split(spec, cpu_devices(2));
  const auto r2 = split.train_step(view, got.params, got.grad_ptrs);
  BOOST_TEST(r2.correct == r1.correct);
  BOOST_TEST(r2.loss == r1.loss, boost::test_tools::tolerance(1e-5f));
  for (size_t p : {0u, 1u}) {
    BOOST_TEST(split.sparse_gradient(p).ids == one.sparse_gradient(p).ids);
    check_near(split.sparse_gradient(p).rows, one.sparse_gradient(p).rows, one.parameters()[p].name);
  }
  for (size_t p = 2; p < want.grads.size(); ++p) check_near(got.grads[p], want.grads[p], one.parameters()[p].name);
}

BOOST_AUTO_TEST_CASE(synchronous_training_on_g_devices_ends_where_one_device_does) {
  // 30 SGD steps, the gradient of each whole batch applied at once (a SYNC
  // job's step): the parameters drift apart only by the rounding above. The
  // model is smooth (a linear convolution and dense layer, no relu, no max
  // pool): in the seed CNN one activation of the ~500,000 per step that
  // rounding puts on the other side of 0, or a max-pool tie it breaks the
  // other way, sends a whole gradient term elsewhere (measured: 2e-5 after
  // 10 steps at G = 3, where the first 5 agreed to 3e-8), which says
  // nothing about the split.
  model_spec spec;
  spec.layers = {{layer_kind::conv2d, 8, 3, padding::valid}, {layer_kind::flatten}, {layer_kind::dense, 10}};
  optimizer_params sgd;
  sgd.lr = 0.05f;
  std::vector<std::vector<float>> ends;
  for (int g : {1, 2, 3}) {
    device_model model(spec, cpu_devices(g));
    graph_model probe(spec, reference_ops());
    host_parameters p(probe.initial_values(11));
    for (int step = 0; step < 30; ++step) {
      const auto b = images(spec, 24, unsigned(100 + step));
      model.train_step(b.view(), p.params, p.grad_ptrs);
      for (size_t i = 0; i < p.values.size(); ++i)
        cpu_ops().apply_dense(optimizer_kind::sgd, sgd, int64_t(p.values[i].size()), p.value_ptrs[i], nullptr,
                              p.grad_views[i]);
    }
    std::vector<float> all;
    for (auto& v : p.values) all.insert(all.end(), v.begin(), v.end());
    ends.push_back(std::move(all));
  }
  check_near(ends[1], ends[0], "G = 2 after 30 steps");
  check_near(ends[2], ends[0], "G = 3 after 30 steps");
}

BOOST_AUTO_TEST_CASE(cuda_devices_exist_only_where_a_gpu_does) {
  if (cuda_device_count() > 0) {
    BOOST_TEST_MESSAGE("GPU visible: checking " << cuda_device_count() << " CUDA device(s) against the CPU");
    for (int g = 1; g <= std::min(cuda_device_count(), 3); ++g) {
      std::vector<compute_device> gpus;
      for (int i = 0; i < g; ++i) gpus.push_back(compute_device::cuda(i));
      const auto spec = model_spec::seed_cnn();
      graph_model one(spec, cpu_ops());
      device_model split(spec, std::move(gpus));
      host_parameters want(one.initial_values(3)), got(one.initial_values(3));
      const auto b = images(spec, 17, 5);
      one.train_step(b.view(), want.params, want.grad_ptrs);
      split.train_step(b.view(), got.params, got.grad_ptrs);
      for (size_t p = 0; p < want.grads.size(); ++p)  // cuDNN/cuBLAS sum in their own order: GEMM tolerance
        for (size_t i = 0; i < want.grads[p].size(); ++i)
          BOOST_TEST(std::abs(got.grads[p][i] - want.grads[p][i]) <= 1e-3 * (1 + std::abs(want.grads[p][i])));
    }
    return;
  }
  BOOST_TEST_MESSAGE("no GPU: CUDA devices skipped (" << cuda_unavailable_reason() << ")");
  BOOST_CHECK_EXCEPTION(compute_device::cuda(0), std::runtime_error,
                        [](const std::runtime_error& e) { return std::string(e.what()).find("cuda:0: ") == 0; });
  BOOST_CHECK_THROW(device_model(model_spec::seed_cnn(), {}), std::invalid_argument);
}
