// Failure injection a user declares in a job file (`actorps chaos JOB`):
//
//   [[faults]]
//   kind = "kill"            # SIGKILL the task's node process ...
//   task = "worker:1"
//   at = [1.0, 4.0]          # ... at a time drawn from this range (seconds
//                            # after the nodes are up; a number: exactly then)
//   # at_step = 500          # ... or once the job has done this many steps
//
//   [[faults]]
//   kind = "pause"           # SIGSTOP, then SIGCONT after `duration` seconds
//   task = "ps:1"
//   at = 2.0
//   duration = [5.0, 10.0]
//
//   [[faults]]
//   kind = "drop"            # the worker loses `fraction` of its requests to
//   task = "worker:0"        # `peer` for `duration` seconds (each is sent
//   peer = "ps:0"            # again by the worker at its deadline, [runtime]
//                            # request_timeout_ms, twice at most (SYNC, SSP: no
//                            # deadline, after 500 ms of silence), as over a lossy link);
//                            # peer = "datasets": to its datasets (sent again at
//                            # each deadline); peer = "coordinator:0": the
//                            # coordinator's closures to it (again after 500 ms);
//                            # task = "ps:0", peer = "coordinator:0": the
//                            # coordinator's requests to that PS (checkpoint
//                            # pulls, restores; asked again at their deadline)
//   fraction = 0.05
//   at = 1.0
//   duration = 30.0
//
//   # replies = true         # ... or the replies to them (the shard applied
//                            # the request; sent again, it is a duplicate)
//   # packets = true         # ... or (--netns, nftables) `fraction` of the IP
//                            # packets from its host to the peer's: TCP
//                            # sends them again, late
//
//   [[faults]]
//   kind = "duplicate"       # `fraction` of the worker's requests to `peer`
//   task = "worker:0"        # delivered twice (a push applies once)
//   peer = "ps:1"
//   fraction = 0.05
//   at = 1.0
//   duration = 30.0
//
//   [[faults]]
//   kind = "reorder"         # `fraction` of them held back `delay_ms` while
//   task = "worker:0"        # later ones leave
//   peer = "ps:1"
//   fraction = 0.1
//   delay_ms = 20
//   at = 1.0
//   duration = 30.0
//
//   [[faults]]
//   kind = "partition"       # every packet between the hosts of `task` and
//   task = "worker:1"        # `peer` fails for `duration` seconds (with
//   peer = "ps:0"            # --netns; else, between a worker and a PS, the
//   at = 2.0                 # worker's requests to it are dropped)
//   duration = 3.0
//
//   [[faults]]
//   kind = "drop"            # a ps task's forwards, introductions and drops
//   task = "ps:0"            # to its backup (ps_replicas = 2; the backup
//   peer = "ps:1"            # lives on the next ps task's node): lost (the
//   fraction = 0.05          # primary drops the backup at its deadline and
//   at = 1.0                 # the coordinator re-adds it by snapshot),
//   duration = 3.0           # duplicated (applied once) or reordered (the
//                            # backup refuses the gap and is re-added)
//
//   [[faults]]
//   kind = "leave"           # SIGTERM the task's node: a worker drains and
//   task = "worker:1"        # leaves (actorps local restarts it: it joins
//   at = 2.0                 # again); a ps drains out of the job (async)
//
//   [[faults]]
//   kind = "add_ps"          # the coordinator adds a ps task on a free
//   at = 4.0                 # standby node (no task; async, ps_replicas = 1)
//
//   [[faults]]
//   kind = "delay"           # ... or holds each back `delay_ms`
//   task = "worker:1"
//   peer = "ps:1"
//   delay_ms = 50
//   at = 1.0
//   duration = 10.0
//
// The same seed gives the same plan.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "config/cluster_spec.hpp"

