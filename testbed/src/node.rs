//! A NIC model as a node of the simulated fabric.

use crate::dcbx::DcbxAgent;
use crate::rtl_dcb::{RtlDcb, RtlDcbConfig};
use crate::rx_buffer::{RxBuffer, RxBufferConfig, RxBufferCounters};
use roce_core::dcb::{Ets, PRIORITIES};
use roce_core::engine::DcbConfig;
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::udp::ROCEV2_PORT;
use roce_device::NicModel;
use roce_sim::classify::{classify, default_dscp_map};
use roce_sim::{Nanos, Node, Priorities, MIN_FRAME_LEN, WIRE_OVERHEAD};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The NIC's path to host memory, as the QP context cache uses it (`docs/scale.md`):
/// bringing a stored QP in reads its ICM entry (`ICM_ENTRY_LEN` bytes), writing one back
/// sends the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPath {
    /// A DMA read's round trip, from the request to the first data back, in ns.
    pub read_latency: Nanos,
    /// Bytes per microsecond the path moves one way.
    pub bytes_per_us: u64,
}

impl HostPath {
    /// PCIe Gen3 x16: 8 GT/s x 16 lanes with 128b/130b coding is 15.75 GB/s; TLP headers
    /// (about 24 B per 256-byte payload) leave about 14 GB/s; the read round trip is
    /// taken as 1 us (`BENCHMARKS.md` says where these come from).
    pub const PCIE_GEN3_X16: Self = Self {
        read_latency: 1_000,
        bytes_per_us: 14_000,
    };
    /// Context DMA costs no time (the simulator before it was modelled).
    pub const FREE: Self = Self {
        read_latency: 0,
        bytes_per_us: 0,
    };

    /// Time for `misses` context reads and `evictions` write-backs, one after another: a
    /// read waits its round trip and its transfer; a write-back is posted and costs its
    /// transfer.
    pub fn cost(&self, misses: u64, evictions: u64) -> Nanos {
        let entry = roce_abi::ICM_ENTRY_LEN as u64;
        let transfer = (entry * 1_000).checked_div(self.bytes_per_us).unwrap_or(0);
        misses * (self.read_latency + transfer) + evictions * transfer
    }
}

