//! The fabric: hosts ([`Node`]s), switches and links, driven by one event queue.
//!
//! Everything that happens is an event at a nanosecond: a transmitter becoming idle, a
//! frame's last bit arriving, a node's timer, a pause ending, a switch's PFC refresh, a
//! sample. Events at the same nanosecond run in the order they were scheduled, and every
//! random draw comes from a stream derived from the fabric's seed and the creation index
//! of its link or switch, so a run is a function of its seed and its construction:
//! same seed, same result, bit for bit.

use crate::link::{Direction, Faults, LinkConfig, LinkCounters};
use crate::mac::{mac_control, PauseState, PortCounters};
use crate::node::{AnyNode, Node};
use crate::pcap::Tap;
use crate::pool::{new_buffer, FrameId, FramePool};
use crate::queue::{EventQueue, Nanos};
use crate::rng::{derive_seed, Rng};
use crate::switch::{Switch, SwitchConfig, SwitchCounters, SwitchIo};
use roce_core::wire::ethernet::{MacAddr, ETHERTYPE_MAC_CONTROL};
use std::fmt;
use std::io::{self, Write};
use std::marker::PhantomData;

/// Any element of the fabric: a host or a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// Creation index of the element.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A host whose node has type `T`, so [`Fabric::host`] can hand it back typed.
pub struct HostId<T> {
    id: NodeId,
    _node: PhantomData<fn() -> T>,
}

impl<T> HostId<T> {
    pub fn id(&self) -> NodeId {
        self.id
    }
}
impl<T> Clone for HostId<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for HostId<T> {}
impl<T> fmt::Debug for HostId<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostId({})", self.id.0)
    }
}
impl<T> From<HostId<T>> for NodeId {
    fn from(h: HostId<T>) -> Self {
        h.id
    }
}

/// A switch of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SwitchId(NodeId);

impl SwitchId {
    pub fn id(self) -> NodeId {
        self.0
    }
}
impl From<SwitchId> for NodeId {
    fn from(s: SwitchId) -> Self {
        s.0
    }
}

/// A link of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkId(u32);

/// A pcap tap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TapId(u32);

/// A queue-depth sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SamplerId(u32);

/// Queue depths of every port of a switch at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSample {
    pub time: Nanos,
    pub port: u16,
    /// Bytes queued per priority.
    pub depth: [u64; 8],
}

/// A time series of queue depths, for plots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSeries {
    pub switch: SwitchId,
    pub interval: Nanos,
    /// One sample per port per tick, in time then port order.
    pub samples: Vec<QueueSample>,
}

impl QueueSeries {
    /// Writes `time_ns,port,p0,...,p7` rows.
    pub fn write_csv(&self, mut w: impl Write) -> io::Result<()> {
        writeln!(w, "time_ns,port,p0,p1,p2,p3,p4,p5,p6,p7")?;
        for s in &self.samples {
            write!(w, "{},{}", s.time, s.port)?;
            for d in s.depth {
                write!(w, ",{d}")?;
            }
            writeln!(w)?;
        }
        Ok(())
    }
}

/// Every counter of the fabric, comparable as a whole (determinism checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Per link, per direction (`[a_to_b, b_to_a]`).
    pub links: Vec<[LinkCounters; 2]>,
    /// Per node, per port: the MAC counters (paused time up to now).
    pub ports: Vec<Vec<PortCounters>>,
    /// Per switch, in creation order.
    pub switches: Vec<SwitchCounters>,
}

enum Kind {
    Host(Box<dyn AnyNode>),
    Switch(Box<Switch>),
}

/// The layer-2 state of one port: its link, transmitter and pause timers.
#[derive(Default)]
struct PortMac {
    /// Link index and direction of this port's transmissions.
    link: Option<(u32, u8)>,
    rate_bps: u64,
    /// The transmitter is busy until the last bit of its frame leaves.
    busy_until: Nanos,
    /// A `TxDone` is scheduled at `busy_until`.
    tx_wake: bool,
    pause: PauseState,
    counters: PortCounters,
}

struct Slot {
    kind: Kind,
    ports: Vec<PortMac>,
    /// The host's scheduled timeout.
    timer_at: Option<Nanos>,
}

