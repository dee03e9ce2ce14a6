// Catch2 entry point of the slurm suite (jobs on a Slurm lab: scripts/slurm-lab.sh). Where no
// lab can be made (not root, no network namespaces, no Slurm or munge installed) every test exits
// 77, which CTest reports as skipped, after saying why.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  // CTest lists the tests at build time, wherever it builds.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind("--list", 0) == 0) return Catch::Session().run(argc, argv);
  }
  const std::string check = std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/slurm-lab.sh check";
  if (std::system(check.c_str()) != 0) {
    std::fprintf(stderr,
                 "slurm tests skipped: scripts/slurm-lab.sh cannot make a lab here (above)\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
