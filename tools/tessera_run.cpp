// tessera-run: starts N ranks of a program on this machine with the
// distributed environment contract set (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, TESSERA_RDZV, TESSERA_TIMEOUT_S), prefixes every line they
// print with "[rank R] ", and when one rank fails stops the others and
// returns its status. POSIX only; it does not link libtessera.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace tessera::tools {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kUsageStatus = 2;
constexpr int kExecFailedStatus = 127;
constexpr int kMaxLocalRanks = 1024;
// With kMaxLocalRanks, keeps every rank number within an int.
constexpr int kMaxNodes = 1 << 20;
// Time the other ranks get between SIGTERM and SIGKILL once one has failed.
constexpr auto kGracePeriod = std::chrono::seconds(2);
// Ranks failing this close after the first failure are reported with it.
constexpr auto kFailureWindow = std::chrono::milliseconds(100);
// A line longer than this is forwarded in pieces rather than buffered whole.
constexpr size_t kMaxLineBytes = 64 * 1024;

constexpr const char* kUsage =
    "usage: tessera-run -n N [--nnodes K --node-rank I --rdzv URL] [--timeout S] prog args...\n"
    "  -n N           ranks to start on this node (1..1024)\n"
    "  --nnodes K     nodes taking part (default 1); K > 1 needs --rdzv\n"
    "  --node-rank I  this node's index in [0, K) (default 0)\n"
    "  --rdzv URL     rendezvous: file:///shared/dir or redis://host:port[/job]\n"
    "                 (default: a fresh temporary directory, removed at the end; a\n"
    "                 redis URL without /job gets a fresh job name)\n"
    "  --timeout S    collective timeout in seconds (sets TESSERA_TIMEOUT_S)\n";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  int local_ranks = 0;
  int nodes = 1;
  int node_rank = 0;
  std::string rendezvous;
  std::string timeout_seconds;
  std::vector<std::string> command;
};

// One pipe from a rank (its stdout or stderr) to the launcher's fd `target`.
struct Stream {
  int fd = -1;
  int target = STDOUT_FILENO;
  std::string pending;  // the start of a line whose newline has not come yet
};

struct Rank {
  int global_rank = 0;
  pid_t pid = -1;
  bool running = false;
  std::string prefix;
  Stream out;
  Stream err;
};

int signal_pipe_write = -1;
// The open-file limit the launcher started with; ranks get it back when the
// launcher raised its own.
rlimit original_file_limit{};
bool file_limit_raised = false;

extern "C" void on_signal(int signal_number) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t written = write(signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    default:
      return "signal " + std::to_string(signal_number);
  }
}

// Writes all of `text`, waiting if `fd` is non-blocking; output that cannot be
// written (a closed terminal, a full disk) is dropped rather than stopping the run.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = write(fd, text.data(), text.size());
    if (written > 0) {
      text.remove_prefix(static_cast<size_t>(written));
    } else if (written < 0 && errno == EINTR) {
      continue;
    } else if (written < 0 && errno == EAGAIN) {
      pollfd wait_for{fd, POLLOUT, 0};
      poll(&wait_for, 1, 100);
    } else {
      return;
    }
  }
}

void report(const std::string& message) {
  write_all(STDERR_FILENO, "tessera-run: " + message + "\n");
}

int parse_int(const std::string& option, const std::string& text, int low, int high) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < low || value > high)
    throw UsageError(option + " must be an integer in [" + std::to_string(low) + ", " +
                     std::to_string(high) + "], got '" + text + "'");
  return value;
}

