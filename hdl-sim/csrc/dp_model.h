// C++ side of the roce-hdl-sim cxx bridge: one class per Verilated bus
// width behind a small virtual interface. Each model owns its own
// VerilatedContext, so models in different threads do not share state.
#pragma once

#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace roce_hdl {

struct CycleIn;
struct CycleOut;

class DpModel {
public:
    virtual ~DpModel() = default;
    // bus width in bits (64 or 512)
    virtual uint32_t data_width() const = 0;
    // width of the RX metadata record in bits
    virtual uint32_t meta_width() const = 0;
    // hold reset for `cycles` clock cycles, inputs idle, then one idle cycle
    // out of reset (the registered tready outputs rise in it)
    virtual void reset(uint32_t cycles) = 0;
    // one clock cycle: apply `in`, report in `out` what was presented during
    // the cycle (a transfer happened at its rising edge when valid && ready),
    // then clock the rising edge
    virtual void cycle(const CycleIn& in, CycleOut& out) = 0;
    // FST waveform of every following cycle (needs a model made with trace = true)
    virtual void open_trace(rust::Str path) = 0;
    virtual void close_trace() = 0;
    // clock cycles since construction
    virtual uint64_t cycles() const = 0;
};

// width: 64 or 512. trace: allow open_trace (costs some speed).
std::unique_ptr<DpModel> new_dp_model(uint32_t width, bool trace);

}  // namespace roce_hdl
