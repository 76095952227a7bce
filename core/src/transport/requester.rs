//! The requester: turns send WQEs into request packets (segmentation by path MTU into
//! FIRST/MIDDLE/LAST/ONLY, PSN assignment, AckReq policy), within the outstanding-PSN
//! window and the `max_rd_atomic` credits, honouring fences; and rewinds for Go-Back-N
//! (roce-facts §6.1, §6.2; rxe `rxe_req.c`).

use crate::fastpath::layout::{self, TxdWords};
use crate::fastpath::{MsgOp, TxMsg};
use crate::memory::AccessFlags;
use crate::num::{Psn, Rkey};
use crate::wire::atomic::AtomicEthRepr;
use crate::wire::bth::BthRepr;
use crate::wire::deth::DethRepr;
use crate::wire::imm::{IethRepr, ImmDtRepr};
use crate::wire::opcode::Opcode;
use crate::wire::reth::RethRepr;
use crate::wire::ExtHeaders;

use super::entry::{Commit, PayloadSrc, SendWqe, TxDesc};
use super::qp::{Env, QpRef};
use super::verbs::{QpState, QpType, SendFlags, WcStatus, WrOp};

/// Packets a message of `len` bytes needs at `mtu` (at least one).
pub(crate) fn packets(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}

/// Which packet of a message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pos {
    First,
    Middle,
    Last,
    Only,
}

impl Pos {
    fn of(pkt: u32, npkts: u32) -> Self {
        match (pkt == 0, pkt.saturating_add(1) >= npkts) {
            (true, true) => Self::Only,
            (true, false) => Self::First,
            (false, true) => Self::Last,
            (false, false) => Self::Middle,
        }
    }
    fn ends(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
    fn starts(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }
}

/// The RC opcode of a SEND or WRITE packet (UC opcodes are these + 0x20).
fn rc_opcode(op: &WrOp, pos: Pos) -> Opcode {
    match (op, pos) {
        (WrOp::Send | WrOp::SendWithImm { .. } | WrOp::SendWithInv { .. }, Pos::First) => {
            Opcode::RC_SEND_FIRST
        }
        (WrOp::Send | WrOp::SendWithImm { .. } | WrOp::SendWithInv { .. }, Pos::Middle) => {
            Opcode::RC_SEND_MIDDLE
        }
        (WrOp::Send, Pos::Last) => Opcode::RC_SEND_LAST,
        (WrOp::Send, Pos::Only) => Opcode::RC_SEND_ONLY,
        (WrOp::SendWithImm { .. }, Pos::Last) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
        (WrOp::SendWithImm { .. }, Pos::Only) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
        (WrOp::SendWithInv { .. }, Pos::Last) => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
        (WrOp::SendWithInv { .. }, Pos::Only) => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
        (_, Pos::First) => Opcode::RC_RDMA_WRITE_FIRST,
        (_, Pos::Middle) => Opcode::RC_RDMA_WRITE_MIDDLE,
        (WrOp::RdmaWriteWithImm { .. }, Pos::Last) => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (WrOp::RdmaWriteWithImm { .. }, Pos::Only) => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (_, Pos::Last) => Opcode::RC_RDMA_WRITE_LAST,
        (_, Pos::Only) => Opcode::RC_RDMA_WRITE_ONLY,
    }
}

/// What [`QpRef::req_select`] found to send.
enum Next {
    /// Selective repeat resends packet `pkt` (PSN `psn`) of the WQE at `idx`.
    Resend { idx: u16, pkt: u32, psn: Psn },
    /// Packet `pkt` (PSN `psn`) of the WQE at `idx` is next at the cursor.
    Send {
        idx: u16,
        pkt: u32,
        psn: Psn,
        near_window_end: bool,
    },
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    /// The next request packet, if the QP may send one now. Work that produces no
    /// packet (LOCAL_INV, local protection errors, oversized UD sends) is done here.
    /// Out of line: its descriptor is then written straight into the caller's slot
    /// (inlined into `transmit_one`, it was built apart and copied, ~200 instructions
    /// a request packet).
    #[inline(never)]
    pub(crate) fn req_prepare(&mut self, env: &mut Env<'_>) -> Option<TxDesc> {
        // `req_may_send`'s checks: this, then `req_select`'s first round.
        if self.qp.req.fastpath {
            return None;
        }
        let mtu = self.qp.mtu.bytes();
        let (idx, pkt, psn, near_window_end, rtx) = match self.req_select(env)? {
            Next::Resend { idx, pkt, psn } => (idx, pkt, psn, true, true),
            Next::Send {
                idx,
                pkt,
                psn,
                near_window_end,
            } => (idx, pkt, psn, near_window_end, false),
        };
        // One call, its result returned as it is: a descriptor is big to move.
        Some(self.build_request(env, idx, pkt, psn, mtu, near_window_end, rtx))
    }

