// Verilated roce_dp_top at two bus widths behind roce_hdl::DpModel (the model's
// life cycle, clock and trace are csrc/vmodel.h's VModel).
#include "roce-hdl-sim/csrc/dp_model.h"
#include "roce-hdl-sim/src/ffi.rs.h"

#include <stdexcept>
#include <string>

#include "verilated.h"
#include "verilated_fst_c.h"
#include "roce-hdl-sim/csrc/vmodel.h"

#include "Vroce_dp_top_512.h"
#include "Vroce_dp_top_64.h"

namespace roce_hdl {
namespace {

template <class V, uint32_t W>
class Model final : public DpModel {
public:
    explicit Model(bool trace) : v_(trace) {
        if (words64(v_.m().rx_m_axis_meta_tdata) > sizeof(CycleOut{}.rx_meta) / sizeof(uint64_t))
            throw std::runtime_error("CycleOut::rx_meta too small for the metadata record");
        idle_inputs();
        v_.m().clk = 0;
        v_.m().rst = 1;
        v_.m().eval();
    }
    uint32_t data_width() const override { return W; }
    uint32_t meta_width() const override { return static_cast<uint32_t>(words64(v_.m().rx_m_axis_meta_tdata) * 64); }

    void reset(uint32_t cycles) override {
        v_.enter();
        idle_inputs();
        v_.m().rst = 1;
        for (uint32_t i = 0; i < cycles; ++i) v_.clock();
        v_.m().rst = 0;
        // one idle cycle: the registered tready outputs come up after reset
        v_.clock();
    }

    void cycle(const CycleIn& in, CycleOut& out) override {
        v_.enter();
        put(v_.m().rx_s_axis_tdata, in.rx.data.data());
        put(v_.m().rx_s_axis_tkeep, &in.rx.keep);
        v_.m().rx_s_axis_tvalid = in.rx.valid;
        v_.m().rx_s_axis_tlast = in.rx.last;
        v_.m().rx_m_axis_payload_tready = in.rx_payload_ready;
        v_.m().rx_m_axis_meta_tready = in.rx_meta_ready;
        put(v_.m().tx_s_axis_tdata, in.tx.data.data());
        put(v_.m().tx_s_axis_tkeep, &in.tx.keep);
        v_.m().tx_s_axis_tvalid = in.tx.valid;
        v_.m().tx_s_axis_tlast = in.tx.last;
        v_.m().tx_m_axis_tready = in.tx_out_ready;
        v_.falling();

        // every output is a register: these are the values of this cycle
        out.rx_in_ready = v_.m().rx_s_axis_tready;
        out.tx_in_ready = v_.m().tx_s_axis_tready;
        out.rx_payload.valid = v_.m().rx_m_axis_payload_tvalid;
        if (out.rx_payload.valid) {
            get(v_.m().rx_m_axis_payload_tdata, out.rx_payload.data.data());
            get(v_.m().rx_m_axis_payload_tkeep, &out.rx_payload.keep);
            out.rx_payload.last = v_.m().rx_m_axis_payload_tlast;
        }
        out.rx_meta_valid = v_.m().rx_m_axis_meta_tvalid;
        if (out.rx_meta_valid) get(v_.m().rx_m_axis_meta_tdata, out.rx_meta.data());
        out.tx_out.valid = v_.m().tx_m_axis_tvalid;
        if (out.tx_out.valid) {
            get(v_.m().tx_m_axis_tdata, out.tx_out.data.data());
            get(v_.m().tx_m_axis_tkeep, &out.tx_out.keep);
            out.tx_out.last = v_.m().tx_m_axis_tlast;
        }
        v_.rising();
    }

    void open_trace(rust::Str path) override { v_.open_fst(path); }

    void close_trace() override { v_.close_fst(); }

    uint64_t cycles() const override { return v_.cycles(); }

private:
    void idle_inputs() {
        const uint64_t zero[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        put(v_.m().rx_s_axis_tdata, zero);
        put(v_.m().rx_s_axis_tkeep, zero);
        v_.m().rx_s_axis_tvalid = 0;
        v_.m().rx_s_axis_tlast = 0;
        v_.m().rx_m_axis_payload_tready = 1;
        v_.m().rx_m_axis_meta_tready = 1;
        put(v_.m().tx_s_axis_tdata, zero);
        put(v_.m().tx_s_axis_tkeep, zero);
        v_.m().tx_s_axis_tvalid = 0;
        v_.m().tx_s_axis_tlast = 0;
        v_.m().tx_m_axis_tready = 1;
    }


    VModel<V> v_;
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
