//! The RC fast path as a device (`docs/fastpath.md`): the software model standing in
//! for the hardware, in front of any datapath. It holds what the hardware holds (send
//! and receive context memories, the MR table, the TX descriptor ring, per-QP in-flight
//! lists, the ACK queue, the event ring and the RX frame buffers), takes everything the
//! firmware gives it as bytes (`roce_core::fastpath::layout`), and runs the model's rules
//! (`roce_core::fastpath`) on the frames it moves between the firmware and the port.
//!
//! It stands in for hardware: the instructions it spends are the model's, not the
//! firmware's (the QEMU self-test's budget lines leave them out, as they leave out the
//! DMA copies and the ICRC).

use crate::abi::{Cqe, SendWqe};
use crate::hal::{Datapath, FastPath, FastPathCounters};
use crate::runtime::FRAME_BUF;
use heapless::Deque;
use roce_core::dcb::Priorities;
use roce_core::fastpath::layout::{self, EventWords, MR_LEN, RCTX_LEN, SCTX_LEN, TXD_LEN};
use roce_core::fastpath::{
    self, AckDesc, Answered, AtomicResp, Event, Exception, Inflight, InflightKind, MrTable, MsgOp,
    PortAddr, ReadResp, RecvCqe, RxOutcome, SendCtx, SqIdle, SqSpent, TxError, TxMsg,
};
pub use roce_core::fastpath::{Pace, PaceWrite};
use roce_core::memory::Dma;
use roce_core::num::{Psn, Qpn};
use roce_core::transport::{ack_supersedes, WcFlags, WcOpcode, WcStatus, WorkCompletion};
use roce_core::wire;
use roce_core::wire::aeth::RnrTimer;
use zerocopy::{FromZeros, IntoBytes};

/// Descriptors the TX ring holds (all QPs).
const TXQ: usize = 32;
/// In-flight messages per QP (at least the firmware's send-queue depth).
const INFLIGHT: usize = 64;
/// ACK and READ response descriptors waiting for the wire.
const ACKQ: usize = 16;
/// Events waiting for the firmware.
const EVQ: usize = 16;
/// RX frame buffers for exceptions.
const SLOTS: usize = 4;
/// MR table entries.
const MRT: usize = 64;
/// CQs the CQE writer holds (CQ numbers 0..CQ_ENTRIES).
pub const CQ_ENTRIES: usize = 64;

/// One host CQ ring as the CQE writer holds it (`docs/fastpath.md` §3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqRing {
    /// The ring's host address and log2 of its entries.
    pub ring: u64,
    pub log_depth: u8,
    /// The next index written (the ring's one producer index).
    pub pi: u32,
    /// The host's consumer index as last seen: the room the writer counts on. It never
    /// runs ahead of the host's, so a stale one only leaves a CQE to the firmware.
    pub ci: u32,
}

/// The hardware's CQE writer: per CQ, where its ring is and its producer index. The
/// response path writes through it the CQEs of the signaled messages a response
/// retires; the firmware, for the CQs it handed over, reads and advances the same
/// producer index when it writes a CQE itself.
#[derive(Clone, Debug)]
pub struct CqWriter {
    cqs: [Option<CqRing>; CQ_ENTRIES],
}

impl Default for CqWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl CqWriter {
    /// Holding no CQ.
    pub const fn new() -> Self {
        Self {
            cqs: [None; CQ_ENTRIES],
        }
    }

    /// CQ `cq`'s ring, if the writer holds it.
    pub fn get(&self, cq: u16) -> Option<CqRing> {
        self.cqs.get(usize::from(cq)).copied().flatten()
    }

    /// Hands CQ `cq`'s ring to the writer (None: takes it back). False when `cq` is
    /// past the writer's table (the firmware keeps that CQ to itself).
    pub fn set(&mut self, cq: u16, ring: Option<CqRing>) -> bool {
        match self.cqs.get_mut(usize::from(cq)) {
            Some(s) => {
                *s = ring;
                true
            }
            None => false,
        }
    }

    /// Writes `wcs` (a response's retirements) into CQ `cq` if the ring has room for
    /// all of them by the consumer index the writer last saw; false (nothing written)
    /// otherwise. The firmware then writes them itself.
    fn write_all(&mut self, cq: u16, wcs: &[WorkCompletion], dma: &mut dyn Dma) -> bool {
        let Some(Some(r)) = self.cqs.get_mut(usize::from(cq)) else {
            return false;
        };
        let used = r.pi.wrapping_sub(r.ci);
        if used.saturating_add(wcs.len() as u32) > 1u32 << r.log_depth {
            return false;
        }
        for wc in wcs {
            let cqe = Cqe::from_wc(wc, r.pi, r.log_depth);
            let at = r.ring + u64::from(r.pi & ((1u32 << r.log_depth) - 1)) * 32;
            // A ring the host cannot take is the host's fault: the CQE is lost as the
            // firmware's own would be (its ring is registered memory).
            let _ = dma.write(at, cqe.as_bytes());
            r.pi = r.pi.wrapping_add(1);
        }
        true
    }
}

/// What a CQE the firmware posted through a CQE writer's port came to
/// (`FastPath::post_cqe`): written or not (no room by the consumer index it was given),
/// and the ring's producer index after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqePost {
    pub written: bool,
    pub pi: u32,
}

/// The completion of an in-flight message retired by a response, as the engine makes
/// it (`complete_front_send`).
fn send_wc(qpn: Qpn, wr_id: u64, op: MsgOp, byte_len: u32) -> WorkCompletion {
    let opcode = match op {
        MsgOp::Write | MsgOp::WriteWithImm(_) => WcOpcode::RdmaWrite,
        MsgOp::Read => WcOpcode::RdmaRead,
        MsgOp::CmpSwap { .. } => WcOpcode::CompSwap,
        MsgOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        _ => WcOpcode::Send,
    };
    let mut wc = WorkCompletion::new(wr_id, qpn, opcode, WcStatus::Success);
    wc.byte_len = byte_len;
    if let MsgOp::SendWithImm(imm) | MsgOp::WriteWithImm(imm) = op {
        wc.imm_data = imm;
        wc.wc_flags = WcFlags::WITH_IMM;
    }
    wc
}

/// The completion of a receive WQE a SEND the receive path placed whole filled, as the
/// engine makes it (`complete_recv` of a SEND: no immediate, no invalidation; the
/// fast path places no other SEND).
fn recv_wc(qpn: Qpn, wr_id: u64, byte_len: u32, solicited: bool) -> WorkCompletion {
    let mut wc = WorkCompletion::new(wr_id, qpn, WcOpcode::Recv, WcStatus::Success);
    wc.byte_len = byte_len;
    wc.solicited = solicited;
    wc
}

/// A host send ring the hardware's WQE fetch reads (§3.8): its address, log2 of its
/// entries, and the next index to fetch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqRing {
    pub ring: u64,
    pub log: u8,
    pub ci: u32,
}

/// What a send doorbell did: the WQEs the hardware took, and whether it stopped at one
/// it does not take (the firmware then takes the send queue back and fetches it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqRung {
    pub taken: u32,
    /// Of them SENDs (the engine's `rdma_sends` counts them).
    pub sends: u32,
    pub stopped: bool,
}

/// What the hardware still holds of a send queue it gives back: the WQEs from ring
/// index `done` (the oldest not finished, first PSN `base`) up to `ci` (the next it
/// would have fetched), every PSN before `una` acknowledged, and its local ACK
/// deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqBack {
    pub done: u32,
    pub ci: u32,
    pub base: Psn,
    pub una: Psn,
    pub deadline: Option<u64>,
    /// The Go-Back-N retries it made at NAK sequence errors and timeouts and the RNR
    /// NAKs it waited out since its last progress, and its RNR wait under way (the
    /// engine's budgets and RNR timer from here).
    pub spent: SqSpent,
}

/// What the fast path did since the firmware last asked (`FastPath::sq_news`): its
/// counters (one read for both), and what its WQE fetch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqNews {
    /// (None from a fast path that runs by itself, `FastPath::runs_by_itself`: its
    /// counters are read when the host asks. The SoC's `sq_news` cleared them, 48
    /// bytes, at every news.)
    pub counters: Option<FastPathCounters>,
    /// It wrote CQEs.
    pub cqe: bool,
    /// A ring its CQE writer holds is half full or more by the consumer index the
    /// writer last got (`CqRing::ci`): the firmware gives it the host's current ones, or
    /// the writer would soon refuse CQEs the host has room for.
    pub cq_full: bool,
    /// WQEs it took after their doorbell (when the TX ring or the in-flight list had
    /// room again), and of them SENDs.
    pub taken: u32,
    pub sends: u32,
    /// Its earliest local ACK deadline or RNR wait's end (ns): it runs then
    /// (`poll_timeout`).
    pub deadline: Option<u64>,
    /// The earliest local ACK deadline it leaves to the firmware (ns): of a queue with
    /// no retry left (or that it does not take at the timeout for another reason),
    /// which the firmware takes back then and whose WQE the engine fails. A timeout
    /// with a retry left is the hardware's own Go-Back-N (§3.8): the firmware looks at
    /// no queue for it (it looked at every queue it fetches, at every deadline, ~250
    /// instructions in the QEMU self-test, and found nothing). A hardware that cannot
    /// tell says `deadline` here; one that stops such a queue itself (the SoC's fetch
    /// with its own clock) says none.
    pub due: Option<u64>,
    /// Its Go-Back-N (§3.8) since the last call: the NAK sequence errors it took (those
    /// it dropped too), the retries it started (at a NAK or at the local ACK timeout)
    /// and of those the ones at the timeout, and the RNR NAKs it took. The engine counts
    /// them as its own (`rcvd_seq_err`, `completer_retry_err`, `local_ack_timeout_err`,
    /// `rcvd_rnr_err`): it never saw these NAKs and timeouts.
    pub naks: u32,
    pub retries: u32,
    pub timeouts: u32,
    pub rnr_naks: u32,
    /// A send queue it holds stopped at a WQE it does not take (`FastPath::sq_stopped`
    /// says which): the firmware takes it back and fetches from there. A fetch runs by
    /// itself after its doorbell (the RTL's waits behind the segmenter's payload reads
    /// on their shared DMA read port, the model's for room in the TX ring or the
    /// in-flight list), so a stop can come after the doorbell said none.
    pub stopped: bool,
}