namespace actorps {

struct fault {
  enum class kind { kill, pause, drop, delay, partition, duplicate, reorder, leave, add_ps };
  kind what = kind::kill;
  task_id task;                 // add_ps: the coordinator (it adds the ps task)
  task_id peer;                 // drop, delay: the PS task or coordinator (a ps's: the coordinator or another ps);
                                // partition: a task on the other host
  bool datasets = false;        // drop, delay: the worker's requests to its datasets (peer: the worker)
  double fraction = 0;          // drop, duplicate, reorder
  bool replies = false;         // drop: the replies are lost, not the requests
  bool packets = false;         // drop: IP packets between the hosts (--netns), not messages
  uint32_t delay_ms = 0;        // delay, reorder
  double at_lo = 0, at_hi = 0;  // seconds after the nodes are up
  int64_t at_step = -1;         // >= 0: once the job has done this many steps instead
  double duration_lo = 0, duration_hi = 0;  // pause only
};

struct planned_fault {
  fault::kind what = fault::kind::kill;
  task_id task, peer;
  bool datasets = false;
  double fraction = 0;
  bool replies = false;
  bool packets = false;
  uint32_t delay_ms = 0;
  double at = 0;  // seconds (when at_step < 0)
  int64_t at_step = -1;
  double duration = 0;  // pause, drop
  uint64_t seed = 0;    // drop, duplicate, reorder: seeds which requests it picks
};

/// The [[faults]] of a job file's text; every task must be one of `spec`'s.
[[nodiscard]] caf::expected<std::vector<fault>> parse_faults(std::string_view text, std::string_view path,
                                                             const cluster_spec& spec);

/// Draws the times of `faults` from `seed`, in order of time.
std::vector<planned_fault> plan_faults(const std::vector<fault>& faults, uint64_t seed);

std::string to_string(const planned_fault& f);
/// The peer of a message fault as a job file names it ("ps:0", "coordinator:0", "datasets").
std::string peer_name(const planned_fault& f);

/// One round of a soak (`actorps chaos JOB --soak`): faults at fixed times
/// for that round's `actorps chaos`, and when the soak SIGKILLs that
/// coordinator (and runs the same command again) -- a fault no job file can
/// declare, since the coordinator carries out the plan.
struct soak_round {
  std::vector<fault> faults;
  double coordinator_kill_at = -1;  // seconds after the nodes are up; < 0: none
};

/// What a soak round's job can be put through.
struct soak_features {
  bool packets_dropped = false;  // the hosts run in network namespaces with nftables
  bool replicated = false;       // ps_replicas = 2: faults on a ps's traffic to its backup
  bool elastic = false;          // ps tasks drain out and are added (async, a standby node, ps_replicas = 1)
};

/// Round `round` (1, 2, ...) of the soak seeded `seed`, over a job that
/// trains about `window` seconds. The kinds come in turn, four per round, so
/// every three rounds hold each: a worker and a PS killed, a worker and a PS
/// paused, requests and replies dropped, requests duplicated, reordered and
/// delayed, a partition, the coordinator killed. Tasks, times, durations and
/// fractions are drawn; a message fault's pair is drawn among a worker's
/// requests to a PS task or its datasets and the coordinator's to a worker
/// or a PS task. A partition needs a worker and a PS on different
/// hosts and is otherwise a drop of every request (what it is without
/// namespaces). A twelfth kind drops 20% of the IP packets between a
/// worker's host and a PS's when `packets_dropped`, else 20% of that
/// worker's requests to the PS. Besides, every round a worker leaves
/// (SIGTERM: drained, restarted, joins again); a `replicated` round has a
/// ps killed (its shards fail over) and two faults on a ps's traffic to its
/// backup (drop, duplicate, reorder, lost replies in turn); an `elastic`
/// one a ps task drained out and one added.
soak_round draw_soak_round(const cluster_spec& spec, uint64_t seed, int round, double window,
                           soak_features features = {});

/// The rounds that hold every kind at least once (a soak runs at least these).
int soak_rounds_for_every_kind();

/// `f` (at fixed times) as a [[faults]] table of a job file.
std::string to_toml(const fault& f);

}  // namespace actorps
