//! The NIC runtime: the loop that connects the host ABI to the transport engine.
//!
//! One [`Nic::poll`] does, in order: execute queued commands; fetch WQEs whose doorbells
//! rang and post them to the engine; hand received frames to the engine; run due timers;
//! move frames from the engine to the datapath while it takes them; and write finished
//! work as CQEs into the host's CQ rings. It never blocks and never allocates; the
//! soft core calls it in a loop, the host harness whenever it steps the NIC.

use crate::abi::{
    self, reg, CmdEntry, CmdOp, CmdStatus, Cqe, DecodeError, EventStatus, RecvWqe, SendWqe,
};
use crate::fastpath::CqRing;
use crate::hal::{Datapath, FastPathCounters, Hal, QpMap, QP_MAP_WORDS};
use roce_core::dcb::{PfcThresholds, Priorities};
use roce_core::engine::{home_slot, CqHandle, Engine, PortConfig, QPN_BASE};
use roce_core::fastpath::layout::{self, EventWords, EVENT_WORDS};
use roce_core::fastpath::{Event, MrEntry, RecvBuf, UnaBack};
use roce_core::memory::{AccessFlags, Dma, MemError, MrKeys, MwType, Pd};
use roce_core::num::{Lkey, Psn, Qpn, Rkey};
use roce_core::transport::{
    Error as EngineError, Instant, QpAttr, QpInitAttr, QpState, QpType, SendWr, WcOpcode, WcStatus,
    WorkCompletion, WrOp,
};
use roce_core::wire::aeth::RnrTimer;
use roce_core::wire::opcode::Opcode;
use roce_core::wire::Packet;
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

mod qp_cache;

use qp_cache::{Dest, Icm};
mod srq;

/// Largest ring the NIC accepts (2^15 entries).
pub const MAX_LOG_DEPTH: u8 = 15;
/// Frame buffer size: the largest MTU plus every header.
pub const FRAME_BUF: usize = 4096 + 128;

/// A host CQ ring and the engine CQ behind it.
#[derive(Clone, Copy, Debug)]
struct HostCq {
    ring: u64,
    log_depth: u8,
    /// Next index the NIC writes.
    pi: u32,
    overflowed: bool,
}

/// A host QP's rings.
#[derive(Clone, Copy, Debug)]
struct HostQp {
    qpn: Qpn,
    qp_type: QpType,
    send_cq: u16,
    sq_ring: u64,
    sq_log: u8,
    /// Next send-queue index to fetch.
    sq_ci: u32,
    rq_ring: u64,
    rq_log: u8,
    rq_ci: u32,
    /// Its receives come from an SRQ: its own receive ring is unused and never read
    /// (the host need not have allocated it).
    srq: bool,
    /// Host address of its doorbell record (0: the doorbell registers instead).
    db_record: u64,
    /// What of the QP the fast path handles.
    fp: FpState,
    /// The fast path fetches its send WQEs (`docs/fastpath.md` §3.8): `sq_ci` is then
    /// the producer index last handed to it, and the engine holds none of its sends.
    sq_hw: bool,
}

/// What of a QP's line its send queue's fetch reads (`Nic::fetch_sq_of`).
#[derive(Clone, Copy)]
struct SqOf {
    qpn: Qpn,
    ud: bool,
    send_cq: u16,
    /// The ring's host address and log2 of its entries.
    ring: (u64, u8),
}

impl SqOf {
    fn of(q: &HostQp) -> Self {
        Self {
            qpn: q.qpn,
            ud: q.qp_type == QpType::Ud,
            send_cq: q.send_cq,
            ring: (q.sq_ring, q.sq_log),
        }
    }
}

/// How much of a QP is on the fast path (`docs/fastpath.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FpState {
    /// Nothing: the firmware handles every packet.
    Off,
    /// Its receive side (RTR): placement and ACKs.
    Recv,
    /// Both sides (RTS, SQD): also the segmenter and the response path.
    Full,
}

/// Counters of the runtime itself (the engine keeps the protocol's); the host reads both
/// with QUERY_COUNTERS.
pub use crate::abi::RuntimeCounters;

mod port;

/// The NIC: the engine with the given capacities (see [`crate::config`]) and the state
/// that ties it to the host's rings. `Clone` (with a `Clone` HAL) is a snapshot: the `abi`
/// fuzz target restores one per input.
#[derive(Clone)]
pub struct Nic<
    H: Hal,
    const QPS: usize,
    const CQS: usize,
    const PDS: usize,
    const MRS: usize,
    const SQ: usize,
    const RQ: usize,
    const CQE: usize,
    const RD: usize,
> {
    hal: H,
    engine: Engine<QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>,
    cqs: [Option<HostCq>; CQS],
    /// Per CQ, a completion taken from the engine that did not fit: the ring
    /// overflowed. (Apart from [`HostCq`], which the CQE path copies out and back: with
    /// it inside, those copies cost a MSG_DONE's poll on the SoC ~330 instructions.)
    cq_stash: [Option<WorkCompletion>; CQS],
    /// The resident QPs' ring state, one line per engine slot (QP `q` preferably in
    /// line `(q - QPN_BASE) mod QPS`). Without an ICM these are all the QPs.
    qps: [Option<HostQp>; QPS],
    /// Each line's last use (`tick`), for the cache's LRU choice, and the poll its
    /// WQEs were last fetched in (such a line is not evicted in that poll, so what was
    /// fetched gets a turn to start).
    used: [u32; QPS],
    fetched: [u32; QPS],
    /// Polls so far.
    tick: u32,
    /// Host memory for QP contexts, once the host set it (`SET_ICM`).
    icm: Option<Icm>,
    /// With an ICM: which QP indexes exist, and which have a doorbell not yet handled.
    exists: [u64; QP_MAP_WORDS],
    pending: QpMap,
    /// The QP index the next doorbell pass brings in first (round robin).
    next_in: u32,
    /// The GSI QP (QP1), whose doorbells are `reg::GSI_QP_INDEX`'s.
    gsi: Option<HostQp>,
    srqs: [Option<srq::HostSrq>; roce_core::transport::MAX_SRQ],
    cmdq_ci: u32,
    /// Some QP's ring holds WQEs not yet fetched.
    backlog: bool,
    /// One past the highest QP / CQ slot ever used: the per-poll scans stop there.
    qp_hi: usize,
    cq_hi: usize,
    counters: RuntimeCounters,
    /// The engine's memory table version the fast path's MR table was written at.
    mr_version: u32,
    txbuf: [u8; FRAME_BUF],
    rxbuf: [u8; FRAME_BUF],
    /// The fast path's descriptor and event being built or read: kept here so that a
    /// poll that finds nothing does not clear them (every byte is written before use).
    txd: layout::TxdWords,
    event: EventWords,
    /// The send and receive WQE being fetched from a host ring (`fetch_ring`): kept
    /// here so that a fetch does not clear a buffer per WQE (143 instructions a send
    /// WQE on the QEMU core, once per WQE a take-back re-reads); the DMA read writes
    /// every byte before it is decoded, and a failed read is not decoded.
    sq_wqe: SendWqe,
    rq_wqe: RecvWqe,
    /// The fast path did something since its counters were last copied.
    fp_ran: bool,
    /// Some CQ kept completions at the last look (its host ring full, or one stashed):
    /// look again at the next poll even if the engine has nothing new.
    cq_left: bool,
    /// The earliest local ACK deadline (or RNR wait's end) of the send queues the fast
    /// path fetches (ns): it runs then.
    fp_deadline: Option<u64>,
    /// The earliest of those deadlines it leaves to the firmware (`SqNews::due`): the
    /// poll takes queues back then.
    fp_due: Option<u64>,
    /// The fast path ran (or was rung) since its news were last read (`fp_news`).
    fp_news_due: bool,
    /// Its news said a send queue it fetches stopped at a WQE it does not take: the
    /// next poll takes it back (`fp_sq_reclaim`).
    fp_stopped: bool,
    /// The QPs whose receive context the firmware wrote back after an exception with
    /// `held` still set, since an event waited or the engine had responses of the QP
    /// queued (`fp_write_back`): released when neither holds (`fp_release`, at the end
    /// of a poll's events), as `held` means (`docs/fastpath.md` §3.2).
    fp_held: heapless::Vec<Qpn, FP_HELD>,
    /// This poll's time (ns).
    now: u64,
}

