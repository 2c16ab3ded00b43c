// SPDX-License-Identifier: GPL-2.0-only
// STUB: the arm64 arch layer (arch/arm64/include/asm/pgtable.h, arch/arm64/mm/contpte.c,
// arch/arm64/mm/fault.c, arch/arm64/include/asm/tlbflush.h) is not yet ported.
#include "base/error.hpp"
#include "kernel_mm/arch/x86/x86.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmm {

std::unique_ptr<Arch> make_arm64_arch(Kernel& k) {
  mmusim::panic("the arm64 arch layer is not yet ported");
}

}  // namespace kmm
