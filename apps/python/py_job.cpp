// Jobs and nodes for Python: a job's TOML text parsed by the loader the CLI
// uses (so a ValueError reads as the CLI's error), and one node served from
// the interpreter (actorps.Server, TF's tf.distribute.Server).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>

#include "apps/commands.hpp"
#include "apps/python/py_errors.hpp"
#include "apps/python/py_module.hpp"
#include "config/job_config.hpp"
#include "kernels/model.hpp"
#include "kernels/ops.hpp"

namespace actorps::py {
namespace {

namespace pyb = pybind11;

job_spec parse(const std::string& text, const std::string& source, const std::string& tf_config) {
  auto job = take(parse_job_toml(text, source, tf_config));
  if (!job) throw pyb::value_error(source + ": no [training] table: not a job");
  return std::move(*job);
}

job_spec load(const std::string& path, const std::string& tf_config) {
  auto job = take(load_job_file(path, tf_config));
  if (!job) throw pyb::value_error(path + ": no [training] table: not a job");
  return std::move(*job);
}

// The topology of a TOML text, or of TF_CONFIG's JSON with the text's
// [runtime] and [security].
cluster_spec topology(const std::string& text, const std::string& source, const std::string& tf_config) {
  if (tf_config.empty()) return take(parse_toml(text, source));
  return take(with_toml_settings(take(parse_tf_config(tf_config)), text, source));
}

// `actorps node`: serves the node of `task` ("" : TF_CONFIG's) until the
// job ends or a signal stops it; the exit code the CLI would return.
int serve(const std::string& text, const std::string& source, const std::string& tf_config, const std::string& task,
          const std::string& join) {
  auto spec = topology(text, source, tf_config);
  spdlog::set_level(spdlog::level::from_str(spec.runtime.log_level));
  node_options options;
  options.task = task;
  options.join = join;
  pyb::gil_scoped_release unlocked;
  return run_node(std::move(spec), options);
}

// The values the job's variables start from (an ONNX file's, else drawn
// from [training] seed), by name, as float32 arrays of their shapes: what a
// coordinator would put on the PS tasks.
pyb::dict initial_weights(const job_spec& job) {
  std::vector<kernels::param_info> params;
  std::vector<std::vector<float>> values;
  try {
    kernels::graph_model model(job.model, kernels::reference_ops());
    params = model.parameters();
    values = initial_values(job, model);
  } catch (const std::invalid_argument& e) {
    throw pyb::value_error(e.what());
  }
  pyb::dict out;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<pyb::ssize_t> shape(params[i].shape.begin(), params[i].shape.end());
    pyb::array_t<float> a(shape);
    if (size_t(a.size()) != values[i].size()) throw pyb::value_error("no initial values of " + params[i].name);
    std::copy(values[i].begin(), values[i].end(), a.mutable_data());
    out[pyb::str(params[i].name)] = a;
  }
  return out;
}

std::vector<std::string> tasks_of(const cluster_spec& spec) {
  std::vector<std::string> out;
  for (auto& node : spec.nodes)
    for (auto& t : node.tasks) out.push_back(to_string(t));
  return out;
}

}  // namespace

void add_job(pyb::module_& m) {
  pyb::class_<job_spec>(m, "Job", "A parsed training job: topology, model, datasets and [training].")
      .def_property_readonly("epochs", [](const job_spec& j) { return j.training.epochs; })
      .def_property_readonly("steps_per_epoch", [](const job_spec& j) { return j.training.steps_per_epoch; })
      .def_property_readonly("checkpoint_dir", [](const job_spec& j) { return j.training.checkpoint_dir; })
      .def("initial_weights", &initial_weights,
           "The variables' starting values by name (an ONNX file's, else drawn from [training] seed).")
      .def_property_readonly(
          "tasks", [](const job_spec& j) { return tasks_of(j.cluster); }, "Every task of the topology, as ROLE:INDEX.");
  m.def("parse_job", &parse, pyb::arg("text"), pyb::arg("source"), pyb::arg("tf_config") = "",
        "Parses a job's TOML text (`source` names it in errors); with `tf_config`, the cluster is TF_CONFIG's.");
  m.def("load_job", &load, pyb::arg("path"), pyb::arg("tf_config") = "", "Loads a job file as `actorps train` does.");
  m.def(
      "cluster_tasks",
      [](const std::string& text, const std::string& source, const std::string& tf_config) {
        return tasks_of(topology(text, source, tf_config));
      },
      pyb::arg("text"), pyb::arg("source"), pyb::arg("tf_config") = "",
      "The tasks of a topology (TOML text, or TF_CONFIG with the text's [runtime]); ValueError when it is bad.");
  m.def("serve_node", &serve, pyb::arg("text"), pyb::arg("source"), pyb::arg("tf_config"), pyb::arg("task"),
        pyb::arg("join") = "", "Serves one node until its job ends or SIGTERM/SIGINT stops it; the exit code.");
}

}  // namespace actorps::py
