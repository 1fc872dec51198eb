// graph_model over graphs: two inputs (floats and ids) through dense and
// embedding into a concat, a diamond whose shared node sums the gradients
// of both branches, specs built as plain structs, and what check() refuses.
// Whole-graph gradients are checked against finite differences.
#define BOOST_TEST_MODULE graph_model
#include <boost/test/unit_test.hpp>

#include "kernels/model.hpp"
#include "kernels/tensor.hpp"
#include "tests/graph_specs.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

// numeric [5] floats, categorical [3] ids (vocabulary 12): dense(6, relu) and
// embedding(4, sum) -> concat [10] -> dense(1) -> sigmoid: a wide-and-deep shape.
model_spec two_inputs() {
  model_spec m;
  m.inputs = {{"numeric", {5}}, {"categorical", {3}, input_kind::ids}};
  auto emb = node(layer_kind::embedding, "cat", {"categorical"}, 4);
  emb.vocabulary = 12;
  emb.comb = combiner::sum;
  m.layers = {node(layer_kind::dense, "deep", {"numeric"}, 6, activation::relu), emb,
              node(layer_kind::concat, "both", {"deep", "cat"}), node(layer_kind::dense, "logit", {}, 1)};
  m.loss = loss_kind::sigmoid_bce;
  return m;
}

// x [6] -> h = dense(5, relu) -> a = dense(3)(h), b = dense(3)(h) -> add(a, b, h2)
// with h2 = dense(3)(x): h feeds two nodes, x three.
model_spec diamond() {
  model_spec m;
  m.inputs = {{"x", {6}}};
  m.layers = {node(layer_kind::dense, "h", {"x"}, 5, activation::relu), node(layer_kind::dense, "a", {"h"}, 3),
              node(layer_kind::dense, "b", {"h"}, 3), node(layer_kind::dense, "h2", {"x"}, 3),
              node(layer_kind::add, "sum", {"a", "b", "h2"})};
  return m;
}

struct example_batch {
  std::vector<float> x;  // [n, input_size()]: numeric columns, then ids as floats
  std::vector<int32_t> labels;
};

example_batch batch_for(const graph_model& model, int n, unsigned seed) {
  example_batch b{random_vector(n * model.input_size(), seed), std::vector<int32_t>(size_t(n))};
  const auto& inputs = model.spec().inputs;
  for (int e = 0; e < n; ++e) {
    int64_t offset = 0;
    for (auto& in : inputs) {
      const int64_t size = element_count(in.shape);
      if (in.kind == input_kind::ids)
        for (int64_t k = 0; k < size; ++k)
          b.x[size_t(e * model.input_size() + offset + k)] = float((e * 5 + k * 7 + seed) % 13) - 1;  // -1: padding
      offset += size;
    }
    b.labels[size_t(e)] = model.classes() == 1 ? e % 2 : e % model.classes();
  }
  return b;
}

// A sparse gradient as a dense table.
buffer dense_of(const sparse_rows& s, const param_info& p) {
  buffer out(p.size());
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t r = 0; r < s.ids.size(); ++r)
    for (int64_t d = 0; d < p.shape[1]; ++d)
      out[s.ids[r] * p.shape[1] + d] = s.rows[r * size_t(p.shape[1]) + size_t(d)];
  return out;
}

