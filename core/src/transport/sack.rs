//! Selective repeat, IRN style (Mittal et al., "Revisiting Network Support for RDMA",
//! SIGCOMM 2018), as an option per RC QP. Go-Back-N stays the default; this module holds
//! everything selective repeat adds, and the requester, completer and responder call
//! into it through a few small hooks. `docs/selective-repeat.md` is the specification.
//!
//! * **Negotiation.** Both ends set [`SrAttr`] at INIT→RTR (IRN assumes the same: the
//!   applications exchange it with the QPNs and PSNs). Nothing is negotiated on the
//!   wire; a mismatched pair still works, at Go-Back-N efficiency (see the doc).
//! * **Requester.** An RDMA WRITE goes out as one RC_RDMA_WRITE_ONLY per packet, each
//!   with its own RETH (address of that piece, length of that piece), so the responder
//!   can place any piece that arrives out of order. A per-QP ring bitmap records which PSNs the responder reported
//!   (SACKed); a retransmit range resends only the unSACKed PSNs below the highest
//!   SACKed one. In-flight PSNs are capped at `max_inflight` (IRN's BDP-FC).
//! * **Responder.** A WRITE_ONLY without immediate inside the window is placed even when
//!   earlier PSNs are missing; its PSN goes into a ring bitmap and a SACK goes back.
//!   Everything that completes a receive WQE (SEND, WRITE with immediate) or needs a
//!   response (READ, ATOMIC) is accepted in order only, so completions stay in order.
//! * **SACK.** An RC ACKNOWLEDGE with AETH NAK "PSN sequence error" (0x60) and
//!   BTH.PSN = the first missing PSN, exactly the standard NAK, plus BTH resv7 bit 0 set
//!   and the PSN that triggered it in the AETH MSN field. A Go-Back-N peer reads it as
//!   the standard NAK it is.

use crate::num::{Msn, Psn, Rkey};
use crate::wire::aeth::{NakCode, Syndrome};
use crate::wire::bth::BthRepr;
use crate::wire::opcode::Opcode;
use crate::wire::reth::RethRepr;
use crate::wire::{ExtHeaders, Packet};

use super::attr::SR_WINDOW;
use super::entry::{AckOut, Commit, CurOp, TxDesc};
use super::qp::{Env, QpRef};
use super::verbs::QpType;

/// BTH resv7 bit that marks a NAK as a SACK.
pub const SACK_FLAG: u8 = 0x01;

/// IRN uses the low timeout when at most this many packets are in flight.
const RTO_LOW_PKTS: i32 = 3;

/// A requester's window in PSNs: the port's `max_unacked_psns`, and with selective
/// repeat on (`sr`) also the QP's `max_inflight` (0: no cap of its own) and the bitmap's
/// reach.
pub(crate) fn send_window(max_unacked_psns: u32, sr: bool, max_inflight: u16) -> u32 {
    let port = max_unacked_psns.max(1);
    if !sr {
        return port;
    }
    let cap = match max_inflight {
        0 => SR_WINDOW,
        n => u32::from(n),
    };
    port.min(cap).min(SR_WINDOW)
}

/// Whether `pkt` is a SACK (a NAK 0x60 with the SACK flag), and its trigger PSN.
pub fn sack_trigger(pkt: &Packet<'_>) -> Option<Psn> {
    let aeth = pkt.aeth()?;
    let sack = matches!(aeth.syndrome, Syndrome::Nak(NakCode::PsnSequenceError))
        && pkt.bth().resv7 & SACK_FLAG != 0;
    sack.then(|| Psn::new(aeth.msn.value()))
}

