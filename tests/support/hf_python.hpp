// The Python of the Hugging Face tests (scripts/hf-env.sh: torch, transformers, safetensors,
// tokenizers, sentencepiece), found as autoloco-prepare finds it, and shell quoting for the
// commands that run it. CI installs it through scripts/setup.sh, so a missing one fails the
// test with the fix named, never skips it.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "autoloco/data/hf_tokenizer.hpp"
#include "run_files.hpp"

namespace autoloco::test {

// `text` as one word of /bin/sh.
inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// The interpreter (default_hf_python()); fails the test, naming the fix and what Python said,
// when it cannot `import` the comma-separated `modules`. `log` receives Python's output.
inline std::string hf_python(const std::string& modules, const std::string& log) {
  const std::string python = default_hf_python();
  if (run_command("HF_HUB_OFFLINE=1 " + shell_quote(python) + " -c " +
                  shell_quote("import " + modules) + " > " + shell_quote(log) + " 2>&1") != 0) {
    FAIL("the Python of the Hugging Face tests, "
         << python << ", is missing or cannot import " << modules
         << ": run scripts/hf-env.sh (scripts/setup.sh does for the test presets; "
            "AUTOLOCO_TORCH_VENV or AUTOLOCO_HF_PYTHON name another)\n"
         << read_text(log));
  }
  return python;
}

}  // namespace autoloco::test
