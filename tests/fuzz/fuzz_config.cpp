// libFuzzer target: job files (TOML: topology, model, datasets, training,
// faults, security) and TF_CONFIG (JSON). The first byte picks the parser.
// Any input must give a value or an error: never a crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/cluster_spec.hpp"
#include "config/job_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    (void)actorps::parse_job_toml(text, "fuzz.toml");
  else
    (void)actorps::parse_tf_config(text);
  return 0;
}
