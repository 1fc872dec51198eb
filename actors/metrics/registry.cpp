#include "actors/metrics/registry.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

namespace actorps::metrics {

void gauge::add(double d) {
  double old = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(old, old + d, std::memory_order_relaxed)) {
  }
}

histogram::histogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double v) {
  const auto i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());  // v <= bound: le
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.add(v);
}

histogram::snapshot histogram::read() const {
  snapshot s;
  s.bounds = bounds_;
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  s.sum = sum_.value();
  return s;
}

const std::vector<double>& seconds_buckets() {
  static const std::vector<double> b = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
  return b;
}

const std::vector<double>& staleness_buckets() {
  static const std::vector<double> b = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256};
  return b;
}

namespace {

const char* type_name(kind k) {
  switch (k) {
    case kind::counter: return "counter";
    case kind::gauge: return "gauge";
    case kind::histogram: return "histogram";
  }
  return "untyped";
}

// Prometheus' float forms: +Inf, -Inf, NaN, else the shortest exact text.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// Label values: backslash, double quote and line feed escaped; HELP text:
// backslash and line feed.
std::string escaped(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// {a="x",b="y"} plus `extra` (le="..."); empty when there are none.
std::string label_text(const std::vector<std::string>& names, const std::vector<std::string>& values,
                       const std::string& extra = {}) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", names[i], escaped(values[i], true));
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? out : "{" + out + "}";
}

template <class F>
void header(std::string& out, const F& f, kind k) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name(), escaped(f.help(), false), f.name(), type_name(k));
}

template <class F, class Line>
void write_family(std::string& out, const F& f, kind k, Line line) {
  std::string body;
  f.each([&](const std::vector<std::string>& values, const auto& m) { line(body, values, m); });
  if (body.empty()) return;
  header(out, f, k);
  out += body;
}

}  // namespace

registry::entry& registry::find(const std::string& name, kind k, const std::vector<std::string>& labels) {
  auto i = families_.find(name);
  if (i == families_.end()) return families_[name] = entry{k, nullptr, nullptr, nullptr};
  auto same_labels = [&](const auto& f) { return f && f->labels() == labels; };
  if (i->second.k != k || !(same_labels(i->second.c) || same_labels(i->second.g) || same_labels(i->second.h)))
    throw std::logic_error("metric " + name + " registered twice with another type or labels");
  return i->second;
}

family<counter>& registry::counters(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(m_);
  auto& e = find(name, kind::counter, labels);
  if (!e.c) e.c = std::make_unique<family<counter>>(name, help, std::move(labels), nullptr);
  return *e.c;
}

family<gauge>& registry::gauges(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(m_);
  auto& e = find(name, kind::gauge, labels);
  if (!e.g) e.g = std::make_unique<family<gauge>>(name, help, std::move(labels), nullptr);
  return *e.g;
}

family<histogram>& registry::histograms(const std::string& name, const std::string& help,
                                        std::vector<std::string> labels, const std::vector<double>& bounds) {
  std::lock_guard<std::mutex> lock(m_);
  auto& e = find(name, kind::histogram, labels);
  if (!e.h) e.h = std::make_unique<family<histogram>>(name, help, std::move(labels), &bounds);
  return *e.h;
}

std::string registry::expose() const {
  std::lock_guard<std::mutex> lock(m_);
  std::string out;
  for (auto& family : families_) {
    const std::string& name = family.first;  // named, not bound: lambdas below capture it
    const entry& e = family.second;
    if (e.c)
      write_family(out, *e.c, kind::counter, [&](std::string& b, const auto& values, const counter& c) {
        b += fmt::format("{}{} {}\n", name, label_text(e.c->labels(), values), c.value());
      });
    if (e.g)
      write_family(out, *e.g, kind::gauge, [&](std::string& b, const auto& values, const gauge& g) {
        b += fmt::format("{}{} {}\n", name, label_text(e.g->labels(), values), number(g.value()));
      });
    if (e.h)
      write_family(out, *e.h, kind::histogram, [&](std::string& b, const auto& values, const histogram& h) {
        auto s = h.read();
        const auto& labels = e.h->labels();
        for (size_t i = 0; i <= s.bounds.size(); ++i) {
          auto le = "le=\"" + (i < s.bounds.size() ? number(s.bounds[i]) : std::string("+Inf")) + "\"";
          b += fmt::format("{}_bucket{} {}\n", name, label_text(labels, values, le), s.cumulative[i]);
        }
        b += fmt::format("{}_sum{} {}\n", name, label_text(labels, values), number(s.sum));
        b += fmt::format("{}_count{} {}\n", name, label_text(labels, values), s.cumulative.back());
      });
  }
  return out;
}

registry& registry_of(const caf::actor_system& sys) {
  if (auto* h = dynamic_cast<const holder*>(&sys.config())) return h->metrics;
  static registry shared;
  return shared;
}

}  // namespace actorps::metrics
