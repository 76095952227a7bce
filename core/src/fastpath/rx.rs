//! RX (`docs/fastpath.md` §3): the receive context, the MR table entry, the placement
//! rule for in-sequence requests (§3.4), the response rule for ACKs and READ responses
//! (§3.6), and the events for the firmware (§3.5).

use super::tx::{scatter, AckDesc, AtomicResp, MsgOp, ReadResp, SendCtx};
use crate::memory::{
    AccessFlags, Dma, FastReg, MemError, MemoryRegion, MrKeys, MwBind, Pd, Protection,
};
use crate::num::{Lkey, Msn, Psn, Qpn, Rkey};
use crate::transport::{Mtu, Sge, MAX_SGE};
use crate::wire::aeth::{NakCode, RnrTimer, Syndrome};
use crate::wire::atomic::AtomicEthRepr;
use crate::wire::opcode::{Operation, Position, Transport};
use crate::wire::reth::RethRepr;
use crate::wire::{Opcode, Packet, RxMeta};

/// The largest `max_dest_rd_atomic` the hardware counts against (§3.2 `rd_max`, three
/// bits; §3.4 "The responder's resources"): the RTL's response queue (`fp_resp_q`)
/// holds four entries, and it stalls the receive path when full, so a QP's count must
/// be able to reach its `rd_max` inside it, or the RTL would wait where the model
/// drops. A QP with more READ resources keeps `reads` clear (its READs and atomics stay
/// the firmware's); the firmware's engines have four (`config::RD`).
pub const RD_MAX: u8 = 4;

/// The message a receive context is in the middle of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxCur {
    #[default]
    None,
    Send,
    Write,
}

/// The per-QP receive context (§3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCtx {
    /// The fast path handles this QP's packets (RC in RTR or RTS).
    pub on: bool,
    pub qpn: Qpn,
    pub cur: RxCur,
    /// The QP's access flags.
    pub access: AccessFlags,
    pub mtu: Mtu,
    pub epsn: Psn,
    pub msn: Msn,
    /// An ACK after at most this many placed packets without AckReq (0: on AckReq only).
    pub ack_every: u8,
    /// Placed packets since the last ACK.
    pub unacked: u8,
    pub pd: Pd,
    /// WRITE: next address, key, bytes left, RETH length. (`length` is a SEND's
    /// bytes placed too: its first packet sets it, so a WRITE between the load of a
    /// receive buffer and the SEND leaves nothing of the buffer's behind.)
    pub va: u64,
    pub rkey: Rkey,
    pub resid: u32,
    pub length: u32,
    /// SEND: next address in the receive buffer the firmware loaded (`recv_resid`
    /// bytes left in it, `length` placed); `recv_loaded` says there is one. Apart
    /// from the WRITE's fields: a WRITE leaves a buffer loaded ahead of the next SEND
    /// loaded.
    pub recv_addr: u64,
    pub recv_resid: u32,
    pub recv_loaded: bool,
    /// The current gap's NAK went out: a later request out of sequence is dropped
    /// without another (the engine's `nak_sent`); placing the expected packet clears it.
    pub nak_sent: bool,
    /// The hardware raised an exception for this QP and the firmware has not written
    /// the context back yet: every packet of the QP goes to the firmware meanwhile, so
    /// the firmware sees them in order.
    pub held: bool,
    /// The QP's P_Key and its peer's GID: a packet must match both (as the engine's
    /// receive checks).
    pub pkey: u16,
    pub peer_gid: [u8; 16],
    /// The hardware answers this QP's in-sequence READ requests itself (§3.4, "READ
    /// requests"), and its atomics when its receive path has the atomic responder (the
    /// model's; the RTL's leaves them exceptions, reason 2, §3.4 "Atomic requests"):
    /// the firmware sets it when the QP has READ resources the hardware counts
    /// (`max_dest_rd_atomic` 1 to [`RD_MAX`]), its engine has no response of the QP
    /// queued (the hardware's would overtake it), and the datapath has the READ responder.
    pub reads: bool,
    /// The QP's `max_dest_rd_atomic` (byte 3 bits 4..6 of §3.2; the firmware sets `reads`
    /// only for 1 to [`RD_MAX`]): with `reads`, an in-sequence READ or atomic request
    /// that finds this many READ responses and ATOMIC ACKNOWLEDGEs of the QP queued is
    /// dropped, as the engine's responder drops it (`check_op`; §3.4, "The responder's
    /// resources"). 0 with `reads` (never written so) leaves them to the firmware, whose
    /// engine NAKs them.
    pub rd_max: u8,
    /// The firmware found the QP's receive queue empty (no WQE at all, not one that
    /// does not qualify for loading; the fast path's QPs have no SRQ): the receive path
    /// answers a SEND's first packet, which has no receive buffer loaded, with an RNR
    /// NAK with this timer (the QP's `min_rnr_timer`), as the engine's responder does
    /// (`receiver_not_ready`), and raises an `RNR` event. The firmware clears it when it
    /// loads a buffer and at every receive post (§3.4, "Receiver not ready").
    pub rnr: Option<RnrTimer>,
}

impl RecvCtx {
    /// An RC QP's context, on, between messages, at PSN and MSN 0, with no access, the
    /// default P_Key and an all-zero peer GID: the starting point a caller changes the
    /// fields it knows from (`RecvCtx { epsn, ..RecvCtx::idle(qpn, pd, mtu) }`).
    pub const fn idle(qpn: Qpn, pd: Pd, mtu: Mtu) -> Self {
        Self {
            on: true,
            qpn,
            cur: RxCur::None,
            access: AccessFlags::NONE,
            mtu,
            epsn: Psn::new(0),
            msn: Msn::new(0),
            ack_every: 0,
            unacked: 0,
            pd,
            va: 0,
            rkey: Rkey(0),
            resid: 0,
            length: 0,
            recv_addr: 0,
            recv_resid: 0,
            recv_loaded: false,
            nak_sent: false,
            held: false,
            pkey: 0xFFFF,
            peer_gid: [0; 16],
            reads: false,
            rd_max: RD_MAX,
            rnr: None,
        }
    }
}

