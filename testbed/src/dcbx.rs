//! The host's DCBX agent (IEEE 802.1Qaz over LLDP, what `lldpad` does on Linux when a
//! NIC's DCBX is "OS controlled"): it announces the port's Data Center Bridging settings
//! in LLDP frames (`roce_core::wire::lldp`), and a willing agent takes a non-willing
//! peer's settings and programs its NIC through the ABI (MODIFY_DCB), as `lldpad`
//! programs a NIC through dcbnl.
//!
//! Rules (802.1Qaz): a willing port adopts the ETS Recommendation (or Configuration),
//! the PFC enable bits and the DSCP application priorities of a peer that is not
//! willing. When both are willing, the tie is broken by MAC address: the port whose
//! address is numerically lower (compared byte by byte, first byte most significant)
//! adopts the other's settings, the higher one keeps its own, so the two converge on
//! one set. That is lldpad's rule for the PFC TLV (`pfc_sm`: a willing port whose MAC is
//! not above its willing peer's takes the peer's PFC); lldpad takes a peer's ETS
//! Recommendation whenever it is willing, which with two willing ports can have each
//! take the other's: here the MAC rule decides for all the settings at once. When the
//! peer's settings cannot run on this NIC (a traffic class holding several priorities,
//! say) the agent keeps its own and counts the refusal.
//!
//! The agent sends when the port's settings differ from what it last announced, and
//! every `interval` (LLDP's msgTxInterval, 30 s by default) with a TTL of four intervals.

use roce_core::engine::DcbConfig;
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::lldp::{DcbxRepr, ETHERTYPE_LLDP};
use roce_host::Context;
use roce_sim::Nanos;

/// LLDP's default transmit interval (802.1AB msgTxInterval).
pub const TX_INTERVAL: Nanos = 30_000_000_000;

/// What the agent did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DcbxCounters {
    /// LLDP frames sent.
    pub sent: u64,
    /// LLDP frames received that parsed.
    pub received: u64,
    /// LLDP frames that did not parse.
    pub bad: u64,
    /// Times the peer's settings were written to the NIC.
    pub adopted: u64,
    /// Peer settings this NIC cannot run (kept its own).
    pub refused: u64,
}

/// One port's DCBX agent, working through the host's context of its NIC.
pub struct DcbxAgent {
    ctx: Context,
    willing: bool,
    interval: Nanos,
    /// What was last announced, and when the next periodic frame is due.
    announced: Option<DcbConfig>,
    next_tx: Nanos,
    /// The last peer announcement.
    peer: Option<DcbxRepr>,
    pub counters: DcbxCounters,
}

impl DcbxAgent {
    /// An agent for the NIC behind `ctx`; `willing`: it takes a non-willing peer's
    /// settings.
    pub fn new(ctx: Context, willing: bool) -> Self {
        Self {
            ctx,
            willing,
            interval: TX_INTERVAL,
            announced: None,
            next_tx: 0,
            peer: None,
            counters: DcbxCounters::default(),
        }
    }

    /// The agent announcing every `interval` instead of every 30 s.
    pub fn with_interval(mut self, interval: Nanos) -> Self {
        self.interval = interval.max(1);
        self
    }

    /// The peer's last announcement.
    pub fn peer(&self) -> Option<&DcbxRepr> {
        self.peer.as_ref()
    }

    /// Whether `frame` is an LLDP frame (for the agent, not the NIC's RoCE engine).
    pub fn is_lldp(frame: &[u8]) -> bool {
        frame.get(12..14) == Some(&ETHERTYPE_LLDP.to_be_bytes()[..])
    }

    /// An LLDP frame arrived from the peer.
    pub fn receive(&mut self, frame: &[u8]) {
        let Ok(peer) = DcbxRepr::parse_frame(frame) else {
            self.counters.bad += 1;
            return;
        };
        self.counters.received += 1;
        let peer_willing =
            peer.ets.is_some_and(|e| e.willing) || peer.pfc.is_some_and(|p| p.willing);
        // Both willing: the lower MAC yields (802.1Qaz's tie-break).
        let yields = || {
            self.ctx
                .query_port()
                .is_ok_and(|port| port.mac < peer.mac.0)
        };
        if self.willing && (!peer_willing || yields()) {
            self.adopt(&peer);
        }
        self.peer = Some(peer);
    }

    fn adopt(&mut self, peer: &DcbxRepr) {
        let Ok(current) = self.ctx.query_dcb() else {
            return;
        };
        match peer.to_config(&current) {
            Ok(new) if new == current => {}
            Ok(new) => {
                if self.ctx.set_dcb(&new).is_ok() {
                    self.counters.adopted += 1;
                } else {
                    self.counters.refused += 1;
                }
            }
            Err(_) => self.counters.refused += 1,
        }
    }

    /// The LLDP frame to send at `now` from `mac` for the port's settings `dcb` (as
    /// the NIC runs them), if one is due: they changed since the last announcement, or
    /// the interval is up.
    pub fn frame(
        &mut self,
        now: Nanos,
        mac: MacAddr,
        dcb: DcbConfig,
        buf: &mut [u8],
    ) -> Option<usize> {
        if self.announced == Some(dcb) && now < self.next_tx {
            return None;
        }
        let ttl_s = (self.interval.saturating_mul(4) / 1_000_000_000).clamp(1, 0xFFFF) as u16;
        let n = DcbxRepr::from_config(mac, &dcb, self.willing, ttl_s)
            .emit_frame(buf)
            .ok()?;
        self.announced = Some(dcb);
        self.next_tx = now.saturating_add(self.interval);
        self.counters.sent += 1;
        Some(n)
    }

    /// When the next periodic announcement is due.
    pub fn poll_timeout(&self) -> Nanos {
        self.next_tx
    }
}
