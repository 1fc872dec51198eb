// graph_model over sequential specs: parameters by name and shape, gradients of the
// whole seed CNN against finite differences, fast CPU = reference, and a
// model that learns.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

#include "kernels/model.hpp"
#include "kernels/tensor.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// A small CNN of every layer kind, cheap enough for finite differences.
model_spec small_cnn() {
  model_spec m;
  m.height = 8, m.width = 7, m.channels = 2;
  m.layers = {
      {layer_kind::conv2d, 8, 3, padding::same, 2, activation::relu},
      {layer_kind::maxpool2d, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::conv2d, 8, 2, padding::valid, 2, activation::none},
      {layer_kind::flatten, 0, 3, padding::valid, 2, activation::none},
      {layer_kind::dense, 6, 3, padding::valid, 2, activation::relu},
      {layer_kind::dense, 4, 3, padding::valid, 2, activation::none},
  };
  return m;
}

struct batch_data {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

// Gradient buffers with overrun guards, one per parameter value, and the
// pointer lists train_step takes.
struct guarded_gradients {
  std::vector<const float*> params;
  std::vector<buffer> grads;
  std::vector<float*> ptrs;
  explicit guarded_gradients(const std::vector<std::vector<float>>& values) {
    for (auto& v : values) {
      params.push_back(v.data());
      grads.emplace_back(int64_t(v.size()));
    }
    for (auto& g : grads) ptrs.push_back(g.data());
  }
};

batch_data random_batch(const graph_model& model, int batch, unsigned seed) {
  batch_data b{random_vector(batch * model.input_size(), seed), std::vector<int32_t>(size_t(batch))};
  for (int i = 0; i < batch; ++i) b.labels[size_t(i)] = (i * 3 + int(seed)) % model.classes();
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(seed_cnn_parameters) {
  graph_model model(model_spec::seed_cnn(), reference_ops());
  auto& p = model.parameters();
  BOOST_REQUIRE(p.size() == 6u);
  BOOST_TEST(p[0].name == "conv2d_0/kernel");
  BOOST_TEST((p[0].shape == std::vector<int64_t>{3, 3, 1, 32}));
  BOOST_TEST(p[1].name == "conv2d_0/bias");
  BOOST_TEST((p[2].shape == std::vector<int64_t>{13 * 13 * 32, 64}));
  BOOST_TEST(p[4].name == "dense_1/kernel");
  BOOST_TEST((p[5].shape == std::vector<int64_t>{10}));
  BOOST_TEST(model.classes() == 10);
  auto init = model.initial_values(3);
  BOOST_TEST(init[0] != model.initial_values(4)[0]);  // seeded
  BOOST_TEST(init[0] == model.initial_values(3)[0]);  // deterministic
  float limit = std::sqrt(6.0f / (9 + 9 * 32));       // glorot-uniform, Keras fans
  for (float v : init[0]) BOOST_TEST(std::abs(v) <= limit);
  for (float v : init[1]) BOOST_TEST(v == 0.0f);
}

BOOST_AUTO_TEST_CASE(seed_cnn_cost_per_example) {
  // Conv 3x3x1 -> 26x26x32: 2 * 21,632 * 9 FLOPs forward; dense 5,408 -> 64
  // and 64 -> 10: 2 * 346,112 and 2 * 640. Backward twice each but the
  // conv's input gradient: 3 * 1,082,880 - 389,376.
  auto cost = model_spec::seed_cnn().cost_per_example();
  BOOST_TEST(cost.flops == 2859264.0);
  // 21,632 (conv) + 5,408 (pool) + 64 + 10; flatten is a reshape.
  BOOST_TEST(cost.activations == 27114.0);
}

BOOST_AUTO_TEST_CASE(spec_errors_name_the_layer) {
  auto m = model_spec::seed_cnn();
  m.layers.erase(m.layers.begin() + 2);  // no flatten before dense
  auto bad = m.check();
  BOOST_REQUIRE(bad);
  BOOST_TEST(bad->layer.value_or(99) == 2u);
  BOOST_TEST(bad->message() == "layer 2 (dense_0): dense needs a flat input (add a flatten layer), got [13, 13, 32]");
  m = model_spec::seed_cnn();
  m.layers[0].kernel = 40;
  bad = m.check();
  BOOST_REQUIRE(bad);
  BOOST_TEST(bad->message() == "layer 0 (conv2d_0): conv2d kernel 40 larger than its input [28, 28, 1]");
  m = model_spec::seed_cnn();
  m.layers.back().act = activation::relu;
  bad = m.check();
  BOOST_REQUIRE(bad);
  BOOST_TEST(!bad->layer);  // the model as a whole
  BOOST_TEST(bad->message().find("last layer must have no activation") != std::string::npos);
  BOOST_TEST(!model_spec::seed_cnn().check());
  BOOST_TEST(!small_cnn().check());
}

BOOST_AUTO_TEST_CASE(whole_model_gradients_match_finite_differences) {
  for (const auto& spec : {small_cnn(), model_spec::seed_cnn()}) {
    BOOST_TEST_CONTEXT((spec.height == 28 ? "seed CNN" : "small CNN")) {
      graph_model model(spec, reference_ops());
      auto values = model.initial_values(11);
      for (size_t i = 1; i < values.size(); i += 2)  // non-zero biases (kernels stay
        for (auto& x : values[i]) x = 0.05f;         // glorot: loss ~2, float32 noise small)
      const int batch = 3;
      auto data = random_batch(model, batch, 5);
      guarded_gradients g(values);
      model.train_step({batch, data.x.data(), data.labels.data()}, g.params, g.ptrs);
      auto loss = [&] { return double(model.evaluate({batch, data.x.data(), data.labels.data()}, g.params).loss); };
      // A first-layer weight feeds thousands of ReLUs and pool windows, so some
      // probes straddle a kink (skipped, at most a quarter of them); float32
      // loss noise (~1e-7 * loss / h) stays far below tol.
      for (size_t i = 0; i < values.size(); ++i)
        check_gradient(values[i], g.grads[i], loss, model.parameters()[i].name, 1e-3, 1e-2, 0.25);
    }
  }
}

BOOST_AUTO_TEST_CASE(fast_tables_train_like_the_reference) {
  for (auto* ops : fast_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      graph_model ref(model_spec::seed_cnn(), reference_ops()), fast(model_spec::seed_cnn(), *ops);
      auto values = ref.initial_values(2);
      const int batch = 4;
      auto data = random_batch(ref, batch, 9);
      // The fast table's inputs, parameters and gradients live on its device.
      tensor x({int64_t(data.x.size())}, ops->where);
      x.copy_from_host(data.x.data(), x.size());
      int_tensor labels({batch}, ops->where);
      labels.copy_from_host(data.labels.data(), batch);
      std::vector<tensor> dev_params, dev_grads;
      std::vector<const float*> fast_params;
      guarded_gradients ref_grads(values);
      std::vector<buffer> g_fast;
      std::vector<float*> p_fast;
      for (auto& v : values) {
        dev_params.emplace_back(std::vector<int64_t>{int64_t(v.size())}, ops->where);
        dev_params.back().copy_from_host(v.data(), int64_t(v.size()));
        fast_params.push_back(dev_params.back().data());
        dev_grads.emplace_back(std::vector<int64_t>{int64_t(v.size())}, ops->where);
        p_fast.push_back(dev_grads.back().data());
        g_fast.emplace_back(int64_t(v.size()));
      }
      auto r1 = ref.train_step({batch, data.x.data(), data.labels.data()}, ref_grads.params, ref_grads.ptrs);
      auto r2 = fast.train_step({batch, x.data(), labels.data()}, fast_params, p_fast);
      BOOST_TEST(r1.loss == r2.loss, boost::test_tools::tolerance(1e-5f));
      BOOST_TEST(r1.correct == r2.correct);
      for (size_t i = 0; i < values.size(); ++i) {
        dev_grads[i].copy_to_host(g_fast[i].data(), g_fast[i].size());
        check_close(g_fast[i], ref_grads.grads[i], 2e-4);
      }
    }
  }
}

// A model keeps a plan per batch size (training, an epoch's short last
// batch, evaluation): switching sizes, past the cap of kept plans too, gives
// exactly what a fresh model gives at each size.
BOOST_AUTO_TEST_CASE(switching_batch_sizes_matches_a_fresh_model) {
  const auto spec = small_cnn();
  for (auto* ops : {&reference_ops(), fast_tables()[0]}) {
    BOOST_TEST_CONTEXT(ops->name) {
      graph_model model(spec, *ops);
      auto values = model.initial_values(3);
      for (int batch : {4, 7, 4, 3, 5, 6, 2, 4, 7}) {
        BOOST_TEST_CONTEXT("batch " << batch) {
          auto data = random_batch(model, batch, unsigned(batch));
          const batch_view view{batch, data.x.data(), data.labels.data()};
          graph_model fresh(spec, *ops);
          guarded_gradients kept(values), fresh_grads(values);
          auto eval = model.evaluate(view, kept.params);
          auto r1 = model.train_step(view, kept.params, kept.ptrs);
          auto r2 = fresh.train_step(view, fresh_grads.params, fresh_grads.ptrs);
          BOOST_TEST(eval.loss == r2.loss);
          BOOST_TEST(r1.loss == r2.loss);
          BOOST_TEST(r1.correct == r2.correct);
          for (size_t i = 0; i < values.size(); ++i) check_close(kept.grads[i], fresh_grads.grads[i], 0.0);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(seed_cnn_learns_a_synthetic_task) {
  // Class c = a bright 6x6 square at one of 10 places on a noisy image.
  set_cpu_threads(1);
  graph_model model(model_spec::seed_cnn(), cpu_ops());
  host_parameters p(model.initial_values(1));
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> noise(0, 0.3f);
  auto make = [&](int batch, std::vector<float>& x, std::vector<int32_t>& y) {
    x.assign(size_t(batch) * 784, 0);
    y.resize(size_t(batch));
    for (int b = 0; b < batch; ++b) {
      int c = int(gen() % 10);
      y[size_t(b)] = c;
      for (int i = 0; i < 784; ++i) x[size_t(b) * 784 + size_t(i)] = noise(gen);
      int top = 2 + (c / 5) * 13, left = 2 + (c % 5) * 5;
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 4; ++j) x[size_t(b) * 784 + size_t((top + i) * 28 + left + j)] = 1.0f;
    }
  };
  optimizer_params sgd;
  sgd.lr = 0.1f;
  std::vector<float> x;
  std::vector<int32_t> y;
  float first_loss = 0;
  for (int step = 0; step < 150; ++step) {
    make(32, x, y);
    auto r = model.train_step({32, x.data(), y.data()}, p.params, p.grad_ptrs);
    if (step == 0) first_loss = r.loss;
    for (size_t i = 0; i < p.values.size(); ++i)
      cpu_ops().apply_dense(optimizer_kind::sgd, sgd, int64_t(p.values[i].size()), p.value_ptrs[i], nullptr,
                            p.grad_views[i]);
  }
  make(500, x, y);
  auto eval = model.evaluate({500, x.data(), y.data()}, p.params);
  BOOST_TEST_MESSAGE("loss " << first_loss << " -> " << eval.loss << ", accuracy " << eval.correct / 5.0 << "%");
  BOOST_TEST(eval.loss < first_loss / 4);
  BOOST_TEST(eval.correct >= 475);  // >= 95%
}

namespace {

// Categorical features -> embedding (mean of 3 ids) -> dense(8, relu) -> dense(1) -> sigmoid.
model_spec embedding_model(int64_t vocabulary) {
  model_spec m;
  layer_spec emb{layer_kind::embedding, 4};
  emb.vocabulary = vocabulary;
  emb.ids_per_example = 3;
  emb.comb = combiner::mean;
  m.layers = {emb,
              {layer_kind::dense, 8, 3, padding::valid, 2, activation::relu},
              {layer_kind::dense, 1, 3, padding::valid, 2, activation::none}};
  m.loss = loss_kind::sigmoid_bce;
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(embedding_model_gradients_are_sparse_and_match_finite_differences) {
  graph_model model(embedding_model(20), reference_ops());
  BOOST_TEST(!model.spec().check());
  auto& p = model.parameters();
  BOOST_REQUIRE(p.size() == 5u);
  BOOST_TEST(p[0].name == "embedding_0/embeddings");
  BOOST_TEST(p[0].sparse);
  BOOST_TEST((p[0].shape == std::vector<int64_t>{20, 4}));
  BOOST_TEST((p[1].shape == std::vector<int64_t>{4, 8}));
  auto values = model.initial_values(5);
  for (float v : values[0]) BOOST_TEST(std::abs(v) <= 0.05f);
  for (size_t i = 2; i < values.size(); i += 2)
    for (auto& x : values[i]) x = 0.05f;                                  // non-zero biases
  const std::vector<float> ids{3, 7, -1, 3, 3, 11, 0, 19, 7, -1, -1, 5};  // ids as the batch carries them
  const std::vector<int32_t> labels{1, 0, 1, 0};
  guarded_gradients g(values);
  g.ptrs[0] = nullptr;  // sparse: read through sparse_gradient()
  batch_view batch{4, ids.data(), labels.data()};
  model.train_step(batch, g.params, g.ptrs);
  auto& sparse = model.sparse_gradient(0);
  BOOST_TEST((sparse.ids == std::vector<int64_t>{0, 3, 5, 7, 11, 19}));  // touched rows only
  buffer dense_table(int64_t(values[0].size()));
  std::fill(dense_table.begin(), dense_table.end(), 0.0f);
  for (size_t r = 0; r < sparse.ids.size(); ++r)
    for (int d = 0; d < 4; ++d) dense_table[sparse.ids[r] * 4 + d] = sparse.rows[r * 4 + size_t(d)];
  auto loss = [&] { return double(model.evaluate(batch, g.params).loss); };
  check_gradient(values[0], dense_table, loss, "embedding_0/embeddings", 1e-3, 1e-2, 0.25);
  for (size_t i = 1; i < values.size(); ++i)
    check_gradient(values[i], g.grads[i], loss, model.parameters()[i].name, 1e-3, 1e-2, 0.25);
}

BOOST_AUTO_TEST_CASE(embedding_model_learns_with_sparse_updates) {
  // Label 1 when any of an example's ids is below 10 (of 100).
  graph_model model(embedding_model(100), cpu_ops());
  host_parameters p(model.initial_values(8));
  std::vector<std::vector<float>> slots;  // adagrad accumulators
  for (auto& v : p.values) slots.emplace_back(v.size(), 0.1f);
  std::mt19937 gen(3);
  auto make = [&](int n, std::vector<float>& ids, std::vector<int32_t>& y) {
    ids.resize(size_t(n) * 3);
    y.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      bool positive = gen() % 2 == 0;
      for (int j = 0; j < 3; ++j) ids[size_t(i * 3 + j)] = float(10 + gen() % 90);
      if (positive) ids[size_t(i * 3 + int(gen() % 3))] = float(gen() % 10);
      y[size_t(i)] = positive ? 1 : 0;
    }
  };
  optimizer_params opt;
  opt.lr = 0.2f;
  std::vector<float> ids;
  std::vector<int32_t> y;
  for (int step = 0; step < 300; ++step) {
    make(32, ids, y);
    model.train_step({32, ids.data(), y.data()}, p.params, p.grad_ptrs);
    auto& g = model.sparse_gradient(0);
    float* table_slots[1] = {slots[0].data()};
    cpu_ops().apply_sparse(optimizer_kind::adagrad, opt, int64_t(g.ids.size()), g.dim, g.ids.data(), p.value_ptrs[0],
                           table_slots, g.rows.data());
    for (size_t i = 1; i < p.values.size(); ++i) {
      float* s[1] = {slots[i].data()};
      cpu_ops().apply_dense(optimizer_kind::adagrad, opt, int64_t(p.values[i].size()), p.value_ptrs[i], s,
                            p.grad_views[i]);
    }
  }
  make(1000, ids, y);
  auto eval = model.evaluate({1000, ids.data(), y.data()}, p.params);
  BOOST_TEST_MESSAGE("embedding model: loss " << eval.loss << ", accuracy " << eval.correct / 10.0 << "%");
  BOOST_TEST(eval.correct >= 950);
}

BOOST_AUTO_TEST_CASE(embedding_spec_and_id_errors) {
  auto m = embedding_model(10);
  std::swap(m.layers[0], m.layers[1]);
  BOOST_TEST(m.check().value().layer.value_or(99) == 0u);
  m = embedding_model(10);
  m.layers.back().units = 2;
  BOOST_TEST(m.check().value().message() == "loss sigmoid_bce needs a last layer of 1 unit, got 2");
  m = embedding_model(10);
  m.layers[0].vocabulary = 0;
  BOOST_TEST(m.check().value().message() ==
             "layer 0 (embedding_0): embedding needs vocabulary > 0, dim > 0 and inputs > 0");
  graph_model model(embedding_model(10), cpu_ops());
  auto values = model.initial_values(1);
  std::vector<const float*> params;
  for (auto& v : values) params.push_back(v.data());
  const std::vector<float> ids{1, 2, 3, 4, 10, 5};
  const std::vector<int32_t> y{0, 1};
  try {
    model.evaluate({2, ids.data(), y.data()}, params);
    BOOST_ERROR("an id outside the vocabulary was accepted");
  } catch (const std::out_of_range& e) {
    BOOST_TEST(std::string(e.what()) == "example 1: id 10 outside the vocabulary [0, 10)");
  }
}

namespace {

// FNV-1a over the floats' bits: equal hashes, bit-identical gradients.
uint64_t bits_hash(const float* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, p + i, 4);
    for (int k = 0; k < 4; ++k) h = (h ^ ((b >> (8 * k)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

struct recorded_step {
  float loss;
  int64_t correct;
  std::vector<uint64_t> grads;  // bits_hash per parameter (sparse: its rows)
};

}  // namespace

// Sequential specs run as graphs compute bit for bit what the sequential
// model did before graphs (numbers recorded with main's sequential_model,
// 2026-12-06, reference table; the CPU table matched too on that machine).
BOOST_AUTO_TEST_CASE(sequential_specs_compute_what_they_did_before) {
  const recorded_step want[] = {
      {0x1.7db12ap+0f,
       1,
       {0xb7f9cc6d7ce9970bull, 0x25e22c2b00666ea6ull, 0xc95ed1ef658f69f6ull, 0x05f1b3dde55f220aull,
        0x4f5dd14944aacff2ull, 0x713615137e5a6c52ull, 0x780a399222de7f6bull, 0x7094c3d2186f2352ull}},
      {0x1.261d24p+1f,
       2,
       {0xc1820afc01510e27ull, 0xc6a6208b6e9dc3afull, 0x86f1ed24e17dc24bull, 0xfbbc64a1be82a69eull,
        0x73142ab8ce88e160ull, 0x3f16aac38fb1f002ull}},
      {0x1.633adap-1f,
       2,
       {0xdb148271e113f433ull, 0xf09a4c658015dd74ull, 0x604c5804a7633251ull, 0x13eb96193ecf37faull,
        0xec985ab94b2bc5e9ull}},
  };
  const model_spec specs[] = {small_cnn(), model_spec::seed_cnn(), embedding_model(20)};
  for (size_t s = 0; s < 3; ++s) {
    BOOST_TEST_CONTEXT("spec " << s) {
      graph_model m(specs[s], reference_ops());
      host_parameters p(m.initial_values(11));
      const int n = 5;
      const bool ids = s == 2;
      std::vector<float> x(size_t(n * m.input_size()));
      for (size_t i = 0; i < x.size(); ++i) x[i] = ids ? float(int(i * 7 % 21) - 1) : float(std::sin(0.37 * double(i)));
      std::vector<int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[size_t(i)] = ids ? i % 2 : (i * 3 + 1) % m.classes();
      auto r = m.train_step({n, x.data(), labels.data()}, p.params, p.grad_ptrs);
      BOOST_TEST(r.loss == want[s].loss);
      BOOST_TEST(r.correct == want[s].correct);
      for (size_t i = 0; i < p.grads.size(); ++i) {
        const auto& g = m.parameters()[i].sparse ? m.sparse_gradient(i).rows : p.grads[i];
        const uint64_t h = bits_hash(g.data(), g.size());
        BOOST_TEST(h == want[s].grads[i], m.parameters()[i].name);
      }
    }
  }
}
