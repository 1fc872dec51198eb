#include "actors/placement/shard_move.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "actors/net/request_now.hpp"
#include "actors/variables/ps_client.hpp"
#include "kernels/ops.hpp"

namespace actorps {
namespace {

// Rounds of logged changes before FINISH, while each round still brought
// more than kSmallLog of them: what is replayed during the pause stays short.
constexpr int kMaxCatchUps = 4;
constexpr int64_t kSmallLog = 64;

using clock = std::chrono::steady_clock;

double seconds(clock::time_point from) { return std::chrono::duration<double>(clock::now() - from).count(); }

struct mover {
  caf::scoped_actor& self;
  const std::string& name;
  uint32_t to_ps;
  std::chrono::milliseconds timeout;
  ps_shard_actor source, target;
  move_report report;

  caf::expected<pb::MoveData> out(pb::MoveOut::Step step, int64_t offset = 0, int64_t count = 0, uint32_t slot = 0) {
    auto got = request_now<pb::MoveData>(self, source, timeout, move_step(step, name, offset, count, slot, to_ps));
    if (!got) return in_context(got.error(), fmt::format("its source, {}", pb::MoveOut::Step_Name(step)));
    return got;
  }

  caf::expected<pb::MoveData> in(pb::MoveIn req) {
    const auto step = req.step();
    req.set_name(name);
    auto got = request_now<pb::MoveData>(self, target, timeout, req);
    if (!got) return in_context(got.error(), fmt::format("its target, {}", pb::MoveIn::Step_Name(step)));
    return got;
  }

  // Logged changes, oldest first, until none waits; how many.
  caf::expected<int64_t> catch_up() {
    int64_t n = 0;
    for (bool more = true; more;) {
      auto log = out(pb::MoveOut::CATCH_UP);
      if (!log) return log.error();
      more = log->more();
      if (log->log_size() == 0) break;
      n += log->log_size();
      pb::MoveIn replay;
      replay.set_step(pb::MoveIn::REPLAY);
      replay.mutable_log()->Swap(log->mutable_log());
      if (auto done = in(std::move(replay)); !done) return done.error();
    }
    report.changes += n;
    return n;
  }

  // The target holds as many updates of the shard as its source applied:
  // each exactly once (an empty REPLAY answers its count).
  caf::error verify(uint64_t source_version) {
    pb::MoveIn ask;
    ask.set_step(pb::MoveIn::REPLAY);
    auto target_version = in(std::move(ask));
    if (!target_version) return target_version.error();
    if (target_version->version() == source_version) return caf::none;
    report.diverged = int64_t(source_version) - int64_t(target_version->version());
    return make_error(errc::internal, fmt::format("the target's copy holds {} update(s), its source {}",
                                                  target_version->version(), source_version));
  }

  // A dynamic table's frozen copy, page by page in its eviction order
  // (each row's values and slots together): the target puts them in it.
  caf::error copy_table(const pb::VariableSpec& spec) {
    const int slots = kernels::slot_count(static_cast<kernels::optimizer_kind>(spec.optimizer().kind()));
    int64_t row_bytes = 4 * (1 + slots);
    for (int d = 1; d < spec.shape_size(); ++d) row_bytes *= spec.shape(d);
    const int64_t page_rows = std::max<int64_t>(1, kDefaultChunkBytes / row_bytes);
    for (int64_t at = 0;;) {
      auto read = out(pb::MoveOut::READ, at, page_rows);
      if (!read) return read.error();
      const bool more = read->table().has_next();
      if (more && read->table().ids_size() == 0)
        return make_error(errc::internal, fmt::format("its source's page at row {} is empty, yet more follow", at));
      at += read->table().ids_size();
      report.bytes += int64_t(read->table().rows().size());
      pb::MoveIn write;
      write.set_step(pb::MoveIn::WRITE);
      write.mutable_table()->Swap(read->mutable_table());
      if (auto done = in(std::move(write)); !done) return done.error();
      if (!more) return caf::none;
    }
  }