/// The part of a receive context (§3.2) the hardware advances and the engine's
/// responder takes back before it handles an exception
/// ([`crate::engine::Engine::fastpath_load_recv_state`]): where the QP is in its message
/// stream. The rest (the QP's addresses, keys and flags) is the engine's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvState {
    pub cur: RxCur,
    pub epsn: Psn,
    pub msn: Msn,
    pub va: u64,
    pub rkey: Rkey,
    pub resid: u32,
    pub length: u32,
    pub recv_loaded: bool,
    pub nak_sent: bool,
}

impl RecvCtx {
    /// Its [`RecvState`].
    pub fn state(&self) -> RecvState {
        RecvState {
            cur: self.cur,
            epsn: self.epsn,
            msn: self.msn,
            va: self.va,
            rkey: self.rkey,
            resid: self.resid,
            length: self.length,
            recv_loaded: self.recv_loaded,
            nak_sent: self.nak_sent,
        }
    }
}

/// An MR table entry (§3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrEntry {
    /// The whole key; a lookup whose key differs is a miss.
    pub key: u32,
    pub pd: Pd,
    pub base: u64,
    pub length: u64,
    pub access: AccessFlags,
    pub valid: bool,
}

impl Default for MrEntry {
    /// An entry never written: key 0 matches no key.
    fn default() -> Self {
        Self {
            key: 0,
            pd: Pd::from_index(0),
            base: 0,
            length: 0,
            access: AccessFlags::NONE,
            valid: false,
        }
    }
}

impl MrEntry {
    /// The entry of a registered region.
    pub fn of(mr: &MemoryRegion) -> Self {
        Self {
            key: mr.key,
            pd: mr.pd,
            base: mr.addr,
            length: mr.length,
            // The data rights only: MW_BIND is the firmware's business.
            access: AccessFlags::from_bits(mr.access.bits() & AccessFlags::ALL.bits())
                .unwrap_or(AccessFlags::NONE),
            valid: mr.valid,
        }
    }

    /// The region back (`None` for an entry that was never written).
    pub fn region(&self) -> Option<MemoryRegion> {
        (self.key != 0).then_some(MemoryRegion {
            pd: self.pd,
            addr: self.base,
            length: self.length,
            access: self.access,
            key: self.key,
            valid: self.valid,
        })
    }
}

/// The MR table as the hardware holds it: `N` entries, entry `(key >> 8) % N`.
#[derive(Clone, Copy, Debug)]
pub struct MrTable<const N: usize> {
    pub entries: [MrEntry; N],
}

impl<const N: usize> Default for MrTable<N> {
    fn default() -> Self {
        Self {
            entries: [MrEntry::default(); N],
        }
    }
}

impl<const N: usize> MrTable<N> {
    /// The entry index of `key`.
    pub const fn index(key: u32) -> usize {
        (key >> 8) as usize % N
    }

    fn check(
        &self,
        pd: Pd,
        key: u32,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        let e = self
            .entries
            .get(Self::index(key))
            .and_then(MrEntry::region)
            .filter(|m| m.key == key)
            .ok_or(MemError::NoSuchKey(key))?;
        if e.pd != pd {
            return Err(MemError::WrongPd(key));
        }
        e.check(addr, len, need)
    }
}

impl<const N: usize> Protection for MrTable<N> {
    fn check_local(
        &self,
        pd: Pd,
        lkey: Lkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        self.check(pd, lkey.0, addr, len, need)
    }
    /// MRs only: a memory window's key misses (its entry's key never matches), so
    /// the packet goes to the firmware, which checks windows.
    fn check_remote(
        &self,
        pd: Pd,
        _: Qpn,
        rkey: Rkey,
        addr: u64,
        len: u64,
        need: AccessFlags,
    ) -> Result<(), MemError> {
        self.check(pd, rkey.0, addr, len, need)
    }
    /// The hardware never invalidates: SEND_WITH_INV goes to the firmware.
    fn invalidate(&mut self, _: Pd, key: u32) -> Result<(), MemError> {
        Err(MemError::NoSuchKey(key))
    }
    /// Work requests are the firmware's.
    fn bind_mw(&mut self, _: Pd, _: Qpn, b: &MwBind) -> Result<Rkey, MemError> {
        Err(MemError::NoSuchKey(b.mw.0))
    }
    /// Work requests are the firmware's.
    fn reg_fast_mr(&mut self, _: Pd, r: &FastReg) -> Result<MrKeys, MemError> {
        Err(MemError::NoSuchKey(r.mr.0))
    }
}

/// Why a packet went to the firmware (§3.5 `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    Off = 1,
    Opcode = 2,
    Psn = 3,
    Sequence = 4,
    /// A response (ACKNOWLEDGE, READ response, ATOMIC ACKNOWLEDGE) marked ECN CE: the
    /// response path leaves it to the firmware. (A CE-marked request the receive path
    /// takes as an unmarked one, and tells the firmware: [`Event::Ce`].)
    Ecn = 5,
    Length = 6,
    Key = 7,
    /// Not raised since the receive path answers requests out of sequence itself (§3.4,
    /// the PSN rule): the expected packet is placed and clears `nak_sent`. The code keeps
    /// its meaning.
    NakOutstanding = 8,
    NoRecvBuffer = 9,
    /// An earlier exception of the QP is not handled yet.
    Held = 10,
    /// A response whose AETH is not an ACK (NAK, RNR NAK).
    Nak = 11,
    /// A response that skips, or acknowledges, a READ or atomic the hardware has no
    /// data for.
    Order = 12,
    /// Not this port's, or not from the QP's peer (MAC, GID, P_Key, transport), or no
    /// context for the QP.
    Address = 13,
    /// The context cache's entry for the QP (`qpn mod entries`) holds another QP's
    /// context, or none: the firmware handles the packet and may fill the entry
    /// (`docs/scale.md`). Nothing in the entry changes.
    Miss = 14,
}

impl Exception {
    /// The reason from its §3.5 code.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Off,
            2 => Self::Opcode,
            3 => Self::Psn,
            4 => Self::Sequence,
            5 => Self::Ecn,
            6 => Self::Length,
            7 => Self::Key,
            8 => Self::NakOutstanding,
            9 => Self::NoRecvBuffer,
            10 => Self::Held,
            11 => Self::Nak,
            12 => Self::Order,
            13 => Self::Address,
            14 => Self::Miss,
            _ => return None,
        })
    }
}

