// The coordinator engine for Python (py_session.hpp) and its bindings:
// Session (schedule, join, datasets, weights), RemoteValue, DatasetRef.
#include "apps/python/py_session.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>

#include "actors/training/fit.hpp"
#include "apps/python/py_errors.hpp"
#include "apps/python/py_module.hpp"
#include "config/dataset_config.hpp"
#include "messages/closure_values.hpp"

namespace actorps::py {

session::session(const job_spec& job)
    : job_(job),
      cfg_(job.cluster.runtime, job.cluster.tls_for(task_id{pb::COORDINATOR, 0})),
      sys_(std::make_unique<caf::actor_system>(cfg_)) {}

session::~session() { close(); }

void session::close() {
  c_.reset();  // (before the actor system)
  sys_.reset();
}

cluster_coordinator& session::coordinator() {
  if (!c_) throw std::runtime_error("this coordinator was closed (its strategy let go of the cluster)");
  return *c_;
}

caf::expected<std::unique_ptr<session>> session::connect(const job_spec& job) {
  spdlog::set_level(spdlog::level::from_str(job.cluster.runtime.log_level));  // ([runtime] log_level, as the CLI)
  std::unique_ptr<session> s(new session(job));
  auto c = train::connect_job(*s->sys_, s->job_);
  if (!c) return c.error();
  s->c_ = std::move(*c);
  return s;
}

void session::end_job(const std::string& reason) {
  if (ended_) return;
  ended_ = true;
  coordinator().end_job(reason);
}

namespace {

namespace pyb = pybind11;

// A per-worker dataset as a closure argument: the worker's own dataset of
// that name (TF's per-worker iterator).
struct dataset_ref {
  std::string name;
};

pb::Value value_of(const pyb::handle& arg) {
  if (pyb::isinstance<dataset_ref>(arg)) {
    pb::Value v;
    v.set_per_worker_dataset(arg.cast<const dataset_ref&>().name);
    return v;
  }
  if (pyb::isinstance<pyb::bool_>(arg)) return integer_value(arg.cast<bool>() ? 1 : 0);
  if (pyb::isinstance<pyb::int_>(arg)) return integer_value(arg.cast<int64_t>());
  if (pyb::isinstance<pyb::float_>(arg)) return real_value(arg.cast<double>());
  if (pyb::isinstance<pyb::bytes>(arg)) return bytes_value(arg.cast<std::string>());
  throw pyb::type_error("a closure argument is an int, float, bytes or a per-worker dataset, not " +
                        std::string(pyb::str(arg.get_type())));
}

pyb::list python_values(const values& vs) {
  pyb::list out;
  for (auto& v : vs) {
    switch (v.kind_case()) {
      case pb::Value::kInteger: out.append(v.integer()); break;
      case pb::Value::kReal: out.append(v.real()); break;
      case pb::Value::kData: out.append(pyb::bytes(v.data())); break;
      default: out.append(pyb::none());
    }
  }
  return out;
}

remote_value schedule(session& s, const std::string& function, const pyb::sequence& args, int worker,
                      bool want_result) {
  values vs;
  vs.reserve(args.size());
  for (auto arg : args) vs.push_back(value_of(arg));
  pyb::gil_scoped_release unlocked;  // (blocks while the queue is full)
  return s.coordinator().schedule(function, std::move(vs), schedule_options{want_result, worker, 0});
}

pyb::dict create_dataset(session& s, const std::string& name, const std::string& text, const std::string& source,
                         bool whole) {
  auto spec = take(parse_dataset_toml(text, source));
  caf::expected<pb::DatasetInfo> info = pb::DatasetInfo{};
  {
    pyb::gil_scoped_release unlocked;
    info = s.coordinator().create_per_worker_dataset(name, spec, whole);
  }
  auto got = take(std::move(info));
  pyb::dict out;
  out["features"] = got.features();
  out["examples"] = got.examples_at_source();
  return out;
}

// The variables' values now, by name, as float32 arrays of their shapes.
pyb::dict weights(session& s) {
  caf::expected<std::vector<std::vector<float>>> values = std::vector<std::vector<float>>{};
  {
    pyb::gil_scoped_release unlocked;
    values = s.coordinator().placement().pull_values();
  }
  auto got = take(std::move(values));
  auto& vars = s.coordinator().placement().variables();
  pyb::dict out;
  for (size_t i = 0; i < vars.size(); ++i) {
    std::vector<pyb::ssize_t> shape(vars[i].shape.begin(), vars[i].shape.end());
    pyb::array_t<float> a(shape);
    if (size_t(a.size()) != got[i].size())  // (a dynamic table's live rows: not its declared shape)
      a = pyb::array_t<float>(std::vector<pyb::ssize_t>{pyb::ssize_t(got[i].size())});
    std::copy(got[i].begin(), got[i].end(), a.mutable_data());
    out[pyb::str(vars[i].name)] = a;
  }
  return out;
}

void set_weights(session& s, const pyb::dict& by_name) {
  auto& vars = s.coordinator().placement().variables();
  std::vector<pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>> held;
  std::vector<const float*> values;
  for (auto& v : vars) {
    if (!by_name.contains(v.name)) throw pyb::value_error("set_weights: no value for variable '" + v.name + "'");
    held.emplace_back(by_name[pyb::str(v.name)]);
    int64_t n = 1;
    for (auto d : v.shape) n *= d;
    if (held.back().size() != n)
      throw pyb::value_error("set_weights: '" + v.name + "' has " + std::to_string(n) + " values, not " +
                             std::to_string(held.back().size()));
    values.push_back(held.back().data());
  }
  caf::error err;
  {
    pyb::gil_scoped_release unlocked;
    err = s.coordinator().placement().assign_values(values);
  }
  check(err);
}

}  // namespace

void add_session(pyb::module_& m) {
  pyb::class_<dataset_ref>(m, "DatasetRef", "A per-worker dataset, by name, as a closure argument.")
      .def(pyb::init<std::string>())
      .def_readonly("name", &dataset_ref::name);
  pyb::class_<remote_value>(m, "RemoteValue", "The future result of a scheduled closure.")
      .def("ready", &remote_value::ready)
      .def("fetch", [](const remote_value& v) {
        caf::expected<values> got = values{};
        {
          pyb::gil_scoped_release unlocked;
          got = v.fetch();
        }
        return python_values(take(std::move(got)));
      });
  pyb::class_<session>(m, "Session", "A coordinator connected to a job's nodes.")
      .def_static(
          "connect",
          [](const job_spec& job) {
            caf::expected<std::unique_ptr<session>> s = caf::error{};
            {
              pyb::gil_scoped_release unlocked;
              s = session::connect(job);
            }
            return take(std::move(s));
          },
          pyb::arg("job"))
      .def("create_per_worker_dataset", &create_dataset, pyb::arg("name"), pyb::arg("text"), pyb::arg("source"),
           pyb::arg("whole") = false)
      .def("schedule", &schedule, pyb::arg("function"), pyb::arg("args"), pyb::arg("worker") = -1,
           pyb::arg("want_result") = true)
      .def("join",
           [](session& s) {
             caf::error err;
             {
               pyb::gil_scoped_release unlocked;
               err = s.coordinator().join();
             }
             check(err);
           })
      .def("done", [](session& s) { return s.coordinator().done(); })
      .def("num_workers", [](session& s) { return s.coordinator().num_workers(); })
      .def("live_workers", [](session& s) { return s.coordinator().live_workers(); })
      .def("get_weights", &weights)
      .def("set_weights", &set_weights, pyb::arg("weights"))
      .def(
          "set_learning_rate",
          [](session& s, float lr) {
            caf::error err;
            {
              pyb::gil_scoped_release unlocked;
              err = s.coordinator().placement().set_learning_rate(lr);
            }
            check(err);
          },
          pyb::arg("learning_rate"), "The learning rate every shard applies from now on.")
      .def("close",
           [](session& s) {
             pyb::gil_scoped_release unlocked;
             s.close();
           })
      .def_property_readonly("closed", &session::closed)
      .def("end_job", [](session& s, const std::string& reason) {
        pyb::gil_scoped_release unlocked;
        s.end_job(reason);
      });
}

}  // namespace actorps::py
