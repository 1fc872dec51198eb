// `actorps data prepare`: the data sets as IDX files (actors/dataset/prepare.hpp).
#include <sys/stat.h>

#include <fmt/format.h>

#include "actors/dataset/prepare.hpp"
#include "apps/commands.hpp"
#include "messages/errors.hpp"

namespace actorps {

int run_data_prepare(const data_prepare_options& o) {
  for (const auto& dir : {o.out, o.out + "/mnist", o.out + "/fashion"}) ::mkdir(dir.c_str(), 0755);
  caf::error err;
  if (!o.mnist_package.empty() && (err = prepare_mnist(o.mnist_package, o.out + "/mnist"))) {
    fmt::print(stderr, "data prepare: {}\n", describe(err));
    return exit_code(err);
  }
  if (!o.fashion_package.empty() && (err = prepare_fashion(o.fashion_package, o.out + "/fashion"))) {
    fmt::print(stderr, "data prepare: {}\n", describe(err));
    return exit_code(err);
  }
  fmt::print("data prepare: wrote {}{}{}\n", o.mnist_package.empty() ? "" : o.out + "/mnist (60000 + 10000) ",
             o.fashion_package.empty() ? "" : o.out + "/fashion (60000 + 10000)", "");
  return 0;
}

}  // namespace actorps
