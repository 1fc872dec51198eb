// TF_CONFIG carries every role a TOML topology has: "standby" lists spare PS
// hosts and "coordinator" names the chief; an unknown key anywhere is
// refused with its JSON path (exit 2). test_config has the older cases.
#define BOOST_TEST_MODULE tf_config
#include <boost/test/unit_test.hpp>

#include "config/cluster_spec.hpp"
#include "messages/errors.hpp"

using namespace actorps;

namespace {

const std::string kChief = R"("chief": ["127.0.0.1:5000"])";
const std::string kRest = R"("worker": ["127.0.0.1:5001"], "ps": ["127.0.0.1:5002", "127.0.0.1:5003"])";

std::string why(const caf::expected<cluster_spec>& x) { return x ? std::string() : describe(x.error()); }

// The error message of a TF_CONFIG that must be refused with exit 2.
std::string tf_error(const std::string& text) {
  auto spec = parse_tf_config(text);
  BOOST_REQUIRE_MESSAGE(!spec, "expected an error for: " + text);
  BOOST_TEST(exit_code(spec.error()) == 2);
  return describe(spec.error());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_standby_list_becomes_standby_tasks_at_their_addresses) {
  auto spec = parse_tf_config(R"({"cluster": {)" + kChief + ", " + kRest +
                              R"(, "standby": ["127.0.0.1:5004", "10.0.0.9:6000"]},)"
                              R"( "task": {"type": "standby", "index": 1}})");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(spec->nodes.size() == 6u);
  BOOST_TEST(spec->count(pb::STANDBY) == 2u);
  BOOST_TEST(spec->count(pb::PS) == 2u);  // standby tasks are not ps tasks until a PS is lost
  auto* first = spec->node_of(task_id{pb::STANDBY, 0});
  auto* second = spec->node_of(task_id{pb::STANDBY, 1});
  BOOST_REQUIRE(first != nullptr);
  BOOST_REQUIRE(second != nullptr);
  BOOST_TEST(first->address() == "127.0.0.1:5004");
  BOOST_TEST(second->address() == "10.0.0.9:6000");
  BOOST_TEST(second->task_names() == "standby:1");  // a spare PS host, nothing else, as in TOML
  BOOST_REQUIRE(spec->self.has_value());
  BOOST_TEST(to_string(*spec->self) == "standby:1");
  // Workers may dial a standby node: its shards are theirs once it takes over.
  BOOST_TEST(spec->may_connect(pb::WORKER, *first));
  // An empty list: no standby (what config/k8s/plain.yaml ships).
  auto none = parse_tf_config(R"({"cluster": {)" + kChief + R"(, "standby": []}})");
  BOOST_REQUIRE_MESSAGE(none, why(none));
  BOOST_TEST(none->count(pb::STANDBY) == 0u);
}

BOOST_AUTO_TEST_CASE(the_coordinator_key_names_the_chief) {
  auto spec = parse_tf_config(R"({"cluster": {"coordinator": ["127.0.0.1:5000"], )" + kRest +
                              R"(}, "task": {"type": "coordinator", "index": 0}})");
  BOOST_REQUIRE_MESSAGE(spec, why(spec));
  BOOST_TEST(spec->count(pb::COORDINATOR) == 1u);
  BOOST_TEST(spec->node_of(task_id{pb::COORDINATOR, 0})->address() == "127.0.0.1:5000");
  BOOST_TEST(to_string(*spec->self) == "coordinator:0");
  // The task type "chief" is the same task.
  auto as_chief =
      parse_tf_config(R"({"cluster": {"coordinator": ["127.0.0.1:5000"]}, "task": {"type": "chief", "index": 0}})");
  BOOST_REQUIRE_MESSAGE(as_chief, why(as_chief));
  BOOST_TEST(to_string(*as_chief->self) == "coordinator:0");
  // Both keys with the same address: one coordinator.
  auto both = parse_tf_config(R"({"cluster": {)" + kChief + R"(, "coordinator": ["127.0.0.1:5000"], )" + kRest + "}}");
  BOOST_REQUIRE_MESSAGE(both, why(both));
  BOOST_TEST(both->count(pb::COORDINATOR) == 1u);
  BOOST_TEST(both->nodes.size() == 4u);
  // Both keys, different addresses: refused, naming both.
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(, "coordinator": ["127.0.0.1:6000"]}})") ==
             R"(TF_CONFIG: $.cluster.coordinator: ["127.0.0.1:6000"] differs from $.cluster.chief ["127.0.0.1:5000"]: )"
             "both name the coordinator (give it once, or the same address in both)");
}

BOOST_AUTO_TEST_CASE(unknown_keys_are_refused_with_their_path) {
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(, "stanby": ["127.0.0.1:5004"]}})") ==
             "TF_CONFIG: $.cluster.stanby: unknown role (expected one of chief, coordinator, worker, ps, standby, "
             "evaluator)");
  // Refused before anything else of the cluster is read.
  BOOST_TEST(tf_error(R"({"cluster": {"chief": 5, "workers": ["h:1"]}})") ==
             "TF_CONFIG: $.cluster.workers: unknown role (expected one of chief, coordinator, worker, ps, standby, "
             "evaluator)");
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(}, "task": {"type": "chief", "idx": 0}})") ==
             "TF_CONFIG: $.task.idx: unknown key (expected one of type, index)");
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(}, "tsak": {"type": "chief"}})") ==
             "TF_CONFIG: $.tsak: unknown key (expected one of cluster, task, environment, rpc_layer)");
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(}, "task": {"type": "stanby", "index": 0}})") ==
             "TF_CONFIG: $.task.type: unknown role \"stanby\" (expected one of chief, coordinator, worker, ps, "
             "standby, evaluator)");
}

BOOST_AUTO_TEST_CASE(standby_lists_are_checked_as_ps_lists_are) {
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(, "standby": "127.0.0.1:5004"}})") ==
             "TF_CONFIG: $.cluster.standby: expected an array of \"host:port\" strings, got string "
             "\"127.0.0.1:5004\"");
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(, "standby": ["127.0.0.1:5000"]}})") ==
             "TF_CONFIG: $.cluster.standby[0]: duplicate address 127.0.0.1:5000 (each task needs its own host:port)");
  BOOST_TEST(tf_error(R"({"cluster": {)" + kChief + R"(, "standby": ["h"]}})") ==
             "TF_CONFIG: $.cluster.standby[0]: expected \"host:port\", got \"h\"");
  BOOST_TEST(
      tf_error(R"({"cluster": {)" + kChief + R"(, "standby": ["h:1"]}, "task": {"type": "standby", "index": 1}})") ==
      "TF_CONFIG: $.task.index: 1 is out of range: the cluster has 1 standby task(s)");
}
