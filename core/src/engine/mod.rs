//! The engine: fixed-capacity tables of QPs, CQs, PDs and MRs, and the entry points the
//! firmware (or a host model) drives.
//!
//! # Contract (quinn-proto's, in `no_std`)
//!
//! The engine is sans-IO: it never reads a clock, allocates, or does I/O. Time is a
//! nanosecond [`Instant`] passed in, and **successive `now` values must never
//! decrease** (a `now` earlier than one already seen is treated as the later one). Host memory is reached only through the [`Dma`] handed to the calls that
//! move payload bytes.
//!
//! Methods fall into groups:
//! * **Setup and queries**: `alloc_pd`, `reg_mr`, `create_cq`, `create_qp`,
//!   `modify_qp`, `query_qp`, `counters`, ...
//! * **Application commands**: [`Engine::post_send`], [`Engine::post_recv`].
//! * **Events**: [`Engine::handle_packet`] for every received frame,
//!   [`Engine::handle_timeout`] when the time from `poll_timeout` has come.
//! * **Polls**: [`Engine::poll_transmit`], [`Engine::poll_completion`],
//!   [`Engine::poll_timeout`].
//!
//! After any command or event, call `poll_transmit` until it returns `None` (sending
//! each frame), drain `poll_completion` as the application wishes, and then re-arm the
//! timer with `poll_timeout` (it may have moved earlier or later). `handle_timeout` may
//! be called early or late; it only acts on timers that are due at `now`.

use core::net::{Ipv4Addr, Ipv6Addr};

use heapless::Deque;

use crate::cc::{CcConfig, QpCc, QpCcInfo, ECN_CE, ECN_ECT0};
use crate::dcb::Priorities;
use crate::fastpath;
use crate::memory::{AccessFlags, Dma, DmaError, MemError, MemoryTable, MrKeys, MwType, Pd};
use crate::num::{Lkey, Psn, Qpn, Rkey};
use crate::transport::{
    AddressVector, CompletionSink, Counters, CurOp, Env, Error, Instant, Mtu, PortLimits, Qp,
    QpAttr, QpInfo, QpInitAttr, QpQueues, QpRef, QpState, QpType, RecvWr, SendWr, SrqHandle,
    SrqInfo, SrqTable, TransportConfig, WorkCompletion, MAX_SRQ,
};
use crate::wire::aeth::RnrTimer;
use crate::wire::bth::BthRepr;
use crate::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use crate::wire::icrc::IcrcKind;
use crate::wire::ipv4::Ipv4Repr;
use crate::wire::ipv6::{Ipv6Repr, NEXT_HEADER_BTH, NEXT_HEADER_UDP};
use crate::wire::opcode::{Opcode, Operation, Transport};
use crate::wire::udp::{UdpRepr, ROCEV2_PORT};
use crate::wire::{self, HeaderTemplate, L3Repr};

pub(crate) mod ctx;
mod port;

pub use ctx::{home_slot, Evicted, MAX_CTX_RD, QP_CTX_LEN};
pub use port::{DcbConfig, GidEntry, GidIndexError, GidTable, GidType, GID_TABLE_LEN};

/// The first QPN: 0 and 1 are the special QPs, and rxe starts at 16. `create_qp` gives
/// QPN `QPN_BASE + slot`; a caller that keeps QP contexts outside the engine names its
/// QPNs itself (`create_qp_with`) and moves QPs in and out of the slots
/// (`evict_qp`, `restore_qp`; `docs/scale.md`).
pub const QPN_BASE: u32 = 16;

/// Entries in the port's P_Key table.
pub const PKEY_TABLE_LEN: usize = 4;

/// The port: its addresses, P_Key table, active MTU, priorities and transport tunables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// The port's Ethernet address.
    pub mac: [u8; 6],
    /// The GID table: IPv4-mapped addresses for RoCEv2 over IPv4, or IPv6 addresses.
    pub gids: GidTable,
    /// P_Key table; entry 0 is the default full-member key 0xFFFF.
    pub pkeys: [u16; PKEY_TABLE_LEN],
    /// Largest path MTU a QP may use.
    pub active_mtu: Mtu,
    /// Requester window and AckReq policy.
    pub transport: TransportConfig,
    /// Congestion control (DCQCN); off by default.
    pub cc: CcConfig,
    /// Priority flow control; off by default.
    pub dcb: DcbConfig,
}

impl PortConfig {
    /// A port with the given MAC and GID index 0, default P_Key, MTU 4096 and rxe's
    /// tunables.
    pub const fn new(mac: [u8; 6], gid: [u8; 16]) -> Self {
        Self {
            mac,
            gids: GidTable::single(gid),
            pkeys: [0xFFFF, 0, 0, 0],
            active_mtu: Mtu::Mtu4096,
            transport: TransportConfig::DEFAULT,
            cc: CcConfig::OFF,
            dcb: DcbConfig::OFF,
        }
    }

    /// The GID at index 0 (zero when the entry is empty).
    pub fn gid(&self) -> [u8; 16] {
        self.gids.get(0).map_or([0; 16], |e| e.gid)
    }
}

/// The P_Key match rule of roce-facts §2 (rxe `pkey_match`): equal low 15 bits, not
/// zero, and at least one of the two a full member.
pub fn pkey_match(a: u16, b: u16) -> bool {
    let (la, lb) = (a & 0x7FFF, b & 0x7FFF);
    la == lb && la != 0 && (a | b) & 0x8000 != 0
}

/// Handle of a completion queue.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CqHandle(pub u16);

#[derive(Clone)]
struct CqSlot<const CQE: usize> {
    entries: Deque<WorkCompletion, CQE>,
    users: u16,
}

#[derive(Clone)]
struct CqTable<const CQS: usize, const CQE: usize> {
    slots: [Option<CqSlot<CQE>>; CQS],
    /// A push found its CQ full (or gone) since the last `Engine::service`: completions
    /// may be waiting for room. Completions otherwise go out as work finishes, so only
    /// this makes `service` walk the QPs.
    stalled: bool,
    /// A completion was pushed since [`Engine::take_completion_news`] last looked.
    news: bool,
}

impl<const CQS: usize, const CQE: usize> CqTable<CQS, CQE> {
    /// Free entries of CQ `cq` (0 for none).
    fn room(&self, cq: u16) -> usize {
        match self.slots.get(usize::from(cq)) {
            Some(Some(s)) => CQE - s.entries.len(),
            _ => 0,
        }
    }
}

impl<const CQS: usize, const CQE: usize> CompletionSink for CqTable<CQS, CQE> {
    fn has_room(&self, cq: u16) -> bool {
        matches!(self.slots.get(usize::from(cq)), Some(Some(s)) if !s.entries.is_full())
    }
    // Inlined where the caller names the table (a MSG_DONE's completion): the
    // completion's fields go into the queue's slot, not through a 32-byte `memcpy`
    // (~85 instructions of the event's); the responder's calls through `Env` keep the
    // out-of-line copy.
    #[inline(always)]
    fn push(&mut self, cq: u16, wc: WorkCompletion) -> bool {
        let ok = match self.slots.get_mut(usize::from(cq)) {
            Some(Some(s)) => s.entries.push_back(wc).is_ok(),
            _ => false,
        };
        self.stalled |= !ok;
        self.news = true;
        ok
    }
}

/// How [`Engine::run_qp`] sets a QP's deadline and flags (`qp_marked`) after it ran.
#[derive(Clone, Copy)]
enum Marks {
    /// In a call (`qp_ran`): most runs.
    Ran,
    /// Inlined: the fast path's per-packet entries.
    Inline,
    /// Not at all: a later run of the same QP, which its caller makes, sets them
    /// (`fastpath_adopt_begin`, whose `fastpath_adopt_end` follows; it moves no timer
    /// and asks for no `poll_transmit`).
    Later,
    /// Not at all: the run changed nothing they look at (the responder's record of a
    /// READ or atomic the fast path answered: no frame, timer or descriptor of the
    /// QP's). Marked, the QP's descriptor flag sent the next poll's transmit pass
    /// through `fastpath_poll_request`'s scan for nothing (~170 instructions on the
    /// SoC's core, a quarter of its READ event's poll).
    Unchanged,
}

/// DMA for calls that never move payload bytes.
struct NoDma;

impl Dma for NoDma {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        Err(DmaError {
            addr,
            len: buf.len(),
        })
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        Err(DmaError {
            addr,
            len: data.len(),
        })
    }
}

/// The RNIC's protocol engine with `QPS` queue pairs, `CQS` completion queues of `CQE`
/// entries, `PDS` protection domains, `MRS` memory regions, and per QP `SQ` send WQEs,
/// `RQ` receive WQEs and `RD` responder READ/ATOMIC resources.
///
/// `Clone` takes a snapshot of the whole engine (tables, QP contexts, queues): the fuzz
/// targets restore one per input instead of building engines and QPs again.
#[derive(Clone)]
pub struct Engine<
    const QPS: usize,
    const CQS: usize,
    const PDS: usize,
    const MRS: usize,
    const SQ: usize,
    const RQ: usize,
    const CQE: usize,
    const RD: usize,
> {
    cfg: PortConfig,
    mem: MemoryTable<PDS, MRS>,
    cqs: CqTable<CQS, CQE>,
    qps: [Option<Qp>; QPS],
    queues: [QpQueues<SQ, RQ, RD>; QPS],
    /// Shared receive queues, as deep as a QP's receive queue.
    srqs: SrqTable<MAX_SRQ, RQ>,
    /// Per QP, its frames' headers before the BTH, written when its address or ECN
    /// marking changes (`create_qp`, `modify_qp`, `set_qp_cc`), as a NIC's QP context
    /// holds them: each frame copies them and patches its lengths instead of building
    /// every header again.
    tx_hdr: [HeaderTemplate; QPS],
    /// Per QP, the 802.1p priorities of its CNPs and of its other frames
    /// ([`qp_priorities`]), written with its header template: `poll_transmit_except`
    /// checks them against the blocked ones at every call that has some blocked (a
    /// port's full queue: the second call of every frame on a busy port).
    tx_prio: [QpPriorities; QPS],
    /// Per QP: it may have a frame to send. Cleared when `transmit_one` finds nothing;
    /// set by every call that runs the QP's state machine (`with_qp`), the only way its
    /// answer can change (it does not depend on the time; a paced QP whose pacer holds
    /// a packet stays set), when the responder's or the requester's gate lets a frame
    /// through (`resp_may_send`, `req_may_send`: where they say no, `transmit_one`
    /// would find nothing and change nothing). `poll_transmit` then passes over idle QPs without asking
    /// each one, as a NIC's scheduler keeps a ready list.
    tx_ready: [bool; QPS],
    /// Per QP on the fast path: it may have a request descriptor to hand out (set with
    /// `tx_ready`, cleared when `fastpath_poll_request` finds nothing).
    fp_ready: [bool; QPS],
    /// Per QP, its next transport timer deadline, kept up to date by `with_qp` and
    /// `poll_transmit`: `poll_timeout` takes the minimum of one dense array instead of
    /// visiting every QP context.
    deadlines: [Option<Instant>; QPS],
    /// Summary flags over the per-QP ones above, so that a poll with nothing to do asks
    /// three words instead of scanning every QP (as hardware ORs a ready list into one
    /// status bit): some `tx_ready` / `fp_ready` flag may be set (cleared when a scan
    /// finds none), and a time no later than every armed deadline (`None`: no deadline
    /// armed since it was last made exact).
    tx_any: bool,
    fp_any: bool,
    /// The fast path under the firmware answers in-sequence READ requests itself (the
    /// model's receive path; `docs/fastpath.md` §3.4): receive contexts get `reads`.
    fp_reads: bool,
    /// The fast path's receive contexts may hold the head receive WQE of a QP between
    /// messages (`docs/fastpath.md` §3.4): the hardware places a SEND's first packet.
    fp_sends: bool,
    /// The fast path answers a SEND to a QP whose receive queue is empty with an RNR
    /// NAK itself (the model's receive path; `docs/fastpath.md` §3.4, "Receiver not
    /// ready"): receive contexts get `rnr`.
    fp_rnr: bool,
    /// Some QP on the fast path may owe the hardware a FLUSH (its requester was rewound:
    /// Go-Back-N); cleared when `fastpath_poll_flush` finds none.
    fp_flush_any: bool,
    timer_floor: Option<Instant>,
    /// Congestion control per QP slot, beside the contexts.
    cc: [QpCc; QPS],
    /// Some QP has its reaction point on: CC timers and pacing need looking at.
    cc_any: bool,
    /// The fast path under this engine paces (`docs/fastpath.md` §2.5): QPs with the
    /// reaction point on may be on it, and DCQCN's changes to their rates are marked
    /// for the firmware to write (`fastpath_pace_write`).
    fp_pace: bool,
    /// A data frame of a paced QP on the fast path that `poll_transmit` just built
    /// (its QPN and length): the firmware hands it to the pacing entry
    /// ([`Engine::fastpath_take_paced_sent`]).
    fp_paced_sent: Option<(Qpn, usize)>,
    /// Per QP slot, what of its pacing entry changed since the firmware last wrote it:
    /// bit 0 the rate or its increase timer, bit 1 the byte counter.
    pace_dirty: [u8; QPS],
    /// Some slot's `pace_dirty` is set.
    pace_dirty_any: bool,
    counters: Counters,
    /// Round-robin position of `poll_transmit`.
    tx_next: usize,
    /// The latest `now` seen: an earlier one is taken as this (time never runs back).
    last_now: Instant,
    /// One past the highest slot in use: loops over QPs stop here, so a NIC with room for
    /// many QPs but few in use pays only for those.
    hi: usize,
}

