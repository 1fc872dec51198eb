// actorps errors as Python exceptions: bad configuration is ValueError
// with the CLI's file:line:column text; everything else an OpError
// (RuntimeError) subclass named as TensorFlow names it (UnavailableError for
// a lost or unreachable peer, DeadlineExceededError, CancelledError, ...).
#pragma once

#include <pybind11/pybind11.h>
#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace actorps::py {

/// Creates the exception classes in `m` (actorps._actorps).
void add_errors(pybind11::module_& m);

/// Raises `err` as its Python exception (the GIL must be held).
[[noreturn]] void raise(const caf::error& err);

inline void check(const caf::error& err) {
  if (err) raise(err);
}

template <class T>
T take(caf::expected<T>&& x) {
  if (!x) raise(x.error());
  return std::move(*x);
}

}  // namespace actorps::py
