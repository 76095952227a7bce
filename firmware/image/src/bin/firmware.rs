//! The NIC firmware proper: the runtime over the memory-mapped HAL of a soft core next
//! to the RNIC datapath ([`MmioHal`] at the board's `nic_mmio_base`), polling forever.
//! Logs go out through the NIC block's log channel (`mmio::log_write`, a byte stream
//! the board carries off chip; the SoC simulation collects it for `defmt-print`).
//! On a panic or a CPU exception it logs, sets `STATUS.fatal` for the host and stops.
//!
//! It runs on the SoC (`hdl-sim/rtl/soc/nic_soc.sv`, board `softcore`): no AMO
//! instructions (that core has LR/SC only; `make-images.sh` checks), so nothing here
//! uses an atomic read-modify-write. QEMU `virt` has no RNIC, so on that board this
//! binary builds but does not run.

#![no_std]
#![no_main]

use core::cell::UnsafeCell;

use defmt::{error, info};

use roce_core::engine::PortConfig;
use roce_firmware::config::FirmwareNic;
use roce_firmware_image::mmio::{self, LoopStats, MmioHal, PollCounts, PollWork};
use roce_firmware_image::{clock, stack, BOARD};

/// State that only one context at a time touches, by the rule stated where it is used.
struct Exclusive<T>(UnsafeCell<T>);

// SAFETY: one hart; every access says why it is the only one at that moment.
unsafe impl<T> Sync for Exclusive<T> {}

/// The NIC, built at compile time: its initial bytes are part of the image (`.data`),
/// so it never passes through the stack (built at run time and returned, it would: over
/// 100 KiB, more than the ECP5 board's RAM leaves; see `src/boards.rs`). `main` gives it
/// the port's addresses and boots it.
static NIC: Exclusive<FirmwareNic<MmioHal>> = Exclusive(UnsafeCell::new(FirmwareNic::idle(
    // SAFETY: the board's MMIO base is the NIC block (board config), 4-byte aligned, and
    // this is the only instance while the firmware runs (`fatal` makes the other, and
    // never returns).
    unsafe { MmioHal::new(BOARD.nic_mmio_base as usize) },
    // Until `main` reads the port's addresses.
    PortConfig::new([0; 6], [0; 16]),
)));

/// The defmt logger over the log channel: frames are encoded (rzCOBS) and written a
/// byte at a time, inside a critical section.
#[defmt::global_logger]
struct Logger;

struct LoggerState {
    encoder: defmt::Encoder,
    taken: bool,
    restore: critical_section::RestoreState,
}

static LOGGER: Exclusive<LoggerState> = Exclusive(UnsafeCell::new(LoggerState {
    encoder: defmt::Encoder::new(),
    taken: false,
    restore: critical_section::RestoreState::invalid(),
}));

fn log_bytes(bytes: &[u8]) {
    // SAFETY: the board's MMIO base is the NIC block; only the logger calls this, and
    // it holds the critical section.
    unsafe { mmio::log_write(BOARD.nic_mmio_base as usize, bytes) }
}

// SAFETY: `acquire` takes a critical section before touching the state and `release`
// gives it back; defmt calls `write` and `release` only between the two.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        // SAFETY: released in `release`.
        let restore = unsafe { critical_section::acquire() };
        // SAFETY: inside the critical section on the only hart: nobody else is here.
        let state = unsafe { &mut *LOGGER.0.get() };
        if state.taken {
            // defmt was called from inside defmt (a panic while logging): drop it.
            // SAFETY: the section taken just above.
            unsafe { critical_section::release(restore) };
            return;
        }
        state.taken = true;
        state.restore = restore;
        state.encoder.start_frame(log_bytes);
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: defmt's contract: between `acquire` and `release`.
        let state = unsafe { &mut *LOGGER.0.get() };
        state.encoder.end_frame(log_bytes);
        state.taken = false;
        // SAFETY: the state `acquire` saved.
        unsafe { critical_section::release(state.restore) };
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: defmt's contract: between `acquire` and `release`.
        let state = unsafe { &mut *LOGGER.0.get() };
        state.encoder.write(bytes, log_bytes);
    }
}

/// Tells the host the firmware is gone, and stops.
fn fatal() -> ! {
    // SAFETY: the board's MMIO base is the NIC block; nothing else runs after this
    // point, so this second instance cannot race the first.
    let hal = unsafe { MmioHal::new(BOARD.nic_mmio_base as usize) };
    hal.set_fatal();
    loop {
        riscv::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    error!("panic: {}", defmt::Display2Format(info));
    fatal()
}

#[export_name = "ExceptionHandler"]
fn exception_handler(_frame: &riscv_rt::TrapFrame) -> ! {
    roce_firmware_image::log_trap();
    fatal()
}

#[riscv_rt::entry]
fn main() -> ! {
    let mut stack = stack::paint();
    // SAFETY: `main` runs once and is the only user of NIC: this is the one reference.
    let nic = unsafe { &mut *NIC.0.get() };
    let (mac, gid) = nic.hal().port_address();
    info!(
        "roce-firmware on board {=str}: NIC MMIO at {=u32:#x}, MAC {=[u8]:02x}",
        BOARD.name,
        BOARD.nic_mmio_base,
        mac[..]
    );
    if nic.set_port(PortConfig::new(mac, gid)).is_err() {
        // Only with QPs, and none exist before the boot.
        error!("the port's addresses were refused");
        fatal();
    }
    nic.boot();
    nic.hal().write_boot_cycles(clock::cycles() as u32);
    info!("ready");
    // What each busy poll costs, from the core's own counters, for the host to read.
    let mut stats = LoopStats {
        next_timeout: u64::MAX,
        ..LoopStats::default()
    };
    nic.hal().write_stats(&stats);
    // The largest busy poll since the last command (issue 14's "any single packet"),
    // and the counts that say what each poll handled.
    let mut largest = 0u32;
    let mut counts = PollCounts::of(nic.counters());
    nic.hal().write_largest_poll(0, 0, &PollWork::default());
    let mut idle_polls = 0u32;
    let mut stack_used = 0;
    loop {
        let (c0, i0) = (clock::cycles(), clock::instret());
        if nic.poll() {
            let (c1, i1) = (clock::cycles(), clock::instret());
            stats.busy_polls = stats.busy_polls.wrapping_add(1);
            stats.busy_cycles = stats.busy_cycles.wrapping_add(c1.wrapping_sub(c0));
            stats.busy_instret = stats.busy_instret.wrapping_add(i1.wrapping_sub(i0));
            let c = nic.counters();
            stats.frames_tx = c.frames_tx as u32;
            stats.frames_rx = c.frames_rx as u32;
            let now = PollCounts::of(c);
            let (cycles, instret) = (c1.wrapping_sub(c0) as u32, i1.wrapping_sub(i0) as u32);
            if now.commands != counts.commands {
                largest = 0;
                nic.hal().write_largest_poll(0, 0, &PollWork::default());
            } else if instret > largest {
                largest = instret;
                nic.hal()
                    .write_largest_poll(instret, cycles, &now.since(&counts));
            }
            counts = now;
            stats.next_timeout = nic.poll_timeout().unwrap_or(u64::MAX);
            nic.hal().write_stats(&stats);
        } else {
            idle_polls = idle_polls.wrapping_add(1);
            nic.hal().write_idle_polls(idle_polls);
            let used = stack.step();
            if used != stack_used {
                stack_used = used;
                nic.hal().write_stack_used(used);
            }
        }
    }
}