/// How many QPs `fp_release` keeps track of. A QP that finds no room stays held: its next
/// packet is an exception, whose write-back tries again.
const FP_HELD: usize = 16;

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
    /// Builds the NIC and boots it ([`Nic::idle`], then [`Nic::boot`]).
    pub fn new(hal: H, port: PortConfig) -> Self {
        let mut nic = Self::idle(hal, port);
        nic.boot();
        nic
    }

    /// The NIC with empty tables, not yet visible to the host. `const`: a firmware image
    /// has its NIC built at compile time, in its static (returned at run time the NIC
    /// would pass through the stack whole, see [`Engine::new`]); it then sets the port's
    /// addresses ([`Nic::set_port`]) and calls [`Nic::boot`].
    pub const fn idle(hal: H, port: PortConfig) -> Self {
        Self {
            hal,
            engine: Engine::new(port),
            cqs: [None; CQS],
            cq_stash: [None; CQS],
            qps: [None; QPS],
            used: [0; QPS],
            fetched: [0; QPS],
            tick: 0,
            icm: None,
            exists: [0; QP_MAP_WORDS],
            pending: QpMap::new(),
            next_in: 0,
            gsi: None,
            srqs: [None; roce_core::transport::MAX_SRQ],
            cmdq_ci: 0,
            backlog: false,
            qp_hi: 0,
            cq_hi: 0,
            counters: RuntimeCounters::ZERO,
            mr_version: 0,
            txbuf: [0; FRAME_BUF],
            rxbuf: [0; FRAME_BUF],
            txd: [0; layout::TXD_WORDS],
            event: [0; EVENT_WORDS],
            sq_wqe: zerocopy::transmute!([0u8; core::mem::size_of::<SendWqe>()]),
            rq_wqe: zerocopy::transmute!([0u8; core::mem::size_of::<RecvWqe>()]),
            fp_ran: false,
            cq_left: false,
            fp_deadline: None,
            fp_due: None,
            fp_news_due: false,
            fp_stopped: false,
            fp_held: heapless::Vec::new(),
            now: 0,
        }
    }

    /// Sets the port's configuration (its addresses) of an [`Nic::idle`] NIC before it
    /// boots (later, the host changes it with MODIFY_PORT; `Engine::set_config` says
    /// what is busy once QPs are connected).
    pub fn set_port(&mut self, port: PortConfig) -> Result<(), EngineError> {
        self.engine.set_config(port)
    }

    /// Boots the NIC: gives the fast path the port's addresses, publishes the device
    /// identity and marks it ready. PFC thresholds left at their defaults (those of
    /// the DCB block's default 64 KiB buffer) become the defaults of the datapath's
    /// own buffer (`PfcThresholds::for_buffer`: the same on 64 KiB, XOFF at 4 KiB on
    /// the SoC's 16 KiB), so that QUERY_DCB never shows thresholds the buffer cannot run.
    pub fn boot(&mut self) {
        let buffer = self.hal.datapath().rx_buffer_bytes();
        let mut port = *self.engine.config();
        if port.dcb.pfc_thresholds == PfcThresholds::DEFAULT {
            port.dcb.pfc_thresholds = PfcThresholds::for_buffer(buffer);
            // Before boot no QP is connected, so nothing is busy.
            let _ = self.engine.set_config(port);
            port = *self.engine.config();
        }
        let hal = &mut self.hal;
        let mut version = abi::Version(0);
        version.set_major(abi::ABI_MAJOR);
        version.set_minor(abi::ABI_MINOR);
        hal.reg_write(reg::DEVICE_ID, abi::DEVICE_ID);
        hal.reg_write(reg::VERSION, version.0);
        let mut status = abi::DeviceStatus(0);
        status.set_ready(true);
        hal.reg_write(reg::STATUS, status.0);
        hal.reg_write(reg::CMDQ_CI, 0);
        let dp = hal.datapath();
        dp.set_dcb(&port.dcb, port.mac);
        let (reads, sends, rnr, pace, in_flight) = match dp.fastpath() {
            Some(fp) => {
                fp.set_port(port.mac, port.gid());
                (
                    fp.read_responder(),
                    fp.recv_loads(),
                    fp.rnr_responder(),
                    H::FASTPATH_PACES && fp.paces(),
                    fp.msgs_in_flight(),
                )
            }
            None => (false, false, false, false, u32::MAX),
        };
        // The requester keeps no more messages in flight than the fast path's list
        // holds, so that every ACK finds its message there (§3.8).
        if port.transport.max_msgs_in_flight > in_flight {
            port.transport.max_msgs_in_flight = in_flight;
            let _ = self.engine.set_config(port);
        }
        self.engine.set_fastpath_pace(pace);
        self.engine.set_fastpath_reads(reads);
        self.engine.set_fastpath_sends(sends);
        self.engine.set_fastpath_rnr(rnr);
    }

    /// The platform.
    pub fn hal(&mut self) -> &mut H {
        &mut self.hal
    }

    /// The engine (its counters, for diagnostics).
    pub fn engine(&self) -> &Engine<QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD> {
        &self.engine
    }

    /// The runtime's counters.
    pub fn counters(&self) -> &RuntimeCounters {
        &self.counters
    }

    /// When the engine next needs `poll` for a timer, in the HAL's nanoseconds.
    pub fn poll_timeout(&self) -> Option<u64> {
        let engine = self.engine.poll_timeout().map(Instant::as_nanos);
        match (engine, self.fp_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Hands one received frame straight to the engine (the ICRC is checked there), for
    /// a host harness that owns the frame's buffer: no datapath queue, no copy.
    pub fn receive_frame(&mut self, frame: &[u8]) {
        let now = Instant::from_nanos(self.hal.now());
        self.counters.frames_rx += 1;
        // The frame is parsed for its QP only when a QP cache needs it (`and_then`: the
        // parse is ~200 instructions a frame, `and` would run it every time).
        if self.admit(self.icm.and_then(|_| dest_qpn(frame))) {
            self.engine.handle_packet(now, frame, self.hal.dma());
        }
    }

    /// Writes the next frame to send straight into `buf`, for a host harness that pulls
    /// frames at link rate (use a datapath that never takes frames, so none queue there).
    pub fn transmit_frame(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.transmit_frame_except(buf, Priorities::NONE)
    }

    /// [`Nic::transmit_frame`] with the 802.1p priorities in `blocked` held back (paused
    /// by the link partner, or their transmit queue full): the engine builds no frame of
    /// theirs and the others go on (`Engine::poll_transmit_except`, priorities by the
    /// port's map).
    pub fn transmit_frame_except(&mut self, buf: &mut [u8], blocked: Priorities) -> Option<usize> {
        let now = Instant::from_nanos(self.hal.now());
        let n = self
            .engine
            .poll_transmit_except(now, buf, self.hal.dma(), blocked)?;
        if H::FASTPATH_PACES {
            if let (Some((qpn, len)), Some(fp)) = (
                self.engine.fastpath_take_paced_sent(),
                self.hal.split().1.fastpath(),
            ) {
                fp.fw_paced_sent(qpn, len);
                fp.pace_hold(qpn, self.engine.fastpath_resp_queued(qpn));
            }
        }
        self.counters.frames_tx += 1;
        Some(n)
    }

    /// Does every piece of pending work once; returns whether anything happened.
    pub fn poll(&mut self) -> bool {
        let now = Instant::from_nanos(self.hal.now());
        self.now = now.as_nanos();
        self.tick = self.tick.wrapping_add(1);
        if self.icm.is_some() {
            // What the fast path served in the last poll counts as used in this one.
            self.sweep_accessed();
        }
        let mut busy = self.run_commands();
        // Doorbells that rang, or WQEs left in a ring because the engine's queue was
        // full last time.
        if self.hal.take_doorbells() || self.backlog {
            busy |= if self.icm.is_some() {
                self.fetch_pending()
            } else {
                self.fetch_wqes()
            };
        }
        busy |= self.receive(now);
        if self.fp_stopped || self.fp_due.is_some_and(|d| d <= self.now) {
            // A send queue the fast path fetches stopped, or its local ACK timer ran
            // out with no retry left: the engine takes the queue back (and then its own
            // timer, the same deadline, fires). A timeout with a retry left is the fast
            // path's (it went back in `receive`'s run, and its news count it).
            self.fp_sq_reclaim(now);
        }
        if self.engine.timer_due(now) {
            self.timers(now);
            busy = true;
        }
        if H::FASTPATH_PACES && self.engine.fastpath_pace_due() {
            // DCQCN changed a paced QP's rate (a CNP, a timer, the byte counter): its
            // pacing entry is written before the fast path runs again (§2.5).
            self.fp_write_paces();
            busy = true;
        }
        busy |= self.transmit(now, busy);
        busy |= self.write_completions();
        busy |= self.srq_events();
        busy
    }

    /// The engine's timers, when one is due. Out of line, as the poll's other rare
    /// paths: inlined, they made every poll save and set up registers for them.
    #[inline(never)]
    fn timers(&mut self, now: Instant) {
        // A QP whose retries ran out fails here (RETRY_EXC_ERR) and its WQEs are
        // flushed. It leaves the fast path first and the events waiting are handled
        // (`fp_settle`), as at a MODIFY_QP to ERR: on the SoC the hardware, which still
        // retires the QP's messages after the take-back, could take an ACK meanwhile and
        // write CQEs of WQEs the flush completes again (`docs/fastpath.md` §3.7). An
        // ACK handled there may save the QP: the refresh below (of the lines settled,
        // by slot) puts it back on.
        let mut settled = 0u64;
        if self.engine.fastpath_timeout_fails_any(now) {
            for slot in 0..self.qp_hi {
                if let Some(Some(q)) = self.qps.get(slot) {
                    let qpn = q.qpn;
                    if q.fp != FpState::Off && self.engine.fastpath_timeout_fails(qpn, now) {
                        self.fp_settle(qpn, true);
                        settled |= 1 << (slot % 64);
                    }
                }
            }
        }
        // A timer may have failed a QP (RETRY_EXC_ERR): its contexts change. A rewind
        // leaves them (its replays are descriptors), and so does every timer of the
        // usual kind: then no QP is looked at.
        if self.engine.handle_timeout(now) | (settled != 0) {
            for slot in 0..self.qp_hi {
                if let Some(Some(q)) = self.qps.get(slot) {
                    if q.fp != FpState::Off || settled >> (slot % 64) & 1 != 0 {
                        let qpn = q.qpn;
                        self.fp_refresh(qpn);
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Datapath

    fn receive(&mut self, now: Instant) -> bool {
        let (dma, dp) = self.hal.split();
        if let Some(fp) = dp.fastpath() {
            let ran = fp.run_at(dma, now.as_nanos());
            // Its news are read once, after the TX pass's run (`transmit`, always
            // reached then: this poll is busy).
            self.fp_news_due |= ran;
            self.fp_ran |= ran;
            return self.fp_events(now) | ran;
        }
        let mut any = false;
        loop {
            let (_, dp) = self.hal.split();
            let Some(n) = dp.receive(&mut self.rxbuf) else {
                break;
            };
            self.counters.frames_rx += 1;
            any = true;
            let verified = dp.verifies_icrc();
            let dest = self
                .icm
                .and_then(|_| dest_qpn(self.rxbuf.get(..n).unwrap_or(&[])));
            if !self.admit(dest) {
                continue;
            }
            let (dma, _) = self.hal.split();
            let frame = self.rxbuf.get(..n).unwrap_or(&[]);
            if verified {
                self.engine.handle_verified_packet(now, frame, dma);
            } else {
                self.engine.handle_packet(now, frame, dma);
            }
        }
        any
    }

    /// The engine's frames, while it has any and the datapath has room.
    #[inline(never)]
    fn send_frames(&mut self, now: Instant) -> bool {
        let mut any = false;
        while self.engine.tx_waiting() {
            let (dma, dp) = self.hal.split();
            // Only frames of priorities the datapath has room for are built: the
            // others stay in their QPs (a paused priority's full queue holds back no
            // other priority's frames).
            let blocked = dp.tx_blocked();
            if blocked == Priorities::ALL {
                break;
            }
            let Some(n) = self
                .engine
                .poll_transmit_except(now, &mut self.txbuf, dma, blocked)
            else {
                break;
            };
            let taken = dp.transmit(self.txbuf.get(..n).unwrap_or(&[]));
            if H::FASTPATH_PACES {
                if let (Some((qpn, len)), Some(fp)) =
                    (self.engine.fastpath_take_paced_sent(), dp.fastpath())
                {
                    fp.fw_paced_sent(qpn, len);
                    fp.pace_hold(qpn, self.engine.fastpath_resp_queued(qpn));
                }
            }
            // `tx_blocked` said yes; a datapath that then refuses loses the frame,
            // which the retransmission timer repairs, but it is a datapath bug.
            debug_assert!(taken, "datapath refused a frame after tx_blocked");
            self.counters.frames_tx += 1;
            any = true;
        }
        any
    }

    /// Sends what the engine has; `busy`: this poll already did something, which may
    /// have given the fast path work.
    fn transmit(&mut self, now: Instant, busy: bool) -> bool {
        // The descriptors and frames are built out of line: inlined into the poll, the
        // engine's frame and descriptor builders made every poll, idle ones too, save
        // and set up registers for them. (Without a fast path the engine's flag stays
        // set, since `fp_post` never runs its scan, which clears it: the call would
        // come at every poll.)
        let mut any = self.engine.fastpath_requests_waiting()
            && self.hal.datapath().fastpath().is_some()
            && self.fp_post(now);
        if self.engine.tx_waiting() {
            any |= self.send_frames(now);
        }
        if !(busy || any) {
            // The fast path ran at the start of this poll (`receive`) and nothing since
            // gave it anything to do.
            return false;
        }
        // The completions the engine made since the fast path last ran go into the host
        // rings first: a CQE the hardware writes next must not overtake them (§3.7).
        any |= self.write_completions();
        let (dma, dp) = self.hal.split();
        if let Some(fp) = dp.fastpath() {
            // Hardware beside the core was read at the start of this poll (`receive`),
            // and its counters are read when the host asks (`runs_by_itself`).
            let alone = fp.runs_by_itself();
            let ran = !alone && fp.run_at(dma, now.as_nanos());
            any |= ran;
            let news = ran || core::mem::take(&mut self.fp_news_due);
            // The model's counters move only when it works; they come with its news
            // when there are news to read.
            if core::mem::take(&mut self.fp_ran) && !news && !alone {
                set_fp_counters(&mut self.counters.fastpath, fp.counters());
            }
            if news {
                self.fp_news_due = false;
                self.fp_news();
                // A stopped queue is taken back at the next poll: it comes at once.
                any |= self.fp_stopped;
            }
        }
        any
    }

    // -----------------------------------------------------------------------------------
    // The fast path (docs/fastpath.md): contexts, descriptors, events

    /// Posts the request descriptors the engine has for QPs on the fast path.
    #[inline(never)]
    fn fp_post(&mut self, now: Instant) -> bool {
        let mut any = false;
        while self.engine.fastpath_requests_waiting() {
            let (_, dp) = self.hal.split();
            let Some(fp) = dp.fastpath() else {
                return any;
            };
            // A full ring still takes a FLUSH (it takes no slot): a rewind does not
            // wait behind the descriptors it makes stale.
            let took = if fp.tx_room() {
                self.engine.fastpath_poll_request(now, &mut self.txd)
            } else {
                self.engine.fastpath_poll_flush(now, &mut self.txd)
            };
            if !took {
                break;
            }
            // `tx_room` said yes, or it is a FLUSH: a refusal is a malformed descriptor,
            // which the retransmission timer repairs like a lost packet.
            let _ = fp.post_tx(zerocopy::transmute_ref!(&self.txd));
            if H::FASTPATH_PACES {
                if let Ok(m) = layout::decode_txd(zerocopy::transmute_ref!(&self.txd)) {
                    self.fp_pace_timer(now, m.qpn);
                }
            }
            self.counters.fp_descriptors += 1;
            self.fp_ran = true;
            any = true;
        }
        if any {
            // Posting may have run a LOCAL_INV.
            self.fp_sync_mrs();
        }
        any
    }

    /// Handles the fast path's events in order. Inlined into the poll (its idle cost;
    /// `fp_settle` has its own copy).
    #[inline(always)]
    fn fp_events(&mut self, now: Instant) -> bool {
        let mut any = false;
        loop {
            let (_, dp) = self.hal.split();
            let Some(fp) = dp.fastpath() else {
                break;
            };
            if !fp.poll_event(&mut self.event, &mut self.rxbuf) {
                break;
            }
            any = true;
            self.fp_ran = true;
            self.counters.fp_events += 1;
            self.fp_event(now);
        }
        // Every exception waiting is handled: the QPs held since may go. (Looked at
        // here: the release's call and register saves cost ~40 instructions at every
        // poll, nearly all of which have no QP held.)
        if !self.fp_held.is_empty() {
            self.fp_release();
        }
        if any {
            // An exception may have invalidated a key (SEND_WITH_INV).
            self.fp_sync_mrs();
        }
        any
    }

    /// The event in `self.event`, decoded and handled (`fp_events`). The decode is
    /// inlined into it: out of line it built the whole `Event` in memory, the fields
    /// the arm does not use too (~30 instructions an event more). This is out of line:
    /// `fp_events` has two copies (the poll's and `fp_settle`'s), and the decode
    /// inlined into the poll cost its frames and descriptors ~10 instructions each in
    /// registers.
    #[inline(never)]
    fn fp_event(&mut self, now: Instant) {
        let Ok(event) = layout::decode_event_words(&self.event) else {
            return;
        };
        let qpn = event.qpn();
        // A CE-marked request the hardware took (its own event, or the mark on its
        // MSG_DONE or READ): the notification point's, before the event's work, as the
        // engine alone runs it before the responder's. (Only the responder's events
        // carry the mark, so it never comes before a take-back.)
        if event.ce() {
            self.engine.fastpath_ce(now, qpn);
        }
        // The QP's line is looked up only by the kinds that need it (one look-up an
        // event): an EXCEPTION or an ACKED, whether the fast path fetches its send WQEs
        // (`sq_hw`) and is on; a MSG_DONE, whether it is on (`fp_msg_done`). READ,
        // ATOMIC, RNR, RD_DROP and CE go to the engine on their QPN alone.
        match event {
            Event::Exception {
                meta,
                frame_len,
                opcode,
                ..
            } => {
                let (fp, sq_hw) = self.fp_sq_of(qpn);
                if sq_hw && !is_request(opcode) {
                    // A response's exception, of a QP whose send WQEs the hardware
                    // fetches: the engine's requester must see it, so the send queue
                    // comes back to the engine first (§3.8). A request's exception is
                    // the responder's alone (its ACK, NAK, READ response or atomic
                    // reply is built from the receive side), and a received SEND's
                    // MSG_DONE too, so those leave the send queue with the hardware
                    // (taking it back and handing it over again cost ~1,000
                    // instructions of a ~4,000 exception). (The take-back changes
                    // neither what of the QP is on the fast path nor its line.)
                    self.fp_sq_take_back(qpn, now);
                }
                self.fp_exception(now, qpn, fp != FpState::Off, &meta, frame_len);
            }
            Event::MsgDone {
                byte_len,
                solicited,
                cqe,
                ..
            } => self.fp_msg_done(qpn, byte_len, solicited, cqe),
            Event::Acked {
                psn,
                read,
                cqe,
                gbn,
                atomic,
                ..
            } => {
                if self.fp_sq_of(qpn).1 {
                    // A response of a QP whose send WQEs the hardware fetches: the
                    // engine takes its send queue back first (§3.8).
                    self.fp_sq_take_back(qpn, now);
                }
                self.fp_acked(now, qpn, psn, read | atomic, cqe, gbn);
            }
            Event::Read {
                psn, va, rkey, len, ..
            } => self.engine.fastpath_read_taken(qpn, psn, va, rkey, len),
            Event::Atomic { psn, orig, .. } => self.engine.fastpath_atomic_taken(qpn, psn, orig),
            Event::Rnr { .. } => {
                self.engine.fastpath_rnr_sent(qpn);
                // A receive WQE posted while this event waited was not loaded then (a
                // receive post loads only while no event waits, `fp_load`): loaded
                // now, the SEND sent again after the RNR wait is the hardware's too.
                // (No MSG_DONE of the QP can wait behind it: nothing was loaded.)
                if let Ok(buf) = self.engine.fastpath_recv_next(qpn) {
                    self.fp_load(qpn, Ok(buf), false);
                }
            }
            Event::RdDropped { .. } => self.engine.fastpath_rd_dropped(),
            // DCQCN's reaction point (§2.5): the rate cut, or the byte counter's
            // increase events; the poll then writes the QP's pacing entry.
            Event::Cnp { .. } if H::FASTPATH_PACES => self.engine.fastpath_cnp(now, qpn),
            Event::ByteCounter { bytes, .. } if H::FASTPATH_PACES => {
                self.engine.fastpath_byte_counter(qpn, bytes)
            }
            Event::Cnp { .. } | Event::ByteCounter { .. } => {}
            // (Handled above.)
            Event::Ce { .. } => {}
        }
    }

    /// Writes the pacing entries (§2.5) of the QPs on the fast path whose rate DCQCN
    /// changed (a CNP, a timer, the byte counter), which ends the wait of their data
    /// for it. Out of line: rare (a paced QP's timer or CNP).
    #[inline(never)]
    fn fp_write_paces(&mut self) {
        while let Some((qpn, w)) = self.engine.fastpath_pace_write() {
            if self.fp_of(qpn) == FpState::Off {
                continue;
            }
            let (_, dp) = self.hal.split();
            if let Some(fp) = dp.fastpath() {
                fp.write_pace(qpn, &w);
            }
        }
    }

    /// An `ACKED` event (`fp_events`): the engine's completer runs, and an idle send
    /// queue goes to the hardware's WQE fetch. Out of line, so that the hand-over's
    /// line check and call are inlined into one copy (`fp_events` has two, the poll's
    /// and `fp_settle`'s).
    #[inline(never)]
    fn fp_acked(&mut self, now: Instant, qpn: Qpn, psn: Psn, placed: bool, cqe: bool, gbn: bool) {
        // (The engine says whether the QP's send queue is idle after the
        // response: the last of its sends may have completed.)
        let idle = if gbn {
            // EV_RFLAGS bit 3: a NAK sequence error the fast path took as
            // its Go-Back-N to PSN, whose rewind the WQE fetch left to the
            // firmware (the CQE writer had no room, §3.8): the engine takes
            // the NAK as its completer would, and rewinds now.
            self.engine.fastpath_nak(now, qpn, psn, cqe);
            self.engine.fastpath_sq_idle(qpn)
        } else {
            // `placed`: a READ response or an ATOMIC ACKNOWLEDGE whose data the
            // hardware wrote.
            self.engine.fastpath_acked(now, qpn, psn, placed, cqe)
        };
        if H::FASTPATH_PACES {
            self.fp_pace_timer(now, qpn);
        }
        if cqe {
            // The hardware wrote CQEs (§3.7): the host hears of them as of
            // the firmware's.
            self.raise(|e| e.set_completion(true));
        }
        if let Some(idle) = idle {
            if let Some((slot, ring)) = self.fp_sq_givable(qpn) {
                self.fp_sq_give(qpn, slot, ring, &idle);
            }
        }
    }

    /// A paced QP's local ACK timer after the engine handed out a message or took a
    /// response (§2.5): the engine alone starts it as a packet leaves, and the
    /// segmenter's pacer decides when that is (`Engine::fastpath_pace_timer`).
    fn fp_pace_timer(&mut self, now: Instant, qpn: Qpn) {
        let Some(fp) = self.hal.split().1.fastpath() else {
            return;
        };
        if let Some((next_at, sent)) = fp.pace_sent_to(qpn) {
            self.engine.fastpath_pace_timer(now, qpn, sent, next_at);
        }
    }

    /// Clears `held` in the receive context of the QPs `fp_write_back` left held, while
    /// no event waits (`FastPath::events_waiting`); those it cannot release yet wait for
    /// the next poll. Released after each exception instead, a QP whose next packet
    /// waited in the queue as an exception too (`held`, reason 10) had its later packets
    /// judged on a context without that packet: at a responder a request behind it out
    /// of sequence (a NAK, a Go-Back-N of a transfer that lost nothing), at a requester
    /// a response taken and its messages' CQEs written while the exception before it
    /// (which the engine then handled) completed them too. Only `held` changes: the
    /// hardware changes nothing else of a held QP. A QP whose responses the engine
    /// still has queued stays held (`fp_write_back`) and tracked. Out of line: rare
    /// (`fp_events` calls it only with some QP held).
    #[inline(never)]
    fn fp_release(&mut self) {
        let mut i = self.fp_held.len();
        while i > 0 {
            i -= 1;
            let Some(&qpn) = self.fp_held.get(i) else {
                break;
            };
            // Its responses still queued in the engine: held until they went out.
            if self.engine.fastpath_resp_queued(qpn) {
                continue;
            }
            let (_, dp) = self.hal.split();
            let Some(fp) = dp.fastpath() else {
                return;
            };
            if fp.events_waiting() {
                return;
            }
            // A QP taken off the fast path since (its entry went to another) had its
            // context written then.
            if self.fp_of(qpn) != FpState::Off {
                let (_, dp) = self.hal.split();
                let Some(fp) = dp.fastpath() else {
                    return;
                };
                let mut b = fp.read_rctx(qpn);
                // (a read may let the hardware take a frame: it is looked at again)
                if fp.events_waiting() {
                    return;
                }
                if layout::rctx_tag(&b) == qpn {
                    layout::release_rctx(&mut b);
                    // Held while the engine had its responses queued, written back
                    // then without `reads`: they went out, the hardware answers its
                    // READs again. (Else that waited for the QP's next request
                    // exception, which a SEND placed by the hardware is not.)
                    if self.engine.fastpath_recv_reads(qpn) {
                        layout::reads_rctx(&mut b);
                    }
                    fp.write_rctx(qpn, &b);
                }
            }
            self.fp_held.swap_remove(i);
        }
    }

    /// Handles the fast path's events waiting now, before the engine answers for QP
    /// `qpn` (QUERY_QP, MODIFY_QP) or, with `stop`, flushes or drops its work
    /// (MODIFY_QP to ERR or RESET, DESTROY_QP, a bad doorbell). Its send queue comes
    /// back from the hardware's WQE fetch too (§3.8).
    ///
    /// `stop`: the QP leaves the fast path first (`fp_take_off`: its contexts off, so
    /// the hardware takes none of its frames from then on), then the events are handled
    /// until none waits and the receive side is idle (`events_waiting`): a `MSG_DONE` or
    /// `ACKED` whose CQEs the writer wrote (§3.7) reaches the engine before the flush,
    /// which would complete those WQEs a second time, also when the hardware placed
    /// the SEND or took the ACK while the firmware was here (the SoC's fast path runs
    /// beside it; a frame in the check when its context went off keeps its verdict,
    /// and its event comes).
    #[inline(never)]
    fn fp_settle(&mut self, qpn: Qpn, stop: bool) {
        if stop {
            self.fp_take_off(qpn);
        }
        let mut now;
        loop {
            now = Instant::from_nanos(self.hal.now());
            self.fp_events(now);
            let (_, dp) = self.hal.split();
            if !stop || !dp.fastpath().is_some_and(|fp| fp.events_waiting()) {
                break;
            }
        }
        self.fp_sq_take_back(qpn, now);
    }

    /// What the fast path did while it ran: its counters, and from its WQE fetch (§3.8)
    /// the CQEs it wrote (they reach the host as the firmware's do) and its earliest
    /// local ACK deadline, kept for the poll's timer check and `poll_timeout`.
    fn fp_news(&mut self) {
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        let alone = fp.runs_by_itself();
        let news = fp.sq_news();
        // One that runs by itself has no counters in its news and keeps its own
        // deadlines (`FastPath::runs_by_itself`): ~30 instructions on the SoC.
        if !alone {
            if let Some(c) = news.counters {
                set_fp_counters(&mut self.counters.fastpath, c);
            }
            self.fp_deadline = news.deadline;
            self.fp_due = news.due;
        }
        if news.taken != 0 {
            self.counters.send_wqes += u64::from(news.taken);
            if news.sends != 0 {
                self.engine.fastpath_count_sends(news.sends);
            }
        }
        if news.naks != 0 || news.retries != 0 || news.rnr_naks != 0 {
            self.engine.fastpath_count_retries(
                news.naks,
                news.retries,
                news.timeouts,
                news.rnr_naks,
            );
        }
        if news.cqe {
            self.raise(|e| e.set_completion(true));
            if H::FASTPATH_PACES && news.cq_full {
                self.fp_cq_room();
            }
        }
        self.fp_stopped = news.stopped;
    }

    /// The send queues the fast path fetches that need the engine: one whose local ACK
    /// deadline passed (the engine takes it back with the same deadline, and its timer
    /// fires next) and, when the news said one stopped, one whose fetch stopped at a
    /// WQE it does not take (the firmware fetches from there on).
    #[inline(never)]
    fn fp_sq_reclaim(&mut self, now: Instant) {
        let stops = core::mem::take(&mut self.fp_stopped);
        for slot in 0..self.qp_hi {
            if let Some(Some(q)) = self.qps.get(slot) {
                if q.sq_hw {
                    let qpn = q.qpn;
                    let (_, dp) = self.hal.split();
                    let Some(fp) = dp.fastpath() else {
                        break;
                    };
                    let due = fp.sq_deadline(qpn).is_some_and(|d| d <= now.as_nanos())
                        || (stops && fp.sq_stopped(qpn));
                    if due {
                        self.fp_sq_take_back(qpn, now);
                    }
                }
            }
        }
        self.fp_news();
    }

    /// Takes QP `qpn`'s send queue back from the hardware's WQE fetch (§3.8), if it
    /// has it: the engine is told where the hardware's acknowledgements got to and gets
    /// the WQEs the hardware still holds, re-read from the host ring, as messages
    /// already handed out; from then on the firmware fetches the ring again.
    #[inline(never)]
    fn fp_sq_take_back(&mut self, qpn: Qpn, now: Instant) {
        let Some(slot) = self.line(qpn) else {
            return;
        };
        // Most events are of QPs the firmware fetches for. The line is changed in place
        // and the fetch given the few fields it reads: copying the whole line out and
        // back cost ~180 instructions a take-back.
        let Some(Some(q)) = self.qps.get_mut(slot) else {
            return;
        };
        if !q.sq_hw {
            return;
        }
        q.sq_hw = false;
        let sq = SqOf::of(q);
        let (_, dp) = self.hal.split();
        if let Some(back) = dp.fastpath().and_then(|fp| fp.sq_take_back(qpn)) {
            self.engine.fastpath_adopt_begin(qpn, back.base);
            let mut ci = back.done;
            // The hardware counted these at its doorbell.
            let counted = self.counters.send_wqes;
            // A WQE the engine refuses now was taken apart by the hardware already:
            // it completes in error, as the firmware's own fetch would make it.
            if self.fetch_sq_of(sq, &mut ci, back.ci).is_err() {
                self.counters.bad_doorbells += 1;
            }
            if let Some(Some(q)) = self.qps.get_mut(slot) {
                q.sq_ci = ci;
            }
            self.counters.send_wqes = counted;
            let deadline = back.deadline.map(Instant::from_nanos);
            self.engine
                .fastpath_adopt_end(now, qpn, back.una, deadline, back.spent);
            // WQEs past the hardware's index wait for the firmware's next fetch.
            self.backlog = true;
        }
        self.fp_news();
    }

    /// Hands QP `qpn`'s send queue to the hardware's WQE fetch (§3.8) when the engine
    /// holds none of its sends and the QP is wholly on the fast path (without an ICM:
    /// a QP leaving its line takes its send queue along).
    fn fp_sq_hand_over(&mut self, qpn: Qpn) {
        // The line's conditions first: most QPs asked here are not handed over.
        let Some((slot, ring)) = self.fp_sq_givable(qpn) else {
            return;
        };
        if let Some(idle) = self.engine.fastpath_sq_idle(qpn) {
            self.fp_sq_give(qpn, slot, ring, &idle);
        }
    }

    /// QP `qpn`'s line and send ring, if its send queue may go to the hardware's WQE
    /// fetch: the firmware fetches it now and the QP is wholly on the fast path.
    #[inline(always)] // two callers: `fp_acked` (every ACKED) and `fp_sq_hand_over`
    fn fp_sq_givable(&self, qpn: Qpn) -> Option<(usize, crate::fastpath::SqRing)> {
        if self.icm.is_some() {
            return None;
        }
        let slot = self.line(qpn)?;
        match self.qps.get(slot) {
            Some(Some(q)) if !q.sq_hw && q.fp == FpState::Full => Some((
                slot,
                crate::fastpath::SqRing {
                    ring: q.sq_ring,
                    log: q.sq_log,
                    ci: q.sq_ci,
                },
            )),
            _ => None,
        }
    }

    /// Hands QP `qpn`'s send queue (line `slot`, `ring`) to the hardware's WQE fetch,
    /// the engine having said it is `idle`.
    #[inline(always)] // two callers: `fp_acked` (every ACKED) and `fp_sq_hand_over`
    fn fp_sq_give(
        &mut self,
        qpn: Qpn,
        slot: usize,
        ring: crate::fastpath::SqRing,
        idle: &roce_core::fastpath::SqIdle,
    ) {
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        if fp.sq_hand_over(qpn, ring, idle) {
            if let Some(Some(l)) = self.qps.get_mut(slot) {
                l.sq_hw = true;
            }
            // WQEs already waiting in the ring reach the hardware at the next fetch.
            self.backlog = true;
        }
    }

    /// A send doorbell of a QP whose send WQEs the hardware fetches: the producer index
    /// goes to it (§3.8). When it stops at a WQE it does not take, the engine takes the
    /// send queue back and the firmware fetches the rest.
    fn fp_sq_doorbell(&mut self, q: &mut HostQp, pi: u32) -> Result<bool, BadDoorbell> {
        if pi == q.sq_ci {
            return Ok(false);
        }
        let rung = self.fp_sq_ring_unheard(q.qpn, pi);
        q.sq_ci = pi;
        if !rung.stopped {
            // Handing the index on is work even when the hardware takes the WQEs later
            // (the SoC's fetch runs beside the core): the poll counts as busy.
            return Ok(true);
        }
        // The line holds the QP as it was; `fp_sq_take_back` works on the line.
        let slot = self.line(q.qpn);
        if let Some(Some(l)) = slot.and_then(|s| self.qps.get_mut(s)) {
            *l = *q;
        }
        self.fp_sq_take_back(q.qpn, Instant::from_nanos(self.now));
        if let Some(Some(l)) = slot.and_then(|s| self.qps.get(s)) {
            *q = *l;
        }
        self.fetch_sq(q, pi).map(|_| true)
    }

    /// [`Self::fp_sq_ring`] unless the fast path runs by itself: then its fetch heard
    /// the host's doorbell itself (the SoC's) and what it did comes with its news. The
    /// look is the caller's: the call and its MR check cost ~40 instructions of a
    /// doorbell's poll on the SoC (issue 14: with the news of a deep send queue, 531).
    #[inline(always)]
    fn fp_sq_ring_unheard(&mut self, qpn: Qpn, pi: u32) -> crate::fastpath::SqRung {
        if self
            .hal
            .datapath()
            .fastpath()
            .is_some_and(|fp| fp.runs_by_itself())
        {
            return crate::fastpath::SqRung::default();
        }
        self.fp_sq_ring(qpn, pi)
    }

    /// Hands producer index `pi` of QP `qpn`'s send queue to the hardware's fetch.
    fn fp_sq_ring(&mut self, qpn: Qpn, pi: u32) -> crate::fastpath::SqRung {
        // The keys it checks are the engine's as of now (a LOCAL_INV may have run).
        if self.engine.memory_version() != self.mr_version {
            self.fp_sync_mrs();
        }
        let now = self.now;
        let (dma, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return crate::fastpath::SqRung {
                stopped: true,
                ..Default::default()
            };
        };
        let rung = fp.sq_doorbell(qpn, pi, now, dma);
        // Its new deadline is read with the poll's other news (`transmit`). Hardware
        // that runs by itself hears the doorbell itself and watches its own deadlines:
        // what it does with the WQEs comes with its news (~300 instructions on the
        // SoC's core, read now, found nothing yet).
        self.fp_news_due |= !fp.runs_by_itself();
        self.counters.send_wqes += u64::from(rung.taken);
        if rung.sends != 0 {
            self.engine.fastpath_count_sends(rung.sends);
        }
        rung
    }

    /// An EXCEPTION event: the engine handles the frame (from where the hardware
    /// stopped, if the QP is on the fast path), then the QP's contexts go back. Out of
    /// line: the common events (ACKED, MSG_DONE) stay cheap.
    #[inline(never)]
    fn fp_exception(
        &mut self,
        now: Instant,
        qpn: Qpn,
        on: bool,
        meta: &roce_core::wire::RxMeta,
        frame_len: u16,
    ) {
        self.counters.frames_rx += 1;
        let opcode = (meta.bth < frame_len)
            .then(|| self.rxbuf.get(usize::from(meta.bth)).copied())
            .flatten()
            .unwrap_or(0);
        if !self.admit(self.icm.map(|_| Dest::new(qpn, Opcode(opcode)))) {
            return;
        }
        let (dma, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        // A request is the responder's: the engine takes over where the hardware
        // stopped, and its receive state goes back after. Anything else (a response, a
        // CNP) leaves the receive state as it is: the hardware's stays, `held` cleared.
        let request = is_request(Opcode(opcode));
        if on && request {
            // (Only the state the hardware advanced is decoded: the rest of the
            // context is the engine's, ~100 instructions of field reads saved.)
            if let Ok(state) = layout::decode_rctx_state(&fp.read_rctx(qpn)) {
                let _ = self.engine.fastpath_load_recv_state(qpn, &state);
            }
        }
        if H::FASTPATH_PACES {
            // The engine may answer with data frames of its own (a duplicate READ's
            // responses): paced by the QP's entry as it stands (§2.5).
            if let Some(p) = fp.read_pacer(qpn) {
                self.engine.fastpath_pace_sync(qpn, p);
            }
        }
        let frame = self.rxbuf.get(..usize::from(frame_len)).unwrap_or(&[]);
        match Packet::from_meta(frame, meta) {
            Ok(pkt) => self.engine.handle_parsed(now, &pkt, dma),
            Err(_) => self.engine.handle_verified_packet(now, frame, dma),
        }
        if H::FASTPATH_PACES {
            // Its data frames go first (the engine's order), by the one pacer.
            let queued = self.engine.fastpath_resp_queued(qpn);
            if let Some(fp) = self.hal.split().1.fastpath() {
                fp.pace_hold(qpn, queued);
            }
        }
        if on {
            self.fp_write_back(now, qpn, request);
        }
        // An exception may end the QP (a fatal NAK): off the fast path. A QP off it
        // (its entry another's: a miss) may come on now.
        self.fp_refresh(qpn);
        // The response may have completed the QP's last send.
        self.fp_sq_hand_over(qpn);
    }

    /// A MSG_DONE event: the loaded receive WQE completes from the event alone (its
    /// length and SE), and the QP's next WQE is loaded ahead or `rq_empty` set.
    /// Inlined into `fp_event`: its call and ten register saves were ~37 of a
    /// MSG_DONE's, and the other events pay at most 1 for it since `fp_event` looks no
    /// line up for them.
    #[inline(always)]
    fn fp_msg_done(&mut self, qpn: Qpn, byte_len: u32, solicited: bool, cqe: bool) {
        // (Looked up here, not in `fp_event`: the kinds that need no line pay none.
        // The home line looked at here, the scan out of line (`line`): its call and the
        // check of its answer were ~10 instructions of the SoC's `MSG_DONE`.)
        let on = match self.qps.get(home_slot(qpn, QPS)) {
            Some(Some(q)) if q.qpn == qpn => q.fp,
            _ => self.fp_of(qpn),
        } != FpState::Off;
        // The engine reads no receive context for it (`Engine::fastpath_msg_done`: a
        // context read and decoded and loaded was ~250 instructions of the event's): a
        // QP on the fast path has the hardware's state taken at its next exception, as
        // after a WRITE the hardware placed; one taken off it since (its entry went to
        // another QP) left that state in the engine then.
        let next = self
            .engine
            .fastpath_msg_done(qpn, on, byte_len, solicited, cqe);
        if cqe {
            // The CQE writer wrote the WQE's CQE (§3.7): the host hears of it as of
            // the firmware's.
            self.raise(|e| e.set_completion(true));
        }
        // The next SEND's WQE, ahead of it. (No later MSG_DONE of the QP can wait: the
        // hardware had no buffer since this one's SEND ended.)
        if on {
            self.fp_load(qpn, next, false);
        }
    }

    /// Loads QP `qpn`'s head receive WQE into its receive context ahead of its next
    /// SEND (`docs/fastpath.md` §3.4, §7), so that the hardware places the SEND's first
    /// packet too: when the engine's head WQE qualifies (`fastpath_recv_next`) and the
    /// hardware has no message of the QP under way, nothing loaded and the QP not held
    /// (`FastPath::load_recv`, one step). At a receive post (`quiet`) only while no
    /// event waits: a MSG_DONE waiting names a WQE the hardware used that the engine
    /// has not completed yet, still its head.
    ///
    /// After a `MSG_DONE` (not `quiet`) an empty receive queue sets `rq_empty` instead
    /// (§3.4, "Receiver not ready"); a receive post clears it first, whether or not its
    /// WQE loads (the flag set with a WQE posted would NAK a SEND the engine places).
    fn fp_load_next(&mut self, qpn: Qpn, quiet: bool) {
        let next = self.engine.fastpath_recv_next(qpn);
        self.fp_load(qpn, next, quiet);
    }

    /// `fp_load_next` with the engine's answer (`fastpath_recv_next`)
    /// given: a `MSG_DONE` has it from `fastpath_msg_done`.
    ///
    /// The load carries the WQE's `wr_id` for the CQE writer (§3.7, "Receive CQEs")
    /// only while no completion of the receive CQ waits in the firmware (the engine's
    /// CQ or the stash): the hardware's CQE of the next SEND must not overtake one the
    /// firmware made earlier. Else the firmware writes that CQE too.
    ///
    /// Inlined (its callers pass `quiet` as a constant): out of line, its call, its
    /// register saves and the returns were ~30 instructions of a `MSG_DONE`'s.
    #[inline(always)]
    fn fp_load(&mut self, qpn: Qpn, next: Result<RecvBuf, Option<RnrTimer>>, quiet: bool) {
        let cqe = match &next {
            Ok(b) if !self.cq_pending(usize::from(b.cqe.cq)) => Some(b.cqe),
            _ => None,
        };
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        if quiet {
            fp.recv_rnr(qpn, None);
        }
        match next {
            Ok(buf) => {
                if !(quiet && fp.events_waiting()) {
                    fp.load_recv(qpn, Some((buf.addr, buf.len)), cqe);
                }
            }
            Err(Some(t)) if !quiet => {
                fp.recv_rnr(qpn, Some(t));
            }
            Err(_) => {}
        }
    }

    /// Hands QP `qpn`'s acknowledged PSN and receive context back to the hardware: the
    /// PSN first, then the context as the engine left it after a `request`, else the
    /// hardware's own. The QP is released (`held` cleared) only while no event waits
    /// (its next packets may wait behind as exceptions) and the engine has none of its
    /// responses queued (the hardware's answer to its next request would overtake
    /// them); else it stays held for `fp_release`.
    ///
    /// The PSN goes in before the release: after it, the hardware may take a response
    /// of the QP and move `una_psn` past it, which the old PSN written then moved back.
    /// A rewound QP's goes in its FLUSH (`docs/fastpath.md` §3.2), which reaches the
    /// hardware as one step with it: written apart, the new `una` opened the window for
    /// the stale descriptor in progress, whose packets went out before the FLUSH
    /// dropped it.
    fn fp_write_back(&mut self, now: Instant, qpn: Qpn, request: bool) {
        let sq_hw =
            matches!(self.line(qpn).and_then(|s| self.qps.get(s)), Some(Some(q)) if q.sq_hw);
        let resp_queued = self.engine.fastpath_resp_queued(qpn);
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        // While the hardware fetches the QP's sends (a request's exception leaves them
        // there), its `una` is the current one, the engine's an old one.
        if !sq_hw {
            match self.engine.fastpath_una_back(now, qpn, &mut self.txd) {
                Some(UnaBack::Flush) => {
                    // A FLUSH takes no ring slot: the ring takes it when full too.
                    let _ = fp.post_tx(zerocopy::transmute_ref!(&self.txd));
                    self.counters.fp_descriptors += 1;
                }
                Some(UnaBack::Una(una)) => {
                    let b = una.value().to_le_bytes();
                    fp.write_sctx(qpn, layout::SCTX_UNA, &b[..3]);
                }
                None => {}
            }
        }
        // Held too while the engine has responses of the QP queued: the hardware's ACK
        // or NAK of the QP's next request would overtake them.
        let mut held = resp_queued || fp.events_waiting();
        if request {
            if let Some(mut ctx) = self.engine.fastpath_recv_ctx(qpn) {
                ctx.held = held;
                fp.write_rctx(qpn, &layout::encode_rctx(&ctx));
            }
        } else if !held {
            // A response's or a CNP's exception changed no receive state: the
            // hardware's own goes back. (A read may let the hardware take a frame.)
            let mut b = fp.read_rctx(qpn);
            held = fp.events_waiting();
            if !held {
                layout::release_rctx(&mut b);
                fp.write_rctx(qpn, &b);
            }
        }
        let tracked = self.fp_held.iter().position(|&q| q == qpn);
        match (held, tracked) {
            // No room: the QP stays held, and its next packet's exception tries again.
            (true, None) => {
                let _ = self.fp_held.push(qpn);
            }
            (false, Some(i)) => {
                self.fp_held.swap_remove(i);
            }
            _ => {}
        }
    }

    /// Puts QP `qpn` on the fast path as far as its state allows (RTR: receive side;
    /// RTS, SQD: both), or takes it off, writing the contexts that change.
    ///
    /// The fast path's context tables are a cache (`docs/scale.md`): QP `qpn` can be on
    /// it only in entry `qpn % ctx_entries()`. Coming on, it takes that entry from the
    /// resident QP holding it if that one has no send WQE (it goes back to the firmware,
    /// its hardware state read back); a holder with sends keeps the entry, and `qpn`
    /// stays with the firmware until a later refresh (its next exception). A QP with
    /// send WQEs comes on for its receive side only: its requester moves to descriptors
    /// once it has nothing under way.
    #[inline(never)]
    fn fp_refresh(&mut self, qpn: Qpn) {
        let Some(slot) = self.line(qpn) else {
            return;
        };
        let Some(Some(now)) = self.qps.get(slot).map(|q| q.as_ref().map(|q| q.fp)) else {
            return;
        };
        // Whether the state changes, before anything is built or copied: it rarely
        // does (this runs after every exception and for every QP at a timer).
        let Some((send, recv)) = self.engine.fastpath_sides(qpn) else {
            return;
        };
        let want = if send && (now == FpState::Full || !self.engine.qp_has_sends(qpn)) {
            FpState::Full
        } else if recv {
            FpState::Recv
        } else {
            FpState::Off
        };
        if want != now {
            self.fp_set(qpn, slot, want);
        }
    }

    /// Moves QP `qpn` (line `slot`) to fast-path state `want`: [`Nic::fp_refresh`]
    /// once its look found the state changes, [`Nic::fp_take_off`] to `Off`.
    #[inline(never)]
    fn fp_set(&mut self, qpn: Qpn, slot: usize, want: FpState) {
        let Some(Some(mut q)) = self.qps.get(slot).copied() else {
            return;
        };
        if want == q.fp {
            return;
        }
        let (Some(mut sctx), Some(mut rctx)) = (
            self.engine.fastpath_send_ctx(qpn),
            self.engine.fastpath_recv_ctx(qpn),
        ) else {
            return;
        };
        if q.fp == FpState::Off && !self.fp_claim_entry(qpn) {
            return;
        }
        if q.sq_hw {
            // Leaving Full: the engine takes the send queue back first.
            self.fp_sq_take_back(qpn, Instant::from_nanos(self.now));
            let Some(Some(l)) = self.qps.get(slot).copied() else {
                return;
            };
            q = l;
        }
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        if q.fp != FpState::Off {
            // The hardware's receive state is the current one: the engine takes it.
            if let Ok(ctx) = layout::decode_rctx(&fp.read_rctx(qpn)) {
                let _ = self.engine.fastpath_load_recv(qpn, &ctx);
                rctx = ctx;
            }
        }
        sctx.valid = want == FpState::Full;
        if want == FpState::Off {
            rctx.on = false;
            rctx.held = false;
            fp.write_rctx(qpn, &layout::encode_rctx(&rctx));
        } else if q.fp == FpState::Off {
            fp.write_rctx(qpn, &layout::encode_rctx(&rctx));
        }
        // The engine's pacer so far: the segmenter's from here (§2.5).
        if H::FASTPATH_PACES && want != FpState::Off {
            fp.set_pace(qpn, self.engine.fastpath_pace(qpn).as_ref());
        }
        fp.write_sctx(qpn, 0, &layout::encode_sctx(&sctx));
        fp.set_send_cq(qpn, sctx.valid.then_some(q.send_cq));
        // (Off: its pacing entry goes once the send context is off.)
        if H::FASTPATH_PACES && want == FpState::Off {
            fp.set_pace(qpn, None);
        }
        let _ = self.engine.set_fastpath(qpn, sctx.valid);
        q.fp = want;
        if let Some(s) = self.qps.get_mut(slot) {
            *s = Some(q);
        }
        if sctx.valid {
            self.fp_sq_hand_over(qpn);
        }
    }

    /// Makes QP `qpn`'s fast-path context entry free for it: false while another
    /// resident QP on the fast path holds it and has send WQEs; a holder without takes
    /// its QP back to the firmware (counted as an eviction).
    fn fp_claim_entry(&mut self, qpn: Qpn) -> bool {
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return false;
        };
        let entries = fp.ctx_entries().max(1) as u32;
        let entry = qpn.value() % entries;
        let holder = self
            .qps
            .iter()
            .take(self.qp_hi)
            .flatten()
            .find(|h| h.qpn != qpn && h.fp != FpState::Off && h.qpn.value() % entries == entry)
            .map(|h| h.qpn);
        let Some(holder) = holder else {
            return true;
        };
        if self.engine.qp_has_sends(holder) {
            return false;
        }
        self.fp_take_off(holder);
        self.counters.fp_ctx_cache_evictions += 1;
        true
    }

    /// Takes resident QP `qpn` off the fast path whatever its state (its entry is
    /// wanted, or the QP leaves for the ICM): the engine takes the hardware's receive
    /// state, the entry is switched off (its queued descriptors dropped).
    fn fp_take_off(&mut self, qpn: Qpn) {
        if let Some(slot) = self.line(qpn) {
            self.fp_set(qpn, slot, FpState::Off);
        }
    }

    /// Rewrites the fast path's MR table when the engine's memory table changed. The
    /// look is inlined into the callers (every poll that handled an event makes it):
    /// the rewrite's call with its register saves cost ~30 instructions for a table
    /// that had not changed.
    #[inline(always)]
    fn fp_sync_mrs(&mut self) {
        if self.engine.memory_version() != self.mr_version {
            self.fp_write_mrs();
        }
    }

    /// [`Nic::fp_sync_mrs`]'s rewrite.
    #[inline(never)]
    fn fp_write_mrs(&mut self) {
        let version = self.engine.memory_version();
        let (_, dp) = self.hal.split();
        let Some(fp) = dp.fastpath() else {
            return;
        };
        self.mr_version = version;
        let n = fp.mr_entries().max(1);
        for i in 0..n {
            let entry = self
                .engine
                .memory()
                .regions()
                .find(|m| (m.key >> 8) as usize % n == i)
                .map(MrEntry::of)
                .unwrap_or_default();
            fp.write_mr(i, &layout::encode_mr(&entry));
        }
        // A receive buffer loaded ahead of its SEND was checked against the old table
        // (its WQE's L_Key): each goes back, and comes again if its WQE still
        // qualifies (the engine's scatter would fail it otherwise).
        if self.engine.fastpath_sends() {
            for slot in 0..self.qp_hi {
                if let Some(Some(q)) = self.qps.get(slot) {
                    if q.fp != FpState::Off {
                        let qpn = q.qpn;
                        let (_, dp) = self.hal.split();
                        if let Some(fp) = dp.fastpath() {
                            if fp.load_recv(qpn, None, None) {
                                self.fp_load_next(qpn, true);
                            }
                        }
                    }
                }
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Send and receive queues

    #[inline(never)] // (a doorbell's path, out of the poll as its other rare paths)
    fn fetch_wqes(&mut self) -> bool {
        let mut any = false;
        self.backlog = false;
        for slot in 0..self.qp_hi {
            // Only what the look needs: a line is not copied whole unless its rings
            // hold something new (most of them, at a doorbell of one).
            let Some(Some(q)) = self.qps.get(slot) else {
                continue;
            };
            let (db_record, qpn, cis, sq_hw) = (q.db_record, q.qpn, (q.sq_ci, q.rq_ci), q.sq_hw);
            let pis = if db_record != 0 {
                self.read_db_record(db_record)
            } else {
                Some(self.reg_pis(qpn.value().wrapping_sub(QPN_BASE)))
            };
            let Some(pis) = pis.filter(|&pis| pis != cis) else {
                continue;
            };
            if sq_hw && pis.1 == cis.1 {
                // Only a send doorbell of a QP whose WQEs the hardware fetches: the
                // index goes to it, the line is not copied.
                let rung = self.fp_sq_ring_unheard(qpn, pis.0);
                if let Some(Some(l)) = self.qps.get_mut(slot) {
                    l.sq_ci = pis.0;
                }
                // work, whatever the hardware took yet (see `fp_sq_doorbell`)
                any = true;
                if !rung.stopped {
                    continue;
                }
                // It stopped at a WQE it does not take: the firmware fetches from
                // there (a bad doorbell fails the QP there too).
                self.fp_sq_take_back(qpn, Instant::from_nanos(self.now));
            }
            any |= self.fetch_qp(slot, pis);
        }
        any | self.fetch_gsi() | self.fetch_srqs()
    }

    /// Fetches the GSI QP's rings (its doorbell registers: it is never in the ICM).
    /// Looked for before the call, as the SRQs are (`fetch_srqs`): most doorbells are
    /// of a NIC without one, ~15 instructions of a doorbell's poll on the SoC.
    #[inline(always)]
    fn fetch_gsi(&mut self) -> bool {
        self.gsi.is_some() && self.fetch_gsi_now()
    }

    #[inline(never)]
    fn fetch_gsi_now(&mut self) -> bool {
        let Some(mut q) = self.gsi else {
            return false;
        };
        let pis = self.reg_pis(reg::GSI_QP_INDEX);
        let any = self.fetch_host(&mut q, pis);
        self.gsi = Some(q);
        any
    }

    /// Fetches what line `slot`'s rings hold up to the producer indexes `pis` (send,
    /// receive). Returns whether any was taken.
    fn fetch_qp(&mut self, slot: usize, pis: (u32, u32)) -> bool {
        let Some(Some(mut q)) = self.qps.get(slot).copied() else {
            return false;
        };
        let any = self.fetch_host(&mut q, pis);
        // Only a line that took WQEs is kept for this poll: one whose queues are full
        // (WQEs wait in its rings) stays evictable.
        if let Some(f) = self.fetched.get_mut(slot).filter(|_| any) {
            *f = self.tick;
        }
        if let Some(s) = self.qps.get_mut(slot) {
            *s = Some(q);
        }
        any
    }

    /// Fetches QP `q`'s rings up to the producer indexes `pis`; notes a backlog when
    /// something stays.
    fn fetch_host(&mut self, q: &mut HostQp, (sq_pi, rq_pi): (u32, u32)) -> bool {
        let mut any = false;
        if q.srq && q.rq_ci != rq_pi {
            // A receive doorbell of a QP on an SRQ (ibv_post_recv fails there): ignored
            // and counted, since its receive ring may be no memory of the host's at all
            // (the `abi` fuzz target's find).
            self.counters.bad_doorbells += 1;
            q.rq_ci = rq_pi;
        }
        let sq = if q.sq_hw {
            self.fp_sq_doorbell(q, sq_pi)
        } else {
            self.fetch_sq(q, sq_pi)
        };
        let rq = if q.srq {
            Ok(false)
        } else {
            self.fetch_rq(q, rq_pi)
        };
        for fetched in [sq, rq] {
            any |= fetched.unwrap_or_else(|BadDoorbell| self.fail_qp(q.qpn));
        }
        self.backlog |= q.sq_ci != sq_pi || q.rq_ci != rq_pi;
        any
    }

    /// The producer indexes in doorbell registers of QP index `index`.
    fn reg_pis(&mut self, index: u32) -> (u32, u32) {
        (
            self.hal.reg_read(reg::sq_db(index)),
            self.hal.reg_read(reg::rq_db(index)),
        )
    }

    /// Takes the entries of a host ring from `*ci` up to the producer index `pi`, each
    /// read into the buffer `buf` gives (beside the DMA it is read with) and handed, by
    /// its address, to `post`, which decodes it from there; an entry `post` refuses (the
    /// engine's queue is full) stays in the ring for a later poll. Returns whether any
    /// was taken, or [`BadDoorbell`] (having skipped to the producer index) when the
    /// index claims more entries than the ring holds.
    fn fetch_ring<T: FromBytes + IntoBytes + Immutable>(
        &mut self,
        pi: u32,
        (ring, log): (u64, u8),
        ci: &mut u32,
        buf: fn(&mut Self) -> (&mut H::Dma, &mut T),
        mut post: impl FnMut(&mut Self, u64) -> bool,
    ) -> Result<bool, BadDoorbell> {
        if !fits(pi, *ci, log) {
            *ci = pi;
            return Err(BadDoorbell);
        }
        let mut any = false;
        while *ci != pi {
            let addr = slot_addr(ring, log, *ci, core::mem::size_of::<T>());
            let (dma, entry) = buf(self);
            if dma.read(addr, entry.as_mut_bytes()).is_err() {
                self.counters.dma_errors += 1;
                break;
            }
            if !post(self, addr) {
                break;
            }
            *ci = ci.wrapping_add(1);
            any = true;
        }
        Ok(any)
    }

    /// A QP whose doorbell lied: nothing in its rings can be trusted, so it goes to the
    /// error state (its posted work flushes) and the host hears `QP_FATAL`, as
    /// `IBV_EVENT_QP_FATAL`. Returns true (something happened).
    fn fail_qp(&mut self, qpn: Qpn) -> bool {
        self.fp_settle(qpn, true);
        self.counters.bad_doorbells += 1;
        let _ = self.engine.modify_qp(qpn, &QpAttr::to_state(QpState::Err));
        self.hal.reg_write(reg::EVENT_QPN, qpn.value());
        self.raise(|e| e.set_qp_fatal(true));
        true
    }

    fn fetch_sq(&mut self, q: &mut HostQp, pi: u32) -> Result<bool, BadDoorbell> {
        self.fetch_sq_of(SqOf::of(q), &mut q.sq_ci, pi)
    }

    /// [`Nic::fetch_sq`] of the send queue `sq` from index `ci` (moved as it fetches).
    fn fetch_sq_of(&mut self, sq: SqOf, ci: &mut u32, pi: u32) -> Result<bool, BadDoorbell> {
        let SqOf {
            qpn,
            ud,
            send_cq,
            ring,
        } = sq;
        self.fetch_ring(
            pi,
            ring,
            ci,
            |nic| (nic.hal.dma(), &mut nic.sq_wqe),
            |nic, at| {
                let wqe = &nic.sq_wqe;
                let (wr_id, opcode) = (wqe.wr_id.get(), wqe.opcode);
                // (Decoded in place: moved out of `to_wr`'s `Result`, the ~160-byte WR was
                // copied once per WQE fetched, ~230 instructions.)
                let mut wr = SendWr::new(0, WrOp::Send);
                let result = match wqe.decode_wr(ud, at, &mut wr) {
                    Ok(()) => nic.engine.post_send(qpn, &wr),
                    Err(DecodeError(reason)) => Err(EngineError::InvalidWr { reason }),
                };
                match result {
                    Ok(()) => nic.counters.send_wqes += 1,
                    // The engine's queue is full: leave the WQE in the ring for later.
                    Err(EngineError::QueueFull { .. }) => return false,
                    Err(e) => {
                        // The verbs call would have failed synchronously; here the WQE is
                        // already posted, so it completes in error instead of vanishing.
                        nic.counters.bad_wqes += 1;
                        let status = match e {
                            EngineError::Memory(_) => WcStatus::LocProtErr,
                            _ => WcStatus::LocQpOpErr,
                        };
                        let mut wc = WorkCompletion::new(wr_id, qpn, WcOpcode::Send, status);
                        wc.opcode = roce_core::transport::WrOpcode::from_u8(opcode)
                            .map_or(WcOpcode::Send, |o| o.wc_opcode());
                        nic.push_cqe(send_cq, wc);
                    }
                }
                true
            },
        )
    }

    fn fetch_rq(&mut self, q: &mut HostQp, pi: u32) -> Result<bool, BadDoorbell> {
        let qpn = q.qpn;
        let any = self.fetch_ring(
            pi,
            (q.rq_ring, q.rq_log),
            &mut q.rq_ci,
            |nic| (nic.hal.dma(), &mut nic.rq_wqe),
            |nic, _| {
                match nic.rq_wqe.to_wr().map(|wr| nic.engine.post_recv(qpn, &wr)) {
                    Ok(Ok(())) => nic.counters.recv_wqes += 1,
                    Ok(Err(EngineError::QueueFull { .. })) => return false,
                    // A receive WQE that cannot be posted is host misuse; it is counted and
                    // skipped (the verbs call would have returned an error).
                    _ => nic.counters.bad_wqes += 1,
                }
                true
            },
        )?;
        // The QP's next SEND may find its WQE loaded now.
        if any && q.fp != FpState::Off {
            self.fp_load_next(qpn, true);
        }
        Ok(any)
    }

    // -----------------------------------------------------------------------------------
    // Completions

    /// Writes the completions the engine has into the host rings. Called twice a poll
    /// (before the fast path runs again, and at the end): the look is inlined, the work
    /// is not.
    #[inline(always)]
    fn write_completions(&mut self) -> bool {
        // Nothing new from the engine and nothing left over from the last look (a full
        // host ring, a stashed completion): no CQ to visit.
        if !(self.engine.take_completion_news() || core::mem::take(&mut self.cq_left)) {
            return false;
        }
        self.write_completions_now()
    }

    #[inline(never)]
    fn write_completions_now(&mut self) -> bool {
        // A local operation of a QP the fast path does not carry (LOCAL_INV, a window's
        // bind, a REG_MR) runs wherever the engine looks for its next request (the
        // transmit pass, a frame the host pulls) and changes the keys: the hardware's
        // table follows before its completion reaches the host, so that no WRITE under
        // a key the host was told is invalid is placed after it.
        self.fp_sync_mrs();
        let mut any = false;
        for c in 0..self.cq_hi {
            // Most polls have nothing for most CQs: look before copying the CQ out.
            let idle = !matches!(self.cqs.get(c), Some(Some(_))) || !self.cq_pending(c);
            if idle {
                continue;
            }
            let Some(mut cq) = self.cq_out(c) else {
                continue;
            };
            loop {
                // Nothing left (no stash, none in the engine's CQ, none owed to it):
                // the look the loop would take finds nothing either (the room's read
                // and an empty poll: ~60 instructions of a MSG_DONE's on the SoC).
                if !self.cq_pending(c) {
                    break;
                }
                if !self.cq_has_room(&cq, c) {
                    if !self.stashed(c) {
                        if let Some(wc) = self.engine.poll_completion(CqHandle(c as u16)) {
                            // The host ring is full and the engine has more: overflow.
                            self.stash(c, wc);
                        }
                    }
                    if self.stashed(c) && !cq.overflowed {
                        cq.overflowed = true;
                        self.counters.cq_overflows += 1;
                        // The detail first: a host that sees the bit reads the CQN.
                        self.hal.reg_write(reg::EVENT_CQN, c as u32);
                        self.raise(|e| e.set_cq_error(true));
                    }
                    break;
                }
                let wc = match self.take_stash(c) {
                    Some(wc) => wc,
                    None => match self.engine.poll_completion(CqHandle(c as u16)) {
                        Some(wc) => wc,
                        None => break,
                    },
                };
                if !self.write_cqe(c, &mut cq, &wc) {
                    // The CQE writer filled the ring meanwhile: the next poll looks again.
                    self.stash(c, wc);
                    break;
                }
                any = true;
            }
            self.cq_left |= self.cq_pending(c);
            self.cq_in(c, cq);
        }
        if any {
            self.raise(|e| e.set_completion(true));
        }
        any
    }

    fn cq_has_room(&mut self, cq: &HostCq, c: usize) -> bool {
        let host_ci = self.hal.reg_read(reg::cq_db(c as u32));
        cq.pi.wrapping_sub(host_ci) < (1u32 << cq.log_depth)
    }

    /// Writes one CQE (used for completions the runtime makes itself).
    fn push_cqe(&mut self, c: u16, wc: WorkCompletion) {
        let Some(mut cq) = self.cq_out(usize::from(c)) else {
            return;
        };
        let written =
            self.cq_has_room(&cq, usize::from(c)) && self.write_cqe(usize::from(c), &mut cq, &wc);
        if !written && !self.stashed(usize::from(c)) {
            self.stash(usize::from(c), wc);
            self.cq_left = true;
        }
        self.cq_in(usize::from(c), cq);
    }

    /// Whether CQ `c` has completions to write: one stashed, or the engine's.
    #[inline(always)]
    fn cq_pending(&self, c: usize) -> bool {
        self.stashed(c) || self.engine.completions_waiting(CqHandle(c as u16))
    }

    /// Whether CQ `c` has a completion stashed (`cq_stash`).
    fn stashed(&self, c: usize) -> bool {
        matches!(self.cq_stash.get(c), Some(Some(_)))
    }

    /// Stashes `wc` for CQ `c` (`cq_stash`).
    fn stash(&mut self, c: usize, wc: WorkCompletion) {
        if let Some(s) = self.cq_stash.get_mut(c) {
            *s = Some(wc);
        }
    }

    /// CQ `c`'s stashed completion, taken.
    fn take_stash(&mut self, c: usize) -> Option<WorkCompletion> {
        self.cq_stash.get_mut(c)?.take()
    }

    /// CQ `c`'s state for writing CQEs into its ring: the producer index is the fast
    /// path's CQE writer's when it holds the CQ (`docs/fastpath.md` §3.7: one producer
    /// index per ring).
    fn cq_out(&mut self, c: usize) -> Option<HostCq> {
        let mut cq = (*self.cqs.get(c)?)?;
        // (Only the producer index: the whole ring entry, five words read through the
        // SoC's port, cost its MSG_DONE ~170 instructions more.)
        let (_, dp) = self.hal.split();
        if let Some(pi) = dp.fastpath().and_then(|f| f.cq_pi(u16::try_from(c).ok()?)) {
            cq.pi = pi;
        }
        Some(cq)
    }

    /// Stores CQ `c`'s state after [`Self::cq_out`]: the CQE writer gets the producer
    /// index back, and the host's consumer index as it is now (its room).
    /// (A CQE writer with a port, `FastPath::cqe_port`, keeps its producer index to
    /// itself: each post carries the consumer index instead.)
    fn cq_in(&mut self, c: usize, cq: HostCq) {
        if self.hw_cqe_port() {
            // nothing to hand back
        } else if let Some(mut r) = self.hw_cq(c) {
            r.pi = cq.pi;
            r.ci = self.hal.reg_read(reg::cq_db(c as u32));
            self.set_hw_cq(c, Some(r));
        }
        if let Some(s) = self.cqs.get_mut(c) {
            *s = Some(cq);
        }
    }

    /// The host's consumer indexes to the fast path's CQE writer, after it wrote CQEs
    /// once its rings are half full by the count it has (`fp_news`, `SqNews::cq_full`):
    /// the room it counts on is otherwise the host's as the firmware last wrote a CQE
    /// itself, and a run of CQEs the writer alone wrote (a paced QP's, whose CNPs and
    /// ACKs are the hardware's too, §2.5) found the ring full by that stale count: its
    /// retirement became an `ACKED` event and the send queue's take-back (2,607
    /// instructions in the QEMU self-test). Out of line: rare.
    #[inline(never)]
    fn fp_cq_room(&mut self) {
        if self.hw_cqe_port() {
            return; // (each post carries the consumer index)
        }
        for c in 0..CQS {
            if let Some(mut r) = self.hw_cq(c) {
                r.ci = self.hal.reg_read(reg::cq_db(c as u32));
                self.set_hw_cq(c, Some(r));
            }
        }
    }

    /// CQ `c`'s ring as the fast path's CQE writer holds it, if it does.
    fn hw_cq(&mut self, c: usize) -> Option<CqRing> {
        let (_, dp) = self.hal.split();
        dp.fastpath()?.cq_ring(u16::try_from(c).ok()?)
    }

    /// Hands CQ `c`'s ring to the fast path's CQE writer (None: takes it back); false
    /// when there is no writer or it has no room for the CQ.
    fn set_hw_cq(&mut self, c: usize, ring: Option<CqRing>) -> bool {
        let (_, dp) = self.hal.split();
        match (dp.fastpath(), u16::try_from(c)) {
            (Some(f), Ok(c)) => f.set_cq_ring(c, ring),
            _ => false,
        }
    }

    /// Whether the fast path's CQE writer takes the firmware's CQEs through its port.
    fn hw_cqe_port(&mut self) -> bool {
        let (_, dp) = self.hal.split();
        dp.fastpath().is_some_and(|f| f.cqe_port())
    }

    /// Writes one CQE into CQ `c` (whose ring has room by `cq.pi`): through the CQE
    /// writer's port when it has one and holds the CQ, else by DMA. False: the writer
    /// found no room (it wrote CQEs of its own meanwhile; `cq.pi` is its index now).
    fn write_cqe(&mut self, c: usize, cq: &mut HostCq, wc: &WorkCompletion) -> bool {
        if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushErr {
            // A QP that fails on its own is reported like IBV_EVENT_QP_FATAL (again,
            // harmlessly, should the writer refuse this CQE and the next poll retry it).
            self.hal.reg_write(reg::EVENT_QPN, wc.qp_num.value());
            self.raise(|e| e.set_qp_fatal(true));
        }
        let cqe = Cqe::from_wc(wc, cq.pi, cq.log_depth);
        let post = match u16::try_from(c) {
            Ok(c16) if self.hw_cqe_port() => {
                let ci = self.hal.reg_read(reg::cq_db(c as u32));
                let (_, dp) = self.hal.split();
                let bytes: &[u8; 32] = zerocopy::transmute_ref!(&cqe);
                dp.fastpath().and_then(|f| f.post_cqe(c16, bytes, ci))
            }
            _ => None,
        };
        match post {
            Some(p) => {
                cq.pi = p.pi;
                if !p.written {
                    return false;
                }
            }
            None => {
                let addr = slot_addr(cq.ring, cq.log_depth, cq.pi, core::mem::size_of::<Cqe>());
                if self.hal.dma().write(addr, cqe.as_bytes()).is_err() {
                    self.counters.dma_errors += 1;
                }
                cq.pi = cq.pi.wrapping_add(1);
            }
        }
        self.counters.cqes += 1;
        true
    }

    fn raise(&mut self, set: impl FnOnce(&mut EventStatus)) {
        let mut e = EventStatus(self.hal.reg_read(reg::EVENT_STATUS));
        set(&mut e);
        self.hal.reg_write(reg::EVENT_STATUS, e.0);
    }

    // -----------------------------------------------------------------------------------
    // Commands

    fn run_commands(&mut self) -> bool {
        let pi = self.hal.reg_read(reg::CMDQ_PI);
        if pi == self.cmdq_ci {
            return false;
        }
        self.run_commands_to(pi)
    }

    /// Runs the commands up to the producer index `pi`. Out of line: inlined into the
    /// poll, the command path made every poll, idle ones too, save and set up registers
    /// for it.
    #[inline(never)]
    fn run_commands_to(&mut self, pi: u32) -> bool {
        let base = u64::from(self.hal.reg_read(reg::CMDQ_BASE_LO))
            | (u64::from(self.hal.reg_read(reg::CMDQ_BASE_HI)) << 32);
        let log = self
            .hal
            .reg_read(reg::CMDQ_LOG_DEPTH)
            .min(u32::from(MAX_LOG_DEPTH)) as u8;
        if !fits(pi, self.cmdq_ci, log) {
            // More commands than the queue holds: a driver bug. Running 2^32 entries of
            // whatever the ring holds would stall the NIC; the range is skipped instead.
            self.counters.bad_doorbells += 1;
            self.cmdq_ci = pi;
            self.hal.reg_write(reg::CMDQ_CI, pi);
            return true;
        }
        while self.cmdq_ci != pi {
            let addr = slot_addr(base, log, self.cmdq_ci, core::mem::size_of::<CmdEntry>());
            let mut entry = CmdEntry::new_zeroed();
            if self.hal.dma().read(addr, entry.as_mut_bytes()).is_err() {
                self.counters.dma_errors += 1;
                break;
            }
            let status = self.execute(&mut entry);
            self.fp_sync_mrs();
            self.counters.commands += 1;
            if status != CmdStatus::Ok {
                self.counters.command_errors += 1;
            }
            // The ABI's order: everything else first, the status last, so a host that
            // polls the entry while a DMA engine writes it (a word at a time, in
            // address order, on the SoC) never sees a status before its result.
            entry.status = U32::new(CmdStatus::Pending as u32);
            let status_at = core::mem::offset_of!(CmdEntry, status);
            let bytes = entry.as_bytes();
            let (head, rest) = bytes.split_at(status_at);
            let tail = rest.get(4..).unwrap_or(&[]);
            let status_word = (status as u32).to_le_bytes();
            let dma = self.hal.dma();
            let ok = dma.write(addr, head).is_ok()
                && dma.write(addr + status_at as u64 + 4, tail).is_ok()
                && dma.write(addr + status_at as u64, &status_word).is_ok();
            if !ok {
                self.counters.dma_errors += 1;
            }
            self.cmdq_ci = self.cmdq_ci.wrapping_add(1);
            self.hal.reg_write(reg::CMDQ_CI, self.cmdq_ci);
        }
        self.raise(|e| e.set_cmd_done(true));
        true
    }

    /// Executes one command. On any error nothing has changed.
    fn execute(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let Some(op) = CmdOp::from_u16(e.opcode.get()) else {
            return CmdStatus::BadOpcode;
        };
        let handle = abi::payload::<abi::HandleArg>(e).handle.get();
        // A command naming a QP finds it resident (brought in from the ICM if need be).
        match op {
            CmdOp::ModifyQp => {
                let qpn = abi::payload::<abi::QpAttrArg>(e).qpn.get();
                self.resident(Qpn::new(qpn));
            }
            CmdOp::QueryQp | CmdOp::DestroyQp => {
                self.resident(Qpn::new(handle));
            }
            _ => {}
        }
        let result = match op {
            CmdOp::QueryDevice => {
                abi::set_payload(e, &self.device_attr());
                Ok(())
            }
            CmdOp::AllocPd => self
                .engine
                .alloc_pd()
                .map(|pd| e.out = U32::new(u32::from(pd.index()))),
            CmdOp::DeallocPd => match u16::try_from(handle) {
                Ok(pd) => self.engine.dealloc_pd(Pd::from_index(pd)),
                Err(_) => return CmdStatus::BadHandle,
            },
            CmdOp::RegMr => return self.reg_mr(e),
            CmdOp::DeregMr => self.engine.dereg_mr(Lkey(handle)),
            CmdOp::AllocMw => return self.alloc_mw(e),
            CmdOp::DeallocMw => self.engine.dealloc_mw(Rkey(handle)),
            CmdOp::AllocMr => return self.alloc_mr(e),
            CmdOp::CreateCq => return self.create_cq(e),
            CmdOp::DestroyCq => return self.destroy_cq(handle),
            CmdOp::CreateQp => return self.create_qp(e),
            CmdOp::ModifyQp => {
                let arg = abi::payload::<abi::QpAttrArg>(e);
                let qpn = Qpn::new(arg.qpn.get());
                let Ok(attr) = arg.to_attr() else {
                    return CmdStatus::BadParam;
                };
                // To ERR or RESET the engine flushes or drops the QP's work: the
                // hardware stops first (§3.7).
                let stop = matches!(attr.qp_state, Some(QpState::Err | QpState::Reset));
                self.fp_settle(qpn, stop);
                let r = self.engine.modify_qp(qpn, &attr);
                self.fp_refresh(qpn);
                r
            }
            CmdOp::QueryQp => {
                // The engine answers for the send queue: it takes it back from the
                // hardware first (§3.8).
                self.fp_settle(Qpn::new(handle), false);
                self.engine.query_qp(Qpn::new(handle)).map(|info| {
                    let mut attr = QpAttr::to_state(info.state);
                    attr.path_mtu = Some(info.path_mtu);
                    attr.dest_qp_num = Some(info.dest_qpn);
                    attr.sq_psn = Some(info.sq_psn);
                    attr.rq_psn = Some(info.rq_psn);
                    attr.qp_access_flags = Some(info.access);
                    attr.qkey = Some(info.qkey);
                    attr.selective_repeat = Some(info.selective_repeat).filter(|s| s.enabled);
                    abi::set_payload(e, &abi::QpAttrArg::from_attr(info.qpn, &attr));
                })
            }
            CmdOp::DestroyQp => return self.destroy_qp(Qpn::new(handle)),
            CmdOp::QueryPort
            | CmdOp::ModifyPort
            | CmdOp::QueryGid
            | CmdOp::ModifyGid
            | CmdOp::QueryDcb
            | CmdOp::ModifyDcb
            | CmdOp::QueryEts
            | CmdOp::ModifyEts
            | CmdOp::QueryCc
            | CmdOp::ModifyCc
            | CmdOp::QueryQpCc
            | CmdOp::ModifyQpCc
            | CmdOp::QueryCounters => return self.port_command(op, e),
            CmdOp::SetIcm => return self.set_icm(e),
            CmdOp::CreateSrq => return self.create_srq(e),
            CmdOp::ModifySrq => return self.modify_srq(e),
            CmdOp::QuerySrq => return self.query_srq(e),
            CmdOp::DestroySrq => return self.destroy_srq(handle),
        };
        match result {
            Ok(()) => CmdStatus::Ok,
            Err(err) => status_of(&err),
        }
    }

    fn device_attr(&self) -> abi::DeviceAttr {
        let cfg = self.engine.config();
        abi::DeviceAttr {
            max_qp: U32::new(self.icm.map_or(QPS as u32, |i| i.entries)),
            max_cq: U32::new(CQS as u32),
            max_mr: U32::new(MRS as u32),
            max_pd: U32::new(PDS as u32),
            max_log_depth: MAX_LOG_DEPTH,
            max_sge: abi::WQE_SGES as u8,
            max_qp_rd_atom: RD.min(255) as u8,
            max_msg_sz: U32::new(roce_core::transport::MAX_MSG_SIZE as u32),
            mac: cfg.mac,
            gid: cfg.gid(),
            active_mtu: cfg.active_mtu as u8,
            gid_tbl_len: zerocopy::little_endian::U16::new(roce_core::engine::GID_TABLE_LEN as u16),
            ..Default::default()
        }
    }

    fn reg_mr(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::RegMrArg>(e);
        let (Ok(pd), Some(access)) = (
            u16::try_from(arg.pd.get()),
            AccessFlags::from_bits(arg.access.get()),
        ) else {
            return CmdStatus::BadParam;
        };
        match self
            .engine
            .reg_mr(Pd::from_index(pd), arg.addr.get(), arg.length.get(), access)
        {
            Ok(keys) => reply_mr_keys(e, arg, keys),
            Err(err) => status_of(&err),
        }
    }

    fn alloc_mw(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let mut arg = abi::payload::<abi::AllocMwArg>(e);
        let (Ok(pd), Some(mw_type)) = (u16::try_from(arg.pd.get()), MwType::from_u8(arg.mw_type))
        else {
            return CmdStatus::BadParam;
        };
        match self.engine.alloc_mw(Pd::from_index(pd), mw_type) {
            Ok(rkey) => {
                arg.rkey = U32::new(rkey.0);
                abi::set_payload(e, &arg);
                e.out = U32::new(rkey.0);
                CmdStatus::Ok
            }
            Err(err) => status_of(&err),
        }
    }

    fn alloc_mr(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::RegMrArg>(e);
        let Ok(pd) = u16::try_from(arg.pd.get()) else {
            return CmdStatus::BadParam;
        };
        if arg.access.get() != 0 || arg.addr.get() != 0 {
            return CmdStatus::BadParam;
        }
        match self.engine.alloc_mr(Pd::from_index(pd), arg.length.get()) {
            Ok(keys) => reply_mr_keys(e, arg, keys),
            Err(err) => status_of(&err),
        }
    }

    fn create_cq(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::CreateCqArg>(e);
        if arg.log_depth > MAX_LOG_DEPTH || arg.ring.get() % 64 != 0 {
            return CmdStatus::BadParam;
        }
        let cq = match self.engine.create_cq() {
            Ok(cq) => cq,
            Err(err) => return status_of(&err),
        };
        let Some(slot) = self.cqs.get_mut(usize::from(cq.0)) else {
            let _ = self.engine.destroy_cq(cq);
            return CmdStatus::NoResources;
        };
        self.cq_hi = self.cq_hi.max(usize::from(cq.0) + 1);
        *slot = Some(HostCq {
            ring: arg.ring.get(),
            log_depth: arg.log_depth,
            pi: 0,
            overflowed: false,
        });
        let ring = CqRing {
            ring: arg.ring.get(),
            log_depth: arg.log_depth,
            pi: 0,
            ci: 0,
        };
        self.set_hw_cq(usize::from(cq.0), Some(ring));
        e.out = U32::new(u32::from(cq.0));
        CmdStatus::Ok
    }

    fn destroy_cq(&mut self, handle: u32) -> CmdStatus {
        let Ok(c) = u16::try_from(handle) else {
            return CmdStatus::BadHandle;
        };
        match self.engine.destroy_cq(CqHandle(c)) {
            Ok(()) => {
                if let Some(s) = self.cqs.get_mut(usize::from(c)) {
                    *s = None;
                }
                let _ = self.take_stash(usize::from(c));
                self.set_hw_cq(usize::from(c), None);
                CmdStatus::Ok
            }
            Err(err) => status_of(&err),
        }
    }

    fn create_qp(&mut self, e: &mut CmdEntry) -> CmdStatus {
        let arg = abi::payload::<abi::CreateQpArg>(e);
        // The GSI QP is a UD QP to the engine (with QPN 1).
        let Some(qp_type) =
            QpType::from_u8(arg.qp_type).or((arg.qp_type == abi::QPT_GSI).then_some(QpType::Ud))
        else {
            return CmdStatus::BadParam;
        };
        let (Ok(pd), Ok(send_cq), Ok(recv_cq)) = (
            u16::try_from(arg.pd.get()),
            u16::try_from(arg.send_cq.get()),
            u16::try_from(arg.recv_cq.get()),
        ) else {
            return CmdStatus::BadHandle;
        };
        if arg.sq_log_depth > MAX_LOG_DEPTH || arg.rq_log_depth > MAX_LOG_DEPTH {
            return CmdStatus::BadParam;
        }
        // Any inline size up to the WQE's room gets all of it (rxe rounds up the same way).
        let max_inline_data = match arg.max_inline_data.get() {
            0 => 0,
            n if n <= abi::MAX_INLINE_DATA => abi::MAX_INLINE_DATA,
            _ => return CmdStatus::BadParam,
        };
        let init = QpInitAttr {
            qp_type,
            pd: Pd::from_index(pd),
            send_cq,
            recv_cq,
            sq_sig_all: arg.sq_sig_all != 0,
            max_inline_data,
            srq: match arg.srqn.get() {
                0 => None,
                n => match srq::srq_handle(n) {
                    Some(h) => Some(h),
                    None => return CmdStatus::BadHandle,
                },
            },
        };
        // The GSI QP is never in the ICM: it rings its doorbell registers.
        let gsi = arg.qp_type == abi::QPT_GSI;
        let db_record = arg.db_record.get();
        if db_record % 8 != 0 || (self.icm.is_some() && db_record == 0 && !gsi) {
            return CmdStatus::BadParam;
        }
        let created = if gsi {
            self.engine.create_gsi_qp(&init)
        } else if self.icm.is_some() {
            self.create_in_icm(&init)
        } else {
            self.engine.create_qp(&init)
        };
        let qpn = match created {
            Ok(q) => q,
            Err(err) => return status_of(&err),
        };
        // A fresh QP starts reading its rings where the host's doorbells stand now.
        let index = if gsi {
            reg::GSI_QP_INDEX
        } else {
            qpn.value().wrapping_sub(QPN_BASE)
        };
        let (sq_ci, rq_ci) = match db_record {
            0 => self.reg_pis(index),
            _ => self.read_db_record(db_record).unwrap_or((0, 0)),
        };
        let host = HostQp {
            qpn,
            qp_type,
            send_cq,
            sq_ring: arg.sq_ring.get(),
            sq_log: arg.sq_log_depth,
            sq_ci,
            rq_ring: arg.rq_ring.get(),
            rq_log: arg.rq_log_depth,
            rq_ci,
            srq: init.srq.is_some(),
            db_record,
            fp: FpState::Off,
            sq_hw: false,
        };
        if gsi {
            self.gsi = Some(host);
        } else {
            let Some(line) = self.free_line(qpn) else {
                let _ = self.engine.destroy_qp(qpn);
                return CmdStatus::NoResources;
            };
            if let Some(s) = self.qps.get_mut(line) {
                *s = Some(host);
                self.qp_hi = self.qp_hi.max(line + 1);
            }
            self.touch(line);
            self.set_exists(index, true);
        }
        e.out = U32::new(qpn.value());
        abi::set_payload(
            e,
            &abi::CreateQpArg {
                max_inline_data: U32::new(max_inline_data),
                ..arg
            },
        );
        CmdStatus::Ok
    }

    fn destroy_qp(&mut self, qpn: Qpn) -> CmdStatus {
        self.fp_settle(qpn, true);
        let (_, dp) = self.hal.split();
        if let Some(fp) = dp.fastpath() {
            fp.write_sctx(qpn, 0, &[0; layout::SCTX_LEN]);
            fp.write_rctx(qpn, &[0; layout::RCTX_LEN]);
        }
        match self.engine.destroy_qp(qpn) {
            Ok(()) => {
                if let Some(s) = self.line(qpn).and_then(|l| self.qps.get_mut(l)) {
                    *s = None;
                }
                self.set_exists(qpn.value().wrapping_sub(QPN_BASE), false);
                if self.gsi.is_some_and(|g| g.qpn == qpn) {
                    self.gsi = None;
                }
                CmdStatus::Ok
            }
            Err(err) => status_of(&err),
        }
    }
}

/// A producer index that claims more entries than the ring holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BadDoorbell;

/// A request packet (SEND, WRITE, READ request, atomic): the responder's to handle.
fn is_request(opcode: Opcode) -> bool {
    use roce_core::wire::opcode::Operation;
    matches!(
        opcode.info().map(|i| i.operation),
        Some(
            Operation::Send
                | Operation::RdmaWrite
                | Operation::RdmaReadRequest
                | Operation::CompareSwap
                | Operation::FetchAdd
        )
    )
}

/// Whether producer index `pi` is at most a ring's depth (`2^log`) ahead of `ci`.
fn fits(pi: u32, ci: u32, log: u8) -> bool {
    u64::from(pi.wrapping_sub(ci)) <= 1u64 << log.min(32)
}

/// Copies the fast path's counters field by field: the struct's assignment became a
/// `memcpy` call, ~85 instructions on the QEMU core for its 48 bytes at every read of the
/// fast path's news, where its 6 fields are 12 loads and 12 stores. (All fields named:
/// a new one must be added here.)
#[inline(always)]
pub(crate) fn set_fp_counters(to: &mut FastPathCounters, from: FastPathCounters) {
    let FastPathCounters {
        tx_frames,
        rx_handled,
        rx_exceptions,
        rx_dropped,
        tx_dma_errors,
        tx_resent,
    } = from;
    to.tx_frames = tx_frames;
    to.rx_handled = rx_handled;
    to.rx_exceptions = rx_exceptions;
    to.rx_dropped = rx_dropped;
    to.tx_dma_errors = tx_dma_errors;
    to.tx_resent = tx_resent;
}

/// The destination QP of a RoCE frame (ICRC not checked: only to find the QP).
fn dest_qpn(frame: &[u8]) -> Option<Dest> {
    roce_core::wire::parse_unverified(frame)
        .ok()
        .map(|p| Dest::new(p.dest_qp(), p.opcode()))
}

/// Address of ring slot `index` (entries of `size` bytes, depth `2^log`).
fn slot_addr(ring: u64, log: u8, index: u32, size: usize) -> u64 {
    let mask = (1u32 << log.min(31)) - 1;
    ring.wrapping_add(u64::from(index & mask) * size as u64)
}

/// The command status for an engine error.
/// REG_MR's and ALLOC_MR's answer: both keys in the argument, the L_Key in `out`.
fn reply_mr_keys(e: &mut CmdEntry, mut arg: abi::RegMrArg, keys: MrKeys) -> CmdStatus {
    arg.lkey = U32::new(keys.lkey.0);
    arg.rkey = U32::new(keys.rkey.0);
    abi::set_payload(e, &arg);
    e.out = U32::new(keys.lkey.0);
    CmdStatus::Ok
}

fn status_of(e: &EngineError) -> CmdStatus {
    match e {
        EngineError::NoSuchQp(_) | EngineError::NoSuchCq(_) | EngineError::NoSuchSrq(_) => {
            CmdStatus::BadHandle
        }
        EngineError::Memory(MemError::NoSuchPd | MemError::NoSuchKey(_) | MemError::WrongPd(_)) => {
            CmdStatus::BadHandle
        }
        EngineError::Memory(MemError::TableFull) | EngineError::TableFull { .. } => {
            CmdStatus::NoResources
        }
        EngineError::Busy { .. } | EngineError::Memory(MemError::Busy) => CmdStatus::Busy,
        EngineError::ModifyQp(_)
        | EngineError::InvalidAttribute { .. }
        | EngineError::InvalidState { .. } => CmdStatus::IllegalTransition,
        _ => CmdStatus::BadParam,
    }
}

/// The runtime with its capacities erased, for hosts that hold NICs of several sizes.
pub trait NicRuntime {
    /// [`Nic::poll`].
    fn poll(&mut self) -> bool;
    /// [`Nic::poll_timeout`].
    fn poll_timeout(&self) -> Option<u64>;
    /// [`Nic::receive_frame`].
    fn receive_frame(&mut self, frame: &[u8]);
    /// [`Nic::transmit_frame`].
    fn transmit_frame(&mut self, buf: &mut [u8]) -> Option<usize>;
    /// The port's configuration as it stands (the host changes it through the ABI).
    fn port_config(&self) -> &PortConfig;
    /// [`Nic::counters`].
    fn counters(&self) -> &RuntimeCounters;
    /// [`Nic::transmit_frame_except`].
    fn transmit_frame_except(&mut self, buf: &mut [u8], blocked: Priorities) -> Option<usize>;
    /// Whether [`NicRuntime::transmit_frame_except`] with `blocked` may give a frame:
    /// false only where it would give none and change nothing but a summary flag
    /// (`Engine::tx_waiting_except`).
    fn tx_waiting_except(&self, blocked: Priorities) -> bool;
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
    > NicRuntime for Nic<H, QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>
{
    fn poll(&mut self) -> bool {
        Nic::poll(self)
    }
    fn poll_timeout(&self) -> Option<u64> {
        Nic::poll_timeout(self)
    }
    fn receive_frame(&mut self, frame: &[u8]) {
        Nic::receive_frame(self, frame)
    }
    fn transmit_frame(&mut self, buf: &mut [u8]) -> Option<usize> {
        Nic::transmit_frame(self, buf)
    }
    fn port_config(&self) -> &PortConfig {
        self.engine.config()
    }
    fn counters(&self) -> &RuntimeCounters {
        &self.counters
    }
    fn transmit_frame_except(&mut self, buf: &mut [u8], blocked: Priorities) -> Option<usize> {
        Nic::transmit_frame_except(self, buf, blocked)
    }
    fn tx_waiting_except(&self, blocked: Priorities) -> bool {
        self.engine.tx_waiting_except(blocked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_objects_report_busy() {
        // A PD with MRs or QPs (the memory table's Busy) is as busy as a CQ with QPs.
        assert_eq!(
            status_of(&EngineError::Memory(MemError::Busy)),
            CmdStatus::Busy
        );
        assert_eq!(
            status_of(&EngineError::Memory(MemError::NoSuchPd)),
            CmdStatus::BadHandle
        );
    }
}