    /// The next request as a fast-path message descriptor (`docs/fastpath.md` §2.2):
    /// a FLUSH first when the requester was rewound since the last call, then the rest
    /// of the WQE at the cursor (a REPLAY when it was handed out before). The whole
    /// message counts as sent from here on: the hardware holds back what the window
    /// does not allow yet.
    ///
    /// The descriptor's bytes go into `out` (`fastpath::layout`); false when there is
    /// none.
    pub(crate) fn req_take_msg(&mut self, env: &mut Env<'_>, out: &mut TxdWords) -> bool {
        if core::mem::take(&mut self.qp.req.rewound) {
            // The acknowledged PSN goes with the FLUSH: written apart, it opened the
            // hardware's window for the stale descriptor before the FLUSH dropped it.
            let una = self.qp.comp.psn;
            let mut m = self.msg_skeleton(MsgOp::Flush { una }, 0);
            m.first_psn = self.qp.req.psn;
            layout::write_txd_words(&m, &[], out);
            return true;
        }
        self.req_next_msg(env, out).is_some()
    }

    /// The next WQE's descriptor, written into `out` straight from the WQE (its SGEs
    /// are not copied twice).
    fn req_next_msg(&mut self, env: &mut Env<'_>, out: &mut TxdWords) -> Option<()> {
        let Next::Send { idx, pkt, psn, .. } = self.req_select(env)? else {
            // Selective repeat's resends: SR QPs are not on the fast path.
            return None;
        };
        let w = self.q.sq.get(usize::from(idx))?;
        // Local operations never get here (`req_select` does them), nor UD's sends.
        let op = MsgOp::of(&w.wr.op)?;
        let m = self.msg_of(w, op, idx, pkt, psn);
        layout::write_txd_words(&m, &w.wr.sg_list, out);
        if let Some(wr_id) = self.req_hand_out(env, idx, &m) {
            layout::set_txd_cqe(out, wr_id);
        }
        Some(())
    }

    /// Takes over the WQEs the hardware fetched and started itself
    /// (`docs/fastpath.md` §3.8): each one not yet started, from the cursor on, counts as
    /// handed out whole from the cursor's PSN, as `req_next_msg` would have handed it out.
    /// (The hardware counted its SENDs when it fetched them.)
    pub(crate) fn req_adopt(&mut self, env: &mut Env<'_>) {
        let sends = env.ctr.rdma_sends;
        self.req_adopt_all(env);
        env.ctr.rdma_sends = sends;
    }

    fn req_adopt_all(&mut self, env: &mut Env<'_>) {
        loop {
            let idx = self.qp.req.wqe_idx;
            let started = match self.q.sq.get(usize::from(idx)) {
                Some(w) => w.started,
                None => return,
            };
            if started {
                self.qp.req.wqe_idx = idx.saturating_add(1);
                continue;
            }
            let psn = self.qp.req.psn;
            let Some((w, op)) = self
                .q
                .sq
                .get(usize::from(idx))
                .and_then(|w| Some((w, MsgOp::of(&w.wr.op)?)))
            else {
                return;
            };
            let m = self.msg_of(w, op, idx, 0, psn);
            self.req_hand_out(env, idx, &m);
        }
    }

