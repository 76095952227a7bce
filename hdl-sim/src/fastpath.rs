//! Cycle-level driver of the Verilated RC fast path (`rtl/roce_fp_top.sv`,
//! `docs/fastpath.md`): the firmware's side (table writes and reads, TX and ACK
//! descriptors, events and exception frames), the wire (frames in and out) and a DMA
//! engine over any [`Dma`] memory (payload reads for TX, placement writes for RX).
//!
//! The DMA engine here answers a read request at once from memory and hands the
//! packet's bytes back packed into beats once the packet's last request is in (the
//! interface of `fp_tx.sv`); writes land in memory when their last beat arrives, and
//! are logged in order.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;

use roce_core::memory::Dma;

use crate::sim::{Beat, DataWidth, Rng, Shaping, SimError, Timed};

/// The fast path's tables, as the firmware's port numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Send contexts, 96 bytes each, by QPN.
    SendCtx = 0,
    /// Receive contexts, 68 bytes each (17 words), by QPN.
    RecvCtx = 1,
    /// MR entries, 32 bytes each, by key >> 8.
    Mr = 2,
    /// The port's addresses (index 0): bytes 0..5 the MAC, 8..23 the GID. Word
    /// [`ACCESSED_WORD`] of index `w` reads the accessed bits of context entries
    /// `32 * w ..= 32 * w + 31` and clears them (`roce_fp_top`).
    Port = 3,
}

/// The word of [`Table::Port`] that reads (and clears) 32 accessed bits.
pub const ACCESSED_WORD: u8 = 8;

/// The words of [`Table::Port`] that hold the CQE writer's CQ rings (`fp_cqw`,
/// `docs/fastpath.md` §3.7), index = CQ number: ring address low and high, {valid (bit
/// 8), log2 depth (bits 0..4)}, producer index, the host's consumer index as last seen.
pub const CQW_RING_WORD: u8 = 16;
/// The word holding a CQ's producer index (index = CQ number).
pub const CQW_PI_WORD: u8 = 19;
/// The word holding a context entry's send CQ: {valid (bit 8), CQ number (bits 0..5)}.
pub const CQW_SEND_CQ_WORD: u8 = 24;
/// [`CQW_SEND_CQ_WORD`] with this bit: the context entry's receive CQ ({valid (bit 8),
/// CQ number}) for the receive CQEs (`docs/fastpath.md` §3.7, "Receive CQEs").
pub const CQW_RECV_CQ: u32 = 1 << 31;
/// The words holding the wr_id (low, high) of the receive WQE the firmware loads into a
/// context entry (index = entry), written before the load that sets `recv_cqe`.
pub const CQW_RECV_WRID_LO_WORD: u8 = 23;
pub const CQW_RECV_WRID_HI_WORD: u8 = 31;
/// CQs the RTL's CQE writer holds (`fp_pkg::CQ_N`).
pub const CQW_CQS: usize = 64;