impl<
        const QPS: usize,
        const CQS: usize,
        const PDS: usize,
        const MRS: usize,
        const SQ: usize,
        const RQ: usize,
        const CQE: usize,
        const RD: usize,
    > Engine<QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    /// An engine with empty tables. `const`, so a firmware image can have its NIC built
    /// at compile time, in its static: built at run time and returned, the NIC passes
    /// through the stack whole (over 100 KiB on the soft core, more than its RAM leaves),
    /// and `core` has no `unsafe` to build it in place. Give such an engine its
    /// addresses with [`Engine::set_config`] once they are known.
    pub const fn new(cfg: PortConfig) -> Self {
        Self {
            cfg,
            mem: MemoryTable::new(),
            cqs: CqTable {
                slots: [const { None }; CQS],
                stalled: false,
                news: false,
            },
            qps: [const { None }; QPS],
            queues: [const { QpQueues::new() }; QPS],
            srqs: SrqTable::new(),
            tx_hdr: [HeaderTemplate::EMPTY; QPS],
            tx_prio: [QpPriorities { cnp: 0, data: 0 }; QPS],
            tx_ready: [false; QPS],
            fp_ready: [false; QPS],
            deadlines: [None; QPS],
            tx_any: false,
            fp_any: false,
            fp_reads: false,
            fp_sends: false,
            fp_rnr: false,
            fp_flush_any: false,
            timer_floor: None,
            cc: [QpCc::new(&cfg.cc); QPS],
            cc_any: cfg.cc.rp,
            fp_pace: false,
            fp_paced_sent: None,
            pace_dirty: [0; QPS],
            pace_dirty_any: false,
            counters: Counters::ZERO,
            tx_next: 0,
            hi: 0,
            last_now: Instant::ZERO,
        }
    }

    /// The port configuration.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Event counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The memory table (for inspection).
    pub fn memory(&self) -> &MemoryTable<PDS, MRS> {
        &self.mem
    }

    // -----------------------------------------------------------------------------------
    // Setup: PDs, MRs, CQs, QPs

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&mut self) -> Result<Pd, Error> {
        Ok(self.mem.alloc_pd()?)
    }

    /// `ibv_dealloc_pd`.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), Error> {
        Ok(self.mem.dealloc_pd(pd)?)
    }

    /// `ibv_reg_mr`.
    pub fn reg_mr(
        &mut self,
        pd: Pd,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Result<MrKeys, Error> {
        Ok(self.mem.reg_mr(pd, addr, length, access)?)
    }

    /// `ibv_dereg_mr`.
    pub fn dereg_mr(&mut self, lkey: Lkey) -> Result<(), Error> {
        Ok(self.mem.dereg_mr(lkey)?)
    }

    /// Kernel `ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, ..)`: a fast-registration MR of up
    /// to `max_len` bytes, invalid until a REG_MR work request registers it.
    pub fn alloc_mr(&mut self, pd: Pd, max_len: u64) -> Result<MrKeys, Error> {
        Ok(self.mem.alloc_mr(pd, max_len)?)
    }

    /// `ibv_alloc_mw`: an unbound memory window; its R_Key.
    pub fn alloc_mw(&mut self, pd: Pd, mw_type: MwType) -> Result<Rkey, Error> {
        Ok(self.mem.alloc_mw(pd, mw_type)?)
    }

    /// `ibv_dealloc_mw`.
    pub fn dealloc_mw(&mut self, rkey: Rkey) -> Result<(), Error> {
        Ok(self.mem.dealloc_mw(rkey)?)
    }

    /// Invalidates a key directly (what a LOCAL_INV WR does, without the WR).
    pub fn invalidate_key(&mut self, pd: Pd, key: u32) -> Result<(), Error> {
        Ok(self.mem.invalidate(pd, key)?)
    }

    /// `ibv_create_cq` with `CQE` entries.
    pub fn create_cq(&mut self) -> Result<CqHandle, Error> {
        let (i, slot) = self
            .cqs
            .slots
            .iter_mut()
            .enumerate()
            .find(|(_, s)| s.is_none())
            .ok_or(Error::TableFull { table: "CQ" })?;
        let h = u16::try_from(i).map_err(|_| Error::TableFull { table: "CQ" })?;
        *slot = Some(CqSlot {
            entries: Deque::new(),
            users: 0,
        });
        Ok(CqHandle(h))
    }

    /// `ibv_destroy_cq`: fails while QPs use it.
    pub fn destroy_cq(&mut self, cq: CqHandle) -> Result<(), Error> {
        match self.cqs.slots.get_mut(usize::from(cq.0)) {
            Some(s @ Some(_)) => {
                if s.as_ref().is_some_and(|c| c.users != 0) {
                    return Err(Error::Busy { what: "CQ" });
                }
                *s = None;
                Ok(())
            }
            _ => Err(Error::NoSuchCq(cq.0)),
        }
    }

    fn cq_use(&mut self, cq: u16, delta: i32) -> Result<(), Error> {
        match self.cqs.slots.get_mut(usize::from(cq)) {
            Some(Some(s)) => {
                s.users = if delta > 0 {
                    s.users.saturating_add(1)
                } else {
                    s.users.saturating_sub(1)
                };
                Ok(())
            }
            _ => Err(Error::NoSuchCq(cq)),
        }
    }

    /// `ibv_create_qp`: a QP in RESET.
    pub fn create_qp(&mut self, init: &QpInitAttr) -> Result<Qpn, Error> {
        self.check_init(init)?;
        let slot = self
            .qps
            .iter()
            .position(Option::is_none)
            .ok_or(Error::TableFull { table: "QP" })?;
        let qpn = Qpn::new(QPN_BASE + slot as u32);
        if qpn.value() != QPN_BASE + slot as u32 || self.slot(qpn).is_some() {
            return Err(Error::TableFull { table: "QP" });
        }
        self.create_in(slot, qpn, init)
    }

    /// `ibv_create_qp` with the QPN the caller chose (its context store's index, at
    /// least `QPN_BASE`): fails with `Busy` if a resident QP has that number, and
    /// `TableFull` if no slot is free (evict one first).
    pub fn create_qp_with(&mut self, qpn: Qpn, init: &QpInitAttr) -> Result<Qpn, Error> {
        if qpn.value() < QPN_BASE {
            return Err(Error::NoSuchQp(qpn));
        }
        self.check_init(init)?;
        if self.slot(qpn).is_some() {
            return Err(Error::Busy { what: "QPN" });
        }
        let slot = self
            .free_slot_for(qpn)
            .ok_or(Error::TableFull { table: "QP" })?;
        self.create_in(slot, qpn, init)
    }

    /// The general services QP (GSI, QP1; IBTA §3.9.2, rxe's `IB_QPT_GSI`): a UD QP
    /// numbered 1, the port's one, that carries management datagrams such as the CM's
    /// ([`crate::cm`]). Its Q_Key is [`Qkey::GSI`](crate::num::Qkey::GSI), set at
    /// INIT as for any UD QP. Fails with `Busy` if the port has one.
    pub fn create_gsi_qp(&mut self, init: &QpInitAttr) -> Result<Qpn, Error> {
        if init.qp_type != QpType::Ud || init.srq.is_some() {
            return Err(Error::InvalidCap { cap: "qp_type" });
        }
        let qpn = Qpn::GSI;
        self.check_init(init)?;
        if self.slot(qpn).is_some() {
            return Err(Error::Busy { what: "QPN" });
        }
        let slot = self
            .free_slot_for(qpn)
            .ok_or(Error::TableFull { table: "QP" })?;
        self.create_in(slot, qpn, init)
    }

    /// The CQs and the PD a new QP names exist, and its capabilities are within the NIC's.
    fn check_init(&self, init: &QpInitAttr) -> Result<(), Error> {
        for cq in [init.send_cq, init.recv_cq] {
            if !matches!(self.cqs.slots.get(usize::from(cq)), Some(Some(_))) {
                return Err(Error::NoSuchCq(cq));
            }
        }
        if !self.mem.pd_exists(init.pd) {
            return Err(Error::Memory(MemError::NoSuchPd));
        }
        if init.max_inline_data > crate::transport::MAX_INLINE_DATA {
            return Err(Error::InvalidCap {
                cap: "max_inline_data",
            });
        }
        if let Some(h) = init.srq {
            self.srqs.query(h)?;
        }
        Ok(())
    }

    /// Creates QP `qpn` in the free `slot` (`check_init` passed).
    fn create_in(&mut self, slot: usize, qpn: Qpn, init: &QpInitAttr) -> Result<Qpn, Error> {
        if let Some(h) = init.srq {
            // First: the one step that can still fail, so a failure takes nothing.
            self.srqs.attach(h, init.pd)?;
        }
        self.mem.pd_get(init.pd)?;
        self.cq_use(init.send_cq, 1)?;
        self.cq_use(init.recv_cq, 1)?;
        if let Some(q) = self.queues.get_mut(slot) {
            q.clear();
        }
        if let Some(c) = self.cc.get_mut(slot) {
            *c = QpCc::new(&self.cfg.cc);
        }
        if let Some(s) = self.qps.get_mut(slot) {
            *s = Some(Qp::new(qpn, init));
            self.hi = self.hi.max(slot + 1);
        }
        self.update_tx_hdr(slot);
        Ok(qpn)
    }

    /// `ibv_destroy_qp`: its WQEs are dropped without completions.
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        let Some(qp) = self.free_slot(slot) else {
            return Err(Error::NoSuchQp(qpn));
        };
        self.mem.pd_put(qp.pd);
        let _ = self.cq_use(qp.send_cq, -1);
        let _ = self.cq_use(qp.recv_cq, -1);
        if let Some(h) = qp.srq {
            self.srqs.detach(h);
        }
        Ok(())
    }

    /// Empties `slot` (its queues, CC state, timers, ready flags) and returns the
    /// context it held.
    fn free_slot(&mut self, slot: usize) -> Option<Qp> {
        let qp = self.qps.get_mut(slot).and_then(Option::take)?;
        if let Some(q) = self.queues.get_mut(slot) {
            q.clear();
        }
        // No timers or owed CNP outlive the QP.
        if let Some(c) = self.cc.get_mut(slot) {
            *c = QpCc::new(&self.cfg.cc);
        }
        if let (Some(ready), Some(d), Some(f)) = (
            self.tx_ready.get_mut(slot),
            self.deadlines.get_mut(slot),
            self.fp_ready.get_mut(slot),
        ) {
            (*ready, *d, *f) = (false, None, false);
        }
        self.hi = self
            .qps
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |i| i + 1);
        Some(qp)
    }

    /// `ibv_create_srq` in `pd`: `max_wr` receive WQEs (at most the engine's receive
    /// queue depth), the limit armed at `srq_limit` (0: not armed).
    pub fn create_srq(&mut self, pd: Pd, max_wr: u32, srq_limit: u32) -> Result<SrqHandle, Error> {
        if !self.mem.pd_exists(pd) {
            return Err(Error::Memory(MemError::NoSuchPd));
        }
        let h = self.srqs.create(pd, max_wr, srq_limit)?;
        if let Err(e) = self.mem.pd_get(pd) {
            let _ = self.srqs.destroy(h);
            return Err(e.into());
        }
        Ok(h)
    }

    /// `ibv_destroy_srq`: refused (`Busy`) while a QP uses it.
    pub fn destroy_srq(&mut self, h: SrqHandle) -> Result<(), Error> {
        let pd = self.srqs.destroy(h)?;
        self.mem.pd_put(pd);
        Ok(())
    }

    /// `ibv_modify_srq(IBV_SRQ_LIMIT)`: arms the limit event at `srq_limit` (0 disarms).
    pub fn modify_srq(&mut self, h: SrqHandle, srq_limit: u32) -> Result<(), Error> {
        self.srqs.arm(h, srq_limit)
    }

    /// `ibv_query_srq`.
    pub fn query_srq(&self, h: SrqHandle) -> Result<SrqInfo, Error> {
        self.srqs.query(h)
    }

    /// `ibv_post_srq_recv`.
    pub fn post_srq_recv(&mut self, h: SrqHandle, wr: &RecvWr) -> Result<(), Error> {
        self.srqs.post(h, wr)
    }

    /// The next SRQ whose limit was reached since it was armed
    /// (`IBV_EVENT_SRQ_LIMIT_REACHED`); each arming fires at most once.
    pub fn poll_srq_event(&mut self) -> Option<SrqHandle> {
        self.srqs.take_event()
    }

    /// The slot of resident QP `qpn`: its home slot (`ctx::home_slot`, where
    /// `create_qp` and `restore_qp` put it when they can), else a scan of the slots.
    fn slot(&self, qpn: Qpn) -> Option<usize> {
        let home = ctx::home_slot(qpn, QPS);
        if matches!(self.qps.get(home), Some(Some(qp)) if qp.qpn == qpn) {
            return Some(home);
        }
        self.qps
            .iter()
            .take(self.hi)
            .position(|q| matches!(q, Some(qp) if qp.qpn == qpn))
    }

    /// `now`, or the latest time seen if `now` is earlier.
    fn clock(&mut self, now: Instant) -> Instant {
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    /// Runs `f` on QP `slot` with the rest of the engine as its environment.
    fn with_qp<R>(
        &mut self,
        slot: usize,
        now: Instant,
        dma: &mut dyn Dma,
        f: impl FnOnce(&mut QpRef<'_, SQ, RQ, RD>, &mut Env<'_>, &PortConfig) -> R,
    ) -> Option<R> {
        self.run_qp(slot, now, dma, true, Marks::Ran, f)
    }

    /// [`Engine::with_qp`], marking the QP ready for `poll_transmit` when `tx`;
    /// `marks`: how its deadline and flags are set after it ran.
    #[inline(always)] // two thin callers
    fn run_qp<R>(
        &mut self,
        slot: usize,
        now: Instant,
        dma: &mut dyn Dma,
        tx: bool,
        marks: Marks,
        f: impl FnOnce(&mut QpRef<'_, SQ, RQ, RD>, &mut Env<'_>, &PortConfig) -> R,
    ) -> Option<R> {
        let Self {
            cfg,
            mem,
            cqs,
            qps,
            queues,
            counters,
            srqs,
            ..
        } = self;
        let qp = qps.get_mut(slot)?.as_mut()?;
        let q = queues.get_mut(slot)?;
        let mut env = Env {
            now,
            mem,
            dma,
            cqs,
            ctr: counters,
            cfg: &cfg.transport,
            srqs,
        };
        let mut r = QpRef { qp, q };
        let out = f(&mut r, &mut env, cfg);
        // Ready only when the responder or the requester may have a frame: their
        // gates, which `transmit_one` would pass through to find nothing (the receiver
        // of a stream between the ACKs it coalesces).
        let tx = tx && (r.resp_may_send() || r.req_may_send());
        match marks {
            Marks::Inline => {
                let (deadline, flush) =
                    (r.qp.next_deadline(), r.qp.req.fastpath && r.qp.req.rewound);
                self.qp_marked(slot, tx, deadline, flush);
            }
            Marks::Ran => self.qp_ran(slot, tx),
            Marks::Later | Marks::Unchanged => {}
        }
        Some(out)
    }

    /// After QP `slot` ran (`run_qp`): its deadline and the timer floor, its flags for
    /// the frame (`tx`) and descriptor scans. Out of line for most of `run_qp`'s ~14
    /// callers: inlined into each, its 64-bit deadline minimums cost ~4 KB of firmware
    /// code (a call costs ~25 instructions a run, which the per-packet entries of
    /// `with_fp_qp` do not pay).
    #[inline(never)]
    fn qp_ran(&mut self, slot: usize, tx: bool) {
        let Some(Some(qp)) = self.qps.get(slot) else {
            return;
        };
        let (deadline, flush) = (qp.next_deadline(), qp.req.fastpath && qp.req.rewound);
        self.qp_marked(slot, tx, deadline, flush);
    }

    /// [`Engine::qp_ran`]'s flags and timers, the QP's `deadline` and FLUSH owed given.
    #[inline(always)] // `qp_ran` and `run_qp`'s inlined case
    fn qp_marked(&mut self, slot: usize, tx: bool, deadline: Option<Instant>, flush: bool) {
        if let (Some(ready), Some(d)) = (self.tx_ready.get_mut(slot), self.deadlines.get_mut(slot))
        {
            *ready |= tx;
            *d = deadline;
        }
        if let Some(f) = self.fp_ready.get_mut(slot) {
            *f = true;
        }
        self.tx_any |= tx;
        self.fp_any = true;
        self.fp_flush_any |= flush;
        self.lower_timer_floor(deadline);
    }

    /// [`Engine::with_qp`] for the fast path's entry points, which never give the QP a
    /// frame of its own to send (its requests leave as descriptors): the QP's ready
    /// flag for `poll_transmit` stays as it is.
    fn with_fp_qp<R>(
        &mut self,
        slot: usize,
        now: Instant,
        f: impl FnOnce(&mut QpRef<'_, SQ, RQ, RD>, &mut Env<'_>) -> R,
    ) -> Option<R> {
        self.run_qp(slot, now, &mut NoDma, false, Marks::Inline, |r, env, _| {
            f(r, env)
        })
    }

    /// `ibv_modify_qp`.
    pub fn modify_qp(&mut self, qpn: Qpn, attr: &QpAttr) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        let res = self
            .with_qp(slot, Instant::ZERO, &mut NoDma, |r, env, cfg| {
                let limits = PortLimits {
                    pkeys: &cfg.pkeys,
                    max_mtu: cfg.active_mtu,
                    gids: &cfg.gids,
                };
                r.modify(env, attr, &limits)
            })
            .unwrap_or(Err(Error::NoSuchQp(qpn)));
        if attr.ah_attr.is_some() {
            self.update_tx_hdr(slot);
        }
        res
    }

    /// Rewrites QP `slot`'s header template from its address vector and ECN marking.
    fn update_tx_hdr(&mut self, slot: usize) {
        let ect = self.cc.get(slot).is_some_and(QpCc::rp_on);
        let (Some(Some(qp)), Some(t), Some(p)) = (
            self.qps.get(slot),
            self.tx_hdr.get_mut(slot),
            self.tx_prio.get_mut(slot),
        ) else {
            return;
        };
        // An address that cannot be framed leaves an empty template: its frames fail
        // to emit, as they did when every frame built its headers.
        *t = header_template(&self.cfg, qp, None, ect).unwrap_or_default();
        *p = qp_priorities(&self.cfg, qp);
    }

    /// Changes the port's configuration: a NIC built before it knew its addresses sets
    /// them first (see [`Engine::new`]), and the host changes it through the ABI while
    /// it runs (addresses, GID table, active MTU, congestion control, priorities). The
    /// addresses a connected RC or UC QP (RTR and on) uses, the MAC and its source GID
    /// entry, are in use: changing them is [`Error::Busy`] and changes nothing (their
    /// peers address them, and a fast path holds their headers). The other QPs' headers
    /// are rebuilt. A path MTU above the new active MTU stays on the QPs that have it
    /// (as on other RNICs, the active MTU bounds later `modify_qp` calls).
    pub fn set_config(&mut self, cfg: PortConfig) -> Result<(), Error> {
        for qp in self.qps.iter().flatten() {
            if qp.qp_type() == QpType::Ud || !qp.state.processes_receive() {
                continue;
            }
            if cfg.mac != self.cfg.mac {
                return Err(Error::Busy {
                    what: "the port's MAC (connected QPs)",
                });
            }
            let sgid = qp.av.sgid_index;
            if cfg.gids.get(sgid) != self.cfg.gids.get(sgid) {
                return Err(Error::Busy {
                    what: "a GID entry (a connected QP's source)",
                });
            }
        }
        self.cfg = cfg;
        self.cc_any |= cfg.cc.rp;
        for slot in 0..QPS {
            self.update_tx_hdr(slot);
        }
        Ok(())
    }

    /// Whether QP `slot` can run on the fast path at all: RC, without selective repeat
    /// (its out-of-order receiver and per-packet retransmission stay in firmware),
    /// without DCQCN's reaction point unless the fast path paces
    /// ([`Engine::set_fastpath_pace`]; else the pacer is the firmware's), and RoCEv2 (the
    /// fast path's receive side matches GID index 0 without its RoCE version).
    fn fastpath_eligible(&self, slot: usize, qp: &Qp) -> bool {
        // Inline payloads live in the host's send queue, not in registered memory: the
        // fast path's segmenter cannot fetch them; an SRQ's WQEs are shared, and the
        // receive context holds one QP's. Such QPs stay with firmware. (`qp` is the
        // one at `slot`, which every caller looked up already.)
        let rc = qp.qp_type == QpType::Rc && qp.max_inline == 0 && qp.srq.is_none();
        let sr = self.queues.get(slot).is_some_and(|q| q.sr.enabled());
        let rp = !self.fp_pace && self.cc.get(slot).is_some_and(QpCc::rp_on);
        let v1 = self
            .tx_hdr
            .get(slot)
            .is_some_and(|t| t.raw().3 == IcrcKind::RoceV1);
        rc && !sr && !rp && !v1
    }

    /// Which of `qpn`'s sides may be on the fast path now: the send side (the
    /// [`Engine::fastpath_send_ctx`]'s `valid`) and the receive side (the
    /// [`Engine::fastpath_recv_ctx`]'s `on`), without building either context (the
    /// firmware asks after every exception and timer).
    pub fn fastpath_sides(&self, qpn: Qpn) -> Option<(bool, bool)> {
        let s = self.slot(qpn)?;
        Some(self.sides(s, self.qps.get(s)?.as_ref()?))
    }

    fn sides(&self, slot: usize, qp: &Qp) -> (bool, bool) {
        let eligible = self.fastpath_eligible(slot, qp);
        (
            eligible && matches!(qp.state, QpState::Rts | QpState::Sqd),
            eligible && qp.state.processes_receive(),
        )
    }

    /// `qpn`'s fast-path send context as the firmware writes it at `modify_qp`
    /// (`docs/fastpath.md` §2.1): its header template, BTH fields, path MTU and the
    /// requester's PSNs and window as they stand.
    pub fn fastpath_send_ctx(&self, qpn: Qpn) -> Option<fastpath::SendCtx> {
        let s = self.slot(qpn)?;
        let qp = self.qps.get(s)?.as_ref()?;
        let sr = self.queues.get(s)?.sr.attr();
        let sr_on = sr.enabled && qp.qp_type == QpType::Rc;
        Some(fastpath::SendCtx {
            valid: self.sides(s, qp).0,
            template: *self.tx_hdr.get(s)?,
            pkey: qp.pkey,
            dest_qpn: qp.dest_qpn,
            mtu: qp.mtu,
            sr: sr_on,
            max_pkts_per_ack: self.cfg.transport.max_pkts_per_ack,
            next_psn: qp.req.psn,
            noack: qp.req.noack_pkts,
            una_psn: qp.comp.psn,
            window: crate::transport::send_window(
                self.cfg.transport.max_unacked_psns,
                sr_on,
                sr.max_inflight,
            ),
        })
    }

    /// `qpn`'s fast-path receive context (`docs/fastpath.md` §3.2) as the firmware
    /// writes it from the responder's state: on for an RC QP that takes requests, and
    /// for a SEND in progress the head receive WQE loaded when it is one SGE whose
    /// L_Key allows the writes.
    pub fn fastpath_recv_ctx(&self, qpn: Qpn) -> Option<fastpath::RecvCtx> {
        let s = self.slot(qpn)?;
        let qp = self.qps.get(s)?.as_ref()?;
        let r = &qp.resp;
        let mut ctx = fastpath::RecvCtx {
            on: self.sides(s, qp).1,
            held: false,
            pkey: qp.pkey,
            peer_gid: qp.av.dgid,
            qpn,
            cur: match r.cur {
                CurOp::None => fastpath::RxCur::None,
                CurOp::Send => fastpath::RxCur::Send,
                CurOp::Write => fastpath::RxCur::Write,
            },
            access: qp.access,
            mtu: qp.mtu,
            epsn: r.epsn,
            msn: r.msn,
            pd: qp.pd,
            va: r.va,
            rkey: r.rkey,
            resid: r.resid,
            length: r.length,
            nak_sent: r.nak_sent,
            ack_every: 0,
            unacked: 0,
            recv_addr: 0,
            recv_resid: 0,
            recv_loaded: false,
            reads: self.recv_reads(s, qp),
            // (more than the context holds: `reads` is clear, so it does not count)
            rd_max: qp.max_dest_rd_atomic.min(fastpath::RD_MAX),
            rnr: None,
        };
        // A SEND under way goes on in its WQE; between messages the next SEND's, when
        // the datapath places a SEND's first packet (`fp_sends`).
        let loads = match r.cur {
            CurOp::Send => true,
            CurOp::None => self.fp_sends,
            CurOp::Write => false,
        };
        // (The empty queue, an exception's usual case, looked at before any call.)
        let queued = self.queues.get(s).is_some_and(|q| !q.rq.is_empty());
        if let Some(fastpath::RecvBuf { addr, len, .. }) = (loads && queued)
            .then(|| self.recv_head(s, qp))
            .flatten()
            .filter(|b| r.recv_off <= b.len)
        {
            ctx.recv_loaded = true;
            ctx.recv_addr = addr.wrapping_add(u64::from(r.recv_off));
            ctx.recv_resid = len - r.recv_off;
            if r.cur == CurOp::Send {
                ctx.length = r.recv_off;
            }
        }
        if !ctx.recv_loaded && r.cur == CurOp::None {
            ctx.rnr = self.recv_rnr(s, qp);
        }
        Some(ctx)
    }

    /// The receive context's `rnr` for QP `slot` between messages (`docs/fastpath.md`
    /// §3.4, "Receiver not ready"): its `min_rnr_timer` when the datapath answers for
    /// an empty receive queue and the QP's is empty (no WQE at all: one that does not
    /// qualify for loading is placed by the responder, so its SEND stays the
    /// firmware's; the fast path's QPs have no SRQ).
    fn recv_rnr(&self, slot: usize, qp: &Qp) -> Option<RnrTimer> {
        Self::rnr_of(self.queues.get(slot)?, qp, self.fp_rnr)
    }

    /// [`Engine::recv_rnr`] of the QP `qp` with queues `q`.
    #[inline(always)]
    fn rnr_of(q: &QpQueues<SQ, RQ, RD>, qp: &Qp, fp_rnr: bool) -> Option<RnrTimer> {
        (fp_rnr && q.rq.is_empty() && qp.srq.is_none()).then(|| RnrTimer::new(qp.min_rnr_timer))
    }

    /// Whether the fast path under this engine answers a SEND to a QP whose receive
    /// queue is empty itself (`docs/fastpath.md` §3.4, "Receiver not ready"):
    /// [`Engine::fastpath_recv_ctx`] then sets `rnr`. Off by default: the RTL's
    /// receive path leaves such a SEND to the firmware (reason 9).
    pub fn set_fastpath_rnr(&mut self, on: bool) {
        self.fp_rnr = on;
    }

    /// The fast path answered a SEND of `qpn` with an RNR NAK (the `RNR` event): the
    /// responder's count, as its `receiver_not_ready` keeps it (`nak_sent` is in the
    /// receive context the engine takes back).
    pub fn fastpath_rnr_sent(&mut self, qpn: Qpn) {
        if self.slot(qpn).is_some() {
            self.counters.send_rnr_err += 1;
        }
    }

    /// The fast path dropped an in-sequence READ or atomic request that found its QP's
    /// `max_dest_rd_atomic` responses queued (the `RD_DROP` event): the responder's
    /// count, as its `check_op` drop keeps it (`nak_sent`, cleared, is in the receive
    /// context the engine takes back). A port counter: the QP is not looked up (the
    /// event comes from a context the firmware wrote, of a resident QP; the look-up cost
    /// the soft core's firmware 32 bytes).
    pub fn fastpath_rd_dropped(&mut self) {
        self.counters.resp_dropped = self.counters.resp_dropped.wrapping_add(1);
    }

    /// The buffer of QP `slot`'s head receive WQE when the hardware can place into it:
    /// one SGE whose L_Key the engine's scatter would take (valid, the QP's PD,
    /// LOCAL_WRITE, covering it). (A QP on an SRQ, whose WQEs are shared, is never on
    /// the fast path: `fastpath_eligible`.)
    ///
    /// The engine's responder answers a SEND whose completion would find the receive
    /// CQ full with an RNR NAK; the hardware places it and the completion comes later
    /// (its `MSG_DONE`). So a buffer is loaded only while the CQ has room for one
    /// completion of every QP's loaded buffer (`QPS`): then the engine would have had
    /// room for each, and a fuller CQ leaves the SEND to the engine.
    fn recv_head(&self, slot: usize, qp: &Qp) -> Option<fastpath::RecvBuf> {
        Self::recv_buf(self.queues.get(slot)?, qp, &self.cqs, &self.mem)
    }

    /// [`Engine::recv_head`] of the QP `qp` with queues `q`, given the tables it reads:
    /// a `MSG_DONE` has them at hand (`fastpath_msg_done`, no second look-up).
    #[inline(always)]
    fn recv_buf(
        q: &QpQueues<SQ, RQ, RD>,
        qp: &Qp,
        cqs: &CqTable<CQS, CQE>,
        mem: &MemoryTable<PDS, MRS>,
    ) -> Option<fastpath::RecvBuf> {
        let head = q.rq.front()?;
        let [sge] = head.wr.sg_list.as_slice() else {
            return None;
        };
        if cqs.room(qp.recv_cq) < QPS {
            return None;
        }
        mem.check_local(
            qp.pd,
            sge.lkey,
            sge.addr,
            u64::from(sge.length),
            AccessFlags::LOCAL_WRITE,
        )
        .ok()?;
        Some(fastpath::RecvBuf {
            addr: sge.addr,
            len: sge.length,
            cqe: fastpath::RecvCqe {
                wr_id: head.wr.wr_id,
                cq: qp.recv_cq,
            },
        })
    }

    /// The receive buffer the firmware loads into `qpn`'s receive context between
    /// messages (`docs/fastpath.md` §3.4, §7: after a `MSG_DONE`, at a receive post):
    /// its head receive WQE's, when the WQE qualifies (`recv_head`). The caller loads it
    /// only into a context that is on (the firmware switches it off when the QP's
    /// receive side leaves the fast path) with no message under way and nothing
    /// loaded, with no `MSG_DONE` of the QP waiting: then every WQE the hardware used
    /// has completed here, and the head is the next SEND's (whatever message the
    /// engine last saw under way: the hardware's context is the current one).
    ///
    /// `Err`: nothing to load, with the context's `rnr` when the queue is empty
    /// (`recv_rnr`: what the firmware sets after a `MSG_DONE`; one look-up serves both,
    /// as the event's budget wants).
    pub fn fastpath_recv_next(&self, qpn: Qpn) -> Result<fastpath::RecvBuf, Option<RnrTimer>> {
        self.recv_next_at(self.slot(qpn).ok_or(None)?)
    }

    /// [`Engine::fastpath_recv_next`] of the QP in `slot`.
    #[inline(always)] // two callers, each a look-up and this
    fn recv_next_at(&self, slot: usize) -> Result<fastpath::RecvBuf, Option<RnrTimer>> {
        let qp = self.qps.get(slot).and_then(Option::as_ref).ok_or(None)?;
        let q = self.queues.get(slot).ok_or(None)?;
        Self::recv_next_of(q, qp, &self.cqs, &self.mem, self.fp_sends, self.fp_rnr)
    }

    /// [`Engine::recv_next_at`] of the QP `qp` with queues `q`, given the tables and
    /// flags it reads (`fastpath_msg_done` has them at hand: its second look-up of the
    /// QP was ~60 instructions of a `MSG_DONE`'s).
    #[inline(always)]
    fn recv_next_of(
        q: &QpQueues<SQ, RQ, RD>,
        qp: &Qp,
        cqs: &CqTable<CQS, CQE>,
        mem: &MemoryTable<PDS, MRS>,
        fp_sends: bool,
        fp_rnr: bool,
    ) -> Result<fastpath::RecvBuf, Option<RnrTimer>> {
        if !fp_sends {
            return Err(None);
        }
        // (A `match`, not `ok_or_else`: the closure stayed out of line, a call with its
        // captures built on the stack, ~20 instructions of a MSG_DONE's.)
        match Self::recv_buf(q, qp, cqs, mem) {
            Some(buf) => Ok(buf),
            None => Err(Self::rnr_of(q, qp, fp_rnr)),
        }
    }

    /// Whether the fast path under this engine places a SEND's first packet into a
    /// receive buffer loaded ahead of it (`docs/fastpath.md` §3.4): then
    /// [`Engine::fastpath_recv_ctx`] loads the head receive WQE between messages too.
    /// Off by default.
    pub fn set_fastpath_sends(&mut self, on: bool) {
        self.fp_sends = on;
    }

    /// Whether [`Engine::set_fastpath_sends`] is on.
    pub fn fastpath_sends(&self) -> bool {
        self.fp_sends
    }

    /// Whether QP `slot`'s receive context gets `reads` (`docs/fastpath.md` §3.4): the
    /// datapath answers READs, the QP has a READ resource, no more than the context's
    /// `rd_max` holds (the hardware counts its queued responses against it, as
    /// `check_op` counts `out`), and the engine has no response of the QP queued (the
    /// hardware's would overtake it).
    #[inline(always)] // two callers; a call and its saves cost an exception ~20
    fn recv_reads(&self, slot: usize, qp: &Qp) -> bool {
        self.fp_reads
            && (1..=fastpath::RD_MAX).contains(&qp.max_dest_rd_atomic)
            && self.queues.get(slot).is_some_and(|q| q.out.is_empty())
    }

    /// [`Engine::fastpath_recv_ctx`]'s `reads` for `qpn` now: what the firmware sets
    /// again when it releases a QP held while the engine had responses of it queued.
    pub fn fastpath_recv_reads(&self, qpn: Qpn) -> bool {
        self.slot(qpn)
            .and_then(|s| Some(self.recv_reads(s, self.qps.get(s)?.as_ref()?)))
            .unwrap_or(false)
    }

    /// Whether `qpn`'s responder has READ responses or atomic replies queued that it has
    /// not sent (`docs/fastpath.md` §3.4, "`held`"): the firmware keeps the QP `held`
    /// meanwhile, so that its frames come to the engine, whose ACK or NAK of them waits
    /// behind those responses; the hardware's would overtake them.
    pub fn fastpath_resp_queued(&self, qpn: Qpn) -> bool {
        self.slot(qpn)
            .and_then(|s| self.queues.get(s))
            .is_some_and(|q| !q.out.is_empty())
    }

    /// Whether the fast path under this engine answers in-sequence READ requests itself
    /// (`docs/fastpath.md` §3.4): [`Engine::fastpath_recv_ctx`] then lets it, per QP.
    /// Off by default: the RTL's receive path leaves every READ to the firmware.
    pub fn set_fastpath_reads(&mut self, on: bool) {
        self.fp_reads = on;
    }

    /// The fast path took an RDMA READ request of `qpn` for PSN `psn` (the `READ`
    /// event): the responder records it in its READ resources as if it had executed it
    /// (`exec_read`), so that a duplicate of it is answered from there; the expected PSN
    /// and the MSN are the hardware's (its receive context), its responses the
    /// hardware's to send.
    pub fn fastpath_read_taken(&mut self, qpn: Qpn, psn: Psn, va: u64, rkey: Rkey, len: u32) {
        self.fastpath_taken(qpn, |r| {
            r.record_read(psn, va, rkey, len);
        });
    }

    /// The fast path executed an atomic request of `qpn` for PSN `psn` (the `ATOMIC`
    /// event, `docs/fastpath.md` §3.4): the responder records its original value `orig`
    /// in its atomic resources as its `exec_atomic` would, so that a duplicate is
    /// answered from there and never executed again; the expected PSN and the MSN are
    /// the hardware's, its ATOMIC ACKNOWLEDGE the hardware's to send.
    pub fn fastpath_atomic_taken(&mut self, qpn: Qpn, psn: Psn, orig: u64) {
        self.fastpath_taken(qpn, |r| r.record_atomic(psn, orig));
    }

    /// The `READ` and `ATOMIC` events' record `f` in `qpn`'s responder resources, its
    /// epilogue inlined. Inlined into each: one `run_qp` shared by both through an enum
    /// cost ~25 instructions more per event (the self-test's `READ` 417 for 392) to
    /// save ~200 B of code.
    #[inline(always)]
    fn fastpath_taken(&mut self, qpn: Qpn, f: impl FnOnce(&mut QpRef<'_, SQ, RQ, RD>)) {
        if let Some(slot) = self.slot(qpn) {
            self.run_qp(
                slot,
                Instant::ZERO,
                &mut NoDma,
                false,
                Marks::Unchanged,
                |r, _, _| f(r),
            );
        }
    }

    /// The fast path took a request of `qpn` marked ECN CE at `now` (the `CE` event,
    /// or the `ce` flag of its `MSG_DONE` or `READ`, `docs/fastpath.md` §3.4): the
    /// notification point runs as for a packet the engine took itself (counted; a CNP
    /// owed at most once per interval, sent by `poll_transmit`).
    pub fn fastpath_ce(&mut self, now: Instant, qpn: Qpn) {
        let now = self.clock(now);
        if let Some(slot) = self.slot(qpn) {
            self.on_ce(now, slot);
        }
    }

    /// Writes a fast-path receive context back into `qpn`'s responder: what the
    /// firmware reads before it handles an exception, after the hardware advanced the
    /// context (`docs/fastpath.md` §3.2).
    pub fn fastpath_load_recv(&mut self, qpn: Qpn, ctx: &fastpath::RecvCtx) -> Result<(), Error> {
        self.fastpath_load_recv_state(qpn, &ctx.state())
    }

    /// [`Engine::fastpath_load_recv`] from the part of the context it takes
    /// ([`fastpath::layout::decode_rctx_state`]: the firmware decodes no more of the
    /// context than this before each exception).
    pub fn fastpath_load_recv_state(
        &mut self,
        qpn: Qpn,
        ctx: &fastpath::RecvState,
    ) -> Result<(), Error> {
        let s = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        let qp = self
            .qps
            .get_mut(s)
            .and_then(|q| q.as_mut())
            .ok_or(Error::NoSuchQp(qpn))?;
        let r = &mut qp.resp;
        // A SEND the engine started and the hardware finished: its MSG_DONE is queued.
        r.done_owed |= r.cur == CurOp::Send && ctx.msn != r.msn;
        r.epsn = ctx.epsn;
        r.msn = ctx.msn;
        r.nak_sent = ctx.nak_sent;
        r.cur = match ctx.cur {
            fastpath::RxCur::None => CurOp::None,
            fastpath::RxCur::Send => CurOp::Send,
            fastpath::RxCur::Write => CurOp::Write,
        };
        // (A buffer loaded ahead holds nothing placed; the WRITE's fields are apart
        // from it, so a WRITE under way comes back with one loaded too.)
        if ctx.cur == fastpath::RxCur::Send {
            r.recv_off = ctx.length;
        } else {
            if ctx.recv_loaded {
                r.recv_off = 0;
            }
            (r.va, r.rkey, r.resid, r.length) = (ctx.va, ctx.rkey, ctx.resid, ctx.length);
        }
        Ok(())
    }

    /// Puts QP `qpn`'s requests on the fast path (`on`): from now on `poll_transmit`
    /// builds none of its requests, and [`Engine::fastpath_poll_request`] hands them out
    /// as message descriptors instead. Responses (ACKs and NAKs for exceptions, READ
    /// and atomic responses) still leave through `poll_transmit`.
    ///
    /// Switched off while messages are outstanding, the requester goes back to the
    /// oldest unacknowledged PSN: what it handed out may not all have been sent.
    pub fn set_fastpath(&mut self, qpn: Qpn, on: bool) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        self.with_qp(slot, Instant::ZERO, &mut NoDma, |r, _, _| {
            let was = core::mem::replace(&mut r.qp.req.fastpath, on);
            if was && !on && r.qp.comp.psn.before(r.qp.req.psn) {
                r.go_back_n(r.qp.comp.psn);
            }
        });
        if let (Some(f), Some(t)) = (self.fp_ready.get_mut(slot), self.tx_ready.get_mut(slot)) {
            (*f, *t) = (on, true);
        }
        (self.fp_any, self.tx_any) = (self.fp_any | on, true);
        Ok(())
    }

    /// The next request descriptor of a QP on the fast path (QPs take turns): a FLUSH
    /// after the requester was rewound, then one descriptor per WQE, the rest of a WQE
    /// (REPLAY) after Go-Back-N. Counts the message as sent; the hardware's window holds
    /// back what may not go yet.
    ///
    /// Writes the descriptor (`fastpath::layout`, as the words a core writes into the
    /// ring) into `out`; false when no QP has one.
    pub fn fastpath_poll_request(
        &mut self,
        now: Instant,
        out: &mut fastpath::layout::TxdWords,
    ) -> bool {
        if !self.fp_any {
            return false;
        }
        let now = self.clock(now);
        let hi = self.hi.max(1);
        for k in 0..hi {
            let slot = (self.tx_next + k) % hi;
            if !self.fp_ready.get(slot).copied().unwrap_or(false) {
                continue;
            }
            // A descriptor comes only from a WQE not handed out yet, a rewind's FLUSH or
            // (not on the fast path) a selective-repeat resend (`req_take_msg`): a QP
            // with none, as after an ACK that completed its sends, is not run for
            // nothing (~160 instructions each, in the poll after every event).
            let on = matches!(
                (self.qps.get(slot), self.queues.get(slot)),
                (Some(Some(qp)), Some(q)) if qp.req.fastpath
                    && (qp.req.rewound || usize::from(qp.req.wqe_idx) < q.sq.len() || q.sr.enabled())
            );
            let took = on
                && self
                    .with_fp_qp(slot, now, |r, env| r.req_take_msg(env, out))
                    .unwrap_or(false);
            if took {
                self.tx_next = (slot + 1) % hi;
                // `run_qp` marked the QP again; it has another descriptor only if a WQE
                // waits behind the one just handed out (anything else that gives it
                // one runs the QP, which marks it).
                let more = match (self.qps.get(slot), self.queues.get(slot)) {
                    (Some(Some(qp)), Some(q)) => usize::from(qp.req.wqe_idx) < q.sq.len(),
                    _ => false,
                };
                if let Some(f) = self.fp_ready.get_mut(slot) {
                    *f = more;
                }
                return true;
            }
            if let Some(f) = self.fp_ready.get_mut(slot) {
                *f = false;
            }
        }
        // Every flag was looked at and cleared; `run_qp` sets them again.
        self.fp_any = false;
        false
    }

    /// The FLUSH descriptor (`docs/fastpath.md` §2.2) of a QP on the fast path whose
    /// requester was rewound, if one owes it, written into `out`. A FLUSH takes no slot
    /// of the hardware's descriptor ring, so the runtime posts it when the ring is full
    /// too: otherwise the rewind waits until the segmenter finishes a message, and every
    /// stale packet it sends meanwhile goes out again after the resends.
    pub fn fastpath_poll_flush(
        &mut self,
        now: Instant,
        out: &mut fastpath::layout::TxdWords,
    ) -> bool {
        if !self.fp_flush_any {
            return false;
        }
        for slot in 0..self.hi {
            if self.fp_take_flush(slot, now, out) {
                return true;
            }
        }
        self.fp_flush_any = false;
        false
    }

    /// How QP `qpn`'s acknowledged PSN goes back to the hardware after an exception:
    /// in the FLUSH it owes (its requester was rewound), written into `out`, else alone
    /// (`None`: no such QP). The firmware posts the FLUSH as it hands back the context
    /// of the exception that rewound the QP, before the QP is released: the FLUSH
    /// carries the QP's `una_psn`, which reaches the hardware with it and not apart
    /// (`docs/fastpath.md` §3.2). One call, one lookup of the QP: the firmware asks
    /// after every exception.
    pub fn fastpath_una_back(
        &mut self,
        now: Instant,
        qpn: Qpn,
        out: &mut fastpath::layout::TxdWords,
    ) -> Option<fastpath::UnaBack> {
        let slot = self.slot(qpn)?;
        let now = self.clock(now);
        if self.fp_take_flush(slot, now, out) {
            return Some(fastpath::UnaBack::Flush);
        }
        Some(fastpath::UnaBack::Una(
            self.qps.get(slot)?.as_ref()?.comp.psn,
        ))
    }

    fn fp_take_flush(
        &mut self,
        slot: usize,
        now: Instant,
        out: &mut fastpath::layout::TxdWords,
    ) -> bool {
        let owes = matches!(
            self.qps.get(slot),
            Some(Some(qp)) if qp.req.fastpath && qp.req.rewound
        );
        // `req_take_msg` hands out the owed FLUSH before anything else.
        owes && self
            .with_fp_qp(slot, now, |r, env| r.req_take_msg(env, out))
            .unwrap_or(false)
    }

    /// The fast path took a response for `qpn` (`docs/fastpath.md` §3.6, the `ACKED`
    /// event): an ACK for `psn`, or a READ response or ATOMIC ACKNOWLEDGE for `psn`
    /// whose data it wrote (`placed`).
    /// The completer advances and completes as if it had handled the packet; `cqe`: the
    /// hardware wrote the CQEs of the messages it retired that asked for it (§3.7), so
    /// those push no completion.
    /// Returns what [`Engine::fastpath_sq_idle`] would say after it (the runtime asks
    /// after every `ACKED`, which may have completed the QP's last send): one lookup of
    /// the QP serves both.
    pub fn fastpath_acked(
        &mut self,
        now: Instant,
        qpn: Qpn,
        psn: Psn,
        placed: bool,
        cqe: bool,
    ) -> Option<fastpath::SqIdle> {
        let now = self.clock(now);
        let slot = self.slot(qpn)?;
        self.with_fp_qp(slot, now, |r, env| r.comp_fastpath(env, psn, placed, cqe));
        self.sq_idle_at(slot)
    }

    /// The fast path took a NAK "PSN sequence error" for `qpn` at `psn` as its Go-Back-N
    /// (`docs/fastpath.md` §3.8, the `ACKED` event with `EV_ACKED_GBN`) and left the
    /// rewind to the firmware (its WQE fetch did not take the event: the CQE writer had
    /// no room for what the NAK retired). The completer takes the NAK as if it had
    /// handled the packet: it completes what ends before `psn` (`cqe`: the hardware
    /// wrote those CQEs), counts `rcvd_seq_err` and goes back to `psn` at once.
    pub fn fastpath_nak(&mut self, now: Instant, qpn: Qpn, psn: Psn, cqe: bool) {
        let now = self.clock(now);
        if let Some(slot) = self.slot(qpn) {
            self.with_fp_qp(slot, now, |r, env| r.comp_fastpath_nak(env, psn, cqe));
        }
    }

    /// Whether QP `qpn`'s local ACK timer has run out at `now` with no retry left: the
    /// next [`Engine::handle_timeout`] completes its oldest WQE with RETRY_EXC_ERR and
    /// flushes the rest. The firmware takes such a QP off the fast path and handles the
    /// events waiting first (`docs/fastpath.md` §3.7, "No second or lost CQE"): on the
    /// SoC the hardware may take an ACK meanwhile and write the CQEs of WQEs the flush
    /// would complete again.
    pub fn fastpath_timeout_fails(&self, qpn: Qpn, now: Instant) -> bool {
        let now = now.max(self.last_now);
        self.slot(qpn)
            .and_then(|s| self.qps.get(s)?.as_ref())
            .is_some_and(|qp| Self::timeout_fails(qp, now))
    }

    /// Whether [`Engine::fastpath_timeout_fails`] is true of any QP on the fast path:
    /// one pass over the table, so that the firmware looks QP by QP only then (its
    /// look at every line cost ~140 instructions of each poll with a timer due).
    pub fn fastpath_timeout_fails_any(&self, now: Instant) -> bool {
        let now = now.max(self.last_now);
        self.qps
            .iter()
            .flatten()
            .any(|qp| qp.req.fastpath && Self::timeout_fails(qp, now))
    }

    /// QP `qp`'s local ACK timer has run out at `now` with no retry left.
    fn timeout_fails(qp: &Qp, now: Instant) -> bool {
        matches!(qp.state, QpState::Rts | QpState::Sqd)
            && qp.comp.retry_left == 0
            && qp.comp.retrans_at.is_some_and(|t| t <= now)
    }

    /// What the hardware needs to fetch QP `qpn`'s send WQEs itself (`docs/fastpath.md`
    /// §3.8), when the engine holds none of its sends: an RC QP in RTS on the fast path
    /// with an empty send queue, nothing outstanding and no rewind or RNR wait under
    /// way. None otherwise (the firmware keeps fetching).
    pub fn fastpath_sq_idle(&mut self, qpn: Qpn) -> Option<fastpath::SqIdle> {
        let slot = self.slot(qpn)?;
        self.sq_idle_at(slot)
    }

    /// [`Engine::fastpath_sq_idle`] of the QP in `slot`.
    #[inline(always)] // two callers, each a lookup and this
    fn sq_idle_at(&mut self, slot: usize) -> Option<fastpath::SqIdle> {
        // A question only (asked after every ACKED event): the QP is looked at without
        // `with_qp`, which would recompute its deadline and mark it for the
        // descriptor scan (~70 instructions, and a scan that finds nothing).
        let (Some(Some(qp)), Some(q)) = (self.qps.get_mut(slot), self.queues.get_mut(slot)) else {
            return None;
        };
        if !q.sq.is_empty() {
            return None;
        }
        let r = QpRef { qp, q };
        let (req, comp) = (&r.qp.req, &r.qp.comp);
        let idle = r.qp.state == QpState::Rts
            && r.qp.qp_type == QpType::Rc
            && req.fastpath
            && !req.rewound
            && comp.psn == req.psn
            && comp.rnr_at.is_none()
            && !r.sr_on();
        idle.then(|| fastpath::SqIdle {
            psn: req.psn,
            rto: r.rto(),
            sig_all: r.qp.sq_sig_all,
            pd: r.qp.pd,
            depth: (SQ as u32).min(self.cfg.transport.max_msgs_in_flight),
            retry_cnt: r.qp.retry_cnt,
            rnr_retry: r.qp.rnr_retry,
            max_rd_atomic: r.qp.max_rd_atomic,
        })
    }

    /// The hardware's WQE fetch (§3.8) took `sends` SEND WQEs: counted as the
    /// requester counts the SENDs it hands out (`rdma_sends`).
    pub fn fastpath_count_sends(&mut self, sends: u32) {
        self.counters.rdma_sends += u64::from(sends);
    }

    /// The hardware's Go-Back-N of send queues it fetches (§3.8) counted as the
    /// engine's own would be: `naks` NAK sequence errors it took (`rcvd_seq_err`, the
    /// ones it dropped too), `retries` Go-Back-N retries it started
    /// (`completer_retry_err`), of them `timeouts` at the local ACK timeout
    /// (`local_ack_timeout_err`), and `rnr` RNR NAKs it took (`rcvd_rnr_err`).
    pub fn fastpath_count_retries(&mut self, naks: u32, retries: u32, timeouts: u32, rnr: u32) {
        self.counters.rcvd_seq_err += u64::from(naks);
        self.counters.rcvd_rnr_err += u64::from(rnr);
        self.counters.completer_retry_err += u64::from(retries);
        self.counters.local_ack_timeout_err += u64::from(timeouts);
    }

    /// Takes QP `qpn`'s send queue back from the hardware's WQE fetch (§3.8), first
    /// half: the oldest message the hardware still holds starts at `base` (everything
    /// before it was acknowledged and completed by the hardware). The firmware posts
    /// those messages' WQEs next (`post_send`), then calls
    /// [`Engine::fastpath_adopt_end`], which sets the QP's deadline and flags for both
    /// (this moves no timer: its own epilogue was ~37 instructions a take-back).
    pub fn fastpath_adopt_begin(&mut self, qpn: Qpn, base: Psn) {
        if let Some(slot) = self.slot(qpn) {
            self.run_qp(
                slot,
                Instant::ZERO,
                &mut NoDma,
                false,
                Marks::Later,
                |r, _, _| r.comp_adopt_begin(base),
            );
        }
    }

    /// Second half: the WQEs posted since [`Engine::fastpath_adopt_begin`] count as
    /// handed out as descriptors (the hardware made them), the acknowledged PSN moves
    /// to `una` and the local ACK timer is the hardware's `deadline`. `spent`: the
    /// Go-Back-N retries and RNR waits the hardware made since its last progress, which
    /// count as the engine's own would, and its RNR wait under way (the engine's RNR
    /// timer then runs to the same end).
    pub fn fastpath_adopt_end(
        &mut self,
        now: Instant,
        qpn: Qpn,
        una: Psn,
        deadline: Option<Instant>,
        spent: fastpath::SqSpent,
    ) {
        let now = self.clock(now);
        if let Some(slot) = self.slot(qpn) {
            self.with_fp_qp(slot, now, |r, env| {
                r.comp_adopt_end(env, una, deadline, spent)
            });
        }
    }

    /// The fast path placed a whole SEND for `qpn` (the `MSG_DONE` event): the head
    /// receive WQE completes with `byte_len` bytes (`solicited`: the last packet's SE).
    /// Returns what [`Engine::fastpath_recv_next`] says after it (the firmware loads the
    /// next WQE or sets `rq_empty` when `on`): one look-up of the QP serves both.
    ///
    /// `on`: the QP's receive context is the hardware's (`docs/fastpath.md` §7). The
    /// engine takes none of it here: the hardware places WRITEs without an event too,
    /// so the responder's state is the hardware's only once the firmware loads it
    /// ([`Engine::fastpath_load_recv_state`]), before the engine handles a request of
    /// the QP or takes the QP off the fast path, and nothing of the responder reads it
    /// before then. Only `cur` ends: a SEND the engine started and the hardware
    /// finished is over, so that load owes it no second completion (`done_owed`).
    /// Not `on` (the QP left the fast path since), the engine took the context when it
    /// left, and its responder is current.
    ///
    /// `cqe`: the CQE writer wrote the WQE's CQE (the event's `cqe`, §3.7): the WQE
    /// completes without a completion (counted all the same), as a send WQE whose CQE
    /// the hardware wrote does (`SendWqe::cqe_written`).
    ///
    /// It takes no time: completing a receive reads no clock and arms no timer (the
    /// clock's update was ~13 instructions of the SoC's `MSG_DONE`).
    pub fn fastpath_msg_done(
        &mut self,
        qpn: Qpn,
        on: bool,
        byte_len: u32,
        solicited: bool,
        cqe: bool,
    ) -> Result<fastpath::RecvBuf, Option<RnrTimer>> {
        // The home slot looked at here, the scan out of line (`slot`): its call and
        // the check of its answer were ~10 instructions of the SoC's `MSG_DONE`.
        let home = ctx::home_slot(qpn, QPS);
        let slot = if matches!(self.qps.get(home), Some(Some(qp)) if qp.qpn == qpn) {
            home
        } else {
            self.slot(qpn).ok_or(None)?
        };
        // Not `with_qp`: completing a receive needs no environment but the CQs and
        // counters, moves no timer and gives the QP no frame or descriptor to mark
        // (its environment and `qp_ran` were ~140 instructions of a MSG_DONE's).
        let Self {
            qps,
            queues,
            cqs,
            counters,
            mem,
            fp_sends,
            fp_rnr,
            ..
        } = self;
        let (Some(Some(qp)), Some(q)) = (qps.get_mut(slot), queues.get_mut(slot)) else {
            return Err(None);
        };
        if on {
            qp.resp.cur = CurOp::None;
        }
        qp.resp.done_owed = false;
        if cqe {
            // Written by the hardware: the WQE goes, and nothing else of
            // `complete_recv` is owed (its `recv_off` ends at 0 either way).
            if q.rq.pop_front().is_some() {
                counters.rdma_recvs += 1;
            }
            qp.resp.recv_off = 0;
        } else {
            qp.resp.recv_off = byte_len;
            QpRef { qp, q }.complete_recv(cqs, counters, false, solicited, None, None);
        }
        if !on {
            return Err(None);
        }
        Self::recv_next_of(q, qp, cqs, mem, *fp_sends, *fp_rnr)
    }

    /// `qpn`'s state (cheaper than `query_qp`).
    pub fn qp_state(&self, qpn: Qpn) -> Option<QpState> {
        Some(self.qps.get(self.slot(qpn)?)?.as_ref()?.state)
    }

    /// A counter the memory table bumps on every change (registration, deregistration,
    /// invalidation): the firmware rewrites the fast path's MR table when it moved.
    pub fn memory_version(&self) -> u32 {
        self.mem.version()
    }

    /// The raw QP context, for debugging and tests.
    #[doc(hidden)]
    pub fn qp_context(&self, qpn: Qpn) -> Option<&Qp> {
        self.qps.get(self.slot(qpn)?)?.as_ref()
    }

    /// `ibv_query_qp`.
    pub fn query_qp(&mut self, qpn: Qpn) -> Result<QpInfo, Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        self.with_qp(slot, Instant::ZERO, &mut NoDma, |r, _, _| r.info())
            .ok_or(Error::NoSuchQp(qpn))
    }

    /// Switches DCQCN's reaction point for one QP (the engine-wide default is
    /// `PortConfig::cc.rp`): on, the QP's frames carry ECT(0), CNPs for it cut its rate
    /// and its data packets are paced; the rate restarts at line rate either way.
    pub fn set_qp_cc(&mut self, qpn: Qpn, rp: bool) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        let cfg = self.cfg.cc;
        let c = self.cc.get_mut(slot).ok_or(Error::NoSuchQp(qpn))?;
        c.set_rp(&cfg, rp);
        self.cc_any |= rp;
        self.update_tx_hdr(slot);
        Ok(())
    }

    /// A QP's congestion control state: current and target rate, alpha, CNP and ECN
    /// counters (for time series).
    pub fn qp_cc(&self, qpn: Qpn) -> Option<QpCcInfo> {
        self.cc.get(self.slot(qpn)?).map(QpCc::info)
    }

    // -----------------------------------------------------------------------------------
    // Application commands

    /// `ibv_post_send`: queues one WR. Nothing is sent until `poll_transmit`.
    pub fn post_send(&mut self, qpn: Qpn, wr: &SendWr) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        if wr
            .ud
            .is_some_and(|ud| self.cfg.gids.source_for(&ud.av).is_none())
        {
            return Err(Error::InvalidWr {
                reason: "no GID of the destination's IP version at sgid_index",
            });
        }
        self.with_qp(slot, Instant::ZERO, &mut NoDma, |r, env, _| {
            r.post_send(env, wr)
        })
        .unwrap_or(Err(Error::NoSuchQp(qpn)))
    }

    /// `ibv_post_recv`: queues one receive WR.
    pub fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), Error> {
        let slot = self.slot(qpn).ok_or(Error::NoSuchQp(qpn))?;
        self.with_qp(slot, Instant::ZERO, &mut NoDma, |r, env, _| {
            r.post_recv(env, wr)
        })
        .unwrap_or(Err(Error::NoSuchQp(qpn)))
    }

    // -----------------------------------------------------------------------------------
    // Events

    /// Processes one received Ethernet frame (without FCS). Frames that are not valid
    /// RoCE, not addressed to this port, or not acceptable to their QP are dropped and
    /// counted; nothing a frame contains can make this panic.
    pub fn handle_packet(&mut self, now: Instant, frame: &[u8], dma: &mut dyn Dma) {
        self.receive(now, frame, dma, true);
    }

    /// [`Engine::handle_packet`] for a frame whose ICRC the datapath has already
    /// verified (hardware RX check): every other check is still made.
    pub fn handle_verified_packet(&mut self, now: Instant, frame: &[u8], dma: &mut dyn Dma) {
        self.receive(now, frame, dma, false);
    }

    #[inline(always)] // the per-packet path of both callers
    fn receive(&mut self, now: Instant, frame: &[u8], dma: &mut dyn Dma, check_icrc: bool) {
        let parsed = if check_icrc {
            wire::parse(frame)
        } else {
            wire::parse_unverified(frame)
        };
        match parsed {
            Ok(pkt) => self.dispatch(now, &pkt, dma),
            Err(_) => self.counters.rcvd_parse_err += 1,
        }
    }

    /// [`Engine::handle_packet`] for a frame a hardware parser already checked and
    /// described (`wire::Packet::from_meta`): the fast path's exceptions, which the
    /// firmware never parses again.
    pub fn handle_parsed(&mut self, now: Instant, pkt: &wire::Packet<'_>, dma: &mut dyn Dma) {
        self.dispatch(now, pkt, dma);
    }

    /// A parsed frame to its QP (the receive path after the parse).
    #[inline(always)] // the per-packet path of both callers
    fn dispatch(&mut self, now: Instant, pkt: &wire::Packet<'_>, dma: &mut dyn Dma) {
        let now = self.clock(now);
        let frame = pkt.frame();
        // Addresses are read straight from the frame and compared as integers: this runs
        // for every frame (a byte-wise compare of 6 + 16 bytes cost a soft core ~250
        // instructions per frame).
        let (src_gid, dst_gid) = pkt.gids();
        let vid = pkt.vlan().map(|v| v.vid);
        let gid_type = match pkt.icrc_kind() {
            IcrcKind::RoceV1 => GidType::Roce,
            IcrcKind::Ipv4 | IcrcKind::Ipv6 => GidType::RoceUdpEncap,
        };
        if !mac_eq(&pkt.dst_mac(), &self.cfg.mac) || !self.cfg.gids.accepts(&dst_gid, vid, gid_type)
        {
            self.counters.rcvd_not_for_us += 1;
            return;
        }
        let info = pkt.info();
        if info.transport == Transport::Cnp {
            self.on_cnp(now, pkt.dest_qp(), src_gid);
            return;
        }
        let Some(slot) = self.slot(pkt.dest_qp()) else {
            self.counters.rcvd_not_for_us += 1;
            return;
        };
        let Some(Some(qp)) = self.qps.get(slot) else {
            return;
        };
        let transport_ok = matches!(
            (info.transport, qp.qp_type()),
            (Transport::Rc, QpType::Rc) | (Transport::Uc, QpType::Uc) | (Transport::Ud, QpType::Ud)
        );
        if !transport_ok {
            self.counters.rcvd_wrong_state += 1;
            return;
        }
        if !pkey_match(pkt.pkey(), qp.pkey) {
            self.counters.rcvd_pkey_err += 1;
            return;
        }
        if qp.qp_type() != QpType::Ud && !gid_eq(&src_gid, &qp.av.dgid) {
            self.counters.rcvd_addr_err += 1;
            return;
        }
        self.counters.rcvd_pkts += 1;
        if pkt.ecn() == ECN_CE {
            self.on_ce(now, slot);
        }
        let l3 = pkt.layout().l3;
        let hdr_len = match pkt.icrc_kind() {
            IcrcKind::Ipv4 => Ipv4Repr::LEN,
            IcrcKind::Ipv6 | IcrcKind::RoceV1 => Ipv6Repr::LEN,
        };
        let net_hdr = frame.get(l3..l3.saturating_add(hdr_len)).unwrap_or(&[]);
        let response = matches!(
            info.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        );
        // (The epilogue inlined: every packet, and every exception, comes this way.)
        self.run_qp(slot, now, dma, true, Marks::Inline, |r, env, _| {
            if response {
                r.comp_handle(env, pkt);
            } else {
                r.resp_handle(env, pkt, net_hdr);
            }
        });
    }

    /// The reaction point: a CNP names one of our QPs (its DestQP). It counts only when
    /// it comes from that QP's peer and the QP has its reaction point on.
    fn on_cnp(&mut self, now: Instant, qpn: Qpn, src_gid: [u8; 16]) {
        let slot = self.slot(qpn).filter(|&slot| {
            matches!(self.qps.get(slot), Some(Some(qp)) if qp.qp_type() != QpType::Ud && gid_eq(&qp.av.dgid, &src_gid))
        });
        self.cnp_for(now, slot);
    }

    /// A CNP of `qpn`'s peer that the fast path took (the `CNP` event, `docs/fastpath.md`
    /// §2.5: it checked the peer as the receive path checks every frame's): the
    /// reaction point's rate cut, as for a CNP the engine takes itself. The pacing
    /// entry is marked for the firmware's write in any case: the QP's data waits for it.
    pub fn fastpath_cnp(&mut self, now: Instant, qpn: Qpn) {
        let now = self.clock(now);
        let slot = self.slot(qpn);
        self.cnp_for(now, slot);
        self.mark_pace(slot, 3);
    }

    /// The byte counter of `qpn`'s pacing entry reached its threshold at `bytes` (the
    /// `BYTES` event, `docs/fastpath.md` §2.5): the reaction point's byte-counter
    /// increase events, as `on_sent` per packet would have run them; the entry is
    /// marked for the firmware's write (the QP's data waits for it).
    pub fn fastpath_byte_counter(&mut self, qpn: Qpn, bytes: u64) {
        let slot = self.slot(qpn);
        let cfg = &self.cfg.cc;
        if let Some(c) = slot.and_then(|s| self.cc.get_mut(s)) {
            c.take_bytes(cfg, bytes);
        }
        self.mark_pace(slot, 3);
    }

    fn mark_pace(&mut self, slot: Option<usize>, what: u8) {
        if let Some(d) = slot.and_then(|s| self.pace_dirty.get_mut(s)) {
            *d |= what;
            self.pace_dirty_any = true;
        }
    }

    /// The fast path under this engine paces the QPs with DCQCN's reaction point on
    /// (`docs/fastpath.md` §2.5: the model's segmenter): they may be on it
    /// ([`Engine::fastpath_sides`]), and the engine marks their pacing entries for the
    /// firmware's write whenever DCQCN changes their rate. Off by default: the RTL and
    /// the SoC have no pacer, and such QPs stay with the firmware.
    pub fn set_fastpath_pace(&mut self, on: bool) {
        self.fp_pace = on;
    }

    /// The paced data frame `poll_transmit` built last for a QP on the fast path (its
    /// QPN and length), taken: the firmware tells the QP's pacing entry, which paces
    /// and counts the engine's data frames of the QP with the segmenter's
    /// (`docs/fastpath.md` §2.5).
    pub fn fastpath_take_paced_sent(&mut self) -> Option<(Qpn, usize)> {
        self.fp_paced_sent.take()
    }

    /// QP `qpn`'s pacer as its pacing entry holds it (`pacer`, read from the fast
    /// path before the engine handles one of the QP's exceptions): the data frames the
    /// engine then builds for it leave when the one pacer of the QP lets them.
    pub fn fastpath_pace_sync(&mut self, qpn: Qpn, pacer: crate::cc::Pacer) {
        if let Some(c) = self.slot(qpn).and_then(|s| self.cc.get_mut(s)) {
            c.set_pacer(pacer);
        }
    }

    /// The local ACK timer of paced QP `qpn` on the fast path, after a hand-out or a
    /// response (`docs/fastpath.md` §2.5): `sent`, the segmenter's next PSN (what it
    /// sent ends there); `next_at`, when its pacer lets the QP's next packet go. With
    /// everything sent acknowledged and messages handed out but not sent yet, the
    /// timer starts as the next packet leaves, as the engine alone starts it, not at
    /// the hand-out or the ACK.
    pub fn fastpath_pace_timer(&mut self, now: Instant, qpn: Qpn, sent: Psn, next_at: u64) {
        let now = self.clock(now);
        if let Some(slot) = self.slot(qpn) {
            self.with_fp_qp(slot, now, |r, env| r.comp_pace_timer(env, sent, next_at));
        }
    }

    /// `qpn`'s pacing entry (`docs/fastpath.md` §2.5) as the firmware writes it when the
    /// QP comes on the fast path; `None` with its reaction point off.
    pub fn fastpath_pace(&self, qpn: Qpn) -> Option<fastpath::Pace> {
        self.cc.get(self.slot(qpn)?)?.pace(&self.cfg.cc)
    }

    /// Whether a pacing entry waits for the firmware's write
    /// ([`Engine::fastpath_pace_write`]).
    pub fn fastpath_pace_due(&self) -> bool {
        self.pace_dirty_any
    }

    /// The next QP whose pacing entry DCQCN changed since the firmware last wrote it
    /// (a CNP, a timer, the byte counter), and what to write; cleared as it is
    /// returned. `None` when none is left.
    pub fn fastpath_pace_write(&mut self) -> Option<(Qpn, fastpath::PaceWrite)> {
        for slot in 0..self.hi {
            let Some(d) = self.pace_dirty.get_mut(slot) else {
                break;
            };
            let what = core::mem::take(d);
            if what == 0 {
                continue;
            }
            let (Some(Some(qp)), Some(c)) = (self.qps.get(slot), self.cc.get(slot)) else {
                continue;
            };
            let p = c.pace(&self.cfg.cc).unwrap_or_default();
            let w = fastpath::PaceWrite {
                rate: p.rate,
                timer_at: p.timer_at,
                bytes: (what & 2 != 0).then_some(p.bytes),
            };
            return Some((qp.qpn, w));
        }
        self.pace_dirty_any = false;
        None
    }

    fn cnp_for(&mut self, now: Instant, slot: Option<usize>) {
        let cfg = &self.cfg.cc;
        let handled = slot
            .and_then(|s| self.cc.get_mut(s))
            .is_some_and(|c| c.on_cnp(cfg, now.as_nanos()));
        if handled {
            if self.fp_pace {
                self.mark_pace(slot, 3);
            }
            self.counters.rp_cnp_handled += 1;
        } else {
            self.counters.rp_cnp_ignored += 1;
        }
    }

    /// The notification point: a CE-marked packet for QP `slot` was accepted. An RC/UC
    /// QP owes its peer a CNP, at most one per `cnp_interval_ns` (UD has no peer QP to
    /// name here).
    fn on_ce(&mut self, now: Instant, slot: usize) {
        self.counters.np_ecn_marked_roce_packets += 1;
        let np = self.cfg.cc.np
            && matches!(self.qps.get(slot), Some(Some(qp)) if qp.qp_type() != QpType::Ud);
        if let Some(c) = self.cc.get_mut(slot) {
            c.on_ce(&self.cfg.cc, now.as_nanos(), np);
        }
    }

    /// Writes the CNP QP `slot` owes into `buf`, if any.
    fn poll_cnp(&mut self, slot: usize, buf: &mut [u8]) -> Option<usize> {
        if !self.cc.get(slot)?.cnp_pending() {
            return None;
        }
        let qp = self.qps.get(slot)?.as_ref()?;
        let n = emit_cnp(&self.cfg, qp, self.tx_hdr.get(slot)?, buf)?;
        self.cc.get_mut(slot)?.cnp_sent();
        self.counters.np_cnp_sent += 1;
        Some(n)
    }

    /// Runs the timers due at `now` (local ACK timeout, RNR wait, DCQCN timers, pacing).
    /// Returns whether a QP's fast-path sides ([`Engine::fastpath_sides`]) changed (a
    /// retry count ran out: the QP failed), so that the firmware re-decides only then
    /// what of its QPs the fast path holds. The DCQCN timers change rates, never
    /// whether a reaction point is on.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let now = self.clock(now);
        if self.cc_any {
            let cfg = &self.cfg.cc;
            let hi = self.hi;
            for (c, d) in self.cc.iter_mut().zip(self.pace_dirty.iter_mut()).take(hi) {
                let before = c.increase_state();
                c.handle_timeout(cfg, now.as_nanos());
                // A paced QP's rate or increase timer moved: its pacing entry holds
                // the QP's data from the timer's expiry until the firmware writes it.
                if self.fp_pace && c.rp_on() && c.increase_state() != before {
                    *d |= 1;
                    self.pace_dirty_any = true;
                }
            }
        }
        let mut changed = false;
        for slot in 0..self.hi {
            let due = matches!(self.deadlines.get(slot), Some(Some(t)) if *t <= now);
            if due {
                let sides = |e: &Self| e.qps.get(slot)?.as_ref().map(|qp| e.sides(slot, qp));
                let before = sides(self);
                // A QP whose requests are descriptors gets no frame of its own from a
                // timer (its rewind and resends are descriptors): `poll_transmit` need
                // not look at it for this.
                let fp = matches!(self.qps.get(slot), Some(Some(qp)) if qp.req.fastpath);
                self.run_qp(slot, now, &mut NoDma, !fp, Marks::Ran, |r, env, _| {
                    r.handle_timeout(env)
                });
                changed |= sides(self) != before;
            }
        }
        changed
    }

    // -----------------------------------------------------------------------------------
    // Polls

    /// Whether some QP may have a frame for [`Engine::poll_transmit`] (without
    /// congestion control: with it, paced QPs and owed CNPs need the full scan). A
    /// `poll_transmit` that finds nothing clears the summary.
    pub fn tx_waiting(&self) -> bool {
        self.tx_any || self.cc_any || self.cfg.cc.np
    }

    /// Whether [`Engine::poll_transmit_except`] with `blocked` may return a frame: false
    /// only where it would return `None` having changed nothing but the summary flag
    /// (without congestion control, every QP marked ready sends frames of a blocked
    /// priority). A host's port with a queue per priority asks for the free ones after
    /// every frame (the sender of a stream, its one priority's queue just filled): this
    /// answers without the call through the host's layers.
    pub fn tx_waiting_except(&self, blocked: Priorities) -> bool {
        if self.cc_any || self.cfg.cc.np {
            return true;
        }
        if !self.tx_any {
            return false;
        }
        if blocked.is_empty() {
            return true;
        }
        // As `poll_transmit_except` decides, slot by slot (priorities checked there).
        self.tx_ready
            .iter()
            .zip(&self.tx_prio)
            .take(self.hi)
            .any(|(&ready, p)| ready && !blocked.contains(p.data))
    }

    /// Whether some QP on the fast path may have a descriptor for
    /// [`Engine::fastpath_poll_request`].
    pub fn fastpath_requests_waiting(&self) -> bool {
        self.fp_any
    }

    /// Whether a timer is due at `now` ([`Engine::handle_timeout`] would do
    /// something): cheap while every armed deadline is later than the summary's floor,
    /// exact (the full minimum, which becomes the floor) otherwise.
    pub fn timer_due(&mut self, now: Instant) -> bool {
        if !self.cc_any && self.timer_floor.is_none_or(|t| t > now) {
            return false;
        }
        let next = self.poll_timeout();
        if !self.cc_any {
            self.timer_floor = next;
        }
        next.is_some_and(|t| t <= now)
    }

    /// Keeps the timer floor at or below a deadline just armed.
    fn lower_timer_floor(&mut self, deadline: Option<Instant>) {
        if let Some(d) = deadline {
            self.timer_floor = Some(self.timer_floor.map_or(d, |t| t.min(d)));
        }
    }

    /// Whether completions were pushed (or one found its CQ full) since the last call:
    /// the runtime then looks at its CQs, and keeps looking while any is left.
    pub fn take_completion_news(&mut self) -> bool {
        core::mem::take(&mut self.cqs.news) | self.cqs.stalled
    }

    /// When `handle_timeout` should next be called, if any timer is armed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let hi = self.hi.min(QPS);
        let qp = self
            .deadlines
            .get(..hi)
            .unwrap_or(&[])
            .iter()
            .flatten()
            .min()
            .copied();
        // Every test's workload checks the table against the contexts.
        debug_assert_eq!(
            qp,
            self.qps
                .get(..self.hi)
                .unwrap_or(&[])
                .iter()
                .flatten()
                .filter_map(Qp::next_deadline)
                .min()
        );
        if !self.cc_any {
            return qp;
        }
        self.cc_timeout(qp)
    }

    /// `qp`, or the congestion control's earliest timer if earlier. Out of line: without
    /// congestion control, `poll_timeout` (asked after every event) is a leaf without
    /// registers to save.
    #[inline(never)]
    fn cc_timeout(&self, qp: Option<Instant>) -> Option<Instant> {
        let cc = self
            .cc
            .get(..self.hi)
            .unwrap_or(&[])
            .iter()
            .filter_map(QpCc::poll_timeout)
            .min()
            .map(Instant::from_nanos);
        match (qp, cc) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Completes what waits for CQ room: flushes of QPs in ERR, finished send WQEs.
    fn service(&mut self) {
        if !self.cqs.stalled {
            return;
        }
        self.cqs.stalled = false;
        for slot in 0..self.hi {
            if matches!(self.qps.get(slot), Some(Some(_))) {
                self.with_qp(slot, Instant::ZERO, &mut NoDma, |r, env, _| {
                    r.flush(env);
                    r.drain_done(env);
                });
            }
        }
    }

    /// Whether `poll_completion(cq)` may return something (cheap: the runtime asks
    /// every poll).
    pub fn completions_waiting(&self, cq: CqHandle) -> bool {
        self.cqs.stalled
            || matches!(self.cqs.slots.get(usize::from(cq.0)), Some(Some(s)) if !s.entries.is_empty())
    }

    /// `ibv_poll_cq` for one entry.
    // Inlined, with the rare case out of line: the call, its register saves and the
    // entry's moves through it cost a MSG_DONE's poll on the SoC ~50 instructions.
    #[inline]
    pub fn poll_completion(&mut self, cq: CqHandle) -> Option<WorkCompletion> {
        if self.cqs.stalled {
            return self.poll_completion_stalled(cq);
        }
        match self.cqs.slots.get_mut(usize::from(cq.0)) {
            Some(Some(s)) => s.entries.pop_front(),
            _ => None,
        }
    }

    /// [`Engine::poll_completion`] while completions wait for CQ room (`service`).
    #[inline(never)]
    fn poll_completion_stalled(&mut self, cq: CqHandle) -> Option<WorkCompletion> {
        let wc = match self.cqs.slots.get_mut(usize::from(cq.0)) {
            Some(Some(s)) => s.entries.pop_front(),
            _ => return None,
        };
        self.service();
        match wc {
            Some(wc) => Some(wc),
            None => match self.cqs.slots.get_mut(usize::from(cq.0)) {
                Some(Some(s)) => s.entries.pop_front(),
                _ => None,
            },
        }
    }

    /// Writes the next frame to send into `buf` and returns its length, or `None` when
    /// nothing is ready (or `buf` is too small for the frame: give it at least
    /// MTU + 128 bytes). QPs take turns, one frame each; a QP's owed CNP goes before
    /// its other frames, and a rate-limited QP's data packets wait for its pacer (ACKs
    /// do not).
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        dma: &mut dyn Dma,
    ) -> Option<usize> {
        self.poll_transmit_except(now, buf, dma, Priorities::NONE)
    }

    /// [`Engine::poll_transmit`] for a port with a transmit queue per 802.1p priority
    /// (`roce_core::dcb`): frames of a priority in `blocked` (paused by the link partner,
    /// or its queue full) are not built; the QP keeps them for a later poll and the
    /// other QPs go on. A QP's priority is that of its traffic class (its DSCP, or its
    /// SL as the PCP when VLAN-tagged) through the port's map (`DcbConfig::map`); its
    /// CNPs have their own (the
    /// port's CNP DSCP and priority), so a CNP never waits behind paused data. A UD QP's
    /// frames go by the QP's own address vector, whatever a WR's says.
    pub fn poll_transmit_except(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        dma: &mut dyn Dma,
        blocked: Priorities,
    ) -> Option<usize> {
        // `tx_waiting_except`'s promise, checked where tests run (folds away elsewhere).
        let promised_none = cfg!(debug_assertions) && !self.tx_waiting_except(blocked);
        let now = self.clock(now);
        let hi = self.hi.max(1);
        // Without congestion control only a ready QP has a frame: a poll that finds none
        // (most of them) ends after this scan of flags.
        if !self.tx_waiting() {
            return None;
        }
        // Congestion control's CNPs are owed by QPs with no frame of their own too.
        let cnps = self.cc_any || self.cfg.cc.np;
        for k in 0..hi {
            let slot = (self.tx_next + k) % hi;
            // Only a ready QP has a frame of its own, and another one only a CNP it
            // owes: most of a scan's QPs have neither, and are passed over on these
            // flags alone (~25 instructions each on the soft core when looked at in
            // full, in every frame's scan).
            let ready = self.tx_ready.get(slot).copied().unwrap_or(false);
            if !(ready || (cnps && self.cc.get(slot).is_some_and(QpCc::cnp_pending))) {
                continue;
            }
            let Some(Some(qp)) = self.qps.get(slot) else {
                continue;
            };
            // Nothing to look up while every priority may send.
            let (cnp_blocked, data_blocked) = match self.tx_prio.get(slot) {
                Some(p) if !blocked.is_empty() => {
                    // Kept with the header template, which changes with what they
                    // depend on; checked where tests run.
                    debug_assert_eq!(*p, qp_priorities(&self.cfg, qp), "stale priorities");
                    (blocked.contains(p.cnp), blocked.contains(p.data))
                }
                _ => (false, false),
            };
            let (mut gated, mut ect) = (false, false);
            // Congestion control costs nothing here while it is off.
            if cnps && !cnp_blocked {
                if let Some(len) = self.poll_cnp(slot, buf) {
                    debug_assert!(!promised_none, "a CNP where tx_waiting_except said none");
                    self.tx_next = (slot + 1) % hi;
                    self.counters.sent_pkts += 1;
                    return Some(len);
                }
            }
            if data_blocked || !ready {
                continue;
            }
            if let Some(c) = self.cc.get(slot).filter(|_| self.cc_any) {
                (gated, ect) = (c.gated(&self.cfg.cc, now.as_nanos()), c.rp_on());
            }
            let Self {
                cfg,
                mem,
                cqs,
                qps,
                queues,
                tx_hdr,
                tx_ready,
                deadlines,
                counters,
                srqs,
                ..
            } = self;
            let (Some(Some(qp)), Some(q), Some(qp_hdr), Some(ready), Some(deadline)) = (
                qps.get_mut(slot),
                queues.get_mut(slot),
                tx_hdr.get(slot),
                tx_ready.get_mut(slot),
                deadlines.get_mut(slot),
            ) else {
                continue;
            };
            let mut env = Env {
                now,
                mem,
                dma: &mut *dma,
                cqs,
                ctr: counters,
                cfg: &cfg.transport,
                srqs: &mut *srqs,
            };
            let mut r = QpRef { qp, q };
            // A paced QP on the fast path: its pacing entry counts the bytes (§2.5).
            let fp_paced = self.fp_pace && r.qp.req.fastpath;
            let qpn = r.qp.qpn;
            let out = transmit_one(&mut r, &mut env, cfg, qp_hdr, (gated, ect), buf);
            // Idle until an event runs the QP again; a paced packet is work waiting.
            *ready = out != Tx::Idle;
            *deadline = r.qp.next_deadline();
            let deadline = *deadline;
            self.lower_timer_floor(deadline);
            if ect {
                if let Some(c) = self.cc.get_mut(slot) {
                    c.set_held(out == Tx::Held);
                    if let Tx::Sent { len, data: true } = out {
                        c.on_sent(&self.cfg.cc, now.as_nanos(), len, !fp_paced);
                        if fp_paced {
                            self.fp_paced_sent = Some((qpn, len));
                        }
                    }
                }
            }
            if let Tx::Sent { len, .. } = out {
                debug_assert!(!promised_none, "a frame where tx_waiting_except said none");
                self.tx_next = (slot + 1) % hi;
                self.counters.sent_pkts += 1;
                return Some(len);
            }
        }
        // Nothing sent: the summary keeps only what is still marked (paced, blocked).
        self.tx_any = self.tx_ready.iter().take(hi).any(|&r| r);
        None
    }

    // -----------------------------------------------------------------------------------
    // Sizes

    /// Bytes of one QP context (without its queues).
    pub const fn qp_context_size() -> usize {
        core::mem::size_of::<Qp>()
    }

    /// Bytes of one QP's queues.
    pub const fn qp_queues_size() -> usize {
        core::mem::size_of::<QpQueues<SQ, RQ, RD>>()
    }

    /// Bytes of the whole engine.
    pub const fn size() -> usize {
        core::mem::size_of::<Self>()
    }
}

