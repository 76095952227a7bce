//! The software datapath: what the RTL does in hardware, done with roce-core. On receive
//! a frame passes when `wire::parse` accepts it (structure, lengths, ICRC); what fails is
//! dropped and counted by error kind, as the hardware parser's error codes are. Frames
//! to transmit already carry their ICRC (the engine's `emit` computes it).

use crate::hal::Datapath;
use crate::runtime::FRAME_BUF;
use roce_core::wire::{self, Error};

/// Receive-side checks and their counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCheck {
    /// Frames that passed.
    pub passed: u64,
    /// Frames dropped, by `wire::Error` kind (index into `Error::ALL_NAMES`).
    pub dropped: [u64; Error::ALL_NAMES.len()],
}

impl RxCheck {
    /// Checks one frame; true when it may go to the engine.
    pub fn check(&mut self, frame: &[u8]) -> bool {
        match wire::parse(frame) {
            Ok(_) => {
                self.passed += 1;
                true
            }
            Err(e) => {
                let i = Error::ALL_NAMES
                    .iter()
                    .position(|n| *n == e.name())
                    .unwrap_or(0);
                if let Some(c) = self.dropped.get_mut(i) {
                    *c += 1;
                }
                false
            }
        }
    }

    /// Frames dropped in all.
    pub fn total_dropped(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

/// A port looped back on itself: every transmitted frame is received again, after the
/// receive checks. The QEMU self-test connects two QPs of one NIC through it.
///
/// Frames wait in a ring of `FRAMES` fixed buffers and only their bytes are copied (a
/// queue of `heapless::Vec` frames moved the whole 4 KiB buffer in and out each time).
pub struct Loopback<const FRAMES: usize> {
    bufs: [[u8; FRAME_BUF]; FRAMES],
    lens: [usize; FRAMES],
    /// Slot of the oldest frame.
    head: usize,
    /// Frames waiting.
    count: usize,
    /// Receive checks.
    pub rx: RxCheck,
}

impl<const FRAMES: usize> Default for Loopback<FRAMES> {
    fn default() -> Self {
        Self {
            bufs: [[0; FRAME_BUF]; FRAMES],
            lens: [0; FRAMES],
            head: 0,
            count: 0,
            rx: RxCheck::default(),
        }
    }
}

impl<const FRAMES: usize> Datapath for Loopback<FRAMES> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        if !self.can_transmit() {
            return false;
        }
        let slot = (self.head + self.count) % FRAMES;
        let (Some(buf), Some(len)) = (self.bufs.get_mut(slot), self.lens.get_mut(slot)) else {
            return false;
        };
        let Some(dst) = buf.get_mut(..frame.len()) else {
            return false;
        };
        dst.copy_from_slice(frame);
        *len = frame.len();
        self.count += 1;
        true
    }

    fn can_transmit(&self) -> bool {
        self.count < FRAMES
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        while self.count > 0 {
            let slot = self.head;
            self.head = (self.head + 1) % FRAMES;
            self.count -= 1;
            let len = self.lens.get(slot).copied().unwrap_or(0);
            let frame = self
                .bufs
                .get(slot)
                .and_then(|b| b.get(..len))
                .unwrap_or(&[]);
            if self.rx.check(frame) {
                let dst = buf.get_mut(..len)?;
                dst.copy_from_slice(frame);
                return Some(len);
            }
        }
        None
    }

    fn verifies_icrc(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_a_bounded_fifo_that_drops_bad_frames() {
        let mut lb = Loopback::<2>::default();
        // Not RoCE: dropped by the receive checks, counted.
        assert!(lb.transmit(&[0u8; 60]));
        assert!(lb.transmit(&[1u8; 60]));
        assert!(!lb.can_transmit());
        assert!(!lb.transmit(&[2u8; 60]));
        let mut buf = [0u8; FRAME_BUF];
        assert_eq!(lb.receive(&mut buf), None);
        assert_eq!(lb.rx.total_dropped(), 2);
        assert!(lb.can_transmit());
        assert!(!lb.transmit(&[0u8; FRAME_BUF + 1]));
    }
}
