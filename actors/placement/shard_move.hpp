// Moving one variable shard (a row range of a variable) from its PS task to
// another while training runs, as ps.proto MoveOut describes: the source
// freezes a copy and logs the changes it applies from then on; the copy
// goes to the target in chunks (a dynamic table's in pages of rows, in
// their eviction order), then the logged changes in rounds; at
// FINISH the source stops serving the shard (errc::moved, naming the
// target) and hands over its last changes; once the target replayed them,
// `switch_routing` points the job's routing at the target and the source
// frees the shard. Every change the source applied reaches the target
// once, in its order, under its push keys: none is lost or applied twice;
// before the switch the target's update count of the shard must equal the
// source's at FINISH, or the move is given up.
// The shard is unserved only from FINISH until the switch (`pause_s`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "messages/wire.hpp"

namespace actorps {

struct move_report {
  int64_t bytes = 0;     // values and optimizer slots copied (a dynamic table's rows: both)
  int catch_ups = 0;     // rounds of logged changes before FINISH
  int64_t changes = 0;   // logged changes replayed on the target, the last ones' included
  double copy_s = 0;     // BEGIN until FINISH
  double pause_s = 0;    // FINISH until the routing switched: requests naming the shard were redirected
  int64_t diverged = 0;  // updates the source applied that the target's copy lacks (< 0: holds more); a move
                         // whose copy diverges is given up before the switch (errc::internal)
};

/// The source's side of a move's step (READ: `count` elements at
/// `offset` of `slot`; FINISH: `to_ps`, the target).
pb::MoveOut move_step(pb::MoveOut::Step step, const std::string& name, int64_t offset = 0, int64_t count = 0,
                      uint32_t slot = 0, uint32_t to_ps = 0);

/// Who serves PS task `ps` now. With `lost` (the handle that failed to
/// answer), whoever replaced it once the job recovered that shard (a
/// promoted backup, a restore), or an error when none did.
using shard_finder = std::function<caf::expected<ps_shard_actor>(uint32_t ps, const ps_shard_actor* lost)>;

/// Moves shard `name` from ps task `from_ps` to `to_ps`, whose shards
/// `serving` finds. Requests time out after `timeout`. A failure before the
/// switch gives the move up on whoever serves each end by then (a backup
/// promoted meanwhile holds the moving state its primary forwarded: the
/// shard stays where it was, with every acknowledged update) and is
/// returned; after it, a source that cannot free its copy is logged.
/// `progress`, when given, gets what the move did, a failed one's too (a
/// diverged copy's count).
[[nodiscard]] caf::expected<move_report> move_shard(caf::scoped_actor& self, const shard_finder& serving,
                                                    const std::string& name, uint32_t from_ps, uint32_t to_ps,
                                                    std::chrono::milliseconds timeout,
                                                    const std::function<caf::error()>& switch_routing,
                                                    move_report* progress = nullptr);

}  // namespace actorps