/// An event-queue entry (§3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The frame goes to the firmware unchanged (in the RX frame buffer `slot`), with
    /// the parser's metadata; nothing in the contexts changed but `held`.
    Exception {
        qpn: Qpn,
        psn: Psn,
        reason: Exception,
        opcode: Opcode,
        slot: u16,
        frame_len: u16,
        meta: RxMeta,
    },
    /// A SEND was placed whole: complete the receive WQE with `byte_len` (`solicited`:
    /// the last packet's SE).
    MsgDone {
        qpn: Qpn,
        msn: Msn,
        byte_len: u32,
        solicited: bool,
        /// The packet was marked ECN CE (see [`Event::Ce`]).
        ce: bool,
        /// The CQE writer wrote the receive WQE's CQE (§3.7, "Receive CQEs"): the
        /// buffer was loaded with its `wr_id` (`recv_cqe`), and the receive CQ had room.
        /// The engine then completes the WQE without a completion. (The receive check
        /// sets it when the buffer was loaded so; the writer clears it when it wrote
        /// nothing.)
        cqe: bool,
    },
    /// The response path took a response for PSN `psn` (an ACK, or a READ response it
    /// placed; `last` when that was the READ's last): `una` is the oldest
    /// unacknowledged PSN now, `done` the in-flight messages it retired, the last of
    /// them send-queue slot `wqe_index`; `cqe`: the CQEs of the signaled messages it
    /// retired are written (§3.7; false: the firmware writes them). `gbn`: the response
    /// was a NAK "PSN sequence error" for `psn` the WQE fetch took as its Go-Back-N to
    /// `psn` (§3.8; `una` = `psn`, what ends before it retired): the firmware sees one
    /// only when the fetch left the rewind to it. `atomic`: the response was the
    /// ATOMIC ACKNOWLEDGE of the atomic at `psn`, whose original value it wrote into the
    /// atomic's local buffer (the atomic retired with it).
    Acked {
        qpn: Qpn,
        psn: Psn,
        una: Psn,
        read: bool,
        last: bool,
        done: u8,
        wqe_index: u16,
        cqe: bool,
        gbn: bool,
        atomic: bool,
    },
    /// The receive path took an in-sequence RDMA READ request for PSN `psn` (§3.4) and
    /// queued its responses: the firmware's engine records it among the responder's
    /// READ resources, from which a duplicate of it (an exception) is answered.
    Read {
        qpn: Qpn,
        psn: Psn,
        va: u64,
        rkey: Rkey,
        len: u32,
        /// The packet was marked ECN CE (see [`Event::Ce`]).
        ce: bool,
    },
    /// The receive path took an in-sequence atomic (CMP_SWAP, FETCH_ADD) request for
    /// PSN `psn` (§3.4, "Atomic requests"): it executed it on the 8 bytes it names and
    /// queued its ATOMIC ACKNOWLEDGE; the firmware's engine records `orig`, the value
    /// before, among the responder's atomic resources, from which a duplicate of it (an
    /// exception) is answered, never executed again.
    Atomic {
        qpn: Qpn,
        psn: Psn,
        orig: u64,
        /// The packet was marked ECN CE (see [`Event::Ce`]).
        ce: bool,
    },
    /// The receive path took a request marked ECN CE (placed it, answered it, §3.4)
    /// that raised no other event (a MSG_DONE or READ carries `ce` instead): the
    /// notification point is the firmware's engine, which counts the mark and owes the
    /// peer a CNP at most once per interval (`cc::NotificationPoint`), as for a packet
    /// it took itself.
    Ce { qpn: Qpn },
    /// The receive path answered a SEND's first packet with an RNR NAK (§3.4,
    /// "Receiver not ready": `rnr` set, nothing loaded): the firmware's engine counts
    /// it as its responder would have (`send_rnr_err`). The expected PSN stayed;
    /// `nak_sent` is set in the context, which the engine takes back with the rest.
    Rnr {
        qpn: Qpn,
        /// The packet was marked ECN CE (see [`Event::Ce`]).
        ce: bool,
    },
    /// The receive path dropped an in-sequence READ or atomic request that found the
    /// QP's `max_dest_rd_atomic` READ responses and ATOMIC ACKNOWLEDGEs queued (§3.4,
    /// "The responder's resources"), as the engine's responder drops it (`check_op`):
    /// the firmware's engine counts it (`resp_dropped`). The expected PSN and the MSN
    /// stayed; `nak_sent` is clear in the context.
    RdDropped {
        qpn: Qpn,
        /// The packet was marked ECN CE (see [`Event::Ce`]).
        ce: bool,
    },
    /// A CNP from the peer of a QP whose pacing entry is on (§2.5; model only): the
    /// firmware's engine runs DCQCN's reaction point (the rate cut) and writes the new
    /// rate into the entry; the QP's data waits until then.
    Cnp { qpn: Qpn },
    /// The pacing entry's byte counter reached its threshold at `bytes` (§2.5; model
    /// only): the firmware's engine runs the byte-counter increase events and writes the
    /// entry; the QP's data waits until then.
    ByteCounter { qpn: Qpn, bytes: u64 },
}

impl Event {
    /// The QP the event is about.
    pub fn qpn(&self) -> Qpn {
        match *self {
            Self::Exception { qpn, .. }
            | Self::MsgDone { qpn, .. }
            | Self::Acked { qpn, .. }
            | Self::Read { qpn, .. }
            | Self::Atomic { qpn, .. }
            | Self::Rnr { qpn, .. }
            | Self::RdDropped { qpn, .. }
            | Self::Ce { qpn }
            | Self::Cnp { qpn }
            | Self::ByteCounter { qpn, .. } => qpn,
        }
    }