/// One send queue in the hardware's hands (§3.8).
#[derive(Clone, Copy, Debug)]
struct SqHw {
    ring: SqRing,
    /// The host's producer index at the last doorbell.
    pi: u32,
    /// The oldest WQE not finished, and its first PSN.
    done: u32,
    base: Psn,
    /// Every PSN before it acknowledged.
    una: Psn,
    /// The next WQE's first PSN.
    next: Psn,
    idle: SqIdle,
    deadline: Option<u64>,
    /// It met a WQE it does not take: it fetches nothing more until taken back.
    stopped: bool,
    /// The Go-Back-N retries it made at NAKs since its last progress.
    spent: u8,
    /// The RNR NAKs it waited out since its last progress (none counted when the QP's
    /// `rnr_retry` is 7: it waits for ever).
    rnr_spent: u8,
    /// The end of an RNR wait under way (ns): nothing is sent and no local ACK timer
    /// runs until then; then the WQEs from the acknowledged PSN are sent again.
    rnr_at: Option<u64>,
    /// The replay of a Go-Back-N under way: the ring index of the next WQE to send
    /// again (re-read from the host ring) and the packet it starts at.
    replay: Option<(u32, u32)>,
}

/// An entry of the response queue (the ACK queue of §2.3 with READ responses, §2.4):
/// in the order the receive path took the requests, as the engine's responder sends
/// them (its ACKs never overtake a READ's responses).
#[derive(Clone, Copy, Debug)]
enum Resp {
    Ack(AckDesc),
    Read(ReadResp),
    /// An atomic's ATOMIC ACKNOWLEDGE: ordered as a READ's responses are (the engine
    /// queues both as responder items, behind which its ACKs wait).
    Atomic(AtomicResp),
}

/// Whether a READ's responses or an ATOMIC ACKNOWLEDGE wait in the response queue: what
/// the engine's responder would still have queued (its `out`), ahead of any ACK it
/// owes later and of anything it sends for a later exception.
fn responses_wait(ackq: &Deque<Resp, ACKQ>) -> bool {
    ackq.iter().any(|r| !matches!(r, Resp::Ack(_)))
}

/// Whether a response waits that an exception of `qpn` must not overtake: any QP's
/// READ response or ATOMIC ACKNOWLEDGE, except a paced QP's (§2.5) for another QP's
/// exception. Those leave at their pacer's instants, microseconds apart, and holding
/// every other QP's exceptions behind them made the firmware, and so the engine, take
/// those frames late (the engine alone takes them as they come); what the firmware
/// sends for another QP cannot overtake them in their own QP's order anyway. Without
/// pacing the queue drains at once, and the rule is the RTL's (any QP's READ holds any
/// QP's exception).
///
/// `own`: `qpn`'s own responses count too; else only other QPs'.
fn responses_wait_for<const QPS: usize>(
    ackq: &Deque<Resp, ACKQ>,
    qps: &[QpMem; QPS],
    qpn: Qpn,
    own: bool,
) -> bool {
    let slot = |q: Qpn| q.value() as usize % QPS.max(1);
    ackq.iter().any(|r| match r {
        Resp::Ack(_) => false,
        r => {
            let of = resp_qpn(r);
            if of == qpn {
                own
            } else {
                qps.get(slot(of)).is_none_or(|q| q.pace.is_none())
            }
        }
    })
}

/// The READ responses (a READ until its last is sent) and ATOMIC ACKNOWLEDGEs of `qpn`
/// waiting: what the engine's responder counts against `max_dest_rd_atomic` (§3.4,
/// "The responder's resources").
fn own_responses(ackq: &Deque<Resp, ACKQ>, qpn: Qpn) -> usize {
    ackq.iter()
        .filter(|r| !matches!(r, Resp::Ack(_)) && resp_qpn(r) == qpn)
        .count()
}

/// One QP's memories.
#[derive(Clone, Debug)]
struct QpMem {
    sctx: [u8; SCTX_LEN],
    rctx: [u8; RCTX_LEN],
    inflight: Deque<Inflight, INFLIGHT>,
    /// Next packet of the QP's oldest queued descriptor, once started.
    next_pkt: Option<u32>,
    /// The CQ the CQE writer writes the QP's send completions into.
    send_cq: Option<u16>,
    /// What the CQE writer writes the CQE of the receive buffer loaded with `recv_cqe`
    /// from (§3.7, "Receive CQEs").
    recv_cqe: Option<RecvCqe>,
    /// A frame hit this entry since the firmware last took the bit
    /// (`FastPath::take_accessed`).
    accessed: bool,
    /// Its send queue, when the hardware fetches the WQEs (§3.8).
    sq: Option<SqHw>,
    /// Its pacing entry (§2.5), for a QP with DCQCN's reaction point on.
    pace: Option<Pace>,
    /// A `CNP` or `BYTES` event of the QP waits for the firmware's write of the entry:
    /// its data waits meanwhile.
    pace_wait: bool,
    /// The firmware's engine has data frames of the QP queued (a duplicate READ's
    /// responses): the QP's own wait (the engine sends a QP's responses before its
    /// requests, and so must the QP's one pacer).
    fw_hold: bool,
    /// The PSN after the last request packet the segmenter sent, or where a rewind
    /// (a FLUSH, the WQE fetch's Go-Back-N) put it since: the engine's requester's
    /// `psn`, which says what is outstanding. `None`: the context's `next_psn` (no
    /// rewind since the firmware wrote it), which a rewind leaves where it was.
    cursor: Option<Psn>,
}

impl Default for QpMem {
    fn default() -> Self {
        Self {
            sctx: [0; SCTX_LEN],
            rctx: [0; RCTX_LEN],
            inflight: Deque::new(),
            next_pkt: None,
            send_cq: None,
            recv_cqe: None,
            accessed: false,
            sq: None,
            pace: None,
            pace_wait: false,
            fw_hold: false,
            cursor: None,
        }
    }
}

impl QpMem {
    /// Whether a data packet of the QP may leave at `now` (§2.5); if it may not, the
    /// pacer's time is folded into `wake` (none while it waits for the firmware).
    fn pace_ready(&self, now: u64, wake: &mut Option<u64>) -> bool {
        let Some(p) = &self.pace else {
            return true;
        };
        let wait = self.pace_wait || self.fw_hold;
        if !wait && p.ready(now) {
            return true;
        }
        if let Some(t) = p.wakes_at(now).filter(|_| !wait) {
            *wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        false
    }

    /// A data frame of `len` bytes of the QP left at `now`: paced; true when its byte
    /// counter reached the threshold (the QP now waits for the firmware).
    fn paced(&mut self, now: u64, len: usize) -> bool {
        let hit = self.pace.as_mut().is_some_and(|p| p.on_sent(now, len));
        self.pace_wait |= hit;
        hit
    }

    /// Where the segmenter's sends stand (`cursor`).
    fn sent_to(&self) -> Option<Psn> {
        self.cursor
            .or_else(|| layout::decode_sctx(&self.sctx).ok().map(|c| c.next_psn))
    }

    /// A new `una_psn`: the in-flight messages that end before it are acknowledged.
    fn retire_before(&mut self, una: Psn) {
        while self
            .inflight
            .front()
            .is_some_and(|m| m.last_psn.before(una))
        {
            self.inflight.pop_front();
        }
    }
}

/// The fast path in front of the datapath `P`, with context memories for `QPS` QPs
/// (entry `qpn % QPS`).
pub struct FastPathPort<P, const QPS: usize> {
    /// The port the frames come from and go to.
    pub inner: P,
    port: PortAddr,
    qps: [QpMem; QPS],
    mrt: MrTable<MRT>,
    txq: Deque<TxMsg, TXQ>,
    ackq: Deque<Resp, ACKQ>,
    events: Deque<Event, EVQ>,
    slots: [[u8; FRAME_BUF]; SLOTS],
    slot_len: [usize; SLOTS],
    slot_used: [bool; SLOTS],
    /// A frame (its slot and length) that raised an exception while READ responses
    /// waited: taken again once they went out (`run_rx`).
    held: Option<(usize, usize)>,
    /// Round-robin position of the TX scheduler.
    rr: usize,
    /// The fast path is switched off: frames pass between the firmware and the port
    /// untouched (a hardware enable bit; the firmware then handles every packet).
    pub bypass: bool,
    counters: FastPathCounters,
    /// The context cache's hits and misses (`FastPath::ctx_hits_misses`).
    ctx: [u64; 2],
    /// Requests the PSN rule answered: out of sequence, duplicate SEND/WRITEs.
    answered: [u64; 2],
    cqw: CqWriter,
    /// The time the firmware last ran the model at (ns), for the WQE fetch's timers.
    now: u64,
    /// What `sq_news` reports next.
    news: SqNews,
    /// When the pacer (§2.5) next lets a data packet go that it held in the last run.
    pace_at: Option<u64>,
    buf: [u8; FRAME_BUF],
}

impl<P: Datapath, const QPS: usize> FastPathPort<P, QPS> {
    /// A fast path with every context off in front of `inner`.
    pub fn new(inner: P) -> Self {
        Self {
            inner,
            port: PortAddr {
                mac: [0; 6],
                gid: [0; 16],
            },
            qps: core::array::from_fn(|_| QpMem::default()),
            mrt: MrTable::default(),
            txq: Deque::new(),
            ackq: Deque::new(),
            events: Deque::new(),
            slots: [[0; FRAME_BUF]; SLOTS],
            slot_len: [0; SLOTS],
            slot_used: [false; SLOTS],
            held: None,
            rr: 0,
            bypass: false,
            counters: FastPathCounters::default(),
            ctx: [0; 2],
            answered: [0; 2],
            cqw: CqWriter::default(),
            now: 0,
            news: SqNews::default(),
            pace_at: None,
            buf: [0; FRAME_BUF],
        }
    }

