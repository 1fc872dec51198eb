// Admission with [security]: TLS proves a peer holds some certificate of
// the cluster CA; the Hello proves which task it is. The caller signs its
// Hello with its task's private key, and a node admits it only when the
// signature verifies with that task's certificate (the topology names the
// files) and is fresh: a worker's certificate cannot say Hello as the
// coordinator (whose requests spawn shards and workers).
#pragma once

#include <string>

#include <caf/error.hpp>

#include "config/cluster_spec.hpp"
#include "messages/cluster.pb.h"

namespace actorps {

/// Signs `hello` (its task's key per `spec`); nothing without [security].
[[nodiscard]] caf::error sign_hello(pb::Hello& hello, const cluster_spec& spec);
/// Signs `hello` with the private key in `key_file` (PEM).
[[nodiscard]] caf::error sign_hello_with(pb::Hello& hello, const std::string& key_file);
/// With [security]: the signature verifies with the certificate of the task
/// the Hello names, made within 5 minutes of now. Else nothing to check.
[[nodiscard]] caf::error verify_hello(const pb::Hello& hello, const cluster_spec& spec);

/// Everything a node checks of a Hello before it admits the caller: the
/// protocol version (errc::protocol_mismatch), the cluster name (the same),
/// a task the topology declares — or a worker task, which may join
/// (errc::not_admitted) — and verify_hello (errc::not_admitted).
[[nodiscard]] caf::error check_hello(const pb::Hello& hello, const cluster_spec& spec, uint32_t protocol_version);

}  // namespace actorps
