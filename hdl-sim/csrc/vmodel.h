// What the model wrappers share: Verilated ports <-> little-endian 64-bit
// words (byte 0 of a port is bits 7..0 of word 0), and the life cycle of one
// Verilated model in its own context (clock, FST trace, teardown).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "rust/cxx.h"
#include "verilated.h"
#include "verilated_fst_c.h"

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

// One Verilated model `V` with its own VerilatedContext, so models in
// different threads share nothing. Verilator 5.006 destroys a model's scopes
// through the thread's *current* context (Verilated::threadContextp), not the
// model's own: every entry point calls enter() first, or a model outliving
// another model's context deadlocks on a freed mutex.
template <class V>
class VModel {
public:
    explicit VModel(bool trace) : ctx_(new VerilatedContext) {
        enter();
        ctx_->traceEverOn(trace);
        trace_ok_ = trace;
        m_.reset(new V(ctx_.get(), "top"));
    }
    ~VModel() {
        enter();
        close_fst();
        m_->final();
        m_.reset();
        ctx_.reset();
        Verilated::threadContextp(nullptr);
    }
    VModel(const VModel&) = delete;
    VModel& operator=(const VModel&) = delete;

    void enter() { Verilated::threadContextp(ctx_.get()); }

    // FST waveform of every following cycle (needs trace = true)
    void open_fst(rust::Str path) {
        if (!trace_ok_) throw std::runtime_error("model was made without trace support");
        enter();
        close_fst();
        fst_.reset(new VerilatedFstC);
        m_->trace(fst_.get(), 99);
        fst_->open(std::string(path).c_str());
    }
    void close_fst() {
        if (fst_) {
            fst_->close();
            fst_.reset();
        }
    }

    // clock low with the inputs applied: the outputs of this cycle are valid after it
    void falling() {
        m_->clk = 0;
        m_->eval();
        if (fst_) fst_->dump(2 * cycles_);
    }
    // the rising edge
    void rising() {
        m_->clk = 1;
        m_->eval();
        if (fst_) fst_->dump(2 * cycles_ + 1);
        ++cycles_;
    }
    void clock() {
        falling();
        rising();
    }

    V& m() { return *m_; }
    const V& m() const { return *m_; }
    uint64_t cycles() const { return cycles_; }

private:
    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<V> m_;
    std::unique_ptr<VerilatedFstC> fst_;
    uint64_t cycles_ = 0;
    bool trace_ok_ = false;
};

}  // namespace roce_hdl
