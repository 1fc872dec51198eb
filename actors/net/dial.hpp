// Connecting to a node: device-filter check, CAF connect with a deadline
// through a connector of the dial's own (connect.hpp: CAF's shared one can
// make a dial wait on another), interface check, then the Hello handshake.
// The one way any actorps process reaches a node.
#pragma once

#include <algorithm>
#include <chrono>

#include <functional>

#include <unistd.h>
#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/net/admission.hpp"
#include "actors/net/connect.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "config/cluster_spec.hpp"
#include "messages/wire.hpp"

namespace actorps {

using dial_callback = std::function<void(caf::expected<node_actor>)>;
/// What the node answered to the Hello (its bulk lane, for a worker).
using welcome_callback = std::function<void(const pb::Welcome&)>;

/// The Hello that admits `from` to a node of `spec`.
inline pb::Hello hello_from(const cluster_spec& spec, task_id from) {
  pb::Hello hello;
  hello.set_cluster_name(spec.name);
  hello.set_protocol_version(kProtocolVersion);
  *hello.mutable_from() = to_proto(from);
  hello.set_pid(static_cast<uint32_t>(::getpid()));
  return hello;
}

/// hello_from, signed for a secured cluster (actors/net/admission.hpp).
inline caf::expected<pb::Hello> signed_hello_from(const cluster_spec& spec, task_id from) {
  auto hello = hello_from(spec, from);
  if (auto err = sign_hello(hello, spec)) return err;
  return hello;
}

namespace detail {

/// The node actor a connect reached, if an actorps node is published there.
inline caf::expected<node_actor> node_at(caf::actor_system& sys, connected& c, const node_spec& target) {
  if (c.actor == nullptr || !sys.assignable(c.interfaces, sys.message_types<node_actor>()))
    return make_error(errc::not_admitted, "no actorps node actor published at " + target.address());
  return caf::actor_cast<node_actor>(std::move(c.actor));
}

template <class Self>
void greet(Self* self, const cluster_spec& spec, task_id from, node_actor node, dial_callback done,
           welcome_callback on_welcome) {
  auto hello = signed_hello_from(spec, from);
  if (!hello) return done(hello.error());
  auto timeout = std::chrono::milliseconds(spec.runtime.connect_timeout_ms);
  self->request(node, timeout, *hello)
      .then(
          [node, done, on_welcome](const pb::Welcome& w) {
            if (on_welcome) on_welcome(w);
            done(node);
          },
          [done](const caf::error& err) { done(err); });
}

}  // namespace detail

/// From inside the handlers of `self` (an event-based actor or a broker):
/// dials `spec.nodes[node]` as task `from` and calls `done` with the admitted
/// node actor or a typed error (errc::device_filter,
/// sec::cannot_connect_to_node, sec::request_timeout,
/// errc::protocol_mismatch, errc::not_admitted, ...). `on_welcome`, when
/// given, sees the node's Welcome first.
template <class Self>
void dial_node(Self* self, const cluster_spec& spec, task_id from, size_t node, dial_callback done,
               welcome_callback on_welcome = nullptr) {
  auto& target = spec.nodes[node];
  if (!spec.may_connect(from.role, target)) {
    done(make_error(errc::device_filter,
                    "device filters forbid " + to_string(from) + " to talk to " + target.address()));
    return;
  }
  auto timeout = std::chrono::milliseconds(spec.runtime.connect_timeout_ms);
  connect_to(self, target.host, target.port, timeout,
             [self, spec, from, target, done, on_welcome](caf::expected<connected> c) {
               auto node = c ? detail::node_at(self->home_system(), *c, target) : c.error();
               if (!node) return done(node.error());
               detail::greet(self, spec, from, std::move(*node), done, on_welcome);
             });
}

/// How an actor (whose self pointer is a `Self*`: a typed actor's base,
/// e.g. keeper_actor::base) reaches node `node` of its topology: dial_node
/// as the coordinator in the product; tests of the coordinator's actors
/// hand in their own (fake nodes, no network).
template <class Self>
using dialer_for = std::function<void(Self* self, size_t node, dial_callback done)>;

/// The product's dialer: dial_node as task `from`.
template <class Self>
dialer_for<Self> network_dialer(const cluster_spec& spec, task_id from) {
  return
      [spec, from](Self* self, size_t node, dial_callback done) { dial_node(self, spec, from, node, std::move(done)); };
}

/// Dials that fail for a while (a node starting, busy or restarting) are
/// retried after kFirstRetry, each wait twice the last, up to kMaxRetry.
constexpr auto kFirstRetry = std::chrono::milliseconds(100);
constexpr auto kMaxRetry = std::chrono::milliseconds(2000);
constexpr std::chrono::milliseconds next_retry(std::chrono::milliseconds wait) { return std::min(wait * 2, kMaxRetry); }

/// How long a lost worker or PS shard may take to come back before the
/// job fails (the worker proxies' and the PS keeper's bound).
constexpr auto kRecoveryTimeout = std::chrono::seconds(120);
/// How long a job's set-up dials a node that is not up yet, and
/// wait_for_workers waits, by default: nodes may start in any order.
constexpr auto kJoinTimeout = std::chrono::milliseconds(120000);

/// A dial failure that may pass: the port refuses (not up yet) or no answer in time.
inline bool transient(const caf::error& err) {
  return err == caf::sec::cannot_connect_to_node || err == caf::sec::request_timeout ||
         err == caf::sec::connection_timeout;
}

/// Why a dial of a node that was lost failed, from the error's code (never
/// its text): the process is gone (the port refuses), restarting, hung or
/// cut off (no answer before the deadline), or it answers but refuses us.
inline const char* dial_failure_cause(const caf::error& err) {
  if (err == caf::sec::cannot_connect_to_node) return "exited (the port refuses connections)";
  if (err == caf::sec::request_timeout || err == caf::sec::connection_timeout) return "hung or cut off (no answer)";
  if (err == caf::sec::disconnect_during_handshake) return "restarting (dropped the handshake)";
  if (err == errc::not_admitted || err == errc::protocol_mismatch || err == errc::device_filter)
    return "up, but refuses us";
  return "unreachable";
}

/// Blocking dial for set-up code (tools, tests), never for hot paths: the
/// admission lasts as long as `self` lives. Same errors as dial_node; the
/// node's Welcome goes to `welcome` when given.
inline caf::expected<node_actor> dial_node_now(caf::scoped_actor& self, const cluster_spec& spec, task_id from,
                                               size_t node, pb::Welcome* welcome = nullptr) {
  auto& target = spec.nodes[node];
  if (!spec.may_connect(from.role, target))
    return make_error(errc::device_filter,
                      "device filters forbid " + to_string(from) + " to talk to " + target.address());
  const auto timeout = std::chrono::milliseconds(spec.runtime.connect_timeout_ms);
  auto c = connect_now(self, target.host, target.port, timeout);
  auto handle = c ? detail::node_at(self->home_system(), *c, target) : c.error();
  if (!handle) return handle.error();
  auto hello = signed_hello_from(spec, from);
  if (!hello) return hello.error();
  auto reply = request_now<pb::Welcome>(self, *handle, timeout, *hello);
  if (!reply) return reply.error();
  if (welcome != nullptr) *welcome = std::move(*reply);
  return *handle;
}

}  // namespace actorps