Options parse_options(int argc, char** argv) {
  Options options;
  bool have_local_ranks = false;
  int at = 1;
  while (at < argc) {
    std::string arg = argv[at];
    if (arg == "--") {
      ++at;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    if (arg == "-h" || arg == "--help") {
      write_all(STDOUT_FILENO, kUsage);
      std::exit(0);
    }
    std::string name = arg;
    std::optional<std::string> value;
    if (const size_t equals = arg.find('='); arg.starts_with("--") && equals != std::string::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
    } else if (arg.starts_with("-n") && arg.size() > 2 && !arg.starts_with("--")) {
      name = "-n";
      value = arg.substr(2);
    }
    const bool known = name == "-n" || name == "--nnodes" || name == "--node-rank" ||
                       name == "--rdzv" || name == "--timeout";
    if (!known)
      throw UsageError("unknown option '" + arg +
                       "'; valid: -n, --nnodes, --node-rank, --rdzv, --timeout, --help");
    ++at;
    if (!value) {
      if (at >= argc) throw UsageError("option " + name + " needs a value");
      value = argv[at++];
    }
    if (name == "-n") {
      options.local_ranks = parse_int("-n", *value, 1, kMaxLocalRanks);
      have_local_ranks = true;
    } else if (name == "--nnodes") {
      options.nodes = parse_int("--nnodes", *value, 1, kMaxNodes);
    } else if (name == "--node-rank") {
      options.node_rank = parse_int("--node-rank", *value, 0, kMaxNodes - 1);
    } else if (name == "--rdzv") {
      options.rendezvous = *value;
    } else {
      parse_int("--timeout", *value, 1, 10000000);  // what the ranks accept (environment.cpp)
      options.timeout_seconds = *value;
    }
  }
  for (; at < argc; ++at) options.command.emplace_back(argv[at]);

  if (!have_local_ranks)
    throw UsageError(std::string("missing -n N, the number of ranks to start here") +
                     (options.command.empty() ? "" : " (options go before the program)"));
  if (options.command.empty()) throw UsageError("missing the program to run");
  if (options.node_rank >= options.nodes)
    throw UsageError("--node-rank " + std::to_string(options.node_rank) + " must be in [0, " +
                     std::to_string(options.nodes) + ") for --nnodes " +
                     std::to_string(options.nodes));
  if (options.nodes > 1 && options.rendezvous.empty())
    throw UsageError("--nnodes " + std::to_string(options.nodes) +
                     " needs --rdzv URL, a rendezvous every node can reach "
                     "(e.g. file:///dir on a shared file system)");
  if (!options.rendezvous.empty()) {
    const size_t scheme_end = options.rendezvous.find("://");
    if (scheme_end == std::string::npos || scheme_end == 0)
      throw UsageError("--rdzv must be a URL such as file:///abs/dir, got '" + options.rendezvous +
                       "'");
    if (options.rendezvous.starts_with("file://") && !options.rendezvous.starts_with("file:///"))
      throw UsageError("--rdzv file:// needs an absolute directory (file:///abs/dir), got '" +
                       options.rendezvous + "'");
    // Every node must use the same key space on a shared server, so a job
    // name the launchers cannot agree on by themselves has to be given.
    if (options.rendezvous.starts_with("redis://") && options.nodes > 1 &&
        options.rendezvous.find('/', std::string_view("redis://").size()) == std::string::npos)
      throw UsageError("--nnodes " + std::to_string(options.nodes) + " with --rdzv " +
                       options.rendezvous +
                       " needs a job name every node shares: redis://host:port/NAME");
  }
  return options;
}

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Checks up front that the program exists, so a typo is a usage error
// (status 2) rather than N copies of an exec failure.
void check_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (!is_executable_file(program))
      throw UsageError("program '" + program + "' not found or not executable (" +
                       std::strerror(access(program.c_str(), F_OK) == 0 ? EACCES : ENOENT) + ")");
    return;
  }
  const char* path_variable = std::getenv("PATH");
  const std::string search = path_variable != nullptr ? path_variable : "/bin:/usr/bin";
  size_t begin = 0;
  while (begin <= search.size()) {
    size_t end = search.find(':', begin);
    if (end == std::string::npos) end = search.size();
    const std::string directory = end == begin ? "." : search.substr(begin, end - begin);
    if (is_executable_file(directory + "/" + program)) return;
    begin = end + 1;
  }
  throw UsageError("program '" + program + "' not found in PATH");
}

