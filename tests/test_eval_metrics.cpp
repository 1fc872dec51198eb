// A binary model's evaluation metrics end to end in one process: the
// model hands out its logits (kernels/model.hpp, device_model.hpp), the
// workers' parts cross the wire as pb::ScoredLabels
// (actors/variables/wire_forms.hpp) and merge into the whole set's exact
// AUC and log loss (actors/training/evaluation.hpp), which the epoch line,
// metrics.csv, the TensorBoard events and the job report carry.
#define BOOST_TEST_MODULE eval_metrics
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "actors/launch/local_host.hpp"
#include "actors/training/callbacks.hpp"
#include "actors/training/job_report.hpp"
#include "actors/variables/wire_forms.hpp"
#include "kernels/device_memory.hpp"
#include "kernels/device_model.hpp"
#include "messages/closure_values.hpp"
#include "messages/errors.hpp"

using namespace actorps;
using namespace actorps::train;

namespace {

// numeric [3] -> dense(4, relu) -> dense(1) (or dense(3), softmax).
kernels::model_spec small_model(bool binary) {
  kernels::model_spec m;
  m.inputs = {{"numeric", {3}}};
  m.layers.push_back({});
  m.layers.back().units = 4;
  m.layers.back().act = kernels::activation::relu;
  m.layers.push_back({});
  m.layers.back().units = binary ? 1 : 3;
  m.loss = binary ? kernels::loss_kind::sigmoid_bce : kernels::loss_kind::softmax_xent;
  return m;
}

struct examples {
  std::vector<float> x;
  std::vector<int32_t> labels;
  kernels::batch_view view() const { return {int(labels.size()), x.data(), labels.data()}; }
};

examples draw(int n, int classes, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  examples e;
  for (int i = 0; i < 3 * n; ++i) e.x.push_back(u(gen));
  for (int i = 0; i < n; ++i) e.labels.push_back(int32_t(gen() % unsigned(classes)));
  return e;
}

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

// One eval_step result as a worker sends it: its batches' sums and, when
// `scored`, their logits and labels appended batch by batch.
values closure_result(const std::vector<float>& logits, const std::vector<int32_t>& labels, bool scored = true) {
  double loss_sum = 0;
  int64_t correct = 0;
  pb::ScoredLabels part;
  for (size_t begin = 0; begin < labels.size(); begin += 7) {  // batches of 7
    const int n = int(std::min<size_t>(7, labels.size() - begin));
    append_scored(part, logits.data() + begin, labels.data() + begin, n);
    for (size_t i = begin; i < begin + size_t(n); ++i) {
      loss_sum -= labels[i] == 1 ? std::log(sigmoid(logits[i])) : std::log1p(-sigmoid(logits[i]));
      correct += (logits[i] > 0) == (labels[i] == 1);
    }
  }
  values v{real_value(loss_sum), integer_value(correct), integer_value(int64_t(labels.size()))};
  if (scored) v.push_back(bytes_value(part.SerializeAsString()));
  return v;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

epoch_logs logs_of(uint32_t epoch, std::optional<evaluation> test) {
  epoch_logs l;
  l.epoch = epoch;
  l.step = 10 * epoch;
  l.seconds = 1.5;
  l.train_loss = 0.5;
  l.train_accuracy = 0.75;
  l.train_examples = 300;
  l.test = test;
  return l;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_binary_model_hands_out_the_logits_its_loss_and_accuracy_come_from) {
  kernels::graph_model model(small_model(true), kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(5));
  const auto e = draw(50, 2, 1);
  std::vector<float> logits(51, 99.0f);  // one guard past the end
  const auto r = model.evaluate(e.view(), p.params, logits.data());
  BOOST_TEST(logits[50] == 99.0f);  // nothing written past the batch
  double loss = 0;
  int64_t correct = 0;
  for (size_t i = 0; i < 50; ++i) {
    loss -= e.labels[i] == 1 ? std::log(sigmoid(logits[i])) : std::log1p(-sigmoid(logits[i]));
    correct += (logits[i] > 0) == (e.labels[i] == 1);
  }
  BOOST_TEST(r.loss == loss / 50, boost::test_tools::tolerance(1e-5));
  BOOST_TEST(r.correct == correct);
  // The same forward without logits: the same result.
  const auto again = model.evaluate(e.view(), p.params);
  BOOST_TEST(again.loss == r.loss);
  // Two devices (CPU ones standing in for GPUs) give each its rows' logits,
  // and a GPU, where one is visible, copies them back to the host.
  std::vector<std::vector<kernels::compute_device>> device_sets{
      {kernels::compute_device::cpu(0), kernels::compute_device::cpu(1)}};
  if (kernels::cuda_device_count() > 0) device_sets.push_back({kernels::compute_device::cuda(0)});
  for (auto& devices : device_sets) {
    kernels::device_model split(small_model(true), devices);
    std::vector<float> parts(50);
    split.evaluate(e.view(), p.params, parts.data());
    for (size_t i = 0; i < 50; ++i) BOOST_TEST(parts[i] == logits[i], boost::test_tools::tolerance(1e-4f));
  }
}

BOOST_AUTO_TEST_CASE(a_softmax_model_hands_out_every_classes_logits) {
  kernels::graph_model model(small_model(false), kernels::cpu_ops());
  kernels::host_parameters p(model.initial_values(2));
  const auto e = draw(20, 3, 4);
  std::vector<float> logits(60);
  const auto r = model.evaluate(e.view(), p.params, logits.data());
  int64_t correct = 0;
  for (size_t i = 0; i < 20; ++i) {
    const auto* row = logits.data() + 3 * i;
    correct += int32_t(std::max_element(row, row + 3) - row) == e.labels[i];
  }
  BOOST_TEST(r.correct == correct);
}

BOOST_AUTO_TEST_CASE(merged_closure_parts_give_the_whole_sets_exact_auc_and_log_loss) {
  // Three closures' parts, coarse logits so that ties cross the parts.
  std::mt19937 gen(7);
  std::vector<float> all_logits;
  std::vector<int32_t> all_labels;
  eval_totals totals;
  std::vector<double> part_aucs;
  for (int part = 0; part < 3; ++part) {
    std::vector<float> logits;
    std::vector<int32_t> labels;
    for (int i = 0; i < 40 + 13 * part; ++i) {
      const int32_t y = int32_t(gen() % 3 == 0);
      labels.push_back(y);
      logits.push_back(float(int(gen() % 9) - 5 + 2 * y) / 2);
    }
    BOOST_REQUIRE(!totals.add_part(closure_result(logits, labels)));
    part_aucs.push_back(kernels::roc_auc({logits.begin(), logits.end()}, labels));
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    all_labels.insert(all_labels.end(), labels.begin(), labels.end());
  }
  auto eval = totals.result();
  BOOST_REQUIRE_MESSAGE(eval, (eval ? "" : describe(eval.error())));
  BOOST_REQUIRE(eval->auc && eval->log_loss);
  const std::vector<double> scores(all_logits.begin(), all_logits.end());
  const double whole_auc = kernels::roc_auc(scores, all_labels);
  BOOST_TEST(*eval->auc == whole_auc);
  std::vector<double> probabilities;
  for (double z : scores) probabilities.push_back(sigmoid(z));
  BOOST_TEST(*eval->log_loss == kernels::log_loss(probabilities, all_labels), boost::test_tools::tolerance(1e-12));
  // Loss and accuracy as before: the parts' sums over all examples.
  BOOST_TEST(eval->examples == int64_t(all_labels.size()));
  BOOST_TEST(eval->loss == *eval->log_loss, boost::test_tools::tolerance(1e-9));  // no logit near the clipping
  int64_t correct = 0;
  for (size_t i = 0; i < scores.size(); ++i) correct += (scores[i] > 0) == (all_labels[i] == 1);
  BOOST_TEST(eval->accuracy == double(correct) / double(all_labels.size()));
  // Averaging the parts' AUCs would not give it.
  BOOST_TEST((part_aucs[0] + part_aucs[1] + part_aucs[2]) / 3 != whole_auc);
  BOOST_TEST((whole_auc > 0.5 && whole_auc < 1.0));
}

BOOST_AUTO_TEST_CASE(a_softmax_jobs_parts_have_no_auc) {
  eval_totals totals;
  BOOST_REQUIRE(!totals.add_part(values{real_value(3.0), integer_value(4), integer_value(6)}));
  auto eval = totals.result();
  BOOST_REQUIRE(eval);
  BOOST_TEST(eval->loss == 0.5);
  BOOST_TEST(eval->accuracy == 4.0 / 6);
  BOOST_TEST(!eval->auc);
  BOOST_TEST(!eval->log_loss);
  BOOST_TEST(describe(eval_totals{}.result().error()).find("the eval dataset is empty") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_parts_say_what_is_wrong) {
  auto fails_with = [](const values& part, const std::string& what) {
    eval_totals totals;
    auto err = totals.add_part(part);
    BOOST_TEST_REQUIRE(bool(err), "accepted a part that should fail with: " << what);
    BOOST_TEST(describe(err).find(what) != std::string::npos, describe(err));
  };
  const std::vector<float> logits{0.5f, -1};
  fails_with(closure_result(logits, {1, 2}), "label 1 is 2, expected 0 or 1");
  auto short_logits = closure_result(logits, {1, 0});
  pb::ScoredLabels part;
  part.set_logits(std::string(7, '\0'));
  part.set_labels(std::string(2, '\0'));
  short_logits[3] = bytes_value(part.SerializeAsString());
  fails_with(short_logits, "7 bytes of logits for 2 labels");
  fails_with(values{real_value(1)}, "an eval_step result of 1 values");
  auto not_scored = closure_result(logits, {1, 0});
  not_scored[3] = integer_value(3);
  fails_with(not_scored, "4th value is not a serialized ScoredLabels");
  // One part with its logits and one without: not an AUC of the whole set.
  eval_totals mixed;
  BOOST_REQUIRE(!mixed.add_part(closure_result(logits, {1, 0})));
  BOOST_REQUIRE(!mixed.add_part(closure_result(logits, {1, 0}, false)));
  auto eval = mixed.result();
  BOOST_REQUIRE(!eval);
  BOOST_TEST(describe(eval.error()).find("2 of 4 eval examples came with their logits") != std::string::npos,
             describe(eval.error()));
}

BOOST_AUTO_TEST_CASE(the_epoch_line_csv_and_events_carry_auc_and_log_loss_for_binary_jobs) {
  const std::string dir = make_temp_dir("test");
  auto log = metrics_log::open(dir);
  BOOST_REQUIRE_MESSAGE(log, (log ? "" : describe(log.error())));
  evaluation binary{0.45, 0.8, 200, 0.8123, 0.4567};
  evaluation softmax{0.3, 0.9, 200, std::nullopt, std::nullopt};
  BOOST_REQUIRE(!log->append(logs_of(1, binary)));
  BOOST_REQUIRE(!log->append(logs_of(2, softmax)));
  BOOST_REQUIRE(!log->append(logs_of(3, std::nullopt)));
  const auto rows = lines_of(dir + "/metrics.csv");
  BOOST_REQUIRE(rows.size() == 4u);
  BOOST_TEST(rows[0] == "epoch,step,seconds,train_loss,train_accuracy,test_loss,test_accuracy,test_auc,test_log_loss");
  BOOST_TEST(rows[1] == "1,10,1.500,0.500000,0.750000,0.450000,0.800000,0.812300,0.456700");
  BOOST_TEST(rows[2] == "2,20,1.500,0.500000,0.750000,0.300000,0.900000,,");
  BOOST_TEST(rows[3] == "3,30,1.500,0.500000,0.750000,,,,");
  std::string events;
  for (auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) events = entry.path().string();
  auto points = read_scalars(events);
  BOOST_REQUIRE_MESSAGE(points, (points ? "" : describe(points.error())));
  std::map<std::string, std::vector<int64_t>> steps_of;
  for (auto& p : *points) steps_of[p.tag].push_back(p.step);
  BOOST_TEST(steps_of["test/auc"] == std::vector<int64_t>{10}, boost::test_tools::per_element());
  BOOST_TEST(steps_of["test/log_loss"] == std::vector<int64_t>{10}, boost::test_tools::per_element());
  BOOST_TEST(steps_of["test/accuracy"] == (std::vector<int64_t>{10, 20}), boost::test_tools::per_element());
  BOOST_TEST(steps_of["train/loss"].size() == 3u);
  for (auto& p : *points)
    if (p.tag == "test/auc") BOOST_TEST(p.value == 0.8123f);
  // The epoch line: AUC and log loss after the accuracy, for binary jobs only.
  const auto line = epoch_line(logs_of(1, binary), 5);
  BOOST_TEST(
      line.find(", test loss 0.4500, test accuracy 80.00%, test AUC 0.8123, test log loss 0.4567") != std::string::npos,
      line);
  BOOST_TEST(line.rfind("epoch 1/5: 1.5 s (200 samples/s), train loss 0.5000", 0) == 0u, line);
  BOOST_TEST(epoch_line(logs_of(2, softmax), 5).find("AUC") == std::string::npos);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(job_reports_carry_auc_and_log_loss) {
  const std::string dir = make_temp_dir("test");
  job_report rep;
  rep.history.push_back({1, 10, 1.5, 0.5, 0.75, 0.45, 0.8, 0.8123, 0.4567});
  rep.history.push_back({2, 20, 1.5, 0.5, 0.75, 0.3, 0.9, std::nullopt, std::nullopt});
  rep.test_accuracy = 0.9;
  rep.test_auc = 0.875;
  rep.test_log_loss = 0.25;
  const std::string path = dir + "/report.json";
  BOOST_REQUIRE(!write_report(rep, path));
  auto back = read_report(path);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : describe(back.error())));
  BOOST_REQUIRE(back->history.size() == 2u);
  BOOST_TEST(*back->history[0].test_auc == 0.8123);
  BOOST_TEST(*back->history[0].test_log_loss == 0.4567);
  BOOST_TEST(!back->history[1].test_auc);
  BOOST_TEST(*back->test_auc == 0.875);
  BOOST_TEST(*back->test_log_loss == 0.25);
  // A softmax job's report: nulls, read back as none.
  job_report plain;
  plain.test_accuracy = 0.5;
  BOOST_REQUIRE(!write_report(plain, path));
  auto read = read_report(path);
  BOOST_REQUIRE(read);
  BOOST_TEST(!read->test_auc);
  BOOST_TEST(!read->test_log_loss);
  std::filesystem::remove_all(dir);
}
