#include "actors/worker/worker_actor.hpp"

#include <chrono>
#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <random>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "actors/net/countdown.hpp"
#include "actors/net/dial.hpp"
#include "actors/variables/ps_client.hpp"
#include "actors/variables/wire_forms.hpp"
#include "actors/worker/worker_functions.hpp"
#include "kernels/model.hpp"

namespace actorps {
namespace {

struct batch_run {
  uint64_t seq = 0;
  caf::typed_response_promise<pb::ClosuresDone> promise;
  pb::RunClosures request;
  std::vector<dataset_actor> datasets;
  pb::ClosuresDone done;
  std::chrono::steady_clock::time_point started;
  int unacked = 0;  // pushes sent while it ran, not yet acknowledged
  caf::error link_failed;  // a push or a pull lost its shard: the batch fails whole (its steps run again)
  bool finished() const { return done.results_size() == request.closures_size(); }
};

// One batch requested ahead per dataset, so the next step's input is
// built while this one computes.
struct prefetch {
  uint64_t generation = 0;  // a ReadSplit starts a new one: replies of the last are dropped
  bool in_flight = false;
  std::optional<caf::expected<pb::BatchData>> ready;
  std::function<void(caf::expected<pb::BatchData>)> waiting;
};

struct worker_state {
  static inline const char* name = "worker";
  uint32_t index = 0;
  shard_list shards;
  std::unique_ptr<kernels::sequential_model> model;
  std::vector<sharded_variable> vars;
  std::vector<const sharded_variable*> view;  // the dense variables (pulled and pushed whole)
  std::vector<size_t> dense, sparse;           // model parameter indices of each kind
  std::unique_ptr<kernels::host_parameters> buffers[2];  // values in use, values pulled ahead
  // Per buffer, the dense variables' value and gradient pointers in view
  // order (what ps_client takes), built once.
  std::vector<float*> dense_values[2];
  std::vector<const float*> dense_grads[2];
  int current = 0;
  bool pull_ahead = false;
  struct {
    bool active = false, done = false;
    int64_t step = 0;
    caf::error err;
    std::function<void(caf::error)> waiting;
  } ahead;  // the pull of the next step, into buffers[1 - current]
  std::map<int, std::vector<pb::Pull>> pulls;  // by ps task; step set per call
  int64_t step = 0;                            // this worker's steps so far
  int64_t closure_step = 0;                    // the running closure's steps so far
  caf::duration deadline = caf::infinite;      // per request to a shard
  worker_context ctx;
  // Batches in arrival order. Closures run one at a time, from the first
  // unfinished batch; a batch is answered once its closures finished and
  // its pushes were acknowledged, so the next closure starts while the last
  // one's gradients are still on their way (its pulls queue behind them).
  std::deque<batch_run> queue;
  uint64_t next_seq = 0;
  // Injected faults (actorps chaos): requests to a PS task dropped before
  // they leave, each sent again after kDropRetry (a lossy link's timeout).
  struct {
    uint32_t ps = 0;
    double drop = 0;
    std::chrono::milliseconds delay{0};
    std::chrono::steady_clock::time_point until;
    std::mt19937 gen{7};
    uint64_t sent = 0, dropped = 0;
  } fault;
  std::map<uint64_t, std::function<void()>> timers;
  uint64_t next_timer = 0;
  std::map<caf::actor_addr, prefetch> prefetched;
  peer_table_ptr peers;
  std::string where;    // "worker:<index>: ", the prefix of its refusals
  size_t greeting = 0;  // PS nodes yet to answer this worker's Hello: no closure runs before
};

using worker_ptr = worker_actor::stateful_pointer<worker_state>;

constexpr auto kDropRetry = std::chrono::milliseconds(500);

void after(worker_ptr self, std::chrono::milliseconds delay, std::function<void()> fn) {
  auto& st = self->state;
  st.timers.emplace(st.next_timer, std::move(fn));
  self->delayed_send(self, delay, worker_timer_atom_v, st.next_timer++);
}

// A request to PS task `ps`, with the worker's deadline: one unanswered in
// time fails the batch like a lost link (its closures run again elsewhere,
// their steps applied once by closure key; the worker is respawned), so no
// copy of a push is kept for a resend. An injected fault holds it back: a
// dropped one is sent again after kDropRetry (as a lost message's retry
// would), a delayed one after the delay.
template <class Reply, class Msg, class Ok, class Fail>
void ask_shard(worker_ptr self, int ps, Msg msg, Ok ok, Fail fail, bool delayed = false) {
  auto& f = self->state.fault;
  if (!delayed && uint32_t(ps) == f.ps && std::chrono::steady_clock::now() < f.until) {
    const bool drop = f.drop > 0 && std::bernoulli_distribution(f.drop)(f.gen);
    ++f.sent;
    if (drop || f.delay.count() > 0) {
      f.dropped += drop;
      auto held = std::make_shared<Msg>(std::move(msg));
      return after(self, drop ? kDropRetry : f.delay,
                   [self, ps, held, ok, fail, drop] { ask_shard<Reply>(self, ps, std::move(*held), ok, fail, !drop); });
    }
  }
  auto& st = self->state;
  self->request(st.shards[size_t(ps)], st.deadline, std::move(msg))
      .then([ok](Reply& r) { ok(r); }, [fail](caf::error& err) { fail(std::move(err)); });
}

void pull_into(worker_ptr self, int buffer, int64_t step, std::function<void(caf::error)> then) {
  auto& st = self->state;
  int total = 0;
  for (auto& [ps, list] : st.pulls) total += int(list.size());
  auto c = std::make_shared<countdown>(countdown{size_t(total), std::move(then)});
  for (auto& [ps, list] : st.pulls)
    for (auto& p : list) {
      p.set_worker(st.index);
      p.set_step(step);
      ask_shard<pb::Values>(
          self, ps, p,
          [self, c, buffer](const pb::Values& v) {
            auto& st = self->state;
            if (auto err = scatter_values(v, st.view, st.dense_values[buffer])) return c->fail(err);
            c->ok();
          },
          [c](caf::error err) { c->fail(std::move(err)); });
    }
}

void pull_ahead(worker_ptr self, int64_t step) {
  auto& a = self->state.ahead;
  a.active = true, a.done = false, a.step = step, a.err = caf::none;
  pull_into(self, 1 - self->state.current, step, [self](caf::error err) {
    auto& a = self->state.ahead;
    a.done = true;
    a.err = err;
    if (a.waiting) std::exchange(a.waiting, nullptr)(std::move(err));
  });
}

// Values for this worker's training step `step`; see worker_context.
void pull_for_step(worker_ptr self, int64_t step, std::function<void(caf::error)> then) {
  auto& st = self->state;
  auto& a = st.ahead;
  if (!st.pull_ahead) return pull_into(self, st.current, step, std::move(then));
  if (a.active && a.step == step) {
    auto use = [self, step, then = std::move(then)](caf::error err) {
      auto& st = self->state;
      st.ahead.active = false;
      if (!err) {
        st.current = 1 - st.current;
        st.ctx.params = st.buffers[st.current].get();
        pull_ahead(self, step + 1);
      }
      then(std::move(err));
    };
    if (a.done) return use(a.err);
    a.waiting = std::move(use);
    return;
  }
  if (a.active && !a.done) {  // pulled ahead for another step (an earlier one failed): drop it
    a.waiting = [self, step, then = std::move(then)](caf::error) {
      self->state.ahead.active = false;
      pull_for_step(self, step, then);
    };
    return;
  }
  a.active = false;
  pull_into(self, st.current, step, [self, step, then = std::move(then)](caf::error err) {
    if (!err) pull_ahead(self, step + 1);
    then(std::move(err));
  });
}

batch_run* running_batch(worker_state& st) {
  for (auto& b : st.queue)
    if (!b.finished()) return &b;
  return nullptr;
}

void answer_finished(worker_ptr self);

// Sends the gradients and returns at once; the running batch waits for
// the acknowledgements before it answers.
void push(worker_ptr self, int64_t step, int32_t examples, std::function<void(caf::error)> then) {
  auto& st = self->state;
  auto* batch = running_batch(st);
  const uint64_t seq = batch->seq;
  pb::ClosureStep key;
  key.set_closure(batch->request.closures(batch->done.results_size()).id());
  key.set_step(st.closure_step++);
  key.set_examples(examples);
  auto acked = [self, seq](caf::error err) {
    for (auto& b : self->state.queue)
      if (b.seq == seq) {
        --b.unacked;
        if (err && !b.link_failed) b.link_failed = std::move(err);
      }
    answer_finished(self);
  };
  auto send = [&](int ps, auto msg) {
    *msg.mutable_closure_step() = key;
    ++batch->unacked;
    ask_shard<pb::PushAck>(
        self, ps, std::move(msg), [acked](const pb::PushAck&) { acked(caf::none); },
        [acked](caf::error err) { acked(std::move(err)); });
  };
  for (auto& [ps, list] : split_push(st.index, step, st.view, st.dense_grads[st.current]))
    for (auto& m : list) send(ps, std::move(m));
  for (auto i : st.sparse) {
    auto& g = st.model->sparse_gradient(i);
    for (auto& [ps, m] : split_sparse_push(st.index, step, st.vars[i], g.ids, g.rows.data())) send(ps, std::move(m));
  }
  then(caf::none);
}

void request_batch(worker_ptr self, const dataset_actor& d) {
  auto& slot = self->state.prefetched[d.address()];
  slot.in_flight = true;
  auto arrived = [self, d, generation = slot.generation](caf::expected<pb::BatchData> b) {
    auto& slot = self->state.prefetched[d.address()];
    if (slot.generation != generation) return;  // read before a ReadSplit
    slot.in_flight = false;
    if (!slot.waiting) return void(slot.ready = std::move(b));
    auto then = std::exchange(slot.waiting, nullptr);
    request_batch(self, d);  // the one after, while this one is used
    then(std::move(b));
  };
  self->request(d, caf::infinite, pb::NextBatch{})
      .then([arrived](pb::BatchData& b) { arrived(std::move(b)); }, [arrived](caf::error& err) { arrived(std::move(err)); });
}

// Has `d` read only source examples [begin, end) from now on; batches
// prefetched before are dropped.
void read_split(worker_ptr self, const dataset_actor& d, int64_t begin, int64_t end,
                std::function<void(caf::error)> then) {
  auto& slot = self->state.prefetched[d.address()];
  ++slot.generation;
  slot.in_flight = false;
  slot.ready.reset();
  slot.waiting = nullptr;
  pb::ReadSplit split;
  split.set_begin(begin);
  split.set_end_index(end);
  self->request(d, caf::infinite, std::move(split))
      .then([then](pb::SplitAccepted&) { then(caf::none); }, [then](caf::error& err) { then(std::move(err)); });
}

// The rows of every sparse parameter (embedding table) that `ids` name.
void pull_rows(worker_ptr self, const std::vector<int64_t>& ids, std::function<void(caf::error)> then) {
  auto& st = self->state;
  std::vector<int64_t> unique;
  for (auto id : ids)
    if (id >= 0) unique.push_back(id);  // negative: padding
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  std::vector<std::pair<size_t, std::map<int, pb::SparsePull>>> pulls;
  int total = 0;
  for (auto i : st.sparse) {
    auto& var = st.vars[i];
    if (!unique.empty() && unique.back() >= var.shape[0])
      return then(make_error(errc::out_of_range, fmt::format("id {} outside the {} rows of '{}'", unique.back(),
                                                             var.shape[0], var.name)));
    pulls.emplace_back(i, split_sparse_pull(var, unique));
    total += int(pulls.back().second.size());
  }
  if (total == 0) return then(caf::none);
  auto c = std::make_shared<countdown>(countdown{size_t(total), std::move(then)});
  for (auto& [i, by_ps] : pulls)
    for (auto& [ps, req] : by_ps)
      ask_shard<pb::Rows>(
          self, ps, std::move(req),
          [self, c, i = i](const pb::Rows& rows) {
            auto& st = self->state;
            if (auto err = scatter_rows(rows, st.vars[i], st.buffers[st.current]->value_ptrs[i])) return c->fail(err);
            c->ok();
          },
          [c](caf::error err) { c->fail(std::move(err)); });
}

void next_batch(worker_ptr self, const dataset_actor& d, std::function<void(caf::expected<pb::BatchData>)> then) {
  auto& slot = self->state.prefetched[d.address()];
  if (slot.ready) {
    auto b = std::move(*slot.ready);
    slot.ready.reset();
    request_batch(self, d);
    return then(std::move(b));
  }
  slot.waiting = std::move(then);
  if (!slot.in_flight) request_batch(self, d);
}

void run_next(worker_ptr self);

// The result of the running closure; then the next one.
void settle(worker_ptr self, const pb::Closure& closure, caf::expected<values> result) {
  auto& run = *running_batch(self->state);
  auto* r = run.done.add_results();
  r->set_id(closure.id());
  if (!result && result.error().category() != caf::atom("actorps") && !run.link_failed) {
    run.link_failed = result.error();  // a transport error, not the function's: the proxy takes the worker as lost
  }
  if (!result) {
    r->set_error_code(result.error().category() == caf::atom("actorps") ? result.error().code()
                                                                          : uint8_t(errc::internal));
    r->set_error(fmt::format("worker:{}: {}: {}", self->state.index, closure.function(), describe(result.error())));
  } else if (closure.want_result()) {
    for (auto& v : *result) *r->add_values() = std::move(v);
  }
  if (run.finished())
    run.done.set_busy_micros(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - run.started).count());
  answer_finished(self);
  run_next(self);
}

// Answers, in order, the batches whose closures finished and whose pushes
// were acknowledged. A lost link to a shard (a failed push, a pull whose
// receiver is down) fails the whole batch instead: the proxy re-queues its
// closures and respawns this worker, which dials the PS nodes afresh.
void answer_finished(worker_ptr self) {
  auto& q = self->state.queue;
  while (!q.empty() && q.front().finished() && q.front().unacked == 0) {
    auto& b = q.front();
    if (b.link_failed)
      b.promise.deliver(std::move(b.link_failed));
    else
      b.promise.deliver(std::move(b.done));
    q.pop_front();
  }
}

// Runs the next closure of the first unfinished batch.
void run_next(worker_ptr self) {
  if (self->state.greeting > 0) return;
  auto* run = running_batch(self->state);
  if (run == nullptr) return;
  if (run->done.results_size() == 0) run->started = std::chrono::steady_clock::now();
  self->state.closure_step = 0;
  auto& closure = run->request.closures(run->done.results_size());
  auto* fn = find_function(closure.function());
  if (fn == nullptr)
    return settle(self, closure,
                  make_error(errc::invalid_argument, fmt::format("no function '{}' on this worker (registered: {})",
                                                                 closure.function(), function_names())));
  std::vector<pb::Value> args(closure.args().begin(), closure.args().end());
  (*fn)(self->state.ctx, args, [self, &closure](caf::expected<values> r) { settle(self, closure, std::move(r)); });
}

caf::expected<dataset_actor> dataset_of(worker_ptr self, const pb::Value& arg) {
  auto& run = *running_batch(self->state);
  if (arg.kind_case() != pb::Value::kPerWorkerDataset)
    return make_error(errc::invalid_argument, "expected a per_worker_dataset argument");
  for (int i = 0; i < run.request.datasets_size(); ++i)
    if (run.request.datasets(i) == arg.per_worker_dataset() && size_t(i) < run.datasets.size()) return run.datasets[size_t(i)];
  return make_error(errc::invalid_argument,
                    fmt::format("worker:{} has no dataset '{}' (create_per_worker_dataset first)", self->state.index,
                                arg.per_worker_dataset()));
}

// Direct connections to the PS nodes, each admitting this worker (see
// spawn_worker). One that cannot be reached or refuses stops the worker:
// the coordinator runs its closures elsewhere and respawns it.
void dial_ps_nodes(worker_ptr self, const cluster_spec& cluster) {
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    auto& tasks = cluster.nodes[n].tasks;
    if (std::none_of(tasks.begin(), tasks.end(), [](const task_id& t) { return t.role == pb::PS; })) continue;
    ++self->state.greeting;
    dial_node(self, cluster, task_id{pb::WORKER, self->state.index}, n,
              [self, address = cluster.nodes[n].address()](caf::expected<node_actor> node) {
                if (!node) {
                  spdlog::warn("worker:{}: PS node {} did not admit it ({}); stopping (the coordinator respawns it)",
                               self->state.index, address, describe(node.error()));
                  return self->quit(node.error());
                }
                if (--self->state.greeting == 0) run_next(self);
              });
  }
}

