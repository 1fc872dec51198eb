// Child processes for the local launcher, the benchmarks and the tests:
// spawn, wait for a ready line on stdout, signal, wait with a deadline.
// Waiting uses pidfd + poll: no sleeps.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace actorps {

class child_process {
 public:
  /// Starts argv[0] with `argv`; stdout is captured, stderr goes to
  /// `stderr_path` (appended) or is inherited when empty. `env` entries
  /// ("NAME=value") are added to (or replace in) this process's environment.
  [[nodiscard]] static caf::expected<child_process> spawn(const std::vector<std::string>& argv,
                                                          const std::string& stderr_path = {},
                                                          const std::vector<std::string>& env = {});

  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  /// Kills (SIGKILL) and reaps the child if it still runs.
  ~child_process();

  pid_t pid() const { return pid_; }

  /// Reads the next line of stdout (without its newline).
  [[nodiscard]] caf::expected<std::string> read_line(std::chrono::milliseconds timeout);

  /// Reads stdout lines until one contains `needle` and returns it; the
  /// lines before it are dropped.
  [[nodiscard]] caf::expected<std::string> wait_for_line(const std::string& needle, std::chrono::milliseconds timeout);

  /// Reads stdout to its end (the child closed it or exited).
  [[nodiscard]] caf::expected<std::string> read_all(std::chrono::milliseconds timeout);

  /// Sends `sig` to the child (no-op once reaped).
  void signal(int sig) const;

  /// Waits for the child to exit: its exit code, or 128 + signal number.
  [[nodiscard]] caf::expected<int> wait(std::chrono::milliseconds timeout);

  bool running() const { return pid_ > 0; }

  /// A descriptor that polls readable once the child exited (a pidfd), or
  /// -1 once it was reaped.
  int exit_fd() const { return pid_ > 0 ? pidfd_ : -1; }

 private:
  child_process(pid_t pid, int pidfd, int out_fd) : pid_(pid), pidfd_(pidfd), out_fd_(out_fd) {}
  void close_fds();
  caf::expected<bool> read_more(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int out_fd_ = -1;
  std::string buffered_;  // stdout read but not yet returned
};

/// A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's
/// ephemeral range where it can (no outgoing connection takes it before
/// its node listens), never the same twice in one process.
[[nodiscard]] uint16_t free_port();

/// A child's log file (its stderr_path), "" when unreadable: for errors
/// and reports that quote it.
[[nodiscard]] std::string read_log(const std::string& path);

/// Runs a command to completion; returns (exit code, stdout).
struct command_result {
  int exit_code = -1;
  std::string out;
};
[[nodiscard]] caf::expected<command_result> run_command(const std::vector<std::string>& argv,
                                                        std::chrono::milliseconds timeout,
                                                        const std::string& stderr_path = {},
                                                        const std::vector<std::string>& env = {});

}  // namespace actorps
