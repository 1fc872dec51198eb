#include "actors/coordinator/closure_queue.hpp"

#include <chrono>

#include <algorithm>

#include "messages/errors.hpp"

namespace actorps {

bool remote_value::ready() const {
  std::lock_guard<std::mutex> guard(state_->m);
  return state_->result.has_value();
}

void remote_value::wait() const {
  std::unique_lock<std::mutex> lock(state_->m);
  state_->cv.wait(lock, [&] { return state_->result.has_value(); });
}

caf::expected<values> remote_value::fetch() const {
  wait();
  std::lock_guard<std::mutex> guard(state_->m);
  return *state_->result;
}

closure_queue::closure_queue(size_t capacity, metrics::registry& reg, trace::recorder& tracer)
    : capacity_(std::max<size_t>(capacity, 1)),
      next_id_(uint64_t(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count())),
      metrics_(reg),
      tracer_(tracer) {}

namespace {

// A closure's life as an async span (closures overlap) on the coordinator's track.
void trace_closure(trace::recorder& tracer, char ph, uint64_t id) {
  if (!tracer.on()) return;
  trace::event e;
  e.name = "closure", e.cat = "closure", e.ph = ph, e.tid = trace::coordinator, e.ts_us = trace::now_us(), e.id = id;
  tracer.record(e);
}

}  // namespace

void closure_queue::update_gauges() {
  metrics_.queued.set(double(queued_));
  metrics_.running.set(double(outstanding_ - queued_));
  metrics_.workers_alive.set(double(live_.size()));
}

remote_value closure_queue::put(pb::Closure closure, int worker, uint64_t round) {
  auto result = std::make_shared<remote_value::state>();
  std::unique_lock<std::mutex> lock(m_);
  changed_.wait(lock, [&] { return outstanding_ < capacity_ || error_; });
  closure.set_id(next_id_++);
  queued_closure c{std::move(closure), worker, round, result};
  if (error_) {
    result->result = caf::expected<values>(error_);  // TF: schedule after a failure raises it
    return remote_value(result);
  }
  ++outstanding_;
  trace_closure(tracer_, 'b', c.closure.id());
  (worker < 0 ? common_ : pinned_[uint32_t(worker)]).push_back(std::move(c));
  ++queued_;
  update_gauges();
  wake_all(lock);
  return remote_value(result);
}

caf::error closure_queue::join() {
  std::unique_lock<std::mutex> lock(m_);
  changed_.wait(lock, [&] { return outstanding_ == 0; });
  return std::exchange(error_, caf::error{});
}

bool closure_queue::done() {
  std::lock_guard<std::mutex> guard(m_);
  return outstanding_ == 0 && !error_;
}

std::vector<queued_closure> closure_queue::take(size_t max, uint32_t worker, std::function<void()> wake) {
  std::unique_lock<std::mutex> lock(m_);
  std::vector<queued_closure> out;
  auto& mine = pinned_[worker];
  // Held: only the rest of the rounds begun (a worker's closures are in
  // round order) and closures put back, which are in front.
  auto due = [&](const queued_closure& c) { return !held_ || c.put_back || (c.round > 0 && c.round <= last_round_); };
  while (out.size() < max && !mine.empty() && due(mine.front())) {
    last_round_ = std::max(last_round_, mine.front().round);
    out.push_back(std::move(mine.front()));
    mine.pop_front();
  }
  // A fair share of the common closures: a proxy with room for many must
  // not strand work on its worker while another worker idles.
  const size_t live = std::max<size_t>(live_.size(), 1);
  const size_t share = (common_.size() + live - 1) / live;
  for (size_t n = std::min(max - out.size(), std::max<size_t>(share, 1));
       n > 0 && !common_.empty() && due(common_.front()); --n) {
    out.push_back(std::move(common_.front()));
    common_.pop_front();
  }
  if (out.empty()) wakers_.push_back(std::move(wake));
  queued_ -= out.size();
  update_gauges();
  return out;
}

bool closure_queue::quiet_locked() {
  if (!held_ || outstanding_ != queued_ || put_back_ > 0) return false;  // not held, some run, or may have run part
  for (auto& [w, list] : pinned_)
    if (!list.empty() && list.front().round > 0 && list.front().round <= last_round_) return false;
  return true;
}

void closure_queue::hold() {
  std::lock_guard<std::mutex> guard(m_);
  held_ = true;
}

bool closure_queue::quiet() {
  std::lock_guard<std::mutex> guard(m_);
  return quiet_locked();
}

void closure_queue::wait_quiet() {
  std::unique_lock<std::mutex> lock(m_);
  changed_.wait(lock, [&] { return quiet_locked(); });
}

void closure_queue::resume() {
  std::unique_lock<std::mutex> lock(m_);
  held_ = false;
  wake_all(lock);
}

void closure_queue::resolve(queued_closure& c, caf::expected<values> result) {
  (result ? metrics_.done : result.error() == errc::cancelled ? metrics_.cancelled : metrics_.failed).inc();
  trace_closure(tracer_, 'e', c.closure.id());
  {
    std::lock_guard<std::mutex> guard(c.result->m);
    c.result->result = std::move(result);
  }
  c.result->cv.notify_all();
  if (c.put_back) --put_back_;
  if (--outstanding_ == 0) last_round_ = 0;  // the next rounds may count from 1 again (another fit)
}

void closure_queue::settle(queued_closure& c, uint32_t worker, caf::expected<values> result) {
  std::unique_lock<std::mutex> lock(m_);
  ++answered_[worker];
  if (!result && !error_) {
    error_ = result.error();
    resolve(c, std::move(result));
    cancel_queued(error_);
  } else {
    resolve(c, std::move(result));
  }
  update_gauges();
  changed_.notify_all();
}

std::map<uint32_t, uint64_t> closure_queue::closures_by_worker() {
  std::lock_guard<std::mutex> guard(m_);
  return answered_;
}

void closure_queue::cancel_queued(const caf::error& why) {
  auto cancelled = make_error(errc::cancelled, "cancelled: an earlier closure failed: " + describe(why));
  for (auto& c : common_) resolve(c, cancelled);
  common_.clear();
  for (auto& [w, list] : pinned_) {
    for (auto& c : list) resolve(c, cancelled);
    list.clear();
  }
  queued_ = 0;
}

void closure_queue::put_back(std::vector<queued_closure> lost) {
  std::unique_lock<std::mutex> lock(m_);
  for (auto i = lost.rbegin(); i != lost.rend(); ++i) {
    if (!i->put_back) ++put_back_;
    i->put_back = true;  // held, it is still handed out: see hold()
    (i->worker < 0 ? common_ : pinned_[uint32_t(i->worker)]).push_front(std::move(*i));
  }
  metrics_.retried.inc(lost.size());
  queued_ += lost.size();
  update_gauges();
  changed_.notify_all();  // hold(): they no longer run
  wake_all(lock);
}

size_t closure_queue::wait_for_workers(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_);
  changed_.wait_for(lock, timeout, [&] { return live_.size() >= n || error_; });
  return live_.size();
}

