// Verilated ports <-> little-endian 64-bit words, shared by the model wrappers:
// byte 0 of a port is bits 7..0 of word 0.
#pragma once

#include <cstddef>
#include <cstdint>

#include "verilated.h"

namespace roce_hdl {

inline void put(CData& p, const uint64_t* w) { p = static_cast<CData>(w[0]); }
inline void put(SData& p, const uint64_t* w) { p = static_cast<SData>(w[0]); }
inline void put(IData& p, const uint64_t* w) { p = static_cast<IData>(w[0]); }
inline void put(QData& p, const uint64_t* w) { p = w[0]; }
template <std::size_t N>
inline void put(VlWide<N>& p, const uint64_t* w) {
    for (std::size_t i = 0; i < N; ++i) p[i] = static_cast<EData>(w[i / 2] >> (32 * (i % 2)));
}
inline void get(const CData& p, uint64_t* w) { w[0] = p; }
inline void get(const SData& p, uint64_t* w) { w[0] = p; }
inline void get(const IData& p, uint64_t* w) { w[0] = p; }
inline void get(const QData& p, uint64_t* w) { w[0] = p; }
template <std::size_t N>
inline void get(const VlWide<N>& p, uint64_t* w) {
    for (std::size_t i = 0; i < (N + 1) / 2; ++i) w[i] = 0;
    for (std::size_t i = 0; i < N; ++i) w[i / 2] |= static_cast<uint64_t>(p[i]) << (32 * (i % 2));
}
template <std::size_t N>
constexpr std::size_t words64(const VlWide<N>&) { return (N + 1) / 2; }

}  // namespace roce_hdl
