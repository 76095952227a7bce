//! The NIC firmware proper: the runtime over the memory-mapped HAL of a soft core next
//! to the RNIC datapath ([`MmioHal`] at the board's `nic_mmio_base`), polling forever.
//! Logs go out through defmt-rtt (a RAM ring a debugger reads; it never blocks).
//! On a panic it sets `STATUS.fatal` for the host and stops.
//!
//! QEMU `virt` has no RNIC, so this binary builds for every board but only runs on
//! hardware (or an RTL simulation of the soft core with the datapath).

#![no_std]
#![no_main]

use defmt::{error, info};
use defmt_rtt as _;
use static_cell::StaticCell;

use roce_core::engine::PortConfig;
use roce_firmware::config::FirmwareNic;
use roce_firmware_image::mmio::MmioHal;
use roce_firmware_image::BOARD;

static NIC: StaticCell<FirmwareNic<MmioHal>> = StaticCell::new();

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    error!("panic: {}", defmt::Display2Format(info));
    // SAFETY: the board's MMIO base is the NIC block (board config); nothing else runs
    // after this point, so this second instance cannot race the first.
    let hal = unsafe { MmioHal::new(BOARD.nic_mmio_base as usize) };
    hal.set_fatal();
    loop {
        riscv::asm::wfi();
    }
}

#[riscv_rt::entry]
fn main() -> ! {
    // SAFETY: the board's MMIO base is the NIC block (board config), 4-byte aligned, and
    // this is the only instance while the firmware runs.
    let hal = unsafe { MmioHal::new(BOARD.nic_mmio_base as usize) };
    let (mac, gid) = hal.port_address();
    info!(
        "roce-firmware on board {=str}: NIC MMIO at {=u32:#x}, MAC {=[u8]:02x}",
        BOARD.name,
        BOARD.nic_mmio_base,
        mac[..]
    );
    let nic = NIC.init_with(|| FirmwareNic::new(hal, PortConfig::new(mac, gid)));
    loop {
        nic.poll();
    }
}
