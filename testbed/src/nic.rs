//! The NICs of a simulated world: their addresses, their table sizes, and which model
//! (datapath) they run on.

use roce_core::engine::PortConfig;
use roce_core::transport::ipv4_gid;
use roce_device::rtl::{rtl_fastpath_nic, rtl_nic};
use roce_device::{Capacities, LocalNic, NicModel};
use roce_hdl_sim::{DataWidth, SimError};
use std::rc::Rc;

/// Most NICs one world addresses.
pub const MAX_NICS: usize = 0xFFFE;

/// The port of NIC `index` (from 0): with `hi.lo` = `index + 1` as two bytes, MAC
/// 02:00:00:00:hi:lo and the GID of 10.0.hi.lo (10.0.0.1, 10.0.0.2, ... for the first
/// 254). Every world numbers its NICs this way.
///
/// # Panics
/// When `index` is [`MAX_NICS`] or more.
pub fn port_config(index: usize) -> PortConfig {
    assert!(index < MAX_NICS, "at most {MAX_NICS} NICs");
    let [_, _, hi, lo] = (index as u32 + 1).to_be_bytes();
    PortConfig::new([0x02, 0, 0, 0, hi, lo], ipv4_gid([10, 0, hi, lo]))
}

/// The firmware's table sizes when `qps` QPs of `depth` outstanding WRs each fit them,
/// else the host-sized ones.
pub fn capacities(qps: usize, depth: usize) -> Capacities {
    if qps <= roce_firmware::config::QPS && depth <= roce_firmware::config::SQ {
        Capacities::Firmware
    } else {
        Capacities::Host
    }
}

/// The datapath under the NIC's firmware runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datapath {
    /// roce-core in software: frames go straight to and from the engine.
    Software,
    /// The Verilated RTL datapath at this bus width.
    Rtl(DataWidth),
}

/// Boots a NIC on `datapath`, with the RC fast path's model as its hardware in front of
/// it (`fastpath`, `docs/fastpath.md`) or the firmware handling every packet. Only the
/// RTL can fail (not built, or not startable).
pub fn boot(
    datapath: Datapath,
    fastpath: bool,
    cfg: PortConfig,
    caps: Capacities,
) -> Result<Rc<dyn NicModel>, SimError> {
    Ok(match (datapath, fastpath) {
        (Datapath::Software, false) => LocalNic::new(cfg, caps),
        (Datapath::Software, true) => LocalNic::with_fastpath(cfg, caps),
        (Datapath::Rtl(width), false) => rtl_nic(cfg, caps, width)?.0,
        (Datapath::Rtl(width), true) => rtl_fastpath_nic(cfg, caps, width)?,
    })
}
