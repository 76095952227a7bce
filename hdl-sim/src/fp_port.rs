//! The Verilated RC fast path (`rtl/roce_fp_top.sv`) as the firmware's `Datapath` and
//! `FastPath` (`docs/fastpath.md`): the firmware runtime runs on the real RTL fast path
//! exactly as on the software model (`roce_firmware::fastpath::FastPathPort`).
//!
//! [`FpPort`] stands between the runtime and a port (frames to and from the wire). Every
//! received frame goes through the RTL's parser and receive rules; the firmware sees it
//! only as an event. The RTL segmenter's and ACK path's frames go to the port; so do the
//! frames the firmware builds itself (their ICRC is the engine's: the firmware's transmit
//! path beside the fast path, `soc_datapath`'s on the SoC, is not modelled here).
//!
//! What stands for the hardware around `roce_fp_top`:
//! * the **descriptor ring** (in hardware: a ring in host memory the device fetches
//!   from): descriptors wait here in post order and go to the RTL as fast as it takes
//!   them (its planner keeps them in per-QP queues served round robin). The ring has as
//!   many entries as the planner has slots (32, the model's ring) and an entry stays in
//!   use until the planner frees its slot (`tx_slots_used`, the consumer index the
//!   firmware sees), so the fetch never waits for a slot and no QP's descriptor waits
//!   behind another QP's, as in the model's per-QP ring. A FLUSH goes ahead of the
//!   descriptors still waiting, and it and a send context written with `valid` clear
//!   drop the QP's descriptors still waiting, as §2.2 says (the model's ring acts on a
//!   FLUSH at once; here the slots it frees count as used until the RTL takes it);
//! * the **table port**: writes queue in order; a write of part of a word reads the word
//!   first (read-modify-write, the port is 32 bits wide);
//! * the **event and exception-frame rings**: the RTL's event stream and its exception
//!   frames, in order.
//!
//! * the **CQE writer's registers** as the firmware sees them (`FastPath::cq_writer`,
//!   the model's `CqWriter`): the RTL's CQ table (`fp_cqw`, `docs/fastpath.md` §3.7)
//!   mirrored here. What the firmware changed (a CQ handed over or taken back, the
//!   producer index after its own CQEs, the host's consumer index) goes into the RTL
//!   before it runs; the producer index of a CQ the RTL wrote CQEs into (an `ACKED`
//!   event with its `cqe` bit) is read back after it ran. The RTL advances a producer
//!   index only while it runs, so the firmware's read-modify-write of it between runs is
//!   whole (a core beside a running writer needs a CQE port instead: §3.7).
//!
//! * the **WQE fetch's registers** (`fp_sqf`, `docs/fastpath.md` §3.8): a hand-over
//!   staged in table 3 and committed by a command after the checks the model's
//!   `sq_hand_over` makes (made here: the send context, the receive context's tag, the
//!   ring's descriptors); a doorbell and take-back the same way; the time the RTL
//!   computes its deadlines from written before it runs; the send CQs of the queues it
//!   holds read back after a run in which it wrote CQEs of its own (their `ACKED`
//!   events never leave it).
//!
//! The model is clocked only inside [`FastPath::run`] (where host memory is at hand for
//! its DMA) and for table reads (with the DMA ports held). `run` first lets queued table
//! writes land, then offers received frames and descriptors, and clocks until the RTL has
//! been quiet for [`QUIET`] cycles: a received frame never meets a context half written.

use crate::fastpath::{
    FpSim, Table, ACCESSED_WORD, CQW_CQS, CQW_PI_WORD, CQW_RECV_CQ, CQW_RECV_WRID_HI_WORD,
    CQW_RECV_WRID_LO_WORD, CQW_RING_WORD, CQW_SEND_CQ_WORD, SQ_R_BASE, SQ_R_CI, SQ_R_DL_HI,
    SQ_R_DL_LO, SQ_R_DONE, SQ_R_FLAGS, SQ_R_NAKS, SQ_R_NEWS, SQ_R_RETRIES, SQ_R_RNRS, SQ_R_SENDS,
    SQ_R_TAKEN, SQ_R_TIMEOUTS, SQ_R_UNA, SQ_W_CFG, SQ_W_CI, SQ_W_CMD, SQ_W_DB, SQ_W_DEPTH,
    SQ_W_NOW_HI, SQ_W_NOW_LO, SQ_W_PD, SQ_W_PSN, SQ_W_RING_HI, SQ_W_RING_LO, SQ_W_RTO_HI,
    SQ_W_RTO_LO,
};
use crate::sim::{DataWidth, SimError};
use roce_core::dcb::Priorities;
use roce_core::fastpath::layout::{
    self, EventWords, EVENT_LEN, EV_MSG_DONE, MR_LEN, RCTX_LEN, SCTX_LEN, TXD_LEN, TXD_OP_FLUSH,
};
use roce_core::fastpath::{RecvCqe, SqIdle, SqSpent};
use roce_core::memory::Dma;
use roce_core::num::{Psn, Qpn};
use roce_core::wire::aeth::RnrTimer;
use roce_firmware::fastpath::{CqRing, CqWriter, SqBack, SqNews, SqRing, SqRung};
use roce_firmware::hal::{Datapath, FastPath, FastPathCounters};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// Cycles without any transfer after which the RTL counts as done with its input (its
/// longest internal gap, the RX pipeline between the last beat of a frame and its verdict,
/// is about 40 cycles at 64 bits).
pub const QUIET: u64 = 200;
/// Most cycles one `run` clocks (a bound for a model that never settles: a bug).
const RUN_LIMIT: u64 = 50_000_000;
/// Descriptors the ring holds.
const RING: usize = 32;
/// Entries of the RTL's MR table (`roce_fp_top`'s `NMR`).
const MR_ENTRIES: usize = 256;
/// Event kind EXCEPTION (§3.5).
const EV_EXCEPTION: u8 = 1;
/// Event kind ACKED (§3.5) and its byte 31 bit saying the CQE writer wrote its CQEs.
const EV_ACKED: u8 = 3;
const EV_ACKED_CQE: u8 = 4;

