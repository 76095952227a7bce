// Verilated roce_dcb_top at two bus widths behind roce_hdl::DcbModel.
#include "roce-hdl-sim/csrc/dcb_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#include <stdexcept>
#include <string>

#include "verilated.h"
#include "verilated_fst_c.h"
#include "roce-hdl-sim/csrc/vports.h"

#include "Vroce_dcb_top_512.h"
#include "Vroce_dcb_top_64.h"

namespace roce_hdl {
namespace {

template <class V>
class Model final : public DcbModel {
public:
    explicit Model(bool trace) : ctx_(new VerilatedContext) {
        Verilated::threadContextp(ctx_.get());
        ctx_->traceEverOn(trace);
        trace_ok_ = trace;
        m_.reset(new V(ctx_.get(), "top"));
        DcbIn idle{};
        apply(idle);
        m_->clk = 0;
        m_->rst = 1;
        m_->eval();
    }
    // see dp_model.cpp: point the thread at our context before every entry
    ~Model() override {
        Verilated::threadContextp(ctx_.get());
        close_trace();
        m_->final();
        m_.reset();
        ctx_.reset();
        Verilated::threadContextp(nullptr);
    }

    void reset(uint32_t cycles) override {
        Verilated::threadContextp(ctx_.get());
        DcbIn idle{};
        apply(idle);
        m_->rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) clock();
        m_->rst = 0;
        clock();
    }

    void cycle(const DcbIn& in, DcbOut& out) override {
        Verilated::threadContextp(ctx_.get());
        apply(in);
        m_->clk = 0;
        m_->eval();
        out.rx_in_ready = m_->rx_s_axis_tready;
        out.tx_in_ready = m_->tx_s_axis_tready;
        out.tx_out.valid = m_->tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(m_->tx_m_axis_tdata, out.tx_out.data.data());
            get(m_->tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = m_->tx_m_axis_tlast;
        }
        out.rx_out.valid = m_->rx_m_axis_tvalid;
        if (out.rx_out.valid) {
            get(m_->rx_m_axis_tdata, out.rx_out.data.data());
            get(m_->rx_m_axis_tkeep, &out.rx_out.keep);
            out.rx_out.last = m_->rx_m_axis_tlast;
        }
        out.tx_room = m_->tx_room;
        out.paused = m_->paused;
        out.xoff = m_->xoff;
        out.announce = m_->announce;
        out.pfc_take = m_->pfc_take;
        out.refresh_fire = m_->refresh_fire;
        out.pause_req_valid = m_->pause_req_valid;
        out.pause_req_enable = m_->pause_req_enable;
        get(m_->pause_req_quanta, out.pause_req_quanta.data());
        out.add_valid = m_->add_valid;
        out.add_prio = m_->add_prio;
        out.add_len = m_->add_len;
        out.sub_valid = m_->sub_valid;
        out.sub_prio = m_->sub_prio;
        out.sub_len = m_->sub_len;
        out.dec_valid = m_->dec_valid;
        out.dec_eligible = m_->dec_eligible;
        out.dec_prio = m_->dec_prio;
        out.rx_pfc_frames = m_->rx_pfc_frames;
        out.rx_bad_mac_ctl = m_->rx_bad_mac_ctl;
        out.rx_drops = m_->rx_drops;
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

private:
    void apply(const DcbIn& in) {
        m_->cfg_wr_valid = in.cfg_wr_valid;
        m_->cfg_wr_addr = in.cfg_wr_addr;
        m_->cfg_wr_data = in.cfg_wr_data;
        put(m_->rx_s_axis_tdata, in.rx.data.data());
        put(m_->rx_s_axis_tkeep, &in.rx.keep);
        m_->rx_s_axis_tvalid = in.rx.valid;
        m_->rx_s_axis_tlast = in.rx.last;
        put(m_->tx_s_axis_tdata, in.tx.data.data());
        put(m_->tx_s_axis_tkeep, &in.tx.keep);
        m_->tx_s_axis_tvalid = in.tx.valid;
        m_->tx_s_axis_tlast = in.tx.last;
        m_->tx_m_axis_tready = in.tx_out_ready;
        m_->rx_m_axis_tready = in.rx_out_ready;
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

std::unique_ptr<DcbModel> new_dcb_model(uint32_t width, bool trace) {
    switch (width) {
        case 64:
            return std::unique_ptr<DcbModel>(new Model<Vroce_dcb_top_64>(trace));
        case 512:
            return std::unique_ptr<DcbModel>(new Model<Vroce_dcb_top_512>(trace));
        default:
            throw std::invalid_argument("roce-hdl-sim: bus width must be 64 or 512");
    }
}

}  // namespace roce_hdl