    /// Whether the event reports a request marked ECN CE that the hardware took: its
    /// own `Ce` event or the `ce` flag of the event the request raised.
    pub fn ce(&self) -> bool {
        match *self {
            Self::Ce { .. } => true,
            Self::MsgDone { ce, .. }
            | Self::Read { ce, .. }
            | Self::Atomic { ce, .. }
            | Self::Rnr { ce, .. }
            | Self::RdDropped { ce, .. } => ce,
            Self::Exception { .. }
            | Self::Acked { .. }
            | Self::Cnp { .. }
            | Self::ByteCounter { .. } => false,
        }
    }
}

/// A request the receive path answered without placing it or raising an event (§3.4),
/// as the engine's responder answers it (`rc_request`): the frame is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// Its PSN is after the expected one (a packet was lost): the gap's one NAK "PSN
    /// sequence error" for the expected PSN, if not sent yet (the engine's
    /// `out_of_seq_request`).
    OutOfSequence,
    /// A SEND or WRITE whose PSN is before the expected one: executed already, so only
    /// ACKed again, for the PSN before the expected one (the engine's
    /// `duplicate_request`).
    Duplicate,
}

/// What the placement stage did with one request packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// Placed in host memory (false: an exception in `event`, or `answered`).
    pub placed: bool,
    /// An ACK (or NAK) the hardware sends now.
    pub ack: Option<AckDesc>,
    pub event: Option<Event>,
    /// The request was answered without the firmware, not placed.
    pub answered: Option<Answered>,
    /// An RDMA READ request the hardware took (`placed` is set): its responses, queued
    /// behind the ACKs already queued and ahead of any later one.
    pub read: Option<ReadResp>,
    /// An atomic request the hardware executed (`placed` is set): its ATOMIC
    /// ACKNOWLEDGE, queued as `read` is.
    pub atomic: Option<AtomicResp>,
}

impl RxOutcome {
    /// The packet goes to the firmware (`slot` 0: the caller stores the frame and sets
    /// it).
    pub fn exception(qpn: Qpn, pkt: &Packet<'_>, reason: Exception) -> Self {
        Self {
            placed: false,
            ack: None,
            answered: None,
            read: None,
            atomic: None,
            event: Some(Event::Exception {
                qpn,
                psn: pkt.psn(),
                reason,
                opcode: pkt.opcode(),
                slot: 0,
                frame_len: pkt.layout().end as u16,
                meta: pkt.meta(),
            }),
        }
    }

    fn handled(event: Option<Event>) -> Self {
        Self {
            placed: true,
            ack: None,
            event,
            answered: None,
            read: None,
            atomic: None,
        }
    }

    /// Whether the packet went to the firmware (an EXCEPTION event).
    pub fn is_exception(&self) -> bool {
        matches!(self.event, Some(Event::Exception { .. }))
    }
}

/// The PSN rule and the placement rule (§3.4) for one request packet addressed to
/// `ctx`'s QP (the caller looked the context up by the BTH DestQP, and the parser
/// accepted the frame). `rd_queued`: the QP's READ response descriptors (a READ until
/// its last response is sent) and ATOMIC ACKNOWLEDGEs in the response queue, what the
/// engine's responder counts in its `out` queue against `max_dest_rd_atomic`.
pub fn receive(
    ctx: &mut RecvCtx,
    pkt: &Packet<'_>,
    mem: &dyn Protection,
    dma: &mut dyn Dma,
    rd_queued: usize,
) -> RxOutcome {
    if let Some(out) = answer(ctx, pkt) {
        return out;
    }
    let read = pkt.opcode() == Opcode::RC_RDMA_READ_REQUEST;
    let atomic = matches!(pkt.opcode(), Opcode::RC_CMP_SWAP | Opcode::RC_FETCH_ADD);
    if ctx.reads && (read || atomic) {
        if let Some(out) = no_resource(ctx, pkt, read, rd_queued) {
            return out;
        }
    }
    if ctx.reads && read {
        return match check_read(ctx, pkt, mem) {
            Err(reason) => RxOutcome::exception(ctx.qpn, pkt, reason),
            Ok(reth) => take_read(ctx, pkt.psn(), reth),
        };
    }
    if ctx.reads && atomic {
        return match check_atomic(ctx, pkt, mem) {
            Err(reason) => RxOutcome::exception(ctx.qpn, pkt, reason),
            Ok(a) => take_atomic(ctx, pkt, a, dma),
        };
    }
    match check(ctx, pkt, mem) {
        Err(Exception::NoRecvBuffer) => match (ctx.rnr, ctx.cur) {
            (Some(t), RxCur::None) => not_ready(ctx, pkt.psn(), t),
            _ => RxOutcome::exception(ctx.qpn, pkt, Exception::NoRecvBuffer),
        },
        Err(reason) => RxOutcome::exception(ctx.qpn, pkt, reason),
        Ok(op) => place(ctx, pkt, op, dma),
    }
}

/// A READ (`read`) or atomic request of a context with `reads` that finds the QP's
/// READ resources taken: the engine's responder (`check_op`) drops an in-sequence one
/// whose opcode fits (no message under way) and whose right the QP grants, when
/// `max_dest_rd_atomic` of its READ responses and atomic replies are queued (it counts
/// the drop, `resp_dropped`, and has cleared `nak_sent`: the expected PSN came). The
/// hardware drops it so too, and an `RD_DROP` event has the engine count it. Every
/// other failure is left to the checks after (the order of their reasons stays
/// `check_read`'s and `check_atomic`'s). A context with `rd_max` 0 (never written by
/// the firmware, which sets `reads` only with a READ resource) leaves the request to
/// the firmware, whose engine NAKs it. `None`: the checks go on.
fn no_resource(
    ctx: &mut RecvCtx,
    pkt: &Packet<'_>,
    read: bool,
    rd_queued: usize,
) -> Option<RxOutcome> {
    let need = if read {
        AccessFlags::REMOTE_READ
    } else {
        AccessFlags::REMOTE_ATOMIC
    };
    if !ctx.on
        || pkt.psn() != ctx.epsn
        || ctx.cur != RxCur::None
        || !ctx.access.contains(need)
        || rd_queued < usize::from(ctx.rd_max)
    {
        return None;
    }
    if ctx.rd_max == 0 {
        return Some(RxOutcome::exception(ctx.qpn, pkt, Exception::Opcode));
    }
    ctx.nak_sent = false;
    Some(RxOutcome {
        placed: false,
        ack: None,
        event: Some(Event::RdDropped {
            qpn: ctx.qpn,
            ce: false,
        }),
        answered: None,
        read: None,
        atomic: None,
    })
}

