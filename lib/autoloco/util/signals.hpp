// SIGINT/SIGTERM (and SIGUSR1) set a flag instead of killing the process, so the trainer can stop
// at a step boundary that every rank agrees on and leave its run directory consistent.
#pragma once

namespace autoloco {

// Installs the handlers (idempotent). A second SIGINT restores the default and kills at once.
void install_stop_signal_handlers();

// The signal number received, or 0.
int stop_signal_received();

// For tests: pretend a signal arrived / forget it.
void request_stop_for_test(int signal_number);
void clear_stop_signal();

}  // namespace autoloco
