// Work an actor runs later on its own thread: `keep` stores it under a new
// id, which the actor sends itself as a delayed message; its handler for
// that message calls `fire`. (CAF 0.17 has no run-later for a function.)
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

namespace actorps {

class timer_table {
 public:
  /// The id to send for `fn`.
  uint64_t keep(std::function<void()> fn) {
    work_.emplace(next_, std::move(fn));
    return next_++;
  }

  /// Runs the work of `id` once (an unknown id: nothing).
  void fire(uint64_t id) {
    auto i = work_.find(id);
    if (i == work_.end()) return;
    auto fn = std::move(i->second);
    work_.erase(i);
    fn();
  }

  bool empty() const { return work_.empty(); }

 private:
  std::map<uint64_t, std::function<void()>> work_;
  uint64_t next_ = 0;
};

}  // namespace actorps