// Emits the complete lines of `stream.pending` (all of it when `flush`), each
// behind the rank prefix, in one write so ranks' lines never interleave.
void emit_lines(Stream& stream, const std::string& prefix, bool flush) {
  std::string output;
  size_t begin = 0;
  for (size_t newline; (newline = stream.pending.find('\n', begin)) != std::string::npos;) {
    output += prefix;
    output.append(stream.pending, begin, newline + 1 - begin);
    begin = newline + 1;
  }
  stream.pending.erase(0, begin);
  if (!stream.pending.empty() && (flush || stream.pending.size() >= kMaxLineBytes)) {
    output += prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  if (!output.empty()) write_all(stream.target, output);
}

void close_stream(Stream& stream, const std::string& prefix) {
  emit_lines(stream, prefix, /*flush=*/true);
  close(stream.fd);
  stream.fd = -1;
}

// Reads what is available; closes the stream at end of file.
void drain(Stream& stream, const std::string& prefix) {
  char buffer[65536];
  while (stream.fd >= 0) {
    const ssize_t count = read(stream.fd, buffer, sizeof buffer);
    if (count > 0) {
      stream.pending.append(buffer, static_cast<size_t>(count));
      emit_lines(stream, prefix, /*flush=*/false);
      if (static_cast<size_t>(count) < sizeof buffer) return;
    } else if (count < 0 && errno == EINTR) {
      continue;
    } else if (count < 0 && errno == EAGAIN) {
      return;
    } else {
      close_stream(stream, prefix);
    }
  }
}

std::vector<std::string> child_environment(const Options& options, int local_rank,
                                           const std::string& rendezvous,
                                           const std::string& job_id) {
  std::vector<std::pair<std::string, std::string>> contract = {
      {"RANK", std::to_string(options.node_rank * options.local_ranks + local_rank)},
      {"WORLD_SIZE", std::to_string(options.nodes * options.local_ranks)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.local_ranks)},
      {"TESSERA_RDZV", rendezvous},
  };
  if (!job_id.empty()) contract.emplace_back("TESSERA_JOB_ID", job_id);
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    bool replaced = options.timeout_seconds.empty() ? false : name == "TESSERA_TIMEOUT_S";
    for (const auto& [key, value] : contract) replaced = replaced || name == key;
    if (!replaced) environment.emplace_back(text);
  }
  for (const auto& [key, value] : contract) environment.push_back(key + "=" + value);
  if (!options.timeout_seconds.empty())
    environment.push_back("TESSERA_TIMEOUT_S=" + options.timeout_seconds);
  return environment;
}

// Starts one rank in its own process group (so a signal reaches its whole
// process tree) with stdout and stderr on fresh pipes. Throws on failure.
void spawn(Rank& rank, const std::vector<std::string>& command,
           std::vector<std::string> environment) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error(std::strerror(errno));
  }
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // The launcher is single-threaded, so the child may allocate before exec.
    setpgid(0, 0);
#ifdef __linux__
    // Ranks must not outlive a launcher that was killed outright.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(kExecFailedStatus);
#endif
    for (int signal_number : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) signal(signal_number, SIG_DFL);
    if (file_limit_raised) setrlimit(RLIMIT_NOFILE, &original_file_limit);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // A rank is not in the terminal's foreground group, so reading the
    // terminal would stop it (SIGTTIN) and hang the run: give it no input.
    if (isatty(STDIN_FILENO)) {
      const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    }
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    environ = envp.data();
    execvp(argv[0], argv.data());
    const std::string message =
        "tessera-run: cannot execute '" + command[0] + "': " + std::strerror(errno) + "\n";
    write_all(STDERR_FILENO, message);
    _exit(kExecFailedStatus);
  }
  const int fork_error = errno;
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(fork_error));
  }
  setpgid(pid, pid);  // also here, so the group exists before any signal is sent
  rank.pid = pid;
  rank.running = true;
  rank.out.fd = out_pipe[0];
  rank.out.target = STDOUT_FILENO;
  rank.err.fd = err_pipe[0];
  rank.err.target = STDERR_FILENO;
  fcntl(rank.out.fd, F_SETFL, fcntl(rank.out.fd, F_GETFL) | O_NONBLOCK);
  fcntl(rank.err.fd, F_SETFL, fcntl(rank.err.fd, F_GETFL) | O_NONBLOCK);
}

class Launcher {
 public:
  explicit Launcher(Options options) : options_(std::move(options)) {}
  ~Launcher() {
    // Only reached early when supervise() threw: no rank may outlive us.
    if (any_running()) {
      terminate_all(SIGKILL);
      for (Rank& rank : ranks_)
        if (rank.running) waitpid(rank.pid, nullptr, 0);
    }
    remove_job_files(temporary_directory_, job_id_);
  }

