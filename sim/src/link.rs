//! Point-to-point links: rate, propagation delay, and seeded faults per direction.
//!
//! Timing model. A frame of `len` bytes (without FCS; shorter frames are padded to the
//! 60-byte minimum) occupies the wire for `len + 24` bytes: the 4-byte FCS, the 7-byte
//! preamble and 1-byte start-of-frame delimiter, and the 12-byte minimum inter-frame
//! gap. Its serialization time is `(len + 24) * 8 / rate` seconds. The transmitter's
//! bit clock is exact: a frame that starts while the previous one is still going out
//! ends at `ceil(exact end)` nanoseconds, where the exact end accumulates from the start
//! of the busy period, so a long train at 100 Gb/s loses no rate to rounding. The last
//! bit arrives `delay` nanoseconds after it leaves (store-and-forward: receivers see a
//! frame when its last bit is in).

use crate::queue::Nanos;
use crate::rng::Rng;

/// Bytes a frame occupies on the wire beyond the frame without FCS: FCS 4 + preamble
/// and SFD 8 + inter-frame gap 12.
pub const WIRE_OVERHEAD: usize = 24;
/// Minimum frame length without FCS (64 with it); shorter frames are padded on the wire.
pub const MIN_FRAME_LEN: usize = 60;

/// Faults injected on one direction of a link, each an independent per-frame probability.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// The frame vanishes (it still occupies the transmitter).
    pub loss: f64,
    /// One uniformly chosen bit of the frame is flipped. The FCS is not modelled, so the
    /// corrupted frame is delivered: the receiver's ICRC / checksum checks must catch it.
    pub corrupt: f64,
    /// The frame is delivered twice.
    pub duplicate: f64,
    /// The frame is held back by an extra delay uniform in
    /// `1..=reorder_max_delay_ns`, so frames behind it may overtake it.
    pub reorder: f64,
    pub reorder_max_delay_ns: Nanos,
}

/// A bidirectional link's parameters. The two directions share rate and delay; faults
/// are set per direction (`a_to_b` is from the first endpoint given to
/// `Fabric::connect`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    pub rate_bps: u64,
    pub delay_ns: Nanos,
    pub a_to_b: Faults,
    pub b_to_a: Faults,
}

impl LinkConfig {
    /// A fault-free link.
    pub fn new(rate_bps: u64, delay_ns: Nanos) -> Self {
        assert!(rate_bps > 0, "a link needs a non-zero rate");
        Self {
            rate_bps,
            delay_ns,
            a_to_b: Faults::default(),
            b_to_a: Faults::default(),
        }
    }

    /// The same link seen from its other end (the fault directions swapped).
    pub fn reversed(self) -> Self {
        Self {
            a_to_b: self.b_to_a,
            b_to_a: self.a_to_b,
            ..self
        }
    }

    /// The same faults in both directions.
    pub fn with_faults(self, faults: Faults) -> Self {
        Self {
            a_to_b: faults,
            b_to_a: faults,
            ..self
        }
    }
}

/// Per-direction link counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkCounters {
    /// Frames put on the wire, and their bytes (without FCS).
    pub frames: u64,
    pub bytes: u64,
    pub lost: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    /// Frames held back by an extra delay (they may or may not have been overtaken).
    pub reordered: u64,
}

/// What the faults did to one frame.
pub(crate) struct Fate {
    pub lost: bool,
    /// Bit index to flip.
    pub corrupt_bit: Option<usize>,
    pub duplicate: bool,
    pub extra_delay: Nanos,
}

/// One direction of a link: its transmitter clock, faults, random stream and counters.
pub(crate) struct Direction {
    pub rate_bps: u64,
    pub delay_ns: Nanos,
    pub faults: Faults,
    pub rng: Rng,
    pub counters: LinkCounters,
    /// When the last frame's last bit leaves (rounded up to a nanosecond).
    tx_end: Nanos,
    /// `tx_end * rate - exact_end * rate`, in bit-nanoseconds (0 <= slack < rate): how
    /// far the rounded end is ahead of the exact one.
    slack: u64,
    /// The last frame length and its `bits * 1e9 / rate` as quotient and remainder:
    /// streams repeat one length, and this spares a 64-bit division per frame.
    last: (usize, u64, u64),
}

