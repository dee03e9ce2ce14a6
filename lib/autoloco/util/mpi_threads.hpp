// MPI's thread support. Every executable asks for MPI_THREAD_MULTIPLE, which the communication
// thread of an overlapped sync needs (it and the main thread call MPI at the same time, on
// different communicators); a run that asks for overlap is refused before any work when the
// library gave less.
#pragma once

#include <string>

namespace autoloco {

// MPI_Init_thread asking for MPI_THREAD_MULTIPLE; returns the level provided.
int init_mpi_multithreaded(int* argc, char*** argv);

// "MPI_THREAD_SINGLE", ... for a level.
std::string thread_level_name(int level);

// Throws ConfigError naming `key` when MPI was not initialised with MPI_THREAD_MULTIPLE.
void require_mpi_thread_multiple(const std::string& key);

}  // namespace autoloco