    /// The descriptor of WQE `w` (at `idx`, sending `op`) from packet `pkt` (PSN `psn`,
    /// the first PSN of a WQE not started yet), without its SGEs. Built where it stays:
    /// returned in an `Option`, the `TxMsg` (~130 bytes) was copied out of it again
    /// (~80 instructions per descriptor on the soft core); inlined into its two callers
    /// for the same reason.
    #[inline(always)]
    fn msg_of(&self, w: &SendWqe, op: MsgOp, idx: u16, pkt: u32, psn: Psn) -> TxMsg {
        let (remote_addr, rkey) = match w.wr.op {
            WrOp::AtomicCmpAndSwp {
                remote_addr, rkey, ..
            }
            | WrOp::AtomicFetchAndAdd {
                remote_addr, rkey, ..
            } => (remote_addr, rkey),
            _ => w.wr.op.remote().unwrap_or((0, Rkey(0))),
        };
        TxMsg {
            qpn: self.qp.qpn,
            op,
            solicited: w.wr.send_flags.contains(SendFlags::SOLICITED),
            replay: w.started,
            wqe_index: idx,
            sges: heapless::Vec::new(),
            length: w.len,
            remote_addr,
            rkey,
            first_psn: if w.started { w.first_psn } else { psn },
            start_pkt: pkt,
            end_pkt: 0,
        }
    }

    /// Counts message `m` (the WQE at `idx`, from its packet `m.start_pkt`) as sent:
    /// what `req_commit` does packet by packet, resends aside (the segmenter counts
    /// them). Returns the WQE's `wr_id` when the hardware may write its CQE (§3.7).
    fn req_hand_out(&mut self, env: &mut Env<'_>, idx: u16, m: &TxMsg) -> Option<u64> {
        let op = m.op;
        let w = self.q.sq.get(usize::from(idx))?;
        // The hardware may write a new signaled message's CQE (§3.7) when every WQE
        // before it is a message in flight: its CQE then cannot overtake one the
        // firmware writes (a local operation's, a completed WQE's waiting for CQ room).
        // An atomic's too: the response path retires it only with its ATOMIC
        // ACKNOWLEDGE, after the original value is in its buffer.
        let cqe_hw = !w.started
            && (self.qp.sq_sig_all || w.wr.send_flags.contains(SendFlags::SIGNALED))
            && (idx == 0
                || self
                    .q
                    .sq
                    .iter()
                    .take(usize::from(idx))
                    .all(|p| p.started && !p.done));
        let wr_id = w.wr.wr_id;
        let total = m.psns(self.qp.mtu);
        let (is_send, read_or_atomic) = (
            matches!(
                op,
                MsgOp::Send | MsgOp::SendWithImm(_) | MsgOp::SendWithInv(_)
            ),
            op.is_read_or_atomic(),
        );
        let first = m.first_psn;
        if let Some(w) = self.q.sq.get_mut(usize::from(idx)) {
            w.cqe_hw |= cqe_hw;
            if !w.started {
                w.started = true;
                w.first_psn = first;
                w.last_psn = first.add(total - 1);
                if read_or_atomic && !w.has_credit {
                    w.has_credit = true;
                    self.qp.req.rd_atomic = self.qp.req.rd_atomic.saturating_add(1);
                }
            }
            w.sent_all = true;
        }
        let end = first.add(total);
        // No resends counted here: which of these packets go out again is the
        // segmenter's to know (a FLUSH drops what it had not sent yet), and it counts
        // them (`FastPathCounters::tx_resent`).
        self.qp.req.psn = end;
        if end.after(self.qp.req.max_psn) {
            self.qp.req.max_psn = end;
        }
        self.qp.req.noack_pkts = 0;
        self.qp.req.wqe_idx = idx.saturating_add(1);
        self.qp.req.pkt_idx = 0;
        if is_send {
            env.ctr.rdma_sends += 1;
        }
        if self.qp.comp.retrans_at.is_none() {
            if let Some(t) = self.rto() {
                self.qp.comp.retrans_at = Some(env.now.after_nanos(t));
            }
        }
        cqe_hw.then_some(wr_id)
    }

