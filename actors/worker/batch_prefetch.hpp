// A worker's batches: one requested ahead per dataset, so the next step's
// input is built while this step computes. A ReadSplit (exactly-once
// epochs) starts a new generation: batches of the old one are dropped.
//
//   empty --next--> waiting --batch--> (handed over) in flight for the next
//   in flight --batch--> ready --next--> (handed over) in flight for the next
//   any --read_split--> empty (new generation)
#pragma once

#include <functional>
#include <map>
#include <optional>

#include "actors/worker/transport.hpp"

namespace actorps {

class batch_prefetch {
 public:
  using batch_fn = std::function<void(caf::expected<pb::BatchData>)>;

  /// Requests go through `net`, which must outlive it.
  explicit batch_prefetch(transport& net) : net_(net) {}

  /// The next batch of `d` (the prefetched one when it is in), and the one
  /// after requested.
  void next(const dataset_actor& d, batch_fn then);
  /// Has `d` read only source examples [begin, end) from now on; batches
  /// prefetched before are dropped.
  void read_split(const dataset_actor& d, int64_t begin, int64_t end, std::function<void(caf::error)> then);

 private:
  struct slot {
    uint64_t generation = 0;  // a ReadSplit starts a new one (its id): replies of the last are dropped
    uint64_t asked = 0;       // NextBatch of this generation (its seq)
    bool in_flight = false;
    std::optional<caf::expected<pb::BatchData>> ready;
    batch_fn waiting;
  };
  void request(const dataset_actor& d);

  transport& net_;
  std::map<caf::actor_addr, slot> slots_;
};

}  // namespace actorps
