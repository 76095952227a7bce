//! The firmware image: what the riscv32imac binaries share.
//!
//! * [`boards`] / [`BOARD`]: the memory map and NIC MMIO base the image is linked for
//!   (cargo feature `board-softcore` or `board-ecp5-85f`, else QEMU `virt`).
//! * [`clock`]: nanoseconds and retired instructions from the CSRs.
//! * [`ram_hal`]: a [`roce_firmware::hal::Hal`] over RAM (register file, host memory and
//!   datapath in the image): the QEMU self-test's platform.
//! * [`mmio`]: the [`roce_firmware::hal::Hal`] a soft core with the RNIC datapath uses
//!   (volatile MMIO at [`Board::nic_mmio_base`]). QEMU `virt` has no such device.
//! * [`stack`]: the stack the firmware has used, measured (paint and probe).
//!
//! The binaries: `selftest` (the default `cargo run`: boots in QEMU, drives the NIC
//! through the host ABI, exits through semihosting) and `firmware` (the NIC firmware
//! proper, over [`mmio::MmioHal`], logging through the NIC block's log channel).

#![no_std]

pub mod boards;
pub mod clock;
pub mod mmio;
pub mod ram_hal;
pub mod stack;

pub use boards::{Board, ClockSource};

/// The board this image is built for.
#[cfg(feature = "board-softcore")]
pub const BOARD: Board = boards::SOFTCORE;
/// The board this image is built for.
#[cfg(feature = "board-ecp5-85f")]
pub const BOARD: Board = boards::ECP5_85F;
/// The board this image is built for.
#[cfg(not(any(feature = "board-softcore", feature = "board-ecp5-85f")))]
pub const BOARD: Board = boards::QEMU_VIRT;

/// Logs where and why the core trapped (`mcause`, `mepc`, `mtval`): every binary treats
/// any trap as fatal and says so before it stops.
pub fn log_trap() {
    defmt::error!(
        "exception: mcause {=usize:#x} mepc {=usize:#x} mtval {=usize:#x}",
        riscv::register::mcause::read().bits(),
        riscv::register::mepc::read(),
        riscv::register::mtval::read()
    );
}
