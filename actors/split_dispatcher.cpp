#include "actors/split_dispatcher.hpp"

#include <algorithm>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace actorps {
namespace {

struct dispatcher_state {
  static inline const char* name = "split_dispatcher";
  pb::SplitStatus status;

  uint64_t splits() const {
    auto& p = status.plan();
    return p.split_size() <= 0 ? 0 : uint64_t((p.examples() + p.split_size() - 1) / p.split_size());
  }
};

using dispatcher_ptr = split_dispatcher_actor::stateful_pointer<dispatcher_state>;

pb::SplitGrant grant(dispatcher_ptr self, uint32_t worker) {
  auto& st = self->state.status;
  pb::SplitGrant g;
  uint64_t id = 0;
  if (st.queued_size() > 0) {
    id = st.queued(0);
    st.mutable_queued()->erase(st.mutable_queued()->begin());
    st.set_reissued(st.reissued() + 1);
  } else if (st.next_fresh() < self->state.splits()) {
    id = st.next_fresh();
    st.set_next_fresh(id + 1);
  } else {
    g.set_end(true);
    return g;
  }
  (*st.mutable_assigned())[id] = worker;
  const int64_t size = st.plan().split_size();
  g.set_id(id);
  g.set_begin(int64_t(id) * size);
  g.set_end_index(std::min(st.plan().examples(), int64_t(id + 1) * size));
  return g;
}

split_dispatcher_actor::behavior_type dispatcher_behavior(dispatcher_ptr self, pb::SplitStatus status) {
  self->state.status = std::move(status);
  return {
      [self](const pb::SplitRequest& req) -> caf::result<pb::SplitGrant> {
        auto& st = self->state.status;
        for (auto id : req.finished()) {
          auto at = st.assigned().find(id);
          // Only the split's current holder can finish it (a worker declared
          // lost may still report late: its split went to someone else).
          if (at == st.assigned().end() || at->second != req.worker()) continue;
          st.mutable_assigned()->erase(id);
          st.add_finished(id);
        }
        return grant(self, req.worker());
      },
      [self](const pb::WorkerLost& lost) -> pb::SplitStatus {
        auto& st = self->state.status;
        std::vector<uint64_t> back;
        for (auto& [id, worker] : st.assigned())
          if (worker == lost.worker()) back.push_back(id);
        for (auto id : back) {
          st.mutable_assigned()->erase(id);
          st.add_queued(id);
        }
        return st;
      },
      [self](const pb::SplitStatusRequest&) -> pb::SplitStatus { return self->state.status; },
  };
}

}  // namespace

split_dispatcher_actor spawn_split_dispatcher(caf::actor_system& sys, const pb::SplitPlan& plan) {
  pb::SplitStatus status;
  *status.mutable_plan() = plan;
  return sys.spawn(dispatcher_behavior, std::move(status));
}

split_dispatcher_actor resume_split_dispatcher(caf::actor_system& sys, const pb::SplitStatus& checkpoint) {
  pb::SplitStatus status = checkpoint;
  for (auto& [id, worker] : checkpoint.assigned()) status.add_queued(id);
  status.clear_assigned();
  return sys.spawn(dispatcher_behavior, std::move(status));
}

}  // namespace actorps
