// The coordinator's facade (TF's ParameterServerStrategy + ClusterCoordinator)
// for one thread of the coordinator process:
//
//   auto c = cluster_coordinator::connect(sys, spec, consistency);   // PS shards up
//   c->create_variables(model, seed, optimizer);                     // round-robin over them
//   c->create_workers(model, {threads});                             // one proxy each
//   c->wait_for_workers(1);                                          // training starts with those up
//   c->create_per_worker_dataset("train", spec);                     // each worker its shard
//   auto v = c->schedule("train_step", {per_worker_dataset("train"), integer(10)});
//   c->join();  v.fetch();
//
// Workers come and go while the job runs: a declared worker whose node
// comes up late joins when it does, add_worker()/accept_joins() take in new
// ones, remove_worker() drains one out (actors/coordinator/membership.hpp).
// Setup calls block (each with the topology's connect timeout); schedule()
// only queues, and blocks only while `queue_capacity` closures are
// outstanding. Closures run on whichever worker is free, in queue order;
// see closure_queue.hpp for what an error does to the others.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "actors/metrics/registry.hpp"
#include "actors/net/dial.hpp"
#include "actors/placement/ps_placement.hpp"
#include "config/cluster_spec.hpp"
#include "kernels/model.hpp"

namespace actorps {

struct schedule_options {
  bool want_result = true;  // false: the worker does not send the values back
  int worker = -1;          // -1: any worker; else only that one
  uint64_t round = 0;       // > 0: closures that wait for each other on the shards (closure_queue::hold)
};

class cluster_coordinator {
 public:
  /// Dials the PS nodes and has each spawn its shard with `consistency`;
  /// with `ps_replicas` = 2 (async only) also its backup on the next PS
  /// task's node (ps_shard.hpp: acknowledged once the backup has it).
  [[nodiscard]] static caf::expected<std::unique_ptr<cluster_coordinator>> connect(caf::actor_system& sys,
                                                                                   const cluster_spec& spec,
                                                                                   const pb::Consistency& consistency,
                                                                                   uint32_t ps_replicas = 1,
                                                                                   size_t queue_capacity = 4096);
  ~cluster_coordinator();
  cluster_coordinator(const cluster_coordinator&) = delete;
  cluster_coordinator& operator=(const cluster_coordinator&) = delete;

  /// The model's parameters as variables on the shards (TF's variable
  /// creation under strategy.scope()).
  [[nodiscard]] caf::error create_variables(const kernels::model_spec& model, uint64_t seed,
                                            const pb::Optimizer& optimizer, const partitioner& split = {});
  /// How every worker computes.
  struct worker_options {
    uint32_t threads = 0;                 // CPU kernel threads; 0 = all cores
    pb::Device device = pb::DEVICE_AUTO;  // GPUs or the CPU (messages/train.proto Device)
    uint32_t devices = 1;                 // each batch split over this many
    bool pull_ahead = false;              // ASYNC: step s + 1's values pulled while step s computes
  };
  /// A proxy per declared worker task, over those variables: each brings its
  /// worker up as soon as the worker's node answers (returns at once).
  [[nodiscard]] caf::error create_workers(const kernels::model_spec& model, const worker_options& compute);
  /// Blocks until `n` workers take closures; errc::not_up (naming the
  /// absent ones) when they did not within `timeout`; the worker's error
  /// when one cannot train at all (errc::device_unavailable: its node lacks
  /// the devices asked for).
  [[nodiscard]] caf::error wait_for_workers(size_t n, std::chrono::milliseconds timeout = kJoinTimeout);
  /// On every worker, its dataset `name`: `spec` behind a leading shard op
  /// (worker w of the W declared reads examples w, w+W, ...), or with
  /// `whole` the same `spec` everywhere (exactly-once splits pick ranges of
  /// it); built now on the workers that are up, on the others when they
  /// join. Checks the features against the model; returns the DatasetInfo
  /// of the first built.
  [[nodiscard]] caf::expected<pb::DatasetInfo> create_per_worker_dataset(const std::string& name,
                                                                         const pb::DatasetSpec& spec,
                                                                         bool whole = false);

  /// What create_per_worker_dataset returned for `name`, or nullptr.
  const pb::DatasetInfo* dataset_info(const std::string& name) const;

  /// Takes worker `worker`, served by the node at host:port, into the job
  /// (a declared one: dial it now). errc::refused when it is in the job
  /// already, when joins are closed, or when the job's data is sharded
  /// statically and the topology does not declare it.
  [[nodiscard]] caf::error add_worker(uint32_t worker, const std::string& host, uint16_t port);
  /// Drains worker `worker` (its closures finish and their pushes are
  /// acknowledged; it gets no new ones) and takes it out of the job; its node exits.
  [[nodiscard]] caf::error remove_worker(uint32_t worker);
  /// Serves the topology's coordinator node from this process (a node
  /// actor: Hello, status, and JoinJob for `actorps node --join`); the port.
  [[nodiscard]] caf::expected<uint16_t> accept_joins();
  /// The job is finishing: joins are refused from now on.
  void close_joins();
  /// The job is over: joins closed, and every node of the topology (and
  /// every worker node that joined from outside it) stops and exits 0;
  /// nodes that cannot be told are logged.
  void end_job(const std::string& reason);

  remote_value schedule(const std::string& function, values args, schedule_options options = {});
  [[nodiscard]] caf::error join();
  bool done();
  /// Hands out no new closure until resume() (but the rest of rounds
  /// begun); returns once none runs, when the shards hold the updates of
  /// exactly the closures that finished. What a consistent checkpoint pulls.
  void hold();
  void resume();

  /// The workers the topology declares (each one's proxy exists from create_workers on).
  size_t num_workers() const;
  /// Workers taking closures now.
  size_t live_workers() const;
  /// Closures each worker answered so far, by worker index.
  std::map<uint32_t, uint64_t> closures_by_worker() const;
  /// Drains the ps tasks whose node asked to leave (SIGTERM on a PS node;
  /// actors/coordinator/membership.hpp) with placement().remove_ps, and answers each
  /// node (a refusal too: the node then stops as it would have). `fit`
  /// calls it through the ps_leaves callback (callbacks.hpp).
  [[nodiscard]] caf::error drain_leaving_ps();
  /// The job's PS administration: its variables on the shards, moves,
  /// splits, ps tasks added and drained (actors/placement/ps_placement.hpp).
  ps_placement& placement() const;
  /// The coordinator process's metrics (actors/metrics/coordinator_metrics.hpp).
  metrics::registry& metrics() const;
  /// The workers and shards it lost and got back (actors/metrics/recovery_log.hpp).
  const metrics::recovery_log& recoveries() const;

 private:
  struct impl;
  explicit cluster_coordinator(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

/// Tells every node of `spec` but the coordinator's that the job is over
/// (pb::EndJob: each stops and exits 0), as the coordinator `from`; nodes
/// that cannot be told are logged. What end_job does, also for a chief that
/// failed before it had a cluster_coordinator.
void end_job_on_nodes(caf::scoped_actor& from, const cluster_spec& spec, const std::string& reason);

}  // namespace actorps
