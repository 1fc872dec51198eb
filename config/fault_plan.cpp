#include "config/fault_plan.hpp"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "config/toml_reader.hpp"

namespace actorps {
namespace {

// A number, or [low, high] to draw from.
caf::error read_range(const reader& r, const toml::table& t, const std::string& p, const char* key, double& lo,
                      double& hi) {
  auto* n = t.get(key);
  if (n == nullptr) return caf::none;
  if (auto v = n->value<double>()) {
    lo = hi = *v;
  } else if (auto* a = n->as_array();
             a != nullptr && a->size() == 2 && a->get(0)->value<double>() && a->get(1)->value<double>()) {
    lo = *a->get(0)->value<double>();
    hi = *a->get(1)->value<double>();
  } else {
    return r.fail(*n, p + "." + key, "expected a number of seconds or [low, high]");
  }
  if (lo < 0 || hi < lo) return r.fail(*n, p + "." + key, "expected 0 <= low <= high");
  return caf::none;
}

}  // namespace

namespace {

using node_ref = const toml::node&;

// A drop's, duplicate's, reorder's or delay's pair: a worker and a PS task,
// its datasets or the coordinator; a PS task and the coordinator or another
// PS task (its backup's node).
caf::error check_message_fault(const reader& r, const toml::table& t, const std::string& p, const std::string& peer,
                               float fraction, const cluster_spec& spec, fault& f) {
  f.datasets = peer == "datasets";
  auto other = f.datasets ? task_id{pb::WORKER, f.task.index} : parse_task(peer);
  if (f.task.role != pb::WORKER && f.task.role != pb::PS)
    return r.fail(*t.get("task"), p + ".task", "a drop's, duplicate's, reorder's or delay's task is a worker or a ps");
  const bool ps = f.task.role == pb::PS;
  if (!other || spec.node_of(*other) == nullptr || (ps && *other == f.task) ||
      (ps ? other->role != pb::COORDINATOR && other->role != pb::PS
          : other->role != pb::PS && other->role != pb::COORDINATOR && !f.datasets))
    return r.fail(t.contains("peer") ? *t.get("peer") : static_cast<node_ref>(t), p + ".peer",
                  ps ? "expected the coordinator of the cluster (its requests to the ps) or another ps task "
                       "(the node of the ps's backup)"
                     : "expected a ps task or the coordinator of the cluster, or \"datasets\" (the worker's)");
  if (f.packets && (ps || other->role != pb::PS))
    return r.fail(*t.get("packets"), p + ".packets", "packets are dropped between a worker's and a PS's hosts");
  if (f.what != fault::kind::delay && !(fraction > 0 && fraction <= 1))
    return r.fail(t, p + ".fraction", "expected a number in (0, 1]");
  if ((f.what == fault::kind::delay || f.what == fault::kind::reorder) && f.delay_ms == 0)
    return r.fail(t, p, "a delay or reorder needs 'delay_ms'");
  f.peer = *other;
  f.fraction = fraction;
  return caf::none;
}

// The fault's task: a task of the cluster other than the coordinator (an
// add_ps names none: the coordinator carries it out, on a standby node).
caf::error check_task(const reader& r, const toml::table& t, const std::string& p, const std::string& task,
                      const cluster_spec& spec, fault& f) {
  if (f.what == fault::kind::add_ps) {
    if (t.contains("task"))
      return r.fail(*t.get("task"), p + ".task", "add_ps takes no task: the coordinator picks a free standby node");
    if (spec.count(pb::STANDBY) == 0)
      return r.fail(t, p, "add_ps needs a node of role \"standby\" in the cluster to add the ps task on");
    f.task = task_id{pb::COORDINATOR, 0};
    return caf::none;
  }
  if (!t.contains("task")) return r.fail(t, p, "needs 'kind' and 'task'");
  auto parsed = parse_task(task);
  if (!parsed || spec.node_of(*parsed) == nullptr)
    return r.fail(*t.get("task"), p + ".task", "\"" + task + "\" is not a task of the cluster");
  if (parsed->role == pb::COORDINATOR)
    return r.fail(*t.get("task"), p + ".task", "the coordinator runs the plan (kill `actorps chaos` itself instead)");
  if (f.what == fault::kind::leave && parsed->role != pb::WORKER && parsed->role != pb::PS)
    return r.fail(*t.get("task"), p + ".task", "a leave's task is a worker or a ps (SIGTERM drains it)");
  f.task = *parsed;
  return caf::none;
}

// Whether a fault of this kind lasts (needs 'duration').
bool lasts(fault::kind k) { return k != fault::kind::kill && k != fault::kind::leave && k != fault::kind::add_ps; }

}  // namespace

caf::expected<std::vector<fault>> parse_faults(std::string_view text, std::string_view path, const cluster_spec& spec) {
  auto doc = parse_document(text, path);
  if (!doc) return doc.error();
  std::vector<fault> out;
  auto* node = doc->get("faults");
  if (node == nullptr) return out;
  reader r(path);
  auto* list = node->as_array();
  if (list == nullptr) return r.fail(*node, "faults", "expected [[faults]] tables");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string p = "faults[" + std::to_string(i) + "]";
    auto* t = list->get(i)->as_table();
    if (t == nullptr) return r.fail(*list->get(i), p, "expected a table");
    if (auto err = r.only_keys(
            *t, p, {"kind", "task", "at", "at_step", "duration", "peer", "fraction", "delay_ms", "replies", "packets"}))
      return err;
    fault f;
    std::string task, peer;
    float fraction = 0;
    caf::error err;
    (err = r.choose(*t, p, "kind", f.what,
                    {std::pair{"kill", fault::kind::kill}, std::pair{"pause", fault::kind::pause},
                     std::pair{"drop", fault::kind::drop}, std::pair{"delay", fault::kind::delay},
                     std::pair{"partition", fault::kind::partition}, std::pair{"duplicate", fault::kind::duplicate},
                     std::pair{"reorder", fault::kind::reorder}, std::pair{"leave", fault::kind::leave},
                     std::pair{"add_ps", fault::kind::add_ps}})) ||
        (err = r.get(*t, p, "task", task)) || (err = r.get(*t, p, "at_step", f.at_step, 0, INT64_MAX)) ||
        (err = r.get(*t, p, "peer", peer)) || (err = r.get(*t, p, "fraction", fraction)) ||
        (err = r.get(*t, p, "delay_ms", f.delay_ms, 1, 600000)) || (err = r.get(*t, p, "replies", f.replies)) ||
        (err = r.get(*t, p, "packets", f.packets)) || (err = read_range(r, *t, p, "at", f.at_lo, f.at_hi)) ||
        (err = read_range(r, *t, p, "duration", f.duration_lo, f.duration_hi));
    if (err) return err;
    if (!t->contains("kind")) return r.fail(*t, p, "needs 'kind' and 'task'");
    if (t->contains("at") == t->contains("at_step")) return r.fail(*t, p, "needs exactly one of 'at' and 'at_step'");
    if (lasts(f.what) && !t->contains("duration"))
      return r.fail(*t, p, "a pause, drop, duplicate, reorder, delay or partition needs 'duration'");
    if (auto bad = check_task(r, *t, p, task, spec, f)) return bad;
    if (f.replies && f.what != fault::kind::drop)
      return r.fail(*t->get("replies"), p + ".replies", "only a drop loses replies");
    if (f.packets && (f.what != fault::kind::drop || f.replies))
      return r.fail(*t->get("packets"), p + ".packets", "only a drop of requests drops packets");
    if (f.what == fault::kind::drop || f.what == fault::kind::duplicate || f.what == fault::kind::delay ||
        f.what == fault::kind::reorder)
      if (auto bad = check_message_fault(r, *t, p, peer, fraction, spec, f)) return bad;
    if (f.what == fault::kind::partition) {
      auto other = parse_task(peer);
      if (!other || spec.node_of(*other) == nullptr)
        return r.fail(t->contains("peer") ? *t->get("peer") : static_cast<node_ref>(*t), p + ".peer",
                      "expected a task of the cluster");
      if (spec.node_of(*other)->host == spec.node_of(f.task)->host)
        return r.fail(*t->get("peer"), p + ".peer", "runs on the host of " + task + ": a partition is between hosts");
      f.peer = *other;
      f.fraction = 1;  // without namespaces: every request of the worker to the PS is dropped
    }
    out.push_back(f);
  }
  return out;
}

