// Verilated roce_fp_top at two bus widths behind roce_hdl::FpModel.
#include "roce-hdl-sim/csrc/fp_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#include <stdexcept>
#include <string>

#include "verilated.h"
#include "verilated_fst_c.h"
#include "roce-hdl-sim/csrc/vports.h"

#include "Vroce_fp_top_512.h"
#include "Vroce_fp_top_64.h"

namespace roce_hdl {
namespace {

template <class V>
class Model final : public FpModel {
public:
    explicit Model(bool trace) : ctx_(new VerilatedContext) {
        Verilated::threadContextp(ctx_.get());
        ctx_->traceEverOn(trace);
        trace_ok_ = trace;
        m_.reset(new V(ctx_.get(), "top"));
        FpIn idle{};
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
        FpIn idle{};
        apply(idle);
        m_->rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) clock();
        m_->rst = 0;
        clock();
    }

    void cycle(const FpIn& in, FpOut& out) override {
        Verilated::threadContextp(ctx_.get());
        apply(in);
        m_->clk = 0;
        m_->eval();
        out.rx_in_ready = m_->rx_s_axis_tready;
        out.tx_out.valid = m_->tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(m_->tx_m_axis_tdata, out.tx_out.data.data());
            get(m_->tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = m_->tx_m_axis_tlast;
        }
        out.txd_ready = m_->txd_ready;
        out.ackd_ready = m_->ackd_ready;
        out.cfg_wr_ready = m_->cfg_wr_ready;
        out.cfg_rd_ready = m_->cfg_rd_ready;
        out.cfg_rdata = m_->cfg_rdata;
        out.cfg_rdata_valid = m_->cfg_rdata_valid;
        out.ev_valid = m_->ev_valid;
        if (out.ev_valid) get(m_->ev_data, out.ev.data());
        out.exc.valid = m_->exc_tvalid;
        if (out.exc.valid) {
            get(m_->exc_tdata, out.exc.data.data());
            get(m_->exc_tkeep, &out.exc.keep);
            out.exc.last = m_->exc_tlast;
        }
        out.dma_rd_req_valid = m_->dma_rd_req_valid;
        out.dma_rd_req_addr = m_->dma_rd_req_addr;
        out.dma_rd_req_len = m_->dma_rd_req_len;
        out.dma_rd_req_last = m_->dma_rd_req_last;
        out.dma_rd_in_ready = m_->dma_rd_tready;
        out.dma_wr_desc_valid = m_->dma_wr_desc_valid;
        out.dma_wr_desc_addr = m_->dma_wr_desc_addr;
        out.dma_wr_desc_len = m_->dma_wr_desc_len;
        out.dma_wr.valid = m_->dma_wr_tvalid;
        if (out.dma_wr.valid) {
            get(m_->dma_wr_tdata, out.dma_wr.data.data());
            get(m_->dma_wr_tkeep, &out.dma_wr.keep);
            out.dma_wr.last = m_->dma_wr_tlast;
        }
        out.tx_bad_desc = m_->tx_bad_desc;
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
    void apply(const FpIn& in) {
        put(m_->rx_s_axis_tdata, in.rx.data.data());
        put(m_->rx_s_axis_tkeep, &in.rx.keep);
        m_->rx_s_axis_tvalid = in.rx.valid;
        m_->rx_s_axis_tlast = in.rx.last;
        m_->tx_m_axis_tready = in.tx_out_ready;
        put(m_->txd_data, in.txd.data());
        m_->txd_valid = in.txd_valid;
        put(m_->ackd_data, in.ackd.data());
        m_->ackd_valid = in.ackd_valid;
        m_->cfg_wr_valid = in.cfg_wr_valid;
        m_->cfg_wr_table = in.cfg_wr_table;
        m_->cfg_wr_index = in.cfg_wr_index;
        m_->cfg_wr_word = in.cfg_wr_word;
        m_->cfg_wr_data = in.cfg_wr_data;
        m_->cfg_rd_valid = in.cfg_rd_valid;
        m_->cfg_rd_table = in.cfg_rd_table;
        m_->cfg_rd_index = in.cfg_rd_index;
        m_->cfg_rd_word = in.cfg_rd_word;
        m_->ev_ready = in.ev_ready;
        m_->exc_tready = in.exc_ready;
        m_->dma_rd_req_ready = in.dma_rd_req_ready;
        put(m_->dma_rd_tdata, in.dma_rd.data.data());
        put(m_->dma_rd_tkeep, &in.dma_rd.keep);
        m_->dma_rd_tvalid = in.dma_rd.valid;
        m_->dma_rd_tlast = in.dma_rd.last;
        m_->dma_wr_desc_ready = in.dma_wr_desc_ready;
        m_->dma_wr_tready = in.dma_wr_ready;
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

std::unique_ptr<FpModel> new_fp_model(uint32_t width, bool trace) {
    switch (width) {
        case 64:
            return std::unique_ptr<FpModel>(new Model<Vroce_fp_top_64>(trace));
        case 512:
            return std::unique_ptr<FpModel>(new Model<Vroce_fp_top_512>(trace));
        default:
            throw std::invalid_argument("roce-hdl-sim: bus width must be 64 or 512");
    }
}

}  // namespace roce_hdl
