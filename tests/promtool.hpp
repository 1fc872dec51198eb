// Prometheus' own checker for the text format the tests read: `promtool
// check metrics` (Debian's prometheus package, installed by tools/setup.sh).
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <utility>

#include <boost/test/unit_test.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/launch/subprocess.hpp"

namespace actorps::test {

/// promtool check metrics on `text`: its exit code and what it said.
inline std::pair<int, std::string> promtool_check(const std::string& text) {
  auto dir = make_temp_dir("promtool");
  std::ofstream(dir + "/m.txt") << text;
  auto res =
      run_command({"/bin/sh", "-c", "promtool check metrics < " + dir + "/m.txt 2>&1"}, std::chrono::seconds(30));
  BOOST_REQUIRE_MESSAGE(res, "cannot run promtool (tools/setup.sh --all installs Debian's prometheus package)");
  return {res->exit_code, res->out};
}

}  // namespace actorps::test
