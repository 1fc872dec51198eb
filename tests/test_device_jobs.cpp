// [training] device and devices_per_worker across real processes: `actorps
// local` jobs whose workers must, may or may not use GPUs. Every job here
// runs with CUDA_VISIBLE_DEVICES="" (no GPU visible, also on a GPU machine),
// so what it checks holds everywhere; tools/gpu_check.sh trains on GPUs.
#define BOOST_TEST_MODULE device_jobs
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/launch/local_host.hpp"
#include "tests/job_files.hpp"

using namespace actorps;
using namespace actorps::test;
using namespace std::chrono_literals;

namespace {

struct job_run {
  int exit_code = -1;
  std::string out, errors, nodes;  // stdout, the CLI's stderr, the nodes' log
};

job_run run_without_gpus(const std::string& dir, const std::string& job) {
  auto res = run_command({ACTORPS_BIN, "local", job, "--log", dir + "/nodes.log"}, 120s, dir + "/cli.log",
                         {"CUDA_VISIBLE_DEVICES="});
  BOOST_REQUIRE(res);
  return {res->exit_code, res->out, read_file(dir + "/cli.log"), read_file(dir + "/nodes.log")};
}

}  // namespace

BOOST_AUTO_TEST_CASE(cuda_without_a_visible_gpu_exits_2_naming_the_worker_and_what_it_saw) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "device = \"cuda\"\n");
  auto run = run_without_gpus(dir, job);
  auto all = run.out + run.errors + run.nodes;
  BOOST_TEST(run.exit_code == 2, all);
  // The first worker refused stops the job: either may be the one named.
  bool named = false;
  for (auto worker : {"worker:0", "worker:1"})
    named = named || all.find(std::string(worker) + " on 127.0.0.1:" + std::to_string(port_of(job, worker)) +
                              ": device = \"cuda\" with 1 GPU(s) per worker, but ") != std::string::npos;
  BOOST_TEST(named, all);
  BOOST_TEST(all.find("CUDA_VISIBLE_DEVICES=") != std::string::npos, all);  // what the process saw
  BOOST_TEST(run.out.find("epoch 1/") == std::string::npos, run.out);       // it never trained
}

BOOST_AUTO_TEST_CASE(auto_falls_back_to_the_cpu_with_one_log_line_per_worker) {
  auto dir = make_temp_dir("test");
  auto job = write_job(dir, "", "", 1);  // device = "auto" is the default
  auto run = run_without_gpus(dir, job);
  BOOST_TEST(run.exit_code == 0, run.out << run.errors);
  const std::string fallback = ": device \"auto\" found no 1 GPU(s) to use (";
  BOOST_TEST(count_of(run.nodes, fallback) == 2u, run.nodes);
  for (auto worker : {"worker:0", "worker:1"}) {
    auto where = std::string(worker) + " on 127.0.0.1:" + std::to_string(port_of(job, worker));
    BOOST_TEST(count_of(run.nodes, where + fallback) == 1u, run.nodes);
    BOOST_TEST(count_of(run.nodes, where + ": computing on cpu:0\n") == 1u, run.nodes);
  }
}

BOOST_AUTO_TEST_CASE(a_sync_job_on_two_devices_per_worker_trains_as_on_one) {
  // The same SYNC job, each worker's batch of 32 split over 2 CPU devices
  // or computed whole on one. Both runs see the same examples in the same
  // order; only the summation order of the gradients differs (two halves
  // reduced, vs one sum), so after 150 steps the variables agree to within
  // float rounding grown by training: 1e-4 of the largest value, where a
  // lost or doubled half of a batch moves them by far more (see
  // test_devices' "a skipped row is caught").
  auto final_variables = [](const std::string& devices) {
    auto dir = make_temp_dir("test");
    auto job = write_job(dir, "",
                         "consistency = \"sync\"\ndevice = \"cpu\"\ndevices_per_worker = " + devices +
                             "\ncheckpoint_dir = \"" + dir + "/ckpt\"\n",
                         1, "[model]\ninput = [1, 1, 4]\n", 150);
    auto run = run_without_gpus(dir, job);
    BOOST_TEST(run.exit_code == 0, run.out << run.errors);
    const std::string names = devices == "2" ? "cpu:0, cpu:1" : "cpu:0";
    BOOST_TEST(count_of(run.nodes, ": computing on " + names + "\n") == 2u, run.nodes);
    auto latest = train::restore_latest(dir + "/ckpt");
    BOOST_REQUIRE(latest.latest);
    BOOST_TEST(latest.latest->step == 150);
    return latest.latest->variables;
  };
  auto split = final_variables("2"), whole = final_variables("1");
  BOOST_REQUIRE(split.size() == whole.size());
  BOOST_REQUIRE(!split.empty());
  for (size_t i = 0; i < split.size(); ++i) {
    auto &a = split[i].values, &b = whole[i].values;
    BOOST_REQUIRE(a.size() == b.size());
    float largest = 0, worst = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      largest = std::max(largest, std::abs(b[k]));
      worst = std::max(worst, std::abs(a[k] - b[k]));
    }
    BOOST_TEST(worst <= 1e-4f * largest, split[i].name << ": differs by " << worst << " (largest " << largest << ")");
  }
}
