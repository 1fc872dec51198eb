#include "actors/worker/worker_actor.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include "actors/net/dial.hpp"
#include "actors/net/exit_guard.hpp"
#include "actors/variables/wire_forms.hpp"
#include "actors/worker/batch_prefetch.hpp"
#include "actors/worker/devices.hpp"
#include "actors/worker/param_buffers.hpp"
#include "actors/worker/transport.hpp"
#include "actors/worker/worker_functions.hpp"
#include "config/model_config.hpp"
#include "kernels/device_memory.hpp"
#include "kernels/device_model.hpp"
#include "kernels/sparse.hpp"

namespace actorps {
namespace {

using done_promise = caf::typed_response_promise<pb::ClosuresDone>;

struct batch_run {
  uint64_t seq = 0;
  done_promise promise;
  std::vector<done_promise> copies;  // the same batch sent again while it ran (RunClosures.batch)
  pb::RunClosures request;
  std::vector<dataset_actor> datasets;
  pb::ClosuresDone done;
  std::chrono::steady_clock::time_point started;
  size_t unacked = 0;           // pushes sent while it ran, not yet acknowledged
  caf::error link_failed;       // a push or a pull lost its shard: the batch fails whole (its steps run again)
  std::vector<uint64_t> moved;  // closures whose push named a shard that moved: they run again (errc::moved)
  bool finished() const { return done.results_size() == request.closures_size(); }
};

// The closure runner; its parts (transport, parameter buffers, batch
// prefetch) are members that the others reach through it.
struct worker_state {
  static inline const char* name = "worker";
  // The bulk lanes' threads read gradients from and write values into the
  // parameter buffers until their requests are answered: the lanes are cut
  // and their threads joined (the transport goes) before the buffers are
  // freed. A worker stopped with a lane request in flight (respawned over
  // new shards, say) corrupted its node's heap otherwise.
  ~worker_state() { net.reset(); }
  uint32_t index = 0;
  std::unique_ptr<kernels::device_model> model;
  std::unique_ptr<kernels::id_remap> remap;  // the batch's 64-bit ids as rows (dynamic tables)
  std::unique_ptr<transport> net;
  std::unique_ptr<param_buffers> params;
  std::unique_ptr<batch_prefetch> batches;
  std::unique_ptr<worker_metrics> metrics;
  uint32_t num_shards = 0;                                // the job's PS tasks (trace arrows)
  std::chrono::steady_clock::time_point closure_started;  // the running closure's
  int64_t step = 0;                                       // this worker's steps so far
  int64_t closure_step = 0;                               // the running closure's steps so far
  uint64_t incarnation = 0;                               // SpawnWorker.incarnation: in every push key
  worker_context ctx;
  // Batches in arrival order. Closures run one at a time, from the first
  // unfinished batch; a batch is answered once its closures finished and
  // its pushes were acknowledged, so the next closure starts while the last
  // one's gradients are still on their way (its pulls queue behind them).
  std::deque<batch_run> queue;
  uint64_t next_seq = 0;
  // Answers by RunClosures.batch, kept until the proxy says it has them
  // (answered_below): a batch sent again is answered, not run again.
  std::map<uint64_t, caf::expected<pb::ClosuresDone>> answered;
  peer_table_ptr peers;
  std::string where;    // "worker:<index>: ", the prefix of its refusals
  size_t greeting = 0;  // PS nodes yet to answer this worker's Hello: no closure runs before
  std::vector<caf::typed_response_promise<bool>> awaiting_ready;  // worker_ready_atom asked before that
};

using worker_ptr = local_worker_actor::stateful_pointer<worker_state>;

batch_run* running_batch(worker_state& st) {
  for (auto& b : st.queue)
    if (!b.finished()) return &b;
  return nullptr;
}

void answer_finished(worker_ptr self);

// A request that lost its shard (CAF's errors: a receiver down, a deadline
// passed; a bulk lane cut), not one the shard or the function refused.
bool lost_link(const caf::error& err) {
  return !is_actorps_error(err) || err == errc::unreachable || err == errc::timeout || err == errc::stale_routing;
}

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
  key.set_incarnation(st.incarnation);
  // The push phase ends with the step's last acknowledgement.
  auto unacked = std::make_shared<size_t>(0);
  const auto sent = worker_metrics::clock::now();
  st.metrics->pushing(step, st.num_shards, sent);
  *unacked = st.params->push(step, key, [self, seq, unacked, sent, step, key_closure = key.closure()](caf::error err) {
    if (--*unacked == 0) self->state.metrics->pushed(step, sent);
    for (auto& b : self->state.queue)
      if (b.seq == seq) {
        --b.unacked;
        if (err && code_of(err) == errc::moved)
          b.moved.push_back(key_closure);
        else if (err && !b.link_failed)
          b.link_failed = std::move(err);
        break;
      }
    answer_finished(self);
  });
  batch->unacked += *unacked;
  then(caf::none);
}

void run_next(worker_ptr self);

// The result of the running closure; then the next one.
void settle(worker_ptr self, const pb::Closure& closure, caf::expected<values> result) {
  auto& run = *running_batch(self->state);
  auto* r = run.done.add_results();
  r->set_id(closure.id());
  self->state.metrics->closure(bool(result), closure.id(), self->state.closure_started);
  if (!result && lost_link(result.error()) && !run.link_failed)
    run.link_failed = result.error();  // a transport error, not the function's: the proxy takes the worker as lost
  if (!result) {
    r->set_error_code(uint8_t(code_of(result.error())));
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

void deliver(done_promise& rp, caf::expected<pb::ClosuresDone> answer) {
  if (answer)
    rp.deliver(std::move(*answer));
  else
    rp.deliver(std::move(answer.error()));
}

// Answers, in order, the batches whose closures finished and whose pushes
// were acknowledged. A lost link to a shard (a failed push, a pull whose
// receiver is down) fails the whole batch instead: the proxy re-queues its
// closures and respawns this worker, which dials the PS nodes afresh.
void answer_finished(worker_ptr self) {
  auto& q = self->state.queue;
  while (!q.empty() && q.front().finished() && q.front().unacked == 0) {
    auto& b = q.front();
    for (auto& r : *b.done.mutable_results())  // a push refused as moved: the closure runs again, rerouted
      if (std::find(b.moved.begin(), b.moved.end(), r.id()) != b.moved.end() && r.error_code() == 0) {
        r.clear_values();
        r.set_error_code(uint8_t(errc::moved));
        r.set_error(fmt::format("worker:{}: a push named a shard that moved", self->state.index));
      }
    caf::expected<pb::ClosuresDone> answer = b.link_failed ? caf::expected<pb::ClosuresDone>(std::move(b.link_failed))
                                                           : caf::expected<pb::ClosuresDone>(std::move(b.done));
    for (auto& copy : b.copies) deliver(copy, answer);
    if (b.request.batch() != 0) self->state.answered.emplace(b.request.batch(), answer);
    deliver(b.promise, std::move(answer));
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
  self->state.closure_started = self->state.metrics->closure_start();
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
    if (run.request.datasets(i) == arg.per_worker_dataset() && size_t(i) < run.datasets.size())
      return run.datasets[size_t(i)];
  return make_error(errc::invalid_argument,
                    fmt::format("worker:{} has no dataset '{}' (create_per_worker_dataset first)", self->state.index,
                                arg.per_worker_dataset()));
}

// Direct connections to the PS nodes, each admitting this worker (see
// spawn_worker). A dial that gets no answer in time (a PS node busy with
// dozens of workers starting at once) is retried with back-off for
// kPsDialPatience; one refused, or never answered, stops the worker: the
// coordinator runs its closures elsewhere and respawns it.
constexpr auto kPsDialPatience = std::chrono::seconds(30);

// The worker stops (a PS node refused it, a shard is down): its node's
// wait for it to be ready, and with it the coordinator's spawn, gets the
// error now (a promise left unanswered would hold that spawn until its
// 30 s timeout, and the proxy would not bring the worker back meanwhile).
void stop(worker_ptr self, const caf::error& why) {
  for (auto& rp : self->state.awaiting_ready) rp.deliver(why);
  self->state.awaiting_ready.clear();
  self->quit(why);
}

void dial_ps_node(worker_ptr self, std::shared_ptr<const cluster_spec> cluster, size_t n, std::vector<int> ps_tasks,
                  std::chrono::milliseconds backoff, caf::actor_clock::time_point give_up) {
  auto open_lane = [self, cluster, n, ps_tasks](const pb::Welcome& welcome) {
    if (cluster->runtime.bulk_lane) self->state.net->open_lane(ps_tasks, cluster->nodes[n].host, welcome);
  };
  dial_node(
      self, *cluster, task_id{pb::WORKER, self->state.index}, n,
      [self, cluster, n, ps_tasks, backoff, give_up](caf::expected<node_actor> node) {
        if (node) {
          if (--self->state.greeting > 0) return;
          self->state.params->route();  // every lane is known now
          for (auto& rp : self->state.awaiting_ready) rp.deliver(true);
          self->state.awaiting_ready.clear();
          run_next(self);
          return;
        }
        const auto& err = node.error();
        if (transient(err) && self->clock().now() + backoff < give_up) {
          self->state.net->after(backoff,
                                 [=] { dial_ps_node(self, cluster, n, ps_tasks, next_retry(backoff), give_up); });
          return;
        }
        spdlog::warn("worker:{}: PS node {} did not admit it ({}); stopping (the coordinator respawns it)",
                     self->state.index, cluster->nodes[n].address(), describe(err));
        stop(self, err);
      },
      open_lane);
}

// The PS tasks each node serves: `ps_nodes` (SpawnWorker.ps_nodes: a
// shard moved to a standby node, ps tasks added or retired), else the
// topology's.
void dial_ps_nodes(worker_ptr self, const cluster_spec& cluster,
                   const google::protobuf::RepeatedField<uint32_t>& ps_nodes) {
  std::map<size_t, std::vector<int>> serving;
  if (ps_nodes.empty()) {
    for (size_t n = 0; n < cluster.nodes.size(); ++n)
      for (auto& t : cluster.nodes[n].tasks)
        if (t.role == pb::PS) serving[n].push_back(int(t.index));
  }
  for (int ps = 0; ps < ps_nodes.size(); ++ps)  // checked in spawn_worker
    if (ps_nodes[ps] != kNoPsNode) serving[ps_nodes[ps]].push_back(ps);
  auto shared = std::make_shared<const cluster_spec>(cluster);
  const auto give_up = self->clock().now() + kPsDialPatience;
  self->state.greeting += serving.size();
  for (auto& [n, ps_tasks] : serving) dial_ps_node(self, shared, n, ps_tasks, kFirstRetry, give_up);
}

// Who may send a worker what (actors/net/peer_table.hpp): closures and injected
// faults come from the coordinator.
constexpr std::initializer_list<Role> kCommanders = {pb::COORDINATOR, pb::CLIENT};

// What closures' functions use (worker_functions.hpp), wired to the parts.
void wire_context(worker_ptr self) {
  auto& st = self->state;
  auto& ctx = st.ctx;
  ctx.worker = st.index;
  ctx.model = st.model.get();
  ctx.remap = st.remap.get();
  ctx.metrics = st.metrics.get();
  ctx.dataset = [self](const pb::Value& arg) { return dataset_of(self, arg); };
  ctx.next_batch = [self](const dataset_actor& d, batch_prefetch::batch_fn then) {
    self->state.batches->next(d, std::move(then));
  };
  ctx.read_split = [self](const dataset_actor& d, int64_t begin, int64_t end, std::function<void(caf::error)> then) {
    self->state.batches->read_split(d, begin, end, std::move(then));
  };
  ctx.pull = [self](int64_t step, std::function<void(caf::error)> then) {
    self->state.params->pull(step, std::move(then));
  };
  ctx.pull_for_step = [self](int64_t step, std::function<void(caf::error)> then) {
    self->state.params->pull_for_step(step, std::move(then));  // keeps ctx.params on the buffer in use
  };
  ctx.pull_rows = [self](int64_t step, const std::vector<std::vector<int64_t>>& ids,
                         std::function<void(caf::error)> then) {
    self->state.params->pull_rows(step, ids, std::move(then));
  };
  ctx.push = [self](int64_t step, int32_t examples, std::function<void(caf::error)> then) {
    push(self, step, examples, std::move(then));
  };
  ctx.next_step = [self] { return self->state.step++; };
}

caf::result<pb::ClosuresDone> on_run_closures(worker_ptr self, pb::RunClosures& req,
                                              std::vector<dataset_actor>& datasets) {
  auto& st = self->state;
  // Checked before the promise takes the sender out of the request.
  if (auto err = check_request(self, req, kCommanders, "RunClosures")) return err;
  if (size_t(req.datasets_size()) != datasets.size())
    return make_error(errc::invalid_argument,
                      fmt::format("RunClosures names {} datasets, {} sent", req.datasets_size(), datasets.size()));
  st.answered.erase(st.answered.begin(), st.answered.lower_bound(req.answered_below()));
  if (req.batch() != 0) {  // sent again (a lost request or answer): answered, or attached to its run
    if (auto i = st.answered.find(req.batch()); i != st.answered.end()) {
      if (!i->second) return i->second.error();
      return *i->second;
    }
    for (auto& b : st.queue)
      if (b.request.batch() == req.batch()) {
        b.copies.push_back(self->make_response_promise<pb::ClosuresDone>());
        return b.copies.back();
      }
  }
  auto promise = self->make_response_promise<pb::ClosuresDone>();
  const bool idle = running_batch(st) == nullptr;
  st.queue.push_back({st.next_seq++, promise, {}, std::move(req), std::move(datasets), {}, {}, 0, {}, {}});
  if (idle) run_next(self);
  answer_finished(self);  // an empty batch
  return promise;
}

local_worker_actor::behavior_type worker_behavior(worker_ptr self, pb::SpawnWorker spec, shard_list shards,
                                                  cluster_spec cluster, peer_table_ptr peers,
                                                  std::vector<kernels::compute_device> devices) {
  auto& st = self->state;
  st.peers = std::move(peers);
  st.index = spec.worker();
  st.incarnation = spec.incarnation();
  st.where = fmt::format("worker:{}: ", st.index);
  st.model = std::make_unique<kernels::device_model>(train::from_proto(spec.model()), std::move(devices));
  st.remap = std::make_unique<kernels::id_remap>(st.model->spec());
  std::vector<sharded_variable> vars;
  for (auto& v : spec.variables()) vars.push_back(train::from_proto(v));
  std::optional<std::chrono::milliseconds> deadline;
  if (spec.request_timeout_ms() > 0) deadline = std::chrono::milliseconds(spec.request_timeout_ms());
  // A shard whose link died answers nothing more (its requests would wait
  // for their deadlines): stop, and the proxy re-runs this worker's closures
  // elsewhere and respawns it, dialing the PS nodes afresh.
  for (auto& shard : shards)
    if (shard) self->monitor(shard);  // none: a retired ps task
  st.num_shards = uint32_t(shards.size());
  st.net = std::make_unique<transport>(self, st.index, std::move(shards), deadline);
  st.params = std::make_unique<param_buffers>(*st.model, std::move(vars), spec.routing_version(), st.index,
                                              spec.pull_ahead(), *st.net, &st.ctx.params, *st.remap);
  st.batches = std::make_unique<batch_prefetch>(*st.net);
  st.metrics = std::make_unique<worker_metrics>(metrics::registry_of(self->home_system()),
                                                trace::recorder_of(self->home_system()), st.index);
  st.params->observe_cache(st.metrics->cache_hits(), st.metrics->cache_misses());
  if (spec.threads() > 0) kernels::set_cpu_threads(int(spec.threads()));
  dial_ps_nodes(self, cluster, spec.ps_nodes());
  self->set_down_handler([self](const caf::down_msg& msg) {
    spdlog::warn("worker:{}: lost a PS shard ({}); stopping (the coordinator respawns it)", self->state.index,
                 caf::to_string(msg.reason));
    stop(self, msg.reason);
  });
  wire_context(self);
  return {
      [self](pb::RunClosures& req, std::vector<dataset_actor>& datasets) {
        return on_run_closures(self, req, datasets);
      },
      [self](const pb::InjectFault& req) -> caf::result<pb::FaultInjected> {
        if (auto err = check_request(self, req, kCommanders, "InjectFault")) return err;
        self->state.net->inject(req);
        return pb::FaultInjected{};
      },
      [self](worker_timer_atom, uint64_t id) { self->state.net->on_timer(id); },
      [self](const pb::Reroute& req) {
        if (auto err = check_request(self, req, kCommanders, "Reroute")) return;
        if (auto err = self->state.params->reroute(req))
          spdlog::error("{}a Reroute not taken: {}", self->state.where, describe(err));
      },
      [self](worker_ready_atom) -> caf::result<bool> {  // from its node, which answers SpawnWorker then
        auto& st = self->state;
        if (st.greeting == 0) return true;
        st.awaiting_ready.push_back(self->make_response_promise<bool>());
        return st.awaiting_ready.back();
      },
  };
}

}  // namespace

caf::expected<local_worker_actor> spawn_worker(caf::actor_system& sys, const pb::SpawnWorker& spec, shard_list shards,
                                               const cluster_spec& cluster, peer_table_ptr peers,
                                               std::vector<caf::actor_addr> stoppers) {
  auto model = train::from_proto(spec.model());
  if (auto err = check_model(model)) return in_context(err, "worker model");
  kernels::graph_model probe(model, kernels::reference_ops());
  auto& params = probe.parameters();
  if (size_t(spec.variables_size()) != params.size())
    return make_error(errc::invalid_config, "worker model has " + std::to_string(params.size()) + " parameters, " +
                                                std::to_string(spec.variables_size()) + " variables given");
  for (size_t i = 0; i < params.size(); ++i) {
    auto& v = spec.variables(int(i));
    auto shape = params[i].shape;  // a dynamic table's: [rows of one batch, dim] here, [virtual rows, dim] on the PS
    if (params[i].dynamic) shape[0] = kernels::kVirtualRows;
    if (std::vector<int64_t>(v.shape().begin(), v.shape().end()) != shape || v.dynamic() != params[i].dynamic)
      return make_error(errc::bad_tensor, "variable '" + v.name() + "' does not have the shape of " + params[i].name);
    for (auto& s : v.shards())
      if (s.ps_task() >= shards.size() || !shards[s.ps_task()])
        return make_error(errc::invalid_config,
                          fmt::format("variable '{}' lives on ps:{}, which the job does not serve ({} ps task(s))",
                                      v.name(), s.ps_task(), shards.size()));
  }
  if (!spec.ps_nodes().empty() && size_t(spec.ps_nodes_size()) != shards.size())
    return make_error(errc::invalid_config,
                      fmt::format("ps_nodes names {} nodes for {} shards", spec.ps_nodes_size(), shards.size()));
  for (auto n : spec.ps_nodes())
    if (n != kNoPsNode && n >= cluster.nodes.size())
      return make_error(errc::invalid_config,
                        fmt::format("ps_nodes names node {}, the topology has {}", n, cluster.nodes.size()));
  auto devices = worker_devices(spec, cluster, kernels::cuda_device_count());
  if (!devices) return devices.error();
  // Not detached: CAF 0.17 can hang at shutdown waiting for a detached
  // actor (actor-framework#1196, fixed in 0.18); a step holds one scheduler thread.
  exit_guard guard{std::move(stoppers), peers, fmt::format("worker:{}: ", spec.worker())};
  return spawn_guarded<worker_state, local_worker_actor>(
      sys, std::move(guard),
      [spec, shards = std::move(shards), cluster, peers, devices = std::move(*devices)](worker_ptr self) mutable {
        return worker_behavior(self, spec, std::move(shards), cluster, std::move(peers), std::move(devices));
      });
}

}  // namespace actorps
