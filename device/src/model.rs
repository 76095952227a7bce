//! What a harness (a test, the simulated fabric of `roce-testbed`) drives on a NIC model,
//! beside the [`Device`] boundary the driver uses.

use roce_core::dcb::Priorities;
use roce_core::engine::{DcbConfig, PortConfig};
use roce_host::Device;

/// A NIC model: the boundary the driver sees, plus the model's clock and its Ethernet
/// port. Nothing here reads a clock: the harness sets the time, then polls.
pub trait NicModel: Device {
    /// Sets the model's clock in nanoseconds (a time before the current one is ignored).
    fn set_time(&self, now: u64);
    /// The model's clock.
    fn now(&self) -> u64;
    /// Does all pending work once; true if anything happened.
    fn poll(&self) -> bool;
    /// Polls until nothing is left to do now.
    fn run_until_idle(&self) {
        while self.poll() {}
    }
    /// When a timer of the NIC is next due, if one is armed.
    fn poll_timeout(&self) -> Option<u64>;
    /// A frame arrives from the wire (an Ethernet frame without FCS). The model may act
    /// on it at once or at its next poll.
    fn receive_frame(&self, frame: &[u8]);
    /// The next frame the NIC puts on the wire, written into `buf`: its length, or `None`
    /// when it has nothing to send now.
    fn transmit_frame(&self, buf: &mut [u8]) -> Option<usize>;
    /// The port's configuration as it stands now (the host changes it through the ABI):
    /// what a harness modelling the NIC's MAC needs (its address for pause frames, the
    /// PFC priorities).
    fn port_config(&self) -> PortConfig;
    /// The port's DCB settings ([`NicModel::port_config`]'s `dcb`), which a harness
    /// reads for every frame: a model may give them without copying the whole port
    /// configuration (its GID table).
    fn dcb(&self) -> DcbConfig {
        self.port_config().dcb
    }
    /// QP contexts read from and written back to host memory so far (the context
    /// cache's misses and evictions, `docs/scale.md`): the DMA a harness charges time
    /// for, as a bus analyser on the NIC's host link would see it. A model that keeps
    /// every QP on chip makes none.
    fn context_dma(&self) -> (u64, u64) {
        (0, 0)
    }
    /// [`NicModel::transmit_frame`] for a port with a transmit queue per 802.1p priority:
    /// no frame of a priority in `blocked` (paused by the link partner, or its queue
    /// full; priorities by the port's `DcbConfig::map`), the others go on. A model that
    /// builds frames ahead of
    /// the port (a datapath queue, the SoC) cannot hold them back per priority: the
    /// default ignores `blocked` and the harness must queue what it cannot send yet.
    fn transmit_frame_except(&self, buf: &mut [u8], blocked: Priorities) -> Option<usize> {
        let _ = blocked;
        self.transmit_frame(buf)
    }
    /// Whether [`NicModel::transmit_frame_except`] with `blocked` may give a frame: false
    /// only where it would give none and change nothing a harness sees, so that the
    /// harness may skip the call. The default says yes.
    fn may_transmit_except(&self, blocked: Priorities) -> bool {
        let _ = blocked;
        true
    }
}
