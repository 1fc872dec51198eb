// Who may ask what of this process's actors. The node actor admits peers
// (their Hello verified, by CAF node id: a process); the PS shards, workers
// and datasets it spawns check every request against the table: a remote
// sender must come from an admitted process whose role may send that
// request, the request must fit runtime.max_message_bytes, and whatever
// they refuse is counted per peer and error (NodeStatus.refused, shown by
// `actorps status`). Requests from this process itself always pass.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/node_id.hpp>

#include "actors/metrics/registry.hpp"
#include "config/cluster_spec.hpp"
#include "messages/cluster.pb.h"

namespace actorps {

class peer_table {
 public:
  /// With `reg`, admissions and refusals are counted there too
  /// (actorps_node_admitted_peers, actorps_node_refused_requests_total).
  explicit peer_table(runtime_options limits, metrics::registry* reg = nullptr);

  /// Process `node` said Hello as `task`. It stays admitted as long as this
  /// process runs: a CAF node id holds the peer's process id, so a restarted
  /// peer is another node and says Hello again. (Admissions used to end with
  /// the greeting actor's down message; a stranger's failed TLS handshake
  /// made CAF 0.17 report every remote actor down, and so de-admitted the
  /// whole cluster.)
  void admit(const caf::node_id& node, task_id task);

  /// Checks a request of `bytes` bytes, `what`, from `sender` to an actor of
  /// process `here` (named `where` in errors, e.g. "ps shard 0: "):
  /// errc::not_admitted, errc::forbidden (role not in `roles`) or
  /// errc::too_large, each counted; none when it may pass. Builds no string
  /// unless it refuses (it runs for every pull and push).
  [[nodiscard]] caf::error check(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                                 std::initializer_list<Role> roles, size_t bytes, std::string_view where,
                                 std::string_view what);
  /// Counts a request refused after the check (e.g. a shape that does not fit).
  void count(const caf::strong_actor_ptr& sender, const caf::node_id& here, const caf::error& err);
  /// A name for the sender: "worker:0", "local", "anonymous", "node <id>".
  std::string peer_name(const caf::strong_actor_ptr& sender, const caf::node_id& here) const;

  /// Refused requests so far, per peer.
  std::vector<pb::PeerRefusals> refusals() const;
  const runtime_options& limits() const { return limits_; }

 private:
  std::string name_locked(const caf::strong_actor_ptr& sender, const caf::node_id& here) const;
  caf::error refusal(const caf::strong_actor_ptr& sender, const caf::node_id& here, std::initializer_list<Role> roles,
                     size_t bytes) const;
  void count_locked(const std::string& peer, const caf::error& err);

  const runtime_options limits_;
  metrics::gauge* admitted_peers_ = nullptr;
  metrics::family<metrics::counter>* refused_by_kind_ = nullptr;
  mutable std::mutex m_;
  std::map<caf::node_id, std::vector<task_id>> admitted_;
  std::map<std::string, std::map<std::string, uint64_t>> refused_;  // peer -> error -> count
};

using peer_table_ptr = std::shared_ptr<peer_table>;

/// The check of `msg`, the request `self` is handling (see peer_table::check).
/// Every actor that serves other processes holds the table as
/// `state.peers` and the prefix of its errors as `state.where`.
template <class Self, class Msg>
[[nodiscard]] caf::error check_request(Self* self, const Msg& msg, std::initializer_list<Role> roles,
                                       std::string_view what) {
  const auto& st = self->state;
  return st.peers->check(self->current_sender(), self->node(), roles, msg.ByteSizeLong(), st.where, what);
}

}  // namespace actorps