/// The RTL fast path in front of the port `P`.
pub struct FpPort<P> {
    fp: FpSim,
    port: P,
    /// Posted descriptors not yet offered to the RTL.
    ring: VecDeque<[u8; TXD_LEN]>,
    /// A frame the RTL finished in the cycle the port ran out of room (at most one: the
    /// RTL's output is held back while the port has no room).
    tx_out: VecDeque<Vec<u8>>,
    /// Events and exception frames, in the RTL's order.
    events: VecDeque<[u8; EVENT_LEN]>,
    exc_frames: VecDeque<Vec<u8>>,
    /// Nothing was given to the RTL since it last went quiet.
    settled: bool,
    rx_frames: u64,
    counters: FastPathCounters,
    /// The first error of the model (a DMA fault, a run that never settled).
    fault: Option<String>,
    /// The CQE writer's CQ table as the firmware sees it, and as the RTL holds it.
    cqw: CqWriter,
    cqw_rtl: CqWriter,
    /// Each QP's send CQ, as given to the RTL (by QPN).
    send_cq: HashMap<u32, u16>,
    /// QPs whose `ACKED` events said the RTL wrote CQEs since the last read-back.
    cqe_qps: BTreeSet<u32>,
    /// Each QP's receive CQ, as given to the RTL with its last load (by QPN), and the
    /// CQs whose `MSG_DONE` events said the RTL wrote a receive CQE since the last
    /// read-back.
    recv_cq: HashMap<u32, u16>,
    recv_cqe_cqs: BTreeSet<u16>,
    /// The firmware is told of the CQE writer (else it writes every CQE itself).
    cqe_writer: bool,
    /// The RTL's WQE fetch is offered to the firmware (`sq_hand_over`).
    wqe_fetch: bool,
    /// QPs whose send queue the RTL's fetch holds (by QPN).
    sq_qps: BTreeSet<u32>,
    /// The time the firmware last ran the model at (ns), written into the RTL before
    /// it runs (its deadlines are computed from it).
    now: u64,
    /// The fetch's running counts as last reported: WQEs taken, of them SENDs; NAK
    /// sequence errors taken, retries started, of them at the timeout (Go-Back-N).
    taken: [u32; 6],
    /// The earliest local ACK deadline of the queues it holds, as last reported: a
    /// run at or after it lets the RTL look (its Go-Back-N at the timeout).
    deadline: Option<u64>,
    /// The fetch wrote CQEs since `sq_news` last said so.
    news_cqe: bool,
    /// A queue was handed over once (its counts are read from then on).
    fetch_used: bool,
    /// The cycle of the first frame's last beat since [`FpPort::mark`] (latencies).
    first_frame: Option<u64>,
}

/// The fetch's running counts: WQEs taken, of them SENDs; NAK sequence errors taken,
/// retries started, of them at the timeout (Go-Back-N); RNR NAKs taken.
const SQ_COUNTS: [u8; 6] = [
    SQ_R_TAKEN,
    SQ_R_SENDS,
    SQ_R_NAKS,
    SQ_R_RETRIES,
    SQ_R_TIMEOUTS,
    SQ_R_RNRS,
];
/// `SQ_R_FLAGS` bits.
const SQ_ACTIVE: u32 = 1;
const SQ_STOPPED: u32 = 2;
const SQ_DL_VALID: u32 = 4;
/// The Go-Back-N retries spent since the last progress.
const SQ_SPENT: u32 = 7 << 3;
/// The RNR NAKs waited out since the last progress, and an RNR wait under way (the
/// deadline is its end).
const SQ_RNR_SPENT: u32 = 7 << 6;
const SQ_RNR_WAIT: u32 = 1 << 9;
/// `SQ_R_NEWS` bits.
const SQ_NEWS_CQE: u32 = 1;
const SQ_NEWS_STOPPED: u32 = 4;
/// `SQ_W_CMD` commands.
const SQ_HAND_OVER: u32 = 1;
const SQ_TAKE_BACK: u32 = 2;

