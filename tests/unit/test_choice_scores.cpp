// lm-evaluation-harness's outcome rules for multiple choice and its aggregates, checked against
// values its own formulas give (third_party/notes/lm-eval.md, section 3).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autoloco/eval/choice_scores.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

TEST_CASE("choice scores: acc takes the highest log-likelihood, acc_norm the highest per character",
          "[eval]") {
  // The long choice has the higher total but the lower per-character log-likelihood.
  const std::vector<std::string> choices = {"a cat", "the quick brown fox jumps"};
  const std::vector<double> ll = {-6.0, -5.0};  // -1.2 and -0.2 per character
  ChoiceOutcome o = score_choices(ll, choices, 1);
  CHECK(o.pred == 1);
  CHECK(o.pred_norm == 1);
  CHECK(o.acc == 1.0);
  const std::vector<double> ll2 = {-4.0, -6.0};  // -0.8 against -0.24 per character
  o = score_choices(ll2, choices, 0);
  CHECK(o.pred == 0);
  CHECK(o.pred_norm == 1);
  CHECK(o.acc == 1.0);
  CHECK(o.acc_norm == 0.0);
}

TEST_CASE("choice scores: acc_norm divides by code points, not bytes, and ties go to the first",
          "[eval]") {
  CHECK(code_points("caf\xc3\xa9") == 4);               // "café": 5 bytes
  CHECK(code_points("\xe6\x97\xa5\xe6\x9c\xac") == 2);  // two CJK characters: 6 bytes
  CHECK(code_points("\xf0\x9f\x98\x80!") == 2);         // an emoji (4 bytes) and '!'
  // Per byte the first would win (-4/5 > -3.5/4 is false: -0.8 against -0.875); per code point
  // (-1.0 against -0.875) the second does.
  const ChoiceOutcome o = score_choices({-4.0, -3.5}, {"caf\xc3\xa9", "abcd"}, 1);
  CHECK(o.pred_norm == 1);
  const ChoiceOutcome tie = score_choices({-2.0, -2.0, -3.0}, {"ab", "cd", "ef"}, 1);
  CHECK(tie.pred == 0);
  CHECK(tie.pred_norm == 0);
  CHECK(tie.acc == 0.0);
  // numpy's argmax returns the first NaN.
  CHECK(score_choices({-1.0, NAN, -0.5}, {"a", "b", "c"}, 0).pred == 1);
}

TEST_CASE("choice scores: mismatched sizes, an empty choice or gold out of range are errors",
          "[eval]") {
  CHECK_THROWS_AS(score_choices({-1.0}, {"a", "b"}, 0), Error);
  CHECK_THROWS_AS(score_choices({-1.0, -2.0}, {"a", ""}, 0), Error);
  CHECK_THROWS_AS(score_choices({-1.0, -2.0}, {"a", "b"}, 2), Error);
}

TEST_CASE("choice scores: the mean and its standard error are lm-eval's, bit for bit", "[eval]") {
  // Python: sum(a)/len(a); sqrt(sum((x-mu)**2 for x in a)/(n-1))/sqrt(n).
  const MeanWithError a = mean_with_stderr({1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0});
  CHECK(a.n == 7);
  CHECK(a.mean == 0.5714285714285714);
  CHECK(a.standard_error == 0.20203050891044214);
  const MeanWithError b = mean_with_stderr({-3.25, -1.5, -7.125, -0.75});
  CHECK(b.standard_error == 1.4228190547290263);
  CHECK(document_perplexity({-3.25, -1.5, -7.125, -0.75}) == 23.482371718117374);
  // One item has no standard error (the harness prints N/A).
  CHECK(std::isnan(mean_with_stderr({1.0}).standard_error));
  CHECK(std::isnan(mean_with_stderr({}).mean));
}