struct Link {
    /// (node, port) of endpoint a and b; direction d carries ends[d] -> ends[1 - d].
    /// A remote link's end b is in another partition (its entry is unused).
    ends: [(u32, u16); 2],
    dirs: [Direction; 2],
    /// Taps and what they see: `None`, what the link delivers both ways; `Some(e)`, end
    /// `e`'s view.
    taps: Vec<(u32, Option<u8>)>,
    /// For a link to another partition: where direction 0 delivers. Direction 1 is that
    /// partition's to serialize; its frames come in through [`Fabric::deliver_remote`].
    remote: Option<RemoteEnd>,
}

/// The far end of a link that crosses partitions (see [`crate::parallel`]): the
/// partition it is in, and the link's number, which both partitions use for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteEnd {
    pub partition: usize,
    pub link: u32,
}

/// A frame leaving the partition: it arrives at `at` on remote link `to.link` of
/// partition `to.partition`. Its bytes are the first `len` of `buffer`, a whole frame
/// buffer that goes over to the receiving partition (no copy; the receiver gives one
/// back: [`Fabric::take_returned`], [`Fabric::give_buffers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub at: Nanos,
    pub to: RemoteEnd,
    pub buffer: Box<[u8]>,
    pub len: usize,
}

impl Outgoing {
    /// The frame's bytes.
    pub fn frame(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

struct Sampler {
    switch: u32,
    series: QueueSeries,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// Poll every idle port of a host, then its timer (after it was added or linked).
    Wake(u32),
    /// A host's timeout.
    Timer(u32),
    /// The last bit of a port's frame left: the transmitter is idle.
    TxDone {
        node: u32,
        port: u16,
    },
    /// The last bit of a frame reached the receiving end of link direction `dir`.
    Arrive {
        link: u32,
        dir: u8,
        frame: FrameId,
    },
    /// A pause of some priority of a port may have ended.
    PauseEnd {
        node: u32,
        port: u16,
    },
    /// A switch's PFC refresh timer.
    SwitchTimer {
        node: u32,
        port: u16,
    },
    Sample(u32),
    /// A frame from another partition reached this end of a remote link: its entry in
    /// `inbound`.
    Remote(u32),
}

// Random streams are numbered by kind so that adding a switch never shifts a link's.
const STREAM_LINK: u64 = 1 << 40;
const STREAM_SWITCH: u64 = 2 << 40;
const STREAM_REMOTE: u64 = 3 << 40;

/// A frame from another partition before it arrives: (local link, buffer, length).
type Inbound = (u32, Box<[u8]>, usize);

/// The simulated network.
pub struct Fabric {
    seed: u64,
    now: Nanos,
    events: EventQueue<Event>,
    nodes: Vec<Slot>,
    links: Vec<Link>,
    pool: FramePool,
    taps: Vec<Option<Tap>>,
    samplers: Vec<Sampler>,
    pending_samples: usize,
    io: SwitchIo,
    events_run: u64,
    /// A buffer a host was offered and did not fill: offered again next time rather than
    /// freed and taken anew (most polls of a receiving host come back empty).
    spare: Option<FrameId>,
    /// Frames sent into other partitions, until the parallel engine takes them.
    outgoing: Vec<Outgoing>,
    /// Local link index of each remote link number.
    remote_links: std::collections::HashMap<u32, u32>,
    /// Frames from other partitions waiting for their arrival event: (local link,
    /// buffer, length). They take a place in the pool only when they arrive, so the
    /// pool's use does not depend on when the engine handed them over.
    inbound: Vec<Option<Inbound>>,
    /// Buffers to send frames to other partitions in (given back by them).
    spare_buffers: Vec<Box<[u8]>>,
    /// Buffers frames from other partitions came in, owed back: (partition, buffer).
    returned: Vec<(usize, Box<[u8]>)>,
    /// Free entries of `inbound`.
    inbound_free: Vec<u32>,
}

impl Fabric {
    /// An empty fabric at time 0 whose random streams derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            now: 0,
            events: EventQueue::default(),
            nodes: Vec::new(),
            links: Vec::new(),
            pool: FramePool::default(),
            taps: Vec::new(),
            samplers: Vec::new(),
            pending_samples: 0,
            io: SwitchIo::default(),
            events_run: 0,
            spare: None,
            outgoing: Vec::new(),
            remote_links: std::collections::HashMap::new(),
            inbound: Vec::new(),
            inbound_free: Vec::new(),
            spare_buffers: Vec::new(),
            returned: Vec::new(),
        }
    }

