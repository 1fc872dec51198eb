#include "actors/worker/batch_prefetch.hpp"

#include <utility>

namespace actorps {

void batch_prefetch::request(const dataset_actor& d) {
  auto& s = slots_[d.address()];
  s.in_flight = true;
  auto arrived = [this, d, generation = s.generation](caf::expected<pb::BatchData> b) {
    auto& s = slots_[d.address()];
    if (s.generation != generation) return;  // read before a ReadSplit
    s.in_flight = false;
    if (!s.waiting) return void(s.ready = std::move(b));
    auto then = std::exchange(s.waiting, nullptr);
    request(d);  // the one after, while this one is used
    then(std::move(b));
  };
  pb::NextBatch next;
  next.set_seq(++s.asked);
  next.set_split(s.generation);
  net_.to_dataset<pb::BatchData>(
      d, next, [arrived](pb::BatchData& b) { arrived(std::move(b)); },
      [arrived](caf::error err) { arrived(std::move(err)); });
}

void batch_prefetch::next(const dataset_actor& d, batch_fn then) {
  auto& s = slots_[d.address()];
  if (s.ready) {
    auto b = std::move(*s.ready);
    s.ready.reset();
    request(d);
    return then(std::move(b));
  }
  s.waiting = std::move(then);
  if (!s.in_flight) request(d);
}

void batch_prefetch::read_split(const dataset_actor& d, int64_t begin, int64_t end,
                                std::function<void(caf::error)> then) {
  auto& s = slots_[d.address()];
  ++s.generation;
  s.asked = 0;
  s.in_flight = false;
  s.ready.reset();
  s.waiting = nullptr;
  pb::ReadSplit split;
  split.set_id(s.generation);
  split.set_begin(begin);
  split.set_end_index(end);
  net_.to_dataset<pb::SplitAccepted>(
      d, std::move(split), [then](pb::SplitAccepted&) { then(caf::none); },
      [then](caf::error err) { then(std::move(err)); });
}

}  // namespace actorps