    /// Whether the frame held in RX slot `slot` (`n` bytes) still waits for the
    /// responses queued before it (`responses_wait_for`).
    fn held_waits(&self, slot: usize, n: usize) -> bool {
        let frame = self.slots.get(slot).and_then(|b| b.get(..n)).unwrap_or(&[]);
        match wire::parse(frame) {
            Ok(pkt) => responses_wait_for(&self.ackq, &self.qps, pkt.dest_qp(), true),
            Err(_) => responses_wait(&self.ackq),
        }
    }

    fn slot_of(qpn: Qpn) -> usize {
        qpn.value() as usize % QPS.max(1)
    }

    fn qp(&mut self, qpn: Qpn) -> Option<&mut QpMem> {
        self.qps.get_mut(Self::slot_of(qpn))
    }

    /// Receives frames while there is room for what they may raise. While READ
    /// responses wait in the response queue, frames are taken as the engine's responder
    /// takes them (a later READ queues behind, a NAK or ACK too; a duplicate READ drops
    /// the QP's queued responses after its PSN, `drop_reads_after`), but one that raises
    /// an exception is held while any wait: what the firmware sends for it must not
    /// overtake them, as nothing the engine queues for it does.
    fn run_rx(&mut self, dma: &mut dyn Dma) -> bool {
        let mut any = false;
        while self.events.len() + 1 < EVQ && !self.ackq.is_full() {
            let (slot, n) = match self.held {
                Some((h, n)) if self.held_waits(h, n) => break,
                Some(h) => {
                    self.held = None;
                    h
                }
                None => {
                    let Some(slot) = self.slot_used.iter().position(|u| !u) else {
                        break;
                    };
                    let Some(buf) = self.slots.get_mut(slot) else {
                        break;
                    };
                    let Some(n) = self.inner.receive(buf) else {
                        break;
                    };
                    (slot, n)
                }
            };
            let Some(buf) = self.slots.get(slot) else {
                break;
            };
            any = true;
            let frame = buf.get(..n).unwrap_or(&[]);
            // The hardware parser: a frame it refuses is dropped and counted.
            let Ok(pkt) = wire::parse(frame) else {
                self.counters.rx_dropped += 1;
                continue;
            };
            let qpn = pkt.dest_qp();
            // (Other QPs' responses that hold the frame: this frame's decision drops
            // none of them.)
            let others_wait = responses_wait_for(&self.ackq, &self.qps, qpn, false);
            let own = own_responses(&self.ackq, qpn);
            let reads_wait = others_wait || own > 0;
            let s = Self::slot_of(qpn);
            if let Some(q) = self
                .qps
                .get_mut(s)
                .filter(|q| cnp_taken(&self.port, q, qpn, &pkt))
            {
                // A CNP for a paced QP from its peer (§2.5): the firmware's engine cuts
                // the rate and writes it into the entry; the QP's data waits for that.
                q.pace_wait = true;
                q.accessed = true;
                self.ctx[0] += 1;
                self.counters.rx_handled += 1;
                let _ = self.events.push_back(Event::Cnp { qpn });
                continue;
            }
            let ctx_counts = self.ctx;
            let out = match self.qps.get_mut(Self::slot_of(qpn)) {
                Some(q) => {
                    // Taken back as it was if the frame is held (`run_rx`).
                    let before = reads_wait.then(|| q.clone());
                    // As the RTL counts: a hit when the entry is the QP's and on.
                    if layout::rctx_tag(&q.rctx) != qpn {
                        self.ctx[1] += 1;
                    } else if q.rctx[0] == 1 {
                        self.ctx[0] += 1;
                        q.accessed = true;
                    }
                    // What a response would retire, before the rule pops it.
                    let cqes = retiring_cqes(q, qpn, &pkt);
                    // A response changes no receive state but `held`, which an
                    // exception sets: a NAK the hardware takes itself leaves it as it was.
                    let rctx = q.rctx;
                    let mut out = dispatch(&self.port, q, qpn, &pkt, &self.mrt, dma, own);
                    let mut none_owed = false;
                    if let (Some(Event::Acked { done, cqe, .. }), Some((n, wcs))) =
                        (&mut out.event, cqes)
                    {
                        let all = usize::from(*done) == n;
                        *cqe = all
                            && q.send_cq
                                .is_some_and(|cq| self.cqw.write_all(cq, &wcs, dma));
                        none_owed = all && wcs.is_empty();
                    }
                    // A SEND into a buffer loaded with its WQE's `wr_id`: its CQE, when
                    // the receive CQ has room (else the firmware writes it).
                    if let Some(Event::MsgDone {
                        cqe: c @ true,
                        byte_len,
                        solicited,
                        ..
                    }) = &mut out.event
                    {
                        let wc = q
                            .recv_cqe
                            .map(|r| (r.cq, recv_wc(qpn, r.wr_id, *byte_len, *solicited)));
                        *c = wc.is_some_and(|(cq, wc)| self.cqw.write_all(cq, &[wc], dma));
                    }
                    let nak = sq_nak(q, &pkt, &out.event, &mut self.cqw, dma, self.now);
                    if matches!(nak, NakTaken::Rewound | NakTaken::Rnr) {
                        // The hardware's Go-Back-N: its FLUSH; the replays follow (after
                        // an RNR NAK once its wait is over, `sq_timeouts`).
                        let s = Self::slot_of(qpn);
                        retain(&mut self.txq, |d| Self::slot_of(d.qpn) != s);
                    }
                    match nak {
                        NakTaken::Rewound => self.news.retries += 1,
                        NakTaken::Rnr => self.news.rnr_naks += 1,
                        _ => {}
                    }
                    match nak {
                        NakTaken::No => {
                            if sq_retire(q, &out.event, none_owed, self.now) {
                                // The WQE fetch's own: the firmware never hears of it.
                                self.news.cqe |=
                                    matches!(out.event, Some(Event::Acked { cqe: true, .. }));
                                out.event = None;
                            }
                        }
                        NakTaken::Passed(ev) => {
                            // Counted by the engine, which takes the NAK.
                            q.rctx = rctx;
                            out.event = Some(ev);
                        }
                        NakTaken::Dropped | NakTaken::Rewound => {
                            self.news.naks += 1;
                            q.rctx = rctx;
                            out.event = None;
                        }
                        NakTaken::Rnr => {
                            q.rctx = rctx;
                            out.event = None;
                        }
                    }
                    if matches!(
                        out.event,
                        Some(Event::Exception {
                            reason: Exception::Opcode,
                            ..
                        })
                    ) {
                        drop_reads_after(&mut self.ackq, &rctx, &pkt);
                    }
                    let reads_left = others_wait || own_responses(&self.ackq, qpn) > 0;
                    if let (Some(Event::Exception { .. }), Some(b), true) =
                        (&out.event, before, reads_left)
                    {
                        *q = b;
                        self.ctx = ctx_counts;
                        self.held = Some((slot, n));
                        break;
                    }
                    out
                }
                None if reads_wait => {
                    self.held = Some((slot, n));
                    break;
                }
                None => RxOutcome::exception(qpn, &pkt, Exception::Off),
            };
            if let Some(ack) = out.ack {
                push_ack(&mut self.ackq, ack);
            }
            if let Some(read) = out.read {
                let _ = self.ackq.push_back(Resp::Read(read));
            }
            if let Some(a) = out.atomic {
                let _ = self.ackq.push_back(Resp::Atomic(a));
            }
            match out.answered {
                Some(Answered::OutOfSequence) => self.answered[0] += 1,
                Some(Answered::Duplicate) => self.answered[1] += 1,
                None => {}
            }
            let Some(mut ev) = out.event else {
                self.counters.rx_handled += 1;
                continue;
            };
            if let Event::Exception { slot: s, .. } = &mut ev {
                *s = slot as u16;
                if let (Some(u), Some(l)) =
                    (self.slot_used.get_mut(slot), self.slot_len.get_mut(slot))
                {
                    (*u, *l) = (true, n);
                }
                self.counters.rx_exceptions += 1;
            } else {
                self.counters.rx_handled += 1;
            }
            let _ = self.events.push_back(ev);
        }
        any
    }

