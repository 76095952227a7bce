//! Time and instruction counts from the RISC-V counters.

use crate::{ClockSource, BOARD};

/// Nanoseconds per tick of the board's clock; the board's rate must divide 1 GHz.
const NS_PER_TICK: u64 = {
    let hz = match BOARD.clock {
        ClockSource::TimeCsr { hz } | ClockSource::Mcycle { hz } => hz as u64,
    };
    assert!(
        hz > 0 && 1_000_000_000 % hz == 0,
        "clock rate must divide 1 GHz"
    );
    1_000_000_000 / hz
};

/// Nanoseconds since reset, from the board's clock (never decreases).
#[inline]
pub fn now_ns() -> u64 {
    let ticks = match BOARD.clock {
        ClockSource::TimeCsr { .. } => riscv::register::time::read64(),
        ClockSource::Mcycle { .. } => riscv::register::mcycle::read64(),
    };
    ticks.wrapping_mul(NS_PER_TICK)
}

/// Clock cycles since reset (`mcycle`).
#[inline]
pub fn cycles() -> u64 {
    riscv::register::mcycle::read64()
}

/// Instructions retired since reset (`minstret`). Under QEMU this counts instructions
/// only with `-icount` (the runner passes `-icount shift=0`); without it QEMU 7.2 returns
/// host ticks.
#[inline]
pub fn instret() -> u64 {
    riscv::register::minstret::read64()
}