impl<P: Datapath> FpPort<P> {
    /// The RTL fast path at `width` in front of `port`. Fails when the model cannot be
    /// built (Verilator missing when this crate was built, say).
    pub fn new(width: DataWidth, port: P) -> Result<Self, SimError> {
        Ok(Self {
            fp: FpSim::new(width)?,
            port,
            ring: VecDeque::new(),
            tx_out: VecDeque::new(),
            events: VecDeque::new(),
            exc_frames: VecDeque::new(),
            settled: true,
            rx_frames: 0,
            counters: FastPathCounters::default(),
            fault: None,
            cqw: CqWriter::default(),
            cqw_rtl: CqWriter::default(),
            send_cq: HashMap::new(),
            cqe_qps: BTreeSet::new(),
            recv_cq: HashMap::new(),
            recv_cqe_cqs: BTreeSet::new(),
            cqe_writer: true,
            wqe_fetch: true,
            sq_qps: BTreeSet::new(),
            now: 0,
            taken: [0; 6],
            deadline: None,
            news_cqe: false,
            fetch_used: false,
            first_frame: None,
        })
    }

    /// Hides the RTL's WQE fetch from the firmware (`sq_hand_over` refuses): the
    /// firmware then posts a descriptor per WQE and handles every `ACKED` event, as on
    /// the RTL before the fetch (a baseline).
    pub fn without_wqe_fetch(mut self) -> Self {
        self.wqe_fetch = false;
        self
    }

    /// Hides the RTL's CQE writer from the firmware (`FastPath::cq_writer` None): the
    /// firmware then writes every CQE, as on the RTL before the writer (a baseline). The
    /// WQE fetch goes with it (without the writer every retirement raises its `ACKED`).
    pub fn without_cqe_writer(mut self) -> Self {
        self.cqe_writer = false;
        self.wqe_fetch = false;
        self
    }

    /// The port behind the fast path.
    pub fn port_mut(&mut self) -> &mut P {
        &mut self.port
    }

    /// Forgets the first frame's cycle: [`FpPort::first_frame`] counts from here.
    pub fn mark(&mut self) {
        self.first_frame = None;
    }

    /// The cycle the first frame since [`FpPort::mark`] left on (its last beat).
    pub fn first_frame(&self) -> Option<u64> {
        self.first_frame
    }

    /// Clock cycles the RTL has run.
    pub fn cycles(&self) -> u64 {
        self.fp.cycle()
    }

    /// The first error the model met, if any.
    pub fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    fn record_fault(&mut self, e: impl std::fmt::Display) {
        self.fault.get_or_insert_with(|| e.to_string());
    }

    /// Drops the descriptors of the QP at context index `qpn` still in the ring.
    fn drop_queued(&mut self, qpn: u32) {
        self.ring.retain(|d| txd_qpn(d) != qpn);
    }

    /// Reads a record through the table port.
    fn read(&mut self, table: Table, index: u32, len: usize) -> Vec<u8> {
        match self.fp.read_record_dma_held(table, index, len) {
            Ok(b) => b,
            Err(e) => {
                self.record_fault(e);
                vec![0; len]
            }
        }
    }

    /// Offers the ring's next descriptor once the RTL took the last one.
    fn offer(&mut self) -> bool {
        if self.fp.txd_queued() != 0 {
            return false;
        }
        match self.ring.pop_front() {
            Some(d) => {
                self.fp.push_txd(&d);
                true
            }
            None => false,
        }
    }

    /// Whether the port takes the RTL's next frame: the RTL's transmit output is held
    /// back (`tready` low) otherwise, as the MAC holds it in hardware. Frames built ahead
    /// into a queue would be beyond a FLUSH's reach and sent again after the resends.
    fn port_room(&self) -> bool {
        self.tx_out.is_empty() && self.port.tx_blocked().is_empty()
    }

    /// Moves what the RTL produced into the rings and the port.
    fn collect(&mut self) -> bool {
        let mut any = false;
        while let Some(f) = self.fp.pop_tx_frame() {
            self.first_frame.get_or_insert(f.cycle);
            self.tx_out.push_back(f.value);
            self.counters.tx_frames += 1;
        }
        while let Some(e) = self.fp.pop_event() {
            if e.value[0] == EV_EXCEPTION {
                self.counters.rx_exceptions += 1;
            }
            let qpn = u32::from_le_bytes([e.value[4], e.value[5], e.value[6], 0]);
            if e.value[0] == EV_ACKED && e.value[31] & EV_ACKED_CQE != 0 {
                self.cqe_qps.insert(qpn);
            }
            if e.value[0] == EV_MSG_DONE && e.value[11] & layout::EV_FLAG_CQE != 0 {
                self.recv_cqe_cqs.extend(self.recv_cq.get(&qpn));
            }
            self.events.push_back(e.value);
            any = true;
        }
        while let Some(f) = self.fp.pop_exc_frame() {
            self.exc_frames.push_back(f.value);
        }
        while let Some(f) = self.tx_out.front() {
            if !self.port.can_transmit() || !self.port.transmit(f) {
                break;
            }
            self.tx_out.pop_front();
            any = true;
        }
        any
    }

