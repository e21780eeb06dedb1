// The AMX dot-product ceiling kernels: tdpbf16ps (AMX-BF16) and tdpbusd
// (AMX-INT8) on four independent accumulator tiles, built for AMX by a
// target attribute on each function (the rest of the file is plain x86-64).
#include "pyparbench/timing/peak_dot_kernels.hpp"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace ppb {

namespace {

// arch_prctl codes and the tile data's state component (Linux's
// arch/x86/include/uapi/asm/prctl.h), spelled out for older headers.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

// The tile configuration LDTILECFG reads: palette 1, every tile 16 rows of
// 64 bytes (16x16 fp32 / int32, 16x32 bf16, 16x64 int8).
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

TileConfig full_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  return cfg;
}

// Tiles 0-3 accumulate the 2x2 products of sources 4-5 by 6-7: four
// independent chains, each source read by two of them.
template <class Product>
__attribute__((target("amx-tile"))) void tile_rounds(int64_t iterations, const void* source,
                                                      void* result, Product&& product) {
  const TileConfig cfg = full_tiles();
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, source, 64);
  _tile_loadd(5, source, 64);
  _tile_loadd(6, source, 64);
  _tile_loadd(7, source, 64);
  for (int64_t i = 0; i < iterations; ++i) product();
  auto* out = static_cast<char*>(result);
  _tile_stored(0, out, 64);
  _tile_stored(1, out + 1024, 64);
  _tile_stored(2, out + 2048, 64);
  _tile_stored(3, out + 3072, 64);
  _tile_release();
}

template <class T>
double sum(const T* values, int n) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += static_cast<double>(values[i]);
  return total;
}

}  // namespace

std::string amx_permission_denied() {
  // Asked once: the permission holds for the whole process, threads to come
  // included.
  static const std::string why = [] {
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return std::string();
    return "Linux refused this process AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM, "
           "XFEATURE_XTILEDATA: " + std::string(std::strerror(errno)) +
           "; Linux before 5.16 has no AMX support)";
  }();
  return why;
}

__attribute__((target("amx-tile,amx-bf16"))) double bf16_dot_amx(int64_t iterations) {
  // Every bf16 element 2^-10: each fp32 element gains 32 products of 2^-20
  // a step, with neither overflow nor denormals however long the run.
  alignas(64) uint16_t source[16 * 32];
  for (uint16_t& x : source) x = 0x3A80;
  alignas(64) float result[kAmxAccumulators * 256];
  tile_rounds(iterations, source, result, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
  return sum(result, kAmxAccumulators * 256);
}

__attribute__((target("amx-tile,amx-int8"))) double int8_dot_amx(int64_t iterations) {
  // Unsigned 1s against signed 1s: each int32 element gains 64 a step
  // (wrapping around on a long run, which costs nothing).
  alignas(64) int8_t source[16 * 64];
  for (int8_t& x : source) x = 1;
  alignas(64) int32_t result[kAmxAccumulators * 256];
  tile_rounds(iterations, source, result, [] {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  });
  return sum(result, kAmxAccumulators * 256);
}

}  // namespace ppb
