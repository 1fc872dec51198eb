// A worker proxy's state and the steps shared by its two files (internal
// to actors/coordinator): worker_proxy.cpp keeps the worker busy and
// handles its loss and its leaving; proxy_spawn.cpp brings it up (dial,
// datasets, spawn, back-off). See worker_proxy.hpp.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/coordinator/worker_proxy.hpp"
#include "actors/net/fault_injector.hpp"
#include "actors/net/timer_table.hpp"

namespace actorps::proxy {

constexpr size_t kBatchesInFlight = 4;                             // a window's closures go in this many RunClosures
constexpr size_t kMinWindow = kBatchesInFlight, kMaxWindow = 256;  // at least one closure per batch
constexpr auto kStillAbsentLog = std::chrono::seconds(30);         // a worker that never came: logged this often
constexpr auto kSpawnTimeout = std::chrono::seconds(30);
constexpr auto kLostAnswer = std::chrono::seconds(5);  // a shard's answer to WorkerLost

using clock_point = caf::actor_clock::time_point;

struct proxy_state {
  static inline const char* name = "worker_proxy";
  std::shared_ptr<closure_queue> queue;
  uint32_t index = 0;
  worker_actor worker;
  node_actor node;        // the worker's node, while the worker is up
  pb::RunClosures names;  // datasets only
  std::vector<dataset_actor> datasets;
  std::vector<pb::SpawnDataset> dataset_specs;  // how each was built (rebuilt on respawn)
  respawn_plan plan;
  bool ever_up = false;        // it joined once (else: retried for as long as the job runs)
  bool left = false;           // drained and out of the job, until its node announces itself again
  bool spawning = false;       // a dial succeeded and the worker is being spawned: no second one meanwhile
  uint64_t spawn_round = 0;    // the dial round of that spawn
  caf::actor_addr spawn_node;  // the node it is spawned on (monitored: it may die mid-spawn)
  clock_point lost_at, logged_at;
  std::chrono::milliseconds backoff = kFirstRetry;
  std::minstd_rand jitter;
  uint64_t dial_round = 0;                                    // a retry timer of an older round is ignored
  std::map<uint64_t, std::vector<queued_closure>> in_flight;  // by batch
  uint64_t next_batch = 1;                                    // RunClosures.batch (0: none)
  timer_table timers;                                         // the fault injector's (proxy_timer_atom)
  std::unique_ptr<fault_injector> faults;                     // on its requests to the worker (InjectFault)
  size_t running = 0, window = kMinWindow;
  double micros_per_closure = 0;  // learnt from the worker's busy time
  bool waiting = false;           // a wake-up is registered with the queue
  size_t building = 0;            // datasets being built on the worker's node: no closures before they are
  uint64_t incarnation = 0;       // the worker's: a lost one's late answers are ignored
  bool paused = false;            // a PS shard is being restored
  std::optional<caf::typed_response_promise<pb::LeftJob>> leaving;  // draining for this LeaveJob
  bool release_node = false;                                        // remove_worker: tell the node once drained
  uint64_t finished_while_leaving = 0;
};

using proxy_ptr = worker_proxy_actor::stateful_pointer<proxy_state>;

inline double seconds_since(proxy_ptr self, clock_point t) {
  return std::chrono::duration<double>(self->clock().now() - t).count();
}

/// Hands the worker closures while it has room (worker_proxy.cpp).
void dispatch(proxy_ptr self);
/// Dials the worker's node and brings the worker up there (proxy_spawn.cpp).
void dial(proxy_ptr self);
/// A dial or spawn failed: again after the back-off.
void retry_later(proxy_ptr self, const caf::error& why);
/// The worker actor is up on `node`: it takes closures.
void worker_up(proxy_ptr self, node_actor node, worker_actor worker);
/// The spawn under way is over (done, or given up).
void spawn_over(proxy_ptr self);
/// Builds dataset i on the worker's node; `then` gets its info or the error.
void build_dataset(proxy_ptr self, size_t i, std::function<void(caf::expected<pb::DatasetInfo>)> then);
/// Records dataset `name` and, with the worker up, builds it now.
caf::result<pb::DatasetInfo> add_dataset(proxy_ptr self, const std::string& name, const pb::SpawnDataset& how);

}  // namespace actorps::proxy
