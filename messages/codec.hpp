// The one place where protobuf messages meet CAF: every protobuf message
// crosses the wire as its serialized bytes (CAF serializes a std::string as a
// byte block; element-wise inspection of repeated fields would be ~20x slower).
#pragma once

#include <string>
#include <type_traits>

#include <google/protobuf/message_lite.h>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/sec.hpp>

namespace actorps::pb {

template <class T>
constexpr bool is_proto_v = std::is_base_of_v<google::protobuf::MessageLite, T>;

/// CAF inspection for every protobuf message type of namespace actorps::pb
/// (found through ADL). Saving writes the serialized bytes; loading parses
/// them and fails with sec::invalid_argument on malformed input.
template <class Inspector, class T>
std::enable_if_t<is_proto_v<T>, typename Inspector::result_type> inspect(Inspector& f, T& x) {
  if constexpr (Inspector::reads_state) {
    std::string bytes = x.SerializeAsString();
    return f(bytes);
  } else {
    std::string bytes;
    auto parse = caf::meta::load_callback([&]() -> caf::error {
      if (!x.ParseFromString(bytes))
        return caf::make_error(caf::sec::invalid_argument, std::string("malformed ") + x.GetTypeName());
      return caf::none;
    });
    return f(bytes, parse);
  }
}

}  // namespace actorps::pb
