//! The hardware abstraction the runtime runs on: the register file the host sees, DMA to
//! host memory, the datapath, and a clock. The soft-core binary implements it with MMIO;
//! the host harness with plain memory and the software or RTL datapath.

use crate::abi::reg;
use roce_core::dcb::{Priorities, RX_BUFFER_BYTES};
use roce_core::engine::DcbConfig;
use roce_core::fastpath::layout::{EventWords, MR_LEN, RCTX_LEN, SCTX_LEN, TXD_LEN};
use roce_core::fastpath::{RecvCqe, SqIdle};
use roce_core::memory::Dma;
use roce_core::num::Qpn;
use roce_core::wire::aeth::RnrTimer;

pub use crate::fastpath::{CqRing, CqWriter, CqePost, SqBack, SqNews, SqRing, SqRung};

/// Where frames enter and leave the NIC.
///
/// A datapath may check and strip what it handles in hardware (the RTL checks the ICRC
/// on receive and computes it on transmit), but it hands the runtime whole Ethernet
/// frames without FCS either way.
pub trait Datapath {
    /// Queues a complete frame for the wire; `false` (frame not taken) when the transmit
    /// queue is full, so the runtime tries again later: nothing is dropped here.
    fn transmit(&mut self, frame: &[u8]) -> bool;
    /// Whether `transmit` would take a frame now.
    fn can_transmit(&self) -> bool;
    /// The 802.1p priorities (the port's map) whose frames `transmit` would not take
    /// now. A datapath whose transmit queue keeps room per priority (so that frames of
    /// a paused priority cannot fill it for the others) says which are full; the
    /// default is all or none, by `can_transmit`.
    fn tx_blocked(&self) -> Priorities {
        if self.can_transmit() {
            Priorities::NONE
        } else {
            Priorities::ALL
        }
    }
    /// The port's DCB settings and MAC (the source of its PFC frames) changed: a
    /// datapath with a DCB block in hardware (the SoC's, `docs/dcb.md` §3) writes its
    /// registers. The default has none.
    fn set_dcb(&mut self, dcb: &DcbConfig, mac: [u8; 6]) {
        let _ = (dcb, mac);
    }
    /// Bytes of the receive buffer in front of this datapath that PFC thresholds divide
    /// (QUERY_DCB's `rx_buffer`; MODIFY_DCB refuses an XOFF beyond it). The default is
    /// the DCB block's default size, what the software models and the RTL DCB block
    /// run; the SoC's block reports its own (16 KiB).
    fn rx_buffer_bytes(&self) -> u32 {
        RX_BUFFER_BYTES
    }
    /// Copies the next received frame into `buf` and returns its length.
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize>;
    /// Whether every frame `receive` returns has had its ICRC verified by the datapath
    /// (as the RTL does in hardware), so the engine need not compute it again.
    fn verifies_icrc(&self) -> bool {
        false
    }
    /// The RC fast path in front of this datapath (`docs/fastpath.md`), if it has one.
    /// With a fast path, every received frame reaches the runtime as one of its events
    /// and `receive` returns nothing.
    fn fastpath(&mut self) -> Option<&mut dyn FastPath> {
        None
    }
}

