// Typed reads out of a parsed TOML document: every mismatch becomes an
// error naming file:line:column, the key path and what was expected.
#pragma once

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "messages/errors.hpp"

namespace actorps {

inline const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

// Reads typed values out of one parsed document, turning every mismatch into
// an error that points at the offending line.
class reader {
 public:
  explicit reader(std::string_view source) : source_(source) {}

  /// "file:line:column: path", where `at` is: what every error starts with.
  std::string where(const toml::node& at, const std::string& path) const {
    auto& pos = at.source().begin;
    std::ostringstream out;
    out << source_ << ":" << pos.line << ":" << pos.column << ": " << path;
    return out.str();
  }

  caf::error fail(const toml::node& at, const std::string& path, const std::string& what) const {
    return make_error(errc::invalid_config, where(at, path) + ": " + what);
  }

  // Rejects keys of `table` not in `known` (typos must not pass silently).
  caf::error only_keys(const toml::table& table, const std::string& path,
                       const std::vector<std::string_view>& known) const {
    for (auto&& [key, value] : table) {
      if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
        std::string list;
        for (auto k : known) list += std::string(list.empty() ? "" : ", ") + std::string(k);
        return fail(value, path + "." + std::string(key.str()), "unknown key (expected one of: " + list + ")");
      }
    }
    return caf::none;
  }

  caf::error get(const toml::table& t, const std::string& path, const char* key, std::string& out) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto* v = n->as_string();
    if (v == nullptr) return fail(*n, path + "." + key, std::string("expected a string, got ") + type_name(*n));
    out = v->get();
    return caf::none;
  }

  /// An integer key within [lo, hi], stored into any integer type.
  template <class Int>
  std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, caf::error> get(
      const toml::table& t, const std::string& path, const char* key, Int& out, int64_t lo, int64_t hi) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto* v = n->as_integer();
    if (v == nullptr) return fail(*n, path + "." + key, std::string("expected an integer, got ") + type_name(*n));
    if (v->get() < lo || v->get() > hi)
      return fail(*n, path + "." + key,
                  "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " +
                      std::to_string(v->get()));
    out = static_cast<Int>(v->get());
    return caf::none;
  }

  /// A number key (integers accepted too).
  caf::error get(const toml::table& t, const std::string& path, const char* key, float& out) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto v = n->value<double>();
    if (!v) return fail(*n, path + "." + key, std::string("expected a number, got ") + type_name(*n));
    out = float(*v);
    return caf::none;
  }

  caf::error get(const toml::table& t, const std::string& path, const char* key, bool& out) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    auto* v = n->as_boolean();
    if (v == nullptr) return fail(*n, path + "." + key, std::string("expected true or false, got ") + type_name(*n));
    out = v->get();
    return caf::none;
  }

  /// A string key that must be one of `choices` (name -> value).
  template <class T>
  caf::error choose(const toml::table& t, const std::string& path, const char* key, T& out,
                    std::initializer_list<std::pair<const char*, T>> choices) const {
    auto* n = t.get(key);
    if (n == nullptr) return caf::none;
    std::string list;
    for (auto& [name, value] : choices) list += std::string(list.empty() ? "" : ", ") + "\"" + name + "\"";
    if (auto* v = n->as_string())
      for (auto& [name, value] : choices)
        if (v->get() == name) {
          out = value;
          return caf::none;
        }
    return fail(*n, path + "." + key, "expected one of " + list);
  }

 private:
  std::string source_;
};

/// Parses `text`; a syntax error names source:line:column.
inline caf::expected<toml::table> parse_document(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    auto& pos = e.source().begin;
    std::ostringstream out;
    out << source << ":" << pos.line << ":" << pos.column << ": TOML syntax error: " << e.description();
    return make_error(errc::invalid_config, out.str());
  }
}

/// The whole file, or an error naming it.
inline caf::expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::invalid_config, path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace actorps
