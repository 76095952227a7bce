// Verilated roce_fp_top at two bus widths behind roce_hdl::FpModel.
#include "roce-hdl-sim/csrc/fp_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#ifdef ROCE_HDL_DATAPATH_ONLY
// Built with ROCE_HDL_SIM_DATAPATH_ONLY=1 (build.rs): no fast-path model was compiled.
#include <stdexcept>

namespace roce_hdl {
std::unique_ptr<FpModel> new_fp_model(uint32_t, bool) {
    throw std::runtime_error(
        "roce-hdl-sim was built with ROCE_HDL_SIM_DATAPATH_ONLY=1: no fast-path model");
}
}  // namespace roce_hdl
#else

#include <stdexcept>
#include <string>

#include "verilated.h"
#include "verilated_fst_c.h"
#include "roce-hdl-sim/csrc/vmodel.h"

#include "Vroce_fp_top_512.h"
#include "Vroce_fp_top_64.h"

namespace roce_hdl {
namespace {

template <class V>
class Model final : public FpModel {
public:
    explicit Model(bool trace) : v_(trace) {
        FpIn idle{};
        apply(idle);
        v_.m().clk = 0;
        v_.m().rst = 1;
        v_.m().eval();
    }
    void reset(uint32_t cycles) override {
        v_.enter();
        FpIn idle{};
        apply(idle);
        v_.m().rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) v_.clock();
        v_.m().rst = 0;
        v_.clock();
    }

    void cycle(const FpIn& in, FpOut& out) override {
        v_.enter();
        apply(in);
        v_.falling();
        out.rx_in_ready = v_.m().rx_s_axis_tready;
        out.tx_out.valid = v_.m().tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(v_.m().tx_m_axis_tdata, out.tx_out.data.data());
            get(v_.m().tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = v_.m().tx_m_axis_tlast;
            out.tx_abort = v_.m().tx_m_axis_tuser;
        }
        out.txd_ready = v_.m().txd_ready;
        out.ackd_ready = v_.m().ackd_ready;
        out.cfg_wr_ready = v_.m().cfg_wr_ready;
        out.cfg_rd_ready = v_.m().cfg_rd_ready;
        out.cfg_rdata = v_.m().cfg_rdata;
        out.cfg_rdata_valid = v_.m().cfg_rdata_valid;
        out.ev_valid = v_.m().ev_valid;
        if (out.ev_valid) get(v_.m().ev_data, out.ev.data());
        out.exc.valid = v_.m().exc_tvalid;
        if (out.exc.valid) {
            get(v_.m().exc_tdata, out.exc.data.data());
            get(v_.m().exc_tkeep, &out.exc.keep);
            out.exc.last = v_.m().exc_tlast;
        }
        out.dma_rd_req_valid = v_.m().dma_rd_req_valid;
        out.dma_rd_req_addr = v_.m().dma_rd_req_addr;
        out.dma_rd_req_len = v_.m().dma_rd_req_len;
        out.dma_rd_req_last = v_.m().dma_rd_req_last;
        out.dma_rd_in_ready = v_.m().dma_rd_tready;
        out.dma_wr_desc_valid = v_.m().dma_wr_desc_valid;
        out.dma_wr_desc_addr = v_.m().dma_wr_desc_addr;
        out.dma_wr_desc_len = v_.m().dma_wr_desc_len;
        out.dma_wr.valid = v_.m().dma_wr_tvalid;
        if (out.dma_wr.valid) {
            get(v_.m().dma_wr_tdata, out.dma_wr.data.data());
            get(v_.m().dma_wr_tkeep, &out.dma_wr.keep);
            out.dma_wr.last = v_.m().dma_wr_tlast;
        }
        out.tx_bad_desc = v_.m().tx_bad_desc;
        out.tx_dma_errors = v_.m().tx_dma_errors;
        out.tx_resent = v_.m().tx_resent;
        out.rx_drops = v_.m().rx_drops;
        out.rx_ctx_hits = v_.m().rx_ctx_hits;
        out.rx_ctx_misses = v_.m().rx_ctx_misses;
        out.rx_oos = v_.m().rx_oos;
        out.rx_dups = v_.m().rx_dups;
        out.tx_idle = v_.m().tx_idle;
        out.rx_idle = v_.m().rx_idle;
        out.tx_slots_used = v_.m().tx_slots_used;
        v_.rising();
    }

    void open_trace(rust::Str path) override { v_.open_fst(path); }

    void close_trace() override { v_.close_fst(); }

private:
    void apply(const FpIn& in) {
        put(v_.m().rx_s_axis_tdata, in.rx.data.data());
        put(v_.m().rx_s_axis_tkeep, &in.rx.keep);
        v_.m().rx_s_axis_tvalid = in.rx.valid;
        v_.m().rx_s_axis_tlast = in.rx.last;
        v_.m().tx_m_axis_tready = in.tx_out_ready;
        put(v_.m().txd_data, in.txd.data());
        v_.m().txd_valid = in.txd_valid;
        put(v_.m().ackd_data, in.ackd.data());
        v_.m().ackd_valid = in.ackd_valid;
        v_.m().cfg_wr_valid = in.cfg_wr_valid;
        v_.m().cfg_wr_table = in.cfg_wr_table;
        v_.m().cfg_wr_index = in.cfg_wr_index;
        v_.m().cfg_wr_word = in.cfg_wr_word;
        v_.m().cfg_wr_data = in.cfg_wr_data;
        v_.m().cfg_rd_valid = in.cfg_rd_valid;
        v_.m().cfg_rd_table = in.cfg_rd_table;
        v_.m().cfg_rd_index = in.cfg_rd_index;
        v_.m().cfg_rd_word = in.cfg_rd_word;
        v_.m().ev_ready = in.ev_ready;
        v_.m().exc_tready = in.exc_ready;
        v_.m().dma_rd_req_ready = in.dma_rd_req_ready;
        put(v_.m().dma_rd_tdata, in.dma_rd.data.data());
        put(v_.m().dma_rd_tkeep, &in.dma_rd.keep);
        v_.m().dma_rd_tvalid = in.dma_rd.valid;
        v_.m().dma_rd_tlast = in.dma_rd.last;
        v_.m().dma_rd_terr = in.dma_rd_err;
        v_.m().dma_wr_desc_ready = in.dma_wr_desc_ready;
        v_.m().dma_wr_tready = in.dma_wr_ready;
    }


    VModel<V> v_;
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
#endif  // ROCE_HDL_DATAPATH_ONLY
