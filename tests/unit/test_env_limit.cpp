// util/env_limit: the limits tests lower through the environment (the MPI chunk, the inter-dc
// piece) read one way.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "autoloco/util/env_limit.hpp"

using namespace autoloco;

TEST_CASE("env_limit: a number of at least the minimum, else the fallback", "[util]") {
  const char* name = "AUTOLOCO_TEST_ENV_LIMIT_UNIT";
  ::unsetenv(name);
  CHECK(env_limit(name, 1000) == 1000);
  ::setenv(name, "64", 1);
  CHECK(env_limit(name, 1000) == 64);
  CHECK(env_limit(name, 1000, 64) == 64);
  CHECK(env_limit(name, 1000, 65) == 1000);
  ::setenv(name, "0", 1);
  CHECK(env_limit(name, 1000) == 1000);
  ::setenv(name, "-5", 1);
  CHECK(env_limit(name, 1000) == 1000);
  ::setenv(name, "lots", 1);
  CHECK(env_limit(name, 1000) == 1000);
  ::unsetenv(name);
}
