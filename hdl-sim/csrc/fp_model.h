// C++ side of the fast-path model (roce_fp_top), one class per bus width
// behind a small virtual interface, like DpModel.
#pragma once

#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace roce_hdl {

struct FpIn;
struct FpOut;

class FpModel {
public:
    virtual ~FpModel() = default;
    // hold reset for `cycles` clock cycles, inputs idle, then one idle cycle
    virtual void reset(uint32_t cycles) = 0;
    // one clock cycle: apply `in`, report what was presented, clock the edge
    virtual void cycle(const FpIn& in, FpOut& out) = 0;
    virtual void open_trace(rust::Str path) = 0;
    virtual void close_trace() = 0;
};

std::unique_ptr<FpModel> new_fp_model(uint32_t width, bool trace);

}  // namespace roce_hdl
