// A coordinator in the Python process (actorps.ClusterCoordinator's
// engine): an actor system and a cluster_coordinator connected to the
// job's nodes, with its variables, workers and "train" dataset.
#pragma once

#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/coordinator/cluster_coordinator.hpp"
#include "actors/net/system_config.hpp"
#include "config/job_config.hpp"

namespace actorps::py {

class session {
 public:
  /// Connects to the job's nodes (train::connect_job); the caller releases the GIL.
  [[nodiscard]] static caf::expected<std::unique_ptr<session>> connect(const job_spec& job);
  ~session();

  /// The coordinator; std::runtime_error once closed.
  cluster_coordinator& coordinator();
  const job_spec& job() const { return job_; }
  /// Stops every node of the job (pb::EndJob), once.
  void end_job(const std::string& reason);
  /// Stops the coordinator and its actor system now (the nodes stay: a
  /// later coordinator may take them), whoever still holds this session;
  /// the caller releases the GIL. Idempotent.
  void close();
  bool closed() const { return c_ == nullptr; }

 private:
  explicit session(const job_spec& job);
  job_spec job_;
  system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<cluster_coordinator> c_;
  bool ended_ = false;
};

}  // namespace actorps::py