    /// Writes what the firmware changed in the CQE writer's CQ table into the RTL (the
    /// words that differ from what the RTL holds); true when anything was written.
    fn push_cqs(&mut self) -> bool {
        let mut any = false;
        for c in 0..CQW_CQS as u16 {
            let (want, have) = (self.cqw.get(c), self.cqw_rtl.get(c));
            if want == have {
                continue;
            }
            let words = |r: Option<CqRing>| {
                r.map_or([0; 5], |r| {
                    [
                        r.ring as u32,
                        (r.ring >> 32) as u32,
                        0x100 | u32::from(r.log_depth & 31),
                        r.pi,
                        r.ci,
                    ]
                })
            };
            let (w, h) = (words(want), words(have));
            for (i, (&a, &b)) in w.iter().zip(h.iter()).enumerate() {
                if a != b || have.is_none() {
                    self.fp
                        .write_word(Table::Port, u32::from(c), CQW_RING_WORD + i as u8, a);
                }
            }
            self.cqw_rtl.set(c, want);
            any = true;
        }
        any
    }

    /// Reads back the producer index of each CQ the RTL wrote CQEs into.
    fn pull_cqs(&mut self) {
        let qps = std::mem::take(&mut self.cqe_qps);
        let mut cqs: BTreeSet<u16> = qps
            .iter()
            .filter_map(|q| self.send_cq.get(q))
            .copied()
            .collect();
        cqs.append(&mut self.recv_cqe_cqs);
        for c in cqs {
            let pi = match self
                .fp
                .read_word_dma_held(Table::Port, u32::from(c), CQW_PI_WORD)
            {
                Ok(pi) => pi,
                Err(e) => {
                    self.record_fault(e);
                    continue;
                }
            };
            for w in [&mut self.cqw, &mut self.cqw_rtl] {
                if let Some(mut r) = w.get(c) {
                    r.pi = pi;
                    w.set(c, Some(r));
                }
            }
        }
    }
}

impl<P: Datapath> FpPort<P> {
    /// Reads a word of table 3 (the fetch's), with the DMA ports held.
    fn read_port_word(&mut self, index: u32, word: u8) -> u32 {
        match self.fp.read_word_dma_held(Table::Port, index, word) {
            Ok(v) => v,
            Err(e) => {
                self.record_fault(e);
                0
            }
        }
    }

    /// Queues the time for the RTL's deadlines (lands before anything else it does).
    fn write_now(&mut self) {
        self.fp
            .write_word(Table::Port, 0, SQ_W_NOW_LO, self.now as u32);
        self.fp
            .write_word(Table::Port, 0, SQ_W_NOW_HI, (self.now >> 32) as u32);
    }

    /// The fetch's running counts `from..to` (of `SQ_COUNTS`) since they were last
    /// reported.
    fn take_counts(&mut self, from: usize, to: usize) -> Vec<u32> {
        (from..to)
            .map(|i| {
                let now = self.read_port_word(0, SQ_COUNTS[i]);
                let d = now.wrapping_sub(self.taken[i]);
                self.taken[i] = now;
                d
            })
            .collect()
    }

    /// QP `qpn`'s fetch flags and deadline, if the RTL holds its send queue.
    fn sq_state(&mut self, qpn: u32) -> Option<(u32, Option<u64>)> {
        if !self.sq_qps.contains(&qpn) {
            return None;
        }
        let flags = self.read_port_word(qpn, SQ_R_FLAGS);
        if flags & SQ_ACTIVE == 0 {
            // (a send context written with valid clear dropped it)
            self.sq_qps.remove(&qpn);
            return None;
        }
        Some((flags, self.port_deadline(qpn, flags)))
    }

    /// QP `qpn`'s deadline, if `flags` (its `SQ_R_FLAGS`) say it is valid.
    fn port_deadline(&mut self, qpn: u32, flags: u32) -> Option<u64> {
        (flags & SQ_DL_VALID != 0).then(|| {
            let lo = self.read_port_word(qpn, SQ_R_DL_LO);
            let hi = self.read_port_word(qpn, SQ_R_DL_HI);
            u64::from(lo) | (u64::from(hi) << 32)
        })
    }

    /// After a run: the fetch wrote CQEs of its own (their `ACKED` events stay in the
    /// RTL), so the send CQs of the queues it holds are read back. True when a queue it
    /// holds is stopped: the run did something the firmware must hear of (`sq_news`).
    fn fetch_news(&mut self) -> bool {
        if self.sq_qps.is_empty() {
            return false;
        }
        let news = self.read_port_word(0, SQ_R_NEWS);
        if news & SQ_NEWS_CQE != 0 {
            self.news_cqe = true;
            self.cqe_qps.extend(self.sq_qps.iter().copied());
        }
        news & SQ_NEWS_STOPPED != 0
    }
}