std::vector<planned_fault> plan_faults(const std::vector<fault>& faults, uint64_t seed) {
  std::mt19937_64 gen(seed), seeds(~seed);  // the times; each message fault's own draws
  auto draw = [&](double lo, double hi) { return lo == hi ? lo : std::uniform_real_distribution<double>(lo, hi)(gen); };
  std::vector<planned_fault> out;
  for (auto& f : faults) {
    planned_fault p{
        f.what,    f.task, f.peer, f.datasets, f.fraction, f.replies, f.packets, f.delay_ms, draw(f.at_lo, f.at_hi),
        f.at_step, 0};
    p.duration = draw(f.duration_lo, f.duration_hi);
    p.seed = seeds();
    out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](auto& a, auto& b) { return a.at_step != b.at_step ? a.at_step < b.at_step : a.at < b.at; });
  return out;
}

std::string peer_name(const planned_fault& f) { return f.datasets ? "datasets" : to_string(f.peer); }

std::string to_string(const planned_fault& f) {
  auto when = f.at_step >= 0 ? fmt::format("at step {}", f.at_step) : fmt::format("at {:.2f} s", f.at);
  if (f.what == fault::kind::kill) return fmt::format("SIGKILL {} {}", to_string(f.task), when);
  if (f.what == fault::kind::leave) return fmt::format("SIGTERM {} (it drains and leaves) {}", to_string(f.task), when);
  if (f.what == fault::kind::add_ps) return fmt::format("add a ps task on a free standby node {}", when);
  if (f.what == fault::kind::delay)
    return fmt::format("delay {} -> {} by {} ms {} for {:.2f} s", to_string(f.task), peer_name(f), f.delay_ms, when,
                       f.duration);
  if (f.what == fault::kind::reorder)
    return fmt::format("reorder {:.0f}% of {} -> {} by {} ms {} for {:.2f} s", 100 * f.fraction, to_string(f.task),
                       peer_name(f), f.delay_ms, when, f.duration);
  if (f.packets)
    return fmt::format("drop {:.0f}% of the packets from the host of {} to that of {} {} for {:.2f} s",
                       100 * f.fraction, to_string(f.task), to_string(f.peer), when, f.duration);
  if (f.what == fault::kind::drop || f.what == fault::kind::duplicate)
    return fmt::format("{} {:.0f}% of {} -> {}{} {} for {:.2f} s", f.what == fault::kind::drop ? "drop" : "duplicate",
                       100 * f.fraction, to_string(f.task), peer_name(f), f.replies ? " (replies)" : "", when,
                       f.duration);
  if (f.what == fault::kind::partition)
    return fmt::format("partition the hosts of {} and {} {} for {:.2f} s", to_string(f.task), to_string(f.peer), when,
                       f.duration);
  return fmt::format("SIGSTOP {} {} for {:.2f} s", to_string(f.task), when, f.duration);
}

