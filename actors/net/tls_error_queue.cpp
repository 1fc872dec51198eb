// A fix for CAF 0.17.6's OpenSSL module as Debian builds it: its sessions
// read the thread's OpenSSL error queue only inside log statements, which
// that build compiles out, so one failed handshake (a stranger writing
// garbage to a node's port) leaves an error queued on the middleman's
// thread, and the next SSL_read of a healthy connection reports it and
// closes that connection. OpenSSL requires an empty queue before each TLS
// I/O call; these definitions interpose on libssl's (the executable's
// symbols come first when libcaf_openssl's calls are bound) and clear it
// first. tls_error_queue_fix() keeps this file linked.
#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace actorps {

void tls_error_queue_fix() {}

namespace {

template <class Fn>
Fn real(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
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
  return fn(ssl);
}

int SSL_connect(SSL* ssl) {
  static auto fn = actorps::real<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return fn(ssl);
}

}  // extern "C"
