//! The fabric's own speed: simulated nanoseconds per wall-clock nanosecond for 100 Gb/s
//! of 4 KiB-payload frames, with trivial nodes, so that what is measured is the event
//! queue, links, switch and buffer recycling. The whole stack (with the NIC model) must
//! stay >= 1x real time, so this must be well above.
//!
//! Two senders are measured: [`HeaderOnly`], which writes just the 58 header bytes of
//! each frame (the fabric never reads past the headers; the payload is whatever the
//! recycled buffer held): the fabric's overhead; and the test [`Generator`], which also
//! copies the 4 KiB payload into every frame and keeps its ICRC valid, as a NIC model
//! must: what a node's copy adds.
//!
//! `cargo bench -p roce-sim --bench fabric [-- SIM_MS [NAME_FILTER]]` (default 20 ms
//! simulated per scenario, every scenario).

use roce_core::wire::ethernet::MacAddr;
use roce_sim::nodes::{Generator, GeneratorConfig, Sink};
use roce_sim::topology::{self, Attach};
use roce_sim::{Fabric, HostId, LinkConfig, Nanos, Node, PfcConfig, Priorities, SwitchConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

const G100: u64 = 100_000_000_000;

fn host(n: u8) -> (MacAddr, IpAddr) {
    (
        MacAddr([2, 0, 0, 0, 0, n]),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)),
    )
}

/// A line-rate 4 KiB-payload stream from host `src` to host `dst`.
fn stream(src: u8, dst: u8) -> Generator {
    let ((smac, sip), (dmac, dip)) = (host(src), host(dst));
    Generator::new(GeneratorConfig::new(smac, dmac, sip, dip, 4096))
}

/// Sends the generator's frames but writes only their headers.
struct HeaderOnly {
    headers: Vec<u8>,
    len: usize,
    priority: u8,
}

/// Bytes before the payload of an untagged IPv4 RC RDMA WRITE MIDDLE.
const HEADER_LEN: usize = 14 + 20 + 8 + 12;

impl HeaderOnly {
    fn new(src: u8, dst: u8) -> Self {
        let g = stream(src, dst);
        let mut frame = vec![0; g.frame_len()];
        let mut g = g;
        let len = g
            .poll_transmit(0, 0, Priorities::NONE, &mut frame)
            .expect("a first frame");
        Self {
            headers: frame[..HEADER_LEN].to_vec(),
            len,
            priority: 3,
        }
    }
}

impl Node for HeaderOnly {
    fn handle_frame(&mut self, _: Nanos, _: usize, _: &[u8]) {}
    fn poll_transmit(
        &mut self,
        _: Nanos,
        _: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        if paused.contains(self.priority) {
            return None;
        }
        buf[..HEADER_LEN].copy_from_slice(&self.headers);
        Some(self.len)
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
    fn handle_timeout(&mut self, _: Nanos) {}
}

/// Runs `sim_ns` of simulated time in five rounds and prints the speed of the best and
/// of the median round (the machine is shared: the best round is the least disturbed).
fn measure(name: &str, fabric: &mut Fabric, sink: HostId<Sink>, sim_ns: u64) {
    let filter = std::env::args().nth(2).unwrap_or_default();
    if !name.contains(&filter) {
        return;
    }
    // Warm up: buffers and queues reach their steady size.
    fabric.run_for(sim_ns / 10);
    let buffers = fabric.frame_buffers();
    let mut rounds = Vec::new();
    let mut per_frame_events = 0.0;
    for _ in 0..5 {
        let (t0, frames0, events0) = (
            fabric.now(),
            fabric.host(sink).total().frames,
            fabric.events_run(),
        );
        let wall = Instant::now();
        fabric.run_for(sim_ns / 5);
        let wall_ns = wall.elapsed().as_nanos() as f64;
        let frames = (fabric.host(sink).total().frames - frames0) as f64;
        per_frame_events = (fabric.events_run() - events0) as f64 / frames;
        rounds.push(((fabric.now() - t0) as f64 / wall_ns, wall_ns / frames));
    }
    rounds.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total = fabric.host(sink).total();
    println!(
        "{name}:\n  best {:.2} simulated ns per wall ns ({:.0} ns wall per frame), median {:.2} ({:.0} ns); \
         {:.1} events per frame; goodput {:.2} Gb/s simulated; frame buffers {} -> {}",
        rounds[0].0,
        rounds[0].1,
        rounds[2].0,
        rounds[2].1,
        per_frame_events,
        total.bytes as f64 * 8.0 / fabric.now() as f64,
        buffers,
        fabric.frame_buffers(),
    );
}

fn main() {
    let sim_ms: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let sim_ns = sim_ms * 1_000_000;
    let link = LinkConfig::new(G100, 1000);

    // The number of record: one 100 Gb/s stream through one switch.
    let one_stream = |sender: Box<dyn FnOnce(&mut Fabric) -> roce_sim::NodeId>| {
        let mut f = Fabric::new(1);
        let g = sender(&mut f);
        let s = f.add_host(Sink::counting());
        topology::two_hosts_one_switch(
            &mut f,
            Attach::new(g, host(1).0),
            Attach::new(s, host(2).0),
            link,
            SwitchConfig::default(),
        );
        (f, s)
    };
    let (mut f, s) = one_stream(Box::new(|f| f.add_host(HeaderOnly::new(1, 2)).id()));
    measure(
        "fabric: 100G stream, 2 hosts, 1 switch, header-only sender",
        &mut f,
        s,
        sim_ns,
    );
    let (mut f, s) = one_stream(Box::new(|f| f.add_host(stream(1, 2)).id()));
    measure(
        "with the test Generator (4 KiB copy per frame)",
        &mut f,
        s,
        sim_ns,
    );

    // Under pressure: an 8:1 lossless incast, PFC pausing the senders all along.
    let mut f = Fabric::new(1);
    let s = f.add_host(Sink::counting());
    let senders: Vec<Attach> = (1..=8)
        .map(|h| Attach::new(f.add_host(HeaderOnly::new(h, 0)), host(h).0))
        .collect();
    let sw = SwitchConfig {
        pfc: Some(PfcConfig::new(Priorities::only(3), 40_000, 20_000, 60_000)),
        ..SwitchConfig::default()
    };
    topology::incast(&mut f, &senders, Attach::new(s, host(0).0), link, sw);
    measure(
        "fabric: 8:1 incast with PFC, header-only senders",
        &mut f,
        s,
        sim_ns,
    );
}
