// Which Python exception each actorps error becomes (py_errors.hpp).
#include "apps/python/py_errors.hpp"

#include <map>
#include <string>

#include "messages/errors.hpp"

namespace actorps::py {
namespace {

namespace pyb = pybind11;

// The classes add_errors made, by name (module-lifetime references).
std::map<std::string, pyb::object>& classes() {
  static auto* made = new std::map<std::string, pyb::object>();  // never destroyed: outlives the interpreter's end
  return *made;
}

// The class an error code raises.
const char* class_of(errc code) {
  switch (code) {
    case errc::invalid_config:
    case errc::invalid_argument: return "ValueError";
    case errc::unreachable:
    case errc::not_up:
    case errc::protocol_mismatch:
    case errc::not_admitted:
    case errc::device_filter:
    case errc::replaced: return "UnavailableError";
    case errc::timeout: return "DeadlineExceededError";
    case errc::cancelled: return "CancelledError";
    case errc::out_of_range: return "OutOfRangeError";
    case errc::too_large:
    case errc::too_busy: return "ResourceExhaustedError";
    case errc::forbidden: return "PermissionDeniedError";
    case errc::device_unavailable: return "FailedPreconditionError";
    case errc::io_error: return "DataLossError";
    case errc::refused:
    case errc::busy:
    case errc::stale:
    case errc::no_standby:
    case errc::stale_routing:
    case errc::moved:
    case errc::duplicate:
    case errc::out_of_order: return "AbortedError";
    default: return "InternalError";
  }
}

}  // namespace

void add_errors(pyb::module_& m) {
  auto make = [&m](const char* name, PyObject* base, const char* doc) {
    auto full = std::string("actorps.errors.") + name;
    pyb::object cls = pyb::reinterpret_steal<pyb::object>(PyErr_NewExceptionWithDoc(full.c_str(), doc, base, nullptr));
    m.attr(name) = cls;
    classes()[name] = cls;
    return cls;
  };
  auto base = make("OpError", PyExc_RuntimeError,
                   "An actorps operation failed. `code` names the error (messages/errors.hpp), `exit_code` is what "
                   "the CLI would exit with (128 and above: retrying may help).");
  make("UnavailableError", base.ptr(), "A peer is lost, unreachable, not up yet, or speaks another protocol.");
  make("DeadlineExceededError", base.ptr(), "A request ran past its deadline ([runtime] request_timeout_ms).");
  make("CancelledError", base.ptr(), "A scheduled closure was dropped because an earlier one failed.");
  make("OutOfRangeError", base.ptr(), "A dataset ran out, or a row or range is outside a variable.");
  make("ResourceExhaustedError", base.ptr(), "A message is too large, or a peer has too many requests in flight.");
  make("PermissionDeniedError", base.ptr(), "A peer asked for what its role may not do.");
  make("FailedPreconditionError", base.ptr(), "A worker's node lacks the devices the job asks for.");
  make("DataLossError", base.ptr(), "A file could not be read or written (a data set, a checkpoint).");
  make("AbortedError", base.ptr(), "A request was refused for now: a join, a move, a busy shard.");
  make("InternalError", base.ptr(), "A broken invariant: a bug in actorps.");
}

void raise(const caf::error& err) {
  const errc code = code_of(err);
  const std::string text = describe(err);
  const char* name = class_of(code);
  if (std::string(name) == "ValueError") throw pyb::value_error(text);
  pyb::object exc = classes().at(name)(text);
  exc.attr("code") = to_string(code);
  exc.attr("exit_code") = exit_code(err);
  PyErr_SetObject(classes().at(name).ptr(), exc.ptr());
  throw pyb::error_already_set();
}

}  // namespace actorps::py
