// C++ side of the SoC model (rtl/soc/nic_soc.sv, Verilated as Vnic_soc): the
// clock loop runs here, and host memory stays in Rust, reached through the
// DMA callbacks of `SocHost` (src/soc.rs) while the loop runs.
#pragma once

#include <cstdint>
#include <memory>

#include "rust/cxx.h"

namespace roce_hdl {

struct SocHost;

class SocModel {
public:
    virtual ~SocModel() = default;
    // `cycles` clock cycles: frames queued by push_rx go in on the wire as the
    // SoC takes them, frames it sends are collected for pop_tx, log bytes for
    // take_log, and DMA requests are served from `host`
    virtual void run(uint64_t cycles, SocHost& host) = 0;
    // one access of the host's register window (clocks until it is answered)
    virtual uint32_t reg_read(uint32_t offset, SocHost& host) = 0;
    virtual void reg_write(uint32_t offset, uint32_t value, SocHost& host) = 0;
    virtual void push_rx(rust::Slice<const uint8_t> frame) = 0;
    // frames queued for the wire, not yet taken by the SoC
    virtual size_t rx_queued() const = 0;
    // frames the SoC sent that pop_tx has not taken yet
    virtual size_t tx_queued() const = 0;
    // the oldest frame the SoC sent, if any (false: none)
    virtual bool pop_tx(rust::Vec<uint8_t>& frame) = 0;
    // moves the log bytes collected so far into `out`
    virtual void take_log(rust::Vec<uint8_t>& out) = 0;
    virtual uint64_t cycles() const = 0;
    virtual void open_trace(rust::Str path) = 0;
    virtual void close_trace() = 0;
    // while on, every cycle hands what the DCB block showed to host.dcb_cycle
    virtual void watch_dcb(bool on) = 0;
};

// image: the $readmemh file of the RAM; mac (6 bytes) and gid (16 bytes) as on
// the wire; trace: allow open_trace.
std::unique_ptr<SocModel> new_soc_model(rust::Str image, rust::Slice<const uint8_t> mac,
                                        rust::Slice<const uint8_t> gid, bool trace, bool fastpath);

}  // namespace roce_hdl
