// Where each CAF type-ID block of actorps starts: the wire's (wire.hpp)
// and one per library for the tags of messages between one process's own
// actors (CAF_ADD_ATOM in that library's atoms.hpp). Each block owns the
// 20 IDs from its first (the wire's 200), so no two overlap; a new block
// takes the next free offset here.
//
// In CAF 0.17.6 an atom takes no ID (CAF_ADD_ATOM declares a type `name`
// and a value `name_v`, nothing to register: no init_global_meta_objects
// in this version): an atom is its text (at most 10 characters), and two
// atoms of the same text are one type, whatever their blocks. So no text
// may appear twice: `grep -rh CAF_ADD_ATOM` over the blocks below shows
// them all.
#pragma once

#include <caf/type_id.hpp>

namespace actorps::type_id_block {

constexpr caf::type_id_t wire = caf::first_custom_type_id;               // messages/wire.hpp
constexpr caf::type_id_t net = caf::first_custom_type_id + 200;          // actors/net/atoms.hpp
constexpr caf::type_id_t worker = caf::first_custom_type_id + 220;       // actors/worker/atoms.hpp
constexpr caf::type_id_t placement = caf::first_custom_type_id + 240;    // actors/placement/atoms.hpp
constexpr caf::type_id_t coordinator = caf::first_custom_type_id + 260;  // actors/coordinator/atoms.hpp
constexpr caf::type_id_t faults = caf::first_custom_type_id + 280;       // actors/faults/atoms.hpp
constexpr caf::type_id_t tests = caf::first_custom_type_id + 300;        // tests/actor_test.hpp
constexpr caf::type_id_t bench = caf::first_custom_type_id + 320;        // apps/bench_rtt.cpp
constexpr caf::type_id_t shard = caf::first_custom_type_id + 340;        // actors/shard/atoms.hpp

}  // namespace actorps::type_id_block