namespace {

// The soak's kinds, in turn; "coordinator" is the soak's own kill.
struct soak_kind {
  fault::kind what;
  pb::Role role;  // the task's
  bool replies = false;
  bool coordinator = false;
  bool packets = false;  // IP packets where the soak can drop them, else the worker's requests
};
constexpr soak_kind kSoakKinds[] = {
    {fault::kind::kill, pb::WORKER},       {fault::kind::drop, pb::WORKER},
    {fault::kind::pause, pb::PS},          {fault::kind::duplicate, pb::WORKER},
    {fault::kind::kill, pb::PS},           {fault::kind::reorder, pb::WORKER},
    {fault::kind::pause, pb::WORKER},      {fault::kind::kill, pb::COORDINATOR, false, true},
    {fault::kind::drop, pb::WORKER, true}, {fault::kind::delay, pb::WORKER},
    {fault::kind::partition, pb::WORKER},  {fault::kind::drop, pb::WORKER, false, false, true},
};
constexpr int kSoakFaultsPerRound = 4;

std::vector<task_id> tasks_of(const cluster_spec& spec, pb::Role role) {
  std::vector<task_id> out;
  for (auto& node : spec.nodes)
    for (auto& t : node.tasks)
      if (t.role == role) out.push_back(t);
  return out;
}

// A message fault's pair, drawn: the worker's requests to a PS task or its
// datasets, the coordinator's to the worker, or the coordinator's to a PS
// task (the task becomes that PS).
void pick_peer(fault& f, const cluster_spec& spec, const std::vector<task_id>& shards, std::mt19937_64& gen) {
  auto peers = shards;
  const auto coordinators = tasks_of(spec, pb::COORDINATOR);
  peers.insert(peers.end(), coordinators.begin(), coordinators.end());
  const size_t extra = coordinators.empty() ? 1 : 2;  // datasets; a PS from the coordinator
  const size_t i = std::uniform_int_distribution<size_t>(0, peers.size() + extra - 1)(gen);
  f.datasets = i == peers.size();
  f.peer = i < peers.size() ? peers[i] : f.task;
  if (i == peers.size() + 1) {
    f.task = shards[std::uniform_int_distribution<size_t>(0, shards.size() - 1)(gen)];
    f.peer = coordinators.front();
  }
}

// The faults every round adds to the kinds in turn: a worker leaves; a
// replicated round's ps killed (a failover) and its ps->backup traffic
// faulted twice, an elastic round's ps task drained and one added.
void draw_extras(const cluster_spec& spec, int round, soak_features features, std::mt19937_64& gen, double window,
                 soak_round& out) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); };
  auto pick = [&](const std::vector<task_id>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(gen)];
  };
  const auto workers = tasks_of(spec, pb::WORKER), shards = tasks_of(spec, pb::PS);
  auto at = [&](fault& f, double lo, double hi) { f.at_lo = f.at_hi = uniform(lo, hi) * window; };
  fault leave;
  leave.what = fault::kind::leave;
  leave.task = pick(workers);
  at(leave, 0.1, 0.6);
  out.faults.push_back(leave);
  if (features.replicated && shards.size() > 1) {
    fault kill;  // its shards fail over to their backups
    kill.what = fault::kind::kill;
    kill.task = pick(shards);
    at(kill, 0.65, 0.8);  // once the faults below ended and dropped backups are back
    out.faults.push_back(kill);
    constexpr fault::kind kinds[] = {fault::kind::drop, fault::kind::duplicate, fault::kind::reorder,
                                     fault::kind::drop};
    for (int j = 0; j < 2; ++j) {
      const int k = ((round - 1) / 2 * 2 + j) % 4;
      fault f;
      f.what = kinds[k];
      const size_t from = std::uniform_int_distribution<size_t>(0, shards.size() - 1)(gen);
      f.task = shards[from];
      f.peer = shards[(from + 1) % shards.size()];  // the node of its backup
      f.replies = k == 3;
      f.fraction = f.what == fault::kind::reorder ? 0.2 : 0.1;
      f.delay_ms = f.what == fault::kind::reorder ? 20 : 0;
      at(f, 0.05, 0.25);
      f.duration_lo = f.duration_hi = uniform(0.5, 1.5);
      out.faults.push_back(f);
    }
  }
  if (features.elastic && shards.size() > 1) {
    fault drain;
    drain.what = fault::kind::leave;
    drain.task = pick(shards);
    at(drain, 0.1, 0.3);
    fault add;
    add.what = fault::kind::add_ps;
    add.task = task_id{pb::COORDINATOR, 0};
    at(add, 0.2, 0.4);
    out.faults.push_back(drain);
    out.faults.push_back(add);
  }
}

}  // namespace

