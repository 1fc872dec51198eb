#include "actors/launch/subprocess.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>

#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <mutex>
#include <random>
#include <set>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "messages/errors.hpp"

extern char** environ;

namespace actorps {
namespace {

caf::error sys_error(const std::string& what) { return make_error(errc::io_error, what + ": " + std::strerror(errno)); }

using clock_type = std::chrono::steady_clock;

int remaining_ms(clock_type::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

}  // namespace

caf::expected<child_process> child_process::spawn(const std::vector<std::string>& argv, const std::string& stderr_path,
                                                  const std::vector<std::string>& env) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return sys_error("pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (auto& kv : env) replaced = replaced || entry.substr(0, entry.find('=') + 1) == kv.substr(0, kv.find('=') + 1);
    if (!replaced) envp.push_back(*e);
  }
  for (auto& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());  // argv[0] may be on PATH
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    errno = rc;
    return sys_error("cannot start " + argv[0]);
  }
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    auto err = sys_error("pidfd_open");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    return err;
  }
  return child_process(pid, pidfd, out[0]);
}

child_process::child_process(child_process&& other) noexcept
    : pid_(other.pid_), pidfd_(other.pidfd_), out_fd_(other.out_fd_), buffered_(std::move(other.buffered_)) {
  other.pid_ = -1;
  other.pidfd_ = -1;
  other.out_fd_ = -1;
}

child_process& child_process::operator=(child_process&& other) noexcept {
  // `other` now owns our old child and cleans it up when it dies.
  std::swap(pid_, other.pid_);
  std::swap(pidfd_, other.pidfd_);
  std::swap(out_fd_, other.out_fd_);
  std::swap(buffered_, other.buffered_);
  return *this;
}

child_process::~child_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  close_fds();
}

void child_process::close_fds() {
  if (pidfd_ >= 0) ::close(pidfd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  pidfd_ = out_fd_ = -1;
}

// Waits until stdout has more (appended to buffered_) or is closed; false
// at the deadline.
caf::expected<bool> child_process::read_more(clock_type::time_point deadline) {
  pollfd p{out_fd_, POLLIN, 0};
  int n = ::poll(&p, 1, remaining_ms(deadline));
  if (n == 0) return false;
  if (n < 0 && errno != EINTR) return sys_error("poll");
  char buf[4096];
  auto got = ::read(out_fd_, buf, sizeof(buf));
  if (got <= 0) {
    ::close(out_fd_);
    out_fd_ = -1;
  } else {
    buffered_.append(buf, static_cast<size_t>(got));
  }
  return true;
}

caf::expected<std::string> child_process::read_line(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    auto nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      auto line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    if (out_fd_ < 0) return make_error(errc::io_error, "child " + std::to_string(pid_) + " closed stdout");
    auto more = read_more(deadline);
    if (!more) return more.error();
    if (!*more)
      return make_error(errc::timeout, "child " + std::to_string(pid_) + " printed no line within " +
                                           std::to_string(timeout.count()) + " ms");
  }
}

caf::expected<std::string> child_process::wait_for_line(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  for (;;) {
    auto line = read_line(std::chrono::milliseconds(remaining_ms(deadline)));
    if (!line)
      return make_error(errc::timeout, "child " + std::to_string(pid_) + " did not print \"" + needle + "\" within " +
                                           std::to_string(timeout.count()) + " ms (" + describe(line.error()) + ")");
    if (line->find(needle) != std::string::npos) return line;
  }
}

caf::expected<std::string> child_process::read_all(std::chrono::milliseconds timeout) {
  auto deadline = clock_type::now() + timeout;
  while (out_fd_ >= 0) {
    auto more = read_more(deadline);
    if (!more) return more.error();
    if (!*more)
      return make_error(errc::timeout, "child " + std::to_string(pid_) + " still writing after " +
                                           std::to_string(timeout.count()) + " ms");
  }
  return std::exchange(buffered_, {});
}

void child_process::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

caf::expected<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return make_error(errc::internal, "child already reaped");
  pollfd p{pidfd_, POLLIN, 0};
  auto deadline = clock_type::now() + timeout;
  int n;
  while ((n = ::poll(&p, 1, remaining_ms(deadline))) < 0 && errno == EINTR) {
  }
  if (n == 0)
    return make_error(errc::timeout, "child " + std::to_string(pid_) + " still running after " +
                                         std::to_string(timeout.count()) + " ms");
  int status = 0;
  if (::waitpid(pid_, &status, 0) != pid_) return sys_error("waitpid");
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

namespace {

// Binds a loopback socket to `port` (0: any): the port bound, 0 if none.
uint16_t bind_probe(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  uint16_t bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    bound = ntohs(addr.sin_port);
  ::close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range, where it picks the local
// ports of outgoing connections.
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

}  // namespace

std::string read_log(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

uint16_t free_port() {
  // Below the ephemeral range: a port handed out here stays free until its
  // node listens, where a probe's ephemeral port may meanwhile become some
  // outgoing connection's local port. Never the same port twice in a process.
  static std::mutex m;
  static std::set<uint16_t> given;
  static std::mt19937 gen(std::random_device{}());
  std::lock_guard<std::mutex> guard(m);
  const int high = ephemeral_low() - 1, low = 10000;
  for (int attempt = 0; high > low && attempt < 200; ++attempt) {
    const auto port = uint16_t(std::uniform_int_distribution<int>(low, high)(gen));
    if (given.count(port) == 0 && bind_probe(port) == port) return *given.insert(port).first;
  }
  for (int attempt = 0; attempt < 100; ++attempt)  // no room below it
    if (auto port = bind_probe(0); port != 0 && given.insert(port).second) return port;
  return 0;
}

caf::expected<command_result> run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                          const std::string& stderr_path, const std::vector<std::string>& env) {
  auto child = child_process::spawn(argv, stderr_path, env);
  if (!child) return child.error();
  auto deadline = clock_type::now() + timeout;
  auto out = child->read_all(timeout);
  if (!out) return out.error();
  auto code = child->wait(std::chrono::milliseconds(remaining_ms(deadline)));
  if (!code) return code.error();
  return command_result{*code, std::move(*out)};
}

}  // namespace actorps
