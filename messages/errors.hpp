// actorps's one error vocabulary. Codes travel inside caf::error (category
// "actorps") across the wire; the context carries one human-readable string
// that names the input and the knob, e.g. "shard 3 not found (num_shards is 2)".
#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/make_message.hpp>  // CAF_ERROR_CODE_ENUM's context() calls make_message unqualified
#include <caf/message.hpp>

namespace actorps {

enum class errc : uint8_t {
  invalid_config = 1,  // bad topology / job file or TF_CONFIG
  invalid_argument,    // bad command-line argument
  not_admitted,        // request before Hello, or Hello refused
  device_filter,       // a connection the device filters forbid
  protocol_mismatch,   // peer speaks another protocol version or cluster
  unreachable,         // cannot connect to a node
  timeout,             // a remote request ran past its deadline
  io_error,            // a file or socket operation failed
  internal,            // a broken invariant: a bug
  unknown_variable,    // a PS request names a variable the shard does not hold
  bad_tensor,          // wrong dtype, shape or byte length for the variable
  out_of_range,        // a row id or element range outside the variable
  forbidden,           // an admitted peer asked for what its role may not do
  too_large,           // a request over runtime.max_message_bytes
  too_busy,            // a peer holds runtime.max_in_flight_per_peer requests already
  cancelled,           // a queued closure dropped because an earlier one failed (TF's semantics)
  replaced,            // a worker stopped to be respawned over restored PS shards
  not_up,              // the worker has not joined (yet): what it needs is done when it does
  refused,             // a join the coordinator turned down (task taken, job finishing, ...)
  stale,               // a request of a round already over (a dataset's next batch of a split read before)
  device_unavailable,  // a worker's node lacks the devices the job asks for ([training] device, devices_per_worker)
  stale_routing,       // a request reached a shard that does not serve it (a backup): the routing table moved on
  moved,               // a request named a variable shard that moved to another PS task (the message names it)
  busy,                // a shard moves one of its variables already, or a ps task is being restored or added
  no_standby,          // a ps task to add, and no free node of role "standby" to serve it
  duplicate,           // a backup has the change its primary forwarded already: answered, not applied again
  out_of_order,        // a change forwarded past one its backup never got: the backup missed changes
};

std::string to_string(errc code);

/// Builds an actorps error with its message.
[[nodiscard]] caf::error make_error(errc code, std::string message);

/// The message of an error, whatever its category: our own context string
/// for actorps errors, CAF's rendering for the rest.
[[nodiscard]] std::string describe(const caf::error& err);

/// Whether `err` is one of our own errc codes: an actorps peer (or this
/// process) answered and refused, as opposed to CAF reporting a lost link,
/// a receiver that is down or a deadline that passed.
[[nodiscard]] bool is_actorps_error(const caf::error& err);

/// An error's code in our vocabulary: an actorps error's own; a CAF
/// request or connection timeout is errc::timeout; any other CAF error
/// (a lost link, a receiver that is down) errc::unreachable.
[[nodiscard]] errc code_of(const caf::error& err);

/// `err` with `where` in front of its message, its code kept: an actorps
/// error stays what it was (a dataset's invalid_config stays one), a CAF
/// request timeout becomes errc::timeout, any other CAF error unreachable.
[[nodiscard]] caf::error in_context(const caf::error& err, const std::string& where);

/// Exit code of a run that could not go on, as TFJob's `ExitCode` restart
/// policy reads it: below 128 permanent (restarting will not help), from
/// 128 retryable. A lost or unreachable peer, or one that timed out:
/// kExitRetryable (EX_TEMPFAIL + 128). A signal: 128 + its number.
constexpr int kExitRetryable = 128 + 75;

/// Process exit code for an error: 2 for bad input (config, arguments,
/// refused by the cluster's rules, devices a node lacks), kExitRetryable for a peer lost,
/// unreachable or too slow, 1 for the rest (bad data, a bug, ...).
[[nodiscard]] int exit_code(const caf::error& err);

}  // namespace actorps

CAF_ERROR_CODE_ENUM(actorps::errc, "actorps")
