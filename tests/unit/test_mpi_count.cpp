// mpi_count: every count handed to MPI fits its int, or the call is refused naming the sizes.
#include "autoloco/comm/mpi_count.hpp"

#include <catch2/catch.hpp>

#include <climits>

using namespace autoloco;
using Catch::Matchers::Contains;

TEST_CASE("mpi_count passes counts that fit an int and refuses larger ones naming the sizes",
          "[comm]") {
  CHECK(mpi_count(0, "x") == 0);
  CHECK(mpi_count(static_cast<size_t>(INT_MAX), "x") == INT_MAX);
  REQUIRE_THROWS_AS(mpi_count(static_cast<size_t>(INT_MAX) + 1, "inter-dc ring"), CommError);
  REQUIRE_THROWS_WITH(mpi_count(size_t{4294967296}, "inter-dc ring"), Contains("inter-dc ring") &&
                                                                          Contains("4294967296") &&
                                                                          Contains("2147483647"));
}
