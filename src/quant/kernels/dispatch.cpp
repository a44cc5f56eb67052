// CPU feature detection (cpuid + xgetbv on x86, HWCAP on Arm) and the per-ISA kernel tables.
// The environment can only lower the level: MINFER_CPU_ISA=generic|avx2|avxvnni|avx512|amx|neon,
// MINFER_NO_AVX512=1, MINFER_NO_AVX2=1.
#include <array>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>

#include "core/env.h"
#include "core/log.h"
#include "quant/kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace minfer::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

struct X86Features {
  bool avx2 = false;     // AVX2 + FMA + F16C with OS-saved YMM state
  bool avxvnni = false;  // avx2 + AVX-VNNI (VEX vpdpbusd): Intel since Alder Lake, AMD Zen 5
  bool avx512 = false;   // AVX-512 F/BW/VL/VNNI with OS-saved ZMM state
  bool amx = false;      // avx512 + AMX-TILE/INT8, tile state enabled by the OS and granted to this process
};

// Linux hands out the AMX tile data state (8 KiB per thread) only on request: once per process, before any
// thread uses a tile (every thread created afterwards inherits the permission).
bool request_amx_tile_state() {
#if defined(__x86_64__) && defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM (asm/prctl.h)
  constexpr long kXfeatureXtiledata = 18;     // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

X86Features detect_x86() {
  X86Features f;
  uint32_t a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = (b >> 5) & 1;
  const bool avx512f = (b >> 16) & 1;
  const bool avx512bw = (b >> 30) & 1;
  const bool avx512vl = (b >> 31) & 1;
  const bool avx512vnni = (c >> 11) & 1;
  const bool amx_tile = (d >> 24) & 1;
  const bool amx_int8 = (d >> 25) & 1;
  const bool tile_state = ((xcr0 >> 17) & 3) == 3;  // XTILECFG + XTILEDATA
  f.avx2 = ymm_state && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl && avx512vnni;
  f.amx = f.avx512 && amx_tile && amx_int8 && tile_state && request_amx_tile_state();
  if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avxvnni = f.avx2 && ((a >> 4) & 1);
  return f;
}
#endif

// Whether this CPU and OS can run `isa`'s kernels (compiled in or not).
bool hardware_supports(Isa isa) {
  if (isa == Isa::kGeneric) return true;
#if defined(__x86_64__) || defined(__i386__)
  static const X86Features f = detect_x86();
  switch (isa) {
    case Isa::kAvx2:
      return f.avx2;
    case Isa::kAvxVnni:
      return f.avxvnni;
    case Isa::kAvx512:
      return f.avx512;
    case Isa::kAmx:
      return f.amx;
    default:
      return false;
  }
#elif defined(__aarch64__) && defined(__linux__)
  return isa == Isa::kNeon && (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

bool compiled_in(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return true;
    case Isa::kAvx2:
    case Isa::kAvxVnni:
    case Isa::kAvx512:
    case Isa::kAmx:
#if defined(MINFER_HAVE_X86_KERNELS)
      return true;
#else
      return false;
#endif
    case Isa::kNeon:
#if defined(MINFER_HAVE_NEON)
      return true;
#else
      return false;
#endif
  }
  return false;
}

// Levels from the widest down: the first available one is the default.
constexpr Isa kByPreference[] = {Isa::kAmx, Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2, Isa::kNeon, Isa::kGeneric};

// The first available level at position `from` or later in kByPreference.
Isa first_available_from(size_t from) {
  for (size_t i = from; i < std::size(kByPreference); ++i) {
    if (isa_available(kByPreference[i])) return kByPreference[i];
  }
  return Isa::kGeneric;
}

Isa widest_below(Isa top) {
  for (size_t i = 0; i < std::size(kByPreference); ++i) {
    if (kByPreference[i] == top) return first_available_from(i + 1);
  }
  return Isa::kGeneric;
}

Isa compute_detected() {
  Isa isa = first_available_from(0);
  if (const char* forced = std::getenv("MINFER_CPU_ISA"); forced != nullptr && forced[0] != '\0') {
    // Forcing can only pick a level this CPU runs (a wider one would crash).
    if (auto want = forced_isa(forced); want.ok())
      isa = *want;
    else
      MINFER_LOG_WARN("kernels: {}; using {}", want.status().message(), isa_name(isa));
  }
  if ((isa == Isa::kAmx || isa == Isa::kAvx512) && env_flag("MINFER_NO_AVX512")) isa = widest_below(Isa::kAvx512);
  if ((isa == Isa::kAvx2 || isa == Isa::kAvxVnni) && env_flag("MINFER_NO_AVX2")) isa = Isa::kGeneric;
  return isa;
}

}  // namespace

Result<Isa> forced_isa(std::string_view name) {
  std::string known, available;
  for (int i = 0; i < kIsaCount; ++i) {
    const auto level = static_cast<Isa>(i);
    known += fmt::format("{}{}", known.empty() ? "" : ", ", isa_name(level));
    if (isa_available(level))
      available += fmt::format("{}{}", available.empty() ? "" : ", ", isa_name(level));
  }
  for (int i = 0; i < kIsaCount; ++i) {
    const auto level = static_cast<Isa>(i);
    if (name != isa_name(level)) continue;
    if (!isa_available(level))
      return invalid_argument("MINFER_CPU_ISA='{}' is not available on this CPU (it has: {})", name,
                              available);
    return level;
  }
  return invalid_argument("MINFER_CPU_ISA='{}' is not a kernel level (known: {})", name, known);
}

namespace {

CpuKernels build(Isa isa) {
  CpuKernels k;
  k.isa = isa;
  generic::fill(k);
#if defined(MINFER_HAVE_X86_KERNELS)
  if (isa == Isa::kAvx2 || isa == Isa::kAvxVnni || isa == Isa::kAvx512 || isa == Isa::kAmx) avx2::fill(k);
  if (isa == Isa::kAvx2) avx2::fill_repack(k);
  if (isa == Isa::kAvxVnni) avxvnni::fill_repack(k);
  if (isa == Isa::kAvx512 || isa == Isa::kAmx) avx512::fill(k);
  if (isa == Isa::kAmx) {
    avx512::fill_repack_xeon(k);
    amx::fill(k);
  }
#endif
#if defined(MINFER_HAVE_NEON)
  if (isa == Isa::kNeon) neon::fill(k);
#endif
  return k;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return "generic";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAmx:
      return "amx";
    case Isa::kNeon:
      return "neon";
  }
  return "?";
}

Isa detected_isa() {
  static const Isa isa = compute_detected();
  return isa;
}

bool isa_available(Isa isa) {
  return compiled_in(isa) && hardware_supports(isa);
}

const CpuKernels* cpu_kernels_for(Isa isa) {
  static std::array<CpuKernels, kIsaCount> tables;
  static std::array<std::once_flag, kIsaCount> once;
  if (!isa_available(isa)) return nullptr;
  const auto i = static_cast<size_t>(isa);
  std::call_once(once[i], [&] { tables[i] = build(isa); });
  return &tables[i];
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels* k = cpu_kernels_for(detected_isa());
  return *k;
}

}  // namespace minfer::kernels
