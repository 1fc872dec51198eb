// Fakes of the coordinator's peers for the deterministic actor tests:
// workers, shards, nodes and datasets that record what they get and answer
// when the test says (tests/actor_test.hpp drives them).
#pragma once

#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/coordinator/closure_queue.hpp"
#include "messages/wire.hpp"
#include "tests/actor_test.hpp"

namespace actorps::testing {

// ---- fakes ----

struct fake_worker_state {
  static inline const char* name = "fake_worker";
  struct held {
    pb::RunClosures request;
    caf::response_promise promise;
  };
  std::vector<held> batches;                // in arrival order
  size_t answered = 0;                      // batches[0, answered) were answered
  errc fail_code = errc::invalid_argument;  // how the closure answer_atom names fails
  std::vector<uint64_t> reroutes;           // the routing versions it was sent, in order
};

// Each closure's result: its argument times 10; the closure whose argument
// is `fail` fails with `code`.
inline pb::ClosuresDone done_for(const pb::RunClosures& req, int64_t fail, errc code) {
  pb::ClosuresDone done;
  done.set_busy_micros(10 * int64_t(req.closures_size()));
  for (auto& c : req.closures()) {
    auto* r = done.add_results();
    r->set_id(c.id());
    const auto x = c.args(0).integer();
    if (x == fail) {
      r->set_error_code(uint8_t(code));
      r->set_error("bad argument " + std::to_string(x));
    } else {
      r->add_values()->set_integer(10 * x);
    }
  }
  return done;
}

inline caf::behavior fake_worker(caf::stateful_actor<fake_worker_state>* self) {
  return {
      [self](pb::RunClosures& req, std::vector<dataset_actor>&) {
        self->state.batches.push_back({std::move(req), self->make_response_promise()});
      },
      [self](answer_atom, int64_t fail) {
        auto& st = self->state;
        for (; st.answered < st.batches.size(); ++st.answered)
          st.batches[st.answered].promise.deliver(done_for(st.batches[st.answered].request, fail, st.fail_code));
      },
      [self](const pb::Reroute& req) { self->state.reroutes.push_back(req.routing_version()); },
  };
}

struct fake_shard_state {
  static inline const char* name = "fake_shard";
  std::vector<std::string> log;  // what it was asked, in order
  std::vector<pb::Assign> assigns;
  std::vector<caf::strong_actor_ptr> backups;  // the backups it was given
  int64_t step = 0;
};

inline caf::behavior fake_shard(caf::stateful_actor<fake_shard_state>* self) {
  auto note = [self](std::string what) { self->state.log.push_back(std::move(what)); };
  return {
      [note](const pb::CreateVariables&) {
        note("create");
        return pb::Created{};
      },
      [note](const pb::SetLearningRate& r) {
        note("lr " + std::to_string(r.learning_rate()));
        return pb::LearningRateSet{};
      },
      [self, note](const pb::Assign& a) {
        note("assign");
        self->state.assigns.push_back(a);
        return pb::Assigned{};
      },
      [self, note](const pb::ShardStatsRequest&) {
        note("stats");
        pb::ShardStats s;
        s.set_step(self->state.step);
        return s;
      },
      [note](const pb::WorkerLost& lost) {
        note("worker_lost " + std::to_string(lost.worker()));
        return pb::ShardStats{};
      },
      [self, note](const pb::Replicate& r, const caf::strong_actor_ptr& backup) {
        note("replicate on " + std::to_string(r.backup_node()));
        self->state.backups.push_back(backup);
        return pb::Replicated{};
      },
  };
}

struct fake_node_state {
  static inline const char* name = "fake_node";
  std::vector<caf::actor> workers, shards, datasets;  // spawned on request, in order
  std::vector<pb::SpawnShard> shard_requests;
  std::vector<pb::InjectFault> faults;  // injected into its worker, in order
  bool slow_data = false;               // its datasets answer DatasetInfoRequest only once sent answer_atom
};

inline pb::DatasetInfo fake_dataset_info() {
  pb::DatasetInfo info;
  info.set_features(4);
  return info;
}

// A dataset of 4-feature examples (it only answers DatasetInfoRequest).
inline caf::behavior fake_dataset(caf::event_based_actor*) {
  return {[](const pb::DatasetInfoRequest&) { return fake_dataset_info(); }};
}

struct slow_dataset_state {
  static inline const char* name = "slow_dataset";
  std::vector<caf::response_promise> asked;
};

// fake_dataset still reading its data: DatasetInfoRequest is answered once
// it is sent answer_atom.
inline caf::behavior slow_dataset(caf::stateful_actor<slow_dataset_state>* self) {
  return {
      [self](const pb::DatasetInfoRequest&) { self->state.asked.push_back(self->make_response_promise()); },
      [self](answer_atom, int64_t) {
        for (auto& rp : self->state.asked) rp.deliver(fake_dataset_info());
        self->state.asked.clear();
      },
  };
}

/// A node that takes a SpawnWorker and never answers (a process about to die).
struct silent_node_state {
  static inline const char* name = "silent_node";
  std::vector<caf::response_promise> pending;
};
inline caf::behavior silent_node(caf::stateful_actor<silent_node_state>* self) {
  return {
      [self](const pb::SpawnWorker&, const shard_list&) {
        self->state.pending.push_back(self->make_response_promise());
        return caf::delegated<worker_actor>{};
      },
  };
}

inline caf::behavior fake_node(caf::stateful_actor<fake_node_state>* self) {
  return {
      [self](const pb::SpawnWorker&, const shard_list&) {
        self->state.workers.push_back(spawn_fake(*self, fake_worker));
        return caf::actor_cast<worker_actor>(self->state.workers.back());
      },
      [self](const pb::SpawnDataset&) {
        self->state.datasets.push_back(self->state.slow_data ? spawn_fake(*self, slow_dataset)
                                                             : spawn_fake(*self, fake_dataset));
        return caf::actor_cast<dataset_actor>(self->state.datasets.back());
      },
      [self](const pb::InjectFault& req) {
        self->state.faults.push_back(req);
        return pb::FaultInjected{};
      },
      [self](const pb::SpawnShard& req) {
        self->state.shard_requests.push_back(req);
        self->state.shards.push_back(spawn_fake(*self, fake_shard));
        return caf::actor_cast<ps_shard_actor>(self->state.shards.back());
      },
  };
}

inline pb::Closure closure_of(int64_t x) {
  pb::Closure c;
  c.set_function("f");
  pb::Value v;
  v.set_integer(x);
  *c.add_args() = v;
  return c;
}

// Has the worker answer every batch it holds (once the scheduler runs);
// how many that is.
inline size_t answer_all(const caf::actor& worker, int64_t fail = -1) {
  auto& st = state_of<fake_worker_state>(worker);
  caf::anon_send(worker, answer_atom_v, fail);
  return st.batches.size() - st.answered;
}

// Closures f(from), ..., f(to - 1) into the queue, for any worker.
inline std::vector<remote_value> put_closures(closure_queue& q, int64_t from, int64_t to) {
  std::vector<remote_value> out;
  for (int64_t i = from; i < to; ++i) out.push_back(q.put(closure_of(i), -1));
  return out;
}

inline size_t closures_held(const caf::actor& worker) {
  size_t n = 0;
  for (auto& b : state_of<fake_worker_state>(worker).batches) n += size_t(b.request.closures_size());
  return n;
}

inline int64_t value_of(const remote_value& v) {
  auto got = v.fetch();
  BOOST_REQUIRE_MESSAGE(got, (got ? "" : describe(got.error())));
  return got->at(0).integer();
}

}  // namespace actorps::testing
