// autoloco-lighthouse: the coordinator of the elastic mode (docs/elastic.md). Each dc is its own
// launch (`mpirun ... autoloco-train CONFIG --set elastic.lighthouse=HOST:PORT --set
// elastic.dc=K`); this process, at a third site or on any host the dcs reach, decides each
// round's quorum. It carries no tensors and keeps no state that the dcs cannot give a restarted
// one again.
//   autoloco-lighthouse --port P --key-file F [--host ADDR]
//   autoloco-lighthouse --make-key F
#include <fmt/format.h>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "autoloco/comm/handshake.hpp"
#include "autoloco/comm/lighthouse_server.hpp"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_stop.store(true);
}

const char* kUsage =
    "usage: autoloco-lighthouse --port P --key-file F [--host ADDR]\n"
    "       autoloco-lighthouse --make-key F\n"
    "  --port P        TCP port the dcs connect to (elastic.lighthouse=HOST:P)\n"
    "  --host ADDR     address to listen on (default 0.0.0.0: every interface)\n"
    "  --key-file F    the key shared with the dcs (elastic.key_file); mode 600\n"
    "  --make-key F    write a new random key to F (which must not exist) and exit\n"
    "The run's settings (elastic.min_dcs, round_deadline_s, heartbeat_timeout_s,\n"
    "collective_timeout_s) come from the first dc that connects; every dc must have the same.\n";

void log_line(const std::string& line) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  std::fprintf(stderr, "[lighthouse %s] %s\n", stamp, line.c_str());
  std::fflush(stderr);
}

int parse_port(const std::string& s) {
  size_t end = 0;
  int port = -1;
  try {
    port = std::stoi(s, &end);
  } catch (const std::exception&) {
  }
  if (end != s.size() || port < 0 || port > 65535) {
    throw autoloco::ConfigError("--port: expected a port number (0-65535), got '" + s + "'");
  }
  return port;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    autoloco::LighthouseOptions options;
    std::string key_file;
    bool have_port = false;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      const auto value = [&]() -> const std::string& {
        if (i + 1 >= args.size()) throw autoloco::ConfigError(a + " needs a value");
        return args[++i];
      };
      if (a == "--help" || a == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (a == "--make-key") {
        const std::string path = value();
        autoloco::write_new_key(path);
        std::printf(
            "wrote a new key to %s (mode 600); copy it to every dc's host and to the "
            "lighthouse's\n",
            path.c_str());
        return 0;
      } else if (a == "--port") {
        options.listen.port = parse_port(value());
        have_port = true;
      } else if (a == "--host") {
        options.listen.host = value();
      } else if (a == "--key-file") {
        key_file = value();
      } else {
        throw autoloco::ConfigError("unknown argument '" + a + "'\n" + kUsage);
      }
    }
    if (!have_port) throw autoloco::ConfigError(std::string("--port is required\n") + kUsage);
    if (key_file.empty()) {
      throw autoloco::ConfigError(
          "--key-file is required: the dcs and the lighthouse share a key (make one with "
          "autoloco-lighthouse --make-key FILE)");
    }
    options.key = autoloco::load_shared_key(key_file, "--key-file");
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    autoloco::LighthouseServer server(options, log_line);
    server.run(g_stop);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "autoloco-lighthouse: error: %s\n", e.what());
    return 2;
  }
}