    /// Sends ACKs, then one request packet per QP in turn, while the port takes frames.
    fn run_tx(&mut self, dma: &mut dyn Dma) -> bool {
        let mut any = false;
        let pace_before = self.pace_at.take();
        // The model builds a frame before it knows its priority: it sends only while
        // the port has room for every priority, so that no frame is refused and lost.
        while self.inner.tx_blocked().is_empty() {
            let room = self.events.len() + 1 < EVQ;
            if let Some(i) = next_resp(&self.ackq, &self.qps, self.now, room, &mut self.pace_at) {
                let Some(resp) = self.ackq.iter().nth(i).copied() else {
                    break;
                };
                let qpn = resp_qpn(&resp);
                let sctx = self.qp(qpn).map(|q| q.sctx).unwrap_or([0; SCTX_LEN]);
                let Ok(ctx) = layout::decode_sctx(&sctx) else {
                    remove_at(&mut self.ackq, i);
                    continue;
                };
                let built = match resp {
                    Resp::Ack(ack) => fastpath::ack_frame(&ctx, &ack, &mut self.buf),
                    Resp::Atomic(a) => fastpath::atomic_ack_frame(&ctx, &a, &mut self.buf),
                    Resp::Read(mut r) => {
                        let b =
                            fastpath::read_response(&ctx, &mut r, &self.mrt, dma, &mut self.buf);
                        // A region that lost its rights: the rest of the READ is dropped.
                        if !r.done() && b != Err(TxError::Access) {
                            // The rest of the READ stays in its place.
                            if let Some(e) = self.ackq.iter_mut().nth(i) {
                                *e = Resp::Read(r);
                            }
                        } else {
                            remove_at(&mut self.ackq, i);
                        }
                        if b == Err(TxError::Dma) {
                            // Aborted on the wire, as a request packet whose payload
                            // the host could not read: the requester's retry repairs it.
                            self.counters.tx_dma_errors += 1;
                        }
                        b
                    }
                };
                if !matches!(resp, Resp::Read(_)) {
                    remove_at(&mut self.ackq, i);
                }
                if let Ok(n) = built {
                    // A READ response and an ATOMIC ACKNOWLEDGE are data the pacer
                    // spaces (the engine's responder items), an ACK is not.
                    if !matches!(resp, Resp::Ack(_)) {
                        self.pace_sent(qpn, n);
                    }
                    self.send(n);
                    any = true;
                }
                continue;
            }
            if !self.tx_one_round(dma) {
                break;
            }
            any = true;
        }
        // A pacer's new wake-up is news for the firmware's `poll_timeout`.
        any || self.pace_at != pace_before
    }

    /// A data frame of `n` bytes of `qpn` left: its pacing entry advances, and a byte
    /// counter at its threshold raises the `BYTES` event (§2.5).
    fn pace_sent(&mut self, qpn: Qpn, n: usize) {
        let now = self.now;
        let Some(q) = self.qp(qpn) else {
            return;
        };
        if q.paced(now, n) {
            let bytes = q.pace.map_or(0, |p| p.bytes);
            let _ = self.events.push_back(Event::ByteCounter { qpn, bytes });
        }
    }

    fn send(&mut self, n: usize) {
        if self.inner.transmit(self.buf.get(..n).unwrap_or(&[])) {
            self.counters.tx_frames += 1;
        }
    }

    /// One packet from the next QP (round robin) that has one the window allows.
    fn tx_one_round(&mut self, dma: &mut dyn Dma) -> bool {
        for k in 0..QPS {
            let s = (self.rr + k) % QPS.max(1);
            if self.tx_qp(s, dma) {
                self.rr = (s + 1) % QPS.max(1);
                return true;
            }
        }
        false
    }

    /// Sends the next packet of QP slot `s`'s oldest descriptor, if it may go.
    fn tx_qp(&mut self, s: usize, dma: &mut dyn Dma) -> bool {
        loop {
            let Some(i) = self.txq.iter().position(|m| Self::slot_of(m.qpn) == s) else {
                return false;
            };
            let Some(q) = self.qps.get_mut(s) else {
                return false;
            };
            let Some(m) = self.txq.iter().nth(i) else {
                return false;
            };
            let Ok(mut ctx) = layout::decode_sctx(&q.sctx) else {
                return false;
            };
            let (start, end) = m.range(ctx.mtu);
            let k = q.next_pkt.unwrap_or(start);
            if k >= end || !ctx.valid {
                q.next_pkt = None;
                remove_at(&mut self.txq, i);
                continue;
            }
            // A replayed packet acknowledged while it waited is not sent again.
            if m.replay && m.psn_of(k).before(ctx.una_psn) {
                q.next_pkt = Some(k + 1);
                continue;
            }
            // A resend: the context went past this PSN before (the firmware rewound
            // and replays). Only the segmenter knows: the firmware handed out whole
            // messages, and a FLUSH drops their packets not sent yet.
            let resend = u64::from(m.psn_of(k).before(ctx.next_psn));
            // The pacer (§2.5) holds a packet the window would let go (every request
            // packet is data the engine's pacer spaces); it needs room for the event
            // its byte counter may raise.
            let room = self.events.len() + 1 < EVQ;
            if q.pace.is_some()
                && fastpath::window_open(&ctx, m.psn_of(k))
                && !(room && q.pace_ready(self.now, &mut self.pace_at))
            {
                return false;
            }
            let qpn = m.qpn;
            // The cursor after this packet: a READ request spends its responses' PSNs.
            let after = if matches!(m.op, MsgOp::Read) {
                m.last_psn(ctx.mtu).next()
            } else {
                m.psn_of(k).next()
            };
            match fastpath::segment(&mut ctx, m, k, dma, &mut self.buf) {
                Ok(n) => {
                    q.next_pkt = Some(k + 1);
                    q.sctx = layout::encode_sctx(&ctx);
                    q.cursor = Some(after);
                    let paced = q.pace.is_some();
                    if let Some(sq) = q.sq.as_mut().filter(|sq| paced && sq.deadline.is_none()) {
                        // A paced queue's local ACK timer starts with a request packet
                        // sent while none runs (the engine's requester as it commits a
                        // packet; its pacer may hold one long after the fetch). An
                        // unpaced queue's starts at the fetch (`sq_fetch`), as `fp_sqf`'s.
                        sq.deadline = sq.idle.rto.map(|t| self.now.saturating_add(t));
                    }
                    self.counters.tx_resent += resend;
                    self.pace_sent(qpn, n);
                    self.send(n);
                    return true;
                }
                Err(TxError::WindowFull) => return false,
                // A payload the host could not read: the packet is aborted on the wire
                // (its PSN spent, the context advanced) and the firmware's
                // retransmission repairs it, as on the hardware. Counted as resent
                // when it was one, as the RTL counts when it plans the packet.
                Err(TxError::Dma) => {
                    q.next_pkt = Some(k + 1);
                    q.sctx = layout::encode_sctx(&ctx);
                    q.cursor = Some(after);
                    self.counters.tx_dma_errors += 1;
                    self.counters.tx_resent += resend;
                    return true;
                }
                // A frame that cannot be built is dropped like a lost one; the
                // firmware's retransmission repairs it.
                Err(_) => {
                    q.next_pkt = Some(k + 1);
                    continue;
                }
            }
        }
    }

    /// The local ACK timeouts of the send queues in the hardware's hands (§3.8): a queue
    /// whose deadline passed, with something outstanding and a retry left, goes back to
    /// its acknowledged PSN as the engine's timer would make it (`retry` with
    /// `timeout`); one with no retry left is the firmware's (it takes the queue back at
    /// the deadline and the engine fails the WQE).
    fn sq_timeouts(&mut self) -> bool {
        let now = self.now;
        let mut any = false;
        for s in 0..QPS {
            let Some(q) = self.qps.get_mut(s) else {
                continue;
            };
            let (Some(mut sq), Ok(ctx)) = (q.sq, layout::decode_sctx(&q.sctx)) else {
                continue;
            };
            if sq.rnr_at.is_some_and(|d| d <= now) {
                // The RNR wait is over: Go-Back-N from the RNR NAK's PSN, the
                // acknowledged one (the engine's `handle_timeout`), no retry spent. The
                // local ACK timer starts as the engine starts it when it hands the
                // replay out.
                sq.rnr_at = None;
                let first = q.inflight.front().map(|m| m.first_psn);
                sq.replay = first.map(|f| (sq.done, sq.una.diff(f).max(0) as u32));
                // (A paced QP's starts with the replay's first packet: `go_back`.)
                sq.deadline = first
                    .and(sq.idle.rto)
                    .filter(|_| q.pace.is_none())
                    .map(|t| now.saturating_add(t));
                q.sq = Some(sq);
                any = true;
                continue;
            }
            let due = sq.deadline.is_some_and(|d| d <= now);
            if !due || !retries_at_timeout(q, &sq) {
                continue;
            }
            let Some(first) = q.inflight.front().map(|m| m.first_psn) else {
                continue;
            };
            go_back(q, sq, ctx, first, now);
            retain(&mut self.txq, |d| Self::slot_of(d.qpn) != s);
            self.news.retries += 1;
            self.news.timeouts += 1;
            any = true;
        }
        any
    }

    /// Fetches what every send queue in the hardware's hands has waiting (after a
    /// doorbell the TX ring or the in-flight list had no room for).
    fn sq_fetch_all(&mut self, dma: &mut dyn Dma) -> bool {
        let mut any = false;
        for s in 0..QPS {
            let waiting = self
                .qps
                .get(s)
                .and_then(|q| q.sq)
                .is_some_and(|sq| !sq.stopped && (sq.ring.ci != sq.pi || sq.replay.is_some()));
            if waiting {
                let (taken, sends) = self.sq_fetch(s, dma);
                self.news.taken += taken;
                self.news.sends += sends;
                // A stop is news too: the firmware must take the queue back.
                any |= taken > 0 || self.sq_stopped_at(s);
            }
        }
        any
    }