caf::error closure_queue::failure() {
  std::lock_guard<std::mutex> guard(m_);
  return error_;
}

size_t closure_queue::live_workers() {
  std::lock_guard<std::mutex> guard(m_);
  return live_.size();
}

bool closure_queue::is_live(uint32_t worker) {
  std::lock_guard<std::mutex> guard(m_);
  return live_.count(worker) != 0;
}

size_t closure_queue::members() {
  std::lock_guard<std::mutex> guard(m_);
  return members_.size();
}

std::vector<uint32_t> closure_queue::absent_workers() {
  std::lock_guard<std::mutex> guard(m_);
  std::vector<uint32_t> out;
  for (auto w : members_)
    if (live_.count(w) == 0) out.push_back(w);
  return out;
}

void closure_queue::worker_added(uint32_t worker) {
  std::lock_guard<std::mutex> guard(m_);
  members_.insert(worker);
}

void closure_queue::worker_up(uint32_t worker) {
  std::lock_guard<std::mutex> guard(m_);
  members_.insert(worker);
  live_.insert(worker);
  update_gauges();
  changed_.notify_all();
}

void closure_queue::worker_lost(uint32_t worker) {
  std::lock_guard<std::mutex> guard(m_);
  live_.erase(worker);
  update_gauges();
}

void closure_queue::worker_left(uint32_t worker) {
  std::lock_guard<std::mutex> guard(m_);
  live_.erase(worker);
  members_.erase(worker);
  update_gauges();
}

void closure_queue::worker_gone(uint32_t worker, const caf::error& why) {
  std::unique_lock<std::mutex> lock(m_);
  live_.erase(worker);
  members_.erase(worker);
  update_gauges();
  if (!members_.empty()) return;
  if (!error_) error_ = make_error(errc::unreachable, "no worker left: " + describe(why));
  cancel_queued(error_);
  changed_.notify_all();
}

void closure_queue::abort(const caf::error& why) {
  std::unique_lock<std::mutex> lock(m_);
  if (!error_) error_ = why;
  cancel_queued(error_);
  update_gauges();
  changed_.notify_all();
}

void closure_queue::wake_all(std::unique_lock<std::mutex>& lock) {
  auto wakers = std::move(wakers_);
  wakers_.clear();
  lock.unlock();
  for (auto& w : wakers) w();
  lock.lock();
}

}  // namespace actorps
