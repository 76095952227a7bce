//! The queue pair: its context (kept small: the firmware holds one per QP in on-chip
//! RAM), its queues, the environment it works in, and what the three roles share:
//! `modify_qp`, error entry and flushing, in-order send completions, timers.
//!
//! The roles live in their own files: [`super::requester`] (segmentation, PSNs,
//! Go-Back-N), [`super::completer`] (ACK, NAK and read-response processing, retry
//! timers) and [`super::responder`] (PSN classification, execution, ACK/NAK/READ
//! responses).

use heapless::Deque;

use crate::memory::{AccessFlags, Dma, Pd, Protection};
use crate::num::{Msn, Psn, Qkey, Qpn, Rkey};
use crate::wire::icrc::Icrc;

use super::attr::{check_transition, AttrMask, QpAttr, SrAttr, SR_WINDOW};
use super::counters::Counters;
use super::entry::{AckOut, Commit, CurOp, PayloadSrc, RdRes, RecvWqe, RespItem, SendWqe, TxDesc};
use super::error::Error;
use super::sr_state::SrState;
use super::time::Instant;
use super::verbs::{
    AckTimeout, AddressVector, Mtu, QpState, QpType, RecvWr, SendFlags, SendWr, WcFlags, WcOpcode,
    WcStatus, WorkCompletion,
};

/// Engine-wide transport tunables (the firmware's limits are one config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportConfig {
    /// Most PSNs an RC requester may have unacknowledged (rxe `RXE_MAX_UNACKED_PSNS`
    /// = 128).
    pub max_unacked_psns: u32,
    /// AckReq is set at least every this many packets, besides on the last packet of
    /// each message (rxe `RXE_MAX_PKT_PER_ACK` = 64).
    pub max_pkts_per_ack: u32,
    /// Most messages an RC requester has started and not yet completed: it starts the
    /// next WQE only below this. Unbounded by default (rxe has no such limit); a NIC
    /// whose hardware keeps a per-QP list of the messages in flight sets its length
    /// (the RTL fast path's 8, `FastPath::msgs_in_flight`), so that no ACK finds a
    /// message the list could not hold (`docs/fastpath.md` §3.8, "How deep a queue
    /// runs").
    pub max_msgs_in_flight: u32,
}

impl TransportConfig {
    /// rxe's tunables (a `const` for NICs built at compile time, see `Engine::new`).
    pub const DEFAULT: Self = Self {
        max_unacked_psns: 128,
        max_pkts_per_ack: 64,
        max_msgs_in_flight: u32::MAX,
    };
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where completions go: the engine's CQ table behind a trait.
pub trait CompletionSink {
    /// True if the CQ can take one more entry.
    fn has_room(&self, cq: u16) -> bool;
    /// Appends an entry; false if the CQ is full or absent.
    fn push(&mut self, cq: u16, wc: WorkCompletion) -> bool;
}

/// Everything outside the QP that its state machine touches.
pub(crate) struct Env<'a> {
    pub now: Instant,
    pub mem: &'a mut dyn Protection,
    pub dma: &'a mut dyn Dma,
    pub cqs: &'a mut dyn CompletionSink,
    pub ctr: &'a mut Counters,
    pub cfg: &'a TransportConfig,
    /// The SRQs, for a QP attached to one.
    pub srqs: &'a mut dyn super::srq::SrqTake,
}

/// A QP's queues: `SQ` send WQEs, `RQ` receive WQEs, `RD` responder resources.
#[derive(Clone, Debug)]
pub struct QpQueues<const SQ: usize, const RQ: usize, const RD: usize> {
    pub(crate) sq: Deque<SendWqe, SQ>,
    pub(crate) rq: Deque<RecvWqe, RQ>,
    pub(crate) res: [RdRes; RD],
    pub(crate) out: Deque<RespItem, RD>,
    /// Selective-repeat records (off unless the QP enables it).
    pub(crate) sr: SrState,
}

