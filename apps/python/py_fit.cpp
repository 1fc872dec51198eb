// model.fit and model.evaluate for Python: train::fit with the callbacks
// `actorps train` uses, plus the Python ones at epoch level, and Ctrl-C as
// the chief's SIGTERM: a checkpoint of where training is, then a stop.
#include <algorithm>
#include <chrono>
#include <optional>

#include <pybind11/stl.h>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/training/run_job.hpp"
#include "apps/commands.hpp"
#include "apps/python/py_errors.hpp"
#include "apps/python/py_module.hpp"
#include "apps/python/py_session.hpp"
#include "config/dataset_config.hpp"
#include "config/onnx/onnx_export.hpp"
#include "messages/errors.hpp"

namespace actorps::py {
namespace {

namespace pyb = pybind11;

void put_evaluation(pyb::dict& out, const train::evaluation& e, const std::string& prefix) {
  out[pyb::str(prefix + "loss")] = e.loss;
  out[pyb::str(prefix + "accuracy")] = e.accuracy;
  out[pyb::str(prefix + "examples")] = e.examples;
  if (e.auc) out[pyb::str(prefix + "auc")] = *e.auc;
  if (e.log_loss) out[pyb::str(prefix + "log_loss")] = *e.log_loss;
}

// Keras's logs of an epoch: loss, accuracy, val_* from the eval dataset.
pyb::dict logs_of(const train::epoch_logs& e) {
  pyb::dict out;
  out["epoch"] = e.epoch;
  out["step"] = e.step;
  out["seconds"] = e.seconds;
  out["loss"] = e.train_loss;
  out["accuracy"] = e.train_accuracy;
  out["examples"] = e.train_examples;
  if (e.test) put_evaluation(out, *e.test, "val_");
  return out;
}

// The Python side of a fit: `dispatch` (actorps.callbacks.CallbackList)
// hears each epoch's begin and end; a Python exception, or a Ctrl-C seen
// between closures, ends training and is raised once fit returns.
class python_callbacks : public train::fit_callback {
 public:
  python_callbacks(pyb::object dispatch, train::backup_and_restore* backup)
      : dispatch_(std::move(dispatch)), backup_(backup) {}
  ~python_callbacks() override {
    pyb::gil_scoped_acquire locked;
    raised_.reset();
    dispatch_ = pyb::object();
  }

  void on_epoch_begin(uint32_t epoch) override {
    call([&] { dispatch_.attr("on_epoch_begin")(epoch - 1); });
  }
  caf::error on_steps(cluster_coordinator& c, const train::step_progress& p) override {
    auto now = std::chrono::steady_clock::now();
    if (now - checked_ < std::chrono::milliseconds(100)) return caf::none;
    checked_ = now;
    {
      pyb::gil_scoped_acquire locked;
      if (PyErr_CheckSignals() == 0) return caf::none;
      raised_.emplace();  // (takes the KeyboardInterrupt the handler raised)
    }
    if (backup_ != nullptr)
      if (auto saved = backup_->save_now(c, p); !saved) return saved.error();
    return make_error(errc::cancelled, "interrupted (Ctrl-C)");
  }
  caf::error on_epoch_end(cluster_coordinator&, const train::epoch_logs& logs, bool& stop) override {
    return call([&] { stop |= dispatch_.attr("on_epoch_end")(logs.epoch - 1, logs_of(logs)).cast<bool>(); });
  }
  /// Raises what a callback raised, or the Ctrl-C, if any (GIL held).
  void raise_pending() {
    if (!raised_) return;
    auto e = std::move(*raised_);
    raised_.reset();
    throw e;
  }

