// The one place where protobuf messages meet CAF: every protobuf message
// crosses the wire as its serialized bytes, encoded as CAF encodes a
// std::string (element-wise inspection of repeated fields would be ~20x
// slower). On CAF's binary path the bytes are written into and parsed from
// CAF's own buffers: no intermediate string of a tensor's size.
#pragma once

#include <string>
#include <type_traits>

#include <google/protobuf/message_lite.h>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

namespace actorps::pb {

template <class T>
constexpr bool is_proto_v = std::is_base_of_v<google::protobuf::MessageLite, T>;

namespace detail {

/// Writes x as a length-prefixed byte block (the encoding of a std::string).
/// Into CAF's own buffer when appending to it (the BASP path): serialized in
/// place, with no intermediate string.
inline caf::error save_proto(caf::serializer& f, const google::protobuf::MessageLite& x) {
  size_t size = x.ByteSizeLong();
  auto* sink = dynamic_cast<caf::binary_serializer*>(&f);
  const size_t before = sink != nullptr ? sink->buf().size() : 0;
  if (auto err = f.begin_sequence(size)) return err;
  if (sink != nullptr && sink->buf().size() > before && size > 0) {
    auto& buf = sink->buf();
    const size_t at = buf.size();
    sink->skip(size);  // the buffer grew: the write position is its end
    x.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(buf.data() + at));
  } else if (size > 0) {
    std::string bytes = x.SerializeAsString();
    if (auto err = f.apply_raw(bytes.size(), bytes.data())) return err;
  }
  return f.end_sequence();
}

/// Reads what save_proto wrote; parsed straight from CAF's buffer when the
/// source is one.
inline caf::error load_proto(caf::deserializer& f, google::protobuf::MessageLite& x) {
  size_t size = 0;
  if (auto err = f.begin_sequence(size)) return err;
  bool parsed = false;
  if (auto* source = dynamic_cast<caf::binary_deserializer*>(&f)) {
    if (source->remaining() < size) return caf::make_error(caf::sec::end_of_stream);
    parsed = x.ParseFromArray(source->remainder().data(), int(size));
    source->skip(size);
  } else {
    std::string bytes(size, '\0');
    if (auto err = f.apply_raw(size, bytes.data())) return err;
    parsed = x.ParseFromString(bytes);
  }
  if (!parsed) return caf::make_error(caf::sec::invalid_argument, std::string("malformed ") + x.GetTypeName());
  return f.end_sequence();
}

}  // namespace detail

/// CAF inspection for every protobuf message type of namespace actorps::pb
/// (found through ADL). Saving writes the serialized bytes; loading parses
/// them and fails with sec::invalid_argument on malformed input.
template <class Inspector, class T>
std::enable_if_t<is_proto_v<T>, typename Inspector::result_type> inspect(Inspector& f, T& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    return detail::save_proto(f, x);
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    return detail::load_proto(f, x);
  } else {  // to_string and other inspectors that only read
    std::string bytes = x.SerializeAsString();
    return f(bytes);
  }
}

}  // namespace actorps::pb