/// A NIC model as a node of the simulated fabric: frames the fabric delivers go to the
/// NIC, and the fabric pulls its transmissions at link rate. The NIC itself takes no
/// simulated time: the modelled path is links (and switches), serialization and
/// propagation; unless it has a receive buffer ([`NicNode::with_rx_buffer`]), which
/// takes frames in at a finite rate and sends PFC pause frames when it fills.
///
/// QP context DMA does take time: each context cache miss and write-back the NIC makes
/// (`NicModel::context_dma`) holds its transmitter for what it costs over the host path
/// ([`HostPath`]; by default [`HostPath::PCIE_GEN3_X16`]), one after another, as a NIC
/// whose pipeline waits for the context before it builds the QP's next frame. The NIC
/// still takes frames in meanwhile. (A NIC that overlaps misses, as ConnectX does, loses
/// less.)
///
/// The transmit side is the NIC's DCB MAC (what `hdl-sim/rtl/roce_dcb_top.sv` is in
/// hardware): a queue of `TX_QUEUE_FRAMES` frames per 802.1p priority, filled by the
/// engine (`NicModel::transmit_frame_except`, which builds no frame for a full queue)
/// and served by ETS (`roce_core::dcb::Ets`) as the host configured it through the
/// ABI's MODIFY_DCB (`DcbConfig::ets`: strict classes first, the others by their
/// bandwidth shares of the wire bytes); frames go to a priority by the port's map
/// (`DcbConfig::map`). PFC reception: the fabric's MAC keeps the pause timers and passes
/// the paused priorities to `poll_transmit`; a paused priority that the NIC has PFC on
/// for (set through the ABI) sends nothing, and the others flow. A NIC model that builds
/// frames ahead of the port, or a NicNode made [`NicNode::single_queue`], has one
/// transmit FIFO instead: a frame of a paused priority waits at the head and holds back
/// the frames behind it (of any priority, CNPs too) until the pause ends. PFC frames are
/// never held.
///
/// Or the MAC is the RTL ([`NicNode::with_rtl_dcb`], [`crate::rtl_dcb`]): the
/// Verilated DCB block holds the per-priority queues, ETS, the pause timers and the
/// receive buffer that generates PFC, in place of the models above.
pub struct NicNode {
    nic: Rc<dyn NicModel>,
    /// The receive buffer and its PFC generation, if modelled.
    rx: Option<RxBuffer>,
    /// The DCB MAC in RTL, if the NIC has it (then `rx`, `queues` and `ets` are unused).
    rtl: Option<RtlDcb>,
    /// A frame the NIC built ahead for a priority whose RTL queue had no room.
    rtl_held: Option<Vec<u8>>,
    /// Scratch for frames the NIC builds at a wake-up (no fabric buffer then).
    rtl_scratch: Vec<u8>,
    /// The host's DCBX agent, if one runs: LLDP frames go to it, and it sends its own.
    dcbx: Option<DcbxAgent>,
    /// The transmit queue of each priority (one FIFO, index 0, when `single_queue`).
    queues: [VecDeque<TxFrame>; PRIORITIES],
    /// The queues that hold a frame, by index (kept with every push and pop: ETS and
    /// `fill` ask at every pull, without walking the eight queues).
    queued: Priorities,
    /// Buffers of frames sent, for the next frames the NIC builds ahead (each of
    /// `MAX_FRAME_LEN` bytes: a fabric buffer it may be swapped with).
    spare: Vec<Box<[u8]>>,
    /// ETS's state between the queues.
    ets: Ets,
    /// One transmit FIFO for every priority (no per-priority queues).
    single_queue: bool,
    /// Wire bytes sent per priority (frames, FCS, preamble and gap; PFC frames apart).
    tx_bytes: [u64; PRIORITIES],
    /// Wire bytes received per destination QP, when metered (`roce sim`'s per-flow rates).
    meter: Option<HashMap<u32, u64>>,
    /// Context DMA: the path's costs, the cache misses and write-backs already charged,
    /// and when the transmitter may send again.
    host_path: HostPath,
    ctx_charged: (u64, u64),
    ctx_busy_until: Nanos,
    /// The time of the last call from the fabric.
    now: Nanos,
}

/// A frame the NIC built ahead, in a buffer of a maximum frame (reused once it is sent,
/// or handed to the fabric in place of the fabric's).
struct TxFrame {
    buf: Box<[u8]>,
    len: usize,
}

/// What the transmit side has for the wire.
enum Sent {
    /// A frame written into the fabric's buffer, this long.
    Written(usize),
    /// A frame from the queues.
    Queued(TxFrame),
}

impl TxFrame {
    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

impl NicNode {
    pub fn new(nic: Rc<dyn NicModel>) -> Self {
        Self {
            nic,
            rx: None,
            rtl: None,
            rtl_held: None,
            rtl_scratch: Vec::new(),
            dcbx: None,
            queues: Default::default(),
            queued: Priorities::NONE,
            spare: Vec::new(),
            ets: Ets::default(),
            single_queue: false,
            tx_bytes: [0; PRIORITIES],
            meter: None,
            host_path: HostPath::PCIE_GEN3_X16,
            ctx_charged: (0, 0),
            ctx_busy_until: 0,
            now: 0,
        }
    }

    /// The NIC with context DMA over `path` ([`HostPath::FREE`]: none charged).
    pub fn with_host_path(mut self, path: HostPath) -> Self {
        self.host_path = path;
        self
    }

    /// A NIC with one transmit FIFO for all priorities, as before per-priority queues
    /// (issue 18): a frame of a paused priority blocks everything behind it.
    pub fn single_queue(mut self) -> Self {
        self.single_queue = true;
        self
    }