  // Starts the ranks, forwards their output until all have ended and returns
  // the launcher's exit status.
  int run() {
    raise_file_limit();
    // Every rendezvous key is bound to the job id, so two jobs started at once
    // on one rendezvous cannot mix. The nodes of a multi-node job cannot agree
    // on a fresh one by themselves: they use TESSERA_JOB_ID if the user set it.
    const char* inherited_job = std::getenv("TESSERA_JOB_ID");
    if (inherited_job != nullptr && *inherited_job != '\0') {
      job_id_ = inherited_job;
    } else if (options_.nodes == 1) {
      job_id_ = fresh_job_name();
    }
    std::string rendezvous = options_.rendezvous;
    if (rendezvous.empty()) rendezvous = "file://" + make_temporary_directory();
    // A Redis server outlives jobs: a fresh job name keeps this job's keys
    // apart from earlier ones (ranks store them under tessera/<job>/).
    if (rendezvous.starts_with("redis://") &&
        rendezvous.find('/', std::string_view("redis://").size()) == std::string::npos)
      rendezvous += "/" + fresh_job_name();
    start_cleanup_watchdog();
    install_signal_handlers();

    ranks_.resize(static_cast<size_t>(options_.local_ranks));
    sigset_t handled, previous;
    sigemptyset(&handled);
    for (int signal_number : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&handled, signal_number);
    for (int local = 0; local < options_.local_ranks; ++local) {
      Rank& rank = ranks_[static_cast<size_t>(local)];
      rank.global_rank = options_.node_rank * options_.local_ranks + local;
      rank.prefix = "[rank " + std::to_string(rank.global_rank) + "] ";
      // Blocked across fork so a signal arriving before the child resets its
      // handlers is not taken as a signal to the launcher.
      sigprocmask(SIG_BLOCK, &handled, &previous);
      try {
        spawn(rank, options_.command, child_environment(options_, local, rendezvous, job_id_));
      } catch (const std::exception& error) {
        sigprocmask(SIG_SETMASK, &previous, nullptr);
        report("cannot start rank " + std::to_string(rank.global_rank) + ": " + error.what());
        failure_status_ = 1;
        terminate_all(SIGKILL);
        break;
      }
      sigprocmask(SIG_SETMASK, &previous, nullptr);
    }
    supervise();
    if (failure_status_) return *failure_status_;
    if (interrupt_signal_ != 0) return 128 + interrupt_signal_;
    return 0;
  }

 private:
  std::string make_temporary_directory() {
    std::error_code error;
    std::filesystem::path base = std::filesystem::temp_directory_path(error);
    if (error) base = "/tmp";
    std::string pattern = std::filesystem::absolute(base / "tessera-rdzv-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a rendezvous directory " + pattern + ": " +
                               std::strerror(errno));
    temporary_directory_ = pattern;
    return pattern;
  }

