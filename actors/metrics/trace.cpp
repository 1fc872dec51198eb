#include "actors/metrics/trace.hpp"

#include <algorithm>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/metrics/registry.hpp"

namespace actorps::trace {

void recorder::control(bool record, size_t max_events) {
  std::lock_guard<std::mutex> lock(m_);
  if (record) {
    events_.clear();
    events_.reserve(std::min<size_t>(max_events, 1 << 16));
    max_ = max_events;
    dropped_ = 0;
  }
  on_.store(record, std::memory_order_relaxed);
}

void recorder::record(const event& e) {
  if (!on()) return;
  std::lock_guard<std::mutex> lock(m_);
  if (events_.size() >= max_) {
    ++dropped_;
    return;
  }
  events_.push_back(e);
}

void recorder::span(const char* name, const char* cat, uint32_t tid, int64_t start_us, const char* arg, int64_t value) {
  if (!on()) return;
  event e;
  e.name = name, e.cat = cat, e.ph = 'X', e.tid = tid;
  e.ts_us = start_us;
  e.dur_us = now_us() - start_us;
  e.arg_names[0] = arg;
  e.args[0] = value;
  record(e);
}

pb::TraceEvents recorder::read(uint64_t from, uint32_t max) const {
  pb::TraceEvents out;
  std::lock_guard<std::mutex> lock(m_);
  for (size_t i = size_t(from); i < events_.size() && i < size_t(from) + max; ++i) {
    const auto& e = events_[i];
    auto* t = out.add_events();
    t->set_name(e.name);
    t->set_cat(e.cat);
    t->set_ph(std::string(1, e.ph));
    t->set_ts_us(e.ts_us);
    t->set_dur_us(e.dur_us);
    t->set_tid(e.tid);
    t->set_id(e.id);
    for (int a = 0; a < 2; ++a)
      if (e.arg_names[a] != nullptr) (*t->mutable_args())[e.arg_names[a]] = e.args[a];
  }
  out.set_total(events_.size());
  out.set_dropped(dropped_);
  out.set_now_us(now_us());
  return out;
}

recorder& recorder_of(const caf::actor_system& sys) {
  if (auto* h = dynamic_cast<const metrics::holder*>(&sys.config())) return h->trace;
  static recorder shared;
  return shared;
}

}  // namespace actorps::trace
