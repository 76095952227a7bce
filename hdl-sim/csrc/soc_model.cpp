// The Verilated SoC behind roce_hdl::SocModel (see soc_model.h), one wrapper for
// both of its models: Vnic_soc (built without the RC fast path) and Vnic_soc_fp
// (FASTPATH=1). A strap-off SoC runs the first: Verilator evaluates the fast path's
// logic every cycle whatever the strap says, which made the SoC 5.6 times slower.
#include "roce-hdl-sim/csrc/soc_model.h"
#include "roce-hdl-sim/csrc/dcb_observe.h"
#include "roce-hdl-sim/src/soc_ffi.rs.h"

#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "verilated.h"
#include "verilated_fst_c.h"

#include "Vnic_soc.h"
#include "Vnic_soc_fp.h"

namespace roce_hdl {
namespace {

// V: the Verilated nic_soc (its ports are the same in both models)
template <class V>
class Soc final : public SocModel {
public:
    Soc(const std::string& image, rust::Slice<const uint8_t> mac,
        rust::Slice<const uint8_t> gid, bool trace, bool fastpath)
        : ctx_(new VerilatedContext) {
        if (mac.size() != 6 || gid.size() != 16)
            throw std::runtime_error("the MAC has 6 bytes and the GID 16");
        Verilated::threadContextp(ctx_.get());
        // the RAM's initial block reads the image named by +image=
        plusarg_ = "+image=" + image;
        const char* argv[] = {"nic_soc", plusarg_.c_str()};
        ctx_->commandArgs(2, argv);
        ctx_->traceEverOn(trace);
        trace_ok_ = trace;
        m_.reset(new V(ctx_.get(), "soc"));
        uint64_t mac_v = 0;
        for (int i = 0; i < 6; ++i) mac_v = (mac_v << 8) | mac[i];
        m_->port_mac = mac_v;
        // VlWide words: word 0 holds bits 31..0, the GID's last four bytes
        for (int w = 0; w < 4; ++w) {
            uint32_t v = 0;
            for (int b = 0; b < 4; ++b) v = (v << 8) | gid[(3 - w) * 4 + b];
            m_->port_gid[w] = v;
        }
        // the strap: frames from the wire go through the fast path
        m_->fp_strap = fastpath;
        m_->rx_axis_tvalid = 0;
        m_->tx_axis_tready = 1;
        m_->log_ready = 1;
        m_->dma_req_ready = 1;
        m_->dma_rsp_valid = 0;
        m_->host_req_valid = 0;
        m_->clk = 0;
        m_->rst = 1;
        m_->eval();
        for (int i = 0; i < 8; ++i) edge();
        m_->rst = 0;
    }

    ~Soc() override {
        Verilated::threadContextp(ctx_.get());
        close_trace();
        m_->final();
        m_.reset();
        ctx_.reset();
        Verilated::threadContextp(nullptr);
    }

    void run(uint64_t n, SocHost& host) override {
        Verilated::threadContextp(ctx_.get());
        for (uint64_t i = 0; i < n; ++i) cycle(host);
    }

    uint32_t reg_read(uint32_t offset, SocHost& host) override {
        Verilated::threadContextp(ctx_.get());
        m_->host_req_valid = 1;
        m_->host_req_we = 0;
        m_->host_req_addr = offset & 0x7FFC;
        cycle(host);
        m_->host_req_valid = 0;
        // the answer is registered: it is there right after the edge
        if (!m_->host_rsp_valid) throw std::logic_error("host register read not answered");
        return m_->host_rsp_rdata;
    }

    void reg_write(uint32_t offset, uint32_t value, SocHost& host) override {
        Verilated::threadContextp(ctx_.get());
        m_->host_req_valid = 1;
        m_->host_req_we = 1;
        m_->host_req_addr = offset & 0x7FFC;
        m_->host_req_wdata = value;
        cycle(host);
        m_->host_req_valid = 0;
    }

    void push_rx(rust::Slice<const uint8_t> frame) override {
        rx_.emplace_back(frame.begin(), frame.end());
    }

    size_t rx_queued() const override { return rx_.size(); }

    size_t tx_queued() const override { return tx_.size(); }

    bool pop_tx(rust::Vec<uint8_t>& frame) override {
        if (tx_.empty()) return false;
        frame.clear();
        frame.reserve(tx_.front().size());
        for (uint8_t b : tx_.front()) frame.push_back(b);
        tx_.pop_front();
        return true;
    }

    void take_log(rust::Vec<uint8_t>& out) override {
        for (uint8_t b : log_) out.push_back(b);
        log_.clear();
    }

    uint64_t cycles() const override { return cycles_; }

    void open_trace(rust::Str path) override {
        Verilated::threadContextp(ctx_.get());
        if (!trace_ok_) throw std::runtime_error("model built without tracing");
        close_trace();
        tfp_.reset(new VerilatedFstC);
        m_->trace(tfp_.get(), 99);
        tfp_->open(std::string(path).c_str());
    }