soak_round draw_soak_round(const cluster_spec& spec, uint64_t seed, int round, double window, soak_features features) {
  std::mt19937_64 gen(seed * 1000003 + uint64_t(round));
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); };
  auto pick = [&](const std::vector<task_id>& from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(gen)];
  };
  const auto workers = tasks_of(spec, pb::WORKER), shards = tasks_of(spec, pb::PS);
  soak_round out;
  for (int i = 0; i < kSoakFaultsPerRound; ++i) {
    const auto& k = kSoakKinds[size_t((round - 1) * kSoakFaultsPerRound + i) % std::size(kSoakKinds)];
    const double at = uniform(0.1, 0.7) * window;
    if (k.coordinator) {
      out.coordinator_kill_at = at;
      continue;
    }
    fault f;
    f.what = k.what;
    f.task = pick(k.role == pb::PS ? shards : workers);
    f.at_lo = f.at_hi = at;
    f.duration_lo = f.duration_hi = uniform(0.5, 3.0);
    if (f.what == fault::kind::kill || f.what == fault::kind::pause) {
      out.faults.push_back(f);
      continue;
    }
    const bool packets = k.packets && features.packets_dropped;
    if (f.what == fault::kind::partition || packets)
      f.peer = pick(shards);
    else
      pick_peer(f, spec, shards, gen);
    f.replies = k.replies;
    f.fraction = f.what == fault::kind::reorder ? 0.1 : 0.05;
    f.delay_ms = f.what == fault::kind::delay || f.what == fault::kind::reorder ? 20 : 0;
    if (f.what == fault::kind::partition || packets) {
      std::vector<std::pair<task_id, task_id>> apart;  // a worker and a PS on different hosts
      for (auto& w : workers)
        for (auto& s : shards)
          if (spec.node_of(w)->host != spec.node_of(s)->host) apart.emplace_back(w, s);
      if (!apart.empty())
        std::tie(f.task, f.peer) = apart[std::uniform_int_distribution<size_t>(0, apart.size() - 1)(gen)];
      else if (f.what == fault::kind::partition)
        f.what = fault::kind::drop;
      f.packets = packets && !apart.empty();
      f.fraction = packets ? 0.2 : 1;
    }
    out.faults.push_back(f);
  }
  draw_extras(spec, round, features, gen, window, out);
  return out;
}

