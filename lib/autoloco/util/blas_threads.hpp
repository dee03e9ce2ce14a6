// OpenBLAS keeps its own thread pool, sized from OPENBLAS_NUM_THREADS at start-up or else from
// every core: with several ranks per host that oversubscribes the cores many times over and
// Debian's LibTorch (which calls whatever libblas.so.3 is) slows down severalfold.
#pragma once

namespace autoloco {

// Sizes the BLAS thread pool when the loaded BLAS is OpenBLAS; returns false when it is not
// (then nothing is changed). Safe to call whatever BLAS LibTorch uses.
bool set_blas_threads(int threads);

}  // namespace autoloco