    /// QP slot `s`'s send queue is in the hardware's hands and stopped.
    fn sq_stopped_at(&self, s: usize) -> bool {
        self.qps
            .get(s)
            .and_then(|q| q.sq)
            .is_some_and(|sq| sq.stopped)
    }

    /// The WQE fetch of QP slot `s` (§3.8): reads the host ring from its index up to the
    /// producer index and queues a descriptor for each WQE it takes, while the TX ring,
    /// the in-flight list and the engine's send-queue depth have room, and at a READ or
    /// atomic while the QP's `max_rd_atomic` credits are all held. Returns how many it
    /// took, and of them SENDs; it stops for good (until taken back) at one it does not
    /// take.
    fn sq_fetch(&mut self, s: usize, dma: &mut dyn Dma) -> (u32, u32) {
        let (mut taken, mut sends) = (0, 0);
        loop {
            let room = !self.txq.is_full();
            let Some(q) = self.qps.get_mut(s) else {
                return (taken, sends);
            };
            let (Some(mut sq), Ok(ctx)) = (q.sq, layout::decode_sctx(&q.sctx)) else {
                return (taken, sends);
            };
            if sq.rnr_at.is_some() {
                // An RNR wait sends nothing, new WQEs neither (the engine's
                // `req_may_select`): they are fetched when it is over.
                return (taken, sends);
            }
            if let Some((index, k)) = sq.replay {
                if sq.stopped || !room {
                    return (taken, sends);
                }
                if index == sq.ring.ci {
                    sq.replay = None;
                    q.sq = Some(sq);
                    continue;
                }
                // The WQE is read again, as the engine replays its own copy: a
                // descriptor of it from packet `k`, marked REPLAY (it is in the
                // in-flight list already).
                let first = q
                    .inflight
                    .iter()
                    .nth(index.wrapping_sub(sq.done) as usize)
                    .map(|m| m.first_psn);
                let qpn = layout::rctx_tag(&q.rctx);
                let mask = (1u32 << sq.ring.log) - 1;
                let at = sq
                    .ring
                    .ring
                    .wrapping_add(u64::from(index & mask) * core::mem::size_of::<SendWqe>() as u64);
                let mut wqe = SendWqe::new_zeroed();
                let msg = first
                    .filter(|_| dma.read(at, wqe.as_mut_bytes()).is_ok())
                    .and_then(|first| {
                        let wr = wqe.to_wr(false, at).ok()?;
                        fastpath::wqe_msg(qpn, index, &wr, first, &sq.idle, &self.mrt)
                    });
                let Some((mut m, _)) = msg else {
                    // Not reached while the host leaves its ring alone; the firmware
                    // takes the queue back and the engine replays.
                    sq.stopped = true;
                    q.sq = Some(sq);
                    return (taken, sends);
                };
                m.replay = true;
                m.start_pkt = k;
                sq.replay = Some((index.wrapping_add(1), 0));
                q.sq = Some(sq);
                if !self.accept(m, None) {
                    return (taken, sends);
                }
                continue;
            }
            let held = sq.ring.ci.wrapping_sub(sq.done);
            if sq.stopped
                || sq.ring.ci == sq.pi
                || !room
                || q.inflight.is_full()
                || held >= sq.idle.depth
            {
                return (taken, sends);
            }
            let qpn = layout::rctx_tag(&q.rctx);
            let log = sq.ring.log;
            // A producer index claiming more than the ring holds is the firmware's to
            // judge (a bad doorbell), as is any WQE taken apart below.
            let fits = sq.pi.wrapping_sub(sq.ring.ci) <= 1u32 << log;
            let mask = (1u32 << log) - 1;
            let at = sq.ring.ring.wrapping_add(
                u64::from(sq.ring.ci & mask) * core::mem::size_of::<SendWqe>() as u64,
            );
            let mut wqe = SendWqe::new_zeroed();
            let msg = (fits && dma.read(at, wqe.as_mut_bytes()).is_ok())
                .then(|| wqe.to_wr(false, at).ok())
                .flatten()
                .and_then(|wr| {
                    fastpath::wqe_msg(qpn, sq.ring.ci, &wr, sq.next, &sq.idle, &self.mrt)
                });
            let Some((m, cqe)) = msg else {
                sq.stopped = true;
                q.sq = Some(sq);
                return (taken, sends);
            };
            // A READ or atomic waits while the QP's initiator credits are all held (the
            // engine's `req_select`): by the READs and atomics in flight, which give
            // theirs back as their last response retires them. Read again then.
            let credits = q.inflight.iter().filter(|m| m.kind != InflightKind::Msg);
            if m.op.is_read_or_atomic() && credits.count() >= usize::from(sq.idle.max_rd_atomic) {
                return (taken, sends);
            }
            // A paced queue's local ACK timer starts when the message's first packet
            // leaves (`tx_qp`), as the engine alone starts it when it sends a request
            // packet with none running: a paced packet leaves later than its WQE is
            // fetched. An unpaced one's starts here, as the RTL's fetch (`fp_sqf`)
            // starts it: its packets leave within the same run.
            if sq.deadline.is_none() && q.pace.is_none() {
                sq.deadline = sq.idle.rto.map(|t| self.now.saturating_add(t));
            }
            sq.next = m.last_psn(ctx.mtu).next();
            sq.ring.ci = sq.ring.ci.wrapping_add(1);
            q.sq = Some(sq);
            let send = matches!(m.op, MsgOp::Send | MsgOp::SendWithImm(_));
            if !self.accept(m, cqe) {
                // Room was checked above: not reached.
                if let Some(sq) = self.qps.get_mut(s).and_then(|q| q.sq.as_mut()) {
                    sq.stopped = true;
                }
                return (taken, sends);
            }
            taken += 1;
            sends += u32::from(send);
        }
    }

    /// Takes a descriptor into the ring: FLUSH acts at once, a new message joins the
    /// QP's in-flight list.
    fn accept(&mut self, m: TxMsg, cqe: Option<u64>) -> bool {
        let s = Self::slot_of(m.qpn);
        let Some(q) = self.qps.get_mut(s) else {
            return false;
        };
        if let MsgOp::Flush { una } = m.op {
            retain(&mut self.txq, |d| Self::slot_of(d.qpn) != s);
            q.next_pkt = None;
            q.cursor = Some(m.first_psn);
            if let Ok(mut ctx) = layout::decode_sctx(&q.sctx) {
                ctx.noack = 0;
                // The rewind's `una` lands with the drop, forward only (a response
                // taken since may have moved it further).
                if ctx.una_psn.before(una) {
                    ctx.una_psn = una;
                    q.retire_before(una);
                }
                q.sctx = layout::encode_sctx(&ctx);
            }
            return true;
        }
        if !m.replay {
            let Ok(ctx) = layout::decode_sctx(&q.sctx) else {
                return false;
            };
            let kind = match m.op {
                MsgOp::Read => InflightKind::Read,
                MsgOp::CmpSwap { .. } | MsgOp::FetchAdd { .. } => InflightKind::Atomic,
                _ => InflightKind::Msg,
            };
            let entry = Inflight {
                wqe_index: m.wqe_index,
                kind,
                first_psn: m.first_psn,
                last_psn: m.last_psn(ctx.mtu),
                length: m.length,
                sges: m.sges.clone(),
                cqe: cqe.map(|wr_id| (wr_id, m.op)),
            };
            if q.inflight.push_back(entry).is_err() {
                return false;
            }
        }
        self.txq.push_back(m).is_ok()
    }
}

/// §3.4 for one packet of QP memory `q`.
fn dispatch(
    port: &PortAddr,
    q: &mut QpMem,
    qpn: Qpn,
    pkt: &wire::Packet<'_>,
    mrt: &MrTable<MRT>,
    dma: &mut dyn Dma,
    rd_queued: usize,
) -> RxOutcome {
    // The context cache's tag, on the raw entry: one never written does not decode but
    // is a miss too (fastpath::dispatch makes the same test on decoded contexts, and the
    // RTL's fp_rx_check first of all).
    if layout::rctx_tag(&q.rctx) != qpn {
        return RxOutcome::exception(qpn, pkt, Exception::Miss);
    }
    let (Ok(mut rctx), Ok(mut sctx)) = (layout::decode_rctx(&q.rctx), layout::decode_sctx(&q.sctx))
    else {
        return RxOutcome::exception(qpn, pkt, Exception::Off);
    };
    let cqe = layout::rctx_cqe(&q.rctx);
    let mut out = fastpath::dispatch(
        port,
        &mut rctx,
        &mut sctx,
        &mut q.inflight,
        pkt,
        mrt,
        dma,
        rd_queued,
    );
    q.rctx = layout::encode_rctx(&rctx);
    q.sctx = layout::encode_sctx(&sctx);
    // `recv_cqe` (not a field of the decoded context): the SEND's end hands it to its
    // MSG_DONE, anything else leaves it with the buffer.
    if cqe {
        match &mut out.event {
            Some(Event::MsgDone { cqe, .. }) => *cqe = true,
            _ if rctx.recv_loaded => layout::cqe_rctx(&mut q.rctx),
            _ => {}
        }
    }
    out
}

/// A duplicate READ request `pkt` of a QP whose receive context was `rctx` (the
/// hardware's READ responder on, in-sequence READs taken up to `epsn`): the requester
/// went back to its PSN and discards the responses after it, so the QP's queued ones
/// after it go, as the engine's responder drops them (`duplicate`); the duplicate stays
/// the firmware's (its engine answers it from the READ resources).
fn drop_reads_after(ackq: &mut Deque<Resp, ACKQ>, rctx: &[u8; RCTX_LEN], pkt: &wire::Packet<'_>) {
    let Ok(ctx) = layout::decode_rctx(rctx) else {
        return;
    };
    let psn = pkt.psn();
    if pkt.opcode() != wire::Opcode::RC_RDMA_READ_REQUEST
        || !ctx.on
        || ctx.held
        || !ctx.reads
        || !psn.before(ctx.epsn)
    {
        return;
    }
    retain(
        ackq,
        |r| !matches!(r, Resp::Read(r) if r.qpn == ctx.qpn && r.psn.after(psn)),
    );
}

/// Queues an ACK or NAK behind the responses queued before it. Behind a READ's
/// responses it merges with an ACK or NAK of the same QP queued last, as the engine's
/// one pending ACK does (`set_pending`: the later PSN wins; at equal PSNs a NAK
/// replaces an ACK).
fn push_ack(ackq: &mut Deque<Resp, ACKQ>, ack: AckDesc) {
    let reads_wait = responses_wait(ackq);
    if let (true, Some(Resp::Ack(old))) = (reads_wait, ackq.back_mut()) {
        if old.qpn == ack.qpn {
            if ack_supersedes(old.psn, old.syndrome, ack.psn) {
                *old = ack;
            }
            return;
        }
    }
    let _ = ackq.push_back(Resp::Ack(ack));
}

/// What the hardware did with a NAK of a QP whose send queue it fetches ([`sq_nak`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NakTaken {
    /// It is the firmware's: an EXCEPTION.
    No,
    /// A retry is under way and nothing was acknowledged: dropped, as the engine does.
    Dropped,
    /// Go-Back-N: the QP's queued descriptors go (a FLUSH) and the replays follow.
    Rewound,
    /// An RNR NAK: the QP's queued descriptors go (a FLUSH) and the replays follow when
    /// its RNR wait is over.
    Rnr,
    /// Taken as the Go-Back-N, but the CQE writer had no room for what it retired: the
    /// rewind is the firmware's, told by this `ACKED` event with `gbn` (as the RTL's
    /// `fp_sqf` takes only an event whose CQEs are written, §3.8).
    Passed(Event),
}