/// The RC fast path's hardware interface (`docs/fastpath.md`), as the firmware sees it:
/// context memories and the MR table it writes, the TX descriptor ring it posts to and
/// the event ring it drains. Everything crosses as the bytes of
/// `roce_core::fastpath::layout`.
pub trait FastPath {
    /// The port's own MAC and GID (the receive checks of §3.4).
    fn set_port(&mut self, mac: [u8; 6], gid: [u8; 16]);
    /// Writes `bytes` at `offset` of QP `qpn`'s send context (§2.1). Writing `valid`
    /// 0 drops the QP's queued descriptors and in-flight list; writing `una_psn`
    /// retires the in-flight messages that end before it.
    fn write_sctx(&mut self, qpn: Qpn, offset: usize, bytes: &[u8]);
    /// QP `qpn`'s send context.
    fn read_sctx(&mut self, qpn: Qpn) -> [u8; SCTX_LEN];
    /// Writes QP `qpn`'s receive context (§3.2).
    fn write_rctx(&mut self, qpn: Qpn, bytes: &[u8; RCTX_LEN]);
    /// QP `qpn`'s receive context.
    fn read_rctx(&mut self, qpn: Qpn) -> [u8; RCTX_LEN];
    /// Entries of the context tables: a cache, QP `qpn` in entry `qpn % ctx_entries()`,
    /// tagged by its QPN (the receive context's `qpn`); a frame for a QP whose entry holds
    /// another's is an exception with reason 14 (`docs/scale.md`). The firmware keeps at
    /// most one QP per entry on the fast path.
    fn ctx_entries(&self) -> usize;
    /// Entries in the MR table.
    fn mr_entries(&self) -> usize;
    /// Writes MR table entry `index` (§3.3).
    fn write_mr(&mut self, index: usize, bytes: &[u8; MR_LEN]);
    /// Whether `post_tx` would take a descriptor now.
    fn tx_room(&self) -> bool;
    /// Posts a TX message descriptor (§2.2); `false` when the ring is full. A FLUSH
    /// takes no ring slot and is taken when the ring is full too.
    fn post_tx(&mut self, desc: &[u8; TXD_LEN]) -> bool;
    /// Takes the next event (§3.5) as words (`layout::EventWords`; only the first
    /// `layout::EVENT_USED` bytes need be written: the decode reads no other); an
    /// EXCEPTION's frame is copied into `frame`.
    fn poll_event(&mut self, event: &mut EventWords, frame: &mut [u8]) -> bool;
    /// Whether an event waits for `poll_event`, or may yet come of a frame the hardware
    /// already took (its receive side is not idle). The firmware clears a QP's `held`
    /// only when none does (`docs/fastpath.md` §3.2): a wrapper must forward it.
    fn events_waiting(&mut self) -> bool;
    /// Whether the receive path answers in-sequence RDMA READ requests itself
    /// (`docs/fastpath.md` §3.4, "READ requests": it raises a `READ` event and sends
    /// the responses); without, every READ request is an exception, as on the RTL. The
    /// firmware asks once, at boot. A wrapper must forward it.
    fn read_responder(&self) -> bool {
        false
    }
    /// Whether [`FastPath::load_recv`] loads receive buffers: the receive path places a
    /// SEND's first packet into one loaded ahead of it (`docs/fastpath.md` §3.4). The
    /// firmware asks once, at boot. A wrapper must forward it.
    fn recv_loads(&self) -> bool {
        false
    }
    /// Loads receive buffer `buf` (address and length of the head receive WQE's one
    /// SGE) into QP `qpn`'s receive context when it has none, or unloads the one it has
    /// (`buf` None), while the QP has no message under way and, for a load, is not
    /// `held` (`layout::load_rctx`), as one step that no frame the hardware takes comes
    /// between; false when it changed nothing. A datapath without it loads nothing.
    ///
    /// `cqe`: with a load, the WQE's `wr_id` and the QP's receive CQ: a fast path with a
    /// CQE writer then writes the WQE's CQE itself at the SEND's end when the CQ's ring
    /// has room, and its `MSG_DONE` says so (`docs/fastpath.md` §3.7, "Receive CQEs");
    /// one without ignores it (the `MSG_DONE` then says nothing was written).
    fn load_recv(&mut self, qpn: Qpn, buf: Option<(u64, u32)>, cqe: Option<RecvCqe>) -> bool {
        let _ = (qpn, buf, cqe);
        false
    }
    /// Whether [`FastPath::recv_rnr`] sets `rq_empty`: the receive path answers a
    /// SEND to a QP whose receive queue is empty with an RNR NAK and an `RNR` event
    /// (`docs/fastpath.md` §3.4, "Receiver not ready"). The firmware asks once, at
    /// boot. A wrapper must forward it.
    fn rnr_responder(&self) -> bool {
        false
    }
    /// Sets `rq_empty` with timer `t` in QP `qpn`'s receive context (its receive queue
    /// is empty), or clears it (`None`), as `layout::rnr_rctx` says, as one step that no
    /// frame the hardware takes comes between; false when it changed nothing.
    fn recv_rnr(&mut self, qpn: Qpn, t: Option<RnrTimer>) -> bool {
        let _ = (qpn, t);
        false
    }
    /// The most messages a QP may have in flight for the response path to know each
    /// one (its per-QP list: the RTL's `fp_inflight` holds `layout::IF_ENTRIES`); the
    /// engine's requester then starts no more (`TransportConfig::max_msgs_in_flight`,
    /// `docs/fastpath.md` §3.8 "How deep a queue runs"). The firmware asks once, at
    /// boot. A wrapper must forward it.
    fn msgs_in_flight(&self) -> u32 {
        u32::MAX
    }
    /// Whether the segmenter paces the QPs with DCQCN's reaction point on
    /// (`docs/fastpath.md` §2.5: a pacing entry per QP, [`FastPath::set_pace`]); without,
    /// such QPs stay with the firmware. The firmware asks once, at boot. A wrapper must
    /// forward it.
    fn paces(&self) -> bool {
        false
    }
    /// Writes QP `qpn`'s whole pacing entry (its pacer too) as the QP comes on the fast
    /// path, or switches it off (`None`: the reaction point is off; CNPs are
    /// exceptions).
    fn set_pace(&mut self, qpn: Qpn, pace: Option<&crate::fastpath::Pace>) {
        let _ = (qpn, pace);
    }
    /// Writes what DCQCN changed of QP `qpn`'s pacing entry (a CNP, a timer, the byte
    /// counter); the QP's data, held for it after a `CNP` or `BYTES` event, goes on.
    fn write_pace(&mut self, qpn: Qpn, w: &crate::fastpath::PaceWrite) {
        let _ = (qpn, w);
    }
    /// QP `qpn`'s pacer as its pacing entry holds it now (`None`: no entry): the
    /// firmware's engine takes it before it builds data frames of the QP itself (a
    /// duplicate READ's responses), which leave through the entry too (§2.5).
    fn read_pacer(&mut self, qpn: Qpn) -> Option<roce_core::cc::Pacer> {
        let _ = qpn;
        None
    }
    /// A data frame of `len` bytes of paced QP `qpn` that the firmware's engine built
    /// (a duplicate READ's response, an atomic's replay) left: the entry's pacer and
    /// byte counter advance as for the segmenter's (§2.5; a `BYTES` event at the
    /// threshold).
    /// Paced QP `qpn`'s pacer's next release (ns) and where the segmenter's sends
    /// stand (the PSN after the last request packet it sent, or a rewind's since): what
    /// the engine needs to start the local ACK timer as the engine alone would (§2.5).
    fn pace_sent_to(&mut self, qpn: Qpn) -> Option<(u64, roce_core::num::Psn)> {
        let _ = qpn;
        None
    }
    fn fw_paced_sent(&mut self, qpn: Qpn, len: usize) {
        let _ = (qpn, len);
    }
    /// Holds paced QP `qpn`'s data (`hold`) while the firmware's engine has data frames
    /// of the QP queued, or lets it go (§2.5).
    fn pace_hold(&mut self, qpn: Qpn, hold: bool) {
        let _ = (qpn, hold);
    }
    /// Lets the hardware run: a model moves frames here (received frames through the
    /// rules, descriptors into frames); hardware runs by itself and returns false.
    fn run(&mut self, dma: &mut dyn Dma) -> bool;
    /// [`FastPath::run`] at time `now` (ns, the runtime's clock): a fast path with
    /// timers of its own (the WQE fetch's local ACK timer, §3.8) reads the time here.
    fn run_at(&mut self, dma: &mut dyn Dma, now: u64) -> bool {
        let _ = now;
        self.run(dma)
    }
    /// Whether the fast path runs beside the core (hardware: the SoC's), where
    /// [`FastPath::run_at`] only reads its news. The runtime then reads the news once a
    /// poll (a second read after its TX pass finds only what the hardware did in those
    /// few instructions: the next poll's) and [`FastPath::counters`] only when the host
    /// asks (QUERY_COUNTERS reads them anyway): each read is a table access of ~85
    /// instructions on the SoC's core (issue 14's 500 a packet). A model (false) runs
    /// when called, so it runs again after the TX pass gave it work.
    fn runs_by_itself(&self) -> bool {
        false
    }
    /// Frames the fast path sent and took by itself.
    fn counters(&self) -> FastPathCounters;
    /// The context cache's counts: frames whose QP's context was in its entry (and
    /// on), and frames whose entry held another QP's. Read when the host asks, not
    /// every poll.
    fn ctx_hits_misses(&self) -> [u64; 2];
    /// The requests its receive path answered itself (docs/fastpath.md §3.4, the PSN
    /// rule): out of sequence, duplicate SEND/WRITEs. Read when the host asks, as
    /// `ctx_hits_misses` (not carried with every poll's counters: the copies cost the
    /// firmware per data packet).
    fn rx_answered(&self) -> [u64; 2];
    /// Takes the accessed bits of context entries `32 * word ..= 32 * word + 31` (bit
    /// `i`: entry `32 * word + i`) and clears the bits it returns. The hardware sets an
    /// entry's bit on each frame that hits it (its QP's, on: what `ctx_hits_misses`
    /// counts as a hit), so the firmware's cache sees the QPs the fast path serves
    /// without handling their frames (`docs/scale.md`, "The accessed bits"). A frame
    /// that hits in the cycle of the take sets its bit again. Words past the entries
    /// read 0.
    fn take_accessed(&mut self, word: usize) -> u32;
    /// The hardware's CQE writer (`docs/fastpath.md` §3.7), if it has one: it writes
    /// the CQE of a signaled message a response retires into the QP's send CQ, and the
    /// firmware writes its own CQEs of the CQs it holds at its producer index, so each
    /// host ring has one producer index. None: the firmware writes every CQE.
    fn cq_writer(&mut self) -> Option<&mut CqWriter> {
        None
    }
    /// Tells the CQE writer QP `qpn`'s send CQ (None: it writes none of the QP's CQEs).
    fn set_send_cq(&mut self, qpn: Qpn, cq: Option<u16>) {
        let _ = (qpn, cq);
    }
    /// CQ `cq`'s ring as the CQE writer holds it (its producer index as it is now), if
    /// it does.
    fn cq_ring(&mut self, cq: u16) -> Option<CqRing> {
        self.cq_writer()?.get(cq)
    }
    /// CQ `cq`'s producer index as the CQE writer holds it, if it does: what
    /// [`FastPath::cq_ring`] says of it (a writer whose entries are read a word at a
    /// time reads this one alone).
    fn cq_pi(&mut self, cq: u16) -> Option<u32> {
        self.cq_ring(cq).map(|r| r.pi)
    }
    /// Hands CQ `cq`'s ring to the CQE writer (None: takes it back); false when there is
    /// no writer or `cq` is past its table.
    fn set_cq_ring(&mut self, cq: u16, ring: Option<CqRing>) -> bool {
        self.cq_writer().is_some_and(|w| w.set(cq, ring))
    }
    /// Whether the CQE writer runs beside the firmware (hardware that runs by itself,
    /// the SoC's): the firmware then posts its own CQEs of the CQs the writer holds
    /// through [`FastPath::post_cqe`] and never writes a producer index back
    /// (`docs/fastpath.md` §3.7). False: it reads the producer index, writes the CQE by
    /// DMA and writes the index back (`set_cq_ring`), which is safe because the writer
    /// runs only inside [`FastPath::run`].
    fn cqe_port(&self) -> bool {
        false
    }
    /// Posts `cqe` (its owner bit is the writer's to set) to CQ `cq` through the CQE
    /// writer's port, with the host's consumer index `ci` as the firmware read it: the
    /// writer writes it at the ring's producer index in turn with its own CQEs if the
    /// ring has room for it. None: no port, or the writer does not hold `cq`.
    fn post_cqe(&mut self, cq: u16, cqe: &[u8; 32], ci: u32) -> Option<CqePost> {
        let _ = (cq, cqe, ci);
        None
    }
    /// The hardware's WQE fetch (`docs/fastpath.md` §3.8): takes QP `qpn`'s send queue,
    /// host ring `ring` from its index `ring.ci` on, while the engine holds none of its
    /// sends (`idle`). False when this fast path has no WQE fetch or cannot take the QP
    /// now (the firmware keeps fetching).
    fn sq_hand_over(&mut self, qpn: Qpn, ring: SqRing, idle: &SqIdle) -> bool {
        let _ = (qpn, ring, idle);
        false
    }
    /// A send doorbell of a QP whose send queue the hardware holds: the host's producer
    /// index `pi` at time `now`. The hardware fetches what it can take.
    fn sq_doorbell(&mut self, qpn: Qpn, pi: u32, now: u64, dma: &mut dyn Dma) -> SqRung {
        let _ = (qpn, pi, now, dma);
        SqRung::default()
    }
    /// Takes QP `qpn`'s send queue back: the hardware fetches no more of it and says
    /// what it still holds. None when it holds none.
    fn sq_take_back(&mut self, qpn: Qpn) -> Option<SqBack> {
        let _ = qpn;
        None
    }
    /// QP `qpn`'s send queue is in the hardware's hands and its fetch stopped at a WQE
    /// it does not take (the firmware takes it back; `SqNews::stopped` says there is one).
    fn sq_stopped(&mut self, qpn: Qpn) -> bool {
        let _ = qpn;
        false
    }
    /// The local ACK deadline of QP `qpn`'s send queue in the hardware's hands (ns).
    fn sq_deadline(&mut self, qpn: Qpn) -> Option<u64> {
        let _ = qpn;
        None
    }
    /// What the fast path did since the last call: its counters, and from the WQE
    /// fetch: it wrote CQEs (the host hears of them as of the firmware's), the WQEs it
    /// took after their doorbell, its earliest local ACK deadline, and whether a queue
    /// it holds stopped.
    fn sq_news(&mut self) -> SqNews {
        SqNews {
            counters: (!self.runs_by_itself()).then(|| self.counters()),
            ..SqNews::default()
        }
    }
}

