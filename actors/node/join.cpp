#include "actors/node/join.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/event_based_actor.hpp>

#include "actors/net/dial.hpp"

namespace actorps {
namespace {

using clock_point = caf::actor_clock::time_point;

void try_join(caf::event_based_actor* self, std::shared_ptr<const join_plan> plan, std::chrono::milliseconds backoff,
              clock_point give_up);

// No answer: again after `backoff`, or give up (undeclared workers only).
void again(caf::event_based_actor* self, std::shared_ptr<const join_plan> plan, std::chrono::milliseconds backoff,
           clock_point give_up, const caf::error& why) {
  const auto who = to_string(plan->task);
  if (plan->undeclared && self->clock().now() > give_up) {
    spdlog::error("node {}: the coordinator at {} does not answer ({}); nobody else dials this worker: stopping", who,
                  plan->coordinator, describe(why));
    plan->stop(1);
    return self->quit();
  }
  spdlog::warn("node {}: the coordinator at {} does not answer ({}); again in {} ms", who, plan->coordinator,
               describe(why), backoff.count());
  self->delayed_send(self, backoff, caf::tick_atom_v, int64_t(next_retry(backoff).count()));
}

void try_join(caf::event_based_actor* self, std::shared_ptr<const join_plan> plan, std::chrono::milliseconds backoff,
              clock_point give_up) {
  const auto colon = plan->coordinator.rfind(':');
  const auto host = plan->coordinator.substr(0, colon);
  const auto port = uint16_t(std::atoi(plan->coordinator.c_str() + colon + 1));
  const auto timeout = std::chrono::milliseconds(plan->spec.runtime.connect_timeout_ms);
  connect_to(self, host, port, timeout, [=](caf::expected<connected> c) {
    if (!c) return again(self, plan, backoff, give_up, c.error());
    auto hello = signed_hello_from(plan->spec, plan->task);
    if (!hello || c->actor == nullptr)
      return again(self, plan, backoff, give_up,
                   hello ? make_error(errc::not_admitted, "no actorps node there") : hello.error());
    pb::JoinJob req;
    *req.mutable_hello() = *hello;
    req.set_host(plan->self.host);
    req.set_port(plan->self.port);
    self->request(caf::actor_cast<join_gate_actor>(c->actor), timeout, req)
        .then(
            [=](const pb::JoinAccepted& ok) {
              spdlog::info("node {}: the coordinator at {} takes it into the job ({} workers)", to_string(plan->task),
                           plan->coordinator, ok.workers());
              self->quit();
            },
            [=](caf::error& err) {
              if (!is_actorps_error(err)) return again(self, plan, backoff, give_up, err);
              spdlog::error("node {}: cannot join the job at {}: {}", to_string(plan->task), plan->coordinator,
                            describe(err));
              plan->stop(2);
              self->quit();
            });
  });
}

}  // namespace

caf::actor spawn_joiner(caf::actor_system& sys, join_plan plan) {
  auto shared = std::make_shared<const join_plan>(std::move(plan));
  return sys.spawn(
      [shared](caf::event_based_actor* self, int) -> caf::behavior {
        const auto give_up =
            self->clock().now() + 10 * std::chrono::milliseconds(shared->spec.runtime.connect_timeout_ms);
        self->send(self, caf::tick_atom_v, int64_t(kFirstRetry.count()));
        return {[self, shared, give_up](caf::tick_atom, int64_t backoff_ms) {
          try_join(self, shared, std::chrono::milliseconds(backoff_ms), give_up);
        }};
      },
      0);  // an argument: CAF 0.17.6 mishandles argument-less spawns (tests/actor_test.hpp)
}

}  // namespace actorps