/// The context index (QPN) a descriptor names.
fn txd_qpn(d: &[u8; TXD_LEN]) -> u32 {
    u32::from_le_bytes([d[0], d[1], d[2], 0])
}

impl<P: Datapath> FastPath for FpPort<P> {
    fn set_port(&mut self, mac: [u8; 6], gid: [u8; 16]) {
        let mut rec = [0u8; 24];
        rec[..6].copy_from_slice(&mac);
        rec[8..].copy_from_slice(&gid);
        self.fp.write_record(Table::Port, 0, &rec);
        self.settled = false;
    }

    fn write_sctx(&mut self, qpn: Qpn, offset: usize, bytes: &[u8]) {
        let Some(end) = offset.checked_add(bytes.len()).filter(|&e| e <= SCTX_LEN) else {
            return;
        };
        let index = qpn.value();
        let (first, last) = (offset / 4, end.div_ceil(4));
        let mut words = vec![0u8; (last - first) * 4];
        if offset % 4 != 0 || end % 4 != 0 {
            // the port writes whole words: read the ones written in part
            let cur = self.read(Table::SendCtx, index, last * 4);
            words.copy_from_slice(&cur[first * 4..]);
        }
        words[offset - first * 4..end - first * 4].copy_from_slice(bytes);
        for (i, w) in words.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            self.fp
                .write_word(Table::SendCtx, index, (first + i) as u8, v);
        }
        // `valid` (byte 2 bit 2) cleared: the QP's waiting descriptors go
        if offset <= 2 && end > 2 && bytes[2 - offset] & 4 == 0 {
            self.drop_queued(index & 0xFF_FFFF);
            // (the RTL's fetch drops the QP's queue too)
            self.sq_qps.remove(&index);
        }
        self.settled = false;
    }

    fn read_sctx(&mut self, qpn: Qpn) -> [u8; SCTX_LEN] {
        let b = self.read(Table::SendCtx, qpn.value(), SCTX_LEN);
        b.try_into().unwrap_or([0; SCTX_LEN])
    }

    fn write_rctx(&mut self, qpn: Qpn, bytes: &[u8; RCTX_LEN]) {
        self.fp.write_record(Table::RecvCtx, qpn.value(), bytes);
        self.settled = false;
    }

    fn read_rctx(&mut self, qpn: Qpn) -> [u8; RCTX_LEN] {
        let b = self.read(Table::RecvCtx, qpn.value(), RCTX_LEN);
        b.try_into().unwrap_or([0; RCTX_LEN])
    }

    fn ctx_entries(&self) -> usize {
        crate::FP_CTX_ENTRIES
    }

    fn mr_entries(&self) -> usize {
        MR_ENTRIES
    }

    fn write_mr(&mut self, index: usize, bytes: &[u8; MR_LEN]) {
        if let Ok(i) = u32::try_from(index) {
            self.fp.write_record(Table::Mr, i, bytes);
            self.settled = false;
        }
    }

    fn tx_room(&self) -> bool {
        // the ring's entries in use: those waiting here and those the RTL's slots hold
        // (a FLUSH takes no slot; the model's ring acts on it at once)
        let waiting = self.ring.iter().filter(|d| d[3] != TXD_OP_FLUSH).count();
        waiting + self.fp.tx_slots_used() < RING
    }

    fn post_tx(&mut self, desc: &[u8; TXD_LEN]) -> bool {
        // a FLUSH takes no slot: a full ring takes it too
        if desc[3] != TXD_OP_FLUSH && !self.tx_room() {
            return false;
        }
        if desc[3] == TXD_OP_FLUSH {
            // the requester was rewound: what the QP still had waiting is stale
            self.drop_queued(txd_qpn(desc));
            self.ring.push_front(*desc);
        } else {
            self.ring.push_back(*desc);
        }
        self.settled = false;
        true
    }

    fn poll_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        let Some(ev) = self.events.front() else {
            return false;
        };
        if ev[0] == EV_EXCEPTION {
            // the frame follows its event on a stream of its own
            let Some(f) = self.exc_frames.pop_front() else {
                return false;
            };
            if let Some(dst) = frame.get_mut(..f.len()) {
                dst.copy_from_slice(&f);
            }
        }
        if let Some(ev) = self.events.pop_front() {
            *event = layout::event_words(&ev);
        }
        true
    }

    /// Events collected, or made since (a table read clocks the RTL). Its receive side
    /// is not looked at: the RTL runs only while clocked here, and `run` leaves it
    /// settled, but behind a port without room, where a QP would stay held over polls
    /// for frames that wait for the port, not for the firmware.
    fn events_waiting(&mut self) -> bool {
        !self.events.is_empty() || self.fp.events_waiting()
    }

    /// The RTL's receive path takes in-sequence READ requests and its segmenter sends
    /// their responses (`docs/fastpath.md` §6, "READ requests in RTL").
    fn read_responder(&self) -> bool {
        true
    }

    /// `fp_rx_check` places a SEND's first packet into a loaded buffer.
    fn recv_loads(&self) -> bool {
        true
    }

    fn load_recv(&mut self, qpn: Qpn, buf: Option<(u64, u32)>, cqe: Option<RecvCqe>) -> bool {
        // The RTL takes frames only in `run` (a run leaves its receive side settled):
        // no frame comes between the read and the write.
        let mut b = self.read_rctx(qpn);
        let loaded = layout::load_rctx(&mut b, qpn, buf);
        if loaded {
            // The WQE's wr_id and the QP's receive CQ into the CQE writer's table
            // before the context that says they are there (§3.7, "Receive CQEs").
            let cqe =
                cqe.filter(|c| buf.is_some() && self.cqe_writer && usize::from(c.cq) < CQW_CQS);
            if let Some(c) = cqe {
                let q = qpn.value();
                let words = [
                    (CQW_RECV_WRID_LO_WORD, c.wr_id as u32),
                    (CQW_RECV_WRID_HI_WORD, (c.wr_id >> 32) as u32),
                    (CQW_SEND_CQ_WORD, CQW_RECV_CQ | 0x100 | u32::from(c.cq)),
                ];
                for (w, v) in words {
                    self.fp.write_word(Table::Port, q, w, v);
                }
                self.recv_cq.insert(q, c.cq);
                layout::cqe_rctx(&mut b);
            }
            self.write_rctx(qpn, &b);
        }
        loaded
    }

    /// `fp_rx_check` answers a SEND's first packet that finds nothing loaded in a
    /// context with `rq_empty` with an RNR NAK and an `RNR` event (`docs/fastpath.md`
    /// §6, "Receiver not ready in RTL").
    fn rnr_responder(&self) -> bool {
        true
    }

    /// `fp_inflight`'s row, the messages of a QP its response path knows.
    fn msgs_in_flight(&self) -> u32 {
        layout::IF_ENTRIES
    }

    fn recv_rnr(&mut self, qpn: Qpn, t: Option<RnrTimer>) -> bool {
        // (One step, as `load_recv`: no frame comes between the read and the write.)
        let mut b = self.read_rctx(qpn);
        let set = layout::rnr_rctx(&mut b, qpn, t);
        if set {
            self.write_rctx(qpn, &b);
        }
        set
    }

    fn run(&mut self, dma: &mut dyn Dma) -> bool {
        if self.push_cqs() {
            self.settled = false;
        }
        let mut any = self.collect();
        let mut buf = [0u8; 16384];
        let mut rx = Vec::new();
        while let Some(n) = self.port.receive(&mut buf) {
            rx.push(buf.get(..n).unwrap_or(&[]).to_vec());
        }
        // (a frame held at the RTL's output goes on once the port has room)
        // (a deadline passed: `fp_sqf` looks at it when the time is written)
        let due = self.deadline.is_some_and(|d| d <= self.now);
        if self.settled && rx.is_empty() && !(self.fp.tx_waiting() && self.port_room()) && !due {
            return any;
        }
        // (looked at now; `sq_news` reads the deadlines again)
        self.deadline = None;
        if !self.sq_qps.is_empty() {
            self.write_now();
        }
        // table writes first: no frame or descriptor meets a context half written
        let start = self.fp.cycle();
        while self.fp.cfg_queued() {
            self.fp.set_tx_hold(!self.port_room());
            self.fp.tick(dma);
            any |= self.collect();
        }
        for f in &rx {
            self.fp.push_rx_frame(f);
        }
        self.rx_frames += rx.len() as u64;
        let mut offered = self.fp.cycle();
        loop {
            if self.offer() {
                offered = self.fp.cycle();
            }
            // done: quiet since the last offer (the ring holds no more than the planner
            // has free slots: it is empty by then), or stalled behind a port without
            // room (the payload reads of the frames held back wait too)
            let held = !self.port_room();
            if (self.fp.settled(QUIET) || (held && self.fp.quiet_for(QUIET)))
                && self.fp.cycle() - offered >= QUIET
            {
                break;
            }
            if self.fp.cycle() - start > RUN_LIMIT {
                self.record_fault(format!(
                    "the fast path did not settle in {RUN_LIMIT} cycles"
                ));
                break;
            }
            self.fp.set_tx_hold(held);
            self.fp.tick(dma);
            any |= self.collect();
        }
        any |= self.collect();
        any |= self.fetch_news();
        self.pull_cqs();
        if let Some(e) = self.fp.take_fault() {
            self.record_fault(e);
        }
        self.settled = true;
        self.counters.rx_dropped = u64::from(self.fp.rx_drops());
        self.counters.tx_dma_errors = u64::from(self.fp.tx_dma_errors());
        self.counters.tx_resent = u64::from(self.fp.tx_resent());
        self.counters.rx_handled = self
            .rx_frames
            .saturating_sub(self.counters.rx_exceptions + self.counters.rx_dropped);
        any || !rx.is_empty()
    }

    fn counters(&self) -> FastPathCounters {
        self.counters
    }

    fn rx_answered(&self) -> [u64; 2] {
        self.fp.rx_oos_dups().map(u64::from)
    }

    fn ctx_hits_misses(&self) -> [u64; 2] {
        self.fp.rx_ctx_hits_misses().map(u64::from)
    }

    fn cq_writer(&mut self) -> Option<&mut CqWriter> {
        self.cqe_writer.then_some(&mut self.cqw)
    }

    fn set_send_cq(&mut self, qpn: Qpn, cq: Option<u16>) {
        if !self.cqe_writer {
            return;
        }
        // a CQ past the writer's table is the firmware's alone (`CqWriter::set`)
        let cq = cq.filter(|&c| usize::from(c) < CQW_CQS);
        let word = cq.map_or(0, |c| 0x100 | u32::from(c));
        self.fp
            .write_word(Table::Port, qpn.value(), CQW_SEND_CQ_WORD, word);
        match cq {
            Some(c) => self.send_cq.insert(qpn.value(), c),
            None => self.send_cq.remove(&qpn.value()),
        };
        self.settled = false;
    }

    fn run_at(&mut self, dma: &mut dyn Dma, now: u64) -> bool {
        self.now = now;
        self.run(dma)
    }

    /// The model's `sq_hand_over`: nothing of the QP may be under way (its send
    /// context valid and the QP's own, `una_psn` and `next_psn` at the engine's next
    /// PSN, no descriptor of it waiting in the ring; the in-flight list is empty then:
    /// every message it holds ends before `una_psn`), then the queue goes to `fp_sqf`.
    fn sq_hand_over(&mut self, qpn: Qpn, ring: SqRing, idle: &SqIdle) -> bool {
        if !self.wqe_fetch || ring.log > 31 {
            return false;
        }
        let index = qpn.value();
        let sctx = self.read(Table::SendCtx, index, 20);
        let rctx = self.read(Table::RecvCtx, index, RCTX_LEN);
        let psn = |b: &[u8]| Psn::new(u32::from_le_bytes([b[0], b[1], b[2], 0]));
        let tag = u32::from_le_bytes([rctx[45], rctx[46], rctx[47], 0]);
        let quiet = sctx[2] & 4 != 0
            && tag == index
            && psn(&sctx[16..]) == idle.psn
            && psn(&sctx[12..]) == idle.psn
            && !self.ring.iter().any(|d| txd_qpn(d) == index);
        if !quiet {
            return false;
        }
        let rto = idle.rto.unwrap_or(0);
        let cfg = u32::from(ring.log)
            | (u32::from(idle.sig_all) << 8)
            | (u32::from(idle.rto.is_some()) << 9)
            | (u32::from(sctx[2] >> 4) << 12)
            | (u32::from(idle.retry_cnt & 7) << 16)
            | (u32::from(idle.rnr_retry & 7) << 20)
            | (u32::from(idle.max_rd_atomic) << 24);
        for (w, v) in [
            (SQ_W_RING_LO, ring.ring as u32),
            (SQ_W_RING_HI, (ring.ring >> 32) as u32),
            (SQ_W_CFG, cfg),
            (SQ_W_CI, ring.ci),
            (SQ_W_PSN, idle.psn.value()),
            (SQ_W_PD, u32::from(idle.pd.index())),
            (SQ_W_DEPTH, idle.depth),
            (SQ_W_RTO_LO, rto as u32),
            (SQ_W_RTO_HI, (rto >> 32) as u32),
        ] {
            self.fp.write_word(Table::Port, 0, w, v);
        }
        self.fp
            .write_word(Table::Port, index, SQ_W_CMD, SQ_HAND_OVER);
        // (the read lands the writes)
        let ok = self.read_port_word(index, SQ_R_FLAGS) & SQ_ACTIVE != 0;
        if ok {
            self.sq_qps.insert(index);
            self.fetch_used = true;
        }
        ok
    }

    /// The doorbell goes to the RTL, which runs (without taking received frames: the
    /// model's doorbell only fetches) until it is quiet: the WQEs it took then, and
    /// whether it stopped.
    fn sq_doorbell(&mut self, qpn: Qpn, pi: u32, now: u64, dma: &mut dyn Dma) -> SqRung {
        let index = qpn.value();
        if !self.sq_qps.contains(&index) {
            return SqRung::default();
        }
        self.now = now;
        self.write_now();
        self.fp.write_word(Table::Port, index, SQ_W_DB, pi);
        let start = self.fp.cycle();
        loop {
            let held = !self.port_room();
            if !self.fp.cfg_queued() && self.fp.quiet_for(QUIET) && self.fp.cycle() - start >= QUIET
            {
                break;
            }
            if self.fp.cycle() - start > RUN_LIMIT {
                self.record_fault("the WQE fetch did not settle");
                break;
            }
            self.fp.set_tx_hold(held);
            self.fp.tick(dma);
            self.collect();
        }
        self.settled = false;
        let c = self.take_counts(0, 2);
        let (taken, sends) = (c[0], c[1]);
        // A fetch the RTL could not make yet (its WQE read waits behind the segmenter's
        // payload reads, which wait for the port) goes on in later runs; a stop there
        // reaches the firmware through `sq_news`.
        let stopped = self
            .sq_state(index)
            .is_none_or(|(flags, _)| flags & SQ_STOPPED != 0);
        SqRung {
            taken,
            sends,
            stopped,
        }
    }

    fn sq_take_back(&mut self, qpn: Qpn) -> Option<SqBack> {
        let index = qpn.value();
        // (held still: a send context written with valid clear drops the queue)
        self.sq_state(index)?;
        self.fp
            .write_word(Table::Port, index, SQ_W_CMD, SQ_TAKE_BACK);
        self.sq_qps.remove(&index);
        // Read after the command, as the SoC's firmware does: the RTL keeps the state
        // the command left, the RNR wait too (`fp_sqf`'s `rnr_wt`). (The read lands the
        // write.)
        let flags = self.read_port_word(index, SQ_R_FLAGS);
        if flags & SQ_ACTIVE != 0 {
            self.record_fault("the WQE fetch kept a queue taken back");
        }
        let deadline = self.port_deadline(index, flags);
        let ci = self.read_port_word(index, SQ_R_CI);
        let done = self.read_port_word(index, SQ_R_DONE);
        let base = self.read_port_word(index, SQ_R_BASE);
        let una = self.read_port_word(index, SQ_R_UNA);
        // In an RNR wait the deadline is the wait's end, and no ACK timer runs.
        let wait = flags & SQ_RNR_WAIT != 0;
        Some(SqBack {
            done,
            ci,
            base: Psn::new(base),
            una: Psn::new(una),
            deadline: deadline.filter(|_| !wait),
            spent: SqSpent {
                retries: ((flags & SQ_SPENT) >> 3) as u8,
                rnr: ((flags & SQ_RNR_SPENT) >> 6) as u8,
                rnr_at: deadline.filter(|_| wait),
            },
        })
    }

    fn sq_deadline(&mut self, qpn: Qpn) -> Option<u64> {
        // (an RNR wait's end is the RTL's to act on: `sq_news` reports it, so that the
        // RTL runs then)
        let (flags, deadline) = self.sq_state(qpn.value())?;
        deadline.filter(|_| flags & SQ_RNR_WAIT == 0)
    }

    fn sq_stopped(&mut self, qpn: Qpn) -> bool {
        self.sq_state(qpn.value())
            .is_some_and(|(flags, _)| flags & SQ_STOPPED != 0)
    }

    fn sq_news(&mut self) -> SqNews {
        // (WQEs taken in a run are reported here, even of a queue taken back since)
        let mut c = [0u32; 6];
        if self.fetch_used {
            c.iter_mut()
                .zip(self.take_counts(0, 6))
                .for_each(|(c, d)| *c = d);
        }
        let [taken, sends, naks, retries, timeouts, rnr_naks] = c;
        // The news word as the SoC's firmware would read it (the CQEs it reports are
        // pulled into the mirrors at once, before the firmware writes any of its own).
        let stopped = self.fetch_news();
        self.pull_cqs();
        let qps: Vec<u32> = self.sq_qps.iter().copied().collect();
        let deadline = qps.into_iter().filter_map(|q| self.sq_state(q)?.1).min();
        self.deadline = deadline;
        SqNews {
            counters: Some(self.counters),
            cqe: std::mem::take(&mut self.news_cqe),
            cq_full: false,
            taken,
            sends,
            deadline,
            // (the firmware looks at every deadline, as before `SqNews::due`: without
            // its own clock the RTL neither says which queues have a retry left nor
            // stops those that have none)
            due: deadline,
            stopped,
            naks,
            retries,
            timeouts,
            rnr_naks,
        }
    }

    fn take_accessed(&mut self, word: usize) -> u32 {
        let Ok(index) = u32::try_from(word) else {
            return 0;
        };
        match self
            .fp
            .read_word_dma_held(Table::Port, index, ACCESSED_WORD)
        {
            Ok(bits) => bits,
            Err(e) => {
                self.record_fault(e);
                0
            }
        }
    }
}

/// The firmware's own frames go straight to the port (behind the fast path's frames
/// still waiting for it); received frames reach the firmware only as events.
impl<P: Datapath> Datapath for FpPort<P> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.tx_out.is_empty() && self.port.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.tx_out.is_empty() && self.port.can_transmit()
    }
    fn tx_blocked(&self) -> Priorities {
        if self.tx_out.is_empty() {
            self.port.tx_blocked()
        } else {
            Priorities::ALL
        }
    }
    fn receive(&mut self, _buf: &mut [u8]) -> Option<usize> {
        None
    }
    fn verifies_icrc(&self) -> bool {
        true
    }
    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        Some(self)
    }
}
