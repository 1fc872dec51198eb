#include "actors/dataset/dataset_actor.hpp"

#include <optional>

#include <fmt/format.h>

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
  caf::error broken;    // why the pipeline could not be built
  data::batch scratch;  // the batch served last (NextBatch.seq served), kept to serve it again
  uint64_t served = 0;
  bool served_end = false;
  uint64_t split = 0;  // the ReadSplit.id read now
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
  if (auto err = check_request(self, msg, kAsking, what)) return err;
  return ensure_built(self);
}

// The batch served last, as sent.
pb::BatchData batch_data(const dataset_state& st) {
  pb::BatchData out;
  if (st.served_end) {
    out.set_end(true);
    return out;
  }
  const auto& b = st.scratch;
  out.set_size(b.size());
  out.set_features(uint32_t(st.pipeline->features()));
  *out.mutable_ids() = {b.ids.begin(), b.ids.end()};
  *out.mutable_labels() = {b.labels.begin(), b.labels.end()};
  out.set_x(reinterpret_cast<const char*>(b.x.data()), b.x.size() * sizeof(float));
  return out;
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
        info.set_bad_lines(p.bad_lines());
        return info;
      },
      [self](const pb::NextBatch& req) -> caf::result<pb::BatchData> {
        if (auto err = ready(self, req, "NextBatch")) return err;
        auto& st = self->state;
        if (req.seq() != 0 && req.split() != st.split)  // sent again late, after the next ReadSplit
          return make_error(errc::stale,
                            fmt::format("{}NextBatch of split {}, reading split {}", st.where, req.split(), st.split));
        if (req.seq() == 0 || req.seq() != st.served) {  // else: asked again, the same batch
          st.served_end = !st.pipeline->next(st.scratch);
          st.served = req.seq();
        }
        return batch_data(st);
      },
      [self](const pb::ReadSplit& split) -> caf::result<pb::SplitAccepted> {
        if (auto err = ready(self, split, "ReadSplit")) return err;
        // A split must be read once and whole: repeating or dropping a remainder breaks exactly-once.
        for (auto& op : self->state.spec.ops())
          if (op.has_repeat() || (op.has_batch() && op.batch().drop_remainder()))
            return make_error(errc::invalid_config, "dataset of worker:" + std::to_string(self->state.worker) +
                                                        ": exactly-once splits need a spec without repeat and "
                                                        "drop_remainder");
        auto& st = self->state;
        if (split.id() == 0 || split.id() != st.split) {  // else: asked again, reading it already
          st.pipeline->read_range(split.begin(), split.end_index());
          st.split = split.id();
          st.served = 0;
        }
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
