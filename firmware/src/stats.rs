//! The firmware's statistics window: what the main loop of a firmware image measures of
//! itself, published past the ABI's registers at offsets the host reads from its BAR.
//! The image writes it (`firmware/image/src/mmio.rs`); simulations of the SoC read it
//! (`roce_hdl_sim::soc`). Not part of the ABI: a host driver must not need it.

/// The firmware's statistics (offsets in the host window, past the ABI's registers):
/// the host reads them at the same offsets of its BAR. What the firmware measures of
/// itself with `mcycle` and `minstret`: the polls of its main loop that found work, what
/// they cost, and the frames they moved. Each 64-bit figure is two words, low first.
pub mod stat_reg {
    /// Polls of the main loop that did something (`Nic::poll` returned true).
    pub const BUSY_POLLS: u32 = 0x4000;
    /// Frames the runtime handed to the datapath (low 32 bits).
    pub const FRAMES_TX: u32 = 0x4004;
    /// Frames the runtime took from the datapath (low 32 bits).
    pub const FRAMES_RX: u32 = 0x4008;
    /// Polls of the main loop that found nothing to do: two of them after the host's
    /// last doorbell or frame tell a simulation the firmware has gone idle.
    pub const IDLE_POLLS: u32 = 0x400C;
    /// Cycles spent in busy polls (`mcycle`), low and high word.
    pub const BUSY_CYCLES: u32 = 0x4010;
    /// Instructions retired in busy polls (`minstret`), low and high word.
    pub const BUSY_INSTRET: u32 = 0x4018;
    /// Cycles from reset to the first poll (boot, including building the NIC).
    pub const BOOT_CYCLES: u32 = 0x4020;
    /// When the engine's next timer is due, ns of the board clock, low and high word
    /// (all ones: none armed): a simulation advances an idle SoC to then.
    pub const NEXT_TIMEOUT: u32 = 0x4028;
    /// Bytes of stack the firmware has used since reset (its deepest point, measured:
    /// the image paints the stack at boot and probes it while idle).
    pub const STACK_USED: u32 = 0x4030;
    /// Bytes of the statistics area.
    pub const LEN: u32 = 0x100;
}