    /// Counts the wire bytes (frame, FCS, preamble and gap) of every RoCEv2 frame
    /// received, by destination QP number: each QP is one flow's receiving end.
    pub fn metered(mut self) -> Self {
        self.meter = Some(HashMap::new());
        self
    }

    /// Wire bytes received so far for QP `qpn` (0 when not metered).
    pub fn rx_bytes(&self, qpn: u32) -> u64 {
        self.meter
            .as_ref()
            .and_then(|m| m.get(&qpn).copied())
            .unwrap_or(0)
    }

    fn count(&mut self, frame: &[u8]) {
        let Some(meter) = &mut self.meter else { return };
        let Some(udp) = classify(frame, &default_dscp_map()).and_then(|c| c.udp) else {
            return;
        };
        // UDP destination port 4791, then the BTH's DestQP (bytes 5..8).
        let Some(h) = frame.get(udp..udp + 8 + 8) else {
            return;
        };
        if u16::from_be_bytes([h[2], h[3]]) != ROCEV2_PORT {
            return;
        }
        let qpn = u32::from_be_bytes([0, h[13], h[14], h[15]]);
        *meter.entry(qpn).or_default() += (frame.len().max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64;
    }

    /// The NIC with a finite receive buffer drained at a finite rate, generating PFC
    /// for the priorities the NIC has PFC on for (the model is described in
    /// [`crate::rx_buffer`]).
    pub fn with_rx_buffer(mut self, cfg: RxBufferConfig) -> Self {
        self.rx = Some(RxBuffer::new(cfg));
        self
    }

    /// The NIC behind the DCB block in RTL (`crate::rtl_dcb`): its queues, ETS, pause
    /// timers and receive buffer are the hardware's. Fails when the RTL model is
    /// unavailable.
    pub fn with_rtl_dcb(mut self, cfg: RtlDcbConfig) -> Result<Self, roce_hdl_sim::SimError> {
        self.rtl = Some(RtlDcb::new(cfg)?);
        Ok(self)
    }

    /// The DCB block in RTL, if the NIC has one.
    pub fn rtl_dcb(&self) -> Option<&RtlDcb> {
        self.rtl.as_ref()
    }

    /// Runs the host's DCBX agent on this NIC's link (`crate::dcbx`): it takes the
    /// LLDP frames that arrive and announces the port's settings.
    pub fn set_dcbx(&mut self, agent: DcbxAgent) {
        self.dcbx = Some(agent);
    }

    /// The DCBX agent, if one runs.
    pub fn dcbx(&self) -> Option<&DcbxAgent> {
        self.dcbx.as_ref()
    }

    /// What the receive buffer did (all zero without one).
    pub fn rx_buffer_counters(&self) -> RxBufferCounters {
        self.rx.as_ref().map(|r| r.counters).unwrap_or_default()
    }

    /// Wire bytes the NIC has sent of each priority (frame, FCS, preamble and gap),
    /// pause frames apart.
    pub fn tx_bytes(&self) -> [u64; PRIORITIES] {
        self.tx_bytes
    }

    /// The NIC.
    pub fn nic(&self) -> &Rc<dyn NicModel> {
        &self.nic
    }

    /// The priorities the NIC has PFC on for.
    fn lossless(&self) -> Priorities {
        Priorities(self.nic.dcb().pfc_enable)
    }

    fn run(&mut self, now: Nanos) {
        self.nic.set_time(now);
        self.nic.run_until_idle();
        self.charge_context_dma(now);
    }

    /// Holds the transmitter for the context misses and write-backs since the last call.
    fn charge_context_dma(&mut self, now: Nanos) {
        self.now = now;
        let (misses, evictions) = self.nic.context_dma();
        if (misses, evictions) == self.ctx_charged {
            // Nothing since the last call (every call without a QP cache).
            return;
        }
        let (m0, e0) = std::mem::replace(&mut self.ctx_charged, (misses, evictions));
        let cost = self
            .host_path
            .cost(misses.saturating_sub(m0), evictions.saturating_sub(e0));
        if cost > 0 {
            self.ctx_busy_until = self.ctx_busy_until.max(now) + cost;
        }
    }

    /// Clocks the RTL DCB block up to `now`, handing the frames it received to the NIC
    /// (LLDP to the DCBX agent), with the port's settings written to it first.
    fn rtl_advance(&mut self, now: Nanos) {
        let Self { rtl, nic, dcbx, .. } = self;
        let Some(rtl) = rtl.as_mut() else { return };
        let cfg = nic.port_config();
        rtl.configure(cfg.mac, &cfg.dcb);
        rtl.advance(now, &mut |frame: &[u8]| match dcbx.as_mut() {
            Some(agent) if DcbxAgent::is_lldp(frame) => agent.receive(frame),
            _ => nic.receive_frame(frame),
        });
    }

    /// The RTL DCB block's transmit side: fills a queue with room from the NIC, then
    /// hands the fabric what the block put on the wire.
    fn rtl_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        self.rtl_advance(now);
        self.rtl_fill(now, buf);
        let map = self.nic.dcb().map;
        let frame = self.rtl.as_mut()?.pop_wire()?;
        let n = frame.len();
        buf.get_mut(..n)?.copy_from_slice(&frame);
        if frame.get(12..14) != Some(&[0x88, 0x08][..]) {
            self.tx_bytes[usize::from(map.of_frame(&frame))] += wire_len(n);
        }
        Some(n)
    }

