// The elastic mode's torch-free tests (label unit): the lighthouse's protocol, rules and server.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
