// `actorps export JOB --format safetensors --out FILE`: a checkpoint's
// trained variables as a safetensors file (https://github.com/huggingface/
// safetensors: an 8-byte little-endian header size, a JSON header naming
// each tensor's dtype, shape and byte range, then the raw data), so the
// model can leave actorps. Names are the model's parameter names; the
// header's __metadata__ states the layouts and the model, so a loader can
// rebuild it (tools/torch_model.py does, in PyTorch). `--format onnx`: the
// graph and its values as an ONNX model (config/onnx/onnx_export.hpp).
// `--format model-json`: the job's model alone, as the JSON of the
// safetensors header (no checkpoint read), for tools/torch_zoo.py.
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "actors/checkpoint/checkpoint.hpp"
#include "apps/commands.hpp"
#include "config/model_config.hpp"
#include "config/onnx/onnx_export.hpp"
#include "messages/errors.hpp"

namespace actorps {
namespace {

using nlohmann::json;

int export_failed(const caf::error& err) {
  spdlog::error("export: {}", describe(err));
  return exit_code(err);
}

const char* kLayout =
    "activations NHWC; conv2d kernels HWIO [kh, kw, in, out]; dense kernels [in, out] (y = x @ kernel + bias); "
    "flatten in HWC order; embeddings [vocabulary, dim]; float32 little-endian, row-major";

std::string header_of(const std::vector<const train::saved_variable*>& vars, int64_t step, uint32_t epoch,
                      const job_spec& job) {
  json header = json::object();
  size_t offset = 0;
  for (auto* v : vars) {
    const size_t bytes = v->values.size() * sizeof(float);
    header[v->name] = {{"dtype", "F32"}, {"shape", v->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = {{"producer", "actorps"},
                            {"layout", kLayout},
                            {"model", model_json_text(job.model)},
                            {"step", std::to_string(step)},
                            {"epoch", std::to_string(epoch)}};
  auto text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  return text;
}

// Written beside `out` and renamed into place: an existing file is replaced
// whole or not at all.
caf::error write_safetensors(const std::string& out, const std::string& header,
                             const std::vector<const train::saved_variable*>& vars) {
  const auto tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return make_error(errc::io_error, tmp + ": cannot create");
    uint64_t size = header.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(size >> (8 * i));
    f.write(reinterpret_cast<const char*>(le), 8);
    f << header;
    for (auto* v : vars)
      f.write(reinterpret_cast<const char*>(v->values.data()), std::streamsize(v->values.size() * sizeof(float)));
    if (!f.flush()) return make_error(errc::io_error, tmp + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) return make_error(errc::io_error, out + ": cannot rename into place");
  return caf::none;
}

caf::error write_model_json(const std::string& out, const std::string& text) {
  const auto tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return make_error(errc::io_error, tmp + ": cannot create");
    if (!(f << text << '\n').flush()) return make_error(errc::io_error, tmp + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) return make_error(errc::io_error, out + ": cannot rename into place");
  return caf::none;
}

}  // namespace

caf::error export_safetensors(const std::string& out, const job_spec& job,
                              const std::vector<const train::saved_variable*>& vars, int64_t step, uint32_t epoch) {
  return write_safetensors(out, header_of(vars, step, epoch, job), vars);
}

int run_export(const job_spec& job, const std::string& checkpoint_dir, const std::string& format,
               const std::string& out) {
  if (format == "model-json") {
    if (auto err = write_model_json(out, model_json_text(job.model))) return export_failed(err);
    fmt::print("exported the job's model to {}\n", out);
    return 0;
  }
  auto dir = train::checkpoint_dir_of(job.training.checkpoint_dir, checkpoint_dir);
  if (!dir) return export_failed(dir.error());
  auto ckpt = train::newest_checkpoint(*dir, "export");
  if (!ckpt) return export_failed(ckpt.error());
  kernels::graph_model model(job.model, kernels::cpu_ops());
  auto vars = train::model_variables(*ckpt, *dir, model.parameters());
  if (!vars) return export_failed(vars.error());
  std::vector<const float*> values;
  for (auto* v : *vars) values.push_back(v->values.data());
  auto err = format == "onnx" ? write_onnx(job.model, values, out)
                              : export_safetensors(out, job, *vars, ckpt->step, ckpt->epoch);
  if (err) return export_failed(err);
  fmt::print("exported the checkpoint of step {} (epoch {}) in {}: {} tensors to {}\n", ckpt->step, ckpt->epoch, *dir,
             vars->size(), out);
  return 0;
}

}  // namespace actorps
