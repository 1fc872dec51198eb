#include "messages/errors.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace actorps {
namespace {

constexpr caf::atom_value kCategory = caf::atom("actorps");  // CAF_ERROR_CODE_ENUM's, in errors.hpp

}  // namespace

std::string to_string(errc code) {
  switch (code) {
    case errc::invalid_config: return "invalid_config";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_admitted: return "not_admitted";
    case errc::device_filter: return "device_filter";
    case errc::protocol_mismatch: return "protocol_mismatch";
    case errc::unreachable: return "unreachable";
    case errc::timeout: return "timeout";
    case errc::io_error: return "io_error";
    case errc::internal: return "internal";
    case errc::unknown_variable: return "unknown_variable";
    case errc::bad_tensor: return "bad_tensor";
    case errc::out_of_range: return "out_of_range";
    case errc::forbidden: return "forbidden";
    case errc::too_large: return "too_large";
    case errc::too_busy: return "too_busy";
    case errc::cancelled: return "cancelled";
    case errc::replaced: return "replaced";
    case errc::not_up: return "not_up";
    case errc::refused: return "refused";
    case errc::stale: return "stale";
    case errc::device_unavailable: return "device_unavailable";
    case errc::stale_routing: return "stale_routing";
    case errc::moved: return "moved";
    case errc::busy: return "busy";
    case errc::no_standby: return "no_standby";
    case errc::duplicate: return "duplicate";
    case errc::out_of_order: return "out_of_order";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), kCategory, caf::make_message(std::move(message))};
}

std::string describe(const caf::error& err) {
  if (!err) return "no error";
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
    auto text = ctx.get_as<std::string>(0);
    if (is_actorps_error(err)) return text;
    return to_string(static_cast<caf::sec>(err.code())) + ": " + text;
  }
  if (err.category() == caf::atom("system"))
    return to_string(static_cast<caf::sec>(err.code())) + (ctx.empty() ? "" : " " + to_string(ctx));
  return to_string(err);
}

bool is_actorps_error(const caf::error& err) { return err.category() == kCategory; }

errc code_of(const caf::error& err) {
  if (is_actorps_error(err)) return static_cast<errc>(err.code());
  const bool timed_out = err == caf::sec::request_timeout || err == caf::sec::connection_timeout;
  return timed_out ? errc::timeout : errc::unreachable;
}

caf::error in_context(const caf::error& err, const std::string& where) {
  if (!err) return err;
  return make_error(code_of(err), where + ": " + describe(err));
}

int exit_code(const caf::error& err) {
  switch (code_of(err)) {
    case errc::invalid_config:
    case errc::invalid_argument:
    case errc::protocol_mismatch:
    case errc::device_filter:
    case errc::device_unavailable: return 2;
    case errc::unreachable:
    case errc::timeout:
    case errc::not_up:
    case errc::too_busy:
    case errc::stale_routing:
    case errc::moved:
    case errc::busy:
    case errc::no_standby:
    case errc::out_of_order: return kExitRetryable;
    default: return 1;
  }
}

}  // namespace actorps