/// What [`transmit_one`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tx {
    /// Wrote a frame of `len` bytes; `data` when it carries payload (DCQCN paces those).
    Sent { len: usize, data: bool },
    /// Nothing to send until an event runs the QP again.
    Idle,
    /// A data packet waits for the pacer.
    Held,
    /// A frame is due but could not be written (buffer too small); try again later.
    NotWritten,
}

/// Writes QP `r`'s next frame into `buf`: its headers from `qp_hdr` (UD: built towards
/// the WR's destination, ECN-capable when `ect`), unless `gated` holds data packets
/// back. A frame whose payload cannot be read is not sent (the WQE fails) and the next
/// one is tried, a few at most.
fn transmit_one<const SQ: usize, const RQ: usize, const RD: usize>(
    r: &mut QpRef<'_, SQ, RQ, RD>,
    env: &mut Env<'_>,
    cfg: &PortConfig,
    qp_hdr: &HeaderTemplate,
    (gated, ect): (bool, bool),
    buf: &mut [u8],
) -> Tx {
    for _ in 0..4 {
        // The QP's next frame: responder output first (ACKs and READ responses are what
        // a peer's window waits for), then requests. Written where it stays and
        // borrowed there: the descriptor (~220 bytes) is too big to move around per
        // frame (a function returning either copied the responder's once more: ~270
        // instructions a frame on the soft core), and each in its own place (assigned
        // to the responder's, the requester's was copied there: ~30 instructions). The
        // requester's is a `let` initialised by the call: assigned to a `let req;`
        // declared before, the call wrote a temporary that a 232-byte `memcpy` then
        // moved into `req` (~350 instructions a request frame on the soft core).
        let resp = r.resp_prepare(env);
        let req = if resp.is_none() {
            r.req_prepare(env)
        } else {
            None
        };
        let Some(d) = resp.as_ref().or(req.as_ref()) else {
            return Tx::Idle;
        };
        if gated && d.carries_data() {
            return Tx::Held;
        }
        let ud_hdr;
        let hdr = match d.ud_av {
            None => qp_hdr,
            Some(av) => match header_template(cfg, r.qp, Some(av), ect) {
                Some(h) => {
                    ud_hdr = h;
                    &ud_hdr
                }
                None => return Tx::NotWritten,
            },
        };
        let body_len = d.payload_len as usize + usize::from(d.bth.pad_count);
        let mut filled = true;
        let rr = &*r;
        let mem = &*env.mem;
        let dma = &mut *env.dma;
        // Where the DMA can, the payload is hashed for the ICRC as it is read (one pass).
        // Asked only on a CPU with the one-pass kernel: elsewhere (the soft core) the
        // question folds away at build time, not a call per frame.
        let hash_in_fill = crate::memory::copy_crc_in_one_pass() && dma.hashes_reads();
        let res = hdr.emit_with_icrc(&d.bth, &d.ext, body_len, buf, hash_in_fill, |body, icrc| {
            filled = rr.fill(mem, dma, d, body, icrc);
        });
        match res {
            Ok(layout) if filled => {
                r.commit_tx(env, d);
                return Tx::Sent {
                    len: layout.end,
                    data: d.carries_data(),
                };
            }
            Ok(_) => r.abort_tx(env, d),
            Err(_) => return Tx::NotWritten,
        }
    }
    Tx::NotWritten
}

