//! The NIC models the verbs and ABI suites run on. The suites reach each one only
//! through the device boundary (`Context::open`) and wire two of them together through
//! `NicModel`'s frames.

use roce_core::engine::PortConfig;
use roce_core::transport::ipv4_gid;
use roce_device::rtl::{rtl_available, rtl_nic};
use roce_device::{Capacities, LocalNic, NicModel};
use roce_hdl_sim::DataWidth;
use std::rc::Rc;

/// A NIC model behind the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The firmware runtime over the software datapath.
    Software,
    /// The firmware runtime over the Verilated datapath (512-bit bus).
    Rtl,
}

/// Every model this build has: the RTL one only where Verilator built it (always
/// under CI, where a missing model is a failure).
pub fn models() -> Vec<Model> {
    if rtl_available() {
        vec![Model::Software, Model::Rtl]
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("skipped the RTL model: the Verilated datapath was not built");
        vec![Model::Software]
    }
}

impl Model {
    /// Boots a NIC of this model with MAC 02:00:00:00:00:`last` and 10.0.0.`last`.
    pub fn boot(self, last: u8) -> Rc<LocalNic> {
        let cfg = PortConfig::new([2, 0, 0, 0, 0, last], ipv4_gid([10, 0, 0, last]));
        match self {
            Self::Software => LocalNic::new(cfg, Capacities::Firmware),
            Self::Rtl => {
                rtl_nic(cfg, Capacities::Firmware, DataWidth::W512)
                    .expect("the RTL datapath")
                    .0
            }
        }
    }
}

/// Moves frames between two NICs, both ways, until both are idle.
pub fn run(a: &dyn NicModel, b: &dyn NicModel) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = a.poll() | b.poll();
        for (from, to) in [(a, b), (b, a)] {
            while let Some(n) = from.transmit_frame(&mut buf) {
                to.receive_frame(&buf[..n]);
                busy = true;
            }
        }
        if !busy {
            break;
        }
    }
}
