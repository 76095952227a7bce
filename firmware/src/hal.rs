//! The hardware abstraction the runtime runs on: the register file the host sees, DMA to
//! host memory, the datapath, and a clock. The soft-core binary implements it with MMIO;
//! the host harness with plain memory and the software or RTL datapath.

use roce_core::memory::Dma;

/// Where frames enter and leave the NIC.
///
/// A datapath may check and strip what it handles in hardware (the RTL checks the ICRC
/// on receive and computes it on transmit), but it hands the runtime whole Ethernet
/// frames without FCS either way.
pub trait Datapath {
    /// Queues a complete frame for the wire; `false` (frame not taken) when the transmit
    /// queue is full, so the runtime tries again later: nothing is dropped here.
    fn transmit(&mut self, frame: &[u8]) -> bool;
    /// Whether `transmit` would take a frame now.
    fn can_transmit(&self) -> bool;
    /// Copies the next received frame into `buf` and returns its length.
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize>;
    /// Whether every frame `receive` returns has had its ICRC verified by the datapath
    /// (as the RTL does in hardware), so the engine need not compute it again.
    fn verifies_icrc(&self) -> bool {
        false
    }
}

/// Everything the runtime needs from the platform.
pub trait Hal {
    /// Host memory.
    type Dma: Dma;
    /// The frame path.
    type Datapath: Datapath;

    /// Reads a register of the host-visible window (doorbells the host wrote).
    fn reg_read(&mut self, offset: u32) -> u32;
    /// Writes a register of the host-visible window (status, indices, events).
    fn reg_write(&mut self, offset: u32, value: u32);
    /// Host memory, by DMA.
    fn dma(&mut self) -> &mut Self::Dma;
    /// The datapath.
    fn datapath(&mut self) -> &mut Self::Datapath;
    /// DMA and the datapath at once (the engine moves payload while framing).
    fn split(&mut self) -> (&mut Self::Dma, &mut Self::Datapath);
    /// Nanoseconds since an arbitrary epoch; never decreases.
    fn now(&mut self) -> u64;
    /// Whether a doorbell may have rung since the last call (and forget it). Hardware
    /// latches doorbell writes in a pending bit; a HAL without one answers true, and the
    /// runtime then reads every doorbell register on each poll.
    fn take_doorbells(&mut self) -> bool {
        true
    }
}
