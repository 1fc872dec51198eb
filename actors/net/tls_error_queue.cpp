// A fix for CAF 0.17.6's OpenSSL module as Debian builds it: its sessions
// read the thread's OpenSSL error queue only inside log statements, which
// that build compiles out, so one failed handshake (a stranger writing
// garbage to a node's port) leaves an error queued on the middleman's
// thread, and the next SSL_read of a healthy connection reports it and
// closes that connection. OpenSSL requires an empty queue before each TLS
// I/O call; these definitions interpose on libssl's (the executable's
// symbols come first when libcaf_openssl's calls are bound) and clear it
// first. tls_error_queue_fix() keeps this file linked.
//
// The same build says nothing when a handshake fails, so a peer whose
// certificate another CA signed (a node of another cluster trying to join)
// was refused in silence on both sides: a failed handshake is logged here,
// with the peer's address and OpenSSL's reason.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <string>

#include <spdlog/spdlog.h>

namespace actorps {

void tls_error_queue_fix() {}

namespace {

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

std::string peer_of(SSL* ssl) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "?";
  if (::getpeername(SSL_get_fd(ssl), reinterpret_cast<sockaddr*>(&addr), &len) == 0 && addr.sin_family == AF_INET)
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}

// A handshake that failed for good (not one waiting for more bytes) is logged.
int logged(SSL* ssl, int rc, const char* side) {
  if (rc > 0) return rc;
  const int err = SSL_get_error(ssl, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return rc;
  char reason[256] = "connection closed";
  if (const auto code = ERR_peek_error(); code != 0) ERR_error_string_n(code, reason, sizeof(reason));
  const long verify = SSL_get_verify_result(ssl);
  spdlog::warn("TLS: {} handshake with {} failed: {}{}", side, peer_of(ssl), reason,
               verify == X509_V_OK ? "" : std::string(" (") + X509_verify_cert_error_string(verify) + ")");
  return rc;
}

}  // namespace
}  // namespace actorps

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto fn = actorps::real<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return fn(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto fn = actorps::real<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return fn(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto fn = actorps::real<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return actorps::logged(ssl, fn(ssl), "refused a peer:");
}

int SSL_connect(SSL* ssl) {
  static auto fn = actorps::real<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return actorps::logged(ssl, fn(ssl), "refused by the peer:");
}

}  // extern "C"
