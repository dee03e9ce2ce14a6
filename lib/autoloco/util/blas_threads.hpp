// OpenBLAS keeps its own thread pool, sized from OPENBLAS_NUM_THREADS at start-up or else from
// every core: with several ranks per host that oversubscribes the cores many times over and
// Debian's LibTorch (which calls whatever libblas.so.3 is) slows down severalfold.
//
// And with more than one intra-op thread, two pools fight: LibTorch (and oneDNN) run their
// parallel regions on libgomp's OpenMP threads, which spin-wait after each region
// (OMP_WAIT_POLICY=active is libgomp's default), while OpenBLAS's pthread build runs its GEMMs
// on threads of its own, which spin-wait too; on 2 cores each pool's spinning threads hold the
// core the other pool needs, and 2 threads ran at half the speed of 1 (docs/results.md, Threads).
// One pool must do the work: OpenBLAS built on OpenMP shares libgomp's; the pthread build is
// kept to one thread beside LibTorch's pool.
#pragma once

#include <string>

namespace autoloco {

enum class BlasThreading { none, sequential, pthreads, openmp };

// How the loaded BLAS parallelises: none when it is not OpenBLAS (openblas_get_parallel absent).
BlasThreading blas_threading();
std::string describe(BlasThreading threading);

// The BLAS threads that go with `intra_op` LibTorch threads: as many when the BLAS shares
// LibTorch's OpenMP pool, one beside it when it keeps a pthread pool of its own.
int blas_threads_beside(int intra_op, BlasThreading threading);

// Sizes the BLAS thread pool when the loaded BLAS is OpenBLAS; returns false when it is not
// (then nothing is changed). Safe to call whatever BLAS LibTorch uses.
bool set_blas_threads(int threads);

}  // namespace autoloco