int soak_rounds_for_every_kind() {
  return int((std::size(kSoakKinds) + kSoakFaultsPerRound - 1) / kSoakFaultsPerRound);
}

std::string to_toml(const fault& f) {
  static constexpr const char* kNames[] = {"kill",      "pause",   "drop",  "delay", "partition",
                                           "duplicate", "reorder", "leave", "add_ps"};
  std::string s = fmt::format("[[faults]]\nkind = \"{}\"\n", kNames[size_t(f.what)]);
  if (f.what != fault::kind::add_ps) s += fmt::format("task = \"{}\"\n", to_string(f.task));
  s += fmt::format("at = {:.3f}\n", f.at_lo);
  if (lasts(f.what)) s += fmt::format("duration = {:.3f}\n", f.duration_lo);
  if (!lasts(f.what) || f.what == fault::kind::pause) return s;
  s += fmt::format("peer = \"{}\"\n", f.datasets ? std::string("datasets") : to_string(f.peer));
  if (f.what != fault::kind::delay && f.what != fault::kind::partition)
    s += fmt::format("fraction = {:.3f}\n", f.fraction);
  if (f.delay_ms > 0) s += fmt::format("delay_ms = {}\n", f.delay_ms);
  if (f.replies) s += "replies = true\n";
  if (f.packets) s += "packets = true\n";
  return s;
}

}  // namespace actorps
