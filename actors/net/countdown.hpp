// Joins the replies of requests sent together: `then` runs once, with none
// after `left` ok() calls, or with the first error (later replies ignored).
#pragma once

#include <functional>
#include <utility>

#include <caf/error.hpp>

namespace actorps {

struct countdown {
  size_t left;
  std::function<void(caf::error)> then;

  void ok() {
    if (then && --left == 0) std::exchange(then, nullptr)(caf::none);
  }
  void fail(caf::error err) {
    if (then) std::exchange(then, nullptr)(std::move(err));
  }
};

}  // namespace actorps
