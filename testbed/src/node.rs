//! A NIC model as a node of the simulated fabric.

use crate::rx_buffer::{RxBuffer, RxBufferConfig, RxBufferCounters};
use roce_core::dcb::PriorityMap;
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::udp::ROCEV2_PORT;
use roce_device::NicModel;
use roce_sim::classify::classify;
use roce_sim::{Nanos, Node, Priorities, MIN_FRAME_LEN, WIRE_OVERHEAD};
use std::collections::HashMap;
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
/// PFC reception: the fabric's MAC keeps the pause timers and passes the paused
/// priorities to `poll_transmit`; the NIC then sends no frame of a paused priority that
/// it has PFC on for (the host sets those through the ABI), and the other priorities
/// flow: the engine builds no frame of a paused priority
/// (`NicModel::transmit_frame_except`, a transmit queue per priority, issue 18). A NIC
/// model that builds frames ahead of the port, or a NicNode made
/// [`NicNode::single_queue`], has one transmit FIFO instead: a frame of a paused
/// priority waits at the head and holds back the frames behind it (of any priority, CNPs
/// too) until the pause ends. PFC frames are never held.
pub struct NicNode {
    nic: Rc<dyn NicModel>,
    /// The receive buffer and its PFC generation, if modelled.
    rx: Option<RxBuffer>,
    dscp_map: [u8; 64],
    /// A frame the engine produced for a priority that was paused: it goes first later.
    held: Option<Vec<u8>>,
    /// One transmit FIFO for every priority (no per-priority queues).
    single_queue: bool,
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

impl NicNode {
    pub fn new(nic: Rc<dyn NicModel>) -> Self {
        Self {
            nic,
            rx: None,
            dscp_map: std::array::from_fn(|d| (d >> 3) as u8),
            held: None,
            single_queue: false,
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
        let Some(udp) = classify(frame, &self.dscp_map).and_then(|c| c.udp) else {
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

    /// What the receive buffer did (all zero without one).
    pub fn rx_buffer_counters(&self) -> RxBufferCounters {
        self.rx.as_ref().map(|r| r.counters).unwrap_or_default()
    }

    /// The NIC.
    pub fn nic(&self) -> &Rc<dyn NicModel> {
        &self.nic
    }

    /// The priorities the NIC has PFC on for.
    fn lossless(&self) -> Priorities {
        Priorities(self.nic.port_config().dcb.pfc_enable)
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
        let (m0, e0) = std::mem::replace(&mut self.ctx_charged, (misses, evictions));
        let cost = self
            .host_path
            .cost(misses.saturating_sub(m0), evictions.saturating_sub(e0));
        if cost > 0 {
            self.ctx_busy_until = self.ctx_busy_until.max(now) + cost;
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

impl Node for NicNode {
    fn link_up(&mut self, _port: usize, rate_bps: u64) {
        if let Some(rx) = self.rx.as_mut() {
            rx.link_bps = rate_bps;
        }
    }

    fn handle_frame(&mut self, now: Nanos, _port: usize, frame: &[u8]) {
        self.count(frame);
        self.nic.set_time(now);
        if self.rx.is_some() {
            let prio = classify(frame, &self.dscp_map).map_or(0, |c| c.priority);
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
        self.run(now);
        if self.rx.as_ref().is_some_and(RxBuffer::has_pause_frame) {
            let mac = MacAddr(self.nic.port_config().mac);
            if let Some(n) = self.rx.as_mut()?.pause_frame(now, mac, buf) {
                return Some(n);
            }
        }
        // 802.1Qbb: the MAC honours pauses for the priorities it has PFC on for.
        let paused = if paused.is_empty() {
            paused
        } else {
            Priorities(paused.0 & self.lossless().0)
        };
        if now < self.ctx_busy_until {
            // Waiting for context DMA; `poll_timeout` wakes the node when it is done.
            return None;
        }
        let prio = |f: &[u8]| classify(f, &self.dscp_map).map_or(0, |c| c.priority);
        if let Some(frame) = self.held.take() {
            // A paused priority sends nothing; the frame waits at the head.
            if paused.contains(prio(&frame)) {
                self.held = Some(frame);
                return None;
            }
            buf.get_mut(..frame.len())?.copy_from_slice(&frame);
            return Some(frame.len());
        }
        let blocked = if self.single_queue {
            Priorities::NONE
        } else {
            paused
        };
        let map = PriorityMap {
            dscp: self.dscp_map,
            ..PriorityMap::new()
        };
        let n = self.nic.transmit_frame_except(buf, &map, blocked)?;
        let frame = buf.get(..n)?;
        if !paused.is_empty() && paused.contains(prio(frame)) {
            self.held = Some(frame.to_vec());
            return None;
        }
        Some(n)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        let ctx = (self.ctx_busy_until > self.now).then_some(self.ctx_busy_until);
        [
            self.nic.poll_timeout(),
            self.rx.as_ref().and_then(RxBuffer::poll_timeout),
            ctx,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.nic.set_time(now);
        if let Some(rx) = self.rx.as_mut() {
            rx.handle_timeout(now);
        }
        self.drain(now);
        self.run(now);
    }
}
