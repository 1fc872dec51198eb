#include "actors/dataset/dataset_actor.hpp"

#include <optional>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/dataset/pipeline.hpp"
#include "actors/net/exit_guard.hpp"

namespace actorps {
namespace {

struct dataset_state {
  static inline const char* name = "dataset";
  uint32_t worker = 0;
  pb::DatasetSpec spec;
  std::optional<data::pipeline> pipeline;
  caf::error broken;  // why the pipeline could not be built
  data::batch scratch;
  peer_table_ptr peers;
  std::string where;  // "dataset of worker:<index>: ", the prefix of its refusals
};

constexpr std::initializer_list<Role> kAsking = {pb::WORKER, pb::COORDINATOR, pb::CLIENT};

using dataset_ptr = dataset_actor::stateful_pointer<dataset_state>;

caf::error ensure_built(dataset_ptr self) {
  auto& st = self->state;
  if (st.pipeline || st.broken) return st.broken;
  auto built = data::pipeline::build(st.spec);
  if (!built) {
    st.broken = make_error(errc::invalid_config,
                           "dataset of worker:" + std::to_string(st.worker) + ": " + describe(built.error()));
    return st.broken;
  }
  st.pipeline.emplace(std::move(*built));
  return caf::none;
}

// The first check of every request, then the pipeline.
template <class Msg>
caf::error ready(dataset_ptr self, const Msg& msg, const char* what) {
  if (auto err = check_request(self, *self->state.peers, msg, kAsking, self->state.where, what)) return err;
  return ensure_built(self);
}

dataset_actor::behavior_type dataset_behavior(dataset_ptr self, uint32_t worker, pb::DatasetSpec spec,
                                              peer_table_ptr peers) {
  self->state.worker = worker;
  self->state.spec = std::move(spec);
  self->state.peers = std::move(peers);
  self->state.where = "dataset of worker:" + std::to_string(worker) + ": ";
  return {
      [self](const pb::DatasetInfoRequest& req) -> caf::result<pb::DatasetInfo> {
        if (auto err = ready(self, req, "DatasetInfoRequest")) return err;
        auto& p = *self->state.pipeline;
        pb::DatasetInfo info;
        info.set_features(uint32_t(p.features()));
        info.set_examples_at_source(p.examples_at_source());
        info.set_prefetch(p.prefetch());
        return info;
      },
      [self](const pb::NextBatch& req) -> caf::result<pb::BatchData> {
        if (auto err = ready(self, req, "NextBatch")) return err;
        auto& b = self->state.scratch;
        pb::BatchData out;
        if (!self->state.pipeline->next(b)) {
          out.set_end(true);
          return out;
        }
        out.set_size(b.size());
        out.set_features(uint32_t(self->state.pipeline->features()));
        *out.mutable_ids() = {b.ids.begin(), b.ids.end()};
        *out.mutable_labels() = {b.labels.begin(), b.labels.end()};
        out.set_x(reinterpret_cast<const char*>(b.x.data()), b.x.size() * sizeof(float));
        return out;
      },
      [self](const pb::ReadSplit& split) -> caf::result<pb::SplitAccepted> {
        if (auto err = ready(self, split, "ReadSplit")) return err;
        // A split must be read once and whole: repeating or dropping a remainder breaks exactly-once.
        for (auto& op : self->state.spec.ops())
          if (op.has_repeat() || (op.has_batch() && op.batch().drop_remainder()))
            return make_error(errc::invalid_config, "dataset of worker:" + std::to_string(self->state.worker) +
                                                        ": exactly-once splits need a spec without repeat and "
                                                        "drop_remainder");
        self->state.pipeline->read_range(split.begin(), split.end_index());
        pb::SplitAccepted out;
        out.set_id(split.id());
        return out;
      },
  };
}

}  // namespace

dataset_actor spawn_dataset(caf::actor_system& sys, uint32_t worker, pb::DatasetSpec spec, peer_table_ptr peers,
                            caf::actor_addr parent) {
  exit_guard guard{{std::move(parent)}, peers, "dataset of worker:" + std::to_string(worker) + ": "};
  return spawn_guarded<dataset_state, dataset_actor>(
      sys, std::move(guard), [worker, spec = std::move(spec), peers](dataset_ptr self) mutable {
        return dataset_behavior(self, worker, std::move(spec), std::move(peers));
      });
}

}  // namespace actorps
