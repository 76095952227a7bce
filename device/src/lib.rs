//! roce-device: the NIC models behind the host driver's device boundary
//! ([`roce_host::Device`]: BAR registers, host memory by DMA, progress). The driver knows
//! none of them; a harness builds one, hands it to `roce_host::Context::open`, and moves
//! its frames and its clock through [`NicModel`].
//!
//! * [`LocalNic`]: the firmware runtime (`roce_firmware::runtime::Nic`) compiled for the
//!   host, over a register file and the host's memory, with its frames either straight
//!   to and from the engine (the software datapath: [`LocalNic::new`]) or through a
//!   datapath model in front of frame queues ([`LocalNic::with_datapath`]).
//! * [`rtl`]: the same runtime over the Verilated datapath of `roce-hdl-sim`.
//! * [`RawNic`] (Linux): the same runtime on a real link through an `AF_PACKET` socket.
//! * [`soc::SocNic`]: the firmware image on the SoC RTL (VexRiscv soft core beside the
//!   datapath, `hdl-sim/rtl/soc/`), Verilated as one model.
//!
//! Adding a model: implement [`roce_host::Device`] (what the driver sees) and
//! [`NicModel`] (what a harness drives: clock, polling, frames), and the verbs and ABI
//! suites of `host-driver/tests` and the simulated worlds of `roce-testbed` run on it.

mod local;
mod model;
mod port;
#[cfg(target_os = "linux")]
pub mod raw;
pub mod rtl;
pub mod soc;

pub use local::{Capacities, LocalNic};
pub use model::NicModel;
pub use port::{PortQueues, QueuePort};
#[cfg(target_os = "linux")]
pub use raw::{RawCounters, RawNic};
pub use soc::SocNic;