    /// Executes a local work request (rxe `rxe_do_local_ops`): the status its
    /// completion carries. A failed bind is `MW_BIND_ERR`, any other failure
    /// `LOC_QP_OP_ERR`; either moves the QP to the error state (`finish_wqe`).
    fn local_op(&mut self, env: &mut Env<'_>, op: &WrOp) -> WcStatus {
        let (pd, qpn) = (self.qp.pd, self.qp.qpn);
        match op {
            WrOp::LocalInv { rkey } => match env.mem.invalidate(pd, rkey.0) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            },
            WrOp::BindMw(b) => match env.mem.bind_mw(pd, qpn, b) {
                Ok(_) => WcStatus::Success,
                Err(_) => WcStatus::MwBindErr,
            },
            WrOp::RegMr(r) => match env.mem.reg_fast_mr(pd, r) {
                Ok(_) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            },
            _ => WcStatus::LocQpOpErr,
        }
    }

    /// A descriptor of `op` for the WQE at `idx` with nothing else filled in.
    fn msg_skeleton(&self, op: MsgOp, idx: u16) -> TxMsg {
        TxMsg {
            qpn: self.qp.qpn,
            op,
            solicited: false,
            replay: false,
            wqe_index: idx,
            sges: heapless::Vec::new(),
            length: 0,
            remote_addr: 0,
            rkey: Rkey(0),
            first_psn: Psn::ZERO,
            start_pkt: 0,
            end_pkt: 0,
        }
    }

    /// Whether [`Self::req_prepare`] may have something to send (or work to do on the
    /// way: local operations, failed WQEs). When false it returns `None` at once and
    /// changes nothing, so the engine may leave the QP off its ready list without
    /// asking: on the fast path it returns at its first check, and `req_select`'s first
    /// round returns at [`Self::req_may_select`], or with selective repeat off
    /// (`sr_next_rtx` returns at its first check) and no WQE at the cursor (its `?`).
    /// With selective repeat on, the answer is yes: finding no resend moves its cursor.
    #[inline(always)] // a few loads, asked after every packet
    pub(crate) fn req_may_send(&self) -> bool {
        // Requests on the fast path leave through its descriptors (`req_take_msg`).
        !self.qp.req.fastpath
            && self.req_may_select()
            && (self.sr_on() || usize::from(self.qp.req.wqe_idx) < self.q.sq.len())
    }

    /// Whether the requester may start or continue anything: every round of
    /// [`Self::req_select`] returns `None` at once when not.
    #[inline(always)]
    fn req_may_select(&self) -> bool {
        matches!(self.qp.state, QpState::Rts | QpState::Sqd) && self.qp.comp.rnr_at.is_none()
    }

