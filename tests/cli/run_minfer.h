// Runs the built `minfer` binary (MINFER_BINARY, set by tests/cli/CMakeLists.txt) as a child process and
// collects its exit code, stdout and stderr: the CLI tests drive the real binary as a user would.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace minfer::cli {

struct Ran {
  int rc = -1;
  std::string out, err;
  std::string all() const { return out + err; }
};

// Runs the built `minfer` with `args`, extra environment "K=V" entries and `input` on stdin. When `until`
// appears on stdout, the process gets SIGTERM (a server). Killed after `seconds`.
inline Ran run_minfer(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      const std::string& input = "", const std::string& until = "", double seconds = 120) {
  int in[2], out[2], err[2];
  EXPECT_EQ(::pipe(in), 0);
  EXPECT_EQ(::pipe(out), 0);
  EXPECT_EQ(::pipe(err), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    for (const std::string& kv : env) {
      const size_t eq = kv.find('=');
      ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
    std::vector<char*> argv;
    std::string bin = MINFER_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (!input.empty()) {
    EXPECT_EQ(::write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  }
  ::close(in[1]);
  Ran r;
  int fds[2] = {out[0], err[0]};
  bool termed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ADD_FAILURE() << "minfer did not finish in " << seconds << " s";
      break;
    }
    std::vector<pollfd> p;
    for (int fd : fds) {
      if (fd >= 0) p.push_back({fd, POLLIN, 0});
    }
    if (::poll(p.data(), p.size(), 200) <= 0) continue;
    for (const pollfd& q : p) {
      if (!(q.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(q.fd, buf, sizeof buf);
      std::string& sink = q.fd == out[0] ? r.out : r.err;
      if (n > 0) {
        sink.append(buf, static_cast<size_t>(n));
      } else {
        ::close(q.fd);
        for (int& fd : fds) {
          if (fd == q.fd) fd = -1;
        }
      }
    }
    if (!until.empty() && !termed && r.out.find(until) != std::string::npos) {
      ::kill(pid, SIGTERM);
      termed = true;
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace minfer::cli
