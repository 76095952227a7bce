//! The responder: classifies request PSNs (24-bit wrap), executes SEND / WRITE / READ /
//! ATOMIC with their protection checks, replays duplicates (re-ACK SEND/WRITE, re-send
//! READ responses, replay ATOMIC results from the ring), and produces ACKs (coalesced),
//! NAKs (one per episode), RNR NAKs, READ responses and ATOMIC ACKs in PSN order
//! (roce-facts §6.3; rxe `rxe_resp.c`). UC and UD receive paths live here too.

use crate::memory::AccessFlags;
use crate::num::{Psn, Rkey};
use crate::wire::aeth::{AethRepr, NakCode, RnrTimer, Syndrome};
use crate::wire::atomic::AtomicAckEthRepr;
use crate::wire::bth::BthRepr;
use crate::wire::imm::{IethRepr, ImmDtRepr};
use crate::wire::opcode::{Operation, Position};
use crate::wire::reth::RethRepr;
use crate::wire::{ExtHeaders, Opcode, Packet};

use super::counters::Counters;
use super::entry::{AckOut, Commit, CurOp, ItemKind, PayloadSrc, RdRes, RespItem, TxDesc};
use super::qp::{CompletionSink, Env, QpRef};
use super::requester::packets;
use super::sgl::SglError;
use super::verbs::{QpState, QpType, WcFlags, WcOpcode, WcStatus, WorkCompletion, MAX_MSG_SIZE};

/// Size of the GRH area at the start of a UD receive buffer (roce-facts §6.3).
pub const GRH_LEN: usize = 40;

/// How a request failed its checks.
pub(crate) enum Fail {
    /// RC: NAK with `code` and move to ERR; the receive WQE in use (if any) completes
    /// with `status`. UC/UD: drop the message.
    Fatal(NakCode, WcStatus),
    /// Drop silently (UC/UD class D; RC resource shortage).
    Drop,
}

impl Fail {
    /// NAK "invalid request"; the receive WQE completes with `REM_INV_REQ_ERR`.
    const INV_REQ: Fail = Fail::Fatal(NakCode::InvalidRequest, WcStatus::RemInvReqErr);
    /// NAK "remote access error"; the receive WQE completes with `REM_ACCESS_ERR`.
    const ACC_ERR: Fail = Fail::Fatal(NakCode::RemoteAccessError, WcStatus::RemAccessErr);
}