    /// What the requester sends next, doing on the way the work that produces no
    /// packet.
    #[inline(always)] // the per-packet path of `req_prepare`
    fn req_select(&mut self, env: &mut Env<'_>) -> Option<Next> {
        loop {
            if !self.req_may_select() {
                return None;
            }
            // Selective repeat resends what the responder is missing before new data.
            if let Some((idx, pkt, psn)) = self.sr_next_rtx() {
                return Some(Next::Resend { idx, pkt, psn });
            }
            let idx = self.qp.req.wqe_idx;
            let w = self.q.sq.get(usize::from(idx))?;
            if w.done || w.sent_all {
                self.qp.req.wqe_idx = idx.saturating_add(1);
                self.qp.req.pkt_idx = 0;
                continue;
            }
            let qp_type = self.qp.qp_type;
            let mtu = self.qp.mtu.bytes();
            // The opcode only: a WrOp is large to copy (BIND_MW, REG_MR).
            let opcode = w.wr.op.opcode();
            if !w.started {
                // Start of a WQE: SQD starts nothing new; a fence waits for every
                // earlier WQE to complete (rxe's rule, stricter than READ/ATOMIC only).
                if self.qp.state == QpState::Sqd {
                    return None;
                }
                // Every WQE before the cursor is a message in flight (the queue drops a
                // WQE when it completes): the next waits for one to complete.
                if qp_type == QpType::Rc && u32::from(idx) >= env.cfg.max_msgs_in_flight {
                    return None;
                }
                if w.wr.send_flags.contains(SendFlags::FENCE) && idx > 0 {
                    return None;
                }
                if opcode.is_local() {
                    let op = w.wr.op;
                    let status = self.local_op(env, &op);
                    if let Some(w) = self.q.sq.get_mut(usize::from(idx)) {
                        w.started = true;
                        w.sent_all = true;
                    }
                    self.finish_wqe(env, usize::from(idx), status);
                    continue;
                }
                if qp_type == QpType::Ud && w.len > mtu {
                    // C10-93.1.1 (as rxe): an oversized UD message emits nothing and
                    // completes without error.
                    let psn = self.qp.req.psn;
                    if let Some(w) = self.q.sq.get_mut(usize::from(idx)) {
                        w.started = true;
                        w.sent_all = true;
                        w.first_psn = psn;
                        w.last_psn = psn;
                    }
                    self.qp.req.psn = psn.next();
                    self.finish_wqe(env, usize::from(idx), WcStatus::Success);
                    continue;
                }
                let need = if opcode.is_read_or_atomic() {
                    AccessFlags::LOCAL_WRITE
                } else {
                    AccessFlags::NONE
                };
                if super::sgl::check(env.mem, self.qp.pd, &w.wr.sg_list, need).is_err() {
                    if let Some(w) = self.q.sq.get_mut(usize::from(idx)) {
                        w.started = true;
                    }
                    self.finish_wqe(env, usize::from(idx), WcStatus::LocProtErr);
                    return None;
                }
                if opcode.is_read_or_atomic()
                    && !w.has_credit
                    && self.qp.req.rd_atomic >= self.qp.max_rd_atomic
                {
                    return None;
                }
            }
            // The outstanding-PSN window (RC only).
            let outstanding = self.qp.req.psn.diff(self.qp.comp.psn);
            let window = self.send_window(env);
            if qp_type == QpType::Rc && (outstanding < 0 || outstanding as u32 >= window) {
                return None;
            }
            let near_window_end = outstanding as u32 + 1 >= window;
            let (pkt, psn) = (self.qp.req.pkt_idx, self.qp.req.psn);
            return Some(Next::Send {
                idx,
                pkt,
                psn,
                near_window_end,
            });
        }
    }