    /// An empty fabric, as [`new`](Self::new) makes, that keeps this one's frame buffers
    /// (every frame still in flight is dropped). For a caller that builds many
    /// short-lived fabrics (the fuzz targets build one or two per input): a new fabric
    /// allocates and zeroes a 9 KB buffer for every frame it ever holds at once, and
    /// that took a quarter of such a caller's time.
    pub fn recycle(self, seed: u64) -> Self {
        let mut pool = self.pool;
        pool.free_all();
        Self {
            pool,
            ..Self::new(seed)
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The seed the fabric was built with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Adds a host; it is first polled at the current time.
    pub fn add_host<T: Node + 'static>(&mut self, node: T) -> HostId<T> {
        let id = self.push_slot(Kind::Host(Box::new(node)));
        self.events.push(self.now, Event::Wake(id.0));
        HostId {
            id,
            _node: PhantomData,
        }
    }

    /// Adds a switch with `ports` ports.
    pub fn add_switch(&mut self, cfg: SwitchConfig, ports: usize) -> SwitchId {
        let index = self.nodes.len() as u64;
        let sw = Switch::new(cfg, ports, derive_seed(self.seed, STREAM_SWITCH + index));
        SwitchId(self.push_slot(Kind::Switch(Box::new(sw))))
    }

    fn push_slot(&mut self, kind: Kind) -> NodeId {
        let id = NodeId(u32::try_from(self.nodes.len()).expect("too many nodes"));
        let ports = match &kind {
            Kind::Host(_) => Vec::new(),
            Kind::Switch(s) => (0..s.port_count()).map(|_| PortMac::default()).collect(),
        };
        self.nodes.push(Slot {
            kind,
            ports,
            timer_at: None,
        });
        id
    }

    /// Connects port `a_port` of `a` to port `b_port` of `b`. Switch ports must exist;
    /// host ports are numbered by the caller.
    pub fn connect(
        &mut self,
        a: impl Into<NodeId>,
        a_port: usize,
        b: impl Into<NodeId>,
        b_port: usize,
        cfg: LinkConfig,
    ) -> LinkId {
        let link = u32::try_from(self.links.len()).expect("too many links");
        let ends = [(a.into(), a_port), (b.into(), b_port)];
        let faults = [cfg.a_to_b, cfg.b_to_a];
        let dirs = [0, 1].map(|d: usize| {
            let stream = STREAM_LINK + 2 * u64::from(link) + d as u64;
            let rng = Rng::new(derive_seed(self.seed, stream));
            Direction::new(cfg.rate_bps, cfg.delay_ns, faults[d], rng)
        });
        for (d, &(node, port)) in ends.iter().enumerate() {
            self.attach(node, port, link, d as u8, cfg.rate_bps);
        }
        self.links.push(Link {
            ends: ends.map(|(n, p)| (n.0, p as u16)),
            dirs,
            taps: Vec::new(),
            remote: None,
        });
        LinkId(link)
    }

    /// Connects port `port` of `node` to a node of another partition, through the link
    /// both partitions number `remote.link`; the other partition connects its end with
    /// the same number and this partition in `remote.partition`. This side serializes
    /// and draws the faults of its own direction (`cfg.a_to_b`); the frames of the other
    /// direction come in through [`Fabric::deliver_remote`]. Frames this side sends wait
    /// in [`Fabric::take_outgoing`] for the engine. Links to other partitions take no
    /// pcap tap. The link's delay must be at least the engine's lookahead.
    pub fn connect_remote(
        &mut self,
        node: impl Into<NodeId>,
        port: usize,
        remote: RemoteEnd,
        cfg: LinkConfig,
    ) -> LinkId {
        let link = u32::try_from(self.links.len()).expect("too many links");
        let node = node.into();
        let prev = self.remote_links.insert(remote.link, link);
        assert!(
            prev.is_none(),
            "remote link {} connected twice",
            remote.link
        );
        // The stream is numbered by the shared link number, so it does not depend on
        // what else the partition holds.
        let stream = STREAM_REMOTE + u64::from(remote.link);
        let rng = Rng::new(derive_seed(self.seed, stream));
        let out = Direction::new(cfg.rate_bps, cfg.delay_ns, cfg.a_to_b, rng);
        let inbound = Direction::new(cfg.rate_bps, cfg.delay_ns, Faults::default(), Rng::new(0));
        self.attach(node, port, link, 0, cfg.rate_bps);
        self.links.push(Link {
            ends: [(node.0, port as u16), (u32::MAX, 0)],
            dirs: [out, inbound],
            taps: Vec::new(),
            remote: Some(remote),
        });
        LinkId(link)
    }

    /// Frames sent to other partitions since the last call, in the order they were sent.
    pub fn take_outgoing(&mut self) -> std::vec::Drain<'_, Outgoing> {
        self.outgoing.drain(..)
    }

