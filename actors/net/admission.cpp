#include "actors/net/admission.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "messages/errors.hpp"

namespace actorps {
namespace {

constexpr int64_t kFreshMillis = 5 * 60 * 1000;

template <class T, void (*Free)(T*)>
using owned = std::unique_ptr<T, std::integral_constant<decltype(Free), Free>>;

// What the signature covers.
std::string signed_text(const pb::Hello& h) {
  return fmt::format("actorps hello|{}|{}|{}|{}|{}|{}", h.cluster_name(), h.protocol_version(), int(h.from().role()),
                     h.from().index(), h.pid(), h.signed_at_ms());
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void close_file(FILE* f) { std::fclose(f); }

template <class T>
T* read_pem(const std::string& path, T* (*read)(FILE*, T**, pem_password_cb*, void*)) {
  owned<FILE, close_file> f(std::fopen(path.c_str(), "r"));
  return f ? read(f.get(), nullptr, nullptr, nullptr) : nullptr;
}

}  // namespace

caf::error sign_hello_with(pb::Hello& hello, const std::string& key_file) {
  owned<EVP_PKEY, EVP_PKEY_free> key(read_pem<EVP_PKEY>(key_file, PEM_read_PrivateKey));
  if (!key) return make_error(errc::io_error, key_file + ": cannot read a PEM private key");
  hello.set_signed_at_ms(now_ms());
  const auto text = signed_text(hello);
  owned<EVP_MD_CTX, EVP_MD_CTX_free> ctx(EVP_MD_CTX_new());
  size_t len = 0;
  std::string sig;
  if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1)
    return make_error(errc::invalid_config, key_file + ": cannot sign with this key");
  sig.resize(len);
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(text.data()), text.size()) != 1)
    return make_error(errc::invalid_config, key_file + ": cannot sign with this key");
  sig.resize(len);
  hello.set_signature(std::move(sig));
  return caf::none;
}

caf::error sign_hello(pb::Hello& hello, const cluster_spec& spec) {
  auto files = spec.tls_for(from_proto(hello.from()));
  return files ? sign_hello_with(hello, files->key) : caf::none;
}

caf::error verify_hello(const pb::Hello& hello, const cluster_spec& spec) {
  const auto task = from_proto(hello.from());
  auto files = spec.tls_for(task);
  if (!spec.security.enabled()) return caf::none;
  if (task.role == pb::CLIENT || !files)
    return make_error(errc::not_admitted, "a secured cluster admits only its tasks, each with its certificate");
  const auto who = to_string(task);
  if (hello.signature().empty()) return make_error(errc::not_admitted, who + "'s Hello is not signed");
  if (std::abs(now_ms() - hello.signed_at_ms()) > kFreshMillis)
    return make_error(errc::not_admitted, who + "'s Hello was signed more than 5 minutes from now");
  owned<X509, X509_free> cert(read_pem<X509>(files->cert, PEM_read_X509));
  if (!cert) return make_error(errc::io_error, files->cert + ": cannot read a PEM certificate");
  owned<EVP_PKEY, EVP_PKEY_free> key(X509_get_pubkey(cert.get()));
  owned<EVP_MD_CTX, EVP_MD_CTX_free> ctx(EVP_MD_CTX_new());
  const auto text = signed_text(hello);
  const bool ok =
      key && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(hello.signature().data()),
                       hello.signature().size(), reinterpret_cast<const unsigned char*>(text.data()), text.size()) == 1;
  if (!ok) return make_error(errc::not_admitted, who + "'s Hello is not signed with " + who + "'s key");
  return caf::none;
}

caf::error check_hello(const pb::Hello& hello, const cluster_spec& spec, uint32_t protocol_version) {
  if (hello.protocol_version() != protocol_version)
    return make_error(errc::protocol_mismatch, fmt::format("peer speaks protocol {}, this process {}",
                                                           hello.protocol_version(), protocol_version));
  if (hello.cluster_name() != spec.name)
    return make_error(errc::protocol_mismatch, fmt::format("peer belongs to cluster \"{}\", this process to \"{}\"",
                                                           hello.cluster_name(), spec.name));
  const auto from = from_proto(hello.from());
  // A TF_CONFIG cluster without a chief: the coordinator runs outside it, as in TF.
  const bool outside_coordinator = from == task_id{pb::COORDINATOR, 0} && spec.count(pb::COORDINATOR) == 0;
  if (from.role != pb::CLIENT && from.role != pb::WORKER && !outside_coordinator && spec.node_of(from) == nullptr)
    return make_error(errc::not_admitted, "task " + to_string(from) + " is not in the topology");
  return verify_hello(hello, spec);
}

}  // namespace actorps
