// pb::Value constructors for closure arguments and results: what the
// coordinator schedules (c->schedule("train_step", {per_worker_dataset("train"),
// integer_value(10)})) and what worker functions return.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "messages/train.pb.h"

namespace actorps {

inline pb::Value integer_value(int64_t x) {
  pb::Value v;
  v.set_integer(x);
  return v;
}

inline pb::Value real_value(double x) {
  pb::Value v;
  v.set_real(x);
  return v;
}

inline pb::Value bytes_value(std::string bytes) {
  pb::Value v;
  v.set_data(std::move(bytes));
  return v;
}

inline pb::Value per_worker_dataset(std::string name) {
  pb::Value v;
  v.set_per_worker_dataset(std::move(name));
  return v;
}

}  // namespace actorps