/// A NAK sequence error (`PSN` = the responder's expected PSN) for a QP whose send
/// queue the hardware fetches (§3.8), at or after `una` and before `next_psn`: the
/// hardware does what the engine's completer does (`on_nak`, `retry`, `go_back_n`).
/// A `PSN` after `una` acknowledges what ends before it: those messages retire as an
/// ACK of `PSN - 1` would retire them (their CQEs written: all of them fit, or the NAK
/// is the firmware's), and the retry budget starts afresh. Then, unless a retry is
/// under way without progress since (the NAK is dropped), one retry is spent (none
/// left: the firmware's, which fails the WQE) and the QP goes back to `PSN`:
/// `una_psn = PSN`, `noack = 0`, its queued descriptors dropped (the caller: a FLUSH),
/// and the WQEs from the one holding `PSN` sent again from the host ring as REPLAYs
/// (`sq_fetch`), from `PSN` on. The local ACK timer restarts (the engine restarts it on
/// progress, or arms it when it hands the replay out). When the CQE writer has no room
/// for the retired messages' CQEs, they retire all the same (`una_psn = PSN`) and the
/// rewind is the firmware's ([`NakTaken::Passed`]). While an RNR wait runs, a sequence
/// error without progress is dropped (counted) and one with progress is the firmware's.
///
/// An RNR NAK (§3.8, as `on_rnr_nak`) of a queue not stopped, in the same range, retires
/// the same way (all CQEs written, else the firmware's with nothing changed; the budgets
/// start afresh only when it completes messages), spends one of `rnr_retry` (7: none;
/// none left: the firmware's, which fails the WQE with RNR_RETRY_EXC_ERR), drops the
/// QP's queued descriptors (a FLUSH), stops the local ACK timer and waits the time its
/// timer names ([`NakTaken::Rnr`]): `sq_fetch` sends nothing meanwhile and
/// `sq_timeouts` replays from `PSN` at its end.
///
/// Anything else stays an EXCEPTION, with nothing changed.
fn sq_nak(
    q: &mut QpMem,
    pkt: &wire::Packet<'_>,
    event: &Option<Event>,
    cqw: &mut CqWriter,
    dma: &mut dyn Dma,
    now: u64,
) -> NakTaken {
    use roce_core::wire::aeth::{NakCode, Syndrome};
    let (
        Some(mut sq),
        Some(Event::Exception {
            reason: Exception::Nak,
            ..
        }),
    ) = (q.sq, event)
    else {
        return NakTaken::No;
    };
    // A sequence error (None) or an RNR NAK (its timer).
    let rnr = match pkt.aeth().map(|a| a.syndrome) {
        Some(Syndrome::Nak(NakCode::PsnSequenceError)) => None,
        Some(Syndrome::RnrNak(timer)) if !sq.stopped => Some(timer),
        _ => return NakTaken::No,
    };
    let psn = pkt.psn();
    let Ok(mut ctx) = layout::decode_sctx(&q.sctx) else {
        return NakTaken::No;
    };
    if psn.before(sq.una) || !psn.before(ctx.next_psn) {
        return NakTaken::No;
    }
    let progress = psn != sq.una;
    if rnr.is_none() && !progress && (sq.spent != 0 || sq.rnr_at.is_some()) {
        // A retry under way, or an RNR wait (`on_nak` retries at none then).
        return NakTaken::Dropped;
    }
    if rnr.is_none() && sq.rnr_at.is_some() {
        // Progress during an RNR wait: the firmware's (rare: the responder NAKed the
        // PSN it now implies it has).
        return NakTaken::No;
    }
    let qpn = layout::rctx_tag(&q.rctx);
    let mut n = 0usize;
    let mut wcs: heapless::Vec<WorkCompletion, INFLIGHT> = heapless::Vec::new();
    for m in q.inflight.iter().take_while(|m| m.last_psn.before(psn)) {
        if m.kind != InflightKind::Msg {
            // A NAK past a READ or atomic: its response was lost, and the engine's
            // completer goes back to it (`complete_implied`): the firmware's.
            return NakTaken::No;
        }
        n += 1;
        if let Some((wr_id, op)) = m.cqe {
            let _ = wcs.push(send_wc(qpn, wr_id, op, m.length));
        }
    }
    // The one holding PSN is in the list (a READ too: its replay asks from PSN on).
    let Some(first) = q.inflight.iter().nth(n).map(|m| m.first_psn) else {
        return NakTaken::No;
    };
    // The budgets start afresh at progress: a sequence error's (`acked_to`), an RNR
    // NAK's only when it completes messages (`complete_implied`; its PSN inside the
    // oldest moves the acknowledgement alone).
    let fresh = if rnr.is_some() { n != 0 } else { progress };
    let (spent, rnr_spent) = if fresh {
        (0, 0)
    } else {
        (sq.spent, sq.rnr_spent)
    };
    // None left: the firmware's, whose engine fails the WQE (RETRY_EXC_ERR,
    // RNR_RETRY_EXC_ERR). `rnr_retry` 7 waits for ever.
    let exhausted = match rnr {
        None => spent >= sq.idle.retry_cnt,
        Some(_) => sq.idle.rnr_retry != 7 && rnr_spent >= sq.idle.rnr_retry,
    };
    if exhausted {
        return NakTaken::No;
    }
    let written = wcs.is_empty() || q.send_cq.is_some_and(|cq| cqw.write_all(cq, &wcs, dma));
    if !written && rnr.is_some() {
        // Nothing changed yet: the firmware's, as any NAK the hardware does not take.
        return NakTaken::No;
    }
    let mut wqe_index = 0;
    for _ in 0..n {
        if let Some(m) = q.inflight.pop_front() {
            wqe_index = m.wqe_index;
        }
    }
    ctx.una_psn = psn;
    if !written {
        // The send-queue state stays as it was: the firmware takes the queue back.
        q.sctx = layout::encode_sctx(&ctx);
        return NakTaken::Passed(Event::Acked {
            qpn,
            psn,
            una: psn,
            read: false,
            last: false,
            done: n.min(255) as u8,
            wqe_index,
            cqe: false,
            gbn: true,
            atomic: false,
        });
    }
    sq.done = sq.done.wrapping_add(n as u32);
    sq.una = psn;
    sq.base = first;
    sq.spent = spent;
    sq.rnr_spent = rnr_spent;
    let Some(timer) = rnr else {
        go_back(q, sq, ctx, first, now);
        return NakTaken::Rewound;
    };
    // `on_rnr_nak`: one RNR retry spent, the local ACK timer stopped, nothing sent
    // until the wait the NAK names is over (`sq_timeouts` then replays from PSN).
    if sq.idle.rnr_retry != 7 {
        sq.rnr_spent = rnr_spent.saturating_add(1);
    }
    sq.deadline = None;
    q.cursor = Some(sq.una);
    sq.rnr_at = Some(now.saturating_add(timer.nanos()));
    sq.replay = None;
    q.sq = Some(sq);
    ctx.noack = 0;
    q.sctx = layout::encode_sctx(&ctx);
    q.next_pkt = None;
    NakTaken::Rnr
}

/// Whether `sq_timeouts` takes the local ACK timeout of `q`'s send queue `sq` (Go-Back-N:
/// not stopped, a retry left, something outstanding); if not, the firmware takes the
/// queue back at its deadline (`SqNews::due`).
fn retries_at_timeout(q: &QpMem, sq: &SqHw) -> bool {
    !sq.stopped && sq.spent < sq.idle.retry_cnt && !q.inflight.is_empty()
}

