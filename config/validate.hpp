// Checks shared by the TOML and TF_CONFIG loaders. Each returns none when
// the input is fine, else errc::invalid_config saying what is wrong, for
// the caller to put where it was found in front (in_context).
#pragma once

#include <string>

#include <caf/error.hpp>

#include "config/cluster_spec.hpp"

namespace actorps {

/// A host name, an IPv4 literal or an IPv6 literal (bracketed in TF_CONFIG addresses).
[[nodiscard]] caf::error check_host(const std::string& host);

/// Cross-field rules of runtime_options.
[[nodiscard]] caf::error check_runtime(const runtime_options& rt);

/// Whole-cluster rules: non-empty, at most one coordinator (exactly one
/// with `needs_coordinator`).
[[nodiscard]] caf::error check_cluster(const cluster_spec& spec, bool needs_coordinator = true);

}  // namespace actorps
