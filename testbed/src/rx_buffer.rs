//! A NIC's receive buffer and the PFC it generates (IEEE 802.1Qbb, roce-facts §8), for
//! [`crate::NicNode`].
//!
//! Model. Frames the link delivers wait in one FIFO of `capacity` bytes and leave it at
//! the NIC's processing rate `drain_bps` (a frame of `len` bytes takes `len * 8 /
//! drain_bps` after the previous one finished; the NIC is otherwise timeless, as
//! `NicNode` is). A frame that does not fit is dropped and counted. The bytes in the
//! buffer are counted per 802.1p priority (the frame's PCP, or its DSCP through the map);
//! when a lossless priority (one the NIC has PFC on for, set through the ABI's
//! MODIFY_DCB) holds more than `xoff` bytes the NIC sends an XOFF for it
//! with `pause_quanta`, refreshes it every half pause time while it stays above `xon`,
//! and sends an XON (quanta 0) once it is back to `xon`. PFC frames go out ahead of
//! everything else. This is the switch's ingress rule (`roce_sim::switch`) applied to a
//! NIC port; `capacity - xoff` is the headroom, which must hold what is still in flight
//! after the XOFF: about 2 x (link delay x rate) + 2 maximum frames. The XOFF/XON
//! decisions are the core's `dcb::PfcGen`, the model the NIC's DCB RTL
//! (`roce_dcb_top`) is checked against.

use roce_core::dcb::{PfcGen, PfcThresholds};
use roce_core::wire::ethernet::MacAddr;
use roce_sim::{Nanos, Priorities};
use std::collections::VecDeque;

/// The receive buffer's size, speed and PFC thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxBufferConfig {
    /// Bytes the buffer holds.
    pub capacity: u64,
    /// Rate at which the NIC takes frames out of it, bit/s.
    pub drain_bps: u64,
    /// XOFF when a lossless priority holds more than this many bytes.
    pub xoff: u64,
    /// XON when it is back to this many bytes or fewer (< `xoff`).
    pub xon: u64,
    /// Pause time of an XOFF, in quanta of 512 bit times.
    pub pause_quanta: u16,
}

impl RxBufferConfig {
    /// A buffer of `capacity` bytes drained at `drain_bps`, pausing with the longest
    /// pause (refreshed).
    pub fn new(capacity: u64, drain_bps: u64, xoff: u64, xon: u64) -> Self {
        assert!(
            xon < xoff && xoff <= capacity,
            "need XON < XOFF <= capacity"
        );
        Self {
            capacity,
            drain_bps,
            xoff,
            xon,
            pause_quanta: 0xFFFF,
        }
    }
}

/// What the receive buffer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxBufferCounters {
    /// Frames dropped because the buffer was full.
    pub dropped: u64,
    /// Most bytes held at once.
    pub max_bytes: u64,
    /// PFC frames sent.
    pub pause_frames_sent: u64,
    /// XOFF and XON requests sent, per priority.
    pub xoff_sent: [u64; 8],
    pub xon_sent: [u64; 8],
}

/// The buffer's state.
#[derive(Debug)]
pub struct RxBuffer {
    cfg: RxBufferConfig,
    frames: VecDeque<(Vec<u8>, u8)>,
    /// When the head frame has been processed.
    head_done: Option<Nanos>,
    total: u64,
    /// Bytes per priority, the pause state and what to announce.
    pfc: PfcGen,
    /// Link rate, for the pause time (from `link_up`).
    pub link_bps: u64,
    pub counters: RxBufferCounters,
}

impl RxBuffer {
    pub fn new(cfg: RxBufferConfig) -> Self {
        Self {
            cfg,
            frames: VecDeque::new(),
            head_done: None,
            total: 0,
            pfc: PfcGen::default(),
            link_bps: 0,
            counters: RxBufferCounters::default(),
        }
    }

    fn service_ns(&self, len: usize) -> Nanos {
        (len as u64 * 8 * 1_000_000_000).div_ceil(self.cfg.drain_bps.max(1))
    }

    /// The thresholds as `PfcGen` counts them (bytes beyond 4 GiB saturate).
    fn thresholds(&self) -> PfcThresholds {
        let bytes = |b: u64| u32::try_from(b).unwrap_or(u32::MAX);
        PfcThresholds {
            xoff: bytes(self.cfg.xoff),
            xon: bytes(self.cfg.xon),
            quanta: self.cfg.pause_quanta,
        }
    }