impl<const SQ: usize, const RQ: usize, const RD: usize> Default for QpQueues<SQ, RQ, RD> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpQueues<SQ, RQ, RD> {
    /// Empty queues.
    pub const fn new() -> Self {
        Self {
            sq: Deque::new(),
            rq: Deque::new(),
            res: [RdRes::Free; RD],
            out: Deque::new(),
            sr: SrState::new(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.sq.clear();
        self.rq.clear();
        self.res = [RdRes::Free; RD];
        self.out.clear();
        self.sr = SrState::new();
    }
}

// ---------------------------------------------------------------------------------------
// The context

/// Requester cursor: which packet of which WQE goes out next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Requester {
    /// Next PSN to send.
    pub psn: Psn,
    /// One past the highest PSN ever sent (responses beyond it are forged or stale).
    pub max_psn: Psn,
    /// Index (from the SQ head) of the WQE being sent.
    pub wqe_idx: u16,
    /// Packets of that WQE already sent (READ: responses already received).
    pub pkt_idx: u32,
    /// READ/ATOMIC WQEs holding a credit.
    pub rd_atomic: u8,
    /// Packets since the last AckReq.
    pub noack_pkts: u32,
    /// Requests leave through the fast path's descriptors, not `req_prepare`.
    pub fastpath: bool,
    /// The cursor moved back (or jumped) since the last descriptor: the fast path must
    /// drop what it still holds of this QP (a FLUSH goes first).
    pub rewound: bool,
}

/// Completer: acknowledgement state and retry timers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Completer {
    /// Oldest PSN not yet acknowledged.
    pub psn: Psn,
    pub retry_left: u8,
    pub rnr_left: u8,
    /// A NAK- or gap-triggered retry is under way; further ones wait for progress.
    pub started_retry: bool,
    /// Local ACK timeout deadline.
    pub retrans_at: Option<Instant>,
    /// RNR wait deadline: the requester sends nothing until then.
    pub rnr_at: Option<Instant>,
}

/// Responder state.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Responder {
    /// Expected PSN.
    pub epsn: Psn,
    pub msn: Msn,
    /// A NAK was sent for the current gap (one NAK per episode).
    pub nak_sent: bool,
    /// UC: dropping until the next FIRST/ONLY.
    pub drop_msg: bool,
    pub cur: CurOp,
    /// WRITE in progress: next address, key, bytes left, total length.
    pub va: u64,
    pub rkey: Rkey,
    pub resid: u32,
    pub length: u32,
    /// SEND in progress: bytes already placed in the receive WQE.
    pub recv_off: u32,
    /// Coalesced ACK / NAK to send once `out` is empty.
    pub pending: Option<AckOut>,
    /// The pending NAK is the last word of a QP that went to ERR.
    pub fatal_nak: bool,
    /// Next replay-ring slot.
    pub res_head: u8,
    /// The fast path finished a SEND this responder had started (its MSG_DONE event is
    /// on its way to the firmware, which completes the receive WQE then): until it
    /// does, the QP stays resident. Not part of a stored context.
    pub done_owed: bool,
}

/// Attributes fixed at `create_qp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInitAttr {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Protection domain.
    pub pd: Pd,
    /// CQ for send completions.
    pub send_cq: u16,
    /// CQ for receive completions.
    pub recv_cq: u16,
    /// Generate a completion for every send WR, signaled or not.
    pub sq_sig_all: bool,
    /// Largest inline send (`ibv_qp_cap.max_inline_data`, at most
    /// [`MAX_INLINE_DATA`](super::verbs::MAX_INLINE_DATA)); 0 = none. A QP that may
    /// send inline stays off the fast path (its payload is not in registered memory).
    pub max_inline_data: u32,
    /// Receives come from this shared receive queue (`ibv_qp_init_attr.srq`); such a
    /// QP stays off the fast path, whose receive context holds one QP's WQE only.
    pub srq: Option<super::srq::SrqHandle>,
}

