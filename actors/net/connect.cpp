#include "actors/net/connect.hpp"

#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/middleman_actor.hpp>

namespace actorps {

caf::io::middleman_actor dial_connector(caf::actor_system& sys) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  return sys.has_openssl_manager() ? caf::openssl::make_middleman_actor(sys, std::move(basp))
                                   : caf::io::make_middleman_actor(sys, std::move(basp));
}

void done_with(const caf::io::middleman_actor& connector) { caf::anon_send_exit(connector, caf::exit_reason::kill); }

caf::expected<connected> connect_now(caf::scoped_actor& self, const std::string& host, uint16_t port,
                                     std::chrono::milliseconds deadline) {
  auto via = dial_connector(self->home_system());
  caf::expected<connected> out{caf::sec::request_timeout};
  self->request(via, deadline, caf::connect_atom_v, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& actor, std::set<std::string>& interfaces) {
            out = connected{std::move(actor), std::move(interfaces)};
          },
          [&](caf::error& err) { out = std::move(err); });
  done_with(via);
  return out;
}

}  // namespace actorps