    void watch_dcb(bool on) override { watch_dcb_ = on; }

    void close_trace() override {
        if (tfp_) {
            tfp_->close();
            tfp_.reset();
        }
    }

private:
    // one rising edge, with the inputs as they are
    void edge() {
        m_->clk = 0;
        m_->eval();
        if (tfp_) tfp_->dump(2 * cycles_);
        m_->clk = 1;
        m_->eval();
        if (tfp_) tfp_->dump(2 * cycles_ + 1);
        ++cycles_;
    }

    // one clock cycle: present the inputs, note the transfers the edge makes,
    // clock it, then serve what was transferred
    void cycle(SocHost& host) {
        present_rx();
        m_->clk = 0;
        m_->eval();
        const bool rx_hs = m_->rx_axis_tvalid && m_->rx_axis_tready;
        const bool tx_hs = m_->tx_axis_tvalid;  // tready is always 1
        const bool log_hs = m_->log_valid;      // log_ready is always 1
        const bool dma_hs = m_->dma_req_valid;  // dma_req_ready is always 1
        if (watch_dcb_) {
            DcbOut obs{};
            observe_dcb(*m_, obs);
            host.dcb_cycle(obs);
        }
        if (tx_hs) take_tx_beat();
        if (log_hs) log_.push_back(m_->log_data);
        DmaReq req{};
        if (dma_hs) {
            req.write = m_->dma_req_write;
            req.addr = m_->dma_req_addr;
            req.len = m_->dma_req_len;
            req.wdata = m_->dma_req_wdata;
        }
        if (tfp_) tfp_->dump(2 * cycles_);
        m_->clk = 1;
        m_->eval();
        if (tfp_) tfp_->dump(2 * cycles_ + 1);
        ++cycles_;
        if (rx_hs) rx_off_ += 8;
        if (rx_off_ > 0 && !rx_.empty() && rx_off_ >= rx_.front().size()) {
            rx_.pop_front();
            rx_off_ = 0;
        }
        // the answer to a request goes out in the cycle after its transfer
        m_->dma_rsp_valid = dma_hs;
        if (dma_hs) serve(req, host);
    }

    struct DmaReq {
        bool write;
        uint64_t addr;
        uint32_t len;
        uint32_t wdata;
    };

    void serve(const DmaReq& r, SocHost& host) {
        bool ok;
        uint32_t data = 0;
        if (r.write) {
            ok = host.dma_write(r.addr, r.len, r.wdata);
        } else {
            ok = host.dma_read(r.addr, r.len, data);
        }
        m_->dma_rsp_error = !ok;
        m_->dma_rsp_rdata = data;
    }

    void present_rx() {
        if (rx_.empty()) {
            m_->rx_axis_tvalid = 0;
            return;
        }
        const std::vector<uint8_t>& f = rx_.front();
        size_t n = f.size() - rx_off_;
        if (n > 8) n = 8;
        uint64_t d = 0;
        for (size_t i = 0; i < n; ++i) d |= static_cast<uint64_t>(f[rx_off_ + i]) << (8 * i);
        m_->rx_axis_tdata = d;
        m_->rx_axis_tkeep = static_cast<CData>((1u << n) - 1);
        m_->rx_axis_tlast = rx_off_ + n >= f.size();
        m_->rx_axis_tvalid = 1;
    }

    void take_tx_beat() {
        const uint64_t d = m_->tx_axis_tdata;
        const uint32_t keep = m_->tx_axis_tkeep;
        for (int i = 0; i < 8; ++i) {
            if (keep & (1u << i)) tx_cur_.push_back(static_cast<uint8_t>(d >> (8 * i)));
        }
        if (m_->tx_axis_tlast) {
            tx_.push_back(std::move(tx_cur_));
            tx_cur_.clear();
        }
    }

    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<V> m_;
    std::unique_ptr<VerilatedFstC> tfp_;
    std::string plusarg_;
    bool trace_ok_ = false;
    bool watch_dcb_ = false;
    uint64_t cycles_ = 0;
    std::deque<std::vector<uint8_t>> rx_;
    size_t rx_off_ = 0;
    std::deque<std::vector<uint8_t>> tx_;
    std::vector<uint8_t> tx_cur_;
    std::vector<uint8_t> log_;
};

}  // namespace

std::unique_ptr<SocModel> new_soc_model(rust::Str image, rust::Slice<const uint8_t> mac,
                                        rust::Slice<const uint8_t> gid, bool trace,
                                        bool fastpath) {
    if (fastpath)
        return std::unique_ptr<SocModel>(
            new Soc<Vnic_soc_fp>(std::string(image), mac, gid, trace, true));
    return std::unique_ptr<SocModel>(new Soc<Vnic_soc>(std::string(image), mac, gid, trace, false));
}

}  // namespace roce_hdl