/// The 802.1p priorities of a QP's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct QpPriorities {
    cnp: u8,
    data: u8,
}

/// The priorities of `qp`'s CNPs and of its other frames on the port `cfg`. Tagged (the
/// source entry's VLAN, else the address vector's: as `lower_headers` tags), a frame's
/// priority is the SL or the CNP priority itself; untagged, its DSCP's through the map.
fn qp_priorities(cfg: &PortConfig, qp: &Qp) -> QpPriorities {
    let tagged = qp.av.vlan_id.is_some()
        || cfg
            .gids
            .source_for(&qp.av)
            .is_some_and(|g| g.vlan_id.is_some());
    let prio = |dscp: u8, user_prio: u8| {
        if tagged {
            user_prio & 7
        } else {
            cfg.dcb.map.priority(dscp, None)
        }
    };
    QpPriorities {
        cnp: prio(cfg.cc.cnp_dscp, cfg.cc.cnp_prio),
        data: prio(qp.av.traffic_class >> 2, qp.av.sl),
    }
}

/// Writes into `buf` a RoCEv2 CNP to the peer of `qp`, laid out as the ConnectX-4 Lx
/// capture of roce-facts §3.4/§5.4: DSCP `cnp_dscp` with ECT(0), DF, UDP source port 0,
/// BTH opcode 0x81 with BECN, P_Key 0xFFFF, DestQP = the peer's QP (the one to slow
/// down), PSN 0, and 16 zero bytes; returns its length. `None` when the QP's source GID
/// is no longer in the table (its template `hdr` is empty), or is a RoCEv1 entry (CNPs
/// are RoCEv2 packets: there is no UDP to carry one over v1).
///
/// Built from the QP's header template `hdr` (the same addresses: [`header_template`]
/// and a CNP both go through [`lower_headers`] from `qp.av`), re-marked as a CNP: the
/// headers built afresh and emitted field by field cost about twice an ACK's frame on
/// the soft core (2,091 instructions against 912).
fn emit_cnp(cfg: &PortConfig, qp: &Qp, hdr: &HeaderTemplate, buf: &mut [u8]) -> Option<usize> {
    if hdr.raw().3 == IcrcKind::RoceV1 {
        return None;
    }
    // `lower_headers`' PCP of priority `cnp_prio`, and the CNP's marking.
    let pcp = cfg.dcb.prio_pcp[usize::from(cfg.cc.cnp_prio & 7)] & 7;
    let mut bth = BthRepr::new(Opcode::CNP, qp.dest_qpn, Psn::ZERO);
    bth.becn = true;
    hdr.emit_cnp(pcp, cfg.cc.cnp_dscp, ECN_ECT0, &bth, buf).ok()
}

