// A job file's text rewritten for a run of its own (`bench tta`, the soak):
// its output directories under that run's directory, a setting changed.
#pragma once

#include <regex>
#include <string>

namespace actorps {

/// `text` with its checkpoint_dir at DIR/ckpt and its log_dir at DIR/logs
/// (each only where the job sets one).
inline std::string with_outputs_in(const std::string& text, const std::string& dir) {
  auto out =
      std::regex_replace(text, std::regex(R"(\ncheckpoint_dir = [^\n]*)"), "\ncheckpoint_dir = \"" + dir + "/ckpt\"");
  return std::regex_replace(out, std::regex(R"(\nlog_dir = [^\n]*)"), "\nlog_dir = \"" + dir + "/logs\"");
}

/// `text` with the top-level `key = ...` lines of its tables set to `value` (where it sets the key).
inline std::string with_setting(const std::string& text, const std::string& key, const std::string& value) {
  return std::regex_replace(text, std::regex("\n" + key + R"( = [^\n]*)"), "\n" + key + " = " + value);
}

}  // namespace actorps
