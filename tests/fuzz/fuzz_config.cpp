// libFuzzer target: the YAML run config and its --set overrides (config/config.hpp). The input
// is a YAML document, then optionally a line "--set" and one "section.key=value" override per
// line after it; both go to parse_config() (load, overrides, validate), then validate_world()
// for a few world sizes. A config that is accepted is printed with to_yaml() and must load back
// to the same values (the contract of the effective config.yaml of a run directory). A
// ConfigError is a correct refusal; a finding is anything else (another exception, e.g. one of
// yaml-cpp's, a crash, a sanitizer report such as a signed overflow, a hang), or an effective
// config that does not load back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "autoloco/config/config.hpp"
#include "config_input.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoloco;
  const fuzz::ConfigInput in =
      fuzz::split_config_input(std::string(reinterpret_cast<const char*>(data), size));
  fuzz::expect_typed_errors([&] {
    const Config config = parse_config(in.yaml, in.overrides, "fuzz.yaml");
    for (int world : {1, 2, 3, 4, 8}) {
      fuzz::expect_typed_errors([&] { validate_world(config, world); });
    }
    const std::string effective = to_yaml(config);
    Config back;
    try {
      back = parse_config(effective, {}, "fuzz/effective.yaml");
    } catch (const ConfigError& e) {
      std::fprintf(stderr, "%s\n--- effective config ---\n%s", e.what(), effective.c_str());
      fuzz::require(false, "the effective config of an accepted config does not load back");
    }
    fuzz::require(config_values(back) == config_values(config),
                  "the effective config loads back to other values");
  });
  return 0;
}