/// How a frame is marked below the BTH: IP DSCP and ECN, the 802.1p priority (the
/// VLAN's PCP through the egress map), the IPv6 flow label.
struct Marking {
    dscp: u8,
    ecn: u8,
    pcp: u8,
    flow_label: u32,
}

/// The Ethernet, VLAN, IP and UDP headers from this port (source GID `sgid`) towards
/// `av`: one place for the addressing rules of data frames and CNPs alike (a RoCEv1
/// source entry gives a GRH and no UDP, whatever the GIDs; for RoCEv2 IPv4-mapped GIDs
/// give IPv4; hop limit 0 means 64).
fn lower_headers(
    cfg: &PortConfig,
    src: &GidEntry,
    av: &AddressVector,
    m: Marking,
    sport: u16,
) -> (EthernetRepr, Option<VlanRepr>, L3Repr, Option<UdpRepr>) {
    let hop = if av.hop_limit == 0 { 64 } else { av.hop_limit };
    let sgid = &src.gid;
    let v1 = src.gid_type == GidType::Roce;
    // A RoCEv1 GRH has the IPv6 header's layout (its traffic class the DSCP and ECN).
    let ipv6 = |next_header| Ipv6Repr {
        src: Ipv6Addr::from(*sgid),
        dst: Ipv6Addr::from(av.dgid),
        dscp: m.dscp,
        ecn: m.ecn,
        flow_label: m.flow_label & 0xF_FFFF,
        next_header,
        hop_limit: hop,
    };
    let l3 = if v1 {
        L3Repr::Grh(ipv6(NEXT_HEADER_BTH))
    } else if av.is_ipv4() {
        let g = sgid;
        let a = av.dgid;
        L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::new(g[12], g[13], g[14], g[15]),
            dst: Ipv4Addr::new(a[12], a[13], a[14], a[15]),
            dscp: m.dscp,
            ecn: m.ecn,
            ttl: hop,
            ..Ipv4Repr::default()
        })
    } else {
        L3Repr::Ipv6(ipv6(NEXT_HEADER_UDP))
    };
    let eth = EthernetRepr {
        dst: MacAddr(av.dmac),
        src: MacAddr(cfg.mac),
        ethertype: 0,
    };
    // The source entry's VLAN (its address lives there), else the address vector's;
    // the PCP through the port's egress map from the frame's priority.
    let vlan = src.vlan_id.or(av.vlan_id).map(|vid| VlanRepr {
        pcp: cfg.dcb.prio_pcp[usize::from(m.pcp & 7)] & 7,
        dei: false,
        vid: vid & 0x0FFF,
        ethertype: 0,
    });
    let udp = (!v1).then_some(UdpRepr {
        src_port: sport,
        dst_port: ROCEV2_PORT,
        checksum: 0,
    });
    (eth, vlan, l3, udp)
}

