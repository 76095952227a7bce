//! The MAC of every port, switch or host: what the fabric does at layer 2 below any node.
//! It consumes received PFC frames (IEEE 802.1Qbb, roce-facts §8) and keeps the pause
//! timer of each priority: a pause of q quanta stops the priority for q x 512 bit times
//! of the link, counted from the end of the pause frame; a later frame replaces the
//! timer (quanta 0 resumes at once). A frame already on the wire finishes.

use crate::node::Priorities;
use crate::queue::Nanos;
use roce_core::wire::ethernet::ETHERTYPE_MAC_CONTROL;
use roce_core::wire::pfc::{quanta_to_nanos, PfcRepr};

/// Counters of one port's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// PFC frames this port sent / received.
    pub pause_frames_tx: u64,
    pub pause_frames_rx: u64,
    /// Received pause requests per priority with non-zero quanta (XOFF) and with zero
    /// (XON).
    pub xoff_rx: [u64; 8],
    pub xon_rx: [u64; 8],
    /// Nanoseconds each priority of this port's transmitter spent paused.
    pub paused_ns: [u64; 8],
    /// MAC Control frames that are not valid PFC frames (dropped).
    pub bad_mac_control: u64,
}

/// PFC state of a port's transmitter.
#[derive(Debug, Default)]
pub(crate) struct PauseState {
    /// Priority p is paused while `now < until[p]`.
    until: [Nanos; 8],
    /// Start of the current pause of each priority (valid while paused).
    since: [Nanos; 8],
    /// Earliest pause end for which a wake-up event is scheduled.
    pub wake_at: Option<Nanos>,
    /// The latest `until`: nothing is paused from then on (the per-poll fast path).
    latest: Nanos,
}

impl PauseState {
    /// The priorities paused at `now`.
    pub fn paused(&self, now: Nanos) -> Priorities {
        if now >= self.latest {
            return Priorities::NONE;
        }
        let mut m = 0u8;
        for (p, &u) in self.until.iter().enumerate() {
            if now < u {
                m |= 1 << p;
            }
        }
        Priorities(m)
    }

    /// The earliest pause end after `now`.
    pub fn next_end(&self, now: Nanos) -> Option<Nanos> {
        self.until.iter().copied().filter(|&u| u > now).min()
    }

    /// Applies a received PFC request at `now`; returns true when a priority resumed
    /// (so the transmitter should be polled).
    pub fn apply(
        &mut self,
        now: Nanos,
        req: &PfcRepr,
        rate_bps: u64,
        c: &mut PortCounters,
    ) -> bool {
        let mut resumed = false;
        for p in 0..8 {
            if req.enable & (1 << p) == 0 {
                continue;
            }
            let was_paused = now < self.until[p];
            if was_paused {
                c.paused_ns[p] += now - self.since[p];
            } else {
                // A pause that ran out by itself ended at `until`.
                self.settle(p, c);
            }
            self.since[p] = now;
            if req.quanta[p] == 0 {
                c.xon_rx[p] += 1;
                self.until[p] = now;
                resumed |= was_paused;
            } else {
                c.xoff_rx[p] += 1;
                self.until[p] = now + quanta_to_nanos(req.quanta[p], rate_bps);
            }
        }
        self.latest = self.until.iter().copied().max().unwrap_or(0);
        resumed
    }

    /// Credits a pause that expired on its own to `paused_ns`.
    fn settle(&mut self, p: usize, c: &mut PortCounters) {
        if self.until[p] > self.since[p] {
            c.paused_ns[p] += self.until[p] - self.since[p];
            self.since[p] = self.until[p];
        }
    }

    /// `c` with the pauses still running at `now` (or expired unseen) credited up to
    /// `now`, for a snapshot.
    pub fn snapshot(&self, now: Nanos, c: &PortCounters) -> PortCounters {
        let mut c = *c;
        for p in 0..8 {
            let end = self.until[p].min(now);
            if end > self.since[p] {
                c.paused_ns[p] += end - self.since[p];
            }
        }
        c
    }
}

/// The PFC request in `frame`, if it is a MAC Control frame: `Some(Ok)` for PFC,
/// `Some(Err)` for other or malformed MAC Control, `None` for anything else.
pub(crate) fn mac_control(frame: &[u8]) -> Option<Result<PfcRepr, ()>> {
    if frame.len() < 14 || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_MAC_CONTROL {
        return None;
    }
    Some(PfcRepr::parse_frame(frame).map(|(_, r)| r).map_err(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoff_then_xon_accounts_the_paused_time() {
        let mut st = PauseState::default();
        let mut c = PortCounters::default();
        let mut req = PfcRepr {
            enable: 0b1000,
            quanta: [0; 8],
        };
        req.quanta[3] = 1000; // 512_000 bits at 100 Gb/s = 5120 ns
        assert!(!st.apply(100, &req, 100_000_000_000, &mut c));
        assert_eq!(st.paused(100), Priorities::only(3));
        assert_eq!(st.next_end(100), Some(5220));
        assert_eq!(st.paused(5220), Priorities::NONE);
        req.quanta[3] = 0;
        assert!(st.apply(1100, &req, 100_000_000_000, &mut c));
        assert_eq!(c.paused_ns[3], 1000);
        assert_eq!((c.xoff_rx[3], c.xon_rx[3]), (1, 1));
        // A pause left to expire is credited in full, also in a snapshot.
        req.quanta[3] = 1000;
        st.apply(10_000, &req, 100_000_000_000, &mut c);
        assert_eq!(st.snapshot(12_000, &c).paused_ns[3], 1000 + 2000);
        assert_eq!(st.snapshot(99_000, &c).paused_ns[3], 1000 + 5120);
        st.apply(99_000, &req, 100_000_000_000, &mut c);
        assert_eq!(c.paused_ns[3], 1000 + 5120);
    }
}