    /// Packet `pkt` (PSN `psn`) of the WQE at `idx`; `rtx` for a selective-repeat
    /// resend.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)] // one caller, per packet: its descriptor is built in place
    fn build_request(
        &self,
        env: &Env<'_>,
        idx: u16,
        pkt: u32,
        psn: Psn,
        mtu: u32,
        near_window_end: bool,
        rtx: bool,
    ) -> TxDesc {
        let qp = &*self.qp;
        // `req_prepare` found the WQE; fall back to an empty SEND if it vanished.
        let w = self.q.sq.get(usize::from(idx));
        // (A UD WR's destination is read in its arm only: taken here with the rest, its
        // address vector was copied through the stack for every request, three 18-byte
        // `memcpy`s of ~150 instructions on the soft core.)
        let (op, len, flags, first_psn) = match w {
            Some(w) => (
                w.wr.op,
                w.len,
                w.wr.send_flags,
                if w.started { w.first_psn } else { psn },
            ),
            None => (WrOp::Send, 0, SendFlags::NONE, psn),
        };
        let rc = qp.qp_type == QpType::Rc;
        let mut ext = ExtHeaders::default();
        let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, qp.dest_qpn, psn);
        bth.pkey = qp.pkey;
        let mut payload_len = 0;
        let mut src = PayloadSrc::None;
        let mut ud_av = None;
        let (psns, total_psns, ends, is_send);
        match op {
            WrOp::RdmaRead { remote_addr, rkey } => {
                // A (possibly resumed) READ request: the responses already received
                // are skipped (`pkt` of them, rxe `req_retry`).
                let total = packets(len, mtu);
                let k = pkt.min(total - 1);
                let offset = k.saturating_mul(mtu).min(len);
                bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
                bth.psn = first_psn.add(k);
                ext.reth = Some(RethRepr {
                    va: remote_addr.wrapping_add(u64::from(offset)),
                    rkey,
                    dma_len: len - offset,
                });
                psns = total - k;
                total_psns = total;
                ends = true;
                is_send = false;
            }
            WrOp::AtomicCmpAndSwp {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                bth.opcode = Opcode::RC_CMP_SWAP;
                ext.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: swap,
                    compare,
                });
                (psns, total_psns, ends, is_send) = (1, 1, true, false);
            }
            WrOp::AtomicFetchAndAdd {
                remote_addr,
                rkey,
                add,
            } => {
                bth.opcode = Opcode::RC_FETCH_ADD;
                ext.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
                (psns, total_psns, ends, is_send) = (1, 1, true, false);
            }
            _ if qp.qp_type == QpType::Ud => {
                bth.opcode = if op.imm().is_some() {
                    Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
                } else {
                    Opcode::UD_SEND_ONLY
                };
                let dest = w.and_then(|w| w.wr.ud).unwrap_or_default();
                bth.dest_qp = dest.remote_qpn;
                ext.deth = Some(DethRepr {
                    qkey: dest.remote_qkey,
                    src_qp: qp.qpn,
                });
                ext.immdt = op.imm().map(|imm| ImmDtRepr { imm });
                bth.se = flags.contains(SendFlags::SOLICITED);
                payload_len = len;
                src = PayloadSrc::Sq { idx, offset: 0 };
                ud_av = Some(dest.av);
                (psns, total_psns, ends, is_send) = (1, 1, true, true);
            }
            _ => {
                // SEND / WRITE on RC or UC.
                let npkts = packets(len, mtu);
                let pos = Pos::of(pkt, npkts);
                let offset = pkt.saturating_mul(mtu).min(len);
                payload_len = (len - offset).min(mtu);
                let mut opcode = rc_opcode(&op, pos);
                if qp.qp_type == QpType::Uc {
                    opcode = Opcode(opcode.0 | 0x20);
                }
                bth.opcode = opcode;
                if pos.starts() {
                    if let Some((va, rkey)) = op.remote() {
                        ext.reth = Some(RethRepr {
                            va,
                            rkey,
                            dma_len: len,
                        });
                    }
                }
                if pos.ends() {
                    ext.immdt = op.imm().map(|imm| ImmDtRepr { imm });
                    if let WrOp::SendWithInv { rkey } = op {
                        ext.ieth = Some(IethRepr { rkey });
                    }
                    bth.se = flags.contains(SendFlags::SOLICITED);
                }
                if let (true, WrOp::RdmaWrite { remote_addr, rkey }) = (self.q.sr.enabled(), op) {
                    super::sack::write_piece(
                        &mut bth,
                        &mut ext,
                        remote_addr,
                        rkey,
                        offset,
                        payload_len,
                    );
                }
                src = PayloadSrc::Sq { idx, offset };
                psns = 1;
                total_psns = npkts;
                ends = pos.ends();
                is_send = matches!(
                    op,
                    WrOp::Send | WrOp::SendWithImm { .. } | WrOp::SendWithInv { .. }
                );
            }
        }
        let ack_req = rc
            && (ends
                || qp.req.noack_pkts.saturating_add(1) >= env.cfg.max_pkts_per_ack
                || near_window_end);
        bth.ack_req = ack_req;
        bth.pad_count = (payload_len.wrapping_neg() & 3) as u8;
        TxDesc {
            bth,
            ext,
            payload_len,
            src,
            ud_av,
            commit: Commit::Request {
                idx,
                psns,
                total_psns,
                ends,
                ack_req,
                is_send,
                rtx,
            },
        }
    }

    pub(crate) fn req_commit(&mut self, env: &mut Env<'_>, d: &TxDesc) {
        let Commit::Request {
            idx,
            psns,
            total_psns,
            ends,
            ack_req,
            is_send,
            rtx,
        } = d.commit
        else {
            return;
        };
        if rtx {
            self.sr_commit_rtx(env, d);
            return;
        }
        let rc = self.qp.qp_type == QpType::Rc;
        let psn = self.qp.req.psn;
        let Some(w) = self.q.sq.get_mut(usize::from(idx)) else {
            return;
        };
        if !w.started {
            w.started = true;
            w.first_psn = psn;
            w.last_psn = psn.add(total_psns.saturating_sub(1));
            if w.wr.op.opcode().is_read_or_atomic() && !w.has_credit {
                w.has_credit = true;
                self.qp.req.rd_atomic = self.qp.req.rd_atomic.saturating_add(1);
            }
        }
        if d.bth.psn.before(self.qp.req.max_psn) {
            env.ctr.retransmitted_pkts += 1;
        }
        let next = d.bth.psn.add(psns);
        self.qp.req.psn = next;
        if next.after(self.qp.req.max_psn) {
            self.qp.req.max_psn = next;
        }
        self.qp.req.noack_pkts = if ack_req {
            0
        } else {
            self.qp.req.noack_pkts.saturating_add(1)
        };
        if ends {
            w.sent_all = true;
            if !rc {
                w.done = true;
            }
            self.qp.req.wqe_idx = idx.saturating_add(1);
            self.qp.req.pkt_idx = 0;
            if is_send {
                env.ctr.rdma_sends += 1;
            }
        } else {
            self.qp.req.pkt_idx = self.qp.req.pkt_idx.saturating_add(1);
        }
        if rc {
            if self.qp.comp.retrans_at.is_none() {
                if let Some(t) = self.rto() {
                    self.qp.comp.retrans_at = Some(env.now.after_nanos(t));
                }
            }
        } else {
            self.drain_done(env);
        }
    }

    /// After a Go-Back-N rewind, a late acknowledgement may cover PSNs the cursor is
    /// about to send again: move the cursor forward to the oldest unacknowledged PSN.
    pub(crate) fn catch_up(&mut self) {
        let p = self.qp.comp.psn;
        if !p.after(self.qp.req.psn) {
            return;
        }
        let in_flight = self
            .q
            .sq
            .iter()
            .any(|w| w.started && !w.done && !w.last_psn.before(p));
        if in_flight {
            self.go_back_n(p);
        } else {
            // Every started WQE is finished: resume at the first unfinished one.
            let i = self
                .q
                .sq
                .iter()
                .position(|w| !w.done)
                .unwrap_or(self.q.sq.len());
            self.qp.req.wqe_idx = u16::try_from(i).unwrap_or(u16::MAX);
            self.qp.req.pkt_idx = 0;
            self.qp.req.psn = p;
            self.qp.req.noack_pkts = 0;
        }
    }

    /// Go-Back-N: the next packet sent is the one with PSN `p` (the oldest
    /// unacknowledged), and everything after it is sent again.
    pub(crate) fn go_back_n(&mut self, p: Psn) {
        self.q.sr.cancel_rtx();
        let mut found = None;
        for (i, w) in self.q.sq.iter().enumerate() {
            if !w.started {
                break;
            }
            if w.done {
                continue;
            }
            if !w.last_psn.before(p) {
                found = Some((i, w.first_psn));
                break;
            }
        }
        let Some((i, first)) = found else {
            return;
        };
        for w in self.q.sq.iter_mut().skip(i) {
            if !w.started {
                break;
            }
            if !w.done {
                w.sent_all = false;
            }
        }
        let k = p.diff(first).max(0) as u32;
        self.qp.req.wqe_idx = u16::try_from(i).unwrap_or(u16::MAX);
        self.qp.req.pkt_idx = k;
        self.qp.req.psn = first.add(k);
        self.qp.req.noack_pkts = 0;
        self.qp.req.rewound = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_counts() {
        assert_eq!(packets(0, 256), 1);
        assert_eq!(packets(1, 256), 1);
        assert_eq!(packets(256, 256), 1);
        assert_eq!(packets(257, 256), 2);
        assert_eq!(packets(1 << 31, 256), 1 << 23);
    }

    #[test]
    fn positions() {
        assert_eq!(Pos::of(0, 1), Pos::Only);
        assert_eq!(Pos::of(0, 3), Pos::First);
        assert_eq!(Pos::of(1, 3), Pos::Middle);
        assert_eq!(Pos::of(2, 3), Pos::Last);
        assert_eq!(
            rc_opcode(
                &WrOp::SendWithInv {
                    rkey: crate::num::Rkey(1)
                },
                Pos::Only
            ),
            Opcode::RC_SEND_ONLY_WITH_INVALIDATE
        );
        assert_eq!(
            rc_opcode(
                &WrOp::RdmaWriteWithImm {
                    remote_addr: 0,
                    rkey: crate::num::Rkey(1),
                    imm: 0
                },
                Pos::First
            ),
            Opcode::RC_RDMA_WRITE_FIRST
        );
    }
}
