// The reading side of the metrics: fetching a node's /metrics and parsing
// Prometheus' text format into samples, with the sums and histogram
// quantiles that `actorps top` and the tests read off them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

namespace actorps::metrics {

using labels = std::map<std::string, std::string>;

struct sample {
  std::string name;  // with its _bucket/_sum/_count suffix
  labels labels_;
  double value = 0;
};

/// Parses the text exposition format: comments and blank lines skipped;
/// errc::invalid_argument naming the line when one is malformed.
[[nodiscard]] caf::expected<std::vector<sample>> parse_text(std::string_view text);

/// The body of GET http://host:port`target` (a path and query, encoded);
/// errc::unreachable when it does not answer 200 in `timeout`.
[[nodiscard]] caf::expected<std::string> http_get(const std::string& host, uint16_t port, const std::string& target,
                                                  std::chrono::milliseconds timeout);

/// GET http://host:port/metrics as it came.
[[nodiscard]] caf::expected<std::string> fetch_text(const std::string& host, uint16_t port,
                                                    std::chrono::milliseconds timeout);

/// The same, parsed.
[[nodiscard]] caf::expected<std::vector<sample>> scrape(const std::string& host, uint16_t port,
                                                        std::chrono::milliseconds timeout);

/// The sum of the samples named `name` whose labels include `match`.
double sum(const std::vector<sample>& samples, const std::string& name, const labels& match = {});

/// The q-quantile of histogram `name` (its _bucket samples matching
/// `match`, summed over the rest), interpolated within the bucket as
/// Prometheus' histogram_quantile does; 0 without observations.
double quantile(const std::vector<sample>& samples, const std::string& name, double q, const labels& match = {});

}  // namespace actorps::metrics