/// A SEND's first packet, every other condition of §3.4 met, for a QP whose receive
/// queue the firmware found empty: answered as the engine's responder answers it
/// (`receiver_not_ready`): an RNR NAK for its PSN with the current MSN, the expected
/// PSN not advanced, and `nak_sent` set, so the packets of the message already in
/// flight behind it are dropped without a NAK of their own (the PSN rule).
fn not_ready(ctx: &mut RecvCtx, psn: Psn, t: RnrTimer) -> RxOutcome {
    ctx.nak_sent = true;
    RxOutcome {
        placed: false,
        ack: Some(AckDesc {
            qpn: ctx.qpn,
            syndrome: Syndrome::RnrNak(t),
            psn,
            msn: ctx.msn,
        }),
        event: Some(Event::Rnr {
            qpn: ctx.qpn,
            ce: false,
        }),
        answered: None,
        read: None,
        atomic: None,
    }
}

/// A request whose PSN is not the expected one, answered as the engine's responder
/// answers it, whatever the opcode (`rc_request`: the PSN decides first; the fast path's
/// QPs are Go-Back-N, no selective repeat): out of sequence, dropped with the gap's one
/// NAK; a duplicate SEND or WRITE, dropped and ACKed again with the current MSN. A
/// duplicate READ or atomic is the firmware's (its response comes from the responder's
/// resources): `None`, as for the expected PSN.
fn answer(ctx: &mut RecvCtx, pkt: &Packet<'_>) -> Option<RxOutcome> {
    if !ctx.on {
        return None;
    }
    let op = pkt.info().operation;
    let d = pkt.psn().diff(ctx.epsn);
    let sw = matches!(op, Operation::Send | Operation::RdmaWrite);
    let (answered, syndrome, psn) = if d > 0
        && (sw
            || matches!(
                op,
                Operation::RdmaReadRequest | Operation::CompareSwap | Operation::FetchAdd
            )) {
        if core::mem::replace(&mut ctx.nak_sent, true) {
            return Some(RxOutcome {
                placed: false,
                ack: None,
                event: None,
                answered: Some(Answered::OutOfSequence),
                read: None,
                atomic: None,
            });
        }
        (
            Answered::OutOfSequence,
            Syndrome::Nak(NakCode::PsnSequenceError),
            ctx.epsn,
        )
    } else if d < 0 && sw {
        (Answered::Duplicate, Syndrome::ACK, ctx.epsn.sub(1))
    } else {
        return None;
    };
    Some(RxOutcome {
        placed: false,
        ack: Some(AckDesc {
            qpn: ctx.qpn,
            syndrome,
            psn,
            msn: ctx.msn,
        }),
        event: None,
        answered: Some(answered),
        read: None,
        atomic: None,
    })
}

/// Every condition of §3.4; the operation when the packet is the fast path's.
fn check(ctx: &RecvCtx, pkt: &Packet<'_>, mem: &dyn Protection) -> Result<Operation, Exception> {
    if !ctx.on {
        return Err(Exception::Off);
    }
    let op = pkt.opcode();
    let info = pkt.info();
    let (operation, pos) = (info.operation, info.position);
    let write = matches!(
        op,
        Opcode::RC_RDMA_WRITE_FIRST
            | Opcode::RC_RDMA_WRITE_MIDDLE
            | Opcode::RC_RDMA_WRITE_LAST
            | Opcode::RC_RDMA_WRITE_ONLY
    );
    // A SEND's first packet too: the firmware loads the head receive WQE ahead of it
    // (`docs/fastpath.md` §3.4, "The placement rule").
    let send = matches!(
        op,
        Opcode::RC_SEND_FIRST
            | Opcode::RC_SEND_MIDDLE
            | Opcode::RC_SEND_LAST
            | Opcode::RC_SEND_ONLY
    );
    if !(write || send) {
        return Err(Exception::Opcode);
    }
    if pkt.psn() != ctx.epsn {
        return Err(Exception::Psn);
    }
    let seq_ok = match ctx.cur {
        RxCur::None => pos.starts(),
        RxCur::Write => write && !pos.starts(),
        RxCur::Send => send && !pos.starts(),
    };
    if !seq_ok {
        return Err(Exception::Sequence);
    }
    let n = pkt.payload().len() as u32;
    let mtu = ctx.mtu.bytes();
    let len_ok = match pos {
        // An empty SEND places nothing: the firmware's, as an empty WRITE is.
        Position::Only => n <= mtu && (n != 0 || !send),
        Position::First | Position::Middle => n == mtu,
        Position::Last => n >= 1 && n <= mtu,
    };
    if !len_ok {
        return Err(Exception::Length);
    }
    if send {
        if !ctx.recv_loaded {
            return Err(Exception::NoRecvBuffer);
        }
        return if n <= ctx.recv_resid {
            Ok(operation)
        } else {
            Err(Exception::Length)
        };
    }
    let (va, rkey, resid) = match pkt.reth() {
        Some(r) => (r.va, r.rkey, r.dma_len),
        None => (ctx.va, ctx.rkey, ctx.resid),
    };
    if resid == 0 {
        // A zero-length WRITE touches no memory: the firmware's (it checks nothing).
        return Err(Exception::Length);
    }
    let pad = u32::from(pkt.pad_count());
    let fits = if resid > mtu {
        n == mtu && pad == 0 && !pos.ends()
    } else {
        n == resid && pad == (resid.wrapping_neg() & 3) && pos.ends()
    };
    if !fits {
        return Err(Exception::Length);
    }
    if !ctx.access.contains(AccessFlags::REMOTE_WRITE)
        || mem
            .check_remote(
                ctx.pd,
                ctx.qpn,
                rkey,
                va,
                u64::from(resid),
                AccessFlags::REMOTE_WRITE,
            )
            .is_err()
    {
        return Err(Exception::Key);
    }
    Ok(operation)
}