// Who may send a worker what (actors/peer_table.hpp): closures and injected
// faults come from the coordinator.
template <class Msg>
caf::error check(worker_ptr self, const Msg& msg, const char* what) {
  return check_request(self, *self->state.peers, msg, {pb::COORDINATOR, pb::CLIENT}, self->state.where, what);
}

worker_actor::behavior_type worker_behavior(worker_ptr self, pb::SpawnWorker spec, shard_list shards,
                                            cluster_spec cluster, peer_table_ptr peers) {
  auto& st = self->state;
  st.peers = std::move(peers);
  st.index = spec.worker();
  st.where = fmt::format("worker:{}: ", st.index);
  st.shards = std::move(shards);
  st.model = std::make_unique<kernels::sequential_model>(train::from_proto(spec.model()), kernels::cpu_ops());
  for (auto& v : spec.variables()) st.vars.push_back(train::from_proto(v));
  std::vector<std::vector<float>> zeros;
  auto& params = st.model->parameters();
  for (size_t i = 0; i < st.vars.size(); ++i) {
    (params[i].sparse ? st.sparse : st.dense).push_back(i);
    if (!params[i].sparse) st.view.push_back(&st.vars[i]);
    zeros.emplace_back(size_t(st.vars[i].size()));
  }
  for (int b = 0; b < 2; ++b) {
    st.buffers[b] = std::make_unique<kernels::host_parameters>(zeros);
    for (auto i : st.dense) {
      st.dense_values[b].push_back(st.buffers[b]->value_ptrs[i]);
      st.dense_grads[b].push_back(st.buffers[b]->grad_views[i]);
    }
  }
  st.pull_ahead = spec.pull_ahead();
  if (spec.request_timeout_ms() > 0) st.deadline = caf::duration{std::chrono::milliseconds(spec.request_timeout_ms())};
  st.pulls = split_pull(st.view);
  if (spec.threads() > 0) kernels::set_cpu_threads(int(spec.threads()));
  dial_ps_nodes(self, cluster);
  // A shard whose link died answers nothing more (its requests would wait
  // for their deadlines): stop, and the proxy re-runs this worker's closures
  // elsewhere and respawns it, dialing the PS nodes afresh.
  for (auto& shard : st.shards) self->monitor(shard);
  self->set_down_handler([self](const caf::down_msg& msg) {
    spdlog::warn("worker:{}: lost a PS shard ({}); stopping (the coordinator respawns it)", self->state.index,
                 caf::to_string(msg.reason));
    self->quit(msg.reason);
  });
  auto& ctx = st.ctx;
  ctx.worker = st.index;
  ctx.model = st.model.get();
  ctx.params = st.buffers[0].get();
  ctx.dataset = [self](const pb::Value& arg) { return dataset_of(self, arg); };
  ctx.next_batch = [self](const dataset_actor& d, std::function<void(caf::expected<pb::BatchData>)> then) {
    next_batch(self, d, std::move(then));
  };
  ctx.read_split = [self](const dataset_actor& d, int64_t begin, int64_t end, std::function<void(caf::error)> then) {
    read_split(self, d, begin, end, std::move(then));
  };
  ctx.pull = [self](int64_t step, std::function<void(caf::error)> then) {
    pull_into(self, self->state.current, step, std::move(then));
  };
  ctx.pull_for_step = [self](int64_t step, std::function<void(caf::error)> then) {
    pull_for_step(self, step, std::move(then));
  };
  ctx.pull_rows = [self](const std::vector<int64_t>& ids, std::function<void(caf::error)> then) {
    pull_rows(self, ids, std::move(then));
  };
  ctx.push = [self](int64_t step, int32_t examples, std::function<void(caf::error)> then) {
    push(self, step, examples, std::move(then));
  };
  ctx.next_step = [self] { return self->state.step++; };
  return {
      [self](pb::RunClosures& req, std::vector<dataset_actor>& datasets) -> caf::result<pb::ClosuresDone> {
        auto& st = self->state;
        if (auto err = check(self, req, "RunClosures")) return err;  // before the promise takes the sender
        if (size_t(req.datasets_size()) != datasets.size())
          return make_error(errc::invalid_argument,
                            fmt::format("RunClosures names {} datasets, {} sent", req.datasets_size(), datasets.size()));
        auto promise = self->make_response_promise<pb::ClosuresDone>();
        const bool idle = running_batch(st) == nullptr;
        st.queue.push_back({st.next_seq++, promise, std::move(req), std::move(datasets), {}, {}, 0, {}});
        if (idle) run_next(self);
        answer_finished(self);  // an empty batch
        return promise;
      },
      [self](const pb::InjectFault& req) -> caf::result<pb::FaultInjected> {
        if (auto err = check(self, req, "InjectFault")) return err;
        auto& f = self->state.fault;
        f.ps = req.ps();
        f.drop = std::clamp(req.drop(), 0.0, 1.0);
        f.delay = std::chrono::milliseconds(req.delay_ms());
        f.until = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.duration_ms());
        f.sent = f.dropped = 0;
        spdlog::warn("worker:{}: dropping {:.0f}% of its requests to ps:{} and delaying the rest {} ms, for {} ms "
                     "(injected)",
                     self->state.index, 100 * f.drop, f.ps, req.delay_ms(), req.duration_ms());
        after(self, std::chrono::milliseconds(req.duration_ms()), [self, ps = f.ps] {
          auto& f = self->state.fault;
          if (f.ps == ps && std::chrono::steady_clock::now() >= f.until)
            spdlog::warn("worker:{}: injected fault on ps:{} over: {} of {} requests dropped", self->state.index, ps,
                         f.dropped, f.sent);
        });
        return pb::FaultInjected{};
      },
      [self](worker_timer_atom, uint64_t id) {
        auto i = self->state.timers.find(id);
        if (i == self->state.timers.end()) return;
        auto fn = std::move(i->second);
        self->state.timers.erase(i);
        fn();
      },
  };
}

}  // namespace

