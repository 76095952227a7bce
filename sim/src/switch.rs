//! An output-queued Ethernet switch: eight priority queues per egress port served by
//! strict priority or ETS (802.1Qaz) bandwidth shares, finite dedicated and shared
//! buffers, RED/ECN marking (issue 7), PFC (802.1Qbb) generation from per-(ingress port,
//! priority) accounting, static, learned and ECMP forwarding.
//!
//! Frames stay in the fabric's recycled buffers: the switch queues their handles
//! and marks them in place, so a frame crosses it without a copy.
//!
//! Buffer model. Each egress port has `port_buffer` dedicated bytes; past those a frame
//! borrows from the `shared_buffer` common to all ports. When both are full the frame is
//! dropped, unless its priority is lossless (PFC on): then it is charged to the headroom
//! of its (ingress port, priority), the bytes reserved for what is still in flight after
//! an XOFF, and dropped only if that is exhausted too (counted as `headroom_drops`, a
//! misconfiguration of the lossless class).
//!
//! PFC. Every byte in the switch is accounted to the (ingress port, priority) it came in
//! on. When that count exceeds `xoff` on a lossless priority, the switch sends an XOFF
//! for the priority out of the ingress port (ahead of the port's queued data) with
//! `pause_quanta`, and refreshes it every half pause time while the count stays above
//! `xon`; once it falls to `xon` it sends an XON (quanta 0). The link partner's MAC stops
//! that priority, so a congested egress port backs up into the upstream switch, which
//! pauses its own upstream in turn: pauses propagate hop by hop.
//!
//! Transmission selection. Each egress port picks the next frame among its priorities
//! that have one and are not paused, by its [`EtsConfig`] (`roce_core::dcb`, the NIC's
//! scheduler too): the highest strict-priority class first, then the ETS classes by
//! their bandwidth shares (start-time fair queuing over bytes, work-conserving). The
//! default is every class strict; `SwitchConfig::ets` sets every port, and
//! [`Switch::set_port_ets`] one port.

use crate::classify::{
    classify, default_dscp_map, flow_key, mac_u64, mark_ce, Class, ECN_ECT0, ECN_ECT1,
};
use crate::node::Priorities;
use crate::pool::{FrameId, FramePool};
use crate::queue::Nanos;
use crate::red::{RedConfig, RedQueue};
use crate::rng::Rng;
use roce_core::dcb::{refresh_nanos, Ets, EtsConfig, EtsError};
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::PfcRepr;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Lossless (PFC) parameters of a switch. Thresholds count bytes per (ingress port,
/// priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcConfig {
    /// Lossless priorities (bit n = priority n).
    pub priorities: u8,
    /// Send XOFF when an ingress port holds more than this many bytes of a priority.
    pub xoff: u64,
    /// Send XON when it is back to this many bytes or fewer (< `xoff`).
    pub xon: u64,
    /// Bytes per (ingress port, priority) usable beyond the buffers, for what arrives
    /// between the XOFF decision and the upstream stopping: at least
    /// 2 x (delay x rate) + 2 maximum frames.
    pub headroom: u64,
    /// Pause time of an XOFF in quanta of 512 bit times (roce-facts §8).
    pub pause_quanta: u16,
}

impl PfcConfig {
    /// PFC on `priorities` with the given thresholds and the longest pause (refreshed).
    pub fn new(priorities: Priorities, xoff: u64, xon: u64, headroom: u64) -> Self {
        assert!(xon < xoff, "XON must be below XOFF");
        Self {
            priorities: priorities.0,
            xoff,
            xon,
            headroom,
            pause_quanta: 0xFFFF,
        }
    }
}

/// A switch's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchConfig {
    /// Dedicated buffer bytes per egress port.
    pub port_buffer: u64,
    /// Buffer bytes shared by all ports.
    pub shared_buffer: u64,
    /// Priority of untagged IP frames by DSCP; tagged frames use their PCP.
    pub dscp_to_priority: [u8; 64],
    /// ECN marking, if any.
    pub red: Option<RedConfig>,
    /// Lossless priorities, if any.
    pub pfc: Option<PfcConfig>,
    /// Transmission selection of every egress port (strict priority by default);
    /// [`Switch::set_port_ets`] changes one port's.
    pub ets: EtsConfig,
    /// Learn source MACs (static routes always win).
    pub learning: bool,
    /// Flood unknown-unicast, broadcast and multicast frames; otherwise drop them. Turn
    /// off in topologies with loops (leaf-spine).
    pub flood_unknown: bool,
}