/// The WQE fetch's words of [`Table::Port`] (`fp_sqf`, `docs/fastpath.md` §3.8;
/// `fp_pkg`'s `SQ_*`). Writes: a hand-over staged in [`SQ_W_RING_LO`] ..
/// [`SQ_W_RTO_HI`] (any index), then [`SQ_W_CMD`] (index = the QPN) 1 hands it over,
/// 2 takes the queue back; [`SQ_W_DB`] (index = the QPN) a doorbell's producer index;
/// [`SQ_W_NOW_LO`] / [`SQ_W_NOW_HI`] the time (ns). Reads (index = the QPN):
/// [`SQ_R_CI`] .. [`SQ_R_FLAGS`] {an RNR wait, the deadline its end (bit 9), RNR NAKs
/// waited out (6..8), retries spent (3..5), deadline valid, stopped, active};
/// global: [`SQ_R_TAKEN`], [`SQ_R_SENDS`], [`SQ_R_NEWS`] {Go-Back-N's counts moved,
/// a queue stopped, busy, CQEs written: the first and last since the last read of
/// it}, [`SQ_R_NAKS`], [`SQ_R_RETRIES`], [`SQ_R_TIMEOUTS`], [`SQ_R_RNRS`].
pub const SQ_W_RING_LO: u8 = 9;
pub const SQ_W_RING_HI: u8 = 10;
/// {rnr_retry (bits 20..22), retry_cnt (16..18), mtu_log2 (12..15), timeout valid (9),
/// sig_all (8), log2 depth (0..4)}.
pub const SQ_W_CFG: u8 = 11;
pub const SQ_W_CI: u8 = 12;
pub const SQ_W_PSN: u8 = 13;
pub const SQ_W_PD: u8 = 14;
pub const SQ_W_DEPTH: u8 = 15;
pub const SQ_W_RTO_LO: u8 = 21;
pub const SQ_W_RTO_HI: u8 = 22;
pub const SQ_W_CMD: u8 = 25;
pub const SQ_W_DB: u8 = 26;
pub const SQ_W_NOW_LO: u8 = 27;
pub const SQ_W_NOW_HI: u8 = 28;
pub const SQ_R_CI: u8 = 9;
pub const SQ_R_DONE: u8 = 10;
pub const SQ_R_BASE: u8 = 11;
pub const SQ_R_UNA: u8 = 12;
pub const SQ_R_DL_LO: u8 = 13;
pub const SQ_R_DL_HI: u8 = 14;
pub const SQ_R_FLAGS: u8 = 15;
pub const SQ_R_TAKEN: u8 = 21;
pub const SQ_R_SENDS: u8 = 22;
pub const SQ_R_NEWS: u8 = 23;
/// Go-Back-N's running counts (docs/fastpath.md §3.8): NAK sequence errors taken (the
/// dropped ones too), retries started, of them at the local ACK timeout.
pub const SQ_R_NAKS: u8 = 27;
pub const SQ_R_RETRIES: u8 = 28;
pub const SQ_R_TIMEOUTS: u8 = 29;
/// RNR NAKs the WQE fetch took (running count, docs/fastpath.md §3.8).
pub const SQ_R_RNRS: u8 = 30;

/// Cycle numbers of transfers, for line-rate and latency checks.
#[derive(Clone, Debug, Default)]
pub struct FpTimeline {
    /// Wire input beats accepted: (cycle, last).
    pub rx_in: Vec<(u64, bool)>,
    /// Cycles where the wire input offered a beat that was not taken.
    pub rx_in_stalls: Vec<u64>,
    /// Wire output beats: (cycle, last).
    pub tx_out: Vec<(u64, bool)>,
    /// DMA write beats: (cycle, last).
    pub dma_wr: Vec<(u64, bool)>,
    /// DMA read data beats taken: (cycle, last).
    pub dma_rd: Vec<(u64, bool)>,
    /// TX descriptors taken.
    pub txd: Vec<u64>,
    /// Events taken.
    pub events: Vec<u64>,
}

#[cfg(not(roce_rtl_unavailable))]
type Inner = cxx::UniquePtr<crate::ffi::bridge::FpModel>;
#[cfg(roce_rtl_unavailable)]
type Inner = core::convert::Infallible;

/// The Verilated fast path with its input queues, output collectors and DMA engine.
pub struct FpSim {
    inner: Inner,
    width: DataWidth,
    shaping: Shaping,
    rng: Rng,
    cycle: u64,
    rx_in: VecDeque<Beat>,
    rx_presenting: bool,
    txd: VecDeque<[u8; 96]>,
    ackd: VecDeque<[u8; 16]>,
    cfg_wr: VecDeque<(Table, u32, u8, u32)>,
    cfg_rd: VecDeque<(Table, u32, u8)>,
    rd_results: VecDeque<u32>,
    // DMA
    rd_gather: Vec<u8>,
    rd_beats: VecDeque<Beat>,
    /// Per beat of `rd_beats`: the host could not read (part of) it.
    rd_beat_err: VecDeque<bool>,
    /// Byte ranges of the packet being gathered that the host could not read.
    rd_bad: Vec<std::ops::Range<usize>>,
    rd_presenting: bool,
    wr_desc: VecDeque<(u64, u16)>,
    wr_cur: Vec<u8>,
    wr_data: VecDeque<Vec<u8>>,
    dma_writes: Vec<(u64, Vec<u8>)>,
    dma_fault: Option<String>,
    // outputs
    tx_cur: Vec<u8>,
    tx_frames: VecDeque<Timed<Vec<u8>>>,
    tx_aborted: u32,
    tx_dma_errors: u32,
    tx_resent: u32,
    exc_cur: Vec<u8>,
    exc_frames: VecDeque<Timed<Vec<u8>>>,
    events: VecDeque<Timed<[u8; 64]>>,
    bad_desc: u32,
    rx_drops: u32,
    rx_ctx: [u32; 2],
    rx_answered: [u32; 2],
    tx_idle: bool,
    tx_slots_used: u8,
    rx_idle: bool,
    /// `tx_m_axis_tready` held low: the port has no room (`FpSim::set_tx_hold`).
    tx_hold: bool,
    /// `ev_ready` held low: the firmware takes no event (`FpSim::set_event_hold`).
    ev_hold: bool,
    /// The DMA write port (descriptor and data) is ready one cycle in this many
    /// (`FpSim::set_dma_wr_every`; 1: every cycle).
    dma_wr_every: u64,
    /// A frame beat waited at the transmit output in the last cycle.
    tx_waiting: bool,
    last_activity: u64,
    timeline: Option<FpTimeline>,
}

