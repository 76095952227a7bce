//! The firmware runtime over the Verilated datapath: frames from the wire pass the RTL
//! RX parser (and its ICRC check) before the engine sees them; frames the engine builds
//! get their ICRC from the RTL TX inserter. With the fast path, the RTL's fast path
//! (`roce_hdl_sim::FpPort`) is the hardware in front of the firmware.

use crate::local::{Capacities, LocalNic};
use roce_core::engine::PortConfig;
use roce_firmware::hal::Datapath;
use roce_hdl_sim::{DataWidth, FpPort, RtlPort, SimError};
use std::cell::RefCell;
use std::rc::Rc;

pub use roce_hdl_sim::{rtl_available, RtlPortCounters};

/// A NIC whose datapath is the RTL at `width`, and its datapath's counters. Fails when
/// the model cannot be built or started (Verilator was missing when `roce-hdl-sim` was
/// built, say).
pub fn rtl_nic(
    cfg: PortConfig,
    caps: Capacities,
    width: DataWidth,
) -> Result<(Rc<LocalNic>, Rc<RefCell<RtlPortCounters>>), SimError> {
    let mut counters = None;
    let nic = LocalNic::with_datapath(cfg, caps, |port| {
        let rtl = RtlPort::new(width, port)?;
        counters = Some(rtl.counters());
        Ok::<_, SimError>(Box::new(rtl))
    })?;
    Ok((nic, counters.unwrap_or_default()))
}

/// A NIC whose RC fast path is the RTL (`roce_fp_top` at `width`, `docs/fastpath.md`):
/// every received frame passes its parser and receive rules, the firmware posts
/// descriptors to its segmenter and takes its events.
pub fn rtl_fastpath_nic(
    cfg: PortConfig,
    caps: Capacities,
    width: DataWidth,
) -> Result<Rc<LocalNic>, SimError> {
    LocalNic::with_fastpath_datapath(cfg, caps, |port| {
        FpPort::new(width, port).map(|p| Box::new(p) as Box<dyn Datapath>)
    })
}
