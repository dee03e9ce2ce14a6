#include "autoloco/util/signals.hpp"

#include <csignal>

namespace autoloco {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int signal_number) {
  // An impatient second Ctrl-C means "now": fall back to the default action.
  if (signal_number == SIGINT && g_signal == SIGINT) std::signal(SIGINT, SIG_DFL);
  g_signal = signal_number;
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

int stop_signal_received() {
  return g_signal;
}
void request_stop_for_test(int signal_number) {
  g_signal = signal_number;
}
void clear_stop_signal() {
  g_signal = 0;
}

}  // namespace autoloco
