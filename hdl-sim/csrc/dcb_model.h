// C++ side of the DCB block's model (roce_dcb_top), one class per bus width
// behind a small virtual interface, like FpModel.
#pragma once

#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace roce_hdl {

struct DcbIn;
struct DcbOut;

class DcbModel {
public:
    virtual ~DcbModel() = default;
    // hold reset for `cycles` clock cycles, inputs idle, then one idle cycle
    virtual void reset(uint32_t cycles) = 0;
    // one clock cycle: apply `in`, report what was presented, clock the edge
    virtual void cycle(const DcbIn& in, DcbOut& out) = 0;
    virtual void open_trace(rust::Str path) = 0;
    virtual void close_trace() = 0;
};

std::unique_ptr<DcbModel> new_dcb_model(uint32_t width, bool trace);

}  // namespace roce_hdl