/// The READ request conditions of §3.4 for a QP whose context has `reads`: what the
/// engine's responder checks before it executes one (`check_op`, `check_length`,
/// `exec_read`; rxe `check_op_seq`, `check_rkey`), each failure the firmware's, so that
/// the engine answers it as it would have (a NAK, a drop). The RETH when it is the
/// hardware's.
fn check_read(
    ctx: &RecvCtx,
    pkt: &Packet<'_>,
    mem: &dyn Protection,
) -> Result<RethRepr, Exception> {
    if !ctx.on {
        return Err(Exception::Off);
    }
    // A duplicate READ is answered from the responder's READ resources, which the
    // firmware's engine keeps: not the hardware's (the PSN rule took the ones after).
    if pkt.psn() != ctx.epsn {
        return Err(Exception::Opcode);
    }
    if ctx.cur != RxCur::None {
        return Err(Exception::Sequence);
    }
    let reth = pkt.reth().ok_or(Exception::Opcode)?;
    // A READ of nothing touches no memory and sends one empty response: the firmware's,
    // as a zero-length WRITE is; so is a RETH past the largest message.
    if !pkt.payload().is_empty() || reth.dma_len == 0 || reth.dma_len > 1 << 31 {
        return Err(Exception::Length);
    }
    if !ctx.access.contains(AccessFlags::REMOTE_READ)
        || mem
            .check_remote(
                ctx.pd,
                ctx.qpn,
                reth.rkey,
                reth.va,
                u64::from(reth.dma_len),
                AccessFlags::REMOTE_READ,
            )
            .is_err()
    {
        return Err(Exception::Key);
    }
    Ok(reth)
}

/// Takes a READ request [`check_read`] accepted, as the engine's responder executes one
/// (`exec_read`; IBTA 9.7.5.1.2, C9-148): the MSN counts it on arrival, the expected
/// PSN moves past every response PSN, and the responses go out from a
/// [`ReadResp`] with the MSN after it. Nothing is read yet: the segmenter reads the
/// payload as it sends each response.
fn take_read(ctx: &mut RecvCtx, psn: Psn, reth: RethRepr) -> RxOutcome {
    let n = reth.dma_len.div_ceil(ctx.mtu.bytes()).max(1);
    ctx.msn = ctx.msn.add(1);
    ctx.epsn = psn.add(n);
    ctx.nak_sent = false;
    RxOutcome {
        placed: true,
        ack: None,
        event: Some(Event::Read {
            qpn: ctx.qpn,
            psn,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            ce: false,
        }),
        answered: None,
        read: Some(ReadResp {
            qpn: ctx.qpn,
            psn,
            va: reth.va,
            resid: reth.dma_len,
            first: true,
            msn: ctx.msn,
            pd: ctx.pd,
            rkey: reth.rkey,
        }),
        atomic: None,
    }
}

/// The atomic request conditions of §3.4 ("Atomic requests") for a QP whose context
/// has `reads`: what the engine's responder checks before it executes one (`check_op`,
/// `check_length`, `exec_atomic`), each failure the firmware's, so that the engine
/// answers it as it would have. The AtomicETH when it is the hardware's.
fn check_atomic(
    ctx: &RecvCtx,
    pkt: &Packet<'_>,
    mem: &dyn Protection,
) -> Result<AtomicEthRepr, Exception> {
    // A duplicate is answered from the responder's atomic resources, which the
    // firmware's engine keeps (the original value the `ATOMIC` event carried): never
    // executed again.
    if pkt.psn() != ctx.epsn {
        return Err(Exception::Opcode);
    }
    if ctx.cur != RxCur::None {
        return Err(Exception::Sequence);
    }
    let a = pkt.atomic_eth().ok_or(Exception::Opcode)?;
    if !pkt.payload().is_empty() {
        return Err(Exception::Length);
    }
    // The engine checks the key, then the alignment: both its NAKs are the firmware's.
    if !ctx.access.contains(AccessFlags::REMOTE_ATOMIC)
        || a.va & 7 != 0
        || mem
            .check_remote(ctx.pd, ctx.qpn, a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC)
            .is_err()
    {
        return Err(Exception::Key);
    }
    Ok(a)
}

/// Executes an atomic [`check_atomic`] accepted, as the engine's responder does
/// (`exec_atomic`): the little-endian `u64` at the VA read by DMA, compared and
/// swapped or added to, written back; the MSN counts it, the expected PSN moves past
/// it, and its ATOMIC ACKNOWLEDGE (the MSN after it, the value before) is queued. A DMA
/// that fails leaves the context as it was: the firmware's (its engine answers the NAK
/// "remote operational error").
fn take_atomic(
    ctx: &mut RecvCtx,
    pkt: &Packet<'_>,
    a: AtomicEthRepr,
    dma: &mut dyn Dma,
) -> RxOutcome {
    let mut b = [0u8; 8];
    if dma.read(a.va, &mut b).is_err() {
        return RxOutcome::exception(ctx.qpn, pkt, Exception::Key);
    }
    let orig = u64::from_le_bytes(b);
    let new = a.apply(pkt.opcode() == Opcode::RC_CMP_SWAP, orig);
    if dma.write(a.va, &new.to_le_bytes()).is_err() {
        return RxOutcome::exception(ctx.qpn, pkt, Exception::Key);
    }
    let psn = pkt.psn();
    ctx.msn = ctx.msn.add(1);
    ctx.epsn = psn.next();
    ctx.nak_sent = false;
    RxOutcome {
        placed: true,
        ack: None,
        event: Some(Event::Atomic {
            qpn: ctx.qpn,
            psn,
            orig,
            ce: false,
        }),
        answered: None,
        read: None,
        atomic: Some(AtomicResp {
            qpn: ctx.qpn,
            psn,
            msn: ctx.msn,
            orig,
        }),
    }
}