/// The per-QP context. Its queues live elsewhere ([`QpQueues`]).
#[derive(Clone, Debug)]
pub struct Qp {
    pub(crate) qpn: Qpn,
    pub(crate) qp_type: QpType,
    pub(crate) state: QpState,
    pub(crate) sq_sig_all: bool,
    /// `max_inline_data` (at most `MAX_INLINE_DATA`, so it fits).
    pub(crate) max_inline: u8,
    pub(crate) srq: Option<super::srq::SrqHandle>,
    pub(crate) pd: Pd,
    pub(crate) send_cq: u16,
    pub(crate) recv_cq: u16,
    pub(crate) access: AccessFlags,
    pub(crate) pkey_index: u16,
    /// The P_Key value `pkey_index` names, resolved at `modify_qp`.
    pub(crate) pkey: u16,
    pub(crate) qkey: Qkey,
    pub(crate) av: AddressVector,
    pub(crate) mtu: Mtu,
    pub(crate) dest_qpn: Qpn,
    pub(crate) timeout: AckTimeout,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) udp_sport: u16,
    pub(crate) req: Requester,
    pub(crate) comp: Completer,
    pub(crate) resp: Responder,
}

// The firmware keeps one context per QP in on-chip RAM: hold it to 256 bytes.
const _: () = assert!(core::mem::size_of::<Qp>() <= 256);

/// A QP's externally visible attributes (`ibv_query_qp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInfo {
    /// QP number.
    pub qpn: Qpn,
    /// Type.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// Remote QPN.
    pub dest_qpn: Qpn,
    /// Next PSN the requester will use.
    pub sq_psn: Psn,
    /// PSN the responder expects.
    pub rq_psn: Psn,
    /// Access flags.
    pub access: AccessFlags,
    /// Q_Key.
    pub qkey: Qkey,
    /// Send WRs not yet completed.
    pub sq_outstanding: usize,
    /// Receive WRs not yet consumed.
    pub rq_outstanding: usize,
    /// Selective repeat as set (`enabled: false` for Go-Back-N).
    pub selective_repeat: SrAttr,
}

/// The rxe rule for the UDP source port of a QP (roce-facts §1.6):
/// `0xC000 + (hash_32(qpn, 14) & 0x3FFF)`, or the flow-label rule when the address
/// vector carries a flow label.
pub(crate) fn udp_sport(qpn: Qpn, flow_label: u32) -> u16 {
    if flow_label != 0 {
        let fl = flow_label & 0xF_FFFF;
        let lo = (fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14);
        return (lo | 0xC000) as u16;
    }
    let h = qpn.value().wrapping_mul(0x61C8_8647) >> (32 - 14);
    0xC000 | (h & 0x3FFF) as u16
}

impl Qp {
    pub(crate) fn new(qpn: Qpn, init: &QpInitAttr) -> Self {
        Self {
            qpn,
            qp_type: init.qp_type,
            state: QpState::Reset,
            sq_sig_all: init.sq_sig_all,
            max_inline: u8::try_from(init.max_inline_data).unwrap_or(u8::MAX),
            srq: init.srq,
            pd: init.pd,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            access: AccessFlags::NONE,
            pkey_index: 0,
            pkey: 0xFFFF,
            qkey: Qkey(0),
            av: AddressVector::default(),
            mtu: Mtu::Mtu1024,
            dest_qpn: Qpn::new(0),
            timeout: AckTimeout::INFINITE,
            retry_cnt: 0,
            rnr_retry: 0,
            min_rnr_timer: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            udp_sport: udp_sport(qpn, 0),
            req: Requester::default(),
            comp: Completer::default(),
            resp: Responder::default(),
        }
    }

    /// QP number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The earliest timer, if any.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match (self.comp.retrans_at, self.comp.rnr_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn reset_contexts(&mut self) {
        self.req = Requester::default();
        self.comp = Completer::default();
        self.resp = Responder::default();
    }
}

/// A QP with its queues, borrowed together: every role's methods hang off this.
pub(crate) struct QpRef<'a, const SQ: usize, const RQ: usize, const RD: usize> {
    pub qp: &'a mut Qp,
    pub q: &'a mut QpQueues<SQ, RQ, RD>,
}

