//! The software datapath: what the RTL does in hardware, done with roce-core. On receive
//! a frame passes when `wire::parse` accepts it (structure, lengths, ICRC); what fails is
//! dropped and counted by error kind, as the hardware parser's error codes are. Frames
//! to transmit already carry their ICRC (the engine's `emit` computes it).

use crate::hal::Datapath;
use crate::runtime::FRAME_BUF;
use heapless::{Deque, Vec};
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
pub struct Loopback<const FRAMES: usize> {
    queue: Deque<Vec<u8, FRAME_BUF>, FRAMES>,
    /// Receive checks.
    pub rx: RxCheck,
}

impl<const FRAMES: usize> Default for Loopback<FRAMES> {
    fn default() -> Self {
        Self {
            queue: Deque::new(),
            rx: RxCheck::default(),
        }
    }
}

impl<const FRAMES: usize> Datapath for Loopback<FRAMES> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        let Ok(v) = Vec::from_slice(frame) else {
            return false;
        };
        self.queue.push_back(v).is_ok()
    }

    fn can_transmit(&self) -> bool {
        !self.queue.is_full()
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        while let Some(frame) = self.queue.pop_front() {
            if self.rx.check(&frame) {
                let dst = buf.get_mut(..frame.len())?;
                dst.copy_from_slice(&frame);
                return Some(frame.len());
            }
        }
        None
    }

    fn verifies_icrc(&self) -> bool {
        true
    }
}
