// Verilated roce_dp_top at two bus widths behind roce_hdl::DpModel.
#include "roce-hdl-sim/csrc/dp_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#include <stdexcept>
#include <string>

#include "verilated.h"
#include "verilated_fst_c.h"
#include "roce-hdl-sim/csrc/vports.h"

#include "Vroce_dp_top_512.h"
#include "Vroce_dp_top_64.h"

namespace roce_hdl {
namespace {

template <class V, uint32_t W>
class Model final : public DpModel {
public:
    explicit Model(bool trace) : ctx_(new VerilatedContext) {
        Verilated::threadContextp(ctx_.get());
        ctx_->traceEverOn(trace);
        trace_ok_ = trace;
        m_.reset(new V(ctx_.get(), "top"));
        if (words64(m_->rx_m_axis_meta_tdata) > sizeof(CycleOut{}.rx_meta) / sizeof(uint64_t))
            throw std::runtime_error("CycleOut::rx_meta too small for the metadata record");
        idle_inputs();
        m_->clk = 0;
        m_->rst = 1;
        m_->eval();
    }
    // Verilator 5.006 destroys a model's scopes through the thread's *current*
    // context (Verilated::threadContextp), not the model's own: point it at
    // ours first, or a model outliving another model's context deadlocks on
    // a freed mutex. Every entry point below does the same.
    ~Model() override {
        Verilated::threadContextp(ctx_.get());
        close_trace();
        m_->final();
        m_.reset();
        ctx_.reset();
        Verilated::threadContextp(nullptr);
    }

    uint32_t data_width() const override { return W; }
    uint32_t meta_width() const override { return static_cast<uint32_t>(words64(m_->rx_m_axis_meta_tdata) * 64); }

    void reset(uint32_t cycles) override {
        Verilated::threadContextp(ctx_.get());
        idle_inputs();
        m_->rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) clock();
        m_->rst = 0;
        // one idle cycle: the registered tready outputs come up after reset
        clock();
    }

    void cycle(const CycleIn& in, CycleOut& out) override {
        Verilated::threadContextp(ctx_.get());
        put(m_->rx_s_axis_tdata, in.rx.data.data());
        put(m_->rx_s_axis_tkeep, &in.rx.keep);
        m_->rx_s_axis_tvalid = in.rx.valid;
        m_->rx_s_axis_tlast = in.rx.last;
        m_->rx_m_axis_payload_tready = in.rx_payload_ready;
        m_->rx_m_axis_meta_tready = in.rx_meta_ready;
        put(m_->tx_s_axis_tdata, in.tx.data.data());
        put(m_->tx_s_axis_tkeep, &in.tx.keep);
        m_->tx_s_axis_tvalid = in.tx.valid;
        m_->tx_s_axis_tlast = in.tx.last;
        m_->tx_m_axis_tready = in.tx_out_ready;
        m_->clk = 0;
        m_->eval();

        // every output is a register: these are the values of this cycle
        out.rx_in_ready = m_->rx_s_axis_tready;
        out.tx_in_ready = m_->tx_s_axis_tready;
        out.rx_payload.valid = m_->rx_m_axis_payload_tvalid;
        if (out.rx_payload.valid) {
            get(m_->rx_m_axis_payload_tdata, out.rx_payload.data.data());
            get(m_->rx_m_axis_payload_tkeep, &out.rx_payload.keep);
            out.rx_payload.last = m_->rx_m_axis_payload_tlast;
        }
        out.rx_meta_valid = m_->rx_m_axis_meta_tvalid;
        if (out.rx_meta_valid) get(m_->rx_m_axis_meta_tdata, out.rx_meta.data());
        out.tx_out.valid = m_->tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(m_->tx_m_axis_tdata, out.tx_out.data.data());
            get(m_->tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = m_->tx_m_axis_tlast;
        }
        if (fst_) fst_->dump(2 * cycles_);
        m_->clk = 1;
        m_->eval();
        if (fst_) fst_->dump(2 * cycles_ + 1);
        ++cycles_;
    }

    void open_trace(rust::Str path) override {
        if (!trace_ok_) throw std::runtime_error("model was made without trace support");
        Verilated::threadContextp(ctx_.get());
        close_trace();
        fst_.reset(new VerilatedFstC);
        m_->trace(fst_.get(), 99);
        fst_->open(std::string(path).c_str());
    }

    void close_trace() override {
        if (fst_) {
            fst_->close();
            fst_.reset();
        }
    }

    uint64_t cycles() const override { return cycles_; }

private:
    void idle_inputs() {
        const uint64_t zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        put(m_->rx_s_axis_tdata, zero);
        put(m_->rx_s_axis_tkeep, zero);
        m_->rx_s_axis_tvalid = 0;
        m_->rx_s_axis_tlast = 0;
        m_->rx_m_axis_payload_tready = 1;
        m_->rx_m_axis_meta_tready = 1;
        put(m_->tx_s_axis_tdata, zero);
        put(m_->tx_s_axis_tkeep, zero);
        m_->tx_s_axis_tvalid = 0;
        m_->tx_s_axis_tlast = 0;
        m_->tx_m_axis_tready = 1;
    }

    void clock() {
        m_->clk = 0;
        m_->eval();
        if (fst_) fst_->dump(2 * cycles_);
        m_->clk = 1;
        m_->eval();
        if (fst_) fst_->dump(2 * cycles_ + 1);
        ++cycles_;
    }

    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<V> m_;
    std::unique_ptr<VerilatedFstC> fst_;
    uint64_t cycles_ = 0;
    bool trace_ok_ = false;
};

}  // namespace

std::unique_ptr<DpModel> new_dp_model(uint32_t width, bool trace) {
    switch (width) {
        case 64:
            return std::unique_ptr<DpModel>(new Model<Vroce_dp_top_64, 64>(trace));
        case 512:
            return std::unique_ptr<DpModel>(new Model<Vroce_dp_top_512, 512>(trace));
        default:
            throw std::invalid_argument("roce-hdl-sim: bus width must be 64 or 512");
    }
}

}  // namespace roce_hdl
