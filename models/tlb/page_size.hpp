// SPDX-License-Identifier: GPL-2.0-only
// The sizes a TLB entry can have, as a small enum and a bitmask over it. The sizes derive from the
// paging geometry (base/pgformat.hpp): the base page, the arm64 contiguous block of base pages at
// level 0 (one 64K entry for a contpte block), the level-1 block and the level-2 block.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/pgformat.hpp"

namespace mmusim::hw {

enum class PageSize : uint8_t { k4K = 0, k64K = 1, k2M = 2, k1G = 3 };
inline constexpr unsigned kNumPageSizes = 4;

// Bit i set: PageSize(i) is held.
using PageSizeMask = uint8_t;
inline constexpr PageSizeMask page_size_bit(PageSize s) { return PageSizeMask(1u << unsigned(s)); }

namespace detail {
constexpr unsigned log2_u(unsigned v) { return v <= 1 ? 0 : 1 + log2_u(v / 2); }
// Both ISAs share one geometry (4K granule, 4 levels, 9 bits per level); x86 has no contiguous
// hint, so the 64K class takes arm64's.
inline constexpr unsigned kShift[kNumPageSizes] = {
    pg::kArm64_4K.page_shift,
    pg::kArm64_4K.page_shift + log2_u(pg::kArm64_4K.cont_entries),
    pg::kArm64_4K.level_shift(1),
    pg::kArm64_4K.level_shift(2),
};
static_assert(pg::kX86_64.level_shift(1) == pg::kArm64_4K.level_shift(1), "one geometry");
}  // namespace detail

inline constexpr unsigned page_size_shift(PageSize s) { return detail::kShift[unsigned(s)]; }
inline constexpr uint64_t page_size_bytes(PageSize s) { return uint64_t(1) << page_size_shift(s); }
inline constexpr uint64_t page_size_mask(PageSize s) { return ~(page_size_bytes(s) - 1); }

// "4K", "64K", "2M", "1G".
const char* page_size_name(PageSize s);
// The class of a leaf of `bytes` (a walk's page_size); nullopt if there is none.
std::optional<PageSize> page_size_from_bytes(uint64_t bytes);
// "4K+2M" (also accepts ',' or '|' between sizes, any case). On error returns nullopt and says why.
std::optional<PageSizeMask> parse_page_sizes(std::string_view text, std::string* why);
std::string format_page_sizes(PageSizeMask m);

}  // namespace mmusim::hw