/// The hardware's Go-Back-N retry of send queue `sq` of QP memory `q` (send context
/// `ctx`), whose oldest unfinished message starts at `first`: one retry spent, the
/// sends start again at `una` (REPLAYs from the host ring, served by `sq_fetch`),
/// `noack` 0, the local ACK timer armed anew (as the engine arms it when it hands the
/// replay out). The caller drops the QP's queued descriptors (a FLUSH).
fn go_back(q: &mut QpMem, mut sq: SqHw, mut ctx: SendCtx, first: Psn, now: u64) {
    sq.spent = sq.spent.saturating_add(1);
    // A paced QP's (§2.5) starts with the first resend, which its pacer may hold: the
    // engine alone stops its timer at the rewind and starts it as that packet leaves
    // (`tx_qp`). Unpaced, the resend leaves in this run, at `now`.
    sq.deadline = if q.pace.is_some() {
        None
    } else {
        sq.idle.rto.map(|t| now.saturating_add(t))
    };
    sq.replay = Some((sq.done, sq.una.diff(first).max(0) as u32));
    q.cursor = Some(sq.una);
    q.sq = Some(sq);
    ctx.noack = 0;
    q.sctx = layout::encode_sctx(&ctx);
    q.next_pkt = None;
}

/// A response the response path took for a QP whose send queue the hardware fetches
/// (§3.8): when it retired messages whose CQEs are all written (or owed none), the
/// hardware's send-queue state moves on (the oldest unfinished WQE, the acknowledged
/// PSN, the local ACK timer restarted as the engine restarts it on progress) and the
/// `ACKED` event is not raised: returns true. A response that leaves a completion to
/// the firmware raises it as before, and the firmware then takes the send queue back.
fn sq_retire(q: &mut QpMem, event: &Option<Event>, none_owed: bool, now: u64) -> bool {
    // (Unpaced, outstanding is what was fetched, as `fp_sqf` counts it: its packets
    // leave within the run that fetched them.)
    let sent = if q.pace.is_some() { q.sent_to() } else { None };
    let (Some(sq), Some(Event::Acked { done, una, cqe, .. })) = (q.sq.as_mut(), event) else {
        return false;
    };
    // A READ response or ATOMIC ACKNOWLEDGE retires as an ACK does (`read`, `atomic`:
    // the response rule placed its data; a READ's middle response retires what is
    // before it and moves `una`).
    if !(*cqe || none_owed) {
        return false;
    }
    sq.done = sq.done.wrapping_add(u32::from(*done));
    if *una != sq.una {
        sq.spent = 0;
        sq.rnr_spent = 0;
    }
    sq.una = *una;
    sq.base = q.inflight.front().map_or(sq.next, |m| m.first_psn);
    // Outstanding is what was sent (the engine's requester moves its PSN as it sends),
    // not what was fetched: a message whose packets the pacer holds is not (§2.5).
    let sent = sent.unwrap_or(sq.next);
    // An RNR wait keeps the timer stopped (`comp_progress`).
    sq.deadline = if !una.before(sent) || sq.rnr_at.is_some() {
        None
    } else {
        sq.idle.rto.map(|t| now.saturating_add(t))
    };
    true
}

/// The completions the CQE writer would write if response `pkt` retires what it
/// acknowledges (the in-flight messages that end at or before its PSN): how many
/// messages that is, and the completions of those that asked for a CQE. None for a
/// request.
fn retiring_cqes(
    q: &QpMem,
    qpn: Qpn,
    pkt: &wire::Packet<'_>,
) -> Option<(usize, heapless::Vec<WorkCompletion, INFLIGHT>)> {
    use roce_core::wire::opcode::Operation;
    if !matches!(
        pkt.info().operation,
        Operation::Acknowledge | Operation::RdmaReadResponse | Operation::AtomicAcknowledge
    ) {
        return None;
    }
    let psn = pkt.psn();
    let mut wcs = heapless::Vec::new();
    let mut n = 0;
    for m in q.inflight.iter().take_while(|m| !psn.before(m.last_psn)) {
        n += 1;
        if let Some((wr_id, op)) = m.cqe {
            let _ = wcs.push(send_wc(qpn, wr_id, op, m.length));
        }
    }
    Some((n, wcs))
}

/// Whether `pkt` is a CNP the pacing entry of QP `qpn` (entry `q`) takes (§2.5): the
/// QP's context is in the entry and on, no exception of it waits (`held`: the CNP then
/// waits behind it as one), and the CNP is this port's and from the QP's peer, as the
/// engine checks a CNP (`Engine::on_cnp`).
fn cnp_taken(port: &PortAddr, q: &QpMem, qpn: Qpn, pkt: &wire::Packet<'_>) -> bool {
    if q.pace.is_none() || pkt.info().transport != wire::opcode::Transport::Cnp {
        return false;
    }
    let Ok(r) = layout::decode_rctx(&q.rctx) else {
        return false;
    };
    let (src, dst) = pkt.gids();
    r.on && r.qpn == qpn
        && !r.held
        && pkt.dst_mac() == port.mac
        && dst == port.gid
        && src == r.peer_gid
}

/// The QP a response queue entry is of.
fn resp_qpn(r: &Resp) -> Qpn {
    match r {
        Resp::Ack(a) => a.qpn,
        Resp::Read(r) => r.qpn,
        Resp::Atomic(a) => a.qpn,
    }
}

/// The response queue's next entry that may go at `now`: the first whose QP has no
/// earlier entry held, unless it is data (a READ response, an ATOMIC ACKNOWLEDGE) its
/// QP's pacer holds (§2.5; `room`: the event ring has room for a byte counter's event),
/// which holds the QP's later entries too, as the engine's responder sends its queue in
/// order. Other QPs' entries go past it. `wake` gets the held ones' pacer times.
fn next_resp<const N: usize>(
    ackq: &Deque<Resp, ACKQ>,
    qps: &[QpMem; N],
    now: u64,
    room: bool,
    wake: &mut Option<u64>,
) -> Option<usize> {
    let mut held: heapless::Vec<usize, 8> = heapless::Vec::new();
    for (i, r) in ackq.iter().enumerate() {
        let s = resp_qpn(r).value() as usize % N.max(1);
        if held.contains(&s) {
            continue;
        }
        let Some(q) = qps
            .get(s)
            .filter(|q| q.pace.is_some() && !matches!(r, Resp::Ack(_)))
        else {
            return Some(i);
        };
        // (Without room, no wake-up: the firmware's next event read makes room.)
        if room && q.pace_ready(now, wake) {
            return Some(i);
        }
        held.push(s).ok()?;
    }
    None
}

/// Removes entry `i` of a deque.
fn remove_at<T, const N: usize>(d: &mut Deque<T, N>, i: usize) {
    let mut k = 0;
    retain(d, |_| {
        k += 1;
        k - 1 != i
    });
}

/// Keeps the entries `keep` says yes to, in order.
fn retain<T, const N: usize>(d: &mut Deque<T, N>, mut keep: impl FnMut(&T) -> bool) {
    for _ in 0..d.len() {
        if let Some(x) = d.pop_front() {
            if keep(&x) {
                let _ = d.push_back(x);
            }
        }
    }
}

impl<P: Datapath, const QPS: usize> FastPath for FastPathPort<P, QPS> {
    fn set_port(&mut self, mac: [u8; 6], gid: [u8; 16]) {
        self.port = PortAddr { mac, gid };
    }

    fn write_sctx(&mut self, qpn: Qpn, offset: usize, bytes: &[u8]) {
        let Some(q) = self.qp(qpn) else {
            return;
        };
        let old = layout::decode_sctx(&q.sctx).ok();
        if offset < 15 && offset + bytes.len() > 12 {
            // `next_psn` written: the sends stand there.
            q.cursor = None;
        }
        if let Some(d) = q.sctx.get_mut(offset..offset + bytes.len()) {
            d.copy_from_slice(bytes);
        }
        let new = layout::decode_sctx(&q.sctx).ok();
        let valid = new.is_some_and(|c| c.valid);
        if !valid {
            q.inflight.clear();
            q.next_pkt = None;
            q.sq = None;
            let s = Self::slot_of(qpn);
            retain(&mut self.txq, |d| Self::slot_of(d.qpn) != s);
            return;
        }
        if let (Some(o), Some(n)) = (old, new) {
            if o.una_psn != n.una_psn {
                q.retire_before(n.una_psn);
            }
        }
    }

    fn read_sctx(&mut self, qpn: Qpn) -> [u8; SCTX_LEN] {
        self.qp(qpn).map_or([0; SCTX_LEN], |q| q.sctx)
    }

    /// `held` stays set while an exception of the QP's entry waits in the queue
    /// (§3.2), as in the RTL (`fp_rx`, where a frame may be checked between the
    /// firmware's look at its events and its write landing). The runtime releases a QP
    /// only while no event waits and this model takes frames only inside `run`, so
    /// under the runtime the rule keeps nothing it wrote; it keeps the model the RTL's.
    fn write_rctx(&mut self, qpn: Qpn, bytes: &[u8; RCTX_LEN]) {
        let entry = Self::slot_of(qpn);
        let waiting = self
            .events
            .iter()
            .any(|e| matches!(e, Event::Exception { qpn: q, .. } if Self::slot_of(*q) == entry));
        if let Some(q) = self.qp(qpn) {
            q.rctx = *bytes;
            if waiting {
                layout::hold_rctx(&mut q.rctx);
            }
        }
    }

    fn read_rctx(&mut self, qpn: Qpn) -> [u8; RCTX_LEN] {
        self.qp(qpn).map_or([0; RCTX_LEN], |q| q.rctx)
    }

    fn ctx_entries(&self) -> usize {
        QPS
    }

