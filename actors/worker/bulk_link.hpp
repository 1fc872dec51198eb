// A worker's bulk lane to one PS node (actors/net/bulk_client.hpp), as an
// actor: the worker sends it requests and gets answers, while a thread of
// the link's own owns the blocking connection and serves them one at a
// time, in order. Tensors travel straight from and into the worker's
// buffers, which the requests hand over until they are answered:
//
//   - a push reads each range's gradient until it is answered;
//   - a pull writes each range's values until it is answered;
//   - since a link serves requests in order, a push is on the wire whole
//     before any later request on the same link starts.
//
// A request that may be sent more than once (the transport sends it again
// when its deadline passes, or under an injected fault) does not touch
// the buffers after its first answer: a push then goes from a copy it
// keeps, a pull into a buffer of the link's own, which the answer brings.
//
// A lost connection answers every request with errc::unreachable (the
// worker then fails its batch like any lost link); errors the shard
// answers (unknown variable, bad range) keep their codes.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/expected.hpp>

#include "actors/net/bulk_client.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// Push ranges (head: shard, worker, step, ranges, closure_step), range i
/// from grads[i]; answered with the shard's pb::PushAck.
struct bulk_push_req {
  pb::BulkRequest head;
  std::vector<const float*> grads;
  std::shared_ptr<const std::vector<float>> keep;  // where grads point when sent from a copy (copied())
};

/// The same push from a copy of its gradients, which it keeps.
bulk_push_req copied(const bulk_push_req& req);

/// Pull ranges (head: shard, worker, step, ranges), range i into out[i]
/// (apart: into the answer, for the worker to copy into out[i]); answered
/// with a bulk_pulled.
struct bulk_pull_req {
  pb::BulkRequest head;
  std::vector<float*> out;
  bool apart = false;
};

/// A pull's answer: empty when it wrote into out; else its values, and
/// where they go.
struct bulk_pulled {
  std::vector<float> values;                     // the ranges, one after another
  std::vector<std::pair<float*, int64_t>> into;  // per range: out[i] and its count
  /// Copies the values where they go (on the worker's thread, once it takes
  /// this answer).
  void copy_in() const;
};

class bulk_link {
 public:
  /// Connects to the PS node's lane (a node that has just welcomed the
  /// worker: a loopback or LAN connect, not a wait) and starts the thread.
  static caf::expected<std::unique_ptr<bulk_link>> open(caf::actor_system& sys, const std::string& host, uint16_t port,
                                                        const std::string& token);
  /// Cuts the connection (a request in flight fails) and joins the thread.
  ~bulk_link();
  bulk_link(const bulk_link&) = delete;
  bulk_link& operator=(const bulk_link&) = delete;

  /// Where requests go.
  const caf::actor& handle() const { return handle_; }

 private:
  explicit bulk_link(bulk_client client, std::string where) : client_(std::move(client)), where_(std::move(where)) {}
  void serve(caf::actor_system& sys, std::promise<caf::actor>& ready);

  bulk_client client_;
  std::string where_;  // "host:port", for errors
  caf::actor handle_;
  std::thread thread_;
};

}  // namespace actorps

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorps::bulk_push_req)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorps::bulk_pull_req)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorps::bulk_pulled)
