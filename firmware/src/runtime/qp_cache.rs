//! The QP context cache (`docs/scale.md`): with an ICM (host memory the host handed over
//! with `SET_ICM`), QPs live there, and the engine's slots hold the busy ones. A QP is
//! brought in when a command, a doorbell or a packet needs it; to make room the least
//! recently used QP that has no work under way is written back. Per QP the NIC keeps
//! two bits on chip (exists, doorbell pending); a resident QP also has a slot and a line.

use super::{FpState, HostQp, Nic};
use crate::abi::{self, CmdEntry, CmdStatus, ICM_ENTRY_LEN, MAX_ICM_QPS, QPN_BASE};
use crate::hal::{Datapath, Hal};
use roce_core::engine::{home_slot, QP_CTX_LEN};
use roce_core::memory::Dma;
use roce_core::num::Qpn;
use roce_core::transport::{Error as EngineError, Instant, QpInitAttr, QpType};
use roce_core::wire::opcode::{Opcode, Operation};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Host memory for QP contexts: `entries` of `ICM_ENTRY_LEN` bytes at `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Icm {
    pub base: u64,
    pub entries: u32,
}

/// Where a QP is, as [`Nic::resident`] found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Residence {
    /// In line `.0` (and an engine slot).
    Line(usize),
    /// No such QP.
    Absent,
    /// It exists, but no line could be freed (every resident QP has work under way),
    /// or its entry could not be read.
    Stuck,
}

/// The runtime's part of an ICM entry, after the engine's context.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
#[repr(C)]
struct IcmTail {
    qpn: U32,
    sq_ci: U32,
    rq_ci: U32,
    send_cq: U16,
    qp_type: u8,
    sq_log: u8,
    rq_log: u8,
    /// 1: the QP is on an SRQ (`HostQp::srq`).
    srq: u8,
    reserved: [u8; 2],
    sq_ring: U64,
    rq_ring: U64,
    db_record: U64,
}

const _: () = assert!(QP_CTX_LEN + core::mem::size_of::<IcmTail>() <= ICM_ENTRY_LEN);

impl IcmTail {
    fn of(q: &HostQp) -> Self {
        Self {
            qpn: U32::new(q.qpn.value()),
            sq_ci: U32::new(q.sq_ci),
            rq_ci: U32::new(q.rq_ci),
            send_cq: U16::new(q.send_cq),
            qp_type: q.qp_type as u8,
            sq_log: q.sq_log,
            rq_log: q.rq_log,
            srq: u8::from(q.srq),
            reserved: [0; 2],
            sq_ring: U64::new(q.sq_ring),
            rq_ring: U64::new(q.rq_ring),
            db_record: U64::new(q.db_record),
        }
    }

    fn host_qp(&self, qpn: Qpn) -> Option<HostQp> {
        (self.qpn.get() == qpn.value()).then_some(())?;
        Some(HostQp {
            qpn,
            qp_type: QpType::from_u8(self.qp_type)?,
            send_cq: self.send_cq.get(),
            sq_ring: self.sq_ring.get(),
            sq_log: self.sq_log.min(super::MAX_LOG_DEPTH),
            sq_ci: self.sq_ci.get(),
            rq_ring: self.rq_ring.get(),
            rq_log: self.rq_log.min(super::MAX_LOG_DEPTH),
            rq_ci: self.rq_ci.get(),
            srq: self.srq != 0,
            db_record: self.db_record.get(),
            fp: FpState::Off,
            sq_hw: false,
        })
    }
}

/// Where a received frame goes, as the cache needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dest {
    /// The BTH's destination QP.
    pub qpn: Qpn,
    /// A response: READ response, ACKNOWLEDGE or ATOMIC ACKNOWLEDGE (the requester's).
    pub response: bool,
}

impl Dest {
    /// The destination of a frame whose BTH opcode is `opcode`.
    pub fn new(qpn: Qpn, opcode: Opcode) -> Self {
        let response = opcode.info().is_some_and(|i| {
            matches!(
                i.operation,
                Operation::Acknowledge | Operation::RdmaReadResponse | Operation::AtomicAcknowledge
            )
        });
        Self { qpn, response }
    }
}

/// Bit `index` of a per-QP bitmap.
fn bit(map: &[u64], index: u32) -> bool {
    map.get(index as usize / 64)
        .is_some_and(|w| w & (1 << (index % 64)) != 0)
}

impl<
        H: Hal,
        const QPS: usize,
        const CQS: usize,
        const PDS: usize,
        const MRS: usize,
        const SQ: usize,
        const RQ: usize,
        const CQE: usize,
        const RD: usize,
    > Nic<H, QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    /// The line of resident QP `qpn`: its home line, else a scan.
    pub(super) fn line(&self, qpn: Qpn) -> Option<usize> {
        let home = home_slot(qpn, QPS);
        if matches!(self.qps.get(home), Some(Some(q)) if q.qpn == qpn) {
            return Some(home);
        }
        self.qps
            .iter()
            .take(self.qp_hi)
            .position(|q| matches!(q, Some(q) if q.qpn == qpn))
    }

    /// A free line for QP `qpn`: its home line if free, else the first free one.
    pub(super) fn free_line(&self, qpn: Qpn) -> Option<usize> {
        let home = home_slot(qpn, QPS);
        if matches!(self.qps.get(home), Some(None)) {
            return Some(home);
        }
        self.qps.iter().position(Option::is_none)
    }

    /// Marks line `l` used in this poll.
    pub(super) fn touch(&mut self, l: usize) {
        if let Some(u) = self.used.get_mut(l) {
            *u = self.tick;
        }
    }

    /// How much of QP `qpn` is on the fast path.
    pub(super) fn fp_of(&self, qpn: Qpn) -> FpState {
        self.fp_sq_of(qpn).0
    }

    /// [`Self::fp_of`], and whether the fast path fetches the QP's send WQEs (`sq_hw`):
    /// one lookup of its line for an EXCEPTION or ACKED event, which asks both.
    /// Inlined: out of line, a MSG_DONE's `fp_of` paid its call and saves (~10) and an
    /// exception ~14.
    #[inline(always)]
    pub(super) fn fp_sq_of(&self, qpn: Qpn) -> (FpState, bool) {
        match self.line(qpn).and_then(|l| self.qps.get(l)) {
            Some(Some(q)) => (q.fp, q.sq_hw),
            _ => (FpState::Off, false),
        }
    }

    pub(super) fn set_exists(&mut self, index: u32, on: bool) {
        if self.icm.is_none() {
            return;
        }
        let (w, b) = (index as usize / 64, 1u64 << (index % 64));
        if let Some(e) = self.exists.get_mut(w) {
            *e = if on { *e | b } else { *e & !b };
            self.pending.clear(index);
        }
    }

    fn exists(&self, index: u32) -> bool {
        bit(&self.exists, index)
    }

    fn entry_addr(icm: Icm, index: u32) -> u64 {
        icm.base
            .wrapping_add(u64::from(index) * ICM_ENTRY_LEN as u64)
    }

    /// Finds QP `qpn` resident, bringing it in from the ICM when it is not: for a
    /// packet or a command, in place of any QP that has no work under way; for a
    /// doorbell (`for_work`), only in place of one with no send WQEs at all (moving
    /// one QP's fetched WQEs out for another's would only churn). A QP that comes back
    /// fetches its rings at once.
    pub(super) fn resident(&mut self, qpn: Qpn) -> Residence {
        self.bring_in(qpn, false)
    }

    pub(super) fn bring_in(&mut self, qpn: Qpn, for_work: bool) -> Residence {
        if let Some(l) = self.line(qpn) {
            if self.icm.is_some() {
                self.counters.qp_cache_hits += 1;
            }
            self.touch(l);
            return Residence::Line(l);
        }
        let Some(icm) = self.icm else {
            return Residence::Absent;
        };
        let index = qpn.value().wrapping_sub(QPN_BASE);
        if index >= icm.entries || !self.exists(index) {
            return Residence::Absent;
        }
        let Some(l) = self.free_line(qpn).or_else(|| self.evict_lru(for_work)) else {
            return Residence::Stuck;
        };
        self.counters.qp_cache_misses += 1;
        let mut entry = [0u8; ICM_ENTRY_LEN];
        if self
            .hal
            .dma()
            .read(Self::entry_addr(icm, index), &mut entry)
            .is_err()
        {
            self.counters.dma_errors += 1;
            return Residence::Stuck;
        }
        self.counters.qp_ctx_dma_bytes += ICM_ENTRY_LEN as u64;
        let (ctx, tail) = entry.split_at(QP_CTX_LEN);
        let host = IcmTail::read_from_prefix(tail)
            .ok()
            .and_then(|(t, _)| t.host_qp(qpn));
        let restored = match (<&[u8; QP_CTX_LEN]>::try_from(ctx), host) {
            (Ok(ctx), Some(_)) => {
                let now = Instant::from_nanos(self.hal.now());
                self.engine.restore_qp(qpn, ctx, now)
            }
            _ => Err(EngineError::BadContext(qpn)),
        };
        match (restored, host) {
            (Ok(()), Some(host)) => {
                if let Some(s) = self.qps.get_mut(l) {
                    *s = Some(host);
                }
                self.qp_hi = self.qp_hi.max(l + 1);
                self.touch(l);
                // Its rings, as they stand (WQEs handed back at eviction, doorbells
                // since): a packet may need its receive WQEs.
                self.pending.clear(index);
                self.fetch_line(l, index);
                Residence::Line(l)
            }
            // A corrupt entry: the QP is lost; the host hears QP_FATAL.
            _ => {
                self.set_exists(index, false);
                self.hal.reg_write(abi::reg::EVENT_QPN, qpn.value());
                self.raise(|e| e.set_qp_fatal(true));
                Residence::Absent
            }
        }
    }

    /// Whether a received packet for `dest` (with an ICM; `None` without, or for a
    /// frame that names no QP) may go to the engine: a stored QP is brought in, and a
    /// packet whose QP cannot be is dropped (the requester's retransmission repeats
    /// it), counted.
    ///
    /// A response (ACKNOWLEDGE, READ response, ATOMIC ACKNOWLEDGE) for a stored QP is
    /// dropped without bringing it in: a QP is written back only with none of its
    /// requests started ([`roce_core::engine::Engine::qp_evictable`]), so every PSN it
    /// sent is acknowledged and the requester would discard the response as a
    /// duplicate. Such responses are common behind the fast path: the hardware
    /// acknowledges each request packet as it places it, and an ACK the engine built
    /// for a packet it handled itself (the QP's first after it came in, a row miss) can
    /// reach the requester after those and after the requester wrote the QP back; each
    /// would cost a context read and a write-back (`BENCHMARKS.md`, "The accessed bits").
    /// Counted apart from the drops above (`qp_cache_stale_responses`): they cost the
    /// requester nothing.
    pub(super) fn admit(&mut self, dest: Option<Dest>) -> bool {
        if dest.is_some_and(|d| d.response && self.line(d.qpn).is_none()) {
            self.counters.qp_cache_stale_responses += 1;
            return false;
        }
        match dest.map(|d| self.resident(d.qpn)) {
            Some(Residence::Stuck) => {
                self.counters.qp_cache_drops += 1;
                false
            }
            _ => true,
        }
    }

    /// The least recently used resident QP's line that has no work under way (as the
    /// engine knows it) and was not fetched in this poll.
    fn lru_candidate(&self, idle_only: bool) -> Option<usize> {
        let mut best: Option<(u32, usize)> = None;
        for (l, q) in self.qps.iter().enumerate().take(self.qp_hi) {
            let (Some(q), Some(&used), Some(&fetched)) = (q, self.used.get(l), self.fetched.get(l))
            else {
                continue;
            };
            let age = self.tick.wrapping_sub(used);
            if fetched == self.tick
                || !self.engine.qp_evictable(q.qpn)
                || (idle_only && self.engine.qp_has_sends(q.qpn))
            {
                continue;
            }
            if best.is_none_or(|(a, _)| age >= a) {
                best = Some((age, l));
            }
        }
        best.map(|(_, l)| l)
    }

    /// Folds the fast path's accessed bits into the LRU (a CLOCK's second chance): a
    /// resident QP on the fast path whose entry took a frame since the last sweep was
    /// used now. The hardware places such frames without the firmware, so without the
    /// bits a QP receiving through the fast path would look idle and be written back
    /// while its packets still arrive (`docs/scale.md`, "The accessed bits"). Run at the
    /// start of each poll with an ICM (so a QP counts as used in the poll after the one
    /// its frames arrived in, not at the next eviction, which may be much later) and
    /// before each eviction; it reads the bits' words, and visits the lines only for a
    /// word with a bit set.
    pub(super) fn sweep_accessed(&mut self) {
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        let entries = fp.ctx_entries().max(1);
        for word in 0..entries.div_ceil(32) {
            let bits = fp.take_accessed(word);
            if bits == 0 {
                continue;
            }
            for (q, used) in self.qps.iter().take(self.qp_hi).zip(self.used.iter_mut()) {
                let Some(q) = q.as_ref().filter(|q| q.fp != FpState::Off) else {
                    continue;
                };
                let entry = q.qpn.value() as usize % entries;
                if entry / 32 == word && bits & (1 << (entry % 32)) != 0 {
                    *used = self.tick;
                }
            }
        }
    }

    /// Writes the least recently used resident QP that has no work under way (and was
    /// not used in this poll) back to the ICM; returns its freed line.
    fn evict_lru(&mut self, idle_only: bool) -> Option<usize> {
        let icm = self.icm?;
        self.sweep_accessed();
        // A QP on the fast path leaves it first (the engine takes its hardware receive
        // state, which may show a message under way after all: then the next one).
        let mut q = loop {
            let l = self.lru_candidate(idle_only)?;
            let q = self.qps.get(l).copied().flatten()?;
            if q.fp == FpState::Off {
                break q;
            }
            self.fp_take_off(q.qpn);
            self.counters.fp_ctx_cache_evictions += 1;
            if self.engine.qp_evictable(q.qpn) {
                break self.qps.get(l).copied().flatten()?;
            }
        };
        let l = self.line(q.qpn)?;
        let mut entry = [0u8; ICM_ENTRY_LEN];
        let (ctx, tail) = entry.split_at_mut(QP_CTX_LEN);
        let ctx = <&mut [u8; QP_CTX_LEN]>::try_from(ctx).ok()?;
        let handed = self.engine.evict_qp(q.qpn, ctx).ok()?;
        // The WQEs it had fetched but not started are fetched again from the rings.
        q.sq_ci = q.sq_ci.wrapping_sub(u32::from(handed.sq_wqes));
        q.rq_ci = q.rq_ci.wrapping_sub(u32::from(handed.rq_wqes));
        let index = q.qpn.value().wrapping_sub(QPN_BASE);
        // Send WQEs are work to come back for; receive WQEs (handed back, or left in
        // the ring because the queue was full) wait for a packet, which brings the QP
        // back anyway: a QP pending for them alone would come back, push another such
        // QP out, and so on for ever.
        if handed.sq_wqes != 0 {
            self.pending.set(index);
            self.backlog = true;
        } else {
            self.pending.clear(index);
        }
        let _ = IcmTail::of(&q).write_to_prefix(tail);
        if self
            .hal
            .dma()
            .write(Self::entry_addr(icm, index), &entry)
            .is_err()
        {
            self.counters.dma_errors += 1;
        }
        self.counters.qp_ctx_dma_bytes += ICM_ENTRY_LEN as u64;
        self.counters.qp_cache_evictions += 1;
        if let Some(s) = self.qps.get_mut(l) {
            *s = None;
        }
        Some(l)
    }

    /// CREATE_QP with an ICM: the lowest free index, in a slot freed if need be.
    pub(super) fn create_in_icm(&mut self, init: &QpInitAttr) -> Result<Qpn, EngineError> {
        let entries = self.icm.map_or(0, |i| i.entries);
        let index = (0..entries)
            .step_by(64)
            .find_map(|base| {
                let w = self.exists.get(base as usize / 64)?;
                (*w != u64::MAX).then(|| base + w.trailing_ones())
            })
            .filter(|&i| i < entries)
            .ok_or(EngineError::TableFull { table: "QP" })?;
        let qpn = Qpn::new(QPN_BASE + index);
        if self.free_line(qpn).is_none() && self.evict_lru(false).is_none() {
            return Err(EngineError::TableFull { table: "QP" });
        }
        self.engine.create_qp_with(qpn, init)
    }

    /// SET_ICM: only while no QP exists.
    pub(super) fn set_icm(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::IcmArg>(e);
        let entries = arg.entries.get();
        if entries == 0 || entries > MAX_ICM_QPS || arg.addr.get() % 4096 != 0 {
            return CmdStatus::BadParam;
        }
        if self.qps.iter().any(Option::is_some) {
            return CmdStatus::Busy;
        }
        self.icm = Some(Icm {
            base: arg.addr.get(),
            entries,
        });
        self.exists.fill(0);
        self.pending.clear_all();
        CmdStatus::Ok
    }

    /// The producer indexes in a doorbell record (send, receive).
    pub(super) fn read_db_record(&mut self, addr: u64) -> Option<(u32, u32)> {
        let mut b = [0u8; 8];
        if self.hal.dma().read(addr, &mut b).is_err() {
            self.counters.dma_errors += 1;
            return None;
        }
        let [a0, a1, a2, a3, b0, b1, b2, b3] = b;
        Some((
            u32::from_le_bytes([a0, a1, a2, a3]),
            u32::from_le_bytes([b0, b1, b2, b3]),
        ))
    }

    /// With an ICM: fetches the WQEs of every QP whose doorbell rang (or that still has
    /// some in its rings). Resident QPs go first (no context traffic); then stored ones
    /// are brought in, round robin from where the last poll stopped, until one cannot
    /// be (no line can be freed): the rest stay pending. So a poll costs the resident
    /// lines plus the QPs it brings in, never a visit to every pending QP.
    #[inline(never)] // (a doorbell's path, out of the poll as its other rare paths)
    pub(super) fn fetch_pending(&mut self) -> bool {
        if !self.hal.take_rung_qps(&mut self.pending) {
            // No latch on this platform: every QP may have rung.
            self.pending.copy_from_words(&self.exists);
        }
        self.backlog = false;
        let mut any = false;
        for l in 0..self.qp_hi {
            let Some(Some(q)) = self.qps.get(l).copied() else {
                continue;
            };
            let index = q.qpn.value().wrapping_sub(QPN_BASE);
            if self.pending.get(index) {
                self.pending.clear(index);
                self.counters.qp_cache_hits += 1;
                if self.fetch_line(l, index) {
                    self.touch(l);
                    any = true;
                }
            }
        }
        any | self.bring_in_pending() | self.fetch_gsi() | self.fetch_srqs()
    }

    /// Brings in pending stored QPs (which fetch their rings as they come), from
    /// `self.next_in` on, wrapping once, until one cannot come in. The pending map's
    /// summary finds the words with a pending QP, so a pass costs those words, not the
    /// whole map.
    fn bring_in_pending(&mut self) -> bool {
        let words = self.icm.map_or(0, |i| i.entries.div_ceil(64)) as usize;
        if words == 0 {
            return false;
        }
        let start = self.next_in as usize % (words * 64);
        let (first, shift) = (start / 64, start % 64);
        // From `start` to the end, then from 0 to just before `start`: the first word
        // is split between the two.
        let passes = [
            (first, words, u64::MAX << shift),
            (0, first + 1, (1u64 << shift) - 1),
        ];
        let mut any = false;
        for (mut w, end, edge) in passes {
            while let Some(found) = self.pending.next_word(w, end) {
                let mut bits = self.pending.word(found);
                if found == first {
                    bits &= edge;
                }
                w = found + 1;
                while bits != 0 {
                    let index = (found * 64) as u32 + bits.trailing_zeros();
                    bits &= bits - 1;
                    let qpn = Qpn::new(QPN_BASE + index);
                    if self.line(qpn).is_some() {
                        // Resident with WQEs still in its rings: the next poll's first
                        // pass.
                        self.backlog = true;
                        continue;
                    }
                    match self.bring_in(qpn, true) {
                        Residence::Line(_) => {
                            any = true;
                            self.next_in = index.wrapping_add(1);
                        }
                        Residence::Stuck => {
                            self.backlog = true;
                            return any;
                        }
                        Residence::Absent => self.pending.clear(index),
                    }
                }
            }
        }
        any
    }

    /// Fetches line `l`'s rings up to its doorbell record; QP index `index` stays
    /// pending (and the backlog noted) when WQEs remain in them.
    fn fetch_line(&mut self, l: usize, index: u32) -> bool {
        let record = self.qps.get(l).copied().flatten().map(|q| q.db_record);
        let Some(pis) = record.and_then(|r| self.read_db_record(r)) else {
            return false;
        };
        let before = core::mem::replace(&mut self.backlog, false);
        let any = self.fetch_qp(l, pis);
        if self.backlog {
            self.pending.set(index);
        }
        self.backlog |= before;
        any
    }
}