impl Direction {
    pub fn new(rate_bps: u64, delay_ns: Nanos, faults: Faults, rng: Rng) -> Self {
        Self {
            rate_bps,
            delay_ns,
            faults,
            rng,
            counters: LinkCounters::default(),
            tx_end: 0,
            slack: 0,
            last: (usize::MAX, 0, 0),
        }
    }

    /// Starts serializing a frame of `len` bytes at `now`; returns when its last bit
    /// leaves.
    pub fn serialize(&mut self, now: Nanos, len: usize) -> Nanos {
        if now > self.tx_end {
            // The wire was idle: a new busy period starts on a whole nanosecond.
            self.tx_end = now;
            self.slack = 0;
        }
        if self.last.0 != len {
            let bits = (len.max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64 * 8;
            let need = bits * 1_000_000_000; // bit-nanoseconds on the wire
            self.last = (len, need / self.rate_bps, need % self.rate_bps);
        }
        // The frame needs q * rate + r bit-ns; `slack` of them are already covered by
        // the rounding up of the previous end.
        let (_, q, r) = self.last;
        if r >= self.slack {
            let extra = r - self.slack;
            let round_up = u64::from(extra > 0);
            self.tx_end += q + round_up;
            self.slack = round_up * self.rate_bps - extra;
        } else if q > 0 {
            self.tx_end += q;
            self.slack -= r;
        } else {
            // Shorter than the slack: ends within the current nanosecond.
            self.slack -= r;
        }
        self.counters.frames += 1;
        self.counters.bytes += len as u64;
        self.tx_end
    }

    /// Draws the faults for one frame of `len` bytes and counts them.
    #[inline]
    pub fn fate(&mut self, len: usize) -> Fate {
        let f = self.faults;
        if f == Faults::default() {
            return Fate {
                lost: false,
                corrupt_bit: None,
                duplicate: false,
                extra_delay: 0,
            };
        }
        let rng = &mut self.rng;
        let mut fate = Fate {
            lost: rng.chance(f.loss),
            corrupt_bit: None,
            duplicate: false,
            extra_delay: 0,
        };
        if fate.lost {
            self.counters.lost += 1;
            return fate;
        }
        if len > 0 && rng.chance(f.corrupt) {
            fate.corrupt_bit = Some(rng.below(len as u64 * 8) as usize);
            self.counters.corrupted += 1;
        }
        if rng.chance(f.duplicate) {
            fate.duplicate = true;
            self.counters.duplicated += 1;
        }
        if f.reorder_max_delay_ns > 0 && rng.chance(f.reorder) {
            fate.extra_delay = 1 + rng.below(f.reorder_max_delay_ns);
            self.counters.reordered += 1;
        }
        fate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(rate: u64) -> Direction {
        Direction::new(rate, 0, Faults::default(), Rng::new(0))
    }

    #[test]
    fn a_train_keeps_the_exact_rate() {
        // 1000-byte frames at 100 Gb/s: 1024 * 8 / 100 = 81.92 ns each.
        let mut d = dir(100_000_000_000);
        let ends: Vec<Nanos> = (0..100).map(|_| d.serialize(0, 1000)).collect();
        for (i, &end) in ends.iter().enumerate() {
            let exact_ps = (i as u64 + 1) * 81_920;
            assert_eq!(end, exact_ps.div_ceil(1000), "frame {i}");
        }
        assert_eq!(ends[99], 8192);
    }

    #[test]
    fn an_idle_wire_restarts_on_the_next_call_time() {
        let mut d = dir(100_000_000_000);
        assert_eq!(d.serialize(0, 1000), 82);
        assert_eq!(d.serialize(500, 1000), 582);
        // Runts count as 60 bytes: (60 + 24) * 8 / 10 Gb/s = 67.2 ns.
        let mut d = dir(10_000_000_000);
        assert_eq!(d.serialize(0, 14), 68);
    }
}
