//! The completer: the requester's receive side. It matches ACKs, NAKs, READ responses
//! and ATOMIC ACKs against the oldest outstanding WQE, completes WQEs in order
//! (implicitly, when a response for a later PSN arrives), and runs the retry logic:
//! local ACK timeout and `retry_cnt`, RNR NAK and `rnr_retry` (7 = infinite), Go-Back-N
//! on a PSN sequence error NAK (roce-facts §6.4; rxe `rxe_comp.c`).

use crate::wire::aeth::{NakCode, Syndrome};
use crate::wire::opcode::Operation;
use crate::wire::Packet;

use super::qp::{Env, QpRef};
use super::verbs::{QpState, WcStatus, WrOp};

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    fn reset_retry_counters(&mut self) {
        self.qp.comp.retry_left = self.qp.retry_cnt;
        self.qp.comp.rnr_left = self.qp.rnr_retry;
        self.qp.comp.started_retry = false;
    }

    /// Something is sent and not acknowledged.
    fn outstanding(&self) -> bool {
        self.qp.comp.psn.before(self.qp.req.psn)
    }

    /// Restarts the local ACK timer after progress (stops it when nothing is left).
    fn restart_timer(&mut self, env: &Env<'_>) {
        self.qp.comp.retrans_at = match self.rto() {
            Some(t) if self.outstanding() => Some(env.now + t),
            _ => None,
        };
    }

    /// Index of the oldest WQE that is started and not finished.
    fn oldest_outstanding(&self) -> Option<usize> {
        for (i, w) in self.q.sq.iter().enumerate() {
            if w.done {
                continue;
            }
            return w.started.then_some(i);
        }
        None
    }

    /// Starts a Go-Back-N retry from the oldest unacknowledged PSN, or fails the oldest
    /// WQE with `RETRY_EXC_ERR` when `retry_cnt` is used up. A NAK- or gap-triggered
    /// retry is not repeated until progress is made; a timeout always counts.
    pub(crate) fn retry(&mut self, env: &mut Env<'_>, timeout: bool) {
        if !matches!(self.qp.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let Some(i) = self.oldest_outstanding() else {
            return;
        };
        if self.qp.comp.started_retry && !timeout {
            return;
        }
        if self.qp.comp.retry_left == 0 {
            env.ctr.retry_exceeded_err += 1;
            self.finish_wqe(env, i, WcStatus::RetryExcErr);
            return;
        }
        self.qp.comp.retry_left -= 1;
        env.ctr.completer_retry_err += 1;
        if timeout {
            env.ctr.local_ack_timeout_err += 1;
        }
        self.qp.comp.started_retry = true;
        self.qp.comp.retrans_at = None;
        if self.sr_retry(timeout) {
            // Resends may all turn out SACKed already: keep the timer running anyway.
            self.restart_timer(env);
        } else {
            let p = self.qp.comp.psn;
            self.go_back_n(p);
        }
    }

    /// Handles an RC response packet (ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, READ response).
    pub(crate) fn comp_handle(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) {
        let before = self.qp.comp.psn;
        self.comp_process(env, pkt);
        if self.qp.comp.psn != before {
            self.sr_acked(before);
        }
        if self.qp.comp.psn != before && matches!(self.qp.state, QpState::Rts | QpState::Sqd) {
            self.catch_up();
            if self.qp.comp.rnr_at.is_none() {
                self.restart_timer(env);
            }
        }
    }

    fn comp_process(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) {
        if !matches!(self.qp.state, QpState::Rts | QpState::Sqd) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        let psn = pkt.psn();
        // Nothing at or beyond the highest PSN sent can be a genuine response.
        if !psn.before(self.qp.req.max_psn) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        let op = pkt.info().operation;
        let syndrome = pkt.aeth().map(|a| a.syndrome);

        // Complete, in order, every WQE the response implicitly acknowledges.
        let i = loop {
            let Some(i) = self.oldest_outstanding() else {
                env.ctr.rcvd_bad_resp += 1;
                return;
            };
            let Some(w) = self.q.sq.get(i) else { return };
            if !psn.after(w.last_psn) {
                break i;
            }
            if w.wr.op.opcode().is_read_or_atomic() {
                // A later response while a READ/ATOMIC is unanswered: its response
                // was lost.
                self.retry(env, false);
                return;
            }
            let next = w.last_psn.next();
            if next.after(self.qp.comp.psn) {
                self.qp.comp.psn = next;
            }
            self.reset_retry_counters();
            self.finish_wqe(env, i, WcStatus::Success);
        };
        let Some(w) = self.q.sq.get(i) else { return };
        let (wop, first_psn, last_psn, len) = (w.wr.op, w.first_psn, w.last_psn, w.len);
        let d = psn.diff(self.qp.comp.psn);
        let is_read = matches!(wop, WrOp::RdmaRead { .. });
        let is_atomic = wop.opcode().is_read_or_atomic() && !is_read;

        match (op, syndrome) {
            (Operation::Acknowledge, Some(Syndrome::Ack(_))) => {
                if is_read || is_atomic {
                    env.ctr.rcvd_bad_resp += 1;
                } else if d < 0 {
                    // Stale, unless it acknowledges this WQE's last packet.
                    if psn == last_psn {
                        self.qp.comp.psn = last_psn.next();
                        self.reset_retry_counters();
                        self.finish_wqe(env, i, WcStatus::Success);
                    }
                } else {
                    self.qp.comp.psn = psn.next();
                    self.reset_retry_counters();
                    if psn == last_psn {
                        self.finish_wqe(env, i, WcStatus::Success);
                    }
                }
            }
            (Operation::Acknowledge, Some(Syndrome::RnrNak(t))) => {
                if d < 0 {
                    env.ctr.rcvd_bad_resp += 1;
                } else {
                    env.ctr.rcvd_rnr_err += 1;
                    self.qp.comp.psn = psn;
                    let left = self.qp.comp.rnr_left;
                    if left == 0 {
                        env.ctr.retry_rnr_exceeded_err += 1;
                        self.finish_wqe(env, i, WcStatus::RnrRetryExcErr);
                        return;
                    }
                    if left != 7 {
                        self.qp.comp.rnr_left = left - 1;
                    }
                    self.qp.comp.retrans_at = None;
                    self.qp.comp.rnr_at = Some(
                        env.now
                            .saturating_add(core::time::Duration::from_nanos(t.nanos())),
                    );
                    self.go_back_n(psn);
                }
            }
            (Operation::Acknowledge, Some(Syndrome::Nak(code))) => {
                if d < 0 {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                }
                match code {
                    NakCode::PsnSequenceError => {
                        env.ctr.rcvd_seq_err += 1;
                        if d > 0 {
                            // It implicitly acknowledges every PSN before it: that is
                            // progress, so the retry budget starts afresh.
                            self.qp.comp.psn = psn;
                            self.reset_retry_counters();
                        }
                        let sack = super::sack::sack_trigger(pkt).filter(|_| self.sr_selectable());
                        if let Some(trigger) = sack {
                            // Selective repeat: the missing PSNs below the trigger
                            // are resent, nothing else.
                            self.sr_sacked(env, trigger);
                        } else if self.qp.comp.rnr_at.is_none() {
                            self.retry(env, false);
                        }
                    }
                    NakCode::InvalidRequest => self.finish_wqe(env, i, WcStatus::RemInvReqErr),
                    NakCode::RemoteAccessError => self.finish_wqe(env, i, WcStatus::RemAccessErr),
                    _ => self.finish_wqe(env, i, WcStatus::RemOpErr),
                }
            }
            (Operation::RdmaReadResponse, s) => {
                if !is_read || s.is_some_and(|s| !matches!(s, Syndrome::Ack(_))) {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                }
                if d < 0 {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                }
                if d > 0 {
                    // A response in the middle is missing.
                    self.retry(env, false);
                    return;
                }
                let mtu = self.qp.mtu.bytes();
                let k = psn.diff(first_psn).max(0) as u32;
                let offset = k.saturating_mul(mtu);
                let Some(remaining) = len.checked_sub(offset) else {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                };
                let n = pkt.payload().len();
                let ends = pkt.info().position.ends();
                let ok = if ends {
                    n as u64 == u64::from(remaining) && n as u64 <= u64::from(mtu)
                } else {
                    n as u64 == u64::from(mtu) && remaining > mtu
                };
                if !ok || (ends && psn != last_psn) {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                }
                let pd = self.qp.pd;
                let placed = match self.q.sq.get(i) {
                    Some(w) => super::sgl::scatter(
                        env.mem,
                        env.dma,
                        pd,
                        &w.wr.sg_list,
                        offset,
                        pkt.payload(),
                    ),
                    None => return,
                };
                if placed.is_err() {
                    self.finish_wqe(env, i, WcStatus::LocProtErr);
                    return;
                }
                self.qp.comp.psn = psn.next();
                self.reset_retry_counters();
                if ends {
                    self.finish_wqe(env, i, WcStatus::Success);
                }
            }
            (Operation::AtomicAcknowledge, Some(Syndrome::Ack(_))) => {
                let Some(ack) = pkt.atomic_ack_eth() else {
                    return;
                };
                if !is_atomic || psn != first_psn || d != 0 {
                    env.ctr.rcvd_bad_resp += 1;
                    return;
                }
                let pd = self.qp.pd;
                let orig = ack.orig_rem_data.to_le_bytes();
                let placed = match self.q.sq.get(i) {
                    Some(w) => super::sgl::scatter(env.mem, env.dma, pd, &w.wr.sg_list, 0, &orig),
                    None => return,
                };
                if placed.is_err() {
                    self.finish_wqe(env, i, WcStatus::LocProtErr);
                    return;
                }
                self.qp.comp.psn = psn.next();
                self.reset_retry_counters();
                self.finish_wqe(env, i, WcStatus::Success);
            }
            _ => env.ctr.rcvd_bad_resp += 1,
        }
    }
}
