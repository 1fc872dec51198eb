// libFuzzer target: the file readers a node runs on data it is given: IDX,
// TFRecord, CSV and checkpoint files. The first byte picks the reader, the
// rest is the file. Any input must give a value or an error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "actors/checkpoint/checkpoint.hpp"
#include "actors/dataset/csv.hpp"
#include "actors/dataset/idx.hpp"
#include "actors/dataset/tfrecord.hpp"

namespace {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("actorps-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int reader = data[0] % 5;
  const std::string file = scratch_dir() + (reader == 4 ? "/ckpt-7.tfrecord" : "/input");
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data) + 1, std::streamsize(size - 1));
  switch (reader) {
    case 0: (void)actorps::data::read_idx(file); break;
    case 1: (void)actorps::data::read_tfrecords(file); break;
    case 2:
    case 3: {  // malformed lines fail the read, or (3) are skipped and counted
      actorps::pb::CsvSource src;
      src.add_files(file);
      src.set_header(true);
      if (reader == 3) src.set_bad_lines(actorps::pb::CsvSource::SKIP);
      for (auto name : {"a", "b", "id", "label"}) {
        auto* c = src.add_columns();
        c->set_name(name);
        if (std::string(name) == "label") c->set_kind(actorps::pb::CsvColumn::LABEL);
        if (std::string(name) == "id") c->set_id64(true);
      }
      std::vector<std::vector<float>> xs;
      std::vector<int32_t> labels;
      (void)actorps::data::read_csv(src, xs, labels);
      break;
    }
    default: (void)actorps::train::restore_latest(scratch_dir()); break;
  }
  return 0;
}
