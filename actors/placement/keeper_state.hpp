// The PS keeper's state and the steps shared by its files (internal to
// actors/coordinator): ps_keeper.cpp restores and promotes lost shards,
// ps_backups.cpp gives shards new backups, ps_tasks.cpp adds PS tasks to
// the job and retires drained ones. See ps_keeper.hpp.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/net/lossy_link.hpp"
#include "actors/placement/ps_keeper.hpp"

namespace actorps::keeper {

using clock_type = caf::actor_clock;

struct shards_wanted {
  caf::response_promise promise;
  std::optional<std::pair<uint32_t, caf::actor_addr>> stale;  // answer once this one is replaced
};

struct keeper_state {
  static inline const char* name = "ps_keeper";
  keeper_setup l;
  keeper_dialer dial;
  float learning_rate = 0;                                   // > 0: the schedule's current rate
  std::map<caf::actor_addr, uint32_t> watched;               // shard -> ps task
  std::map<caf::actor_addr, uint32_t> watched_backups;       // backup -> ps task
  std::vector<uint32_t> backup_nodes;                        // the node of each ps task's backup (cluster.nodes index)
  std::vector<uint64_t> backup_terms;                        // the replication term of each backup given (0: unknown)
  std::map<uint32_t, std::string> dropped;                   // ps tasks whose primary dropped its backup: why
  std::set<uint32_t> rebuilding, rebuild_logged;             // ps tasks whose new backup is on its way
  std::map<uint32_t, clock_type::time_point> rebuild_since;  // its node has not answered since
  uint64_t routing_version = 1;                              // + 1 whenever a shard is served by another actor
  std::map<uint32_t, clock_type::time_point> lost_at;
  std::map<uint32_t, clock_type::time_point> waiting_since;  // for the node now serving a lost shard
  std::vector<uint32_t> ps_nodes;     // the node serving each ps task's shard (cluster.nodes index; kNoPsNode: retired)
  std::optional<uint32_t> adding_on;  // the standby node a ps task is being added on
  std::set<uint32_t> cause_logged;    // why its node did not answer, once per loss
  std::vector<shards_wanted> waiting;
  bool tick_pending = false;
  // An injected fault on the coordinator's requests to a PS task: the link
  // that stands in for its shard in the facade's lists until `until`.
  struct faulted_link {
    lossy_link_actor link;  // the facade holds it as the shard (a ps_shard_actor)
    caf::actor_addr shard;  // the shard it leads to (a restored one is reached directly)
    clock_type::time_point until;
  };
  std::map<uint32_t, faulted_link> links;  // by ps task
};

using keeper_ptr = keeper_actor::stateful_pointer<keeper_state>;

void watch(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard);
void watch_backup(keeper_ptr self, uint32_t ps, const ps_shard_actor& backup);
/// The node the topology gives ps task `ps` (< the topology's PS count).
uint32_t home_node(const cluster_spec& spec, uint32_t ps);
/// A standby node serving no shard or backup now, if there is one.
std::optional<uint32_t> free_standby(const keeper_state& st);
/// A worker proxy's new shards, and the node serving each once one moved.
void send_shards(keeper_ptr self, const shard_follower_actor& proxy);
/// Answers the facade's requests for shards that can be answered now.
void answer_waiting(keeper_ptr self, bool tick);

// ps_backups.cpp
/// ps_replicas = 2: a shard served without a backup gets a new one.
void rebuild_backup(keeper_ptr self, uint32_t ps);
/// Watches primary `shard` of ps (Promote.watch): when it drops its
/// backup, the keeper forgets that backup (never promoted) and confirms.
void watch_drops(keeper_ptr self, uint32_t ps, const ps_shard_actor& shard);

/// Whether a backup may be promoted: its answer to a query (Replicate.query)
/// against the term of the backup the keeper gave (0: unknown, any).
struct promotion_verdict {
  bool promote = false;
  std::string why;  // when not
};
promotion_verdict check_promotion(uint64_t expected_term, const pb::Replicated& backup);
void on_backup_down(keeper_ptr self, uint32_t ps, const caf::down_msg& msg);

// ps_tasks.cpp
/// A new ps task on a free standby node, empty; answers its index.
caf::result<uint32_t> add_ps(keeper_ptr self);
/// Takes drained ps task `ps` out of the job; answers the routing version.
caf::result<uint64_t> retire_ps(keeper_ptr self, uint32_t ps);

}  // namespace actorps::keeper