/// What the engine's P_Key table looks like to `modify_qp`.
pub(crate) struct PortLimits<'a> {
    pub pkeys: &'a [u16],
    pub max_mtu: Mtu,
    pub gids: &'a crate::engine::GidTable,
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    /// `ibv_query_qp`.
    pub fn info(&self) -> QpInfo {
        QpInfo {
            qpn: self.qp.qpn,
            qp_type: self.qp.qp_type,
            state: self.qp.state,
            path_mtu: self.qp.mtu,
            dest_qpn: self.qp.dest_qpn,
            sq_psn: self.qp.req.psn,
            rq_psn: self.qp.resp.epsn,
            access: self.qp.access,
            qkey: self.qp.qkey,
            sq_outstanding: self.q.sq.len(),
            rq_outstanding: self.q.rq.len(),
            selective_repeat: self.q.sr.attr(),
        }
    }

    /// `ibv_modify_qp`: checks the transition table and the attribute values, then
    /// applies them.
    pub fn modify(
        &mut self,
        env: &mut Env<'_>,
        attr: &QpAttr,
        port: &PortLimits<'_>,
    ) -> Result<(), Error> {
        let qp_type = self.qp.qp_type;
        let cur = self.qp.state;
        let next = check_transition(qp_type, cur, attr)?;

        // Validate every value before changing anything.
        let pkey =
            match attr.pkey_index {
                Some(i) => Some(*port.pkeys.get(usize::from(i)).ok_or(
                    Error::InvalidAttribute {
                        attr: AttrMask::PKEY_INDEX,
                        reason: "beyond the P_Key table",
                    },
                )?),
                None => None,
            };
        if attr.port_num.is_some_and(|p| p != 1) {
            return Err(Error::InvalidAttribute {
                attr: AttrMask::PORT,
                reason: "this device has one port, number 1",
            });
        }
        if attr.path_mtu.is_some_and(|m| m > port.max_mtu) {
            return Err(Error::InvalidAttribute {
                attr: AttrMask::PATH_MTU,
                reason: "larger than the port's active MTU",
            });
        }
        if attr.max_dest_rd_atomic.is_some_and(|n| usize::from(n) > RD) {
            return Err(Error::InvalidAttribute {
                attr: AttrMask::MAX_DEST_RD_ATOMIC,
                reason: "more than the responder resources configured per QP",
            });
        }
        if attr
            .selective_repeat
            .is_some_and(|s| u32::from(s.max_inflight) > SR_WINDOW)
        {
            return Err(Error::InvalidAttribute {
                attr: AttrMask::SELECTIVE_REPEAT,
                reason: "max_inflight beyond the selective-repeat window",
            });
        }
        if attr
            .ah_attr
            .is_some_and(|av| port.gids.source_for(&av).is_none())
        {
            return Err(Error::InvalidAttribute {
                attr: AttrMask::AV,
                reason: "no GID of the destination's IP version at sgid_index",
            });
        }

        let qp = &mut *self.qp;
        if let Some(a) = attr.qp_access_flags {
            qp.access = a;
        }
        if let (Some(i), Some(k)) = (attr.pkey_index, pkey) {
            qp.pkey_index = i;
            qp.pkey = k;
        }
        if let Some(k) = attr.qkey {
            qp.qkey = k;
        }
        if let Some(av) = attr.ah_attr {
            qp.av = av;
            qp.udp_sport = udp_sport(qp.qpn, av.flow_label);
        }
        if let Some(m) = attr.path_mtu {
            qp.mtu = m;
        }
        if qp_type == QpType::Ud {
            // A UD message is one packet of up to the port's MTU: rxe's `get_mtu` takes
            // the port's `mtu_cap` for UD, whatever path_mtu says.
            qp.mtu = port.max_mtu;
        }
        if let Some(d) = attr.dest_qp_num {
            qp.dest_qpn = d;
        }
        if let Some(p) = attr.rq_psn {
            qp.resp.epsn = p;
        }
        if let Some(n) = attr.max_dest_rd_atomic {
            qp.max_dest_rd_atomic = n;
            qp.resp.res_head = 0;
        }
        if let Some(t) = attr.min_rnr_timer {
            qp.min_rnr_timer = t.code();
        }
        if let Some(t) = attr.timeout {
            qp.timeout = t;
        }
        if let Some(r) = attr.retry_cnt {
            qp.retry_cnt = r.get();
            qp.comp.retry_left = r.get();
        }
        if let Some(r) = attr.rnr_retry {
            qp.rnr_retry = r.get();
            qp.comp.rnr_left = r.get();
        }
        if let Some(p) = attr.sq_psn {
            qp.req.psn = p;
            qp.req.max_psn = p;
            qp.comp.psn = p;
            self.q.sr.start_tx(p);
        }
        if let Some(n) = attr.max_rd_atomic {
            qp.max_rd_atomic = n;
        }
        if let Some(sr) = attr.selective_repeat {
            self.q.sr.configure(sr);
        }

        match next {
            QpState::Reset if cur != QpState::Reset => {
                // rxe: reset drops everything without completions.
                qp.reset_contexts();
                self.q.clear();
                qp.state = QpState::Reset;
            }
            QpState::Err if cur != QpState::Err => {
                self.enter_error(env);
            }
            s => qp.state = s,
        }
        Ok(())
    }

    /// Moves the QP to ERR: timers stop, responder work is dropped (except a final NAK
    /// already queued), and every WQE will be flushed in order.
    pub fn enter_error(&mut self, env: &mut Env<'_>) {
        let qp = &mut *self.qp;
        qp.state = QpState::Err;
        qp.comp.retrans_at = None;
        qp.comp.rnr_at = None;
        qp.resp.cur = CurOp::None;
        if !qp.resp.fatal_nak {
            qp.resp.pending = None;
        }
        self.q.out.clear();
        self.flush(env);
    }

    /// In ERR: completes what it can of both queues, in order. Failed WQEs carry their
    /// own status, WQEs that finished before the error complete normally, the rest with
    /// `WR_FLUSH_ERR`. Stops when a CQ is full; called again later.
    pub fn flush(&mut self, env: &mut Env<'_>) {
        if self.qp.state != QpState::Err {
            return;
        }
        while let Some(w) = self.q.sq.front() {
            let status = if w.done {
                w.status
            } else {
                WcStatus::WrFlushErr
            };
            if !self.complete_front_send(env, status) {
                break;
            }
        }
        while let Some(r) = self.q.rq.front() {
            let wc = WorkCompletion::new(
                r.wr.wr_id,
                self.qp.qpn,
                WcOpcode::Recv,
                WcStatus::WrFlushErr,
            );
            if !env.cqs.push(self.qp.recv_cq, wc) {
                break;
            }
            self.q.rq.pop_front();
        }
    }

    /// Pops the head send WQE with `status`, producing its completion if it is
    /// signaled or failed. False (and nothing popped) when the CQ is full.
    pub(crate) fn complete_front_send(&mut self, env: &mut Env<'_>, status: WcStatus) -> bool {
        let Some(w) = self.q.sq.front() else {
            return false;
        };
        let signaled = self.qp.sq_sig_all || w.wr.send_flags.contains(SendFlags::SIGNALED);
        if !w.cqe_written && (signaled || status != WcStatus::Success) {
            let mut wc = WorkCompletion::new(
                w.wr.wr_id,
                self.qp.qpn,
                w.wr.op.opcode().wc_opcode(),
                status,
            );
            wc.byte_len = w.len;
            if let Some(imm) = w.wr.op.imm() {
                wc.imm_data = imm;
                wc.wc_flags = WcFlags::WITH_IMM;
            }
            if !env.cqs.push(self.qp.send_cq, wc) {
                return false;
            }
        }
        if w.has_credit {
            self.qp.req.rd_atomic = self.qp.req.rd_atomic.saturating_sub(1);
        }
        self.q.sq.pop_front();
        if self.qp.req.wqe_idx == 0 {
            self.qp.req.pkt_idx = 0;
        } else {
            self.qp.req.wqe_idx -= 1;
        }
        true
    }

    /// Completes finished WQEs at the head of the send queue, in order.
    pub(crate) fn drain_done(&mut self, env: &mut Env<'_>) {
        while let Some(w) = self.q.sq.front() {
            if !w.done {
                break;
            }
            let status = w.status;
            if !self.complete_front_send(env, status) {
                break;
            }
        }
    }

    /// Marks the WQE at `idx` finished with `status`; a failure moves the QP to ERR.
    pub(crate) fn finish_wqe(&mut self, env: &mut Env<'_>, idx: usize, status: WcStatus) {
        if let Some(w) = self.q.sq.get_mut(idx) {
            w.done = true;
            w.status = status;
            if w.has_credit {
                w.has_credit = false;
                self.qp.req.rd_atomic = self.qp.req.rd_atomic.saturating_sub(1);
            }
        }
        if status == WcStatus::Success {
            self.drain_done(env);
        } else {
            self.enter_error(env);
        }
    }

    /// `ibv_post_send` (the WR is checked here; protection is checked when it starts).
    pub fn post_send(&mut self, env: &mut Env<'_>, wr: &SendWr) -> Result<(), Error> {
        let state = self.qp.state;
        if !state.can_post_send() {
            return Err(Error::InvalidState {
                verb: "post_send",
                state,
            });
        }
        let op = wr.op.opcode();
        if !op.allowed_on(self.qp.qp_type) {
            return Err(Error::InvalidWr {
                reason: "opcode not supported by this QP type",
            });
        }
        let len = super::verbs::sgl_len(&wr.sg_list).ok_or(Error::InvalidWr {
            reason: "message longer than 2^31 bytes",
        })?;
        let len = match op {
            super::verbs::WrOpcode::AtomicCmpAndSwp | super::verbs::WrOpcode::AtomicFetchAndAdd => {
                if len < 8 {
                    return Err(Error::InvalidWr {
                        reason: "atomic needs an 8-byte local buffer",
                    });
                }
                8
            }
            op if op.is_local() => 0,
            _ => len,
        };
        if self.qp.qp_type == QpType::Ud && wr.ud.is_none() {
            return Err(Error::InvalidWr {
                reason: "UD send without a destination",
            });
        }
        if wr.send_flags.contains(super::verbs::SendFlags::INLINE) {
            // rxe's validate_send_wr: inline only for what sends local data, and no
            // longer than the QP was created for.
            if !op.can_inline() {
                return Err(Error::InvalidWr {
                    reason: "inline data on an operation that sends none",
                });
            }
            if len > u32::from(self.qp.max_inline) {
                return Err(Error::InvalidWr {
                    reason: "inline data longer than max_inline_data",
                });
            }
        }
        // The WR goes in without its scatter list, which is then copied into its slot:
        // pushing `wr.clone()` moved the ~200-byte WR twice more (the clone into a
        // temporary, the temporary into the slot: ~320 instructions a WQE on the soft
        // core). Every field named, so that a new one cannot be left out.
        let head = SendWr {
            wr_id: wr.wr_id,
            sg_list: super::verbs::SgList::new(),
            op: wr.op,
            send_flags: wr.send_flags,
            ud: wr.ud,
        };
        self.q
            .sq
            .push_back(SendWqe::new(head, len))
            .map_err(|_| Error::QueueFull { verb: "post_send" })?;
        if let Some(w) = self.q.sq.back_mut() {
            // (The lists hold as many: no push fails. One by one: `extend_from_slice`'s
            // `memcpy` call cost ~30 more.)
            for s in &wr.sg_list {
                let _ = w.wr.sg_list.push(*s);
            }
        }
        self.flush(env);
        Ok(())
    }

    /// `ibv_post_recv`.
    pub fn post_recv(&mut self, env: &mut Env<'_>, wr: &RecvWr) -> Result<(), Error> {
        let state = self.qp.state;
        if !state.can_post_recv() {
            return Err(Error::InvalidState {
                verb: "post_recv",
                state,
            });
        }
        if self.qp.srq.is_some() {
            // rxe_post_recv: a QP with an SRQ has no receive queue of its own (EINVAL).
            return Err(Error::InvalidWr {
                reason: "the QP receives from an SRQ",
            });
        }
        super::verbs::sgl_len(&wr.sg_list).ok_or(Error::InvalidWr {
            reason: "receive buffers longer than 2^31 bytes",
        })?;
        self.q
            .rq
            .push_back(RecvWqe { wr: wr.clone() })
            .map_err(|_| Error::QueueFull { verb: "post_recv" })?;
        self.flush(env);
        Ok(())
    }

    /// Timers that have expired by `now`.
    pub fn handle_timeout(&mut self, env: &mut Env<'_>) {
        let now = env.now;
        if self.qp.comp.rnr_at.is_some_and(|t| t <= now) {
            self.qp.comp.rnr_at = None;
            let p = self.qp.comp.psn;
            self.go_back_n(p);
        }
        if self.qp.comp.retrans_at.is_some_and(|t| t <= now) {
            self.qp.comp.retrans_at = None;
            self.retry(env, true);
        }
    }
}

