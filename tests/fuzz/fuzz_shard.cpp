// libFuzzer target: a PS shard's decode-and-validate path. The first byte
// picks the message (Pull, Push, SparsePull, SparsePush, Assign,
// CreateVariables, SetLearningRate), the rest is its wire form, decoded as
// a receiving node would and sent to a live shard holding a dense and a
// sparse variable, and handed to a plain shard_core holding the same. Whatever
// the message, the shard must answer it (a value or a typed error) and still
// answer the next one, and the actor and the core must hold the same values
// afterwards (the actor is a shell over the core's rules): a crash, a hang,
// a shard that stops answering or a difference is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "actors/shard/ps_shard.hpp"
#include "actors/shard/shard_core.hpp"
#include "tests/ps_check.hpp"

namespace {

using namespace actorps;

pb::Consistency async_mode() {
  pb::Consistency c;
  c.set_mode(pb::Consistency::ASYNC);
  return c;
}

// The plain core's handling of each message, as the actor does it.
void handle(shard_core& core, const pb::Pull& m) {
  if (!core.check(m)) (void)core.read(m);
}
void handle(shard_core& core, const pb::Push& m) {
  if (!core.check(m)) (void)core.apply(m);
}
void handle(shard_core& core, const pb::SparsePull& m) { (void)core.read_rows(m); }
void handle(shard_core& core, const pb::SparsePush& m) { (void)core.apply_rows(m); }
void handle(shard_core& core, const pb::Assign& m) { (void)core.assign(m); }
void handle(shard_core& core, const pb::CreateVariables& m) { (void)core.create(m); }
void handle(shard_core& core, const pb::SetLearningRate& m) { (void)core.set_learning_rate(m); }

struct fixture : test::shard_system {
  shard_core core{0, async_mode(), 0};

  fixture() {
    google::protobuf::SetLogHandler(nullptr);  // undecodable inputs are dropped, not logged
    shard = spawn_shard(0, async_mode());
    pb::CreateVariables create;
    *create.add_variables() = test::variable_spec("w", {8, 4}, pb::Optimizer::ADAM, 0.1f);
    *create.add_variables() = test::variable_spec("table", {100, 8}, pb::Optimizer::ADAGRAD, 0.1f);
    if (!request_now<pb::Created>(self, shard, std::chrono::seconds(5), create) || !core.create(create)) std::abort();
  }

  template <class Msg, class Reply>
  void deliver(const uint8_t* data, size_t size) {
    Msg msg;
    if (!msg.ParseFromArray(data, int(size))) return;  // the node drops what does not decode
    (void)request_now<Reply>(self, shard, std::chrono::seconds(5), msg);
    handle(core, msg);
    auto actor_values = request_now<pb::Values>(self, shard, std::chrono::seconds(5), pb::Pull{});
    auto core_values = core.read(pb::Pull{});
    if (!actor_values || !core_values || actor_values->tensors_size() != core_values->tensors_size()) std::abort();
    for (int i = 0; i < actor_values->tensors_size(); ++i)
      if (actor_values->tensors(i).data() != core_values->tensors(i).data()) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fixture& f = *new fixture;  // never destroyed: CAF's shutdown at exit is not under test
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 7) {
    case 0: f.deliver<pb::Pull, pb::Values>(body, n); break;
    case 1: f.deliver<pb::Push, pb::PushAck>(body, n); break;
    case 2: f.deliver<pb::SparsePull, pb::Rows>(body, n); break;
    case 3: f.deliver<pb::SparsePush, pb::PushAck>(body, n); break;
    case 4: f.deliver<pb::Assign, pb::Assigned>(body, n); break;
    case 5: f.deliver<pb::CreateVariables, pb::Created>(body, n); break;
    default: f.deliver<pb::SetLearningRate, pb::LearningRateSet>(body, n); break;
  }
  return 0;
}
