#include "messages/wire.hpp"

namespace actorps {

void register_wire_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::actorps>();
  cfg.add_error_category(caf::atom("actorps"), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    auto text = "actorps: " + to_string(static_cast<errc>(code));
    if (ctx.size() == 1 && ctx.match_element<std::string>(0)) text += ": " + ctx.get_as<std::string>(0);
    return text;
  });
}

}  // namespace actorps
