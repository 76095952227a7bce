//! The cxx bridge to the Verilated SoC (C++ side: `csrc/soc_model.cpp`). Host memory
//! stays on this side: the C++ clock loop calls back into [`SocHost`] for every DMA
//! request.

use crate::soc::SocHost;

#[cxx::bridge(namespace = "roce_hdl")]
pub(crate) mod bridge {
    extern "Rust" {
        type SocHost;
        /// Reads `len` (1..=4) bytes at `addr` into lanes 0.. of `data`; false: no
        /// memory there.
        fn dma_read(self: &mut SocHost, addr: u64, len: u32, data: &mut u32) -> bool;
        /// Writes lanes 0..`len` of `data` at `addr`; false: no memory there.
        fn dma_write(self: &mut SocHost, addr: u64, len: u32, data: u32) -> bool;
        /// What the SoC's DCB block showed during a cycle (while `watch_dcb` is on).
        fn dcb_cycle(self: &mut SocHost, out: &DcbOut);
    }

    unsafe extern "C++" {
        include!("roce-hdl-sim/src/ffi.rs.h");
        type DcbOut = crate::ffi::bridge::DcbOut;
    }

    unsafe extern "C++" {
        include!("roce-hdl-sim/csrc/soc_model.h");

        type SocModel;

        fn new_soc_model(
            image: &str,
            mac: &[u8],
            gid: &[u8],
            trace: bool,
            fastpath: bool,
        ) -> Result<UniquePtr<SocModel>>;
        fn run(self: Pin<&mut SocModel>, cycles: u64, host: &mut SocHost);
        fn reg_read(self: Pin<&mut SocModel>, offset: u32, host: &mut SocHost) -> Result<u32>;
        fn reg_write(self: Pin<&mut SocModel>, offset: u32, value: u32, host: &mut SocHost);
        fn push_rx(self: Pin<&mut SocModel>, frame: &[u8]);
        fn rx_queued(self: &SocModel) -> usize;
        fn tx_queued(self: &SocModel) -> usize;
        fn pop_tx(self: Pin<&mut SocModel>, frame: &mut Vec<u8>) -> bool;
        fn take_log(self: Pin<&mut SocModel>, out: &mut Vec<u8>);
        fn cycles(self: &SocModel) -> u64;
        fn open_trace(self: Pin<&mut SocModel>, path: &str) -> Result<()>;
        fn watch_dcb(self: Pin<&mut SocModel>, on: bool);
    }
}