caf::expected<worker_actor> spawn_worker(caf::actor_system& sys, const pb::SpawnWorker& spec, shard_list shards,
                                         const cluster_spec& cluster, peer_table_ptr peers) {
  auto model = train::from_proto(spec.model());
  auto problem = model.check();
  if (!problem.empty()) return make_error(errc::invalid_config, "worker model: " + problem);
  kernels::sequential_model probe(model, kernels::reference_ops());
  auto& params = probe.parameters();
  if (size_t(spec.variables_size()) != params.size())
    return make_error(errc::invalid_config, "worker model has " + std::to_string(params.size()) + " parameters, " +
                                                std::to_string(spec.variables_size()) + " variables given");
  for (size_t i = 0; i < params.size(); ++i) {
    auto& v = spec.variables(int(i));
    if (std::vector<int64_t>(v.shape().begin(), v.shape().end()) != params[i].shape)
      return make_error(errc::bad_tensor, "variable '" + v.name() + "' does not have the shape of " + params[i].name);
    for (auto& s : v.shards())
      if (s.ps_task() >= shards.size())
        return make_error(errc::invalid_config, "variable '" + v.name() + "' lives on ps:" +
                                                    std::to_string(s.ps_task()) + ", the job has " +
                                                    std::to_string(shards.size()) + " shards");
  }
  // Not detached: CAF 0.17 can hang at shutdown waiting for a detached
  // actor (actor-framework#1196, fixed in 0.18); a step holds one scheduler thread.
  return sys.spawn(worker_behavior, spec, std::move(shards), cluster, std::move(peers));
}

}  // namespace actorps
