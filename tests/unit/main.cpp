// Catch2 entry point of the unit suite (no MPI).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