/// Places a packet that passed [`check`], advances the context and acknowledges.
fn place(ctx: &mut RecvCtx, pkt: &Packet<'_>, op: Operation, dma: &mut dyn Dma) -> RxOutcome {
    let payload = pkt.payload();
    let n = payload.len() as u32;
    let ends = pkt.info().position.ends();
    let mut event = None;
    if op == Operation::RdmaWrite {
        if let Some(r) = pkt.reth() {
            // (A receive buffer loaded ahead stays loaded: its fields are apart.)
            (ctx.va, ctx.rkey, ctx.resid, ctx.length) = (r.va, r.rkey, r.dma_len, r.dma_len);
        }
        if dma.write(ctx.va, payload).is_err() {
            return RxOutcome::exception(ctx.qpn, pkt, Exception::Key);
        }
        ctx.va = ctx.va.wrapping_add(u64::from(n));
        ctx.resid -= n;
        ctx.cur = if ends { RxCur::None } else { RxCur::Write };
    } else {
        if dma.write(ctx.recv_addr, payload).is_err() {
            return RxOutcome::exception(ctx.qpn, pkt, Exception::Key);
        }
        ctx.recv_addr = ctx.recv_addr.wrapping_add(u64::from(n));
        ctx.recv_resid -= n;
        // The first packet starts the count: `length` may hold a WRITE's RETH length.
        ctx.length = if pkt.info().position.starts() {
            n
        } else {
            ctx.length.wrapping_add(n)
        };
        ctx.cur = if ends { RxCur::None } else { RxCur::Send };
    }
    if ends {
        ctx.msn = ctx.msn.add(1);
        if op == Operation::Send {
            ctx.recv_loaded = false;
            event = Some(Event::MsgDone {
                qpn: ctx.qpn,
                msn: ctx.msn,
                byte_len: ctx.length,
                solicited: pkt.se(),
                ce: false,
                cqe: false,
            });
        }
    }
    let psn = ctx.epsn;
    ctx.epsn = psn.next();
    // The expected packet closes the gap (the engine clears `nak_sent` on it).
    ctx.nak_sent = false;
    let due = pkt.ack_req() || (ctx.ack_every != 0 && ctx.unacked + 1 >= ctx.ack_every);
    let ack = if due {
        ctx.unacked = 0;
        Some(AckDesc {
            qpn: ctx.qpn,
            syndrome: Syndrome::ACK,
            psn,
            msn: ctx.msn,
        })
    } else {
        ctx.unacked = ctx.unacked.saturating_add(1);
        None
    };
    RxOutcome {
        placed: true,
        ack,
        event,
        answered: None,
        read: None,
        atomic: None,
    }
}

// ---------------------------------------------------------------------------------------
// The requester's responses (§3.6)

/// What an in-flight message is, for the response rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InflightKind {
    /// SEND or WRITE: an ACK retires it.
    Msg,
    /// READ: its responses carry the data back to `sges`.
    Read,
    /// Atomic: its ATOMIC ACKNOWLEDGE carries the original value back to `sges`.
    Atomic,
}

/// A message the segmenter started and no response has retired yet (the hardware keeps
/// one per accepted non-REPLAY descriptor, in PSN order, per QP).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inflight {
    pub wqe_index: u16,
    pub kind: InflightKind,
    pub first_psn: Psn,
    pub last_psn: Psn,
    /// READ: the message length and where its bytes go; atomic: 8 and its buffer.
    pub length: u32,
    pub sges: heapless::Vec<Sge, MAX_SGE>,
    /// A signaled SEND, WRITE, READ or atomic whose CQE the hardware writes when a response
    /// retires it (`docs/fastpath.md` §3.7): the descriptor's `wr_id` and operation.
    pub cqe: Option<(u64, MsgOp)>,
}

/// The response rule (§3.6) for one RC response packet (ACKNOWLEDGE, READ response,
/// ATOMIC ACKNOWLEDGE) addressed to `ctx`'s QP: takes an ACK of sent PSNs and places an
/// in-sequence READ response or ATOMIC ACKNOWLEDGE, retiring the in-flight messages it
/// completes; anything else is an exception and changes nothing.
pub fn respond<const N: usize>(
    ctx: &mut SendCtx,
    qpn: Qpn,
    inflight: &mut heapless::Deque<Inflight, N>,
    pkt: &Packet<'_>,
    dma: &mut dyn Dma,
) -> RxOutcome {
    match check_response(ctx, inflight, pkt) {
        Err(reason) => RxOutcome::exception(qpn, pkt, reason),
        Ok(target) => take_response(ctx, qpn, inflight, pkt, target, dma),
    }
}

/// The §3.6 conditions; the index of the in-flight message the response is for.
fn check_response<const N: usize>(
    ctx: &SendCtx,
    inflight: &heapless::Deque<Inflight, N>,
    pkt: &Packet<'_>,
) -> Result<usize, Exception> {
    if !ctx.valid {
        return Err(Exception::Off);
    }
    let read = pkt.info().operation == Operation::RdmaReadResponse;
    let atomic = pkt.opcode() == Opcode::RC_ATOMIC_ACKNOWLEDGE;
    if !(read || atomic || pkt.opcode() == Opcode::RC_ACKNOWLEDGE) {
        return Err(Exception::Opcode);
    }
    if pkt
        .aeth()
        .is_some_and(|a| !matches!(a.syndrome, Syndrome::Ack(_)))
    {
        return Err(Exception::Nak);
    }
    let psn = pkt.psn();
    let d = psn.diff(ctx.una_psn);
    // A READ response or an ATOMIC ACKNOWLEDGE carries data: taken only at the oldest
    // unacknowledged PSN. (The engine's completer also takes one that implicitly
    // acknowledges SENDs and WRITEs before it, their ACK lost: the firmware's here.)
    if d < 0 || !psn.before(ctx.next_psn) || ((read || atomic) && d != 0) {
        return Err(Exception::Psn);
    }
    let mut target = None;
    for (i, m) in inflight.iter().enumerate() {
        if !psn.after(m.last_psn) {
            if psn.before(m.first_psn) {
                return Err(Exception::Psn);
            }
            target = Some((i, m));
            break;
        }
        if m.kind != InflightKind::Msg {
            return Err(Exception::Order);
        }
    }
    let (i, m) = target.ok_or(Exception::Psn)?;
    let want = if read {
        InflightKind::Read
    } else if atomic {
        InflightKind::Atomic
    } else {
        InflightKind::Msg
    };
    if m.kind != want {
        return Err(Exception::Order);
    }
    if read {
        let mtu = ctx.mtu.bytes();
        let k = psn.diff(m.first_psn) as u32;
        let remaining = m
            .length
            .checked_sub(k.saturating_mul(mtu))
            .ok_or(Exception::Length)?;
        let n = pkt.payload().len() as u32;
        let ends = pkt.info().position.ends();
        let ok = if ends {
            n == remaining && n <= mtu && psn == m.last_psn
        } else {
            n == mtu && remaining > mtu
        };
        if !ok {
            return Err(Exception::Length);
        }
    }
    Ok(i)
}