/// What the fast path counted (part of the port's counter set, so it lives in the ABI).
pub use crate::abi::counters::FastPathCounters;

/// Everything the runtime needs from the platform.
pub trait Hal {
    /// Host memory.
    type Dma: Dma;
    /// The frame path.
    type Datapath: Datapath;
    /// Whether the datapath's fast path may pace (`FastPath::paces`, `docs/fastpath.md`
    /// §2.5). A HAL whose fast path never does says false, and the firmware's code for
    /// paced QPs (their events, the pacing entries' writes, and the CQE writer's room
    /// refresh their runs of hardware-written CQEs need, `SqNews::cq_full`) is left out
    /// of its image.
    const FASTPATH_PACES: bool = true;

    /// Reads a register of the host-visible window (doorbells the host wrote).
    fn reg_read(&mut self, offset: u32) -> u32;
    /// Writes a register of the host-visible window (status, indices, events).
    fn reg_write(&mut self, offset: u32, value: u32);
    /// Host memory, by DMA.
    fn dma(&mut self) -> &mut Self::Dma;
    /// The datapath.
    fn datapath(&mut self) -> &mut Self::Datapath;
    /// DMA and the datapath at once (the engine moves payload while framing).
    fn split(&mut self) -> (&mut Self::Dma, &mut Self::Datapath);
    /// Nanoseconds since an arbitrary epoch; never decreases.
    fn now(&mut self) -> u64;
    /// Whether a doorbell may have rung since the last call (and forget it). Hardware
    /// latches doorbell writes in a pending bit; a HAL without one answers true, and the
    /// runtime then reads every doorbell register on each poll.
    /// Sets in `rung` the QP indexes written to `reg::QP_DB` since the last call, and
    /// forgets them; the cost should follow the QPs that rang, not the map's size
    /// ([`QpMap::drain_into`]). False when this platform does not latch them (the
    /// runtime then treats every QP with a doorbell record as rung whenever
    /// `take_doorbells` says so).
    fn take_rung_qps(&mut self, rung: &mut QpMap) -> bool {
        let _ = rung;
        false
    }
    fn take_doorbells(&mut self) -> bool {
        true
    }
}

