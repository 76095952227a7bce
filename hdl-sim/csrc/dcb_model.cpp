// Verilated roce_dcb_top at two bus widths behind roce_hdl::DcbModel.
#include "roce-hdl-sim/csrc/dcb_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#ifdef ROCE_HDL_DATAPATH_ONLY
// Built with ROCE_HDL_SIM_DATAPATH_ONLY=1 (build.rs): no DCB model was compiled.
#include <stdexcept>

namespace roce_hdl {
std::unique_ptr<DcbModel> new_dcb_model(uint32_t, bool) {
    throw std::runtime_error(
        "roce-hdl-sim was built with ROCE_HDL_SIM_DATAPATH_ONLY=1: no DCB model");
}
}  // namespace roce_hdl
#else

#include <stdexcept>

#include "roce-hdl-sim/csrc/dcb_observe.h"
#include "roce-hdl-sim/csrc/vmodel.h"

#include "Vroce_dcb_top_512.h"
#include "Vroce_dcb_top_64.h"

namespace roce_hdl {
namespace {

template <class V>
class Model final : public DcbModel {
public:
    explicit Model(bool trace) : v_(trace) {
        DcbIn idle{};
        apply(idle);
        v_.m().clk = 0;
        v_.m().rst = 1;
        v_.m().eval();
    }

    void reset(uint32_t cycles) override {
        v_.enter();
        DcbIn idle{};
        apply(idle);
        v_.m().rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) v_.clock();
        v_.m().rst = 0;
        v_.clock();
    }

    void cycle(const DcbIn& in, DcbOut& out) override {
        v_.enter();
        apply(in);
        v_.falling();
        V& m = v_.m();
        out.rx_in_ready = m.rx_s_axis_tready;
        out.tx_in_ready = m.tx_s_axis_tready;
        out.tx_out.valid = m.tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(m.tx_m_axis_tdata, out.tx_out.data.data());
            get(m.tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = m.tx_m_axis_tlast;
        }
        out.rx_out.valid = m.rx_m_axis_tvalid;
        if (out.rx_out.valid) {
            get(m.rx_m_axis_tdata, out.rx_out.data.data());
            get(m.rx_m_axis_tkeep, &out.rx_out.keep);
            out.rx_out.last = m.rx_m_axis_tlast;
        }
        observe_dcb(m, out);
        v_.rising();
    }

    void open_trace(rust::Str path) override { v_.open_fst(path); }
    void close_trace() override { v_.close_fst(); }

private:
    void apply(const DcbIn& in) {
        V& m = v_.m();
        m.cfg_wr_valid = in.cfg_wr_valid;
        m.cfg_wr_addr = in.cfg_wr_addr;
        m.cfg_wr_data = in.cfg_wr_data;
        put(m.rx_s_axis_tdata, in.rx.data.data());
        put(m.rx_s_axis_tkeep, &in.rx.keep);
        m.rx_s_axis_tvalid = in.rx.valid;
        m.rx_s_axis_tlast = in.rx.last;
        put(m.tx_s_axis_tdata, in.tx.data.data());
        put(m.tx_s_axis_tkeep, &in.tx.keep);
        m.tx_s_axis_tvalid = in.tx.valid;
        m.tx_s_axis_tlast = in.tx.last;
        m.tx_m_axis_tready = in.tx_out_ready;
        m.rx_m_axis_tready = in.rx_out_ready;
    }

    VModel<V> v_;
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
#endif  // ROCE_HDL_DATAPATH_ONLY