impl Default for SwitchConfig {
    /// 64 KiB per port and 4 MiB shared, DSCP >> 3, no ECN, no PFC, strict priority,
    /// learning and flooding.
    fn default() -> Self {
        Self {
            port_buffer: 64 * 1024,
            shared_buffer: 4 * 1024 * 1024,
            dscp_to_priority: default_dscp_map(),
            red: None,
            pfc: None,
            ets: EtsConfig::STRICT,
            learning: true,
            flood_unknown: true,
        }
    }
}

/// Counters of one egress queue (port, priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueCounters {
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    pub dequeued: u64,
    pub dequeued_bytes: u64,
    /// Dropped for want of buffer.
    pub dropped: u64,
    /// Lossless frames dropped because the ingress headroom was exhausted too.
    pub headroom_drops: u64,
    pub ecn_marked: u64,
    pub max_depth_bytes: u64,
}

/// PFC counters of one (ingress port, priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PfcCounters {
    /// Pause frames sent announcing XOFF for this priority (refreshes included).
    pub xoff_sent: u64,
    /// Pause frames sent announcing XON.
    pub xon_sent: u64,
    /// Most bytes this (ingress, priority) held at once.
    pub max_ingress_bytes: u64,
    /// Most headroom bytes it used at once.
    pub max_headroom_bytes: u64,
}

/// Counters of one switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchPortCounters {
    /// Egress queues, by priority.
    pub queues: [QueueCounters; 8],
    /// Ingress PFC accounting, by priority.
    pub pfc: [PfcCounters; 8],
    /// PFC frames sent out of this port.
    pub pause_frames_sent: u64,
}

/// Counters of a switch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchCounters {
    pub ports: Vec<SwitchPortCounters>,
    /// Frames dropped for an unknown destination with flooding off.
    pub no_route: u64,
    /// Frames whose route pointed back out of their ingress port (dropped).
    pub filtered: u64,
    /// Frames flooded (each copy is counted in its egress queue).
    pub flooded: u64,
    /// Frames too short to carry an Ethernet header (dropped).
    pub runts: u64,
}

/// Where a queued frame's bytes are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charge {
    Dedicated,
    Shared,
    Headroom,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    frame: FrameId,
    len: u32,
    ingress: u16,
    charge: Charge,
}

/// The PFC state of a port as an ingress port.
#[derive(Debug, Default)]
struct Ingress {
    bytes: [u64; 8],
    headroom: [u64; 8],
    /// Priorities currently XOFF towards the upstream.
    xoff: u8,
    /// Priorities whose state must go out in the next pause frame.
    announce: u8,
    refresh_at: Option<Nanos>,
}

#[derive(Debug)]
struct Port {
    /// Link rate, 0 while unconnected.
    rate_bps: u64,
    mac: MacAddr,
    queues: [VecDeque<Queued>; 8],
    /// Bit n set when queue n is not empty: picks the strict-priority winner in O(1).
    nonempty: u8,
    /// Transmission selection: configuration and state.
    ets_cfg: EtsConfig,
    ets: Ets,
    depth: [u64; 8],
    dedicated_used: u64,
    red: [RedQueue; 8],
    ingress: Ingress,
    counters: SwitchPortCounters,
}

#[derive(Debug, Clone, Copy)]
enum Route {
    Port(u16),
    /// Index into the ECMP groups.
    Group(u32),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    route: Route,
    is_static: bool,
}

/// Multiplicative hash for 48-bit MAC keys: the table is on the per-frame path, and
/// SipHash's DoS resistance buys nothing in a simulator.
#[derive(Default)]
struct MacHasher(u64);

impl Hasher for MacHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Work for the fabric that a switch call produced: ports that may now have something to
/// send, and timers to arm.
#[derive(Default)]
pub(crate) struct SwitchIo {
    pub kicks: Vec<u16>,
    pub timers: Vec<(Nanos, u16)>,
}

/// An output-queued switch. Built by `Fabric::add_switch`, reached through
/// `Fabric::switch` / `switch_mut`.
pub struct Switch {
    cfg: SwitchConfig,
    ports: Vec<Port>,
    shared_used: u64,
    table: HashMap<u64, Entry, BuildHasherDefault<MacHasher>>,
    groups: Vec<Vec<u16>>,
    rng: Rng,
    /// Per-switch salt of the ECMP hash, so that successive tiers do not all pick the
    /// same member index for a flow (hash polarization).
    salt: u64,
    no_route: u64,
    filtered: u64,
    flooded: u64,
    runts: u64,
}

