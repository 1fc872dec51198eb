#include "actors/worker/bulk_link.hpp"

#include <algorithm>

#include <caf/scoped_actor.hpp>

#include "actors/worker/atoms.hpp"

namespace actorps {
namespace {

// The lane's own failures (the connection broke) are a lost link; what the
// shard answered keeps its code.
caf::error lane_error(const caf::error& err, const std::string& where) {
  if (err == errc::io_error) return make_error(errc::unreachable, "bulk lane to " + where + ": " + describe(err));
  return err;
}

// Where a pull apart writes: `answer`'s own buffer, cut into r's ranges.
std::vector<float*> apart(const bulk_pull_req& r, bulk_pulled& answer) {
  answer.values.resize(size_t(bulk_elements(r.head)));
  std::vector<float*> parts;
  float* at = answer.values.data();
  for (int i = 0; i < r.head.ranges_size(); ++i) {
    parts.push_back(at);
    answer.into.emplace_back(r.out[size_t(i)], r.head.ranges(i).count());
    at += r.head.ranges(i).count();
  }
  return parts;
}

}  // namespace

bulk_push_req copied(const bulk_push_req& req) {
  auto copy = std::make_shared<std::vector<float>>();
  copy->reserve(size_t(bulk_elements(req.head)));
  for (int i = 0; i < req.head.ranges_size(); ++i)
    copy->insert(copy->end(), req.grads[size_t(i)], req.grads[size_t(i)] + req.head.ranges(i).count());
  bulk_push_req out{req.head, {}, copy};
  const float* at = copy->data();
  for (auto& r : req.head.ranges()) out.grads.push_back(at), at += r.count();
  return out;
}

void bulk_pulled::copy_in() const {
  const float* at = values.data();
  for (auto& [to, count] : into) {
    std::copy(at, at + count, to);
    at += count;
  }
}

caf::expected<std::unique_ptr<bulk_link>> bulk_link::open(caf::actor_system& sys, const std::string& host,
                                                          uint16_t port, const std::string& token) {
  auto client = bulk_client::connect(host, port, token);
  if (!client) return client.error();
  std::unique_ptr<bulk_link> link(new bulk_link(std::move(*client), host + ":" + std::to_string(port)));
  std::promise<caf::actor> ready;
  auto handle = ready.get_future();
  link->thread_ = std::thread([l = link.get(), &sys, &ready] { l->serve(sys, ready); });
  link->handle_ = handle.get();
  return link;
}

void bulk_link::serve(caf::actor_system& sys, std::promise<caf::actor>& ready) {
  caf::scoped_actor self(sys);
  ready.set_value(caf::actor_cast<caf::actor>(self));
  bool running = true;
  self->receive_while([&] { return running; })(
      [&](const bulk_push_req& r) -> caf::result<pb::PushAck> {
        auto ack = client_.push(r.head, r.grads);
        if (!ack) return lane_error(ack.error(), where_);
        return std::move(*ack);
      },
      [&](const bulk_pull_req& r) -> caf::result<bulk_pulled> {
        bulk_pulled answer;
        const auto own = r.apart ? apart(r, answer) : std::vector<float*>{};
        if (auto err = client_.pull(r.head, r.apart ? own : r.out)) return lane_error(err, where_);
        return answer;
      },
      [&](bulk_stop_atom) { running = false; });
}

bulk_link::~bulk_link() {
  client_.cut();
  caf::anon_send(handle_, bulk_stop_atom_v);
  thread_.join();
}

}  // namespace actorps