    fn mr_entries(&self) -> usize {
        MRT
    }

    fn write_mr(&mut self, index: usize, bytes: &[u8; MR_LEN]) {
        if let (Some(e), Ok(v)) = (self.mrt.entries.get_mut(index), layout::decode_mr(bytes)) {
            *e = v;
        }
    }

    fn tx_room(&self) -> bool {
        !self.txq.is_full()
    }

    fn post_tx(&mut self, desc: &[u8; TXD_LEN]) -> bool {
        match layout::decode_txd(desc) {
            Ok(m) if !self.txq.is_full() || matches!(m.op, MsgOp::Flush { .. }) => {
                self.accept(m, layout::txd_cqe(desc))
            }
            _ => false,
        }
    }

    fn poll_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool {
        let Some(ev) = self.events.pop_front() else {
            return false;
        };
        if let Event::Exception { slot, .. } = ev {
            let s = usize::from(slot);
            let n = self.slot_len.get(s).copied().unwrap_or(0);
            if let (Some(src), Some(dst)) = (
                self.slots.get(s).and_then(|b| b.get(..n)),
                frame.get_mut(..n),
            ) {
                dst.copy_from_slice(src);
            }
            if let Some(u) = self.slot_used.get_mut(s) {
                *u = false;
            }
        }
        *event = layout::encode_event_words(&ev);
        true
    }

    /// The model takes frames only inside `run`, whole: its events are all queued.
    fn events_waiting(&mut self) -> bool {
        !self.events.is_empty()
    }

    fn read_responder(&self) -> bool {
        !self.bypass
    }

    fn recv_loads(&self) -> bool {
        !self.bypass
    }

    fn load_recv(&mut self, qpn: Qpn, buf: Option<(u64, u32)>, cqe: Option<RecvCqe>) -> bool {
        // (The model takes frames only in `run`: the check and the write are one step.)
        let Some(q) = self.qp(qpn) else {
            return false;
        };
        if !layout::load_rctx(&mut q.rctx, qpn, buf) {
            return false;
        }
        if let (Some(c), Some(_)) = (cqe, buf) {
            q.recv_cqe = Some(c);
            layout::cqe_rctx(&mut q.rctx);
        }
        true
    }

    fn rnr_responder(&self) -> bool {
        !self.bypass
    }

    fn recv_rnr(&mut self, qpn: Qpn, t: Option<RnrTimer>) -> bool {
        // (One step, as `load_recv`.)
        self.qp(qpn)
            .is_some_and(|q| layout::rnr_rctx(&mut q.rctx, qpn, t))
    }

    fn paces(&self) -> bool {
        true
    }

    fn set_pace(&mut self, qpn: Qpn, pace: Option<&Pace>) {
        if let Some(q) = self.qp(qpn) {
            q.pace = pace.copied();
            q.pace_wait = false;
        }
    }

    fn write_pace(&mut self, qpn: Qpn, w: &PaceWrite) {
        if let Some(q) = self.qp(qpn) {
            if let Some(p) = q.pace.as_mut() {
                p.rate = w.rate;
                p.timer_at = w.timer_at;
                if let Some(b) = w.bytes {
                    p.bytes = b;
                }
            }
            q.pace_wait = false;
        }
    }

    fn read_pacer(&mut self, qpn: Qpn) -> Option<roce_core::cc::Pacer> {
        self.qp(qpn).and_then(|q| q.pace).map(|p| p.pacer)
    }

    fn pace_sent_to(&mut self, qpn: Qpn) -> Option<(u64, Psn)> {
        let q = self.qp(qpn)?;
        Some((q.pace?.pacer.ready_at(), q.sent_to()?))
    }

    fn fw_paced_sent(&mut self, qpn: Qpn, len: usize) {
        self.pace_sent(qpn, len);
    }

    fn pace_hold(&mut self, qpn: Qpn, hold: bool) {
        if let Some(q) = self.qp(qpn) {
            q.fw_hold = hold;
        }
    }

    fn run(&mut self, dma: &mut dyn Dma) -> bool {
        let rx = self.run_rx(dma);
        let timeouts = self.sq_timeouts();
        let fetched = self.sq_fetch_all(dma) || timeouts;
        let tx = self.run_tx(dma);
        rx || fetched || tx
    }

    fn run_at(&mut self, dma: &mut dyn Dma, now: u64) -> bool {
        self.now = now;
        self.run(dma)
    }

    fn sq_hand_over(&mut self, qpn: Qpn, ring: SqRing, idle: &SqIdle) -> bool {
        let s = Self::slot_of(qpn);
        let queued = self.txq.iter().any(|m| Self::slot_of(m.qpn) == s);
        let Some(q) = self.qp(qpn) else {
            return false;
        };
        let Ok(ctx) = layout::decode_sctx(&q.sctx) else {
            return false;
        };
        // Nothing of the QP may be under way in the hardware either.
        let quiet = ctx.valid
            && layout::rctx_tag(&q.rctx) == qpn
            && ctx.una_psn == idle.psn
            && ctx.next_psn == idle.psn
            && q.inflight.is_empty()
            && q.next_pkt.is_none()
            && !queued;
        if !quiet || ring.log > 31 {
            return false;
        }
        q.sq = Some(SqHw {
            ring,
            pi: ring.ci,
            done: ring.ci,
            base: idle.psn,
            una: idle.psn,
            next: idle.psn,
            idle: *idle,
            deadline: None,
            stopped: false,
            spent: 0,
            rnr_spent: 0,
            rnr_at: None,
            replay: None,
        });
        true
    }

    fn sq_doorbell(&mut self, qpn: Qpn, pi: u32, now: u64, dma: &mut dyn Dma) -> SqRung {
        self.now = now;
        let s = Self::slot_of(qpn);
        match self.qp(qpn).and_then(|q| q.sq.as_mut()) {
            Some(sq) => sq.pi = pi,
            None => return SqRung::default(),
        }
        let (taken, sends) = self.sq_fetch(s, dma);
        let stopped = self
            .qps
            .get(s)
            .and_then(|q| q.sq)
            .is_none_or(|sq| sq.stopped);
        SqRung {
            taken,
            sends,
            stopped,
        }
    }

    fn sq_take_back(&mut self, qpn: Qpn) -> Option<SqBack> {
        let sq = self.qp(qpn)?.sq.take()?;
        Some(SqBack {
            done: sq.done,
            ci: sq.ring.ci,
            base: sq.base,
            una: sq.una,
            deadline: sq.deadline,
            spent: SqSpent {
                retries: sq.spent,
                rnr: sq.rnr_spent,
                rnr_at: sq.rnr_at,
            },
        })
    }

    fn sq_deadline(&mut self, qpn: Qpn) -> Option<u64> {
        self.qp(qpn)?.sq?.deadline
    }

    fn sq_stopped(&mut self, qpn: Qpn) -> bool {
        self.qp(qpn).and_then(|q| q.sq).is_some_and(|sq| sq.stopped)
    }

    fn sq_news(&mut self) -> SqNews {
        SqNews {
            counters: Some(self.counters),
            // An RNR wait's end too: the model must run then (`sq_timeouts`).
            // And a data packet's time the pacer held it until (§2.5).
            deadline: self
                .qps
                .iter()
                .filter_map(|q| q.sq)
                .flat_map(|sq| [sq.deadline, sq.rnr_at])
                .flatten()
                .chain(self.pace_at)
                .min(),
            // (a context `sq_timeouts` cannot decode is the firmware's too)
            due: self
                .qps
                .iter()
                .filter_map(|q| {
                    let sq = q.sq?;
                    let ours = retries_at_timeout(q, &sq) && layout::decode_sctx(&q.sctx).is_ok();
                    sq.deadline.filter(|_| !ours)
                })
                .min(),
            stopped: self.qps.iter().any(|q| q.sq.is_some_and(|sq| sq.stopped)),
            cq_full: self
                .cqw
                .cqs
                .iter()
                .flatten()
                .any(|r| r.pi.wrapping_sub(r.ci) >= 1u32 << r.log_depth.saturating_sub(1)),
            ..core::mem::take(&mut self.news)
        }
    }

    fn rx_answered(&self) -> [u64; 2] {
        self.answered
    }

    fn ctx_hits_misses(&self) -> [u64; 2] {
        self.ctx
    }

    fn take_accessed(&mut self, word: usize) -> u32 {
        let mut bits = 0;
        for (i, q) in self
            .qps
            .iter_mut()
            .skip(word.saturating_mul(32))
            .take(32)
            .enumerate()
        {
            bits |= u32::from(core::mem::take(&mut q.accessed)) << i;
        }
        bits
    }

    fn cq_writer(&mut self) -> Option<&mut CqWriter> {
        Some(&mut self.cqw)
    }

    fn set_send_cq(&mut self, qpn: Qpn, cq: Option<u16>) {
        if let Some(q) = self.qp(qpn) {
            q.send_cq = cq;
        }
    }

    fn counters(&self) -> FastPathCounters {
        self.counters
    }
}

/// The firmware's own frames pass straight to the port; received frames reach the
/// firmware only as the fast path's events.
impl<P: Datapath, const QPS: usize> Datapath for FastPathPort<P, QPS> {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.inner.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.inner.can_transmit()
    }
    fn tx_blocked(&self) -> Priorities {
        self.inner.tx_blocked()
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        if self.bypass {
            self.inner.receive(buf)
        } else {
            None
        }
    }
    fn verifies_icrc(&self) -> bool {
        !self.bypass || self.inner.verifies_icrc()
    }
    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        if self.bypass {
            None
        } else {
            Some(self)
        }
    }
}
