// The manifests of config/k8s run without Kubernetes: tests/k8s_pods.py
// reads a manifest as the TFJob operator or the Job controller would and
// lists its pods; each pod gets its own network namespace whose hosts file
// resolves the pods' Service names, and runs the manifest's command with
// exactly the manifest's environment in a copy of the image's /actorps.
// The job trains to its target, the evaluator writes its events, every pod
// exits 0 once the chief is done, and a worker pod SIGKILLed mid-training
// is restarted as its restart policy says, without stopping the job.
// plain.yaml's optional standby PS pod, enabled as its comment says, gets
// a TF_CONFIG that makes it standby:0 of every pod's cluster.
// Network namespaces need root: without it the test says so and skips.
#define BOOST_TEST_MODULE k8s
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <set>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "actors/launch/local_host.hpp"
#include "actors/launch/netns.hpp"
#include "config/cluster_spec.hpp"
#include "messages/errors.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct pod_spec {
  std::string name;
  std::vector<std::string> names, command, env;  // env: NAME=value
  std::set<int> restart_codes;
};

// The pods of `manifest` as tests/k8s_pods.py reads them, or its error (exit 2).
caf::expected<std::vector<pod_spec>> read_manifest(const std::string& manifest, const std::string& dir,
                                                   std::string& error) {
  const auto log = dir + "/reader.log";
  auto r = run_command({"/usr/bin/python3", ACTORPS_SOURCE_DIR "/tests/k8s_pods.py", manifest}, 30s, log);
  if (!r) return r.error();
  error = read_file(log);
  std::vector<pod_spec> pods;
  if (r->exit_code != 0) return pods;
  const auto listed = nlohmann::json::parse(r->out);
  for (auto& p : listed["pods"]) {
    pod_spec pod{p["name"], p["names"], p["command"], {}, p["restart_codes"]};
    BOOST_TEST(p["working_dir"] == "/actorps", pod.name << ": not the image's WORKDIR");
    for (auto& [k, v] : p["env"].items()) pod.env.push_back(k + "=" + v.get<std::string>());
    pods.push_back(std::move(pod));
  }
  return pods;
}

// The image's /actorps (config/k8s/Containerfile): the sources' config and
// data, the shared volume empty; `actorps` on PATH as the image's ENV puts it.
std::string image_root() {
  auto root = make_temp_dir("k8s");
  for (auto dir : {"config", "data"})
    fs::create_directory_symlink(fs::path(ACTORPS_SOURCE_DIR) / dir, root + "/" + dir);
  fs::create_directory(root + "/shared");
  return root;
}

struct running_pod {
  pod_spec spec;
  std::optional<child_process> process;
  std::string out;  // stdout over all its runs
  int restarts = 0;
  std::optional<int> exit_code;  // final: exited and not restarted
  std::chrono::steady_clock::time_point exited_at;
};

class pods_on_namespaces {
 public:
  pods_on_namespaces(std::vector<pod_spec> specs, std::string root) : root_(std::move(root)) {
    std::vector<std::vector<std::string>> names;
    for (auto& s : specs) names.push_back(s.names);
    auto ns = host_namespaces::create_pods(names);
    if (!ns) BOOST_FAIL("namespaces: " << describe(ns.error()));
    ns_ = std::move(*ns);
    for (auto& s : specs) pods_.push_back(running_pod{std::move(s), {}, {}, 0, {}, {}});
    for (auto& p : pods_) start(p);  // all at once, as pods come up
  }

  running_pod& pod(const std::string& name) {
    for (auto& p : pods_)
      if (p.spec.name == name) return p;
    BOOST_FAIL("no pod " << name);
    return pods_.front();
  }

  // Supervises every pod as the kubelet and controllers would, until all
  // exited for good or `deadline`.
  void run_until_done(std::chrono::steady_clock::time_point deadline) {
    for (bool all = false; !all && std::chrono::steady_clock::now() < deadline;) {
      all = true;
      for (auto& p : pods_) {
        if (p.exit_code) continue;
        all = false;
        drain(p, 20ms);
        auto code = p.process->wait(0ms);
        if (!code) continue;
        drain(p, 1s);
        if (p.spec.restart_codes.count(*code) != 0) {
          BOOST_TEST_MESSAGE(p.spec.name << " exited " << *code << ": restarted, as its restart policy says");
          ++p.restarts;
          start(p);
        } else {
          p.exit_code = *code;
          p.exited_at = std::chrono::steady_clock::now();
        }
      }
    }
  }