/// Rewrites a packet of a plain RDMA WRITE (to `va`, `rkey`) at message byte `offset`
/// carrying `len` bytes into a self-describing RC_RDMA_WRITE_ONLY whose RETH names the
/// address and length of this piece. (WRITE with immediate keeps the standard
/// FIRST/MIDDLE/LAST: its receive completion reports the whole message length, which
/// only a responder that saw the whole message in order knows.)
pub(crate) fn write_piece(
    bth: &mut BthRepr,
    ext: &mut ExtHeaders,
    va: u64,
    rkey: Rkey,
    offset: u32,
    len: u32,
) {
    bth.opcode = Opcode::RC_RDMA_WRITE_ONLY;
    ext.reth = Some(RethRepr {
        va: va.wrapping_add(u64::from(offset)),
        rkey,
        dma_len: len,
    });
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    pub(crate) fn sr_on(&self) -> bool {
        self.q.sr.attr.enabled && self.qp.qp_type == QpType::Rc
    }

    // -----------------------------------------------------------------------------------
    // Requester

    /// The requester's window in PSNs: see [`send_window`].
    pub(crate) fn send_window(&self, env: &Env<'_>) -> u32 {
        send_window(
            env.cfg.max_unacked_psns,
            self.sr_on(),
            self.q.sr.attr.max_inflight,
        )
    }

    /// The local ACK timeout to arm now, in nanoseconds: IRN's RTO_low while few
    /// packets are in flight.
    pub(crate) fn rto(&self) -> Option<u64> {
        let high = self.qp.timeout.nanos();
        if !self.sr_on() {
            return high;
        }
        let sent = self.qp.req.max_psn.diff(self.qp.comp.psn);
        let in_flight = sent - self.q.sr.tx.sacked.count() as i32;
        match self.q.sr.attr.rto_low.nanos() {
            Some(low) if in_flight <= RTO_LOW_PKTS => Some(high.map_or(low, |h| h.min(low))),
            _ => high,
        }
    }

    /// Every outstanding WQE is a SEND or WRITE (one PSN per packet), so single PSNs
    /// can be resent; READ and ATOMIC recover with Go-Back-N.
    pub(crate) fn sr_selectable(&self) -> bool {
        self.sr_on()
            && !self
                .q
                .sq
                .iter()
                .any(|w| w.started && !w.done && w.wr.op.opcode().is_read_or_atomic())
    }

    /// A retry on a selective-repeat QP; false when Go-Back-N must do it (a READ or
    /// ATOMIC is outstanding). After a timeout, resend the first unacknowledged PSN
    /// (IRN) and whatever of the retransmit range is still unSACKed; after a plain
    /// sequence NAK (the responder dropped a packet it could not place out of order,
    /// and does not say which), every unSACKed PSN sent so far.
    pub(crate) fn sr_retry(&mut self, timeout: bool) -> bool {
        if !self.sr_selectable() {
            return false;
        }
        let cum = self.qp.comp.psn;
        let tx = &mut self.q.sr.tx;
        let end = if timeout {
            cum.next()
        } else {
            self.qp.req.max_psn
        };
        if end.after(tx.rtx_end) {
            tx.rtx_end = end;
        }
        // Resends may have been lost too (or dropped by the responder): scan again
        // from the first unacknowledged PSN.
        tx.rtx_next = cum;
        true
    }

    /// The cumulative ACK moved from `from` to `comp.psn`: forget those PSNs.
    pub(crate) fn sr_acked(&mut self, from: Psn) {
        if !self.sr_on() {
            // Nothing SACKed or resent selectively to forget (Go-Back-N).
            return;
        }
        let to = self.qp.comp.psn;
        let max = self.qp.req.max_psn;
        let tx = &mut self.q.sr.tx;
        tx.sacked.clear_range(from, to);
        // Both cursors stay at or after the cumulative ACK, so they never fall half the
        // PSN space behind it and compare the wrong way.
        if tx.rtx_next.before(to) {
            tx.rtx_next = to;
        }
        if tx.rtx_end.before(to) {
            tx.rtx_end = to;
        }
        if from != to {
            // The new first missing PSN may have been resent already (the cursor is past
            // it); if so, count that resend lost once something sent from now on is
            // SACKed.
            tx.head_rtx_mark = to.before(tx.rtx_next).then_some(max);
        }
    }

    /// A SACK for `trigger` arrived (its cumulative part already processed): record it
    /// and extend the retransmit range to it.
    pub(crate) fn sr_sacked(&mut self, env: &mut Env<'_>, trigger: Psn) {
        let (cum, max) = (self.qp.comp.psn, self.qp.req.max_psn);
        if !self.sr_on() || trigger.before(cum) || !trigger.before(max) {
            return;
        }
        env.ctr.rcvd_sack += 1;
        let tx = &mut self.q.sr.tx;
        tx.sacked.set(trigger);
        if tx.rtx_next.before(cum) {
            tx.rtx_next = cum;
        }
        // A packet sent after the resend of the first missing PSN arrived, and that PSN
        // is still missing: the resend was lost. Go over the range again (without
        // waiting for the timeout, which IRN would).
        if tx.head_rtx_mark.is_some_and(|m| !trigger.before(m)) {
            tx.head_rtx_mark = None;
            tx.rtx_next = cum;
        }
        // The range only grows: what the cursor passed was resent once already, and
        // only a timeout sends it again.
        if trigger.next().after(tx.rtx_end) {
            tx.rtx_end = trigger.next();
        }
    }

    /// The next PSN to resend, with its WQE index and packet number: the first
    /// unSACKed PSN of the retransmit range that belongs to a SEND or WRITE.
    pub(crate) fn sr_next_rtx(&mut self) -> Option<(u16, u32, Psn)> {
        if !self.sr_on() {
            return None;
        }
        let end = if self.q.sr.tx.rtx_end.after(self.qp.req.max_psn) {
            self.qp.req.max_psn
        } else {
            self.q.sr.tx.rtx_end
        };
        let mut p = self.q.sr.tx.rtx_next;
        if p.before(self.qp.comp.psn) {
            p = self.qp.comp.psn;
        }
        while p.before(end) {
            if !self.q.sr.tx.sacked.get(p) {
                let found = self.q.sq.iter().enumerate().find(|(_, w)| {
                    w.started && !w.done && !p.before(w.first_psn) && !p.after(w.last_psn)
                });
                if let Some((i, w)) = found {
                    if !w.wr.op.opcode().is_read_or_atomic() {
                        self.q.sr.tx.rtx_next = p;
                        let k = p.diff(w.first_psn).max(0) as u32;
                        return Some((u16::try_from(i).unwrap_or(u16::MAX), k, p));
                    }
                }
            }
            p = p.next();
        }
        self.q.sr.tx.rtx_next = p;
        None
    }

    /// A resent packet went out.
    pub(crate) fn sr_commit_rtx(&mut self, env: &mut Env<'_>, d: &TxDesc) {
        env.ctr.retransmitted_pkts += 1;
        self.q.sr.tx.rtx_next = d.bth.psn.next();
        if d.bth.psn == self.qp.comp.psn {
            self.q.sr.tx.head_rtx_mark = Some(self.qp.req.max_psn);
        }
        if self.qp.comp.retrans_at.is_none() {
            if let Some(t) = self.rto() {
                self.qp.comp.retrans_at = Some(env.now.after_nanos(t));
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Responder

    /// A request after ePSN on a selective-repeat QP. True if it was taken care of
    /// (placed, or a duplicate of one placed); false leaves it to the Go-Back-N path
    /// (dropped, one sequence NAK per gap).
    pub(crate) fn sr_out_of_order(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) -> bool {
        let psn = pkt.psn();
        let d = psn.diff(self.qp.resp.epsn);
        if !self.sr_on() || d <= 0 || d as u32 >= SR_WINDOW {
            return false;
        }
        if pkt.bth().opcode != Opcode::RC_RDMA_WRITE_ONLY {
            return false;
        }
        if self.q.sr.rx.rcvd.get(psn) {
            env.ctr.duplicate_request += 1;
            self.sr_queue_sack(psn);
            return true;
        }
        // Execute it as if it were next, then put the in-order state back: a WRITE_ONLY
        // without immediate touches nothing but its target memory.
        let saved = self.qp.resp;
        self.qp.resp.cur = CurOp::None;
        self.qp.resp.epsn = psn;
        let ok = self.execute(env, pkt).is_ok();
        self.qp.resp = saved;
        if !ok {
            // Rejected: it will be resent and checked again in order, where a fatal
            // error is reported as Go-Back-N would.
            return false;
        }
        env.ctr.out_of_seq_request += 1;
        self.q.sr.rx.rcvd.set(psn);
        self.sr_queue_sack(psn);
        true
    }

    fn sr_queue_sack(&mut self, trigger: Psn) {
        let out = &mut self.q.sr.rx.out;
        if out.is_full() {
            // Overwrite the newest: the requester then resends at most what it hides.
            out.pop_back();
        }
        let _ = out.push_back(trigger);
    }

    /// ePSN moved on from `from` after an in-order request: step over the PSNs already
    /// placed out of order (each a complete WRITE_ONLY message), and acknowledge.
    pub(crate) fn sr_advance(&mut self, from: Psn) {
        if !self.sr_on() {
            return;
        }
        let rx = &mut self.q.sr.rx;
        rx.rcvd.clear_range(from, self.qp.resp.epsn);
        let mut filled = false;
        while rx.rcvd.get(self.qp.resp.epsn) {
            let p = self.qp.resp.epsn;
            rx.rcvd.clear_range(p, p.next());
            self.qp.resp.epsn = p.next();
            self.qp.resp.msn = self.qp.resp.msn.add(1);
            filled = true;
        }
        // IRN acknowledges every packet: the requester's window and its first-unACKed
        // retransmission on a timeout both depend on it. Not in front of a READ
        // response or ATOMIC ACK just queued, which acknowledge for themselves.
        if filled || self.q.out.is_empty() {
            let psn = self.qp.resp.epsn.sub(1);
            self.set_pending(AckOut {
                syndrome: Syndrome::ACK,
                psn,
            });
        }
    }

    /// The next SACK to send, if any (only when no READ response or ATOMIC ACK is
    /// queued: a SACK acknowledges cumulatively and must not overtake them).
    pub(crate) fn sr_sack_desc(&mut self) -> Option<TxDesc> {
        if !self.sr_on() {
            return None;
        }
        let epsn = self.qp.resp.epsn;
        // Triggers the cumulative ACK has overtaken say nothing new.
        while self.q.sr.rx.out.front().is_some_and(|t| t.before(epsn)) {
            self.q.sr.rx.out.pop_front();
        }
        let trigger = *self.q.sr.rx.out.front()?;
        let nak = AckOut {
            syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
            psn: epsn,
        };
        let mut d = self.ack_desc(nak, Commit::Sack);
        d.bth.resv7 |= SACK_FLAG;
        if let Some(a) = d.ext.aeth.as_mut() {
            a.msn = Msn::new(trigger.value());
        }
        Some(d)
    }

    /// A SACK went out.
    pub(crate) fn sr_commit_sack(&mut self, env: &mut Env<'_>) {
        env.ctr.sent_sack += 1;
        self.q.sr.rx.out.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_piece_headers() {
        let mut bth = BthRepr::new(
            Opcode::RC_RDMA_WRITE_MIDDLE,
            crate::num::Qpn::new(1),
            Psn::ZERO,
        );
        let mut ext = ExtHeaders::default();
        write_piece(&mut bth, &mut ext, 0x1000, Rkey(7), 4096, 100);
        assert_eq!(bth.opcode, Opcode::RC_RDMA_WRITE_ONLY);
        assert_eq!(
            ext.reth,
            Some(RethRepr {
                va: 0x1000 + 4096,
                rkey: Rkey(7),
                dma_len: 100
            })
        );
    }
}