/// Takes a response [`check_response`] accepted.
fn take_response<const N: usize>(
    ctx: &mut SendCtx,
    qpn: Qpn,
    inflight: &mut heapless::Deque<Inflight, N>,
    pkt: &Packet<'_>,
    target: usize,
    dma: &mut dyn Dma,
) -> RxOutcome {
    let psn = pkt.psn();
    let read = pkt.info().operation == Operation::RdmaReadResponse;
    // An atomic's one PSN: its ATOMIC ACKNOWLEDGE (check_response matched the kind)
    // carries the original value, which goes into the atomic's local buffer as the
    // engine's completer writes it (`on_atomic_ack`: host order, little-endian here),
    // and finishes it.
    let atomic = pkt.atomic_ack_eth().map(|a| a.orig_rem_data.to_le_bytes());
    let ends = pkt.info().position.ends();
    if read || atomic.is_some() {
        let Some(m) = inflight.iter().nth(target) else {
            return RxOutcome::exception(qpn, pkt, Exception::Order);
        };
        let offset = (psn.diff(m.first_psn) as u32).saturating_mul(ctx.mtu.bytes());
        let data = match &atomic {
            Some(orig) => &orig[..],
            None => pkt.payload(),
        };
        if !scatter(dma, &m.sges, offset, data) {
            return RxOutcome::exception(qpn, pkt, Exception::Key);
        }
    }
    // Everything before the target is acknowledged by this response; the target too
    // when the response covers its last PSN.
    let target_done = if read {
        ends
    } else {
        inflight
            .iter()
            .nth(target)
            .is_some_and(|m| m.last_psn == psn)
    };
    let retire = target + usize::from(target_done);
    let mut wqe_index = 0;
    for _ in 0..retire {
        if let Some(m) = inflight.pop_front() {
            wqe_index = m.wqe_index;
        }
    }
    ctx.una_psn = psn.next();
    RxOutcome::handled(Some(Event::Acked {
        qpn,
        psn,
        una: ctx.una_psn,
        read,
        last: read && ends,
        done: retire.min(255) as u8,
        wqe_index,
        cqe: false,
        gbn: false,
        atomic: atomic.is_some(),
    }))
}

// ---------------------------------------------------------------------------------------
// Which rule a packet meets

/// A request the receive path took (`out` no exception) marked ECN CE: the firmware's
/// engine hears of it (its notification point, [`Event::Ce`]), on the event the packet
/// raises, or on one of its own. An exception tells it anyway: the engine takes the
/// frame whole.
fn noted_ce(mut out: RxOutcome, qpn: Qpn, pkt: &Packet<'_>) -> RxOutcome {
    if pkt.ecn() == crate::cc::ECN_CE {
        match &mut out.event {
            None => out.event = Some(Event::Ce { qpn }),
            Some(
                Event::MsgDone { ce, .. }
                | Event::Read { ce, .. }
                | Event::Atomic { ce, .. }
                | Event::Rnr { ce, .. }
                | Event::RdDropped { ce, .. },
            ) => *ce = true,
            Some(_) => {}
        }
    }
    out
}

/// The port's own addresses (what the engine checks every frame against).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAddr {
    pub mac: [u8; 6],
    pub gid: [u8; 16],
}

/// The receive checks the engine makes before any QP rule, made here on the contexts of
/// the entry the caller found by DestQP: the entry is the QP's (the cache's tag), the
/// frame is this port's, RC (the fast path's QPs are), from the QP's peer with a
/// matching P_Key, and no exception of the QP is pending. Then requests go to
/// [`receive`] (with `rd_queued`, the QP's READ responses and atomic replies queued),
/// responses to [`respond`].
// (each argument one of the hardware's inputs: the contexts, the in-flight list, the
// frame, the MR table, the DMA port and the response queue's count)
#[allow(clippy::too_many_arguments)]
pub fn dispatch<const N: usize>(
    port: &PortAddr,
    rctx: &mut RecvCtx,
    sctx: &mut SendCtx,
    inflight: &mut heapless::Deque<Inflight, N>,
    pkt: &Packet<'_>,
    mem: &dyn Protection,
    dma: &mut dyn Dma,
    rd_queued: usize,
) -> RxOutcome {
    let qpn = rctx.qpn;
    // The context cache's tag (`docs/scale.md`), before any rule: contexts that are
    // another QP's (its entry's current holder) make a miss that changes nothing, not
    // even `held`, for requests and responses alike (fp_rx_check's first test).
    if pkt.dest_qp() != qpn {
        return RxOutcome::exception(pkt.dest_qp(), pkt, Exception::Miss);
    }
    let (src, dst) = pkt.gids();
    let ours = pkt.dst_mac() == port.mac
        && dst == port.gid
        && pkt.info().transport == Transport::Rc
        && crate::engine::pkey_match(pkt.pkey(), rctx.pkey)
        && src == rctx.peer_gid;
    if !rctx.on {
        return RxOutcome::exception(qpn, pkt, Exception::Off);
    }
    let out = if !ours {
        RxOutcome::exception(qpn, pkt, Exception::Address)
    } else if rctx.held {
        RxOutcome::exception(qpn, pkt, Exception::Held)
    } else if matches!(
        pkt.info().operation,
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
    ) {
        if pkt.ecn() == crate::cc::ECN_CE {
            // A marked response is the firmware's.
            RxOutcome::exception(qpn, pkt, Exception::Ecn)
        } else {
            respond(sctx, qpn, inflight, pkt, dma)
        }
    } else {
        noted_ce(receive(rctx, pkt, mem, dma, rd_queued), qpn, pkt)
    };
    if out.is_exception() {
        rctx.held = true;
    }
    out
}
