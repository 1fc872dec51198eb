// A stand-in for an actor whose requests pass through an injected fault
// (fault_injector.hpp), for senders that cannot route each request
// themselves: the coordinator's blocking calls to a PS shard take it in
// the shard's place while the fault lasts (ps_keeper.hpp). Every message
// it gets goes to the target as the sender sent it, unless the fault says
// otherwise: lost (never arrives: the sender's deadline passes), its
// answer lost (the target gets it from the link, whose answer is dropped),
// duplicated (the target gets it twice, the sender one answer), delayed or
// reordered (held back). The fault's summary is logged when it ends, as
// "<who>: injected fault on <what> over: ...".
#pragma once

#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/net/atoms.hpp"
#include "messages/wire.hpp"

namespace actorps {

/// The link's own contract: its timers (a held-back message is due). Any
/// other message passes to the target as sent, so its users hold the link
/// as the target's handle (the keeper: a ps_shard_actor), and the compiler
/// checks what they send it against the target's interface.
using lossy_link_actor = caf::typed_actor<caf::reacts_to<link_timer_atom, uint64_t>>;

/// The link to `target` under `fault` (its drop, replies, duplicate,
/// reorder, delay_ms and duration_ms), linked to `owner`: it stops a minute
/// after the fault ends, or when its owner stops, whichever comes first (a
/// process whose owner is done never waits for a link at its shutdown).
lossy_link_actor spawn_lossy_link(caf::actor_system& sys, const caf::actor& owner, caf::actor target,
                                  const pb::InjectFault& fault, const std::string& who, const std::string& what);

}  // namespace actorps
