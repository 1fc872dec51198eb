#include "actors/net/peer_table.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>
#include <caf/actor_control_block.hpp>

#include "messages/errors.hpp"

namespace actorps {

peer_table::peer_table(runtime_options limits, metrics::registry* reg) : limits_(std::move(limits)) {
  if (reg == nullptr) return;
  admitted_peers_ =
      &reg->gauges("actorps_node_admitted_peers", "Peer processes this node admitted (Hello)", {}).with({});
  refused_by_kind_ =
      &reg->counters("actorps_node_refused_requests_total", "Requests this node's actors refused, by error", {"error"});
}

void peer_table::admit(const caf::node_id& node, task_id task) {
  std::lock_guard<std::mutex> guard(m_);
  auto& tasks = admitted_[node];
  if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) tasks.push_back(task);
  if (admitted_peers_ != nullptr) admitted_peers_->set(double(admitted_.size()));
}

std::string peer_table::name_locked(const caf::strong_actor_ptr& sender, const caf::node_id& here) const {
  if (sender == nullptr) return "anonymous";
  if (sender->node() == here) return "local";
  auto i = admitted_.find(sender->node());
  if (i == admitted_.end()) return "node " + to_string(sender->node());
  std::string name;  // a process may host several tasks (a coordinator and a worker)
  for (auto& t : i->second) name += (name.empty() ? "" : "+") + to_string(t);
  return name;
}

std::string peer_table::peer_name(const caf::strong_actor_ptr& sender, const caf::node_id& here) const {
  std::lock_guard<std::mutex> guard(m_);
  return name_locked(sender, here);
}

void peer_table::count_locked(const std::string& peer, const caf::error& err) {
  const auto kind = is_actorps_error(err) ? to_string(static_cast<errc>(err.code())) : caf::to_string(err);
  const auto n = ++refused_[peer][kind];
  if (refused_by_kind_ != nullptr) refused_by_kind_->with({kind}).inc();
  if ((n & (n - 1)) == 0)  // the 1st, 2nd, 4th, 8th, ... of a kind: a flood does not flood the log
    spdlog::warn("refused a request of {} ({} so far): {}", peer, n, describe(err));
}

// Why a request may not pass (its code, and the reason after "<what> "), or none.
caf::error peer_table::refusal(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                               std::initializer_list<Role> roles, size_t bytes) const {
  if (sender == nullptr)
    return make_error(errc::not_admitted, "from an anonymous sender (requests must say who sends them)");
  if (sender->node() != here) {
    auto i = admitted_.find(sender->node());
    if (i == admitted_.end()) return make_error(errc::not_admitted, "from a process that never said Hello");
    auto allowed = [&](const task_id& t) { return std::find(roles.begin(), roles.end(), t.role) != roles.end(); };
    if (std::none_of(i->second.begin(), i->second.end(), allowed))
      return make_error(errc::forbidden, "is not for " + name_locked(sender, here));
  }
  if (bytes > limits_.max_message_bytes)
    return make_error(errc::too_large, "of " + std::to_string(bytes) + " bytes, over max_message_bytes (" +
                                           std::to_string(limits_.max_message_bytes) + ")");
  return caf::none;
}

caf::error peer_table::check(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                             std::initializer_list<Role> roles, size_t bytes, std::string_view where,
                             std::string_view what) {
  if (sender != nullptr && sender->node() == here && bytes <= limits_.max_message_bytes) return caf::none;  // no lock
  std::lock_guard<std::mutex> guard(m_);
  auto why = refusal(sender, here, roles, bytes);
  if (!why) return caf::none;
  auto err = make_error(static_cast<errc>(why.code()), std::string(where) + std::string(what) + " " + describe(why));
  count_locked(name_locked(sender, here), err);
  return err;
}

void peer_table::count(const caf::strong_actor_ptr& sender, const caf::node_id& here, const caf::error& err) {
  std::lock_guard<std::mutex> guard(m_);
  count_locked(name_locked(sender, here), err);
}

std::vector<pb::PeerRefusals> peer_table::refusals() const {
  std::lock_guard<std::mutex> guard(m_);
  std::vector<pb::PeerRefusals> out;
  for (auto& [peer, kinds] : refused_) {
    auto& r = out.emplace_back();
    r.set_peer(peer);
    for (auto& [kind, n] : kinds) (*r.mutable_counts())[kind] = n;
  }
  return out;
}

}  // namespace actorps
