// The [training] table of a job file, one row per key: its name, its
// default as TOML writes it, what it means, and how it is read. The
// reader and its list of known keys (an unknown key is an error that names
// file:line:column and the key) come from these rows, and test_config
// checks that each default is what a table without the key gives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>

#include "config/job_config.hpp"

namespace actorps {

struct training_reading;  // a [training] table being read (training_config.cpp)

struct training_key {
  const char* name;
  const char* fallback;  // the default as TOML writes it; nullptr: other keys or the cluster decide (see doc)
  const char* doc;       // what it means, its unit
  caf::error (*read)(training_reading& in, const char* key);  // its value into the options, when the table has it
};

/// Every [training] key, in the order an unknown key's error lists them.
const std::vector<training_key>& training_keys();

/// The [training] table of `text` (a job file; `path` names it in errors)
/// into `job.training`, checked against the rest of `job`: its cluster
/// (when it has one) and its [dataset].
[[nodiscard]] caf::error parse_training_toml(std::string_view text, const std::string& path, job_spec& job);

}  // namespace actorps