    /// A frame of priority `prio` arrived at `now`: queued, or dropped when full. The
    /// `lossless` priorities (the NIC's PFC setting) get XOFF when they fill up; the
    /// others are just dropped.
    pub fn push(&mut self, now: Nanos, frame: &[u8], prio: u8, lossless: Priorities) {
        let len = frame.len() as u64;
        if self.total + len > self.cfg.capacity {
            self.counters.dropped += 1;
            return;
        }
        self.total += len;
        self.counters.max_bytes = self.counters.max_bytes.max(self.total);
        if self.head_done.is_none() {
            self.head_done = Some(now + self.service_ns(frame.len()));
        }
        self.frames.push_back((frame.to_vec(), prio & 7));
        let t = self.thresholds();
        self.pfc.add(prio, frame.len() as u32, lossless, &t);
    }

    /// The next frame the NIC has finished taking in by `now`, if any.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Vec<u8>> {
        let done = self.head_done.filter(|&t| t <= now)?;
        let (frame, prio) = self.frames.pop_front()?;
        self.total -= frame.len() as u64;
        self.head_done = self
            .frames
            .front()
            .map(|(f, _)| done + self.service_ns(f.len()));
        let t = self.thresholds();
        // Leaving only ever releases a pause: the lossless set does not matter.
        self.pfc
            .remove(prio, frame.len() as u32, Priorities::NONE, &t);
        Some(frame)
    }

    /// Timers due at `now`: an XOFF to refresh is announced again.
    pub fn handle_timeout(&mut self, now: Nanos) {
        self.pfc.handle_timeout(now);
    }

    /// Whether [`RxBuffer::pause_frame`] has a frame to send.
    pub fn has_pause_frame(&self) -> bool {
        self.pfc.has_frame()
    }

    /// A PFC frame to send now, if the pause state changed or needs refreshing (then
    /// refreshed every half pause time, so the partner never resumes while the buffer
    /// is still above XON).
    pub fn pause_frame(&mut self, now: Nanos, src: MacAddr, buf: &mut [u8]) -> Option<usize> {
        if !self.pfc.has_frame() {
            return None;
        }
        // Emit first: a buffer too small for the frame loses no announcement.
        let mut probe = self.pfc;
        let t = self.thresholds();
        let repr = probe.take_frame(now, &t, self.link_bps)?;
        let n = repr.emit_frame(src, buf).ok()?;
        self.pfc = probe;
        for p in 0..8 {
            if Priorities(repr.enable).contains(p as u8) {
                if repr.quanta[p] != 0 {
                    self.counters.xoff_sent[p] += 1;
                } else {
                    self.counters.xon_sent[p] += 1;
                }
            }
        }
        self.counters.pause_frames_sent += 1;
        Some(n)
    }

    /// When the buffer next needs attention: the head frame is processed, or an XOFF is
    /// due for refreshing.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        match (self.head_done, self.pfc.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_core::wire::pfc::PfcRepr;

    #[test]
    fn xoff_above_the_threshold_xon_back_at_it() {
        // 1000-byte frames, drained at 8 Gb/s: 1 us each.
        let cfg = RxBufferConfig::new(5000, 8_000_000_000, 2500, 1000);
        let lossless = Priorities::only(3);
        let mut b = RxBuffer::new(cfg);
        b.link_bps = 100_000_000_000;
        let f = [0u8; 1000];
        let mut buf = [0u8; 64];
        for _ in 0..3 {
            b.push(0, &f, 3, lossless);
        }
        // 3000 > 2500: XOFF for priority 3 with 0xFFFF quanta.
        let n = b
            .pause_frame(0, MacAddr([2, 0, 0, 0, 0, 1]), &mut buf)
            .unwrap();
        let (_, req) = PfcRepr::parse_frame(&buf[..n]).unwrap();
        assert_eq!((req.enable, req.quanta[3]), (0b1000, 0xFFFF));
        // Refresh at half of 65535 x 512 bits at 100 Gb/s = 335_540 ns / 2.
        assert_eq!(b.poll_timeout(), Some(1000));
        b.push(0, &f, 3, lossless);
        b.push(0, &f, 3, lossless);
        b.push(0, &f, 3, lossless); // 6000 > 5000: dropped
        assert_eq!(b.counters.dropped, 1);
        // Frames leave at 1, 2, 3 us; at 3 us 2000 bytes remain (> XON); at 4 us 1000.
        assert!(b.pop_due(999).is_none());
        for t in [1000, 2000, 3000] {
            assert!(b.pop_due(t).is_some());
            assert!(b
                .pause_frame(t, MacAddr([2, 0, 0, 0, 0, 1]), &mut buf)
                .is_none());
        }
        assert!(b.pop_due(4000).is_some());
        let n = b
            .pause_frame(4000, MacAddr([2, 0, 0, 0, 0, 1]), &mut buf)
            .unwrap();
        let (_, req) = PfcRepr::parse_frame(&buf[..n]).unwrap();
        assert_eq!((req.enable, req.quanta[3]), (0b1000, 0));
        assert_eq!((b.counters.xoff_sent[3], b.counters.xon_sent[3]), (1, 1));
        assert_eq!(b.poll_timeout(), Some(5000));
    }
}