/// Words in the register window.
const REG_WORDS: usize = (reg::WINDOW / 4) as usize;

pub use crate::qp_map::{QpMap, QP_MAP_WORDS};

/// The host-visible register window kept in RAM: what a platform without a hardware
/// register file (the QEMU self-test, a host harness) gives the runtime. The two sides
/// see it as the hardware does: the NIC side reads and writes every register as it is;
/// the host side gets `docs/abi.md`'s access rules (read-only registers ignore writes,
/// `EVENT_STATUS` clears the bits written as one).
///
/// Offsets outside the window or not 4-byte aligned read as 0 and ignore writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegFile {
    words: [u32; REG_WORDS],
    /// `QP_DB` writes latched per QP index (the hardware's pending bits).
    rung: QpMap,
}

impl Default for RegFile {
    fn default() -> Self {
        Self::new()
    }
}

impl RegFile {
    /// Every register zero.
    pub const fn new() -> Self {
        Self {
            words: [0; REG_WORDS],
            rung: QpMap::new(),
        }
    }

    fn index(offset: u32) -> Option<usize> {
        (offset % 4 == 0 && offset < reg::WINDOW).then_some((offset / 4) as usize)
    }

    /// The NIC side: what [`Hal::reg_read`] returns.
    pub fn nic_read(&self, offset: u32) -> u32 {
        Self::index(offset)
            .and_then(|i| self.words.get(i).copied())
            .unwrap_or(0)
    }