// Every parameter's gradient (sparse ones too) against finite differences.
void check_whole_graph(const model_spec& spec, int n) {
  graph_model model(spec, reference_ops());
  auto values = model.initial_values(4);
  for (size_t i = 0; i < values.size(); ++i)
    if (model.parameters()[i].init == initializer::kind::zeros)
      for (auto& v : values[i]) v = 0.05f;  // non-zero biases
  std::vector<const float*> params;
  std::vector<buffer> grads;
  std::vector<float*> ptrs;
  for (auto& v : values) {
    params.push_back(v.data());
    grads.emplace_back(int64_t(v.size()));
  }
  for (auto& g : grads) ptrs.push_back(g.data());
  auto data = batch_for(model, n, 3);
  const batch_view view{n, data.x.data(), data.labels.data()};
  model.train_step(view, params, ptrs);
  auto loss = [&] { return double(model.evaluate(view, params).loss); };
  for (size_t i = 0; i < values.size(); ++i) {
    auto& p = model.parameters()[i];
    auto grad = p.sparse ? dense_of(model.sparse_gradient(i), p) : std::move(grads[i]);
    check_gradient(values[i], grad, loss, p.name, 1e-3, 1e-2, 0.25);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_spec_is_plain_structs_and_names_its_parameters) {
  auto spec = two_inputs();
  BOOST_TEST(!spec.check());
  graph_model model(spec, reference_ops());
  BOOST_TEST(model.input_size() == 8);
  std::vector<std::string> names;
  for (auto& p : model.parameters()) names.push_back(p.name);
  BOOST_TEST(
      (names == std::vector<std::string>{"deep/kernel", "deep/bias", "cat/embeddings", "logit/kernel", "logit/bias"}));
  BOOST_TEST((model.parameters()[3].shape == std::vector<int64_t>{10, 1}));
  BOOST_TEST(model.parameters()[2].sparse);
  const std::vector<float> x{0.5f, 1, 2, 3, 4, 7, -1, 11, /* example 2 */ 0, 0, 0, 0, 0, 2, 2, 0};
  std::vector<std::vector<int64_t>> ids;
  model.lookups(x.data(), 2, ids);
  BOOST_REQUIRE(ids.size() == 5u);
  BOOST_TEST((ids[2] == std::vector<int64_t>{7, -1, 11, 2, 2, 0}));
  BOOST_TEST(ids[0].empty());
}

BOOST_AUTO_TEST_CASE(two_input_graph_gradients_match_finite_differences) { check_whole_graph(two_inputs(), 4); }

BOOST_AUTO_TEST_CASE(diamond_gradients_add_up_where_a_node_feeds_several) {
  check_whole_graph(diamond(), 3);
  // One node read twice by one add: logits = 2h, h's gradient counted twice.
  model_spec twice;
  twice.inputs = {{"x", {4}}};
  twice.layers = {node(layer_kind::dense, "h", {"x"}, 3), node(layer_kind::add, "sum", {"h", "h"})};
  check_whole_graph(twice, 3);
}

BOOST_AUTO_TEST_CASE(fast_tables_run_graphs_like_the_reference) {
  for (auto* ops : fast_tables()) {
    if (ops->where != device::host) continue;  // device copies: tests/test_devices.cpp
    for (const auto& spec : {two_inputs(), diamond()}) {
      graph_model ref(spec, reference_ops()), fast(spec, *ops);
      host_parameters a(ref.initial_values(2)), b(ref.initial_values(2));
      auto data = batch_for(ref, 5, 7);
      auto r1 = ref.train_step({5, data.x.data(), data.labels.data()}, a.params, a.grad_ptrs);
      auto r2 = fast.train_step({5, data.x.data(), data.labels.data()}, b.params, b.grad_ptrs);
      BOOST_TEST(r1.loss == r2.loss, boost::test_tools::tolerance(1e-5f));
      for (size_t i = 0; i < a.grads.size(); ++i) {
        if (ref.parameters()[i].sparse) continue;
        for (size_t k = 0; k < a.grads[i].size(); ++k)
          BOOST_TEST(a.grads[i][k] == b.grads[i][k], boost::test_tools::tolerance(2e-4f));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(check_names_the_node_and_both_shapes) {
  auto message = [](const model_spec& m) { return m.check().value_or(spec_error{}).message(); };
  auto m = two_inputs();
  m.layers[2].inputs = {"deep", "wide"};
  BOOST_TEST(message(m) == "layer 2 (both): unknown input 'wide' (not a model input or node)");
  m = two_inputs();
  m.layers[0].inputs = {"logit"};
  BOOST_TEST(message(m) == "layer 0 (deep): a cycle (each reads the next): deep -> logit -> both -> deep");
  m = two_inputs();
  m.layers[2].kind = layer_kind::add;
  BOOST_TEST(message(m) == "layer 2 (both): add needs inputs of one shape, got [6] and [4]");
  m = two_inputs();
  m.layers[1].inputs = {"numeric"};
  BOOST_TEST(message(m) == "layer 1 (cat): embedding needs an ids input, got floats from 'numeric'");
  m = two_inputs();
  m.layers[2].inputs = {"deep"};
  BOOST_TEST(message(m) == "layer 2 (both): concat takes 2 to 64 inputs, got 1");
  m = two_inputs();
  m.layers[3].inputs = {"deep"};
  BOOST_TEST(message(m) == "layer 2 (both): its output goes nowhere (the last node gives the logits)");
  m = two_inputs();
  m.layers[1].name = "deep";
  BOOST_TEST(message(m) == "layer 1 (deep): the name 'deep' is taken by an input or an earlier node");
  m = two_inputs();
  m.inputs[1].shape = {3, 2};
  BOOST_TEST(message(m) == "input 'categorical': ids need a shape [count], got [3, 2]");
  m = two_inputs();
  m.layers.back().units = 2;
  BOOST_TEST(message(m) == "loss sigmoid_bce needs a last layer of 1 unit, got 2");
  BOOST_CHECK_THROW(graph_model(m, reference_ops()), std::invalid_argument);
}
