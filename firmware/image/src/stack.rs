//! How much of its stack the firmware has used since reset, measured rather than
//! estimated: [`paint`] fills the free stack with a pattern at boot, and a
//! [`StackProbe`] then finds the lowest word the stack has overwritten, a few words per
//! call, so the main loop can run it on every idle poll at a fixed small cost. A
//! stack frame that happens to store the pattern itself at its lowest word would read
//! as unused; the figure is otherwise exact.
//!
//! The stack is riscv-rt's: from `__estack` (the end of `.bss`, its lowest address) up
//! to `__sstack` (the top of RAM), growing down.

use core::ptr;

/// What [`paint`] writes.
const PAINT: u32 = 0x5AC5_5AC5;
/// Words a [`StackProbe::step`] reads.
const WORDS_PER_STEP: usize = 64;
/// Bytes below the painting function's own stack pointer it leaves alone.
const MARGIN: usize = 64;

extern "C" {
    static __estack: u32;
    static __sstack: u32;
}

fn bounds() -> (usize, usize) {
    // Linker symbols: only their addresses are taken, nothing is read.
    (
        ptr::addr_of!(__estack) as usize,
        ptr::addr_of!(__sstack) as usize,
    )
}

/// Paints the stack below the caller's frame; returns a probe whose figure starts at
/// what the stack holds now.
#[inline(never)]
pub fn paint() -> StackProbe {
    let (bottom, top) = bounds();
    let sp: usize;
    // SAFETY: reads the stack pointer into a register; no memory access.
    unsafe { core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack)) };
    let end = sp.saturating_sub(MARGIN) & !3;
    let mut at = bottom;
    while at < end {
        // SAFETY: `[bottom, end)` is RAM reserved for the stack (riscv-rt's `.stack`),
        // below this function's frame: no live object is there (one hart, interrupts
        // off at boot), and the address is 4-byte aligned.
        unsafe { ptr::write_volatile(at as *mut u32, PAINT) };
        at += 4;
    }
    StackProbe {
        bottom,
        top,
        cursor: bottom,
        deepest: end,
    }
}

/// Finds, a few words per [`StackProbe::step`], the lowest stack word that no longer
/// holds the paint: scanning up from the bottom, the first such word is the deepest the
/// stack has been; then it starts again from the bottom.
#[derive(Debug)]
pub struct StackProbe {
    bottom: usize,
    top: usize,
    cursor: usize,
    deepest: usize,
}

impl StackProbe {
    /// Reads a few more words; returns the bytes of stack used since reset, as far as
    /// measured so far.
    pub fn step(&mut self) -> u32 {
        for _ in 0..WORDS_PER_STEP {
            if self.cursor >= self.deepest {
                self.cursor = self.bottom;
                break;
            }
            // SAFETY: `cursor` is a 4-byte aligned address in the stack's RAM below
            // every live frame (below the deepest the stack has reached); reading it
            // observes plain memory.
            let word = unsafe { ptr::read_volatile(self.cursor as *const u32) };
            if word != PAINT {
                self.deepest = self.cursor;
                self.cursor = self.bottom;
                break;
            }
            self.cursor += 4;
        }
        (self.top - self.deepest) as u32
    }
}