  void drain(running_pod& p, std::chrono::milliseconds timeout) {
    for (auto line = p.process->read_line(timeout); line; line = p.process->read_line(1ms)) p.out += *line + "\n";
  }

  std::vector<running_pod>& pods() { return pods_; }
  std::string log() const { return read_file(root_ + "/pods.log"); }

 private:
  void start(running_pod& p) {
    auto argv = ns_->prefix(p.spec.names.at(0));
    argv.insert(argv.end(),
                {"env", "-i", "-C", root_,
                 "PATH=" + fs::path(ACTORPS_BIN).parent_path().string() + ":/usr/sbin:/usr/bin:/sbin:/bin"});
    argv.insert(argv.end(), p.spec.env.begin(), p.spec.env.end());
    argv.insert(argv.end(), p.spec.command.begin(), p.spec.command.end());
    auto child = child_process::spawn(argv, root_ + "/pods.log");
    BOOST_REQUIRE(child);
    p.process.emplace(std::move(*child));
  }

  std::string root_;
  std::unique_ptr<host_namespaces> ns_;
  std::vector<running_pod> pods_;
};

// plain.yaml with its optional standby enabled as its comment says: the
// Job uncommented ("  #" -> "  " from "  #- apiVersion" on) and, when
// `listed`, the standby's address in the ConfigMap.
std::string with_standby(std::string text, bool listed) {
  std::string out;
  bool in_block = false;
  for (size_t at = 0, end; at < text.size(); at = end + 1) {
    end = std::min(text.find('\n', at), text.size());
    auto line = text.substr(at, end - at);
    in_block = (in_block || line.rfind("  #- apiVersion", 0) == 0) && line.rfind("  #", 0) == 0;
    out += (in_block ? "  " + line.substr(3) : line) + "\n";
  }
  const std::string none = R"("standby": [])";
  if (listed) out.replace(out.find(none), none.size(), R"("standby": ["standby-0.fmnist:2222"])");
  return out;
}

// The cluster each pod's TF_CONFIG gives, as actorps reads it.
cluster_spec tf_config_of(const pod_spec& pod) {
  for (auto& var : pod.env)
    if (var.rfind("TF_CONFIG=", 0) == 0) {
      auto spec = parse_tf_config(var.substr(10));
      BOOST_REQUIRE_MESSAGE(spec, pod.name << ": " << (spec ? "" : describe(spec.error())));
      return *spec;
    }
  BOOST_FAIL(pod.name << ": no TF_CONFIG");
  return {};
}

bool can_make_namespaces() { return ::geteuid() == 0 && std::system("ip netns list >/dev/null 2>&1") == 0; }

// Runs `manifest`'s pods; kills `victim` once the chief trains its 2nd epoch.
void run_manifest(const std::string& manifest, const std::string& chief, const std::string& victim,
                  const std::string& evaluator) {
  std::string error;
  auto root = image_root();
  auto specs = read_manifest(ACTORPS_SOURCE_DIR "/config/k8s/" + manifest, root, error);
  BOOST_REQUIRE(specs);
  BOOST_REQUIRE_MESSAGE(!specs->empty(), error);
  BOOST_TEST(specs->size() == 6u);
  pods_on_namespaces pods(std::move(*specs), root);
  auto line = pods.pod(chief).process->wait_for_line("epoch 2/", 180s);
  BOOST_REQUIRE_MESSAGE(line, pods.log());
  pods.pod(chief).out += *line + "\n";
  BOOST_TEST_MESSAGE("SIGKILL to " << victim << " during " << *line);
  pods.pod(victim).process->signal(SIGKILL);
  pods.run_until_done(std::chrono::steady_clock::now() + 400s);
  auto& c = pods.pod(chief);
  BOOST_REQUIRE_MESSAGE(c.exit_code, "the chief still runs\n" << pods.log());
  BOOST_TEST(*c.exit_code == 0, c.out << pods.log());  // 0: it reached the job's target_accuracy
  BOOST_TEST(c.out.find("trained epochs 1..5") != std::string::npos, c.out);
  BOOST_TEST(pods.pod(victim).restarts == 1);
  // Workers reach the PS pods' bulk lanes by their Service names too.
  BOOST_TEST(pods.log().find("no bulk lane") == std::string::npos, pods.log());
  for (auto& p : pods.pods()) {
    BOOST_REQUIRE_MESSAGE(p.exit_code, p.spec.name << " still runs after the chief finished");
    BOOST_TEST(*p.exit_code == 0, p.spec.name << " exited " << *p.exit_code);
    const auto after = std::chrono::duration<double>(p.exited_at - c.exited_at).count();
    if (p.spec.name != evaluator) BOOST_TEST(after < 10.0, p.spec.name << " exited " << after << " s after the chief");
  }
  BOOST_TEST(pods.pod(evaluator).out.find("(epoch 5)") != std::string::npos, pods.pod(evaluator).out);
  BOOST_TEST(read_file(root + "/shared/logs/eval/metrics.csv").find("\n") != std::string::npos);
  fs::remove_all(root);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_tfjob_manifest_trains_and_survives_a_killed_worker_pod) {
  if (!can_make_namespaces()) {
    BOOST_TEST_MESSAGE("SKIPPED: network namespaces need root and iproute2");
    return;
  }
  run_manifest("tfjob.yaml", "fmnist-chief-0", "fmnist-worker-1", "fmnist-evaluator-0");
}

