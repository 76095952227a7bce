//! Helpers shared by the test modules: addresses, generator configs, small topologies.

use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::PfcRepr;
use roce_sim::nodes::{Generator, GeneratorConfig, Sink};
use roce_sim::topology::{self, Attach, Star};
use roce_sim::{Fabric, Faults, HostId, LinkConfig, Nanos, Node, Priorities, SwitchConfig};
use std::net::{IpAddr, Ipv4Addr};

pub const G100: u64 = 100_000_000_000;
pub const G25: u64 = 25_000_000_000;

/// MAC of host `n`.
pub fn mac(n: u8) -> MacAddr {
    MacAddr([0x02, 0, 0, 0, 0, n])
}

/// IPv4 address of host `n`.
pub fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
}

/// Host `src` sends `count` frames of `payload` bytes to host `dst` at line rate.
pub fn flow(src: u8, dst: u8, payload: usize, count: u64) -> GeneratorConfig {
    GeneratorConfig {
        count: Some(count),
        ..GeneratorConfig::new(mac(src), mac(dst), ip(src), ip(dst), payload)
    }
}

/// Frame length (without FCS) of an untagged IPv4 RC RDMA WRITE MIDDLE with `payload`
/// bytes (a multiple of 4): Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + payload + ICRC 4.
pub fn frame_len(payload: usize) -> usize {
    assert_eq!(payload % 4, 0, "a payload that needs pad bytes");
    58 + payload
}

/// Senders on hosts 1..=n, each running `cfg(host)`, into a verifying sink on host 0,
/// through one switch.
pub struct Incast {
    pub fabric: Fabric,
    pub senders: Vec<HostId<Generator>>,
    pub sink: HostId<Sink>,
    pub star: Star,
}

pub fn incast(
    seed: u64,
    n: u8,
    link: LinkConfig,
    sw: SwitchConfig,
    cfg: impl Fn(u8) -> GeneratorConfig,
) -> Incast {
    incast_on(Fabric::new(seed), n, link, sw, cfg)
}

/// [`incast`] built on `fabric`, which must be empty.
pub fn incast_on(
    mut fabric: Fabric,
    n: u8,
    link: LinkConfig,
    sw: SwitchConfig,
    cfg: impl Fn(u8) -> GeneratorConfig,
) -> Incast {
    let sink = fabric.add_host(Sink::new());
    let senders: Vec<HostId<Generator>> = (1..=n)
        .map(|h| fabric.add_host(Generator::new(cfg(h))))
        .collect();
    let attach: Vec<Attach> = senders
        .iter()
        .zip(1..)
        .map(|(g, h)| Attach::new(*g, mac(h)))
        .collect();
    let star = topology::incast(&mut fabric, &attach, Attach::new(sink, mac(0)), link, sw);
    Incast {
        fabric,
        senders,
        sink,
        star,
    }
}

/// Every fault at 1 % per frame (reordering by up to 500 ns): for runs whose random
/// streams must all show in the result.
pub fn every_fault() -> Faults {
    Faults {
        loss: 0.01,
        corrupt: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        reorder_max_delay_ns: 500,
    }
}

/// Drops at a switch summed over its queues: (for want of buffer, of headroom).
pub fn drops(c: &roce_sim::SwitchCounters) -> (u64, u64) {
    c.ports
        .iter()
        .flat_map(|p| p.queues.iter())
        .fold((0, 0), |(d, h), q| (d + q.dropped, h + q.headroom_drops))
}

/// Mean +- `k` standard deviations of a binomial(n, p) count.
pub fn binomial_bounds(n: u64, p: f64, k: f64) -> (f64, f64) {
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    (mean - k * sd, mean + k * sd)
}

/// A receiver (host 0) that holds the switch's queue towards it: at start it sends one
/// PFC frame pausing `prio` for `quanta`, so frames queue behind each other; then it
/// records the arrival time and ECN codepoint of each frame (untagged IPv4: TOS at
/// offset 15) in arrival order, which is FIFO order.
pub struct Holder {
    prio: u8,
    quanta: u16,
    sent: bool,
    pub times: Vec<Nanos>,
    pub ecn: Vec<u8>,
}

impl Holder {
    pub fn new(prio: u8, quanta: u16) -> Self {
        Self {
            prio,
            quanta,
            sent: false,
            times: Vec::new(),
            ecn: Vec::new(),
        }
    }
}

impl Node for Holder {
    fn handle_frame(&mut self, now: Nanos, _port: usize, frame: &[u8]) {
        self.times.push(now);
        self.ecn.push(frame[15] & 3);
    }
    fn poll_transmit(
        &mut self,
        _: Nanos,
        _: usize,
        _: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        if self.sent {
            return None;
        }
        self.sent = true;
        let mut quanta = [0; 8];
        quanta[usize::from(self.prio)] = self.quanta;
        let pfc = PfcRepr {
            enable: Priorities::only(self.prio).0,
            quanta,
        };
        pfc.emit_frame(mac(0), buf).ok()
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
    fn handle_timeout(&mut self, _: Nanos) {}
}
