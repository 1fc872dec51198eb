// Checks shared by the TOML and TF_CONFIG loaders. Each returns an empty
// string when the input is fine, else what is wrong, for the caller to
// prefix with where it was found.
#pragma once

#include <string>

#include "config/cluster_spec.hpp"

namespace actorps {

/// A host name, an IPv4 literal or an IPv6 literal (bracketed in TF_CONFIG addresses).
std::string check_host(const std::string& host);

/// Cross-field rules of runtime_options.
std::string check_runtime(const runtime_options& rt);

/// Whole-cluster rules: non-empty, at most one coordinator (exactly one
/// with `needs_coordinator`).
std::string check_cluster(const cluster_spec& spec, bool needs_coordinator = true);

}  // namespace actorps