    /// Frame buffers owed to other partitions since the last call: for each frame that
    /// came in from partition p, a buffer for p to send in again (p's
    /// [`give_buffers`](Self::give_buffers)).
    pub fn take_returned(&mut self) -> std::vec::Drain<'_, (usize, Box<[u8]>)> {
        self.returned.drain(..)
    }

    /// Buffers (of [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN) bytes) to send frames to other
    /// partitions in; without them each such frame takes a new buffer.
    pub fn give_buffers(&mut self, buffers: impl IntoIterator<Item = Box<[u8]>>) {
        self.spare_buffers.extend(buffers);
    }

    /// A frame from another partition: its last bit arrives at `at` (not before now) on
    /// this partition's end of remote link `link`. Frames from other partitions due at
    /// the same nanosecond arrive in `order` (below 2^63; the engine makes it of the
    /// sending partition and its sending order), before any event of this partition's
    /// own at that time: so where it lands never depends on when it was handed over.
    /// The frame is the first `len` bytes of `buffer` (a whole frame buffer, which the
    /// partition keeps; it owes the sender one back: [`take_returned`](Self::take_returned)).
    pub fn deliver_remote(
        &mut self,
        at: Nanos,
        link: u32,
        buffer: Box<[u8]>,
        len: usize,
        order: u64,
    ) {
        assert!(at >= self.now, "a remote frame arrived in the past");
        let local = *self
            .remote_links
            .get(&link)
            .unwrap_or_else(|| panic!("no remote link {link} in this partition"));
        let entry = Some((local, buffer, len));
        let i = match self.inbound_free.pop() {
            Some(i) => {
                self.inbound[i as usize] = entry;
                i
            }
            None => {
                self.inbound.push(entry);
                u32::try_from(self.inbound.len() - 1).expect("too many frames in flight")
            }
        };
        self.events.push_ordered(at, order, Event::Remote(i));
    }

    /// The partitions this one has links to (each once, ascending): where its frames go
    /// and, links being two-way, where its frames come from.
    pub fn remote_partitions(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .links
            .iter()
            .filter_map(|l| l.remote.map(|r| r.partition))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn attach(&mut self, node: NodeId, port: usize, link: u32, dir: u8, rate_bps: u64) {
        let now = self.now;
        let slot = &mut self.nodes[node.index()];
        if let Kind::Host(_) = slot.kind {
            if slot.ports.len() <= port {
                slot.ports.resize_with(port + 1, PortMac::default);
            }
        }
        let mac = slot
            .ports
            .get_mut(port)
            .unwrap_or_else(|| panic!("{node:?} has no port {port}"));
        assert!(mac.link.is_none(), "{node:?} port {port} is already linked");
        mac.link = Some((link, dir));
        mac.rate_bps = rate_bps;
        match &mut slot.kind {
            Kind::Host(h) => {
                h.link_up(port, rate_bps);
                self.events.push(now, Event::Wake(node.0));
            }
            Kind::Switch(s) => {
                // Locally administered, unique per (switch, port): the PFC source address.
                let [_, _, n1, n0] = node.0.to_be_bytes();
                let [p1, p0] = (port as u16).to_be_bytes();
                s.connect_port(port, rate_bps, MacAddr([0x02, 0x53, n1, n0, p1, p0]));
            }
        }
    }

    /// The host's node.
    pub fn host<T: Node + 'static>(&self, h: HostId<T>) -> &T {
        match &self.nodes[h.id.index()].kind {
            Kind::Host(n) => n.as_any().downcast_ref().expect("HostId type"),
            Kind::Switch(_) => unreachable!("a HostId names a host"),
        }
    }

    /// The host's node, mutably (e.g. to post work). Call [`Fabric::wake`] afterwards
    /// if that gave it something to send.
    pub fn host_mut<T: Node + 'static>(&mut self, h: HostId<T>) -> &mut T {
        match &mut self.nodes[h.id.index()].kind {
            Kind::Host(n) => n.as_any_mut().downcast_mut().expect("HostId type"),
            Kind::Switch(_) => unreachable!("a HostId names a host"),
        }
    }

    /// Polls a host now (its ports and timer), as after any event: for work given to it
    /// from outside the fabric.
    pub fn wake(&mut self, h: impl Into<NodeId>) {
        self.events.push(self.now, Event::Wake(h.into().0));
    }

    /// The switch.
    pub fn switch(&self, s: SwitchId) -> &Switch {
        match &self.nodes[s.0.index()].kind {
            Kind::Switch(sw) => sw,
            Kind::Host(_) => unreachable!("a SwitchId names a switch"),
        }
    }

    /// The switch, mutably (routes).
    pub fn switch_mut(&mut self, s: SwitchId) -> &mut Switch {
        match &mut self.nodes[s.0.index()].kind {
            Kind::Switch(sw) => sw,
            Kind::Host(_) => unreachable!("a SwitchId names a switch"),
        }
    }

    /// Records every frame the link delivers, both directions, into a pcap on `out`.
    pub fn tap(&mut self, link: LinkId, out: impl Write + Send + 'static) -> io::Result<TapId> {
        self.add_tap(link, None, out)
    }

    /// Records what end `end` (0 or 1, in the order `connect` was given them) of the link
    /// sees, as tcpdump on that host would: every frame it sends, stamped when its
    /// transmission starts and whether or not the link then loses it, and every frame
    /// delivered to it.
    pub fn tap_end(
        &mut self,
        link: LinkId,
        end: usize,
        out: impl Write + Send + 'static,
    ) -> io::Result<TapId> {
        assert!(end < 2, "a link has two ends");
        self.add_tap(link, Some(end as u8), out)
    }

    fn add_tap(
        &mut self,
        link: LinkId,
        end: Option<u8>,
        out: impl Write + Send + 'static,
    ) -> io::Result<TapId> {
        assert!(
            self.links[link.0 as usize].remote.is_none(),
            "a link to another partition takes no tap"
        );
        let tap = Tap::new(Box::new(out))?;
        let id = self.taps.len() as u32;
        self.taps.push(Some(tap));
        self.links[link.0 as usize].taps.push((id, end));
        Ok(TapId(id))
    }

    /// Records `frame` on the taps of `link` that see it at end `seen_at`: sent from
    /// there, or (`delivered`) delivered there.
    #[inline]
    fn record(&mut self, link: u32, seen_at: u8, delivered: bool, frame: FrameId) {
        // Asked twice a frame; a link without taps (most) ends here, without the
        // walk's call.
        if !self.links[link as usize].taps.is_empty() {
            self.record_taps(link, seen_at, delivered, frame);
        }
    }

    #[inline(never)] // out of the frame path (pull, arrive): most links have no tap
    fn record_taps(&mut self, link: u32, seen_at: u8, delivered: bool, frame: FrameId) {
        let now = self.now;
        for &(t, end) in &self.links[link as usize].taps {
            let sees = match end {
                None => delivered,
                Some(e) => e == seen_at,
            };
            if sees {
                if let Some(tap) = &mut self.taps[t as usize] {
                    tap.record(now, self.pool.frame(frame));
                }
            }
        }
    }

    /// Detaches the tap, flushes it and reports its first write error.
    pub fn close_tap(&mut self, tap: TapId) -> io::Result<()> {
        for l in &mut self.links {
            l.taps.retain(|&(t, _)| t != tap.0);
        }
        match self.taps[tap.0 as usize].take() {
            Some(t) => t.close(),
            None => Ok(()),
        }
    }

    /// Samples the queue depths of every port of `switch` every `interval` ns, from now
    /// until the fabric runs out of other events.
    pub fn sample_queues(&mut self, switch: SwitchId, interval: Nanos) -> SamplerId {
        assert!(interval > 0, "a sampling interval must be positive");
        let id = self.samplers.len() as u32;
        self.samplers.push(Sampler {
            switch: switch.0 .0,
            series: QueueSeries {
                switch,
                interval,
                samples: Vec::new(),
            },
        });
        self.events.push(self.now, Event::Sample(id));
        self.pending_samples += 1;
        SamplerId(id)
    }

    /// The series a sampler has recorded.
    pub fn queue_series(&self, s: SamplerId) -> &QueueSeries {
        &self.samplers[s.0 as usize].series
    }

    /// Counters of a link, `[a_to_b, b_to_a]`.
    pub fn link_counters(&self, link: LinkId) -> [LinkCounters; 2] {
        self.links[link.0 as usize]
            .dirs
            .each_ref()
            .map(|d| d.counters)
    }

    /// MAC counters of a port, with paused time counted up to now.
    pub fn port_counters(&self, node: impl Into<NodeId>, port: usize) -> PortCounters {
        let mac = &self.nodes[node.into().index()].ports[port];
        mac.pause.snapshot(self.now, &mac.counters)
    }

    /// Every counter.
    pub fn counters(&self) -> Counters {
        Counters {
            links: self
                .links
                .iter()
                .map(|l| l.dirs.each_ref().map(|d| d.counters))
                .collect(),
            ports: self
                .nodes
                .iter()
                .map(|s| {
                    s.ports
                        .iter()
                        .map(|m| m.pause.snapshot(self.now, &m.counters))
                        .collect()
                })
                .collect(),
            switches: self
                .nodes
                .iter()
                .filter_map(|s| match &s.kind {
                    Kind::Switch(sw) => Some(sw.counters()),
                    Kind::Host(_) => None,
                })
                .collect(),
        }
    }

    /// Frame buffers allocated so far: the most frames ever in flight at once. It stops
    /// growing in a steady state (buffers are recycled).
    pub fn frame_buffers(&self) -> usize {
        self.pool.capacity()
    }

    /// Events run so far (for speed reports).
    pub fn events_run(&self) -> u64 {
        self.events_run
    }

    /// When the next event is due: for driving the fabric in step with another clock
    /// (an RTL co-simulation, say) through `run_until`.
    pub fn next_event(&self) -> Option<Nanos> {
        self.events.peek_time()
    }

    /// Events waiting in the queue.
    pub fn events_pending(&self) -> usize {
        self.events.len()
    }

    /// Runs every event up to and including `until`, then sets the clock to `until`.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some((time, ev)) = self.events.pop_until(until) {
            self.dispatch(time, ev);
        }
        self.now = self.now.max(until);
    }

    /// Runs for `duration` ns of simulated time.
    pub fn run_for(&mut self, duration: Nanos) {
        self.run_until(self.now + duration);
    }

    /// Runs until no event is left; returns the time of the last one. Never returns
    /// while a node keeps asking for timeouts or has frames to send forever.
    pub fn run(&mut self) -> Nanos {
        while self.step() {}
        self.now
    }

    /// Runs the next event; false when there is none.
    pub fn step(&mut self) -> bool {
        match self.events.pop() {
            Some((time, ev)) => {
                self.dispatch(time, ev);
                true
            }
            None => false,
        }
    }

    fn dispatch(&mut self, time: Nanos, ev: Event) {
        debug_assert!(time >= self.now, "time went backwards");
        self.now = time;
        self.events_run += 1;
        match ev {
            Event::Wake(n) => self.service_host(n),
            Event::Timer(n) => {
                let slot = &mut self.nodes[n as usize];
                if slot.timer_at == Some(time) {
                    slot.timer_at = None;
                    if let Kind::Host(h) = &mut slot.kind {
                        h.handle_timeout(time);
                    }
                    self.service_host(n);
                }
            }
            Event::TxDone { node, port } => {
                self.nodes[node as usize].ports[usize::from(port)].tx_wake = false;
                self.pull_and_service(node, port);
            }
            Event::Arrive { link, dir, frame } => self.arrive(link, dir, frame),
            Event::PauseEnd { node, port } => {
                let pause = &mut self.nodes[node as usize].ports[usize::from(port)].pause;
                if pause.wake_at == Some(time) {
                    pause.wake_at = None;
                    self.arm_pause_wake(node, port);
                    self.pull_and_service(node, port);
                }
            }
            Event::SwitchTimer { node, port } => {
                if let Kind::Switch(sw) = &mut self.nodes[node as usize].kind {
                    sw.timer(time, usize::from(port), &mut self.io);
                }
                self.drain_switch(node);
            }
            Event::Sample(i) => self.sample(i),
            Event::Remote(i) => {
                let (link, buffer, len) = self.inbound[i as usize]
                    .take()
                    .expect("a remote frame arrives once");
                self.inbound_free.push(i);
                let id = self.pool.alloc();
                let old = self.pool.swap_buffer(id, buffer);
                self.pool.set_len(id, len);
                let from = self.links[link as usize]
                    .remote
                    .expect("a remote link")
                    .partition;
                self.returned.push((from, old));
                self.arrive(link, 1, id);
            }
        }
    }

    /// After a host call: poll each idle port, then re-read the host's timer.
    fn service_host(&mut self, n: u32) {
        for port in 0..self.nodes[n as usize].ports.len() {
            self.pull(n, port as u16);
        }
        self.update_timer(n);
    }

    /// One port became able to send: poll it, then settle the node's other business.
    fn pull_and_service(&mut self, node: u32, port: u16) {
        self.pull(node, port);
        match self.nodes[node as usize].kind {
            Kind::Host(_) => self.update_timer(node),
            Kind::Switch(_) => self.drain_switch(node),
        }
    }

    fn update_timer(&mut self, n: u32) {
        let now = self.now;
        let slot = &mut self.nodes[n as usize];
        let Kind::Host(h) = &slot.kind else { return };
        // A deadline in the past is due now.
        let t = h.poll_timeout().map(|t| t.max(now));
        if t != slot.timer_at {
            slot.timer_at = t;
            if let Some(t) = t {
                self.events.push(t, Event::Timer(n));
            }
        }
    }

    /// Ports a switch call woke up are polled, timers it asked for are armed, until it
    /// has nothing more to say.
    fn drain_switch(&mut self, node: u32) {
        // Pulling a port can kick others (a dequeue lifting an XOFF), so the list may
        // grow while it is walked, in order.
        let mut i = 0;
        while i < self.io.kicks.len() {
            let port = self.io.kicks[i];
            i += 1;
            self.pull(node, port);
        }
        self.io.kicks.clear();
        for &(at, port) in &self.io.timers {
            self.events.push(at, Event::SwitchTimer { node, port });
        }
        self.io.timers.clear();
    }

    /// If the port's transmitter is idle and linked, takes the node's next frame for it
    /// and puts it on the wire.
    fn pull(&mut self, node: u32, port: u16) {
        let now = self.now;
        let Fabric {
            nodes,
            pool,
            io,
            spare,
            links,
            ..
        } = self;
        let slot = &mut nodes[node as usize];
        let mac = &mut slot.ports[usize::from(port)];
        let Some((link, _)) = mac.link else {
            return;
        };
        if now < mac.busy_until {
            // Come back when the wire is free.
            if !mac.tx_wake {
                mac.tx_wake = true;
                self.events
                    .push(mac.busy_until, Event::TxDone { node, port });
            }
            return;
        }
        let paused = mac.pause.paused(now);
        let frame = match &mut slot.kind {
            Kind::Host(h) => {
                let id = spare.take().unwrap_or_else(|| pool.alloc());
                // A frame for another partition (another thread's core) is copied into
                // the fabric's buffer, so the node's own buffers never cross: a node
                // that built its frames straight into buffers the other core had read
                // paid for taking back each of their lines (BENCHMARKS.md, scale11). A
                // frame that stays in the partition takes no copy.
                let sent = if links[link as usize].remote.is_some() {
                    h.poll_transmit(now, usize::from(port), paused, pool.buffer_mut(id))
                } else {
                    h.poll_transmit_buffer(now, usize::from(port), paused, pool.buffer_box_mut(id))
                };
                match sent {
                    Some(len) => {
                        pool.set_len(id, len);
                        id
                    }
                    None => {
                        *spare = Some(id);
                        return;
                    }
                }
            }
            Kind::Switch(sw) => match sw.dequeue(now, usize::from(port), paused, pool, io) {
                Some(id) => id,
                None => return,
            },
        };
        self.start_tx(node, port, frame);
    }

    fn start_tx(&mut self, node: u32, port: u16, frame: FrameId) {
        let now = self.now;
        let slot = &mut self.nodes[node as usize];
        // A host may always have another frame; a switch says whether it has. Without
        // one, no wake-up is scheduled: the next enqueue pulls the port (and schedules
        // the wake-up then if the wire is still busy). A frame through an idle switch
        // thus costs one event fewer.
        let more = match &slot.kind {
            Kind::Host(_) => true,
            Kind::Switch(sw) => sw.has_pending(usize::from(port)),
        };
        let mac = &mut slot.ports[usize::from(port)];
        let (link, dir) = mac.link.expect("pulled from a linked port");
        let len = self.pool.len(frame);
        mac.counters.tx_frames += 1;
        mac.counters.tx_bytes += len as u64;
        if is_mac_control(self.pool.frame(frame)) {
            mac.counters.pause_frames_tx += 1;
        }
        let d = &mut self.links[link as usize].dirs[usize::from(dir)];
        let end = d.serialize(now, len);
        mac.busy_until = end;
        if more && !mac.tx_wake {
            mac.tx_wake = true;
            self.events.push(end, Event::TxDone { node, port });
        }
        let fate = d.fate(len);
        let delay = d.delay_ns;
        // As sent: before the link loses or corrupts it.
        self.record(link, dir, false, frame);
        if fate.lost {
            self.pool.free(frame);
            return;
        }
        if let Some(bit) = fate.corrupt_bit {
            self.pool.frame_mut(frame)[bit / 8] ^= 1 << (bit % 8);
        }
        let at = end + delay + fate.extra_delay;
        if let Some(to) = self.links[link as usize].remote {
            // The frame's buffer goes over as it is; a spare takes its place here.
            let spare = self.spare_buffers.pop().unwrap_or_else(new_buffer);
            let len = self.pool.len(frame);
            let buffer = self.pool.swap_buffer(frame, spare);
            self.pool.free(frame);
            if fate.duplicate {
                self.outgoing.push(Outgoing {
                    at,
                    to,
                    buffer: buffer.clone(),
                    len,
                });
            }
            self.outgoing.push(Outgoing {
                at,
                to,
                buffer,
                len,
            });
            return;
        }
        self.events.push(at, Event::Arrive { link, dir, frame });
        if fate.duplicate {
            let copy = self.pool.clone_frame(frame);
            self.events.push(
                at,
                Event::Arrive {
                    link,
                    dir,
                    frame: copy,
                },
            );
        }
    }

    fn arrive(&mut self, link: u32, dir: u8, frame: FrameId) {
        let now = self.now;
        let (node, port) = self.links[link as usize].ends[1 - usize::from(dir)];
        self.record(link, 1 - dir, true, frame);
        let mac = &mut self.nodes[node as usize].ports[usize::from(port)];
        mac.counters.rx_frames += 1;
        mac.counters.rx_bytes += self.pool.len(frame) as u64;

        let own_mac = match &self.nodes[node as usize].kind {
            Kind::Host(h) => h.own_mac_control(usize::from(port)),
            Kind::Switch(_) => false,
        };
        let mac = &mut self.nodes[node as usize].ports[usize::from(port)];
        if own_mac && is_mac_control(self.pool.frame(frame)) {
            // Counted here, handled by the node's own MAC below.
            mac.counters.pause_frames_rx += 1;
        }
        if let Some(ctl) = mac_control(self.pool.frame(frame)).filter(|_| !own_mac) {
            self.pool.free(frame);
            match ctl {
                Ok(req) => {
                    mac.counters.pause_frames_rx += 1;
                    let resumed = mac.pause.apply(now, &req, mac.rate_bps, &mut mac.counters);
                    self.arm_pause_wake(node, port);
                    if resumed {
                        self.pull_and_service(node, port);
                    }
                }
                Err(()) => mac.counters.bad_mac_control += 1,
            }
            return;
        }

        match &mut self.nodes[node as usize].kind {
            Kind::Host(h) => {
                h.handle_frame(now, usize::from(port), self.pool.frame(frame));
                self.pool.free(frame);
                self.service_host(node);
            }
            Kind::Switch(sw) => {
                sw.receive(usize::from(port), frame, &mut self.pool, &mut self.io);
                self.drain_switch(node);
            }
        }
    }

    /// Schedules a wake-up for the earliest pause end of the port, unless one as early
    /// is already scheduled.
    fn arm_pause_wake(&mut self, node: u32, port: u16) {
        let now = self.now;
        let pause = &mut self.nodes[node as usize].ports[usize::from(port)].pause;
        if let Some(end) = pause.next_end(now) {
            if pause.wake_at.is_none_or(|w| end < w) {
                pause.wake_at = Some(end);
                self.events.push(end, Event::PauseEnd { node, port });
            }
        }
    }

    fn sample(&mut self, i: u32) {
        self.pending_samples -= 1;
        let now = self.now;
        let s = &mut self.samplers[i as usize];
        if let Kind::Switch(sw) = &self.nodes[s.switch as usize].kind {
            for port in 0..sw.port_count() {
                let mut depth = [0; 8];
                for (p, d) in depth.iter_mut().enumerate() {
                    *d = sw.queue_depth(port, p as u8);
                }
                s.series.samples.push(QueueSample {
                    time: now,
                    port: port as u16,
                    depth,
                });
            }
        }
        // Keep sampling only while something else can still happen.
        if self.events.len() > self.pending_samples {
            self.events.push(now + s.series.interval, Event::Sample(i));
            self.pending_samples += 1;
        }
    }
}

fn is_mac_control(frame: &[u8]) -> bool {
    frame.len() >= 14 && u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE_MAC_CONTROL
}
