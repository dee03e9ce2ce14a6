// The transformers side of autoloco-bench --hf-step: a Python program run with `python -c`,
// spoken to line by line (hf_step.cpp describes the protocol).
#pragma once

namespace autoloco::bench {

extern const char* const kHfStepHelper;

}  // namespace autoloco::bench