impl<const SQ: usize, const RQ: usize, const RD: usize> QpRef<'_, SQ, RQ, RD> {
    /// Copies the payload of `d` into `body` (exactly `payload_len` bytes followed by
    /// zero pad).
    pub fn fill(
        &self,
        env_mem: &dyn Protection,
        dma: &mut dyn Dma,
        d: &TxDesc,
        body: &mut [u8],
        mut icrc: Option<&mut Icrc>,
    ) -> bool {
        let n = usize::try_from(d.payload_len)
            .unwrap_or(usize::MAX)
            .min(body.len());
        let (data, pad) = body.split_at_mut(n);
        pad.fill(0);
        // With an ICRC to feed, the body goes to it in order: the payload as it is read,
        // then the pad.
        let filled = match d.src {
            _ if data.is_empty() => true,
            PayloadSrc::None => {
                if let Some(c) = icrc.as_deref_mut() {
                    c.update(data);
                }
                true
            }
            PayloadSrc::Sq { idx, offset } => match self.q.sq.get(usize::from(idx)) {
                Some(w) => super::sgl::gather(
                    env_mem,
                    dma,
                    self.qp.pd,
                    &w.wr.sg_list,
                    offset,
                    data,
                    icrc.as_deref_mut(),
                )
                .is_ok(),
                None => false,
            },
            PayloadSrc::Remote { va } => Icrc::read_opt(icrc.as_deref_mut(), dma, va, data).is_ok(),
        };
        if let Some(c) = icrc.filter(|_| !pad.is_empty()) {
            c.update(pad);
        }
        filled
    }

    /// Records that `d` went out.
    pub fn commit_tx(&mut self, env: &mut Env<'_>, d: &TxDesc) {
        match d.commit {
            Commit::Request { .. } => self.req_commit(env, d),
            Commit::Ack | Commit::AckBefore | Commit::Item { .. } => self.resp_commit(d),
            Commit::Sack => self.sr_commit_sack(env),
        }
    }

    /// A frame could not be built (DMA fault while reading its payload).
    pub fn abort_tx(&mut self, env: &mut Env<'_>, d: &TxDesc) {
        env.ctr.tx_dma_err += 1;
        match d.commit {
            Commit::Request { idx, .. } => {
                self.finish_wqe(env, usize::from(idx), WcStatus::LocProtErr);
            }
            _ => {
                // The responder's memory faulted under a READ: remote operational
                // error (rxe class A).
                let psn = d.bth.psn;
                self.resp_fatal(
                    env,
                    crate::wire::aeth::NakCode::RemoteOperationalError,
                    psn,
                    None,
                );
            }
        }
    }
}

#[cfg(test)]
mod size_tests {
    extern crate std;
    use super::*;

    #[test]
    fn entry_sizes() {
        std::println!(
            "SendWqe {} RecvWqe {} RespItem {} RdRes {} WorkCompletion {} SendWr {} Qp {}",
            core::mem::size_of::<SendWqe>(),
            core::mem::size_of::<RecvWqe>(),
            core::mem::size_of::<RespItem>(),
            core::mem::size_of::<RdRes>(),
            core::mem::size_of::<WorkCompletion>(),
            core::mem::size_of::<SendWr>(),
            core::mem::size_of::<Qp>(),
        );
    }
}
