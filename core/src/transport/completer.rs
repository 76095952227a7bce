//! The completer: the requester's receive side. It matches ACKs, NAKs, READ responses
//! and ATOMIC ACKs against the oldest outstanding WQE, completes WQEs in order
//! (implicitly, when a response for a later PSN arrives), and runs the retry logic:
//! local ACK timeout and `retry_cnt`, RNR NAK and `rnr_retry` (7 = infinite), Go-Back-N
//! on a PSN sequence error NAK (roce-facts §6.4; rxe `rxe_comp.c`).

use core::ops::ControlFlow;

use crate::fastpath::SqSpent;
use crate::num::Psn;
use crate::wire::aeth::{NakCode, RnrTimer, Syndrome};
use crate::wire::opcode::Operation;
use crate::wire::Packet;

use super::qp::{Env, QpRef};
use super::time::Instant;
use super::verbs::{QpState, WcStatus, WrOp};

/// The WQE a response is for, as `comp_process` found it.
struct Target {
    /// Its index in the send queue.
    idx: usize,
    /// The response's PSN, and its distance from the oldest unacknowledged PSN.
    psn: Psn,
    d: i32,
    is_read: bool,
    is_atomic: bool,
    first_psn: Psn,
    last_psn: Psn,
    len: u32,
}

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
        // Asked first: an ACK of the last message outstanding (most of them) needs no
        // timeout worked out (64-bit, ~20 instructions).
        self.qp.comp.retrans_at = if self.outstanding() {
            self.rto().map(|t| env.now.after_nanos(t))
        } else {
            None
        };
    }

    /// A paced fast-path QP's timer (`Engine::fastpath_pace_timer`): nothing the
    /// segmenter sent (up to `sent`) is outstanding but handed-out messages wait for
    /// its pacer: the timer starts when the next packet may leave (`next_at`).
    pub(crate) fn comp_pace_timer(&mut self, env: &Env<'_>, sent: Psn, next_at: u64) {
        let c = self.qp.comp.psn;
        if !c.before(sent) && c.before(self.qp.req.psn) && self.qp.comp.rnr_at.is_none() {
            let at = Instant::from_nanos(env.now.as_nanos().max(next_at));
            self.qp.comp.retrans_at = self.rto().map(|t| at.after_nanos(t));
        }
    }

    /// Index of the oldest WQE that is started and not finished.
    fn oldest_outstanding(&self) -> Option<usize> {
        // The deque's two slices chained here and searched with `find`: its own
        // iterator (`heapless`) has only `next`, which steps the chain's state at every
        // WQE; the chain's `find` runs two plain loops (on every response).
        let (front, back) = self.q.sq.as_slices();
        let (i, w) = front
            .iter()
            .chain(back)
            .enumerate()
            .find(|(_, w)| !w.done)?;
        w.started.then_some(i)
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
        self.comp_progress(env, before);
    }

    /// A response the fast path took (`docs/fastpath.md` §3.6): an ACK for `psn`, or a
    /// READ response or ATOMIC ACKNOWLEDGE (`placed`) for `psn` whose data it wrote. What
    /// `comp_handle` does with the same packet, without the packet.
    pub(crate) fn comp_fastpath(&mut self, env: &mut Env<'_>, psn: Psn, placed: bool, cqe: bool) {
        let before = self.qp.comp.psn;
        if cqe {
            self.hw_cqes_written(psn);
        }
        if !self.response_plausible(psn) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        if let Some(t) = self.complete_implied(env, psn) {
            if !placed {
                self.on_ack(env, &t);
            } else if (t.is_read || t.is_atomic) && t.d == 0 {
                // `on_read_response` / `on_atomic_ack` after their `place` (an atomic's
                // one PSN is its last).
                self.acked_to(t.psn.next());
                if t.psn == t.last_psn {
                    self.finish_wqe(env, t.idx, WcStatus::Success);
                }
            } else {
                env.ctr.rcvd_bad_resp += 1;
            }
        }
        self.comp_progress(env, before);
    }

    /// A NAK "PSN sequence error" for `psn` that the fast path took as its Go-Back-N
    /// but whose rewind its WQE fetch did not make (`docs/fastpath.md` §3.8, "A rewind
    /// the WQE fetch cannot take": the messages before `psn` retired, their CQEs not
    /// written unless `cqe`). What `comp_handle` does with the NAK, without the packet
    /// (a fast-path QP does no selective repeat: no SACK).
    pub(crate) fn comp_fastpath_nak(&mut self, env: &mut Env<'_>, psn: Psn, cqe: bool) {
        let before = self.qp.comp.psn;
        if cqe {
            // The NAK retired what ends before it, not the message holding `psn`.
            self.hw_cqes_written(psn.sub(1));
        }
        if !self.response_plausible(psn) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        if let Some(t) = self.complete_implied(env, psn) {
            self.on_nak(env, None, &t, NakCode::PsnSequenceError);
        }
        self.comp_progress(env, before);
    }

    /// The hardware retired the messages that end at or before `psn` and wrote the
    /// CQEs of those whose descriptor asked it to: whatever happens to them now (a QP
    /// that went to ERR meanwhile flushes them), they get no second CQE.
    fn hw_cqes_written(&mut self, psn: Psn) {
        // The slices chained here, as in `oldest_outstanding`.
        let (front, back) = self.q.sq.as_mut_slices();
        let _ = front.iter_mut().chain(back).try_for_each(|w| {
            if w.done || !w.started {
                return ControlFlow::Continue(());
            }
            if psn.before(w.last_psn) {
                return ControlFlow::Break(());
            }
            w.cqe_written = w.cqe_hw;
            ControlFlow::Continue(())
        });
    }

    /// The hardware fetched WQEs of this QP from the host ring itself and hands the
    /// send queue back (`docs/fastpath.md` §3.8): the messages it finished never reached
    /// the engine, and the oldest one it still holds starts at `base`. Everything before
    /// `base` is acknowledged (progress, as the responses that retired it were).
    /// The WQEs it still holds are posted next, then [`Self::comp_adopt_end`].
    pub(crate) fn comp_adopt_begin(&mut self, base: Psn) {
        if base != self.qp.comp.psn {
            self.reset_retry_counters();
        }
        self.qp.comp.psn = base;
        self.qp.req.psn = base;
        if base.after(self.qp.req.max_psn) {
            self.qp.req.max_psn = base;
        }
    }

    /// The WQEs just posted count as handed to the hardware (it sent them as
    /// descriptors the engine would have written), the acknowledgement moves on to `una`
    /// (inside the oldest message: nothing retires) and the local ACK timer is the
    /// hardware's, `deadline`. `spent`: the retries the hardware made since its last
    /// progress (it flushed and replayed the messages itself) and the RNR NAKs it
    /// waited out: they are the engine's budgets', as `retry` and `on_rnr_nak` would
    /// have spent them (the counters heard of them as they happened:
    /// `Engine::fastpath_count_retries`). An RNR wait under way is the engine's from
    /// here: its end is `spent.rnr_at` (then `handle_timeout` goes back to `una`, which
    /// is the RNR NAK's PSN, as after its own wait), and no ACK timer runs meanwhile.
    pub(crate) fn comp_adopt_end(
        &mut self,
        env: &mut Env<'_>,
        una: Psn,
        deadline: Option<Instant>,
        spent: SqSpent,
    ) {
        self.req_adopt(env);
        if una != self.qp.comp.psn {
            // `una` lies inside the oldest message the hardware held (packets of a SEND
            // or WRITE acknowledged, responses of a READ placed): nothing retires, the
            // acknowledgement moves, as `on_ack` and `on_read_response` move it. (Not
            // `comp_fastpath` with an ACK of `una - 1`: inside a READ that is an ACK
            // the completer refuses.)
            let before = self.qp.comp.psn;
            self.acked_to(una);
            self.comp_progress(env, before);
        }
        if spent.retries != 0 {
            self.qp.comp.retry_left = self.qp.comp.retry_left.saturating_sub(spent.retries);
            self.qp.comp.started_retry = true;
        }
        // `rnr_retry` 7 waits for ever: the hardware spends none of it then.
        self.qp.comp.rnr_left = self.qp.comp.rnr_left.saturating_sub(spent.rnr);
        self.qp.comp.rnr_at = spent.rnr_at.map(Instant::from_nanos);
        self.qp.comp.retrans_at = deadline;
    }

    /// After a response: what the acknowledged PSN moving from `before` sets off.
    fn comp_progress(&mut self, env: &mut Env<'_>, before: Psn) {
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
        let psn = pkt.psn();
        if !self.response_plausible(psn) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        let Some(t) = self.complete_implied(env, psn) else {
            return;
        };
        match (pkt.info().operation, pkt.aeth().map(|a| a.syndrome)) {
            (Operation::Acknowledge, Some(Syndrome::Ack(_))) => self.on_ack(env, &t),
            (Operation::Acknowledge, Some(Syndrome::RnrNak(timer))) => {
                self.on_rnr_nak(env, &t, timer)
            }
            (Operation::Acknowledge, Some(Syndrome::Nak(code))) => {
                self.on_nak(env, super::sack::sack_trigger(pkt), &t, code)
            }
            (Operation::RdmaReadResponse, s) => self.on_read_response(env, pkt, &t, s),
            (Operation::AtomicAcknowledge, Some(Syndrome::Ack(_))) => {
                self.on_atomic_ack(env, pkt, &t)
            }
            _ => env.ctr.rcvd_bad_resp += 1,
        }
    }

    /// The QP takes responses now, and `psn` is before the highest PSN sent (nothing
    /// at or beyond it can be a genuine response).
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn response_plausible(&self, psn: Psn) -> bool {
        matches!(self.qp.state, QpState::Rts | QpState::Sqd) && psn.before(self.qp.req.max_psn)
    }

    /// Completes, in order, every WQE a response for `psn` implicitly acknowledges, and
    /// returns the WQE the response is for. None when there is none (counted), or when
    /// the response skips an unanswered READ/ATOMIC (its response was lost: a retry
    /// starts).
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn complete_implied(&mut self, env: &mut Env<'_>, psn: Psn) -> Option<Target> {
        loop {
            let Some(i) = self.oldest_outstanding() else {
                env.ctr.rcvd_bad_resp += 1;
                return None;
            };
            let w = self.q.sq.get(i)?;
            if !psn.after(w.last_psn) {
                let is_read = matches!(w.wr.op, WrOp::RdmaRead { .. });
                return Some(Target {
                    idx: i,
                    psn,
                    d: psn.diff(self.qp.comp.psn),
                    is_read,
                    is_atomic: w.wr.op.opcode().is_read_or_atomic() && !is_read,
                    first_psn: w.first_psn,
                    last_psn: w.last_psn,
                    len: w.len,
                });
            }
            if w.wr.op.opcode().is_read_or_atomic() {
                self.retry(env, false);
                return None;
            }
            let next = w.last_psn.next();
            if next.after(self.qp.comp.psn) {
                self.qp.comp.psn = next;
            }
            self.reset_retry_counters();
            self.finish_wqe(env, i, WcStatus::Success);
        }
    }

    /// Everything up to `next` (exclusive) is acknowledged: that is progress.
    fn acked_to(&mut self, next: Psn) {
        self.qp.comp.psn = next;
        self.reset_retry_counters();
    }

    /// An ACK for a SEND or WRITE.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn on_ack(&mut self, env: &mut Env<'_>, t: &Target) {
        if t.is_read || t.is_atomic {
            env.ctr.rcvd_bad_resp += 1;
        } else if t.d < 0 {
            // Stale, unless it acknowledges this WQE's last packet.
            if t.psn == t.last_psn {
                self.acked_to(t.last_psn.next());
                self.finish_wqe(env, t.idx, WcStatus::Success);
            }
        } else {
            self.acked_to(t.psn.next());
            if t.psn == t.last_psn {
                self.finish_wqe(env, t.idx, WcStatus::Success);
            }
        }
    }

    /// An RNR NAK: wait the timer it names, then resend from its PSN, or fail the WQE
    /// once `rnr_retry` is used up.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn on_rnr_nak(&mut self, env: &mut Env<'_>, t: &Target, timer: RnrTimer) {
        if t.d < 0 {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        env.ctr.rcvd_rnr_err += 1;
        self.qp.comp.psn = t.psn;
        let left = self.qp.comp.rnr_left;
        if left == 0 {
            env.ctr.retry_rnr_exceeded_err += 1;
            self.finish_wqe(env, t.idx, WcStatus::RnrRetryExcErr);
            return;
        }
        if left != 7 {
            self.qp.comp.rnr_left = left - 1;
        }
        self.qp.comp.retrans_at = None;
        self.qp.comp.rnr_at = Some(
            env.now
                .saturating_add(core::time::Duration::from_nanos(timer.nanos())),
        );
        self.go_back_n(t.psn);
    }

    /// A NAK: a sequence error (or a SACK: `sack`, its trigger) starts a retry; the
    /// others fail the WQE.
    fn on_nak(&mut self, env: &mut Env<'_>, sack: Option<Psn>, t: &Target, code: NakCode) {
        if t.d < 0 {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        match code {
            NakCode::PsnSequenceError => {
                env.ctr.rcvd_seq_err += 1;
                if t.d > 0 {
                    // It implicitly acknowledges every PSN before it: that is progress,
                    // so the retry budget starts afresh.
                    self.acked_to(t.psn);
                }
                if let Some(trigger) = sack.filter(|_| self.sr_selectable()) {
                    // Selective repeat: the missing PSNs below the trigger are resent,
                    // nothing else.
                    self.sr_sacked(env, trigger);
                } else if self.qp.comp.rnr_at.is_none() {
                    self.retry(env, false);
                }
            }
            NakCode::InvalidRequest => self.finish_wqe(env, t.idx, WcStatus::RemInvReqErr),
            NakCode::RemoteAccessError => self.finish_wqe(env, t.idx, WcStatus::RemAccessErr),
            _ => self.finish_wqe(env, t.idx, WcStatus::RemOpErr),
        }
    }

    /// A READ response: in sequence, its length fits its place in the READ, and its
    /// payload goes to the WQE's SGEs at its offset.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn on_read_response(
        &mut self,
        env: &mut Env<'_>,
        pkt: &Packet<'_>,
        t: &Target,
        syndrome: Option<Syndrome>,
    ) {
        if !t.is_read || syndrome.is_some_and(|s| !matches!(s, Syndrome::Ack(_))) || t.d < 0 {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        if t.d > 0 {
            // A response in the middle is missing.
            self.retry(env, false);
            return;
        }
        let mtu = self.qp.mtu.bytes();
        let k = t.psn.diff(t.first_psn).max(0) as u32;
        let offset = k.saturating_mul(mtu);
        let Some(remaining) = t.len.checked_sub(offset) else {
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
        if !ok || (ends && t.psn != t.last_psn) {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        if self.place(env, t.idx, offset, pkt.payload()) {
            self.acked_to(t.psn.next());
            if ends {
                self.finish_wqe(env, t.idx, WcStatus::Success);
            }
        }
    }

    /// An ATOMIC ACK: the original value goes to the WQE's 8-byte buffer.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn on_atomic_ack(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>, t: &Target) {
        let Some(ack) = pkt.atomic_ack_eth() else {
            return;
        };
        if !t.is_atomic || t.psn != t.first_psn || t.d != 0 {
            env.ctr.rcvd_bad_resp += 1;
            return;
        }
        if self.place(env, t.idx, 0, &ack.orig_rem_data.to_le_bytes()) {
            self.acked_to(t.psn.next());
            self.finish_wqe(env, t.idx, WcStatus::Success);
        }
    }

    /// Writes response data into the SGEs of the WQE at `idx` from message byte
    /// `offset`; a protection or DMA fault fails the WQE with `LOC_PROT_ERR` (false).
    fn place(&mut self, env: &mut Env<'_>, idx: usize, offset: u32, data: &[u8]) -> bool {
        let pd = self.qp.pd;
        let Some(w) = self.q.sq.get(idx) else {
            return false;
        };
        if super::sgl::scatter(env.mem, env.dma, pd, &w.wr.sg_list, offset, data).is_err() {
            self.finish_wqe(env, idx, WcStatus::LocProtErr);
            return false;
        }
        true
    }
}
