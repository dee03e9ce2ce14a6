// fmt's compiled part, built once for the fmt headers that autoloco_core's translation units see
// (LibTorch's copy, which shadows the system's: lib/CMakeLists.txt), instead of in every
// translation unit as FMT_HEADER_ONLY would: the definitions behind fmt's FMT_API declarations,
// and the instantiations its headers declare extern.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

namespace detail {
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
}  // namespace detail
FMT_END_NAMESPACE
