// What the data tests share: a temporary folder for files, and an
// expected's error as text.
#pragma once

#include <fstream>
#include <string>

#include "actors/launch/local_host.hpp"
#include "messages/errors.hpp"

namespace actorps::test {

struct temp_files {
  std::string dir = make_temp_dir("test");
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  }
};

template <class T>
std::string why(const caf::expected<T>& x) {
  return x ? std::string() : describe(x.error());
}

}  // namespace actorps::test
