#include "apps/bench_record.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "actors/launch/subprocess.hpp"
#include "messages/errors.hpp"

namespace actorps::bench {
namespace {

constexpr std::string_view kPrefix = "target ";
constexpr std::string_view kGoal = " (goal ";
constexpr size_t kCells = 7;
const char* const kHeader = "| target | value | unit | goal | date | commit | command |";
const char* const kSeparator = "|---|---|---|---|---|---|---|";
const char* const kPreamble =
    "# Measured by the benchmarks\n"
    "\n"
    "Written by `actorps bench NAME --record` (apps/bench_record.cpp), not by hand:\n"
    "one row per target, from the `target` lines the run printed; a run replaces\n"
    "the rows of its targets and keeps the others. Each figure is one run's, on\n"
    "the machine and at the commit of its row. The hand-written figures with\n"
    "their context: [README.md](README.md#measured).\n"
    "\n";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A cell's text with its '|' escaped (a markdown table cell cannot hold one bare).
std::string escape(const std::string& cell) {
  std::string out;
  for (char c : cell) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// The cells of a table row ("| a | b \| c |" -> {"a", "b | c"}).
std::vector<std::string> cells_of(std::string_view row) {
  row = trim(row);
  if (!row.empty() && row.front() == '|') row.remove_prefix(1);
  if (!row.empty() && row.back() == '|' && (row.size() < 2 || row[row.size() - 2] != '\\')) row.remove_suffix(1);
  std::vector<std::string> cells(1);
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] == '\\' && i + 1 < row.size() && row[i + 1] == '|')
      cells.back() += row[++i];
    else if (row[i] == '|')
      cells.emplace_back();
    else
      cells.back() += row[i];
  }
  for (auto& c : cells) c = std::string(trim(c));
  return cells;
}

std::string row_of(const measured_row& r) {
  const auto& t = r.measured;
  std::string out = "|";
  for (const auto* cell : {&t.name, &t.value, &t.unit, &t.goal, &r.date, &r.commit, &r.command})
    out += " " + escape(*cell) + " |";
  return out;
}

// Where the table is in `lines`: its header's index and one past its last row
// (both lines.size() when the text has no table).
std::pair<size_t, size_t> table_in(const std::vector<std::string>& lines) {
  size_t header = 0;
  while (header < lines.size() && trim(lines[header]) != kHeader) ++header;
  if (header == lines.size()) return {header, header};
  size_t end = header + 1;
  while (end < lines.size() && trim(lines[end]).substr(0, 1) == "|") ++end;
  return {header, end};
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[16];
  return std::strftime(buf, sizeof(buf), "%Y-%m-%d", &utc) > 0 ? buf : "unknown";
}

std::string commit_of(const std::string& source_dir) {
  auto res =
      run_command({"git", "-C", source_dir, "rev-parse", "--short", "HEAD"}, std::chrono::seconds(10), "/dev/null");
  if (!res || res->exit_code != 0 || trim(res->out).empty()) return "unknown";
  return std::string(trim(res->out));
}

std::vector<std::string>& printed() {
  static std::vector<std::string> lines;
  return lines;
}

}  // namespace

std::string format_target(const target& t) {
  return fmt::format("target {}: {}{}{} (goal {})", t.name, t.value, t.unit.empty() ? "" : " ", t.unit, t.goal);
}

std::optional<target> parse_target(std::string_view line) {
  line = trim(line);
  if (line.substr(0, kPrefix.size()) != kPrefix || line.back() != ')') return std::nullopt;
  line.remove_prefix(kPrefix.size());
  const auto colon = line.find(": ");
  const auto goal = line.rfind(kGoal);
  if (colon == std::string_view::npos || goal == std::string_view::npos || goal < colon + 2) return std::nullopt;
  target t;
  t.name = std::string(line.substr(0, colon));
  t.goal = std::string(trim(line.substr(goal + kGoal.size(), line.size() - 1 - goal - kGoal.size())));
  const auto measured = trim(line.substr(colon + 2, goal - colon - 2));
  const auto space = measured.find(' ');
  t.value = std::string(measured.substr(0, space));
  if (space != std::string_view::npos) t.unit = std::string(trim(measured.substr(space)));
  if (t.name.empty() || t.name.find(' ') != std::string::npos || t.value.empty() || t.goal.empty()) return std::nullopt;
  return t;
}

void print_target(const target& t) {
  printed().push_back(format_target(t));
  std::printf("%s\n", printed().back().c_str());
  std::fflush(stdout);
}

const std::vector<std::string>& printed_targets() { return printed(); }

caf::expected<std::vector<measured_row>> parse_measured(const std::string& markdown, const std::string& path) {
  const auto lines = lines_of(markdown);
  const auto [header, end] = table_in(lines);
  std::vector<measured_row> rows;
  if (header + 1 < end && trim(lines[header + 1]) != kSeparator)
    return make_error(errc::invalid_config,
                      fmt::format("{}:{}: not the table's separator line {}", path, header + 2, kSeparator));
  for (size_t i = header + 2; i < end; ++i) {
    auto cells = cells_of(lines[i]);
    if (cells.size() != kCells)
      return make_error(errc::invalid_config, fmt::format("{}:{}: a row of {} cells, not {} ({})", path, i + 1,
                                                          cells.size(), kCells, kHeader));
    rows.push_back({{cells[0], cells[1], cells[2], cells[3]}, cells[4], cells[5], cells[6]});
  }
  return rows;
}

caf::expected<std::string> update_measured(const std::string& markdown, const std::string& path,
                                           const std::vector<measured_row>& rows) {
  auto old = parse_measured(markdown, path);
  if (!old) return old.error();
  std::map<std::string, measured_row> by_name;
  for (auto& r : *old) by_name[r.measured.name] = r;
  for (auto& r : rows) by_name[r.measured.name] = r;
  const auto lines = lines_of(markdown.empty() ? std::string(kPreamble) : markdown);
  const auto [header, end] = table_in(lines);
  std::string out;
  for (size_t i = 0; i < header; ++i) out += lines[i] + "\n";
  if (header == lines.size() && !lines.empty() && !trim(lines.back()).empty()) out += "\n";  // a new table
  out += std::string(kHeader) + "\n" + kSeparator + "\n";
  for (auto& [name, r] : by_name) out += row_of(r) + "\n";
  for (size_t i = end; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

caf::error record_targets(const std::string& path, const std::string& command, const std::string& source_dir) {
  if (printed().empty()) return make_error(errc::internal, "no target line printed: nothing to record in " + path);
  std::vector<measured_row> rows;
  const auto date = today_utc(), commit = commit_of(source_dir);
  for (auto& line : printed()) {
    auto t = parse_target(line);
    if (!t) return make_error(errc::internal, "a target line that does not parse back: " + line);
    rows.push_back({*t, date, commit, command});
  }
  std::string old;
  if (std::ifstream in(path); in) old.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  auto text = update_measured(old, path, rows);
  if (!text) return text.error();
  const auto temp = path + ".tmp";
  std::ofstream out(temp);
  out << *text;
  out.close();
  if (!out) return make_error(errc::io_error, "cannot write " + temp + ": " + std::strerror(errno));
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    return make_error(errc::io_error, "cannot replace " + path + ": " + std::strerror(errno));
  std::printf("recorded %zu target(s) in %s\n", rows.size(), path.c_str());
  return caf::none;
}

}  // namespace actorps::bench