/// Whether an ACK or NAK (`new_psn`) owed after another (`old_psn`, `old`) of the same
/// QP replaces it when the two go as one: the later PSN wins, and at equal PSNs a NAK
/// replaces an ACK (never the reverse). The engine's pending ACK merges so, and the fast
/// path's queue of them behind a READ (`docs/fastpath.md` §3.4).
pub fn ack_supersedes(old_psn: Psn, old: Syndrome, new_psn: Psn) -> bool {
    new_psn.after(old_psn) || (new_psn == old_psn && matches!(old, Syndrome::Ack(_)))
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    /// Queues an ACK or NAK, merging with the one already waiting ([`ack_supersedes`]).
    pub(crate) fn set_pending(&mut self, new: AckOut) {
        let keep_old = self
            .qp
            .resp
            .pending
            .is_some_and(|o| !ack_supersedes(o.psn, o.syndrome, new.psn));
        if !keep_old {
            self.qp.resp.pending = Some(new);
        }
    }

    /// A class A/C error: NAK, complete the receive WQE in use with `status` (if any),
    /// and go to ERR.
    pub(crate) fn resp_fatal(
        &mut self,
        env: &mut Env<'_>,
        code: NakCode,
        psn: Psn,
        recv_status: Option<WcStatus>,
    ) {
        if let Some(status) = recv_status {
            if let Some(r) = self.q.rq.front() {
                let wc = WorkCompletion::new(r.wr.wr_id, self.qp.qpn, WcOpcode::Recv, status);
                if env.cqs.push(self.qp.recv_cq, wc) {
                    self.q.rq.pop_front();
                }
            }
        }
        if self.qp.qp_type == QpType::Rc {
            self.qp.resp.pending = Some(AckOut {
                syndrome: Syndrome::Nak(code),
                psn,
            });
            self.qp.resp.fatal_nak = true;
        }
        self.enter_error(env);
    }

    /// Handles a request packet addressed to this QP.
    pub(crate) fn resp_handle(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>, net_hdr: &[u8]) {
        if !self.qp.state.processes_receive() {
            env.ctr.rcvd_wrong_state += 1;
            return;
        }
        match self.qp.qp_type {
            QpType::Rc => self.rc_request(env, pkt),
            QpType::Uc => self.uc_request(env, pkt),
            QpType::Ud => self.ud_request(env, pkt, net_hdr),
        }
    }

    fn rc_request(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) {
        let psn = pkt.psn();
        let diff = psn.diff(self.qp.resp.epsn);
        if diff > 0 {
            if self.sr_out_of_order(env, pkt) {
                return;
            }
            // A packet was lost: one NAK per gap.
            env.ctr.out_of_seq_request += 1;
            if !self.qp.resp.nak_sent {
                self.qp.resp.nak_sent = true;
                let epsn = self.qp.resp.epsn;
                self.set_pending(AckOut {
                    syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
                    psn: epsn,
                });
            }
            return;
        }
        if diff < 0 {
            env.ctr.duplicate_request += 1;
            self.duplicate(env, pkt);
            return;
        }
        self.qp.resp.nak_sent = false;
        let from = self.qp.resp.epsn;
        match self.execute(env, pkt) {
            Ok(()) => self.sr_advance(from),
            Err(Fail::Drop) => env.ctr.resp_dropped += 1,
            Err(Fail::Fatal(code, status)) => {
                let in_use =
                    self.qp.resp.cur == CurOp::Send || pkt.info().operation == Operation::Send;
                self.resp_fatal(env, code, psn, in_use.then_some(status));
            }
        }
    }

    fn uc_request(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) {
        let psn = pkt.psn();
        let starts = pkt.info().position.starts();
        if psn.before(self.qp.resp.epsn) {
            // A duplicate or a straggler from the past: neither delivered nor allowed
            // to disturb the message in progress (rxe would resync on it if it starts
            // a message, delivering an old message after a newer one).
            env.ctr.duplicate_request += 1;
            return;
        }
        let resync = self.qp.resp.drop_msg || psn != self.qp.resp.epsn;
        // A new message while another was in progress abandons the old one (the
        // receive WQE is reused from its start).
        if starts && self.qp.resp.cur != CurOp::None {
            self.abandon();
        }
        if resync {
            if !starts {
                self.abandon();
                self.qp.resp.drop_msg = true;
                env.ctr.resp_dropped += 1;
                return;
            }
            self.qp.resp.drop_msg = false;
        }
        match self.execute(env, pkt) {
            Ok(()) => {}
            Err(Fail::Drop) | Err(Fail::Fatal(_, _)) => {
                self.abandon();
                self.qp.resp.drop_msg = true;
                env.ctr.resp_dropped += 1;
            }
        }
    }

    /// Forgets a partly received UC message.
    fn abandon(&mut self) {
        self.qp.resp.cur = CurOp::None;
        self.qp.resp.recv_off = 0;
    }

    fn ud_request(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>, net_hdr: &[u8]) {
        let Some(deth) = pkt.deth() else {
            env.ctr.resp_dropped += 1;
            return;
        };
        if deth.qkey != self.qp.qkey {
            env.ctr.rcvd_qkey_err += 1;
            return;
        }
        let n = pkt.payload().len();
        if n as u64 > u64::from(self.qp.mtu.bytes())
            || !env.cqs.has_room(self.qp.recv_cq)
            || !self.recv_wqe_ready(env)
        {
            env.ctr.resp_dropped += 1;
            return;
        }
        // The GRH area: 20 zero bytes then the IPv4 header, or the 40-byte IPv6 header.
        let mut grh = [0u8; GRH_LEN];
        let h = net_hdr.get(..GRH_LEN.min(net_hdr.len())).unwrap_or(&[]);
        let at = GRH_LEN - h.len();
        if let Some(dst) = grh.get_mut(at..) {
            dst.copy_from_slice(h);
        }
        let pd = self.qp.pd;
        let Some(r) = self.q.rq.front() else { return };
        let wr_id = r.wr.wr_id;
        let res =
            super::sgl::scatter(env.mem, env.dma, pd, &r.wr.sg_list, 0, &grh).and_then(|()| {
                super::sgl::scatter(
                    env.mem,
                    env.dma,
                    pd,
                    &r.wr.sg_list,
                    GRH_LEN as u32,
                    pkt.payload(),
                )
            });
        match res {
            Ok(()) => {}
            Err(SglError::Overflow) => {
                env.ctr.resp_dropped += 1;
                return;
            }
            Err(_) => {
                // Malformed receive WQE: class A for every transport.
                self.resp_fatal(
                    env,
                    NakCode::RemoteOperationalError,
                    pkt.psn(),
                    Some(WcStatus::LocQpOpErr),
                );
                return;
            }
        }
        self.q.rq.pop_front();
        let mut wc = WorkCompletion::new(wr_id, self.qp.qpn, WcOpcode::Recv, WcStatus::Success);
        wc.byte_len = (GRH_LEN + n) as u32;
        wc.src_qp = deth.src_qp;
        wc.wc_flags = WcFlags::GRH;
        wc.solicited = pkt.se();
        if let Some(imm) = pkt.immdt() {
            wc.imm_data = imm.imm;
            wc.wc_flags = wc.wc_flags | WcFlags::WITH_IMM;
        }
        env.cqs.push(self.qp.recv_cq, wc);
        env.ctr.rdma_recvs += 1;
    }

    /// The checks and execution of an in-sequence RC or UC request
    /// (rxe `check_op_seq` .. `execute`): the opcode and the QP's rights, a receiver
    /// ready for it, its length; then the operation; then ePSN and MSN, the receive
    /// completion and the ACK.
    pub(crate) fn execute(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) -> Result<(), Fail> {
        let info = pkt.info();
        let (op, pos) = (info.operation, info.position);
        self.check_op(op, pos)?;
        // Decoded once here; the other extended headers as each operation needs them.
        let bth = pkt.bth();
        let immdt = pkt.immdt();
        let write_imm_end = op == Operation::RdmaWrite && pos.ends() && immdt.is_some();
        let needs_rwr = op == Operation::Send || write_imm_end;
        let completes = (op == Operation::Send && pos.ends()) || write_imm_end;
        if self.receiver_not_ready(env, needs_rwr, completes, bth.psn)? {
            return Ok(());
        }
        let reth = pkt.reth();
        let payload = pkt.payload();
        self.check_length(payload.len(), pos, reth.as_ref())?;
        let ieth = pkt.ieth();
        match op {
            Operation::Send => self.exec_send(env, payload, pos, ieth)?,
            Operation::RdmaWrite => {
                self.exec_write(env, payload, pos, reth.as_ref(), bth.pad_count)?
            }
            Operation::RdmaReadRequest => return self.exec_read(env, bth.psn, reth),
            Operation::CompareSwap | Operation::FetchAdd => {
                return self.exec_atomic(env, pkt, op, bth.psn)
            }
            _ => return Err(Fail::Drop),
        }
        self.advance(bth.psn, pos.ends());
        if completes {
            self.complete_recv(
                env.cqs,
                env.ctr,
                op == Operation::RdmaWrite,
                bth.se,
                immdt,
                ieth,
            );
        }
        if self.qp.qp_type == QpType::Rc && bth.ack_req {
            self.set_pending(AckOut {
                syndrome: Syndrome::ACK,
                psn: bth.psn,
            });
        }
        Ok(())
    }

    /// The opcode fits the message in progress, the QP's access flags allow the
    /// operation, and a READ/ATOMIC has a responder resource.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn check_op(&self, op: Operation, pos: Position) -> Result<(), Fail> {
        let seq_ok = match self.qp.resp.cur {
            CurOp::Send => op == Operation::Send && !pos.starts(),
            CurOp::Write => op == Operation::RdmaWrite && !pos.starts(),
            CurOp::None => pos.starts(),
        };
        if !seq_ok {
            return Err(Fail::INV_REQ);
        }
        let need = match op {
            Operation::Send => AccessFlags::NONE,
            Operation::RdmaWrite => AccessFlags::REMOTE_WRITE,
            Operation::RdmaReadRequest => AccessFlags::REMOTE_READ,
            Operation::CompareSwap | Operation::FetchAdd => AccessFlags::REMOTE_ATOMIC,
            _ => return Err(Fail::Drop),
        };
        if !self.qp.access.contains(need) {
            return Err(Fail::INV_REQ);
        }
        let rd_atomic = matches!(
            op,
            Operation::RdmaReadRequest | Operation::CompareSwap | Operation::FetchAdd
        );
        if rd_atomic {
            if self.qp.max_dest_rd_atomic == 0 {
                return Err(Fail::INV_REQ);
            }
            if self.q.out.len() >= usize::from(self.qp.max_dest_rd_atomic) || self.q.out.is_full() {
                return Err(Fail::Drop);
            }
        }
        Ok(())
    }

    /// A receive WQE is at the head of the QP's queue; a QP attached to an SRQ takes
    /// one from it now (and keeps it until the message completes).
    fn recv_wqe_ready(&mut self, env: &mut Env<'_>) -> bool {
        if self.q.rq.is_empty() {
            if let Some(w) = self.qp.srq.and_then(|h| env.srqs.take(h)) {
                // The QP's own queue is empty, so there is room for this one.
                let _ = self.q.rq.push_back(w);
            }
        }
        !self.q.rq.is_empty()
    }

    /// True when the packet needs a receive WQE that is not posted, or completes one
    /// into a full CQ: RC answers with an RNR NAK for `psn` (ePSN stays), UC drops.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn receiver_not_ready(
        &mut self,
        env: &mut Env<'_>,
        needs_rwr: bool,
        completes: bool,
        psn: Psn,
    ) -> Result<bool, Fail> {
        let cq_full = completes && !env.cqs.has_room(self.qp.recv_cq);
        // An SRQ's WQE is taken only when the message can go on.
        let no_wqe = needs_rwr && !cq_full && !self.recv_wqe_ready(env);
        if !cq_full && !no_wqe {
            return Ok(false);
        }
        if self.qp.qp_type != QpType::Rc {
            return Err(Fail::Drop);
        }
        // The RNR NAK counts as the episode's NAK, so packets already in flight behind
        // it draw no sequence-error NAK.
        env.ctr.send_rnr_err += 1;
        self.qp.resp.nak_sent = true;
        let t = RnrTimer::new(self.qp.min_rnr_timer);
        self.set_pending(AckOut {
            syndrome: Syndrome::RnrNak(t),
            psn,
        });
        Ok(true)
    }

    /// Payload length against the packet's place in the message (roce-facts §6.2), and
    /// the RETH's length against the largest message.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn check_length(&self, n: usize, pos: Position, reth: Option<&RethRepr>) -> Result<(), Fail> {
        let mtu = self.qp.mtu.bytes() as usize;
        let len_ok = match pos {
            Position::Only => n <= mtu,
            Position::First | Position::Middle => n == mtu,
            Position::Last => n >= 1 && n <= mtu,
        };
        if !len_ok || reth.is_some_and(|r| u64::from(r.dma_len) > MAX_MSG_SIZE) {
            return Err(Fail::INV_REQ);
        }
        Ok(())
    }

    /// A SEND packet: its payload into the head receive WQE at the running offset, and
    /// the key a SEND_WITH_INV names invalidated.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn exec_send(
        &mut self,
        env: &mut Env<'_>,
        payload: &[u8],
        pos: Position,
        ieth: Option<IethRepr>,
    ) -> Result<(), Fail> {
        let pd = self.qp.pd;
        let off = if pos.starts() {
            0
        } else {
            self.qp.resp.recv_off
        };
        let Some(r) = self.q.rq.front() else {
            return Err(Fail::Drop);
        };
        match super::sgl::scatter(env.mem, env.dma, pd, &r.wr.sg_list, off, payload) {
            Ok(()) => {}
            Err(SglError::Overflow) => {
                return Err(Fail::Fatal(NakCode::InvalidRequest, WcStatus::LocLenErr))
            }
            Err(_) => {
                return Err(Fail::Fatal(
                    NakCode::RemoteOperationalError,
                    WcStatus::LocQpOpErr,
                ))
            }
        }
        self.qp.resp.recv_off = off.saturating_add(payload.len() as u32);
        if let Some(ieth) = ieth {
            if env.mem.invalidate(pd, ieth.rkey.0).is_err() {
                return Err(Fail::INV_REQ);
            }
        }
        self.qp.resp.cur = if pos.ends() { CurOp::None } else { CurOp::Send };
        Ok(())
    }

    /// A WRITE packet: a RETH (FIRST/ONLY) opens the target window; the key, bounds and
    /// rights of what is left of it are checked on every packet, the payload and pad
    /// (`pad`, the BTH pad count) must fit the position, and the payload is placed at
    /// the running address.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn exec_write(
        &mut self,
        env: &mut Env<'_>,
        payload: &[u8],
        pos: Position,
        reth: Option<&RethRepr>,
        pad: u8,
    ) -> Result<(), Fail> {
        let zero = if let Some(reth) = reth {
            self.qp.resp.va = reth.va;
            self.qp.resp.rkey = reth.rkey;
            self.qp.resp.resid = reth.dma_len;
            self.qp.resp.length = reth.dma_len;
            reth.dma_len == 0
        } else {
            false
        };
        let n = payload.len();
        let n32 = n as u32;
        let (va, rkey, resid) = (self.qp.resp.va, self.qp.resp.rkey, self.qp.resp.resid);
        if zero {
            if n != 0 {
                return Err(Fail::INV_REQ);
            }
        } else {
            if env
                .mem
                .check_remote(
                    self.qp.pd,
                    self.qp.qpn,
                    rkey,
                    va,
                    u64::from(resid),
                    AccessFlags::REMOTE_WRITE,
                )
                .is_err()
            {
                return Err(Fail::ACC_ERR);
            }
            let mtu = self.qp.mtu.bytes() as usize;
            let ok = if resid as usize > mtu {
                n == mtu && pad == 0 && !pos.ends()
            } else {
                n32 == resid && u32::from(pad) == (resid.wrapping_neg() & 3) && pos.ends()
            };
            if !ok {
                return Err(Fail::INV_REQ);
            }
            if env.dma.write(va, payload).is_err() {
                return Err(Fail::Fatal(
                    NakCode::RemoteOperationalError,
                    WcStatus::RemOpErr,
                ));
            }
            self.qp.resp.va = va.wrapping_add(u64::from(n32));
            self.qp.resp.resid = resid - n32;
        }
        self.qp.resp.cur = if pos.ends() {
            CurOp::None
        } else {
            CurOp::Write
        };
        Ok(())
    }

    /// A READ request: checked once for the whole range, recorded in the replay ring,
    /// and queued as a response stream; ePSN moves past every response PSN.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn exec_read(
        &mut self,
        env: &mut Env<'_>,
        psn: Psn,
        reth: Option<RethRepr>,
    ) -> Result<(), Fail> {
        let Some(reth) = reth else {
            return Err(Fail::INV_REQ);
        };
        if reth.dma_len != 0
            && env
                .mem
                .check_remote(
                    self.qp.pd,
                    self.qp.qpn,
                    reth.rkey,
                    reth.va,
                    u64::from(reth.dma_len),
                    AccessFlags::REMOTE_READ,
                )
                .is_err()
        {
            return Err(Fail::ACC_ERR);
        }
        // MSN counts the READ on arrival (IBTA C9-148, as rxe).
        self.qp.resp.msn = self.qp.resp.msn.add(1);
        let last = self.record_read(psn, reth.va, reth.rkey, reth.dma_len);
        let item = RespItem {
            ack_before: self.qp.resp.pending.take(),
            kind: ItemKind::Read {
                psn,
                va: reth.va,
                rkey: reth.rkey,
                resid: reth.dma_len,
                first: true,
                msn: self.qp.resp.msn,
            },
        };
        let _ = self.q.out.push_back(item);
        self.qp.resp.epsn = last.next();
        Ok(())
    }

    /// Records a READ of `len` bytes at `va` starting at PSN `psn` in the next slot of
    /// the replay ring (where a duplicate of it is answered from): the READ's last PSN. Also what the fast path's `READ` event does (the hardware took
    /// the request and sends the responses).
    pub(crate) fn record_read(&mut self, psn: Psn, va: u64, rkey: Rkey, len: u32) -> Psn {
        let last = psn.add(packets(len, self.qp.mtu.bytes()) - 1);
        let slot = self.next_slot();
        if let Some(r) = self.q.res.get_mut(usize::from(slot)) {
            *r = RdRes::Read {
                first_psn: psn,
                last_psn: last,
                va,
                len,
                rkey,
            };
        }
        last
    }

    /// Records the original value `orig` of the atomic at PSN `psn` in the next slot of
    /// the replay ring (where a duplicate of it is answered from). Also what the fast
    /// path's `ATOMIC` event does (the hardware executed the atomic and sends its ATOMIC
    /// ACKNOWLEDGE).
    pub(crate) fn record_atomic(&mut self, psn: Psn, orig: u64) {
        let slot = self.next_slot();
        if let Some(r) = self.q.res.get_mut(usize::from(slot)) {
            *r = RdRes::Atomic { psn, orig };
        }
    }

    /// An ATOMIC: executed once on the little-endian `u64` it names, its original value
    /// kept in the replay ring and queued as the ATOMIC ACK.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn exec_atomic(
        &mut self,
        env: &mut Env<'_>,
        pkt: &Packet<'_>,
        op: Operation,
        psn: Psn,
    ) -> Result<(), Fail> {
        let Some(a) = pkt.atomic_eth() else {
            return Err(Fail::INV_REQ);
        };
        if env
            .mem
            .check_remote(
                self.qp.pd,
                self.qp.qpn,
                a.rkey,
                a.va,
                8,
                AccessFlags::REMOTE_ATOMIC,
            )
            .is_err()
        {
            return Err(Fail::ACC_ERR);
        }
        if a.va & 7 != 0 {
            return Err(Fail::INV_REQ);
        }
        // Target memory holds a little-endian u64 (the host order of x86 and RISC-V
        // hosts; rxe uses the CPU's native order).
        let mut b = [0u8; 8];
        if env.dma.read(a.va, &mut b).is_err() {
            return Err(Fail::Fatal(
                NakCode::RemoteOperationalError,
                WcStatus::RemOpErr,
            ));
        }
        let orig = u64::from_le_bytes(b);
        let new = a.apply(op == Operation::CompareSwap, orig);
        if env.dma.write(a.va, &new.to_le_bytes()).is_err() {
            return Err(Fail::Fatal(
                NakCode::RemoteOperationalError,
                WcStatus::RemOpErr,
            ));
        }
        self.qp.resp.msn = self.qp.resp.msn.add(1);
        self.record_atomic(psn, orig);
        let item = RespItem {
            ack_before: self.qp.resp.pending.take(),
            kind: ItemKind::Atomic {
                psn,
                orig,
                msn: self.qp.resp.msn,
            },
        };
        let _ = self.q.out.push_back(item);
        self.qp.resp.epsn = psn.next();
        Ok(())
    }

    /// After a SEND or WRITE packet: ePSN past it, and MSN at the end of a message.
    #[inline(always)] // one caller: a step of the hot path, not a call
    fn advance(&mut self, psn: Psn, ends: bool) {
        if ends {
            self.qp.resp.msn = self.qp.resp.msn.add(1);
        }
        self.qp.resp.epsn = psn.next();
    }

    /// Completes the head receive WQE for a finished SEND or WRITE with immediate.
    /// Given the CQs and counters only, and generic over the CQs: the fast path's
    /// `MSG_DONE` (`Engine::fastpath_msg_done`) completes without a whole `Env` and
    /// with the engine's own table, whose push it inlines.
    pub(crate) fn complete_recv<C: CompletionSink + ?Sized>(
        &mut self,
        cqs: &mut C,
        ctr: &mut Counters,
        write: bool,
        solicited: bool,
        immdt: Option<ImmDtRepr>,
        ieth: Option<IethRepr>,
    ) {
        if let Some(r) = self.q.rq.pop_front() {
            let opcode = if write {
                WcOpcode::RecvRdmaWithImm
            } else {
                WcOpcode::Recv
            };
            let mut wc = WorkCompletion::new(r.wr.wr_id, self.qp.qpn, opcode, WcStatus::Success);
            wc.byte_len = if write {
                self.qp.resp.length
            } else {
                self.qp.resp.recv_off
            };
            wc.solicited = solicited;
            if let Some(imm) = immdt {
                wc.imm_data = imm.imm;
                wc.wc_flags = WcFlags::WITH_IMM;
            }
            if let Some(ieth) = ieth {
                wc.invalidated_rkey = ieth.rkey;
                wc.wc_flags = wc.wc_flags | WcFlags::WITH_INV;
            }
            cqs.push(self.qp.recv_cq, wc);
            ctr.rdma_recvs += 1;
        }
        self.qp.resp.recv_off = 0;
    }

    /// Next slot of the replay ring (`max_dest_rd_atomic` deep).
    fn next_slot(&mut self) -> u8 {
        let depth = self.qp.max_dest_rd_atomic.max(1);
        let slot = self.qp.resp.res_head % depth;
        self.qp.resp.res_head = (slot + 1) % depth;
        slot
    }

    /// A request whose PSN is before ePSN (roce-facts §6.3 step 2).
    fn duplicate(&mut self, env: &mut Env<'_>, pkt: &Packet<'_>) {
        let psn = pkt.psn();
        let depth = usize::from(self.qp.max_dest_rd_atomic).min(RD);
        match pkt.info().operation {
            Operation::Send | Operation::RdmaWrite => {
                // Already executed: acknowledge again, do not re-execute.
                let p = self.qp.resp.epsn.sub(1);
                self.set_pending(AckOut {
                    syndrome: Syndrome::ACK,
                    psn: p,
                });
            }
            Operation::RdmaReadRequest => {
                let Some(reth) = pkt.reth() else {
                    return;
                };
                let found = self.q.res.iter().take(depth).find_map(|r| match *r {
                    RdRes::Read {
                        first_psn,
                        last_psn,
                        va,
                        len,
                        rkey,
                    } if !psn.before(first_psn) && !psn.after(last_psn) => {
                        Some((first_psn, va, len, rkey))
                    }
                    _ => None,
                });
                let Some((first_psn, va_org, length, rkey)) = found else {
                    env.ctr.resp_dropped += 1;
                    return;
                };
                // The request must be the original or a tail of it, with the same key.
                let end_org = u128::from(va_org) + u128::from(length);
                let end = u128::from(reth.va) + u128::from(reth.dma_len);
                if reth.va < va_org || reth.dma_len > length || end > end_org || reth.rkey != rkey {
                    env.ctr.resp_dropped += 1;
                    return;
                }
                let kind = ItemKind::Read {
                    psn,
                    va: reth.va,
                    rkey,
                    resid: reth.dma_len,
                    first: psn == first_psn,
                    // rxe's duplicate_request replays with the MSN current when the
                    // duplicate is taken (`qp->resp.msn`, past the original and every
                    // request since), not the original's: so does this.
                    msn: self.qp.resp.msn,
                };
                // The requester goes back to `psn` (Go-Back-N): it discards every
                // response after it until the duplicate's, and asks again for the
                // READs after this one. The queued responses after `psn` (the rest of
                // this READ, the READs after it) go, and the duplicate queues behind
                // what is left: answered next, and the repeats of the later READs in
                // the order they come (restarting each queued READ in place instead
                // sent them ahead of an earlier READ's repeat, all discarded).
                let mut ack_before = None;
                for _ in 0..self.q.out.len() {
                    let Some(it) = self.q.out.pop_front() else {
                        break;
                    };
                    let after = matches!(it.kind, ItemKind::Read { psn: p, .. } if p.after(psn));
                    if !after {
                        let _ = self.q.out.push_back(it);
                    } else if ack_before.is_none() {
                        // An ACK owed before the dropped responses still goes first.
                        ack_before = it.ack_before;
                    }
                }
                if self.q.out.push_back(RespItem { ack_before, kind }).is_err() {
                    env.ctr.resp_dropped += 1;
                }
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let found = self.q.res.iter().take(depth).find_map(|r| match *r {
                    RdRes::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                let Some(orig) = found else {
                    env.ctr.resp_dropped += 1;
                    return;
                };
                let queued = self
                    .q
                    .out
                    .iter()
                    .any(|it| matches!(it.kind, ItemKind::Atomic { psn: p, .. } if p == psn));
                if !queued
                    && self
                        .q
                        .out
                        .push_back(RespItem {
                            ack_before: None,
                            // the MSN of now, as rxe's duplicate_request
                            kind: ItemKind::Atomic {
                                psn,
                                orig,
                                msn: self.qp.resp.msn,
                            },
                        })
                        .is_err()
                {
                    env.ctr.resp_dropped += 1;
                }
            }
            _ => env.ctr.resp_dropped += 1,
        }
    }

    #[inline(always)] // built in its caller's slot: a descriptor is big to copy
    pub(crate) fn ack_desc(&self, a: AckOut, commit: Commit) -> TxDesc {
        let mut bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, self.qp.dest_qpn, a.psn);
        bth.pkey = self.qp.pkey;
        TxDesc {
            bth,
            ext: ExtHeaders {
                aeth: Some(AethRepr {
                    syndrome: a.syndrome,
                    msn: self.qp.resp.msn,
                }),
                ..ExtHeaders::default()
            },
            payload_len: 0,
            src: PayloadSrc::None,
            ud_av: None,
            commit,
        }
    }

    /// Whether [`Self::resp_prepare`] may have something to send. When false it returns
    /// `None` at once and changes nothing: this is its gate, so the engine may leave
    /// the QP off its ready list without asking (the receiver of a stream, between
    /// the ACKs it coalesces). Selective repeat's SACKs are not looked for here (finding
    /// none drops stale triggers): with it on, the answer is yes.
    #[inline(always)] // a few loads, asked after every packet
    pub(crate) fn resp_may_send(&self) -> bool {
        if self.qp.qp_type != QpType::Rc {
            return false;
        }
        if self.qp.state == QpState::Err {
            // Only the final NAK of a fatal error still goes out.
            return self.qp.resp.fatal_nak && self.qp.resp.pending.is_some();
        }
        self.qp.state.processes_receive()
            && (!self.q.out.is_empty() || self.qp.resp.pending.is_some() || self.sr_on())
    }

    /// The next ACK, NAK, READ response or ATOMIC ACK, in PSN order.
    pub(crate) fn resp_prepare(&mut self, env: &mut Env<'_>) -> Option<TxDesc> {
        if !self.resp_may_send() {
            return None;
        }
        if self.qp.state == QpState::Err {
            return self.qp.resp.pending.map(|a| self.ack_desc(a, Commit::Ack));
        }
        let Some(item) = self.q.out.front().copied() else {
            if let Some(d) = self.sr_sack_desc() {
                return Some(d);
            }
            return self.qp.resp.pending.map(|a| self.ack_desc(a, Commit::Ack));
        };
        if let Some(a) = item.ack_before {
            return Some(self.ack_desc(a, Commit::AckBefore));
        }
        let mut bth = BthRepr::new(Opcode::RC_ATOMIC_ACKNOWLEDGE, self.qp.dest_qpn, Psn::ZERO);
        bth.pkey = self.qp.pkey;
        match item.kind {
            ItemKind::Atomic { psn, orig, msn } => {
                bth.psn = psn;
                Some(TxDesc {
                    bth,
                    ext: ExtHeaders {
                        aeth: Some(AethRepr {
                            syndrome: Syndrome::ACK,
                            msn,
                        }),
                        atomic_ack_eth: Some(AtomicAckEthRepr {
                            orig_rem_data: orig,
                        }),
                        ..ExtHeaders::default()
                    },
                    payload_len: 0,
                    src: PayloadSrc::None,
                    ud_av: None,
                    commit: Commit::Item { n: 0 },
                })
            }
            ItemKind::Read {
                psn,
                va,
                rkey,
                resid,
                first,
                msn,
                ..
            } => {
                let mtu = self.qp.mtu.bytes();
                let n = resid.min(mtu);
                let last = resid <= mtu;
                bth.opcode = match (first, last) {
                    (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                    (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                    (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                    (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                };
                bth.psn = psn;
                bth.pad_count = (n.wrapping_neg() & 3) as u8;
                // The region may have been invalidated or deregistered since the
                // request: check again (rxe `rxe_recheck_mr`).
                if n != 0
                    && env
                        .mem
                        .check_remote(
                            self.qp.pd,
                            self.qp.qpn,
                            rkey,
                            va,
                            u64::from(n),
                            AccessFlags::REMOTE_READ,
                        )
                        .is_err()
                {
                    self.resp_fatal(env, NakCode::RemoteAccessError, psn, None);
                    return self.resp_prepare(env);
                }
                Some(TxDesc {
                    bth,
                    ext: ExtHeaders {
                        aeth: if first || last {
                            Some(AethRepr {
                                syndrome: Syndrome::ACK,
                                msn,
                            })
                        } else {
                            None
                        },
                        ..ExtHeaders::default()
                    },
                    payload_len: n,
                    src: PayloadSrc::Remote { va },
                    ud_av: None,
                    commit: Commit::Item { n },
                })
            }
        }
    }

    pub(crate) fn resp_commit(&mut self, d: &TxDesc) {
        match d.commit {
            Commit::Ack => {
                self.qp.resp.pending = None;
                self.qp.resp.fatal_nak = false;
            }
            Commit::AckBefore => {
                if let Some(it) = self.q.out.front_mut() {
                    it.ack_before = None;
                }
            }
            Commit::Item { n } => {
                let done = match self.q.out.front_mut() {
                    Some(RespItem {
                        kind:
                            ItemKind::Read {
                                psn,
                                va,
                                resid,
                                first,
                                ..
                            },
                        ..
                    }) => {
                        *psn = psn.next();
                        *va = va.wrapping_add(u64::from(n));
                        *resid = resid.saturating_sub(n);
                        *first = false;
                        *resid == 0
                    }
                    Some(_) => true,
                    None => false,
                };
                if done {
                    self.q.out.pop_front();
                }
            }
            Commit::Request { .. } | Commit::Sack => {}
        }
    }
}
