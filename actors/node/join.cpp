#include "actors/node/join.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <caf/io/middleman.hpp>
#include <caf/openssl/remote_actor.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/net/dial.hpp"
#include "actors/net/request_now.hpp"

namespace actorps {
namespace {

caf::expected<join_gate_actor> reach_gate(caf::actor_system& sys, const std::string& host, uint16_t port) {
  return sys.has_openssl_manager() ? caf::openssl::remote_actor<join_gate_actor>(sys, host, port)
                                   : sys.middleman().remote_actor<join_gate_actor>(host, port);
}

}  // namespace

caf::expected<pb::JoinAccepted> join_job(caf::actor_system& sys, const cluster_spec& spec, const task_id& task,
                                         const node_spec& self, const std::string& coordinator) {
  const auto colon = coordinator.rfind(':');
  const auto port = colon == std::string::npos ? 0 : std::atoi(coordinator.c_str() + colon + 1);
  if (port <= 0 || port > 65535)
    return make_error(errc::invalid_argument, "--join " + coordinator + ": expected HOST:PORT of the coordinator");
  const auto host = coordinator.substr(0, colon);
  const auto timeout = std::chrono::milliseconds(spec.runtime.connect_timeout_ms);
  const auto give_up = std::chrono::steady_clock::now() + 10 * timeout;
  auto backoff = std::chrono::milliseconds(100);
  caf::scoped_actor me(sys);
  for (;;) {
    auto hello = signed_hello_from(spec, task);
    if (!hello) return hello.error();
    pb::JoinJob req;
    *req.mutable_hello() = *hello;
    req.set_host(self.host);
    req.set_port(self.port);
    auto gate = reach_gate(sys, host, uint16_t(port));
    caf::expected<pb::JoinAccepted> got = gate ? request_now<pb::JoinAccepted>(me, *gate, timeout, req) : gate.error();
    if (got || got.error().category() == caf::atom("actorps") || std::chrono::steady_clock::now() > give_up) return got;
    spdlog::warn("node {}: the coordinator at {} does not answer ({}); again in {} ms", to_string(task), coordinator,
                 describe(got.error()), backoff.count());
    std::this_thread::sleep_for(backoff);  // set-up code on the main thread, before the node serves a job
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace actorps
