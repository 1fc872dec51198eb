// The batchnorm node in a graph: forward and backward against the
// reference ops, finite differences and the fast tables (CUDA where a GPU
// is), its moving statistics after steps in this process against PyTorch's
// running averages worked out here, evaluate on the moving statistics, TOML
// and the wire, and how a PS shard applies a non-trainable variable's
// deltas (value += delta, no slots).
#define BOOST_TEST_MODULE batchnorm_graph
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

#include "actors/shard/shard_core.hpp"
#include "actors/variables/ps_client.hpp"
#include "actors/variables/wire_forms.hpp"
#include "config/model_config.hpp"
#include "kernels/model.hpp"
#include "kernels/tensor.hpp"
#include "tests/kernel_check.hpp"

using namespace actorps;
using namespace actorps::kernels;
using namespace actorps::kernels::test;

namespace {

layer_spec bn_node(std::string name, float momentum = 0.1f) {
  layer_spec l;
  l.kind = layer_kind::batchnorm;
  l.name = std::move(name);
  l.momentum = momentum;
  return l;
}

// x [4] -> batchnorm "bn": the normalized features are the logits of 4 classes.
model_spec bn_logits(float momentum) {
  model_spec m;
  m.inputs = {{"x", {4}}};
  m.layers = {bn_node("bn", momentum)};
  return m;
}

// [4, 4, 2] -> conv2d(3, 2x2) -> batchnorm, relu -> flatten -> dense(3).
model_spec conv_bn() {
  model_spec m;
  m.height = 4, m.width = 4, m.channels = 2;
  layer_spec conv{layer_kind::conv2d, 3, 2};
  auto bn = bn_node("");
  bn.act = activation::relu;
  m.layers = {conv, bn, {layer_kind::flatten}, {layer_kind::dense, 3}};
  return m;
}

std::vector<int32_t> labels_for(int n, int classes) {
  std::vector<int32_t> out;
  for (int e = 0; e < n; ++e) out.push_back(e % classes);
  return out;
}

// Per feature of x[rows, c]: the batch mean and the unbiased variance, in double.
std::pair<std::vector<double>, std::vector<double>> batch_statistics(const std::vector<float>& x, int rows, int c) {
  std::vector<double> mean(size_t(c), 0.0), var(size_t(c), 0.0);
  for (int j = 0; j < c; ++j) {
    for (int i = 0; i < rows; ++i) mean[size_t(j)] += x[size_t(i * c + j)] / double(rows);
    for (int i = 0; i < rows; ++i) var[size_t(j)] += std::pow(x[size_t(i * c + j)] - mean[size_t(j)], 2);
    var[size_t(j)] /= double(rows - 1);
  }
  return {mean, var};
}

}  // namespace

BOOST_AUTO_TEST_CASE(parameters_are_gamma_beta_and_two_moving_statistics_that_are_not_trained) {
  graph_model model(conv_bn(), reference_ops());
  std::vector<std::string> names;
  for (auto& p : model.parameters()) names.push_back(p.name);
  BOOST_TEST((names == std::vector<std::string>{"conv2d_0/kernel", "conv2d_0/bias", "batchnorm_0/gamma",
                                                "batchnorm_0/beta", "batchnorm_0/moving_mean",
                                                "batchnorm_0/moving_variance", "dense_0/kernel", "dense_0/bias"}));
  auto& p = model.parameters();
  for (size_t i = 2; i < 6; ++i) BOOST_TEST((p[i].shape == std::vector<int64_t>{3}), p[i].name);
  BOOST_TEST(p[2].trainable);
  BOOST_TEST(p[3].trainable);
  BOOST_TEST(!p[4].trainable);
  BOOST_TEST(!p[5].trainable);
  auto values = model.initial_values(7);
  BOOST_TEST((values[2] == std::vector<float>{1, 1, 1}));  // gamma: ones
  BOOST_TEST((values[3] == std::vector<float>{0, 0, 0}));  // beta
  BOOST_TEST((values[4] == std::vector<float>{0, 0, 0}));  // moving_mean
  BOOST_TEST((values[5] == std::vector<float>{1, 1, 1}));  // moving_variance
  BOOST_TEST((optimizer_of(p[2], optimizer_kind::adam) == optimizer_kind::adam));
  BOOST_TEST((optimizer_of(p[4], optimizer_kind::adam) == optimizer_kind::accumulate));
}

