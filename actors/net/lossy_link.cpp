#include "actors/net/lossy_link.hpp"

#include <chrono>
#include <memory>
#include <utility>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/net/fault_injector.hpp"
#include "actors/net/timer_table.hpp"

namespace actorps {
namespace {

constexpr auto kLinger = std::chrono::minutes(1);  // after the fault: messages sent to it meanwhile still pass

struct link_state {
  static inline const char* name = "lossy_link";
  caf::actor target;
  timer_table timers;
  std::unique_ptr<fault_injector> fault;  // its one peer (0): the target
};

using link_ptr = lossy_link_actor::stateful_pointer<link_state>;

void after(link_ptr self, std::chrono::milliseconds delay, std::function<void()> fn) {
  self->delayed_send(self, delay, link_timer_atom_v, self->state.timers.keep(std::move(fn)));
}

// `msg` to the target as `sender` sent it: the answer goes to the sender.
void pass_on(link_ptr self, caf::strong_actor_ptr sender, caf::message_id mid, caf::message msg) {
  caf::actor_cast<caf::abstract_actor*>(self->state.target)
      ->enqueue(std::move(sender), mid, std::move(msg), self->context());
}

// A copy of `msg` to the target from the link itself: the answer comes
// back to the link, which drops it.
void send_copy(link_ptr self, caf::message msg) {
  pass_on(self, caf::strong_actor_ptr{self->ctrl()}, caf::make_message_id(), std::move(msg));
}

// Every message but its own timers: through the fault. The link answers
// nothing itself (delegated): the target does, or nobody.
caf::result<caf::message> on_message(link_ptr self, caf::message_view& x) {
  auto& st = self->state;
  auto sender = self->current_sender();
  if (sender && sender->address() == st.target.address())
    return caf::delegated<caf::message>{};  // the answer to a copy the link sent: lost
  auto msg = x.move_content_to_message();
  const auto mid = self->current_message_id();
  using act = fault_injector::act;
  switch (st.fault->decide(0)) {
    case act::send: pass_on(self, std::move(sender), mid, std::move(msg)); break;
    case act::delay:
      after(self, st.fault->delay(0),
            [self, sender, mid, msg]() mutable { pass_on(self, std::move(sender), mid, std::move(msg)); });
      break;
    case act::lose_request: break;
    case act::lose_reply: send_copy(self, std::move(msg)); break;  // handled; its answer comes here
    case act::duplicate:
      send_copy(self, msg);
      pass_on(self, std::move(sender), mid, std::move(msg));
      break;
  }
  return caf::delegated<caf::message>{};
}

lossy_link_actor::behavior_type link_behavior(link_ptr self, caf::actor owner, caf::actor target, pb::InjectFault fault,
                                              std::string who, std::string what) {
  self->link_to(owner);  // its owner's exit (not a normal one) stops it too
  auto& st = self->state;
  st.target = std::move(target);
  st.fault = std::make_unique<fault_injector>(
      self->clock(), [self](std::chrono::milliseconds delay, std::function<void()> fn) { after(self, delay, fn); },
      trace::recorder_of(self->home_system()));
  st.fault->inject(0, fault, who, what);
  after(self, std::chrono::milliseconds(fault.duration_ms()) + kLinger, [self] { self->quit(); });
  self->set_default_handler([self](caf::scheduled_actor*, caf::message_view& x) { return on_message(self, x); });
  self->set_error_handler([](caf::scheduled_actor*, caf::error&) {});  // a copy's error answer: lost too
  return {
      [self](link_timer_atom, uint64_t id) { self->state.timers.fire(id); },
  };
}

}  // namespace

lossy_link_actor spawn_lossy_link(caf::actor_system& sys, const caf::actor& owner, caf::actor target,
                                  const pb::InjectFault& fault, const std::string& who, const std::string& what) {
  return sys.spawn(link_behavior, owner, std::move(target), fault, who, what);
}

}  // namespace actorps