impl Switch {
    pub(crate) fn new(cfg: SwitchConfig, ports: usize, seed: u64) -> Self {
        assert!(ports <= usize::from(u16::MAX), "too many ports");
        if let Some(pfc) = &cfg.pfc {
            assert!(pfc.xon < pfc.xoff, "XON must be below XOFF");
        }
        if let Err(e) = cfg.ets.validate() {
            panic!("bad ETS configuration: {e:?}");
        }
        let mut rng = Rng::new(seed);
        let salt = rng.next_u64();
        let ets = cfg.ets;
        Self {
            cfg,
            ports: (0..ports)
                .map(|_| Port {
                    rate_bps: 0,
                    mac: MacAddr::default(),
                    queues: Default::default(),
                    nonempty: 0,
                    ets_cfg: ets,
                    ets: Ets::default(),
                    depth: [0; 8],
                    dedicated_used: 0,
                    red: Default::default(),
                    ingress: Ingress::default(),
                    counters: SwitchPortCounters::default(),
                })
                .collect(),
            shared_used: 0,
            table: HashMap::default(),
            groups: Vec::new(),
            rng,
            salt,
            no_route: 0,
            filtered: 0,
            flooded: 0,
            runts: 0,
        }
    }

    /// Number of ports.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }

    /// MAC address of a port (the source of its PFC frames).
    pub fn port_mac(&self, port: usize) -> MacAddr {
        self.ports[port].mac
    }

    /// Sends frames for `mac` out of `port`.
    pub fn add_route(&mut self, mac: MacAddr, port: usize) {
        assert!(port < self.ports.len(), "no port {port}");
        let route = Route::Port(port as u16);
        self.table.insert(
            mac_u64(mac),
            Entry {
                route,
                is_static: true,
            },
        );
    }

    /// Spreads frames for `mac` over `ports` by a hash of their flow (IP addresses and
    /// UDP ports: the RoCE source port is the entropy, roce-facts §1.6), so each flow
    /// keeps one path and stays in order.
    pub fn add_ecmp_route(&mut self, mac: MacAddr, ports: &[usize]) {
        assert!(!ports.is_empty(), "an ECMP group needs a member");
        assert!(ports.iter().all(|&p| p < self.ports.len()), "no such port");
        let members: Vec<u16> = ports.iter().map(|&p| p as u16).collect();
        // Routes to many hosts share one group (a leaf's uplinks).
        let g = match self.groups.iter().position(|g| *g == members) {
            Some(g) => g,
            None => {
                self.groups.push(members);
                self.groups.len() - 1
            }
        };
        let route = Route::Group(g as u32);
        self.table.insert(
            mac_u64(mac),
            Entry {
                route,
                is_static: true,
            },
        );
    }

    /// Sets the transmission selection of egress `port` (its bandwidth shares), keeping
    /// the others'.
    pub fn set_port_ets(&mut self, port: usize, ets: EtsConfig) -> Result<(), EtsError> {
        ets.validate()?;
        let p = &mut self.ports[port];
        p.ets_cfg = ets;
        p.ets = Ets::default();
        Ok(())
    }

    /// The transmission selection of egress `port`.
    pub fn port_ets(&self, port: usize) -> EtsConfig {
        self.ports[port].ets_cfg
    }

    /// Bytes queued on (`port`, `prio`).
    pub fn queue_depth(&self, port: usize, prio: u8) -> u64 {
        self.ports[port].depth[usize::from(prio & 7)]
    }

