// What the DCB block (roce_dcb_top) shows in a cycle, read from the ports of
// a Verilated top that carries them under roce_dcb_top's names: the block's own
// model (dcb_model.cpp) and the SoC (soc_model.cpp, nic_soc's dcb ports).
#pragma once

#include "roce-hdl-sim/csrc/vmodel.h"
#include "roce-hdl-sim/src/ffi.rs.h"

namespace roce_hdl {

template <class M>
void observe_dcb(const M& m, DcbOut& out) {
    out.tx_room = m.tx_room;
    out.paused = m.paused;
    out.xoff = m.xoff;
    out.announce = m.announce;
    out.pfc_take = m.pfc_take;
    out.refresh_fire = m.refresh_fire;
    out.pause_req_valid = m.pause_req_valid;
    out.pause_req_enable = m.pause_req_enable;
    get(m.pause_req_quanta, out.pause_req_quanta.data());
    out.add_valid = m.add_valid;
    out.add_prio = m.add_prio;
    out.add_len = m.add_len;
    out.sub_valid = m.sub_valid;
    out.sub_prio = m.sub_prio;
    out.sub_len = m.sub_len;
    out.dec_valid = m.dec_valid;
    out.dec_eligible = m.dec_eligible;
    out.dec_prio = m.dec_prio;
    out.rx_pfc_frames = m.rx_pfc_frames;
    out.rx_bad_mac_ctl = m.rx_bad_mac_ctl;
    out.rx_drops = m.rx_drops;
}

}  // namespace roce_hdl
