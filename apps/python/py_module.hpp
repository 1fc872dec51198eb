// The parts of the _actorps module, each added by its own file.
#pragma once

#include <pybind11/pybind11.h>

namespace actorps::py {

void add_job(pybind11::module_& m);      // py_job.cpp: Job, parse_job, serve_node
void add_session(pybind11::module_& m);  // py_session.cpp: Session, RemoteValue, DatasetRef
void add_fit(pybind11::module_& m);      // py_fit.cpp: Session.fit, evaluate

}  // namespace actorps::py