    /// Bytes currently taken from the shared buffer.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> SwitchCounters {
        SwitchCounters {
            ports: self.ports.iter().map(|p| p.counters).collect(),
            no_route: self.no_route,
            filtered: self.filtered,
            flooded: self.flooded,
            runts: self.runts,
        }
    }

    /// True when `port` has a frame queued (possibly paused) or a PFC frame to send.
    pub(crate) fn has_pending(&self, port: usize) -> bool {
        let p = &self.ports[port];
        p.nonempty != 0 || p.ingress.announce != 0
    }

    pub(crate) fn connect_port(&mut self, port: usize, rate_bps: u64, mac: MacAddr) {
        let p = &mut self.ports[port];
        p.rate_bps = rate_bps;
        p.mac = mac;
    }

    /// A frame arrived on `ingress`: forward it to its egress queue(s) or drop it.
    pub(crate) fn receive(
        &mut self,
        ingress: usize,
        frame: FrameId,
        pool: &mut FramePool,
        io: &mut SwitchIo,
    ) {
        let Some(class) = classify(pool.frame(frame), &self.cfg.dscp_to_priority) else {
            self.runts += 1;
            pool.free(frame);
            return;
        };
        if self.cfg.learning && class.src.0[0] & 1 == 0 {
            self.learn(class.src, ingress);
        }
        let unicast = class.dst.0[0] & 1 == 0;
        let route = if unicast {
            self.table.get(&mac_u64(class.dst)).map(|e| e.route)
        } else {
            None
        };
        let egress = match route {
            Some(Route::Port(p)) => usize::from(p),
            Some(Route::Group(g)) => {
                let members = &self.groups[g as usize];
                let h = mix(flow_key(pool.frame(frame), &class) ^ self.salt);
                usize::from(members[(h % members.len() as u64) as usize])
            }
            None if self.cfg.flood_unknown => {
                self.flood(ingress, frame, &class, pool, io);
                return;
            }
            None => {
                self.no_route += 1;
                pool.free(frame);
                return;
            }
        };
        if egress == ingress {
            self.filtered += 1;
            pool.free(frame);
            return;
        }
        self.enqueue(egress, ingress, frame, &class, pool, io);
    }

    fn learn(&mut self, src: MacAddr, ingress: usize) {
        let key = mac_u64(src);
        let route = Route::Port(ingress as u16);
        // Lookup first: on the per-frame path the source is almost always known.
        match self.table.get_mut(&key) {
            Some(e) if !e.is_static => e.route = route,
            Some(_) => {}
            None => {
                self.table.insert(
                    key,
                    Entry {
                        route,
                        is_static: false,
                    },
                );
            }
        }
    }

    fn flood(
        &mut self,
        ingress: usize,
        frame: FrameId,
        class: &Class,
        pool: &mut FramePool,
        io: &mut SwitchIo,
    ) {
        self.flooded += 1;
        let targets: Vec<usize> = (0..self.ports.len())
            .filter(|&p| p != ingress && self.ports[p].rate_bps > 0)
            .collect();
        for (i, &p) in targets.iter().enumerate() {
            // The last copy reuses the original buffer.
            let f = if i + 1 == targets.len() {
                frame
            } else {
                pool.clone_frame(frame)
            };
            self.enqueue(p, ingress, f, class, pool, io);
        }
        if targets.is_empty() {
            pool.free(frame);
        }
    }

    /// Admission, ECN marking, PFC accounting, then the frame joins its queue.
    fn enqueue(
        &mut self,
        egress: usize,
        ingress: usize,
        frame: FrameId,
        class: &Class,
        pool: &mut FramePool,
        io: &mut SwitchIo,
    ) {
        let prio = usize::from(class.priority);
        let len = pool.len(frame) as u64;
        let lossless = self
            .cfg
            .pfc
            .is_some_and(|p| Priorities(p.priorities).contains(class.priority));
        let headroom_left = match self.cfg.pfc {
            Some(p) if lossless => p.headroom - self.ports[ingress].ingress.headroom[prio],
            _ => 0,
        };
        let port = &mut self.ports[egress];
        let charge = if port.dedicated_used + len <= self.cfg.port_buffer {
            port.dedicated_used += len;
            Charge::Dedicated
        } else if self.shared_used + len <= self.cfg.shared_buffer {
            self.shared_used += len;
            Charge::Shared
        } else if len <= headroom_left {
            Charge::Headroom
        } else {
            let q = &mut port.counters.queues[prio];
            if lossless {
                q.headroom_drops += 1;
            } else {
                q.dropped += 1;
            }
            pool.free(frame);
            return;
        };

        if let (Some(red), Some(ip)) = (&self.cfg.red, class.ip) {
            if Priorities(red.priorities).contains(class.priority) {
                let ect = matches!(class.ecn, ECN_ECT0 | ECN_ECT1);
                if port.red[prio].should_mark(red, port.depth[prio], ect, &mut self.rng) {
                    mark_ce(pool.frame_mut(frame), ip);
                    port.counters.queues[prio].ecn_marked += 1;
                }
            }
        }

        port.queues[prio].push_back(Queued {
            frame,
            len: len as u32,
            ingress: ingress as u16,
            charge,
        });
        port.nonempty |= 1 << prio;
        port.depth[prio] += len;
        let q = &mut port.counters.queues[prio];
        q.enqueued += 1;
        q.enqueued_bytes += len;
        q.max_depth_bytes = q.max_depth_bytes.max(port.depth[prio]);
        io.kicks.push(egress as u16);

        let ing = &mut self.ports[ingress];
        let st = &mut ing.ingress;
        st.bytes[prio] += len;
        if charge == Charge::Headroom {
            st.headroom[prio] += len;
        }
        let c = &mut ing.counters.pfc[prio];
        c.max_ingress_bytes = c.max_ingress_bytes.max(st.bytes[prio]);
        c.max_headroom_bytes = c.max_headroom_bytes.max(st.headroom[prio]);
        if let Some(pfc) = self.cfg.pfc {
            let bit = 1 << prio;
            if lossless && st.bytes[prio] > pfc.xoff && st.xoff & bit == 0 {
                st.xoff |= bit;
                st.announce |= bit;
                io.kicks.push(ingress as u16);
            }
        }
    }

    /// The transmitter of `port` is idle: its pending PFC frame if any, else the head of
    /// the queue transmission selection picks among the non-empty priorities the link
    /// partner has not paused.
    pub(crate) fn dequeue(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        pool: &mut FramePool,
        io: &mut SwitchIo,
    ) -> Option<FrameId> {
        if self.ports[port].ingress.announce != 0 {
            return Some(self.pause_frame(now, port, pool, io));
        }
        let p = &mut self.ports[port];
        let ready = p.nonempty & !paused.0;
        if ready == 0 {
            return None;
        }
        let prio = usize::from(p.ets.pick(&p.ets_cfg, Priorities(ready))?);
        let q = p.queues[prio].pop_front().expect("nonempty bit set");
        p.ets.sent(&p.ets_cfg, Priorities(ready), prio as u8, q.len);
        if p.queues[prio].is_empty() {
            p.nonempty &= !(1 << prio);
        }
        let len = u64::from(q.len);
        p.depth[prio] -= len;
        let c = &mut p.counters.queues[prio];
        c.dequeued += 1;
        c.dequeued_bytes += len;
        match q.charge {
            Charge::Dedicated => p.dedicated_used -= len,
            Charge::Shared => self.shared_used -= len,
            Charge::Headroom => self.ports[usize::from(q.ingress)].ingress.headroom[prio] -= len,
        }
        let ingress = usize::from(q.ingress);
        let st = &mut self.ports[ingress].ingress;
        st.bytes[prio] -= len;
        if let Some(pfc) = self.cfg.pfc {
            let bit = 1 << prio;
            if st.xoff & bit != 0 && st.bytes[prio] <= pfc.xon {
                st.xoff &= !bit;
                st.announce |= bit;
                io.kicks.push(ingress as u16);
            }
        }
        Some(q.frame)
    }

    /// Builds the PFC frame announcing the state of the priorities in `announce`.
    fn pause_frame(
        &mut self,
        now: Nanos,
        port: usize,
        pool: &mut FramePool,
        io: &mut SwitchIo,
    ) -> FrameId {
        let quanta = self.cfg.pfc.map_or(0, |p| p.pause_quanta);
        let p = &mut self.ports[port];
        let st = &mut p.ingress;
        let mut repr = PfcRepr {
            enable: st.announce,
            quanta: [0; 8],
        };
        for prio in 0..8u8 {
            if !Priorities(st.announce).contains(prio) {
                continue;
            }
            let c = &mut p.counters.pfc[usize::from(prio)];
            if Priorities(st.xoff).contains(prio) {
                repr.quanta[usize::from(prio)] = quanta;
                c.xoff_sent += 1;
            } else {
                c.xon_sent += 1;
            }
        }
        st.announce = 0;
        st.refresh_at = None;
        if st.xoff != 0 && p.rate_bps > 0 {
            // Refresh at half the pause time, so the upstream never resumes while the
            // congestion lasts, even if one refresh is lost.
            let at = now + refresh_nanos(quanta, p.rate_bps);
            st.refresh_at = Some(at);
            io.timers.push((at, port as u16));
        }
        p.counters.pause_frames_sent += 1;
        let id = pool.alloc();
        let len = repr
            .emit_frame(p.mac, pool.buffer_mut(id))
            .expect("pool buffers hold a PFC frame");
        pool.set_len(id, len);
        id
    }

    /// A timer armed through [`SwitchIo::timers`] fired.
    pub(crate) fn timer(&mut self, now: Nanos, port: usize, io: &mut SwitchIo) {
        let st = &mut self.ports[port].ingress;
        if st.refresh_at == Some(now) && st.xoff != 0 {
            st.announce |= st.xoff;
            io.kicks.push(port as u16);
        }
    }
}

/// The 64-bit finalizer of MurmurHash3: spreads the flow key over all bits before the
/// modulo picks an ECMP member.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}