/// The headers before the BTH of the QP's frames, towards its address vector or (UD)
/// the WR's; `ect` marks them ECN-capable (ECT(0)) unless the traffic class already
/// chose a codepoint (DCQCN's reaction point is on).
fn header_template(
    cfg: &PortConfig,
    qp: &Qp,
    ud_av: Option<AddressVector>,
    ect: bool,
) -> Option<HeaderTemplate> {
    let av = ud_av.unwrap_or(qp.av);
    let src = *cfg.gids.source_for(&av)?;
    let ecn = match av.traffic_class & 3 {
        0 if ect => ECN_ECT0,
        e => e,
    };
    let sport = if ud_av.is_some() {
        crate::transport::udp_sport(qp.qpn, av.flow_label)
    } else {
        qp.udp_sport
    };
    let marking = Marking {
        dscp: av.traffic_class >> 2,
        ecn,
        pcp: av.sl,
        flow_label: av.flow_label,
    };
    let (eth, vlan, l3, udp) = lower_headers(cfg, &src, &av, marking, sport);
    HeaderTemplate::new(&eth, vlan.as_ref(), &l3, udp.as_ref()).ok()
}

/// MAC addresses compared as one integer.
#[inline(always)]
fn mac_eq(a: &[u8; 6], b: &[u8; 6]) -> bool {
    let wide = |m: &[u8; 6]| u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
    wide(a) == wide(b)
}

