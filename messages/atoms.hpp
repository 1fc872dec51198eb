// The tags of messages between one process's own actors (timers, wake-ups,
// coordinator internals). Declared with CAF 0.17.6's CAF_ADD_ATOM: each
// gives a type `name` and a value `name_v`. None crosses the wire except
// worker_timer, which a worker sends only to itself.
#pragma once

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

// clang-format off
CAF_BEGIN_TYPE_ID_BLOCK(actorps_atoms, caf::first_custom_type_id + 200)
  // worker: an injected fault's held-back request is due
  CAF_ADD_ATOM(actorps_atoms, actorps, worker_timer_atom, "wtimer")
  // a lossy link (actors/net/lossy_link.hpp): a held-back message is due
  CAF_ADD_ATOM(actorps_atoms, actorps, link_timer_atom, "lktimer")
  CAF_ADD_ATOM(actorps_atoms, actorps, worker_ready_atom, "wready")
  // a worker's bulk link (actors/worker/bulk_link.hpp): its thread ends
  CAF_ADD_ATOM(actorps_atoms, actorps, bulk_stop_atom, "bulkstop")
  // worker proxy (actors/coordinator/worker_proxy.hpp)
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_dataset_atom, "pxdataset")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_wake_atom, "pxwake")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_respawn_atom, "pxrespawn")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_pause_atom, "pxpause")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_shards_atom, "pxshards")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_dial_atom, "pxdial")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_timer_atom, "pxtimer")
  CAF_ADD_ATOM(actorps_atoms, actorps, proxy_lost_atom, "pxlost")
  // PS keeper (actors/placement/ps_keeper.hpp)
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_retry_atom, "kpretry")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_shards_atom, "kpshards")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_tick_atom, "kptick")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_lr_atom, "kplr")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_ckpt_atom, "kpckpt")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_proxy_atom, "kpproxy")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_rebuild_atom, "kprebuild")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_add_atom, "kpadd")
  CAF_ADD_ATOM(actorps_atoms, actorps, keeper_retire_atom, "kpretire")
  // membership (actors/coordinator/membership.hpp)
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_dataset_atom, "mbdataset")
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_add_atom, "mbadd")
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_remove_atom, "mbremove")
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_close_atom, "mbclose")
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_ps_leaving_atom, "mbpsleave")
  CAF_ADD_ATOM(actorps_atoms, actorps, membership_ps_left_atom, "mbpsleft")
  // fault-plan executor (actors/faults/chaos.hpp)
  CAF_ADD_ATOM(actorps_atoms, actorps, chaos_step_atom, "chstep")
  CAF_ADD_ATOM(actorps_atoms, actorps, chaos_tick_atom, "chtick")
  CAF_ADD_ATOM(actorps_atoms, actorps, chaos_end_atom, "chend")
  // bench rtt: a repetition ran past its deadline
  CAF_ADD_ATOM(actorps_atoms, actorps, watchdog_atom, "watchdog")
  // failure detector (actors/net/cluster_monitor.hpp)
  CAF_ADD_ATOM(actorps_atoms, actorps, probe_atom, "probe")
CAF_END_TYPE_ID_BLOCK(actorps_atoms)
// clang-format on
