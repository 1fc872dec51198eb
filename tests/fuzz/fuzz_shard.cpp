// libFuzzer target: a PS shard's decode-and-validate path. The first byte
// picks the message (Pull, Push, SparsePull, SparsePush, Assign,
// CreateVariables, SetLearningRate), the rest is its wire form, decoded as
// a receiving node would and sent to a live shard holding a dense and a
// sparse variable. Whatever the message, the shard must answer it (a value
// or a typed error) and still answer the next one: a crash, a hang or a
// shard that stops answering is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/shard/ps_shard.hpp"
#include "actors/net/request_now.hpp"
#include "actors/net/system_config.hpp"
#include "tests/ps_check.hpp"

namespace {

using namespace actorps;

struct fixture : test::shard_system {

  fixture() {
    google::protobuf::SetLogHandler(nullptr);  // undecodable inputs are dropped, not logged
    pb::Consistency c;
    c.set_mode(pb::Consistency::ASYNC);
    shard = spawn_shard(0, c);
    pb::CreateVariables create;
    *create.add_variables() = test::variable_spec("w", {8, 4}, pb::Optimizer::ADAM, 0.1f);
    *create.add_variables() = test::variable_spec("table", {100, 8}, pb::Optimizer::ADAGRAD, 0.1f);
    if (!request_now<pb::Created>(self, shard, std::chrono::seconds(5), create)) std::abort();
  }

  template <class Msg, class Reply>
  void deliver(const uint8_t* data, size_t size) {
    Msg msg;
    if (!msg.ParseFromArray(data, int(size))) return;  // the node drops what does not decode
    (void)request_now<Reply>(self, shard, std::chrono::seconds(5), msg);
    if (!request_now<pb::ShardStats>(self, shard, std::chrono::seconds(5), pb::ShardStatsRequest{})) std::abort();
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
