// Central finite differences against autograd, for the models' double-precision gradient
// tests: each named entry of a parameter is nudged by ±h and the objective's slope compared
// with the gradient that backward() left in it.
#pragma once

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace autoloco::test {

// `model` in double precision with gradients from one objective().backward(); `entries`:
// (parameter name, flat index). Each analytic gradient must be nonzero (above `floor`) and
// within a relative 1e-5 of the numeric one.
inline void check_finite_differences(torch::nn::Module& model,
                                     const std::function<torch::Tensor()>& objective,
                                     const std::vector<std::pair<std::string, int64_t>>& entries,
                                     double floor = 1e-6) {
  const double h = 1e-6;
  const auto params = model.named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& [name, i] : entries) {
    const auto* found = params.find(name);
    REQUIRE(found != nullptr);
    torch::Tensor p = *found;
    double* value = p.data_ptr<double>() + i;
    const double saved = *value;
    *value = saved + h;
    const double up = objective().item<double>();
    *value = saved - h;
    const double down = objective().item<double>();
    *value = saved;
    const double numeric = (up - down) / (2.0 * h);
    const double analytic = p.grad().reshape({-1})[i].item<double>();
    INFO(name << "[" << i << "] analytic " << analytic << " numeric " << numeric);
    CHECK(std::abs(analytic) > floor);
    CHECK(std::abs(analytic - numeric) <= 1e-5 * std::max(std::abs(analytic), std::abs(numeric)));
  }
}

}  // namespace autoloco::test