impl fmt::Debug for FpSim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FpSim")
            .field("width", &self.width)
            .field("cycle", &self.cycle)
            .finish()
    }
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.chunks(4).map(|c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        u32::from_le_bytes(w)
    })
}

fn le_words<const N: usize>(bytes: &[u8]) -> [u64; N] {
    let mut out = [0u64; N];
    for (i, &b) in bytes.iter().enumerate() {
        out[i / 8] |= u64::from(b) << (8 * (i % 8));
    }
    out
}

impl FpSim {
    /// A model of `width`, reset, at line rate.
    pub fn new(width: DataWidth) -> Result<FpSim, SimError> {
        FpSim::build(width, false)
    }

    /// Like [`FpSim::new`], writing an FST waveform of every cycle to `path`.
    pub fn with_trace(width: DataWidth, path: &Path) -> Result<FpSim, SimError> {
        let mut s = FpSim::build(width, true)?;
        s.open_trace(path)?;
        s.reset();
        Ok(s)
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn build(width: DataWidth, trace: bool) -> Result<FpSim, SimError> {
        let inner = crate::ffi::bridge::new_fp_model(width.bits(), trace)
            .map_err(|e| SimError::Model(e.to_string()))?;
        let mut s = FpSim::with_inner(inner, width);
        s.reset();
        Ok(s)
    }

    #[cfg(roce_rtl_unavailable)]
    fn build(_width: DataWidth, _trace: bool) -> Result<FpSim, SimError> {
        Err(SimError::Unavailable)
    }

    fn with_inner(inner: Inner, width: DataWidth) -> FpSim {
        FpSim {
            inner,
            width,
            shaping: Shaping::LINE_RATE,
            rng: Rng::new(1),
            cycle: 0,
            rx_in: VecDeque::new(),
            rx_presenting: false,
            txd: VecDeque::new(),
            ackd: VecDeque::new(),
            cfg_wr: VecDeque::new(),
            cfg_rd: VecDeque::new(),
            rd_results: VecDeque::new(),
            rd_gather: Vec::new(),
            rd_beats: VecDeque::new(),
            rd_beat_err: VecDeque::new(),
            rd_bad: Vec::new(),
            rd_presenting: false,
            wr_desc: VecDeque::new(),
            wr_cur: Vec::new(),
            wr_data: VecDeque::new(),
            dma_writes: Vec::new(),
            dma_fault: None,
            tx_cur: Vec::new(),
            tx_frames: VecDeque::new(),
            tx_aborted: 0,
            tx_dma_errors: 0,
            tx_resent: 0,
            exc_cur: Vec::new(),
            exc_frames: VecDeque::new(),
            events: VecDeque::new(),
            bad_desc: 0,
            rx_drops: 0,
            rx_ctx: [0; 2],
            rx_answered: [0; 2],
            tx_idle: true,
            tx_slots_used: 0,
            rx_idle: true,
            tx_hold: false,
            ev_hold: false,
            dma_wr_every: 1,
            tx_waiting: false,
            last_activity: 0,
            timeline: None,
        }
    }

    pub fn width(&self) -> DataWidth {
        self.width
    }

    /// Clock cycles since reset.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Random idle cycles (wire input, DMA read data) and back-pressure (every output).
    pub fn set_shaping(&mut self, shaping: Shaping) {
        self.shaping = shaping;
        self.rng = Rng::new(shaping.seed);
    }

    /// Start recording transfer cycles.
    pub fn record_timeline(&mut self) {
        self.timeline = Some(FpTimeline::default());
    }

    /// The recorded transfers.
    pub fn take_timeline(&mut self) -> FpTimeline {
        self.timeline.take().unwrap_or_default()
    }

    /// Holds reset for 4 cycles and drops everything queued or collected (the tables
    /// keep their contents, as block RAM does).
    pub fn reset(&mut self) {
        self.model_reset(4);
        self.cycle = 0;
        self.last_activity = 0;
        self.rx_idle = true;
        self.tx_waiting = false;
        self.rx_in.clear();
        self.rx_presenting = false;
        self.txd.clear();
        self.ackd.clear();
        self.cfg_wr.clear();
        self.cfg_rd.clear();
        self.rd_results.clear();
        self.rd_gather.clear();
        self.rd_beats.clear();
        self.rd_beat_err.clear();
        self.rd_bad.clear();
        self.rd_presenting = false;
        self.wr_desc.clear();
        self.wr_cur.clear();
        self.wr_data.clear();
        self.dma_writes.clear();
        self.dma_fault = None;
        self.tx_cur.clear();
        self.tx_frames.clear();
        self.tx_aborted = 0;
        self.exc_cur.clear();
        self.exc_frames.clear();
        self.events.clear();
    }

    /// Queues a firmware write of a whole record (`bytes`, a multiple of 4 long).
    pub fn write_record(&mut self, table: Table, index: u32, bytes: &[u8]) {
        for (w, d) in words(bytes).enumerate() {
            self.cfg_wr.push_back((table, index, w as u8, d));
        }
    }

    /// Queues a firmware write of one 32-bit word of a record.
    pub fn write_word(&mut self, table: Table, index: u32, word: u8, data: u32) {
        self.cfg_wr.push_back((table, index, word, data));
    }

    /// Reads `len` bytes of a record (after the writes queued before), clocking the model.
    pub fn read_record(
        &mut self,
        table: Table,
        index: u32,
        len: usize,
        mem: &mut dyn Dma,
    ) -> Result<Vec<u8>, SimError> {
        self.read_record_with(table, index, len, Some(mem))
    }

    /// [`FpSim::read_record`] with the host memory away: the model runs with its DMA
    /// ports held (requests and write data wait, as behind a busy bus).
    pub fn read_record_dma_held(
        &mut self,
        table: Table,
        index: u32,
        len: usize,
    ) -> Result<Vec<u8>, SimError> {
        self.read_record_with(table, index, len, None)
    }

    /// Reads word `word` of a record, with the host memory away (as
    /// [`FpSim::read_record_dma_held`]): one read of the table port, so a word whose read
    /// has an effect (the accessed bits, `Table::Port` word [`ACCESSED_WORD`]) is read
    /// once.
    pub fn read_word_dma_held(
        &mut self,
        table: Table,
        index: u32,
        word: u8,
    ) -> Result<u32, SimError> {
        let w = self.read_words(table, index, word..word + 1, None)?;
        Ok(w.first().copied().unwrap_or(0))
    }

    fn read_record_with(
        &mut self,
        table: Table,
        index: u32,
        len: usize,
        mem: Option<&mut (dyn Dma + '_)>,
    ) -> Result<Vec<u8>, SimError> {
        let n = len.div_ceil(4) as u8;
        let mut out: Vec<u8> = self
            .read_words(table, index, 0..n, mem)?
            .into_iter()
            .flat_map(u32::to_le_bytes)
            .collect();
        out.truncate(len);
        Ok(out)
    }

    fn read_words(
        &mut self,
        table: Table,
        index: u32,
        words: std::ops::Range<u8>,
        mut mem: Option<&mut (dyn Dma + '_)>,
    ) -> Result<Vec<u32>, SimError> {
        let n = words.len();
        for w in words {
            self.cfg_rd.push_back((table, index, w));
        }
        let start = self.cycle;
        while self.rd_results.len() < n {
            if self.cycle - start > 10_000 {
                return Err(SimError::Timeout {
                    cycles: 10_000,
                    waiting_for: "table read",
                });
            }
            self.step(mem.as_deref_mut());
        }
        Ok(self.rd_results.drain(..).collect())
    }

    /// Queues a TX message descriptor.
    pub fn push_txd(&mut self, d: &[u8; 96]) {
        self.txd.push_back(*d);
    }

    /// Queues an ACK descriptor.
    pub fn push_ackd(&mut self, d: &[u8; 16]) {
        self.ackd.push_back(*d);
    }

    /// Queues a frame on the wire input.
    pub fn push_rx_frame(&mut self, frame: &[u8]) {
        self.rx_in.extend(Beat::split(frame, self.width));
    }

    /// The next frame the fast path sent (with ICRC), with the cycle of its last beat.
    pub fn pop_tx_frame(&mut self) -> Option<Timed<Vec<u8>>> {
        self.tx_frames.pop_front()
    }

    /// The next event.
    pub fn pop_event(&mut self) -> Option<Timed<[u8; 64]>> {
        self.events.pop_front()
    }

    /// Whether an event is queued (not yet taken by [`FpSim::pop_event`]).
    pub fn events_waiting(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next frame handed to the firmware (an EXCEPTION's).
    pub fn pop_exc_frame(&mut self) -> Option<Timed<Vec<u8>>> {
        self.exc_frames.pop_front()
    }

    /// The DMA writes so far (address, bytes), in order, and forgets them.
    pub fn take_dma_writes(&mut self) -> Vec<(u64, Vec<u8>)> {
        std::mem::take(&mut self.dma_writes)
    }

    /// TX descriptors dropped (context not valid, SGEs shorter than the message).
    pub fn bad_desc(&self) -> u32 {
        self.bad_desc
    }

    /// Frames the segmenter sent with a DMA read error in their payload (its
    /// `tx_dma_errors` counter).
    pub fn tx_dma_errors(&self) -> u32 {
        self.tx_dma_errors
    }

    /// Request packets the planner sent again, a PSN before its context's `next_psn`
    /// (its `tx_resent` counter).
    pub fn tx_resent(&self) -> u32 {
        self.tx_resent
    }

    /// Frames the wire side dropped because the segmenter aborted them (`tx_m_axis_tuser`
    /// on the last beat: a MAC sends such a frame with a bad FCS, and no receiver takes
    /// it); they are not among the frames collected.
    pub fn tx_aborted(&self) -> u32 {
        self.tx_aborted
    }

    /// Frames the parser rejected.
    pub fn rx_drops(&self) -> u32 {
        self.rx_drops
    }

    /// The receive-context cache: frames whose QP's context was in its entry (and on),
    /// and frames whose entry held another QP's (exceptions with reason 14).
    pub fn rx_ctx_hits_misses(&self) -> [u32; 2] {
        self.rx_ctx
    }

    /// Request packets the receive path answered itself (docs/fastpath.md §3.4): out of
    /// sequence (dropped, one NAK per gap) and duplicate SEND/WRITE (ACKed again).
    pub fn rx_oos_dups(&self) -> [u32; 2] {
        self.rx_answered
    }

    /// The first DMA error since the last call (a write outside host memory, a write
    /// whose data disagrees with its descriptor), and forgets it. A read the host refuses
    /// is no fault: its beats carry the error flag and the segmenter drops the packet.
    pub fn take_fault(&mut self) -> Option<String> {
        self.dma_fault.take()
    }

    /// Descriptors the segmenter's slots hold (its `tx_slots_used` output in the last
    /// cycle): the descriptor ring's entries still in use.
    pub fn tx_slots_used(&self) -> usize {
        usize::from(self.tx_slots_used)
    }

    /// Holds the transmit output's `tready` low from the next cycle on (the MAC has no
    /// room: the segmenter stops at its frame FIFO instead of building frames a FLUSH
    /// could not recall), or lets it go (random back-pressure of `set_shaping` still
    /// applies).
    pub fn set_tx_hold(&mut self, hold: bool) {
        self.tx_hold = hold;
    }

    /// Holds the event port (`ev_ready` low) while `hold`: the events stay in the fast
    /// path, in flight, as when the firmware has not popped them yet.
    pub fn set_event_hold(&mut self, hold: bool) {
        self.ev_hold = hold;
    }

    /// Makes the host's DMA write port (descriptor and data) ready only one cycle in
    /// `every` (1, the default: every cycle; random back-pressure of `set_shaping` still
    /// applies), as a host slow to take writes while its reads are quick: the receive
    /// side's writes then wait in the fast path (`every` below the 200 quiet cycles
    /// of `run_until_idle`).
    pub fn set_dma_wr_every(&mut self, every: u64) {
        self.dma_wr_every = every.max(1);
    }

    /// A frame waited at the transmit output in the last cycle (held, or back-pressured).
    pub fn tx_waiting(&self) -> bool {
        self.tx_waiting
    }

    /// No transfer on any port for `quiet` cycles (whatever waits at an input: a
    /// transmit output held back stalls the DMA reads behind it).
    pub fn quiet_for(&self, quiet: u64) -> bool {
        self.cycle - self.last_activity >= quiet
    }

    /// The segmenter holds no message (its `tx_idle` output in the last cycle).
    pub fn tx_idle(&self) -> bool {
        self.tx_idle
    }

    /// TX descriptors queued and not yet taken by the model.
    pub fn txd_queued(&self) -> usize {
        self.txd.len()
    }

    /// Table writes or reads queued and not yet taken by the model.
    pub fn cfg_queued(&self) -> bool {
        !self.cfg_wr.is_empty() || !self.cfg_rd.is_empty()
    }

    /// Nothing waits at the wire, table and DMA inputs, the receive side holds no frame
    /// and nothing moved for `quiet` cycles; unlike [`FpSim::idle`], descriptors offered
    /// and not taken (a segmenter waiting for its window) do not count.
    ///
    /// The receive side's own `rx_idle` matters: a frame the parser drops drains
    /// through it without a transfer on any port, for as many cycles as it has beats
    /// (more than `quiet` for a 4 KiB frame at 64 bits), and the frames behind it
    /// wait meanwhile.
    pub fn settled(&self, quiet: u64) -> bool {
        self.rx_in.is_empty()
            && self.rx_idle
            && !self.cfg_queued()
            && self.rd_beats.is_empty()
            && self.cycle - self.last_activity >= quiet
    }

    /// Nothing queued at any input, the receive side holds no frame (see
    /// [`FpSim::settled`]) and no transfer for `quiet` cycles.
    pub fn idle(&self, quiet: u64) -> bool {
        self.rx_in.is_empty()
            && self.rx_idle
            && self.txd.is_empty()
            && self.ackd.is_empty()
            && self.cfg_wr.is_empty()
            && self.cfg_rd.is_empty()
            && self.rd_beats.is_empty()
            && self.cycle - self.last_activity >= quiet
    }

    /// Clocks until [`FpSim::idle`] (200 quiet cycles), at most `max` cycles.
    pub fn run_until_idle(&mut self, mem: &mut dyn Dma, max: u64) -> Result<(), SimError> {
        let start = self.cycle;
        while !self.idle(200) {
            if self.cycle - start >= max {
                return Err(SimError::Timeout {
                    cycles: max,
                    waiting_for: "the fast path to go idle",
                });
            }
            self.tick(mem);
        }
        match self.dma_fault.take() {
            Some(f) => Err(SimError::Model(f)),
            None => Ok(()),
        }
    }

    #[cfg(roce_rtl_unavailable)]
    fn model_reset(&mut self, _cycles: u32) {
        match self.inner {}
    }

    #[cfg(not(roce_rtl_unavailable))]
    fn model_reset(&mut self, cycles: u32) {
        self.inner.pin_mut().reset(cycles);
    }

    trace_methods!();

    /// One clock cycle; `mem` is the host memory the DMA reads and writes.
    pub fn tick(&mut self, mem: &mut dyn Dma) {
        self.step(Some(mem));
    }

    #[cfg(roce_rtl_unavailable)]
    fn step(&mut self, _mem: Option<&mut (dyn Dma + '_)>) {
        match self.inner {}
    }

    /// One clock cycle; without `mem` the DMA ports are held (not ready).
    #[cfg(not(roce_rtl_unavailable))]
    fn step(&mut self, mut mem: Option<&mut (dyn Dma + '_)>) {
        use crate::ffi::bridge::{AxisIn, FpIn, FpOut};

        let sh = self.shaping;
        let wr_turn = self.cycle % self.dma_wr_every == 0;
        if !self.rx_presenting && !self.rx_in.is_empty() && !self.rng.chance(sh.idle) {
            self.rx_presenting = true;
        }
        if !self.rd_presenting && !self.rd_beats.is_empty() && !self.rng.chance(sh.idle) {
            self.rd_presenting = true;
        }
        let axis = |b: Option<&Beat>| match b {
            Some(b) => AxisIn {
                data: b.data,
                keep: b.keep,
                valid: true,
                last: b.last,
            },
            None => AxisIn::default(),
        };
        let mut input = FpIn {
            rx: axis(self.rx_in.front().filter(|_| self.rx_presenting)),
            // (the draw first: a hold does not change the shaping's random sequence)
            tx_out_ready: !self.rng.chance(sh.backpressure) && !self.tx_hold,
            ev_ready: !self.rng.chance(sh.backpressure) && !self.ev_hold,
            exc_ready: !self.rng.chance(sh.backpressure),
            dma_rd_req_ready: !self.rng.chance(sh.backpressure) && mem.is_some(),
            dma_rd: axis(self.rd_beats.front().filter(|_| self.rd_presenting)),
            dma_rd_err: self.rd_presenting && self.rd_beat_err.front() == Some(&true),
            dma_wr_desc_ready: !self.rng.chance(sh.backpressure) && mem.is_some() && wr_turn,
            dma_wr_ready: !self.rng.chance(sh.backpressure) && mem.is_some() && wr_turn,
            ..FpIn::default()
        };
        if let Some(d) = self.txd.front() {
            input.txd = le_words(d);
            input.txd_valid = true;
        }
        if let Some(d) = self.ackd.front() {
            input.ackd = le_words(d);
            input.ackd_valid = true;
        }
        if let Some(&(t, i, w, d)) = self.cfg_wr.front() {
            (
                input.cfg_wr_table,
                input.cfg_wr_index,
                input.cfg_wr_word,
                input.cfg_wr_data,
            ) = (t as u8, i, w, d);
            input.cfg_wr_valid = true;
        } else if let Some(&(t, i, w)) = self.cfg_rd.front() {
            // reads after every queued write
            (input.cfg_rd_table, input.cfg_rd_index, input.cfg_rd_word) = (t as u8, i, w);
            input.cfg_rd_valid = true;
        }
        let mut out = FpOut::default();
        self.inner.pin_mut().cycle(&input, &mut out);
        let cyc = self.cycle;
        self.cycle += 1;
        let mut active = false;

        if input.rx.valid {
            if out.rx_in_ready {
                self.rx_in.pop_front();
                self.rx_presenting = false;
                active = true;
                if let Some(t) = &mut self.timeline {
                    t.rx_in.push((cyc, input.rx.last));
                }
            } else if let Some(t) = &mut self.timeline {
                t.rx_in_stalls.push(cyc);
            }
        }
        if input.txd_valid && out.txd_ready {
            self.txd.pop_front();
            active = true;
            if let Some(t) = &mut self.timeline {
                t.txd.push(cyc);
            }
        }
        if input.ackd_valid && out.ackd_ready {
            self.ackd.pop_front();
            active = true;
        }
        if input.cfg_wr_valid && out.cfg_wr_ready {
            self.cfg_wr.pop_front();
            active = true;
        }
        if input.cfg_rd_valid && out.cfg_rd_ready {
            self.cfg_rd.pop_front();
            active = true;
        }
        if out.cfg_rdata_valid {
            self.rd_results.push_back(out.cfg_rdata);
        }
        if out.tx_out.valid && input.tx_out_ready {
            active = true;
            let b = Beat {
                data: out.tx_out.data,
                keep: out.tx_out.keep,
                last: out.tx_out.last,
            };
            self.tx_cur.extend(b.bytes());
            if let Some(t) = &mut self.timeline {
                t.tx_out.push((cyc, b.last));
            }
            if b.last {
                let value = std::mem::take(&mut self.tx_cur);
                if out.tx_abort {
                    self.tx_aborted += 1;
                } else {
                    self.tx_frames.push_back(Timed { cycle: cyc, value });
                }
            }
        }
        if out.ev_valid && input.ev_ready {
            active = true;
            let mut e = [0u8; 64];
            for (i, b) in e.iter_mut().enumerate() {
                *b = (out.ev[i / 8] >> (8 * (i % 8))) as u8;
            }
            self.events.push_back(Timed {
                cycle: cyc,
                value: e,
            });
            if let Some(t) = &mut self.timeline {
                t.events.push(cyc);
            }
        }
        if out.exc.valid && input.exc_ready {
            active = true;
            let b = Beat {
                data: out.exc.data,
                keep: out.exc.keep,
                last: out.exc.last,
            };
            self.exc_cur.extend(b.bytes());
            if b.last {
                let value = std::mem::take(&mut self.exc_cur);
                self.exc_frames.push_back(Timed { cycle: cyc, value });
            }
        }
        // DMA reads: the request's bytes now; the packet's beats once its last request is in
        if out.dma_rd_req_valid && input.dma_rd_req_ready {
            active = true;
            let at = self.rd_gather.len();
            self.rd_gather
                .resize(at + usize::from(out.dma_rd_req_len), 0);
            let read = match mem.as_deref_mut() {
                Some(m) => m.read(out.dma_rd_req_addr, &mut self.rd_gather[at..]),
                None => Ok(()),
            };
            if read.is_err() {
                // the host's error response: its beats carry the error flag
                self.rd_bad.push(at..self.rd_gather.len());
            }
            if out.dma_rd_req_last {
                let bytes = std::mem::take(&mut self.rd_gather);
                let beats = Beat::split(&bytes, self.width);
                let k = self.width.bytes();
                let bad = std::mem::take(&mut self.rd_bad);
                self.rd_beat_err.extend(
                    (0..beats.len())
                        .map(|i| bad.iter().any(|r| r.start < (i + 1) * k && r.end > i * k)),
                );
                self.rd_beats.extend(beats);
            }
        }
        if input.dma_rd.valid && out.dma_rd_in_ready {
            active = true;
            self.rd_beats.pop_front();
            self.rd_beat_err.pop_front();
            self.rd_presenting = false;
            if let Some(t) = &mut self.timeline {
                t.dma_rd.push((cyc, input.dma_rd.last));
            }
        }
        if out.dma_wr_desc_valid && input.dma_wr_desc_ready {
            active = true;
            self.wr_desc
                .push_back((out.dma_wr_desc_addr, out.dma_wr_desc_len));
        }
        if out.dma_wr.valid && input.dma_wr_ready {
            active = true;
            let b = Beat {
                data: out.dma_wr.data,
                keep: out.dma_wr.keep,
                last: out.dma_wr.last,
            };
            self.wr_cur.extend(b.bytes());
            if let Some(t) = &mut self.timeline {
                t.dma_wr.push((cyc, b.last));
            }
            if b.last {
                let data = std::mem::take(&mut self.wr_cur);
                self.wr_data.push_back(data);
            }
        }
        // a write lands once its descriptor and all its data are in (the engine
        // buffers whichever comes first)
        while let (Some(mem), false, false) = (
            mem.as_deref_mut(),
            self.wr_desc.is_empty(),
            self.wr_data.is_empty(),
        ) {
            let (addr, len) = self.wr_desc.pop_front().unwrap_or_default();
            let data = self.wr_data.pop_front().unwrap_or_default();
            if usize::from(len) != data.len() {
                self.dma_fault.get_or_insert(format!(
                    "DMA write of {} bytes with a descriptor of {len} at {addr:#x}",
                    data.len()
                ));
            } else if let Err(e) = mem.write(addr, &data) {
                self.dma_fault.get_or_insert(format!("DMA write: {e}"));
            }
            self.dma_writes.push((addr, data));
        }
        self.bad_desc = out.tx_bad_desc;
        self.tx_dma_errors = out.tx_dma_errors;
        self.tx_resent = out.tx_resent;
        self.rx_drops = out.rx_drops;
        self.rx_ctx = [out.rx_ctx_hits, out.rx_ctx_misses];
        self.rx_answered = [out.rx_oos, out.rx_dups];
        self.tx_idle = out.tx_idle;
        // The receive side finishing its frames is activity: the ACK or NAK of the last
        // one may still be on its way through the segmenter's ACK path, which no output
        // shows; a frame drained without a transfer on any port (a duplicate or an
        // out-of-sequence request the PSN rule answers) would otherwise leave the quiet
        // window already past when it ends, and `settled` true with the frame unsent.
        active |= out.rx_idle && !self.rx_idle;
        self.rx_idle = out.rx_idle;
        self.tx_slots_used = out.tx_slots_used;
        self.tx_waiting = out.tx_out.valid && !input.tx_out_ready;
        if active {
            self.last_activity = self.cycle;
        }
    }
}

#[cfg(test)]
mod tests {
    /// The value of `localparam int NAME = value;` in `fp_pkg.sv`.
    fn fp_pkg_param(name: &str) -> u32 {
        let src = include_str!("../rtl/fp_pkg.sv");
        let decl = format!("localparam int {name} =");
        let line = src
            .lines()
            .find(|l| l.trim_start().starts_with(&decl))
            .unwrap_or_else(|| panic!("{name} not in fp_pkg.sv"));
        line.split_once('=')
            .unwrap()
            .1
            .split(';')
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The sizes the firmware and the ports assume are the RTL's.
    #[test]
    fn sizes_match_fp_pkg() {
        assert_eq!(
            fp_pkg_param("IF_ENTRIES"),
            roce_core::fastpath::layout::IF_ENTRIES
        );
        assert_eq!(fp_pkg_param("CQ_N") as usize, super::CQW_CQS);
    }
}