  // A SIGKILLed launcher cannot clean up; a small process it forks before
  // any rank can: it waits for the launcher's end (the pipe it alone holds
  // the write end of reaches EOF) and removes what the job left. It runs in
  // its own process group, so signals sent to the launcher's group do not
  // end it before the launcher.
  void start_cleanup_watchdog() {
    if (temporary_directory_.empty() && job_id_.empty()) return;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;  // cleanup on a normal exit still happens
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      for (int signal_number : {SIGINT, SIGTERM, SIGHUP}) signal(signal_number, SIG_IGN);
      close(fds[1]);
      const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
      for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
        if (null_fd >= 0) dup2(null_fd, fd);
      char byte;
      while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
      }
      remove_job_files(temporary_directory_, job_id_);
      _exit(0);
    }
    close(fds[0]);
    if (pid < 0) {
      close(fds[1]);
      return;
    }
    watchdog_pipe_ = fds[1];  // closed only by the launcher's end
  }

  // Removes the rendezvous folder the launcher made and the shared-memory
  // segments of the job's ranks (/dev/shm/tessera-<job>-*) that a killed
  // rank could not unlink.
  static void remove_job_files(const std::string& directory, const std::string& job_id) {
    std::error_code ignored;
    if (!directory.empty()) std::filesystem::remove_all(directory, ignored);
    if (job_id.empty()) return;
    const std::string prefix = "tessera-" + job_id + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ignored))
      if (entry.path().filename().string().starts_with(prefix))
        std::filesystem::remove(entry.path(), ignored);
  }

  // "job-" and 16 hex digits from the clock, the pid and the random device.
  static std::string fresh_job_name() {
    uint64_t bits = static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
                    (static_cast<uint64_t>(getpid()) << 40);
    try {
      std::random_device device;
      bits ^= (static_cast<uint64_t>(device()) << 32) | device();
    } catch (const std::exception&) {
      // The clock and pid alone still differ between jobs.
    }
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
    return std::string("job-") + text;
  }

  // Two pipes per rank can exceed the usual soft limit of 1024 open files;
  // raise it (up to the hard limit) when that is needed.
  void raise_file_limit() {
    if (getrlimit(RLIMIT_NOFILE, &original_file_limit) != 0) return;
    const rlim_t needed = 2 * static_cast<rlim_t>(options_.local_ranks) + 64;
    if (original_file_limit.rlim_cur == RLIM_INFINITY || original_file_limit.rlim_cur >= needed)
      return;
    rlimit raised = original_file_limit;
    raised.rlim_cur = original_file_limit.rlim_max == RLIM_INFINITY
                          ? needed
                          : std::min(needed, original_file_limit.rlim_max);
    file_limit_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
  }

  void install_signal_handlers() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    signal_pipe_read_ = fds[0];
    signal_pipe_write = fds[1];
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (int signal_number : {SIGINT, SIGTERM, SIGCHLD}) sigaction(signal_number, &action, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher
  }

  // Sends a signal to the process group of every rank that may still have
  // live processes (running, or holding its output pipes open).
  void terminate_all(int signal_number) {
    for (const Rank& rank : ranks_)
      if (rank.pid > 0 && (rank.running || rank.out.fd >= 0 || rank.err.fd >= 0))
        kill(-rank.pid, signal_number);
  }

  void start_stopping(int signal_number) {
    terminate_all(signal_number);
    if (!kill_deadline_) kill_deadline_ = Clock::now() + kGracePeriod;
  }

  void handle_signals() {
    unsigned char signals[64];
    ssize_t count;
    while ((count = read(signal_pipe_read_, signals, sizeof signals)) > 0) {
      for (ssize_t i = 0; i < count; ++i) {
        if (signals[i] == SIGCHLD) continue;  // reap() runs every iteration
        if (interrupt_signal_ == 0) {
          interrupt_signal_ = signals[i];
          start_stopping(signals[i]);  // ranks ignoring it are killed after the grace period
        } else {
          // A second interrupt means "now": no more grace.
          terminate_all(SIGKILL);
        }
      }
    }
  }

  void reap() {
    std::vector<Ending> failures = reap_pass();
    if (failures.empty() || failure_status_) return;  // later failures: ranks we stopped
    // A rank that failed because another died can end before the launcher
    // sees that one end: collect every rank that fails within a moment.
    std::this_thread::sleep_for(kFailureWindow);
    for (Ending& ending : reap_pass()) failures.push_back(std::move(ending));
    // The cause is a rank that died from a signal (a crash or a kill) rather
    // than one that then exited with an error for losing it.
    auto cause = std::find_if(failures.begin(), failures.end(),
                              [](const Ending& ending) { return ending.by_signal; });
    if (cause == failures.end()) cause = failures.begin();
    failure_status_ = cause->status;
    // A rank that left early with status 0 breaks its peers' collectives
    // as surely as a crash: name it first.
    for (int rank : early_exits_)
      report("rank " + std::to_string(rank) +
             " exited with status 0 while other ranks were still running, before the first "
             "failure");
    report("rank " + std::to_string(cause->rank) + " " + cause->what);
    for (const Ending& ending : failures)
      if (&ending != &*cause) report("rank " + std::to_string(ending.rank) + " " + ending.what);
    start_stopping(SIGTERM);
  }

  // How one rank ended, when it failed.
  struct Ending {
    int rank = 0;
    int status = 0;  // exit code, or 128 + signal
    bool by_signal = false;
    std::string what;  // "exited with status 3", "killed by signal SIGKILL"
  };

  // Reaps ended ranks; returns those that failed. Ranks ending with status 0
  // while others still run, before any failure, are remembered.
  std::vector<Ending> reap_pass() {
    std::vector<Ending> failures;
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      int status = 0;
      const pid_t result = waitpid(rank.pid, &status, WNOHANG);
      if (result == 0 || (result < 0 && errno == EINTR)) continue;
      rank.running = false;
      if (result < 0) continue;
      Ending ending{rank.global_rank, 0, false, ""};
      if (WIFEXITED(status)) {
        ending.status = WEXITSTATUS(status);
        ending.what = "exited with status " + std::to_string(ending.status);
      } else if (WIFSIGNALED(status)) {
        ending.status = 128 + WTERMSIG(status);
        ending.by_signal = true;
        ending.what = "killed by signal " + signal_name(WTERMSIG(status));
      }
      if (ending.status != 0) {
        failures.push_back(std::move(ending));
      } else if (!failure_status_ && any_running()) {
        early_exits_.push_back(rank.global_rank);
      }
    }
    return failures;
  }

  bool any_running() const {
    for (const Rank& rank : ranks_)
      if (rank.running) return true;
    return false;
  }

  void supervise() {
    std::optional<Clock::time_point> drain_deadline;
    while (true) {
      reap();
      const bool running = any_running();
      std::vector<pollfd> fds{{signal_pipe_read_, POLLIN, 0}};
      std::vector<std::pair<Stream*, const Rank*>> streams{{nullptr, nullptr}};
      for (Rank& rank : ranks_)
        for (Stream* stream : {&rank.out, &rank.err})
          if (stream->fd >= 0) {
            fds.push_back({stream->fd, POLLIN, 0});
            streams.emplace_back(stream, &rank);
          }
      if (!running && fds.size() == 1) return;
      const auto now = Clock::now();
      if (kill_deadline_ && now >= *kill_deadline_) {
        terminate_all(SIGKILL);
        kill_deadline_.reset();
      }
      // Every rank has ended but something they started still holds a pipe
      // open: give it the grace period, then stop it and stop listening.
      if (!running && !drain_deadline) drain_deadline = now + kGracePeriod;
      if (drain_deadline && now >= *drain_deadline) {
        terminate_all(SIGKILL);
        for (Rank& rank : ranks_) {
          drain(rank.out, rank.prefix);
          drain(rank.err, rank.prefix);
          if (rank.out.fd >= 0) close_stream(rank.out, rank.prefix);
          if (rank.err.fd >= 0) close_stream(rank.err, rank.prefix);
        }
        return;
      }
      int timeout_ms = -1;
      for (const auto& deadline : {kill_deadline_, drain_deadline})
        if (deadline) {
          const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
          const int bounded = static_cast<int>(std::max<int64_t>(0, left));
          timeout_ms = timeout_ms < 0 ? bounded : std::min(timeout_ms, bounded);
        }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR)
        throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
      if (fds[0].revents != 0) handle_signals();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) drain(*streams[i].first, streams[i].second->prefix);
      }
    }
  }

  Options options_;
  std::vector<Rank> ranks_;
  std::string temporary_directory_;
  std::string job_id_;
  int watchdog_pipe_ = -1;
  std::vector<int> early_exits_;  // ranks that ended with 0 while others ran
  int signal_pipe_read_ = -1;
  int interrupt_signal_ = 0;
  std::optional<int> failure_status_;
  std::optional<Clock::time_point> kill_deadline_;
};

}  // namespace
}  // namespace tessera::tools

int main(int argc, char** argv) {
  using namespace tessera::tools;
  Options options;
  try {
    options = parse_options(argc, argv);
    check_program(options.command[0]);
  } catch (const UsageError& error) {
    report(error.what());
    // The synopsis line only; --help prints the rest.
    const std::string_view usage(kUsage);
    write_all(STDERR_FILENO, usage.substr(0, usage.find('\n') + 1));
    return kUsageStatus;
  }
  try {
    Launcher launcher(std::move(options));
    return launcher.run();
  } catch (const std::exception& error) {
    report(error.what());
    return 1;
  }
}