  // The frozen copy, chunk by chunk: the values, then each optimizer slot.
  caf::error copy(const pb::ShardSnapshot& header) {
    const auto& spec = header.variables(0).spec();
    if (spec.has_dynamic()) return copy_table(spec);
    int64_t elements = 1;
    for (auto d : spec.shape()) elements *= d;
    const int slots = kernels::slot_count(static_cast<kernels::optimizer_kind>(spec.optimizer().kind()));
    const int64_t chunk = kDefaultChunkBytes / 4;
    for (int slot = 0; slot <= slots; ++slot)
      for (int64_t at = 0; at < elements; at += chunk) {
        auto read = out(pb::MoveOut::READ, at, std::min(chunk, elements - at), uint32_t(slot));
        if (!read) return read.error();
        report.bytes += int64_t(read->chunk().data().size());
        pb::MoveIn write;
        write.set_step(pb::MoveIn::WRITE);
        write.mutable_chunk()->Swap(read->mutable_chunk());
        if (auto done = in(std::move(write)); !done) return done.error();
      }
    return caf::none;
  }

  // Everything up to the switch; on an error the caller gives the move up.
  caf::error run(const std::function<caf::error()>& switch_routing) {
    const auto started = clock::now();
    auto begun = out(pb::MoveOut::BEGIN);
    if (!begun) return begun.error();
    pb::MoveIn import;
    import.set_step(pb::MoveIn::IMPORT);
    *import.mutable_header() = begun->header();
    if (auto done = in(std::move(import)); !done) return done.error();
    if (auto err = copy(begun->header())) return err;
    for (int64_t last = kSmallLog + 1; last > kSmallLog && report.catch_ups < kMaxCatchUps; ++report.catch_ups) {
      auto n = catch_up();
      if (!n) return n.error();
      last = *n;
    }
    report.copy_s = seconds(started);
    const auto paused = clock::now();
    auto finished = out(pb::MoveOut::FINISH);
    if (!finished) return finished.error();
    if (auto n = catch_up(); !n) return n.error();
    if (auto err = verify(finished->version())) return err;
    if (auto err = switch_routing()) return err;
    report.pause_s = seconds(paused);
    return caf::none;
  }
};

// Tells whoever serves `ps` now (after `failed`, the one that did not
// answer, was replaced) to `step`; logs what it could not.
template <class Msg>
void tell_now(caf::scoped_actor& self, const shard_finder& serving, uint32_t ps, const ps_shard_actor& failed,
              std::chrono::milliseconds timeout, const Msg& msg, const std::string& what) {
  auto answered = request_now<pb::MoveData>(self, failed, timeout, msg);
  if (answered) return;
  if (is_actorps_error(answered.error()))  // it answered: refused
    return spdlog::warn("coordinator: {}: {}", what, describe(answered.error()));
  auto now = serving(ps, &failed);
  if (now) answered = request_now<pb::MoveData>(self, *now, timeout, msg);
  if (!now || !answered)
    spdlog::warn("coordinator: {} on ps:{}: {}", what, ps, describe(now ? answered.error() : now.error()));
}

}  // namespace

pb::MoveOut move_step(pb::MoveOut::Step step, const std::string& name, int64_t offset, int64_t count, uint32_t slot,
                      uint32_t to_ps) {
  pb::MoveOut req;
  req.set_step(step);
  req.set_name(name);
  req.set_offset(offset);
  req.set_count(count);
  req.set_slot(slot);
  req.set_to_ps(to_ps);
  return req;
}

caf::expected<move_report> move_shard(caf::scoped_actor& self, const shard_finder& serving, const std::string& name,
                                      uint32_t from_ps, uint32_t to_ps, std::chrono::milliseconds timeout,
                                      const std::function<caf::error()>& switch_routing, move_report* progress) {
  auto source = serving(from_ps, nullptr);
  if (!source) return source.error();
  auto target = serving(to_ps, nullptr);
  if (!target) return target.error();
  mover m{self, name, to_ps, timeout, *source, *target, {}};
  auto err = m.run(switch_routing);
  if (progress != nullptr) *progress = m.report;
  if (err) {
    if (code_of(err) == errc::busy) return err;  // the source's move is another one
    pb::MoveIn abort_in;
    abort_in.set_step(pb::MoveIn::ABORT);
    abort_in.set_name(name);
    tell_now(self, serving, to_ps, *target, timeout, abort_in, "giving up a move of '" + name + "'");
    tell_now(self, serving, from_ps, *source, timeout, move_step(pb::MoveOut::ABORT, name),
             "giving up a move of '" + name + "'");
    return err;
  }
  tell_now(self, serving, from_ps, *source, timeout, move_step(pb::MoveOut::DROP, name),
           fmt::format("'{}' moved to ps:{}, but its source keeps a copy", name, to_ps));
  return m.report;
}

}  // namespace actorps
