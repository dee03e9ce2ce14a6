// Catch2 entry point of the end-to-end suite.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