/// GIDs compared as one integer.
#[inline(always)]
fn gid_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    u128::from_ne_bytes(*a) == u128::from_ne_bytes(*b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::cnp::CnpRepr;
    use crate::wire::ExtHeaders;

    #[test]
    fn pkey_rule() {
        assert!(pkey_match(0xFFFF, 0xFFFF));
        assert!(pkey_match(0x7FFF, 0xFFFF));
        assert!(!pkey_match(0x7FFF, 0x7FFF));
        assert!(!pkey_match(0x8000, 0x8000));
        assert!(!pkey_match(0xFFFF, 0x8001));
    }

    /// The reference for [`emit_cnp`]: the CNP's headers built afresh from the port and
    /// the QP, field by field (as the engine built them before it took the template),
    /// for `wire::emit`. `None` where `emit_cnp` must give `None`.
    fn cnp_headers(cfg: &PortConfig, qp: &Qp) -> Option<wire::Headers> {
        let src = *cfg.gids.source_for(&qp.av)?;
        if src.gid_type == GidType::Roce {
            return None;
        }
        let (eth, vlan, l3, udp) = lower_headers(
            cfg,
            &src,
            &qp.av,
            Marking {
                dscp: cfg.cc.cnp_dscp,
                ecn: ECN_ECT0,
                pcp: cfg.cc.cnp_prio,
                flow_label: 0,
            },
            0,
        );
        let mut bth = BthRepr::new(Opcode::CNP, qp.dest_qpn, Psn::ZERO);
        bth.becn = true;
        Some(wire::Headers {
            eth,
            vlan,
            l3,
            udp,
            bth,
            ext: ExtHeaders {
                cnp: Some(CnpRepr::default()),
                ..ExtHeaders::default()
            },
        })
    }

    /// A CNP built from the QP's header template is the one built afresh, byte for
    /// byte, over ports and QPs of every kind the template covers: IPv4 and IPv6, tagged
    /// by the source entry or the address vector or not, a RoCEv1 source (no CNP), a
    /// source of the other IP version (no template, no CNP), any traffic class, flow
    /// label, SL, priority map, CNP DSCP and priority, ECN-capable or not.
    #[test]
    fn a_cnp_from_the_template_is_the_cnp_built_afresh() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let init = QpInitAttr {
            qp_type: QpType::Rc,
            pd: Pd(0),
            send_cq: 0,
            recv_cq: 0,
            sq_sig_all: false,
            max_inline_data: 0,
            srq: None,
        };
        let mut kinds = [0u32; 3];
        for _ in 0..20_000 {
            let r = next();
            let ip = |r: u64, v4: bool| {
                let mut g = (u128::from(r) | u128::from(r.rotate_left(17)) << 64).to_be_bytes();
                if v4 {
                    g[..12].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]);
                }
                g
            };
            let (src_v4, dst_v4) = (r & 1 != 0, r & 2 != 0 || r & 0x300 == 0);
            let mut src = GidEntry::new(ip(next(), src_v4));
            if r & 4 != 0 {
                src = GidEntry::with_vlan(src.gid, (r >> 20) as u16 & 0xFFF);
            }
            if r & 0x18 == 0 {
                src = src.roce_v1();
            }
            let mut cfg = PortConfig::new([2, 0, 0, 0, 0, (r >> 8) as u8], [0; 16]);
            cfg.gids.set(1, Some(src)).unwrap();
            let m = next();
            cfg.cc.cnp_dscp = m as u8;
            cfg.cc.cnp_prio = (m >> 8) as u8;
            cfg.dcb.prio_pcp = (m >> 16).to_le_bytes()[..8].try_into().unwrap();
            let mut qp = Qp::new(Qpn::new(2), &init);
            let a = next();
            qp.av = AddressVector {
                dmac: [2, 0, 0, 0, 0, a as u8],
                dgid: ip(next(), dst_v4),
                sgid_index: 1,
                hop_limit: (a >> 8) as u8,
                traffic_class: (a >> 16) as u8,
                flow_label: (a >> 24) as u32,
                sl: (a >> 56) as u8,
                vlan_id: (a & 0x80 != 0).then_some((a >> 40) as u16),
            };
            qp.dest_qpn = Qpn::new((a >> 32) as u32 & 0xFF_FFFF);
            qp.udp_sport = (a >> 44) as u16;
            let ect = a & 0x40 != 0;
            let hdr = header_template(&cfg, &qp, None, ect).unwrap_or_default();
            let (mut want, mut got) = ([0xA5u8; 128], [0x5Au8; 128]);
            let want_len = cnp_headers(&cfg, &qp).map(|h| wire::emit(&h, &[], &mut want).unwrap());
            let got_len = emit_cnp(&cfg, &qp, &hdr, &mut got);
            assert_eq!(got_len, want_len, "{cfg:?} {:?} {src:?}", qp.av);
            if let Some(n) = want_len {
                assert_eq!(got[..n], want[..n], "{cfg:?} {:?} {src:?}", qp.av);
            }
            let kind = match want_len {
                None => 0,
                Some(_) if dst_v4 => 1,
                Some(_) => 2,
            };
            kinds[kind] += 1;
        }
        // Each case came up often: no CNP, IPv4 and IPv6 CNPs.
        assert!(kinds.iter().all(|&k| k > 1_000), "{kinds:?}");
    }
}