BOOST_AUTO_TEST_CASE(the_plain_kubernetes_manifest_trains_and_survives_a_killed_worker_pod) {
  if (!can_make_namespaces()) {
    BOOST_TEST_MESSAGE("SKIPPED: network namespaces need root and iproute2");
    return;
  }
  run_manifest("plain.yaml", "chief-0", "worker-1", "evaluator-0");
}

BOOST_AUTO_TEST_CASE(a_manifest_whose_ports_disagree_with_its_tf_config_is_refused) {
  auto dir = make_temp_dir("k8s");
  auto text = read_file(ACTORPS_SOURCE_DIR "/config/k8s/plain.yaml");
  text.replace(text.find("containerPort: 2222"), 19, "containerPort: 2223");
  std::ofstream(dir + "/bad.yaml") << text;
  std::string error;
  auto pods = read_manifest(dir + "/bad.yaml", dir, error);
  BOOST_REQUIRE(pods);
  BOOST_TEST(pods->empty());
  BOOST_TEST(error.find(dir + "/bad.yaml: pod chief-0: TF_CONFIG cluster.chief[0] = chief-0.fmnist:2222: pod chief-0 "
                              "listens on containerPort [2223], not 2222") != std::string::npos,
             error);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_plain_manifest_s_optional_standby_pod_is_standby_0_of_every_cluster) {
  auto dir = make_temp_dir("k8s");
  const auto text = read_file(ACTORPS_SOURCE_DIR "/config/k8s/plain.yaml");
  std::string error;
  // As shipped: 6 pods, no standby in any cluster.
  auto shipped = read_manifest(ACTORPS_SOURCE_DIR "/config/k8s/plain.yaml", dir, error);
  BOOST_REQUIRE(shipped);
  BOOST_REQUIRE_MESSAGE(shipped->size() == 6u, error);
  for (auto& pod : *shipped) BOOST_TEST(tf_config_of(pod).count(pb::STANDBY) == 0u, pod.name);
  // Enabled: a 7th pod, standby-0, restarted as the PS pods are.
  std::ofstream(dir + "/standby.yaml") << with_standby(text, true);
  auto pods = read_manifest(dir + "/standby.yaml", dir, error);
  BOOST_REQUIRE(pods);
  BOOST_REQUIRE_MESSAGE(pods->size() == 7u, error);
  const pod_spec *standby = nullptr, *ps = nullptr;
  for (auto& pod : *pods) {
    if (pod.name == "standby-0") standby = &pod;
    if (pod.name == "ps-0") ps = &pod;
    auto spec = tf_config_of(pod);
    BOOST_TEST(spec.count(pb::STANDBY) == 1u, pod.name);
    auto* node = spec.node_of(task_id{pb::STANDBY, 0});
    BOOST_REQUIRE(node != nullptr);
    BOOST_TEST(node->address() == "standby-0.fmnist:2222");
  }
  BOOST_REQUIRE(standby != nullptr);
  BOOST_REQUIRE(ps != nullptr);
  BOOST_TEST(to_string(*tf_config_of(*standby).self) == "standby:0");
  BOOST_TEST(standby->command == ps->command);
  BOOST_TEST((standby->restart_codes == ps->restart_codes));
  BOOST_TEST((std::find(standby->names.begin(), standby->names.end(), "standby-0.fmnist") != standby->names.end()));
  // Half enabled (the Job without its address in the ConfigMap): refused.
  std::ofstream(dir + "/half.yaml") << with_standby(text, false);
  auto half = read_manifest(dir + "/half.yaml", dir, error);
  BOOST_REQUIRE(half);
  BOOST_TEST(half->empty());
  BOOST_TEST(error.find("pod standby-0: TF_CONFIG task standby:0: its cluster lists 0 standby address(es)") !=
                 std::string::npos,
             error);
  fs::remove_all(dir);
}