 private:
  template <class F>
  caf::error call(F&& f) {
    pyb::gil_scoped_acquire locked;
    if (raised_) return make_error(errc::cancelled, "a callback raised");
    try {
      f();
      return caf::none;
    } catch (pyb::error_already_set& e) {
      raised_.emplace(std::move(e));
      return make_error(errc::cancelled, "a callback raised");
    }
  }
  pyb::object dispatch_;
  train::backup_and_restore* backup_;
  std::optional<pyb::error_already_set> raised_;
  std::chrono::steady_clock::time_point checked_;
};

pyb::list fit(session& s, const job_spec& job, const pyb::object& dispatch, bool verbose) {
  const auto& t = job.training;
  std::unique_ptr<train::backup_and_restore> backup;
  if (!t.checkpoint_dir.empty()) {
    train::clear_final(t.checkpoint_dir);
    backup = std::make_unique<train::backup_and_restore>(t.checkpoint_dir, t.checkpoint_keep, t.checkpoint_steps,
                                                         t.checkpoint_full_every);
  }
  auto* saver = backup.get();
  auto owned = take(job_callbacks(job, std::move(backup), {}));
  if (!verbose)  // Keras's verbose=0: no progress bar, no epoch lines
    owned.erase(std::remove_if(owned.begin(), owned.end(),
                               [](auto& cb) { return dynamic_cast<train::progress_bar*>(cb.get()) != nullptr; }),
                owned.end());
  python_callbacks python(dispatch, saver);
  std::vector<train::fit_callback*> callbacks;
  for (auto& cb : owned) callbacks.push_back(cb.get());
  callbacks.push_back(&python);
  caf::expected<train::fit_result> result = caf::error{};
  caf::error marked;
  {
    pyb::gil_scoped_release unlocked;
    result = train::fit(s.coordinator(), job, callbacks);
    if (result && saver != nullptr && saver->last_saved() >= 0)
      marked = train::mark_final(t.checkpoint_dir, saver->last_saved());
  }
  python.raise_pending();
  auto done = take(std::move(result));
  check(marked);
  pyb::list history;
  for (auto& e : done.history) history.append(logs_of(e));
  return history;
}

pyb::dict evaluate(session& s, const std::string& text, const std::string& source, uint32_t parts) {
  auto spec = take(parse_dataset_toml(text, source));
  caf::expected<train::evaluation> e = caf::error{};
  {
    pyb::gil_scoped_release unlocked;
    e = train::evaluate(s.coordinator(), spec, parts == 0 ? uint32_t(2 * s.coordinator().num_workers()) : parts);
  }
  pyb::dict out;
  put_evaluation(out, take(std::move(e)), "");
  return out;
}

// The model with its variables' values now, as an ONNX file.
void export_onnx(session& s, const std::string& path) {
  caf::expected<std::vector<std::vector<float>>> got = caf::error{};
  caf::error err;
  pyb::gil_scoped_release unlocked;
  got = s.coordinator().placement().pull_values();
  if (got) {
    std::vector<const float*> values;
    for (auto& v : *got) values.push_back(v.data());
    err = write_onnx(s.job().model, values, path);
  }
  pyb::gil_scoped_acquire locked;
  if (!got) raise(got.error());
  check(err);
}

// The variables' values now as a safetensors file (a dynamic table's rows
// live on the shards only: those come from a checkpoint, `actorps export`).
void export_safetensors_now(session& s, const std::string& path, int64_t step, uint32_t epoch) {
  for (auto& v : s.coordinator().placement().variables())
    if (v.dynamic)
      throw pyb::value_error("export: '" + v.name + "' is a dynamic table: export its checkpoint (actorps export)");
  caf::expected<std::vector<std::vector<float>>> got = caf::error{};
  caf::error err;
  {
    pyb::gil_scoped_release unlocked;
    got = s.coordinator().placement().pull_values();
    if (got) {
      std::vector<train::saved_variable> vars;
      auto& specs = s.coordinator().placement().variables();
      for (size_t i = 0; i < specs.size(); ++i) vars.push_back({specs[i].name, specs[i].shape, std::move((*got)[i])});
      std::vector<const train::saved_variable*> ptrs;
      for (auto& v : vars) ptrs.push_back(&v);
      err = export_safetensors(path, s.job(), ptrs, step, epoch);
    }
  }
  if (!got) raise(got.error());
  check(err);
}

}  // namespace

void add_fit(pyb::module_& m) {
  auto cls = pyb::reinterpret_borrow<pyb::object>(m.attr("Session"));
  cls.attr("fit") =
      pyb::cpp_function(&fit, pyb::is_method(cls), pyb::arg("job"), pyb::arg("dispatch"), pyb::arg("verbose") = true,
                        "Trains `job` (its [training]); `dispatch` hears each epoch; the history.");
  cls.attr("evaluate") = pyb::cpp_function(&evaluate, pyb::is_method(cls), pyb::arg("text"), pyb::arg("source"),
                                           pyb::arg("parts") = 0, "Evaluates on a [dataset] table's data.");
  cls.attr("export_onnx") = pyb::cpp_function(&export_onnx, pyb::is_method(cls), pyb::arg("path"),
                                              "Writes the model with its current values as ONNX.");
  cls.attr("export_safetensors") =
      pyb::cpp_function(&export_safetensors_now, pyb::is_method(cls), pyb::arg("path"), pyb::arg("step") = 0,
                        pyb::arg("epoch") = 0, "Writes the variables' current values as safetensors.");
}

}  // namespace actorps::py
