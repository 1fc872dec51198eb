// The benchmarks' targets: each printed as one line,
//   target NAME: VALUE UNIT (goal OP BOUND)
// and, with `--record`, kept as a row of apps/MEASURED.md, one row per
// target name: a run replaces the rows of the targets it printed and keeps
// the others, sorted by name. The rows are parsed back from the printed
// lines, so the line format lives here only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace actorps::bench {

struct target {
  std::string name;   // e.g. closures_per_s
  std::string value;  // as printed: "823160", "0.91", "inf"
  std::string unit;   // "closures/s", "x", "%", or "" (a count, a ratio)
  std::string goal;   // OP BOUND: ">= 20000", "<= 1", "= 0"
};

/// The line of `t`: "target NAME: VALUE UNIT (goal OP BOUND)" (no unit: one space).
std::string format_target(const target& t);

/// A line format_target wrote, back; nullopt for any other line.
std::optional<target> parse_target(std::string_view line);

/// Prints `t`'s line on stdout and keeps it for record_targets.
void print_target(const target& t);

/// The lines print_target printed in this process, in order.
const std::vector<std::string>& printed_targets();

/// One row of MEASURED.md's table.
struct measured_row {
  target measured;
  std::string date;     // YYYY-MM-DD (UTC)
  std::string commit;   // `git rev-parse --short HEAD` of the source tree, or "unknown"
  std::string command;  // the command line that measured it
};

/// The rows of MEASURED.md's table (`markdown`: its text; `path` names it in errors).
[[nodiscard]] caf::expected<std::vector<measured_row>> parse_measured(const std::string& markdown,
                                                                      const std::string& path);

/// `markdown` (MEASURED.md's text; "" for a new file) with the row of each of
/// `rows`' targets replacing the row of the same name or added; every row
/// sorted by target name, the text around the table kept.
[[nodiscard]] caf::expected<std::string> update_measured(const std::string& markdown, const std::string& path,
                                                         const std::vector<measured_row>& rows);

/// Writes the targets printed so far into the file at `path` (created when
/// missing) as measured today by `command`, at the commit of `source_dir`.
[[nodiscard]] caf::error record_targets(const std::string& path, const std::string& command,
                                        const std::string& source_dir);

}  // namespace actorps::bench
