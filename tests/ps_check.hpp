// Helpers for PS tests: variable specs, float slices as bytes, and blocking
// requests that return expected values.
#pragma once

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/shard/ps_shard.hpp"
#include "messages/wire.hpp"

namespace actorps::test {

/// An actor system in this process with room for PS shards (tests, fuzzers),
/// spawned and stopped by `self`, their parent.
struct shard_system {
  runtime_options rt;
  system_config cfg{rt};
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  peer_table_ptr peers = std::make_shared<peer_table>(rt);
  ps_shard_actor shard;

  ps_shard_actor spawn_shard(uint32_t index, pb::Consistency c) {
    return spawn_ps_shard(sys, {index, std::move(c), 0, peers, self->address(), false, nullptr, {}});
  }
  void stop(const ps_shard_actor& s) { self->send_exit(s, caf::exit_reason::user_shutdown); }
};

inline pb::VariableSpec variable_spec(const std::string& name, std::vector<int64_t> shape,
                                      pb::Optimizer::Kind kind = pb::Optimizer::SGD, float lr = 0.5f) {
  pb::VariableSpec v;
  v.set_name(name);
  v.set_dtype(pb::FLOAT32);
  for (auto d : shape) v.add_shape(d), v.add_full_shape(d);
  v.mutable_optimizer()->set_kind(kind);
  v.mutable_optimizer()->set_learning_rate(lr);
  return v;
}

inline pb::TensorSlice slice(const std::string& name, const std::vector<float>& values, int64_t offset = 0) {
  pb::TensorSlice s;
  s.set_name(name);
  s.set_dtype(pb::FLOAT32);
  s.set_offset(offset);
  s.set_count(int64_t(values.size()));
  s.set_data(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  return s;
}

inline std::vector<float> floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

inline pb::Push push(uint32_t worker, int64_t step, std::vector<pb::TensorSlice> grads) {
  pb::Push p;
  p.set_worker(worker);
  p.set_step(step);
  for (auto& g : grads) *p.add_gradients() = std::move(g);
  return p;
}

/// A sparse push of `g` to rows `ids` (of `dim` floats) of shard `name`, keyed by `closure`.
inline pb::SparsePush rows_push(uint64_t closure, const std::string& name, std::vector<int64_t> ids, int dim, float g) {
  pb::SparsePush p;
  p.mutable_closure_step()->set_closure(closure);
  auto& rows = *p.mutable_gradient();
  rows.set_name(name);
  rows.set_dim(dim);
  for (auto id : ids) rows.add_ids(id);
  std::vector<float> data(ids.size() * size_t(dim), g);
  rows.set_data(reinterpret_cast<const char*>(data.data()), data.size() * 4);
  return p;
}

/// request_now with the tests' default deadline.
template <class Reply, class Handle, class Request>
caf::expected<Reply> call(caf::scoped_actor& self, const Handle& to, const Request& req,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return request_now<Reply>(self, to, timeout, req);
}

}  // namespace actorps::test
