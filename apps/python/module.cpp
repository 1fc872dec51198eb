// actorps._actorps: the C++ library as the Python package sees it
// (apps/python/actorps/ wraps it in TF's names).
#include <pybind11/pybind11.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apps/python/py_errors.hpp"
#include "apps/python/py_module.hpp"

PYBIND11_MODULE(_actorps, m) {
  m.doc() = "actorps's C++ library: jobs, nodes, the cluster coordinator (use the actorps package)";
  m.attr("ACTORPS_BIN") = ACTORPS_BIN;
  // Logs on stderr as the actorps program writes them (stdout: progress and results).
  auto logger = spdlog::get("actorps");
  if (!logger) logger = spdlog::stderr_color_mt("actorps");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] [pid %P] %v");
  spdlog::set_default_logger(logger);
  actorps::py::add_errors(m);
  actorps::py::add_job(m);
  actorps::py::add_session(m);
  actorps::py::add_fit(m);
}
