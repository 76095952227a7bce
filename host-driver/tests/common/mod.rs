//! The NIC models the verbs and ABI suites run on. The suites reach each one only
//! through the device boundary (`Context::open`) and wire two of them together through
//! `NicModel`'s frames.
#![allow(dead_code)] // each test binary uses a part

use roce_core::engine::PortConfig;
use roce_core::transport::ipv4_gid;
use roce_device::rtl::{rtl_available, rtl_fastpath_nic, rtl_nic};
use roce_device::soc::{default_image, soc_available, SocNic};
use roce_device::{Capacities, LocalNic, NicModel};
use roce_hdl_sim::DataWidth;
use std::rc::Rc;

/// A NIC model behind the boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// The firmware runtime over the software datapath.
    Software,
    /// The same over the RC fast path's software model (`docs/fastpath.md`).
    FastPath,
    /// The firmware runtime over the Verilated datapath (512-bit bus).
    Rtl,
    /// The same over the RC fast path in RTL (`roce_fp_top`, 512-bit bus).
    RtlFastPath,
    /// The firmware image on the Verilated SoC (soft core beside the datapath).
    Soc,
}

/// Every model this build has: the RTL one only where Verilator built it (always
/// under CI, where a missing model is a failure); the SoC where its model was built and
/// `make-images.sh` has written the image (`cargo xtask ci`'s `soc` step runs the
/// suites on it with `ROCE_SOC_REQUIRED=1`).
pub fn models() -> Vec<Model> {
    let mut models = vec![Model::Software, Model::FastPath];
    if rtl_available() {
        models.push(Model::Rtl);
        models.push(Model::RtlFastPath);
    } else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("skipped the RTL model: the Verilated datapath was not built");
    }
    let required = std::env::var("ROCE_SOC_REQUIRED").as_deref() == Ok("1");
    if soc_available() && default_image().exists() {
        models.push(Model::Soc);
    } else {
        assert!(!required, "the SoC model and its image are required");
        eprintln!("skipped the SoC model: no model or no image (make-images.sh)");
    }
    models
}

/// A booted NIC of some model, behind the boundary (its counters and settings are
/// read through the ABI, on every model alike).
pub struct Nic {
    pub model: Rc<dyn NicModel>,
}

impl Model {
    /// Boots a NIC of this model with MAC 02:00:00:00:00:`last` and 10.0.0.`last`.
    pub fn boot(self, last: u8) -> Nic {
        let cfg = PortConfig::new([2, 0, 0, 0, 0, last], ipv4_gid([10, 0, 0, last]));
        let model: Rc<dyn NicModel> = match self {
            Self::Software => LocalNic::new(cfg, Capacities::Firmware),
            Self::FastPath => LocalNic::with_fastpath(cfg, Capacities::Firmware),
            Self::Rtl => {
                rtl_nic(cfg, Capacities::Firmware, DataWidth::W512)
                    .expect("the RTL datapath")
                    .0
            }
            Self::RtlFastPath => rtl_fastpath_nic(cfg, Capacities::Firmware, DataWidth::W512)
                .expect("the RTL fast path"),
            Self::Soc => SocNic::new(&default_image(), cfg.mac, cfg.gid(), None, false)
                .expect("the SoC model"),
        };
        Nic { model }
    }
}

/// Moves frames between two NICs, both ways, until both are idle.
#[allow(dead_code)] // qp_scale paces its frames itself
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