    /// Hands the RTL DCB block's queues with room a frame each from the NIC (`buf`:
    /// scratch of a maximum frame). Done whenever the block is clocked, as the hardware's
    /// datapath feeds it whenever a queue has room, not only when the wire is free.
    fn rtl_fill(&mut self, now: Nanos, buf: &mut [u8]) {
        let map = self.nic.dcb().map;
        let Some(rtl) = self.rtl.as_mut() else { return };
        while now >= self.ctx_busy_until {
            let room = rtl.room();
            if room.is_empty() {
                break;
            }
            // The NIC builds a frame only for a priority whose queue has room; a model
            // that builds ahead may hand another, which waits here for its room.
            let frame = match self.rtl_held.take() {
                Some(f) => f,
                None => match self
                    .nic
                    .transmit_frame_except(buf, Priorities(!room.0))
                    .and_then(|n| buf.get(..n))
                {
                    Some(f) => f.to_vec(),
                    None => break,
                },
            };
            let prio = map.of_frame(&frame);
            if !room.contains(prio) {
                self.rtl_held = Some(frame);
                break;
            }
            rtl.push_tx(&frame, prio);
        }
    }

    /// Moves the frames the NIC has finished taking in by `now` from the receive buffer
    /// into it.
    fn drain(&mut self, now: Nanos) {
        while let Some(frame) = self.rx.as_mut().and_then(|r| r.pop_due(now)) {
            self.nic.receive_frame(&frame);
        }
    }
}

/// Frames each priority's transmit queue holds, built ahead of the wire: one, so
/// that ETS chooses among every busy priority at each frame while the engine builds as
/// late as it can.
pub const TX_QUEUE_FRAMES: usize = 1;

/// Wire bytes of a frame of `len` bytes (without FCS): padded to the minimum, plus FCS,
/// preamble and gap.
fn wire_len(len: usize) -> u64 {
    (len.max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64
}

impl NicNode {
    /// Lets the NIC fill the transmit queues that have room (the one FIFO: while it
    /// is empty). The engine builds no frame of a full queue's priority; a model that
    /// builds frames ahead of the port may hand one anyway, which then waits in its
    /// queue beyond the limit, and filling stops. `dcb` holds the port's DCB settings
    /// once read from the NIC: the first frame to classify reads them.
    fn fill(&mut self, dcb: &mut Option<DcbConfig>) {
        loop {
            let full = if self.single_queue {
                if !self.queued.is_empty() {
                    return;
                }
                Priorities::NONE
            } else if TX_QUEUE_FRAMES == 1 {
                self.queued
            } else {
                let mut full = Priorities::NONE;
                for (p, q) in self.queues.iter().enumerate() {
                    if q.len() >= TX_QUEUE_FRAMES {
                        full = full.with(p as u8);
                    }
                }
                full
            };
            // Asked first: a call that finds nothing costs the NIC's layers, and the
            // sender of a stream makes one after every frame (for the priorities still
            // free once its own priority's queue is full).
            if full == Priorities::ALL || !self.nic.may_transmit_except(full) {
                return;
            }
            // Built straight into a queue buffer (a spare one: no allocation and no copy
            // per frame).
            let mut buf = self
                .spare
                .pop()
                .unwrap_or_else(|| vec![0; roce_sim::MAX_FRAME_LEN].into_boxed_slice());
            let Some(len) = self.nic.transmit_frame_except(&mut buf, full) else {
                self.spare.push(buf);
                return;
            };
            let frame = TxFrame { buf, len };
            let map = &dcb.get_or_insert_with(|| self.nic.dcb()).map;
            let prio = map.of_frame(frame.bytes());
            let q = if self.single_queue {
                0
            } else {
                usize::from(prio)
            };
            self.queues[q].push_back(frame);
            self.queued = self.queued.with(q as u8);
            if full.contains(prio) {
                return;
            }
        }
    }

    /// The transmitter is idle: a PFC or LLDP frame or the RTL MAC's written into
    /// `buf`, or the next frame of the queues (ETS's pick), counted as sent.
    fn transmit(&mut self, now: Nanos, paused: Priorities, buf: &mut [u8]) -> Option<Sent> {
        self.run(now);
        if self.rx.as_ref().is_some_and(RxBuffer::has_pause_frame) {
            let mac = MacAddr(self.nic.port_config().mac);
            if let Some(n) = self.rx.as_mut()?.pause_frame(now, mac, buf) {
                return Some(Sent::Written(n));
            }
        }
        if let Some(agent) = self.dcbx.as_mut() {
            let cfg = self.nic.port_config();
            if let Some(n) = agent.frame(now, MacAddr(cfg.mac), cfg.dcb, buf) {
                return Some(Sent::Written(n));
            }
        }
        // 802.1Qbb: the MAC honours pauses for the priorities it has PFC on for.
        let paused = if paused.is_empty() {
            paused
        } else {
            Priorities(paused.0 & self.lossless().0)
        };
        if self.rtl.is_some() {
            return self.rtl_transmit(now, buf).map(Sent::Written);
        }
        if now < self.ctx_busy_until {
            // Waiting for context DMA; `poll_timeout` wakes the node when it is done.
            return None;
        }
        // The DCB settings are read once, when a frame needs them: not at all on a
        // pull that finds nothing (the receiver's, at every packet of a stream).
        let mut dcb = None;
        self.fill(&mut dcb);
        if self.queued.is_empty() {
            return None;
        }
        let dcb = dcb.get_or_insert_with(|| self.nic.dcb());
        // The one FIFO's head, or ETS's pick among the queues that hold a frame of a
        // priority not paused.
        let (index, prio) = if self.single_queue {
            (0, dcb.map.of_frame(self.queues[0].front()?.bytes()))
        } else {
            let eligible = Priorities(self.queued.0 & !paused.0);
            let p = self.ets.pick(&dcb.ets, eligible)?;
            let len = wire_len(self.queues[usize::from(p)].front()?.len);
            self.ets.sent(&dcb.ets, eligible, p, len as u32);
            (usize::from(p), p)
        };
        if paused.contains(prio) {
            // One FIFO: the paused frame at the head holds back everything.
            return None;
        }
        let frame = self.queues[index].pop_front()?;
        if self.queues[index].is_empty() {
            self.queued = Priorities(self.queued.0 & !(1 << index));
        }
        self.tx_bytes[usize::from(prio)] += wire_len(frame.len);
        Some(Sent::Queued(frame))
    }
}

impl Node for NicNode {
    fn link_up(&mut self, _port: usize, rate_bps: u64) {
        if let Some(rx) = self.rx.as_mut() {
            rx.link_bps = rate_bps;
        }
        if let Some(rtl) = self.rtl.as_mut() {
            rtl.set_link(rate_bps);
        }
    }

    fn own_mac_control(&self, _port: usize) -> bool {
        self.rtl.is_some()
    }

    fn handle_frame(&mut self, now: Nanos, _port: usize, frame: &[u8]) {
        self.count(frame);
        self.nic.set_time(now);
        if self.rtl.is_some() {
            self.rtl_advance(now);
            if let Some(rtl) = self.rtl.as_mut() {
                rtl.push_rx(frame);
            }
            self.run(now);
            return;
        }
        if let Some(agent) = self.dcbx.as_mut().filter(|_| DcbxAgent::is_lldp(frame)) {
            // The host's agent, through the NIC's Ethernet function, not the RoCE
            // engine.
            agent.receive(frame);
            self.run(now);
            return;
        }
        if self.rx.is_some() {
            let prio = self.nic.dcb().map.of_frame(frame);
            let lossless = self.lossless();
            if let Some(rx) = self.rx.as_mut() {
                rx.push(now, frame, prio, lossless);
            }
            self.drain(now);
        } else {
            self.nic.receive_frame(frame);
        }
        self.run(now);
    }

    fn poll_transmit(
        &mut self,
        now: Nanos,
        _port: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        match self.transmit(now, paused, buf)? {
            Sent::Written(n) => Some(n),
            Sent::Queued(frame) => {
                let n = frame.len;
                let copied = buf.get_mut(..n).map(|b| b.copy_from_slice(frame.bytes()));
                self.spare.push(frame.buf);
                copied.map(|()| n)
            }
        }
    }

    /// The queued frame's own buffer goes to the fabric, and the fabric's becomes a
    /// spare: no copy of the frame.
    fn poll_transmit_buffer(
        &mut self,
        now: Nanos,
        _port: usize,
        paused: Priorities,
        buf: &mut Box<[u8]>,
    ) -> Option<usize> {
        match self.transmit(now, paused, buf)? {
            Sent::Written(n) => Some(n),
            Sent::Queued(mut frame) => {
                let n = frame.len;
                if frame.buf.len() == buf.len() {
                    std::mem::swap(buf, &mut frame.buf);
                    self.spare.push(frame.buf);
                    return Some(n);
                }
                let copied = buf.get_mut(..n).map(|b| b.copy_from_slice(frame.bytes()));
                self.spare.push(frame.buf);
                copied.map(|()| n)
            }
        }
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        // The earliest of the deadlines (asked after every event: no iterator chain).
        let earliest = |a: Option<Nanos>, b: Option<Nanos>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut t = self.nic.poll_timeout();
        if self.ctx_busy_until > self.now {
            t = earliest(t, Some(self.ctx_busy_until));
        }
        if let Some(rx) = &self.rx {
            t = earliest(t, rx.poll_timeout());
        }
        if let Some(dcbx) = &self.dcbx {
            t = earliest(t, Some(dcbx.poll_timeout()));
        }
        if let Some(rtl) = &self.rtl {
            t = earliest(t, rtl.next_wake(self.now));
        }
        t
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.nic.set_time(now);
        if let Some(rx) = self.rx.as_mut() {
            rx.handle_timeout(now);
        }
        self.drain(now);
        self.rtl_advance(now);
        self.run(now);
        if self.rtl.is_some() {
            let mut buf = std::mem::take(&mut self.rtl_scratch);
            buf.resize(roce_sim::MAX_FRAME_LEN, 0);
            self.rtl_fill(now, &mut buf);
            self.rtl_scratch = buf;
        }
    }
}
