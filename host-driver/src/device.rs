//! The device boundary: everything the driver sees of a NIC. The NIC models that sit
//! behind it (the firmware runtime over the software or Verilated datapath, on a Linux
//! link, ...) live in the `roce-device` crate; the driver knows none of them.

use crate::memory::HostMemory;

/// What the driver needs of a NIC: its BAR (a window of 32-bit registers, laid out as
/// `roce_abi::reg` says), the host memory it reaches by DMA, and a way to let it make
/// progress while the driver waits for it. The verbs use this and nothing else.
pub trait Device {
    /// Reads a 32-bit register of the BAR.
    fn read_reg(&self, offset: u32) -> u32;
    /// Writes a 32-bit register (a doorbell, or configuration). The device applies the
    /// ABI's access rules (read-only registers ignore it, `EVENT_STATUS` is
    /// write-one-to-clear).
    fn write_reg(&self, offset: u32, value: u32);
    /// The host memory the device reaches by DMA.
    fn memory(&self) -> &HostMemory;
    /// Gives the device a chance to run: a model steps its firmware, a device on a real
    /// link may wait a little for the wire.
    fn progress(&self);
}
