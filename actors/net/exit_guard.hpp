// CAF 0.17 stops an actor on an exit message with exit_reason::kill from
// anyone (it cannot be trapped), and any connected peer can send one to an
// actor it holds a handle of; a down message it did not ask for would stop
// a worker as if a PS shard were lost. A guarded actor drops both before
// CAF acts on them: exit messages from anyone but the actors it trusts (its
// node, which links it; a worker's proxy, which replaces it), and down
// messages that do not come from the actor they announce. Each is counted
// against its sender in the peer table as errc::forbidden and logged.
// PS shards, workers and datasets are guarded.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <caf/stateful_actor.hpp>

#include "actors/net/peer_table.hpp"
#include "messages/errors.hpp"

namespace actorps {

struct exit_guard {
  std::vector<caf::actor_addr> trusted;  // who may stop the actor
  peer_table_ptr peers;                  // where refusals are counted
  std::string where;                     // its name in them, e.g. "worker:0: "
};

template <class State, class Base>
class guarded_actor : public caf::stateful_actor<State, Base> {
 public:
  using super = caf::stateful_actor<State, Base>;
  using behavior_type = typename super::behavior_type;
  using behavior_fn = std::function<behavior_type(super*)>;

  guarded_actor(caf::actor_config& cfg, exit_guard guard, behavior_fn make)
      : super(cfg), guard_(std::move(guard)), make_(std::move(make)) {}
  behavior_type make_behavior() override { return make_(this); }

 protected:
  using super::consume;
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    const std::string forged = forgery(x);
    if (forged.empty()) return super::consume(x);
    auto err = make_error(errc::forbidden, guard_.where + forged);
    spdlog::warn("{}", describe(err));
    guard_.peers->count(x.sender, this->node(), err);
    return caf::invoke_message_result::dropped;
  }

 private:
  // What is forged about `x` (empty: nothing).
  std::string forgery(const caf::mailbox_element& x) const {
    auto& msg = x.content();
    if (msg.match_elements<caf::exit_msg>()) {
      auto& from = msg.get_as<caf::exit_msg>(0).source;
      if (std::find(guard_.trusted.begin(), guard_.trusted.end(), from) == guard_.trusted.end())
        return "an exit message from " + caf::to_string(from) + ", not from its node";
    } else if (msg.match_elements<caf::down_msg>()) {
      auto& about = msg.get_as<caf::down_msg>(0).source;
      if (x.sender == nullptr || x.sender->address() != about)
        return "a down message about " + caf::to_string(about) + " it did not send";
    }
    return {};
  }

  exit_guard guard_;
  behavior_fn make_;
};

/// Spawns a guarded actor of `Handle` (a typed actor) with `State`, whose
/// behavior `make(self)` returns.
template <class State, class Handle, class Make>
Handle spawn_guarded(caf::actor_system& sys, exit_guard guard, Make make) {
  using actor = guarded_actor<State, typename Handle::base>;
  return sys.spawn<actor>(std::move(guard), typename actor::behavior_fn(std::move(make)));
}

}  // namespace actorps