    /// The NIC side: what [`Hal::reg_write`] stores.
    pub fn nic_write(&mut self, offset: u32, value: u32) {
        if let Some(w) = Self::index(offset).and_then(|i| self.words.get_mut(i)) {
            *w = value;
        }
    }

    /// The NIC side of [`Hal::take_rung_qps`].
    pub fn take_rung_qps(&mut self, rung: &mut QpMap) -> bool {
        self.rung.drain_into(rung);
        true
    }

    /// The host side: an MMIO read.
    pub fn host_read(&self, offset: u32) -> u32 {
        self.nic_read(offset)
    }

    /// The host side: an MMIO write. Doorbells and the command-queue setup take the
    /// value; `EVENT_STATUS` clears the bits written as one; read-only registers
    /// (identity, status, `CMDQ_CI`, event details, clock) ignore it.
    pub fn host_write(&mut self, offset: u32, value: u32) {
        match offset {
            reg::DEVICE_ID
            | reg::VERSION
            | reg::STATUS
            | reg::CMDQ_CI
            | reg::EVENT_CQN
            | reg::EVENT_QPN
            | reg::EVENT_SRQN
            | reg::CLOCK_LO
            | reg::CLOCK_HI => {}
            reg::EVENT_STATUS => {
                let v = self.nic_read(offset) & !value;
                self.nic_write(offset, v);
            }
            // An index beyond every ICM is ignored, as hardware drops it.
            reg::QP_DB => self.rung.set(value),
            _ => self.nic_write(offset, value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_access_rules() {
        let mut r = RegFile::new();
        r.nic_write(reg::DEVICE_ID, crate::abi::DEVICE_ID);
        r.host_write(reg::DEVICE_ID, 0);
        assert_eq!(r.host_read(reg::DEVICE_ID), crate::abi::DEVICE_ID);
        r.nic_write(reg::EVENT_STATUS, 0b1011);
        r.host_write(reg::EVENT_STATUS, 0b0001);
        assert_eq!(r.nic_read(reg::EVENT_STATUS), 0b1010);
        r.host_write(reg::sq_db(3), 7);
        assert_eq!(r.nic_read(reg::sq_db(3)), 7);
        r.host_write(reg::CMDQ_CI, 9);
        assert_eq!(r.nic_read(reg::CMDQ_CI), 0);
        // Outside the window or unaligned: ignored, reads 0.
        r.nic_write(reg::WINDOW, 1);
        r.nic_write(2, 1);
        assert_eq!(r.nic_read(reg::WINDOW), 0);
        assert_eq!(r.nic_read(2), 0);
    }
}
