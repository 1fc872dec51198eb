// A blocking request for set-up code, tools and tests: the reply or the
// error. It costs ~100 us (a scoped actor waits on a condition variable):
// never on a hot path, where actors use request(...).then(...).
#pragma once

#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

namespace actorps {

template <class Reply, class Handle, class Duration, class... Ts>
caf::expected<Reply> request_now(caf::scoped_actor& self, const Handle& to, Duration timeout, const Ts&... xs) {
  caf::expected<Reply> out{caf::error{}};
  self->request(to, timeout, xs...)
      .receive([&](Reply& r) { out = std::move(r); }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

}  // namespace actorps
