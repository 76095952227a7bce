//! The RNIC datapath RTL (`rtl/*.sv`), Verilated by `build.rs` at two bus
//! widths (64 and 512 bits) and driven from Rust through a `cxx` bridge.
//!
//! * [`RtlDatapath`]: whole frames in, verdicts out ([`RxVerdict`]: the
//!   metadata record, the payload bytes, the error), and TX ICRC insertion.
//! * [`RtlSim`]: the cycle level: push beats or frames, [`RtlSim::tick`],
//!   pull metadata, payload packets and TX frames; random idle cycles and
//!   back-pressure ([`Shaping`]); FST waveforms.
//! * [`FpSim`]: the RC fast path (`docs/fastpath.md`) at the cycle level: tables,
//!   descriptors, events, the wire and a DMA engine over host memory.
//! * [`DcbSim`]: the port's DCB block (PFC pause timers and generation, priority queues
//!   scheduled by ETS) at the cycle level, against the model `roce_core::dcb`.
//! * [`RtlPort`]: the RTL as the firmware runtime's `Datapath`, in front of any port.
//! * [`FpPort`]: the RTL fast path as the firmware runtime's `Datapath` and `FastPath`.
//! * [`meta`]: the metadata record layout and the error codes, shared with
//!   `rtl/roce_rx_pkg.sv` (a test keeps the two in step).
//!
//! Built without Verilator, the crate still compiles (`cfg(roce_rtl_unavailable)`):
//! [`rtl_available`] is false and every constructor returns
//! [`SimError::Unavailable`].
#![cfg_attr(roce_rtl_unavailable, allow(dead_code, unused_imports))]

/// `open_trace` and `close_trace` of a Verilated model's driver (`RtlSim`, `FpSim`,
/// `DcbSim`): the same two calls on its `inner` cxx handle. `$vis` is `open_trace`'s
/// visibility.
macro_rules! trace_methods {
    ($($vis:tt)*) => {
        /// Writes an FST waveform of every following cycle to `path`.
        #[cfg(not(roce_rtl_unavailable))]
        $($vis)* fn open_trace(&mut self, path: &Path) -> Result<(), SimError> {
            let p = path
                .to_str()
                .ok_or_else(|| SimError::Model("trace path is not UTF-8".into()))?;
            self.inner
                .pin_mut()
                .open_trace(p)
                .map_err(|e| SimError::Model(e.to_string()))
        }

        /// Writes an FST waveform of every following cycle to `path`.
        #[cfg(roce_rtl_unavailable)]
        $($vis)* fn open_trace(&mut self, _path: &Path) -> Result<(), SimError> {
            match self.inner {}
        }

        /// Flushes and closes the waveform.
        #[cfg(not(roce_rtl_unavailable))]
        pub fn close_trace(&mut self) {
            self.inner.pin_mut().close_trace();
        }

        /// Flushes and closes the waveform.
        #[cfg(roce_rtl_unavailable)]
        pub fn close_trace(&mut self) {
            match self.inner {}
        }
    };
}

pub mod datapath;
pub mod dcb;
pub mod fastpath;
#[cfg(not(roce_rtl_unavailable))]
mod ffi;
mod fp_params;
pub mod fp_port;
pub mod meta;
pub mod port;
pub mod sim;
pub mod soc;
#[cfg(not(roce_soc_unavailable))]
mod soc_ffi;

pub use datapath::{RtlDatapath, RxVerdict, TRACE_DIR_ENV};
pub use dcb::{DcbCounters, DcbCycle, DcbLockstep, DcbRegs, DcbSim};
pub use fastpath::{
    FpSim, FpTimeline, Table, ACCESSED_WORD, CQW_CQS, CQW_PI_WORD, CQW_RECV_CQ,
    CQW_RECV_WRID_HI_WORD, CQW_RECV_WRID_LO_WORD, CQW_RING_WORD, CQW_SEND_CQ_WORD,
};
pub use fp_params::FP_CTX_ENTRIES;
pub use fp_port::FpPort;
pub use meta::{L3Kind, RxError, RxMeta};
pub use port::{RtlPort, RtlPortCounters};
pub use sim::{rtl_available, Beat, DataWidth, RtlSim, Shaping, SimError, Timed, Timeline};
pub use soc::{soc_available, FirmwareStats, Soc, SocError};
