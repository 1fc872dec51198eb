#include "actors/metrics/scrape.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <httplib.h>

#include "messages/errors.hpp"

namespace actorps::metrics {
namespace {

caf::error bad_line(size_t number, std::string_view line, const char* what) {
  return make_error(errc::invalid_argument,
                    "metrics line " + std::to_string(number) + ": " + what + ": " + std::string(line.substr(0, 200)));
}

// `name{a="x",b="y"}` from `line`; `at` moves past it.
caf::error parse_labels(std::string_view line, size_t& at, labels& out, size_t number) {
  ++at;  // '{'
  while (at < line.size() && line[at] != '}') {
    const auto eq = line.find('=', at);
    if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"')
      return bad_line(number, line, "expected label=\"value\"");
    std::string name(line.substr(at, eq - at)), value;
    size_t i = eq + 2;
    for (; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        ++i;
        value += line[i] == 'n' ? '\n' : line[i];
      } else {
        value += line[i];
      }
    }
    if (i >= line.size()) return bad_line(number, line, "unterminated label value");
    out[name] = value;
    at = i + 1;
    if (at < line.size() && line[at] == ',') ++at;
  }
  if (at >= line.size()) return bad_line(number, line, "expected '}'");
  ++at;
  return caf::none;
}

double parse_value(std::string_view text, bool& ok) {
  std::string s(text.substr(0, text.find(' ')));  // a timestamp may follow
  if (s == "+Inf") return ok = true, HUGE_VAL;
  if (s == "-Inf") return ok = true, -HUGE_VAL;
  if (s == "NaN") return ok = true, std::nan("");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  ok = !s.empty() && end == s.c_str() + s.size();
  return v;
}

bool includes(const labels& have, const labels& match) {
  for (auto& [k, v] : match) {
    auto i = have.find(k);
    if (i == have.end() || i->second != v) return false;
  }
  return true;
}

}  // namespace

caf::expected<std::vector<sample>> parse_text(std::string_view text) {
  std::vector<sample> out;
  size_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    auto end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    auto line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (line.empty() || line[0] == '#') continue;
    sample s;
    size_t at = line.find_first_of("{ ");
    if (at == std::string_view::npos || at == 0) return bad_line(number, line, "expected a metric name");
    s.name = std::string(line.substr(0, at));
    if (line[at] == '{')
      if (auto err = parse_labels(line, at, s.labels_, number)) return err;
    if (at >= line.size() || line[at] != ' ') return bad_line(number, line, "expected ' ' before the value");
    bool ok = false;
    s.value = parse_value(line.substr(at + 1), ok);
    if (!ok) return bad_line(number, line, "expected a number");
    out.push_back(std::move(s));
  }
  return out;
}

caf::expected<std::string> http_get(const std::string& host, uint16_t port, const std::string& target,
                                    std::chrono::milliseconds timeout) {
  httplib::Client client(host, port);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  auto res = client.Get(target.c_str());
  const auto where = host + ":" + std::to_string(port) + target;
  if (!res) return make_error(errc::unreachable, where + ": " + httplib::to_string(res.error()));
  if (res->status != 200) return make_error(errc::unreachable, where + ": HTTP " + std::to_string(res->status));
  return std::move(res->body);
}

caf::expected<std::string> fetch_text(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  return http_get(host, port, "/metrics", timeout);
}

caf::expected<std::vector<sample>> scrape(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  auto text = fetch_text(host, port, timeout);
  if (!text) return text.error();
  auto parsed = parse_text(*text);
  if (!parsed) return in_context(parsed.error(), host + ":" + std::to_string(port) + "/metrics");
  return parsed;
}

double sum(const std::vector<sample>& samples, const std::string& name, const labels& match) {
  double total = 0;
  for (auto& s : samples)
    if (s.name == name && includes(s.labels_, match)) total += s.value;
  return total;
}

double quantile(const std::vector<sample>& samples, const std::string& name, double q, const labels& match) {
  std::map<double, double> buckets;  // le -> cumulative count, summed over the other labels
  for (auto& s : samples) {
    if (s.name != name + "_bucket" || !includes(s.labels_, match)) continue;
    auto le = s.labels_.find("le");
    if (le == s.labels_.end()) continue;
    bool ok = false;
    const double bound = parse_value(le->second, ok);
    if (ok) buckets[bound] += s.value;
  }
  if (buckets.empty() || buckets.rbegin()->second <= 0) return 0;
  const double rank = q * buckets.rbegin()->second;
  double lower = 0, below = 0;
  for (auto& [bound, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(bound)) return lower;  // in the +Inf bucket: the highest finite bound
      return lower + (bound - lower) * (count > below ? (rank - below) / (count - below) : 0);
    }
    lower = bound, below = count;
  }
  return lower;
}

}  // namespace actorps::metrics