BOOST_AUTO_TEST_CASE(train_step_and_evaluate_match_the_reference_ops) {
  const int n = 6, c = 4;
  const float momentum = 0.3f;
  graph_model model(bn_logits(momentum), reference_ops());
  auto values = model.initial_values(1);
  values[0] = {1.5f, 0.5f, -1.0f, 2.0f};  // gamma
  values[1] = {0.1f, -0.2f, 0.3f, 0.0f};  // beta
  values[2] = {0.2f, -0.1f, 0.0f, 0.5f};  // moving_mean
  values[3] = {0.8f, 1.2f, 2.0f, 0.5f};   // moving_variance
  host_parameters p(values);
  auto x = random_vector(n * c, 5, 2.0f);
  auto labels = labels_for(n, c);
  const batch_view view{n, x.data(), labels.data()};
  auto trained = model.train_step(view, p.params, p.grad_ptrs);

  const float eps = 1e-5f;
  std::vector<float> y(x.size()), mean(c), inv_std(c), dy(x.size()), dx(x.size()), dgamma(c), dbeta(c);
  auto& ref = reference_ops();
  ref.batchnorm_forward_training(n, c, eps, x.data(), values[0].data(), values[1].data(), y.data(), mean.data(),
                                 inv_std.data());
  int64_t correct = 0;
  const float loss = ref.softmax_xent(n, c, y.data(), labels.data(), dy.data(), &correct);
  ref.batchnorm_backward(n, c, x.data(), values[0].data(), mean.data(), inv_std.data(), dy.data(), dx.data(),
                         dgamma.data(), dbeta.data());
  BOOST_TEST(trained.loss == loss, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(trained.correct == correct);
  check_close(buffer(p.grads[0]), buffer(dgamma), 1e-5);
  check_close(buffer(p.grads[1]), buffer(dbeta), 1e-5);
  // The moving statistics' "gradients": the deltas PyTorch's update adds.
  auto [batch_mean, batch_var] = batch_statistics(x, n, c);
  for (int j = 0; j < c; ++j) {
    BOOST_TEST(p.grads[2][size_t(j)] == momentum * (batch_mean[size_t(j)] - values[2][size_t(j)]),
               boost::test_tools::tolerance(1e-4));
    BOOST_TEST(p.grads[3][size_t(j)] == momentum * (batch_var[size_t(j)] - values[3][size_t(j)]),
               boost::test_tools::tolerance(1e-4));
  }

  // evaluate normalizes with the moving statistics, not the batch's.
  ref.batchnorm_forward_inference(n, c, eps, x.data(), values[0].data(), values[1].data(), values[2].data(),
                                  values[3].data(), y.data());
  const float inference_loss = ref.softmax_xent(n, c, y.data(), labels.data(), dy.data(), &correct);
  auto evaluated = model.evaluate(view, p.params);
  BOOST_TEST(evaluated.loss == inference_loss, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(std::abs(evaluated.loss - trained.loss) > 0.05f);
}

BOOST_AUTO_TEST_CASE(gradients_through_a_conv_batchnorm_graph_match_finite_differences) {
  const int n = 5;
  graph_model model(conv_bn(), reference_ops());
  auto values = model.initial_values(3);
  for (auto& v : values[3]) v = 0.2f;  // beta: relu sees both signs
  values[2] = {1.2f, 0.7f, -0.9f};     // gamma
  host_parameters p(values);
  auto x = random_vector(n * model.input_size(), 9);
  auto labels = labels_for(n, 3);
  const batch_view view{n, x.data(), labels.data()};
  model.train_step(view, p.params, p.grad_ptrs);
  std::vector<std::vector<float>> scratch_grads;
  for (auto& v : p.values) scratch_grads.emplace_back(v.size());
  std::vector<float*> scratch;
  for (auto& g : scratch_grads) scratch.push_back(g.data());
  // The training loss (batch statistics): what the gradients are of.
  auto loss = [&] { return double(model.train_step(view, p.params, scratch).loss); };
  for (size_t i = 0; i < p.values.size(); ++i) {
    auto& info = model.parameters()[i];
    if (!info.trainable) continue;  // the moving statistics' deltas are no gradient
    buffer grad(p.grads[i]);
    check_gradient(p.values[i], grad, loss, info.name, 1e-3, 1e-2, 0.25);
  }
}

BOOST_AUTO_TEST_CASE(fast_tables_train_and_evaluate_like_the_reference) {
  const int n = 6;
  for (auto* ops : fast_tables()) {
    BOOST_TEST_CONTEXT(ops->name) {
      graph_model ref(conv_bn(), reference_ops()), fast(conv_bn(), *ops);
      auto values = ref.initial_values(4);
      values[5] = {0.5f, 2.0f, 1.5f};  // moving_variance
      host_parameters a(values);
      auto x = random_vector(n * ref.input_size(), 12);
      auto labels = labels_for(n, 3);
      // The fast table's inputs, parameters and gradients live on its device.
      tensor dx({int64_t(x.size())}, ops->where);
      dx.copy_from_host(x.data(), dx.size());
      int_tensor dlabels({n}, ops->where);
      dlabels.copy_from_host(labels.data(), n);
      std::vector<tensor> params, grads;
      std::vector<const float*> param_ptrs;
      std::vector<float*> grad_ptrs;
      for (auto& v : values) {
        params.emplace_back(std::vector<int64_t>{int64_t(v.size())}, ops->where);
        params.back().copy_from_host(v.data(), int64_t(v.size()));
        param_ptrs.push_back(params.back().data());
        grads.emplace_back(std::vector<int64_t>{int64_t(v.size())}, ops->where);
        grad_ptrs.push_back(grads.back().data());
      }
      auto r1 = ref.train_step({n, x.data(), labels.data()}, a.params, a.grad_ptrs);
      auto r2 = fast.train_step({n, dx.data(), dlabels.data()}, param_ptrs, grad_ptrs);
      BOOST_TEST(r1.loss == r2.loss, boost::test_tools::tolerance(1e-5f));
      for (size_t i = 0; i < values.size(); ++i) {
        buffer got(int64_t(values[i].size()));
        grads[i].copy_to_host(got.data(), got.size());
        BOOST_TEST_CONTEXT(ref.parameters()[i].name) { check_close(got, buffer(a.grads[i]), 2e-4); }
      }
      auto e1 = ref.evaluate({n, x.data(), labels.data()}, a.params);
      auto e2 = fast.evaluate({n, dx.data(), dlabels.data()}, param_ptrs);
      BOOST_TEST(e1.loss == e2.loss, boost::test_tools::tolerance(1e-5f));
    }
  }
}

BOOST_AUTO_TEST_CASE(moving_statistics_after_steps_are_pytorchs_running_averages) {
  // x [3] -> batchnorm -> dense(2): the batchnorm reads the data itself, so
  // its batch statistics are the data's, whatever the steps train.
  const int n = 5, c = 3, steps = 4;
  const float momentum = 0.2f;
  model_spec m;
  m.inputs = {{"x", {c}}};
  m.layers = {bn_node("bn", momentum), {layer_kind::dense, 2}};
  m.layers[1].name = "out";
  graph_model model(m, reference_ops());
  host_parameters p(model.initial_values(2));
  optimizer_params sgd;
  sgd.lr = 0.1f;
  std::vector<double> running_mean(c, 0.0), running_var(c, 1.0);
  auto labels = labels_for(n, 2);
  std::vector<float> x;
  for (int s = 0; s < steps; ++s) {
    x = random_vector(n * c, 20 + unsigned(s), 1.0f + float(s));
    for (auto& v : x) v += float(s);  // a mean that moves
    model.train_step({n, x.data(), labels.data()}, p.params, p.grad_ptrs);
    for (size_t i = 0; i < p.values.size(); ++i)  // as a PS shard applies them
      cpu_ops().apply_dense(optimizer_of(model.parameters()[i], optimizer_kind::sgd), sgd, int64_t(p.values[i].size()),
                            p.value_ptrs[i], nullptr, p.grad_views[i]);
    auto [mean, var] = batch_statistics(x, n, c);
    for (int j = 0; j < c; ++j) {
      running_mean[size_t(j)] = (1 - momentum) * running_mean[size_t(j)] + momentum * mean[size_t(j)];
      running_var[size_t(j)] = (1 - momentum) * running_var[size_t(j)] + momentum * var[size_t(j)];
    }
  }
  for (int j = 0; j < c; ++j) {
    BOOST_TEST(p.values[2][size_t(j)] == running_mean[size_t(j)], boost::test_tools::tolerance(1e-5));
    BOOST_TEST(p.values[3][size_t(j)] == running_var[size_t(j)], boost::test_tools::tolerance(1e-5));
  }
  BOOST_TEST(p.values[0][0] != 1.0f);  // gamma trained

  // evaluate on the last batch: its features normalized by the moving
  // statistics, not by the batch's (a different loss).
  std::vector<float> y(x.size()), logits(size_t(n) * 2), dlogits(logits.size());
  auto& ref = reference_ops();
  ref.batchnorm_forward_inference(n, c, 1e-5f, x.data(), p.values[0].data(), p.values[1].data(), p.values[2].data(),
                                  p.values[3].data(), y.data());
  ref.dense_forward(n, c, 2, y.data(), p.values[4].data(), p.values[5].data(), logits.data());
  int64_t correct = 0;
  const float want = ref.softmax_xent(n, 2, logits.data(), labels.data(), dlogits.data(), &correct);
  const batch_view view{n, x.data(), labels.data()};
  auto evaluated = model.evaluate(view, p.params);
  BOOST_TEST(evaluated.loss == want, boost::test_tools::tolerance(1e-5f));
  auto trained = model.train_step(view, p.params, p.grad_ptrs);
  BOOST_TEST(std::abs(evaluated.loss - trained.loss) > 1e-3f);
}

BOOST_AUTO_TEST_CASE(one_value_per_channel_leaves_the_moving_statistics_as_they_are) {
  graph_model model(bn_logits(0.5f), reference_ops());
  host_parameters p(model.initial_values(1));
  std::vector<float> x{1, 2, 3, 4};
  std::vector<int32_t> label{0};
  model.train_step({1, x.data(), label.data()}, p.params, p.grad_ptrs);
  BOOST_TEST((p.grads[2] == std::vector<float>{0, 0, 0, 0}));
  BOOST_TEST((p.grads[3] == std::vector<float>{0, 0, 0, 0}));
}

BOOST_AUTO_TEST_CASE(toml_reads_momentum_and_epsilon_and_names_a_bad_value) {
  const std::string head = "[model]\ninput = [4, 4, 2]\n[[model.layers]]\ntype = \"conv2d\"\nfilters = 3\nkernel = 2\n";
  const std::string tail = "[[model.layers]]\ntype = \"flatten\"\n[[model.layers]]\ntype = \"dense\"\nunits = 3\n";
  auto parse = [&](const std::string& bn) { return parse_model_toml(head + bn + tail, "bn.toml"); };
  auto m = parse(
      "[[model.layers]]\ntype = \"batchnorm\"\nname = \"bn\"\nmomentum = 0.05\nepsilon = 0.001\nactivation = "
      "\"relu\"\n");
  BOOST_REQUIRE_MESSAGE(m, (m ? "" : describe(m.error())));
  auto& l = m->layers[1];
  BOOST_TEST(int(l.kind) == 30);
  BOOST_TEST(l.name == "bn");
  BOOST_TEST(l.momentum == 0.05f);
  BOOST_TEST(l.epsilon == 0.001f);
  BOOST_TEST((l.act == activation::relu));
  auto defaults = parse("[[model.layers]]\ntype = \"batchnorm\"\n");
  BOOST_REQUIRE(defaults);
  BOOST_TEST(defaults->layers[1].momentum == 0.1f);
  BOOST_TEST(defaults->layers[1].epsilon == 1e-5f);
  BOOST_TEST(model_json_text(*m).find("\"type\":\"batchnorm\"") != std::string::npos);

  auto fails_with = [&](const std::string& bn, const std::string& what) {
    auto bad = parse("[[model.layers]]\ntype = \"batchnorm\"\n" + bn);
    BOOST_REQUIRE(!bad);
    BOOST_TEST(describe(bad.error()).find(what) != std::string::npos, describe(bad.error()));
  };
  fails_with("momentum = 1.5\n", "model.layers[1].momentum: expected a number in [0, 1], got 1.5");
  fails_with("epsilon = 0\n", "model.layers[1].epsilon: expected a number in (0, 1]");
  fails_with("epsilon = \"small\"\n", "model.layers[1].epsilon: expected a number");
  fails_with("units = 3\n", "model.layers[1].units: unknown key");
  // A spec built in code is checked too.
  auto spec = bn_logits(-0.5f);
  auto why = spec.check();
  BOOST_REQUIRE(why);
  BOOST_TEST(why->message().find("layer 0 (bn): batchnorm needs momentum in [0, 1]") != std::string::npos,
             why->message());
}

BOOST_AUTO_TEST_CASE(a_batchnorm_crosses_the_wire_whole) {
  auto m = conv_bn();
  m.layers[1].momentum = 0.25f;
  m.layers[1].epsilon = 1e-3f;
  auto wire = train::to_proto(m);
  BOOST_TEST(int(wire.layers(1).kind()) == 30);
  BOOST_TEST(wire.layers(1).kind() == pb::LayerSpec::BATCHNORM);
  pb::ModelSpec parsed;
  BOOST_REQUIRE(parsed.ParseFromString(wire.SerializeAsString()));
  auto back = train::from_proto(parsed);
  BOOST_TEST(int(back.layers[1].kind) == int(layer_kind::batchnorm));
  BOOST_TEST(back.layers[1].momentum == 0.25f);
  BOOST_TEST(back.layers[1].epsilon == 1e-3f);
  BOOST_TEST((back.layers[1].act == activation::relu));
  BOOST_TEST(!back.check());
}

BOOST_AUTO_TEST_CASE(moving_statistics_become_accumulating_variables_without_slots) {
  graph_model model(conv_bn(), reference_ops());
  pb::Optimizer adam;
  adam.set_kind(pb::Optimizer::ADAM);
  adam.set_learning_rate(0.01f);
  auto vars = model_variables(model.parameters(), 2, {}, 7, adam);
  BOOST_REQUIRE(vars.size() == 8u);
  BOOST_TEST(vars[2].optimizer.kind() == pb::Optimizer::ADAM);  // gamma
  BOOST_TEST(vars[2].slot_count() == 2u);
  BOOST_TEST(vars[2].initializer.kind() == pb::Initializer::CONSTANT);
  BOOST_TEST(vars[2].initializer.value() == 1.0f);
  for (size_t i : {4, 5}) {
    BOOST_TEST(vars[i].optimizer.kind() == pb::Optimizer::ACCUMULATE, vars[i].name);
    BOOST_TEST(vars[i].slot_count() == 0u, vars[i].name);
  }
  BOOST_TEST(vars[5].initializer.value() == 1.0f);
}

namespace {

pb::VariableSpec accumulating(const std::string& name) {
  pb::VariableSpec v;
  v.set_name(name);
  v.set_dtype(pb::FLOAT32);
  v.add_shape(2), v.add_full_shape(2);
  v.mutable_initializer()->set_kind(pb::Initializer::CONSTANT);
  v.mutable_initializer()->set_value(1.0f);
  v.mutable_optimizer()->set_kind(pb::Optimizer::ACCUMULATE);
  v.mutable_optimizer()->set_learning_rate(0.5f);  // the job's: not applied
  return v;
}

pb::Push delta(uint32_t worker, int64_t step, std::vector<float> d) {
  pb::Push p;
  p.set_worker(worker);
  p.set_step(step);
  auto* g = p.add_gradients();
  g->set_name("mv");
  g->set_dtype(pb::FLOAT32);
  g->set_count(int64_t(d.size()));
  g->set_data(reinterpret_cast<const char*>(d.data()), d.size() * 4);
  return p;
}

std::vector<float> value_of(shard_core& core, uint32_t slot = 0) {
  pb::Pull pull;
  pull.add_names("mv");
  pull.set_slot(slot);
  auto got = core.read(pull);
  if (!got) return {};
  std::vector<float> out(2);
  std::memcpy(out.data(), got->tensors(0).data().data(), 8);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_shard_adds_a_non_trainable_variables_deltas) {
  pb::CreateVariables create;
  *create.add_variables() = accumulating("mv");
  pb::Consistency async;
  shard_core a(0, async, 0);
  BOOST_REQUIRE(a.create(create));
  for (auto& push : {delta(0, 0, {0.5f, -0.25f}), delta(1, 0, {0.25f, 1.0f})}) {
    BOOST_REQUIRE(!a.check(push));
    a.apply(push);
  }
  BOOST_TEST((value_of(a) == std::vector<float>{1.75f, 1.75f}));  // 1 + both deltas, no learning rate
  pb::Pull slot;
  slot.add_names("mv");
  slot.set_slot(1);
  BOOST_TEST(!a.read(slot));  // no optimizer slots

  pb::Consistency sync;
  sync.set_mode(pb::Consistency::SYNC);
  sync.set_replicas_to_aggregate(2);
  sync.set_num_workers(2);
  shard_core s(0, sync, 0);
  BOOST_REQUIRE(s.create(create));
  for (auto& push : {delta(0, 0, {0.5f, -0.25f}), delta(1, 0, {0.25f, 1.0f})}) {
    BOOST_REQUIRE(!s.check(push));
    s.apply(push);
  }
  BOOST_TEST(s.advance());
  BOOST_TEST((value_of(s) == std::vector<float>{1.375f, 1.375f}));  // 1 + the mean delta
}
