//! PFC pause frames (IEEE 802.1Qbb) per sending port and priority, with the time they
//! paused the link: from an XOFF until the XON that ends it, the next frame that renews
//! it, or the expiry of its pause time (quanta of 512 bit times at the link rate).

use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::{PfcRepr, BITS_PER_QUANTUM};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default)]
struct Priority {
    xoff: u64,
    xon: u64,
    paused_ns: u64,
    /// The running pause: its start and when it expires.
    running: Option<(u64, u64)>,
}

impl Priority {
    /// Ends the running pause at `t` (or at its expiry, if earlier).
    fn stop(&mut self, t: u64) {
        if let Some((since, until)) = self.running.take() {
            self.paused_ns += until.min(t).saturating_sub(since);
        }
    }
}

/// Pause frames by the MAC address that sent them.
#[derive(Debug, Clone)]
pub struct Ports {
    link_bps: u64,
    ports: BTreeMap<[u8; 6], [Priority; 8]>,
}

/// One priority of one port, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityReport {
    /// The MAC address that sent the pause frames.
    pub mac: String,
    pub priority: u8,
    /// Frames with a non-zero pause time for the priority.
    pub xoff: u64,
    /// Frames with pause time 0 (resume).
    pub xon: u64,
    pub paused_us: f64,
}

impl Ports {
    pub fn new(link_bps: u64) -> Self {
        Self {
            link_bps: link_bps.max(1),
            ports: BTreeMap::new(),
        }
    }

    pub fn frame(&mut self, t: u64, mac: MacAddr, req: &PfcRepr) {
        let ns_per_quantum = BITS_PER_QUANTUM as f64 * 1e9 / self.link_bps as f64;
        let port = self.ports.entry(mac.0).or_default();
        for (prio, p) in port.iter_mut().enumerate() {
            if req.enable & (1 << prio) == 0 {
                continue;
            }
            p.stop(t);
            match req.quanta[prio] {
                0 => p.xon += 1,
                q => {
                    p.xoff += 1;
                    let len = (f64::from(q) * ns_per_quantum).round() as u64;
                    p.running = Some((t, t + len));
                }
            }
        }
    }

    /// Ends every running pause at the capture's last frame.
    pub fn finish(&mut self, last_ns: u64) {
        for p in self.ports.values_mut().flatten() {
            p.stop(last_ns);
        }
    }

    pub fn report(&self) -> Vec<PriorityReport> {
        let mut out = Vec::new();
        for (mac, prios) in &self.ports {
            for (i, p) in prios.iter().enumerate() {
                if p.xoff + p.xon > 0 {
                    out.push(PriorityReport {
                        mac: MacAddr(*mac).to_string(),
                        priority: i as u8,
                        xoff: p.xoff,
                        xon: p.xon,
                        paused_us: p.paused_ns as f64 / 1e3,
                    });
                }
            }
        }
        out
    }

    pub fn link_bps(&self) -> u64 {
        self.link_bps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(enable: u8, q: u16) -> PfcRepr {
        PfcRepr {
            enable,
            quanta: [q; 8],
        }
    }

    #[test]
    fn pauses_end_at_xon_renewal_or_expiry() {
        // 100 Gb/s: one quantum is 5.12 ns; 1000 quanta 5.12 us.
        let mut p = Ports::new(100_000_000_000);
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        p.frame(0, mac, &req(1 << 3, 1000)); // until 5120
        p.frame(2_000, mac, &req(1 << 3, 1000)); // renews: 2000 counted, until 7120
        p.frame(3_000, mac, &req(1 << 3, 0)); // XON: 1000 more
        p.frame(10_000, mac, &req(1 << 3 | 1, 1000)); // expires: 5120 more (and prio 0)
        p.finish(100_000);
        let r = p.report();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].priority, r[0].xoff, r[0].xon), (0, 1, 0));
        assert_eq!(r[0].paused_us, 5.12);
        assert_eq!((r[1].priority, r[1].xoff, r[1].xon), (3, 3, 1));
        assert!((r[1].paused_us - 8.12).abs() < 1e-9, "{}", r[1].paused_us);
    }
}
