//! Fat-trees, whole and split into partitions run by the parallel engine.

use crate::common::{every_fault, flow, mac, G100};
use roce_core::wire::ethernet::MacAddr;
use roce_sim::nodes::{Generator, Sink, SinkStats};
use roce_sim::parallel::partition_seed;
use roce_sim::topology::FatTree;
use roce_sim::{
    Counters, Fabric, HostId, LinkConfig, Nanos, Node, Parallel, Partition, Priorities, Profile,
    RedConfig, SwitchConfig,
};

/// A host that sends one flow and counts what it receives.
struct Peer {
    gen: Generator,
    sink: Sink,
}

impl Node for Peer {
    fn handle_frame(&mut self, now: Nanos, port: usize, frame: &[u8]) {
        self.sink.handle_frame(now, port, frame);
    }
    fn poll_transmit(
        &mut self,
        now: Nanos,
        port: usize,
        p: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        self.gen.poll_transmit(now, port, p, buf)
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        self.gen.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Nanos) {
        self.gen.handle_timeout(now);
    }
}

const K: usize = 4;
const HOSTS: usize = 16;

fn macs() -> Vec<MacAddr> {
    (0..HOSTS as u8).map(mac).collect()
}

/// Host h sends `count` frames to host `(h + 2) % 16`: a permutation in which every
/// flow leaves its edge switch, half of them stay in their pod and half cross pods.
fn peer(h: usize, count: u64) -> Peer {
    let dst = ((h + 2) % HOSTS) as u8;
    Peer {
        gen: Generator::new(flow(h as u8, dst, 1024, count)),
        sink: Sink::new(),
    }
}

fn tree(link: LinkConfig, sw: SwitchConfig) -> FatTree {
    FatTree::new(K, link, link, sw)
}

/// Frames a switch sent out of all its ports.
fn forwarded(f: &Fabric, sw: roce_sim::SwitchId) -> u64 {
    let c = f.switch(sw).counters();
    c.ports
        .iter()
        .flat_map(|p| &p.queues)
        .map(|q| q.dequeued)
        .sum()
}

#[test]
fn k4_permutation_arrives_whole_in_order_on_fat_tree_paths() {
    let link = LinkConfig::new(G100, 1000);
    let t = tree(link, SwitchConfig::default());
    assert_eq!((t.hosts(), t.hosts_per_pod()), (16, 4));
    let mut f = Fabric::new(7);
    let mut ids: Vec<HostId<Peer>> = Vec::new();
    let part = t.build(&mut f, 0, 1, &macs(), |h, f| {
        let id = f.add_host(peer(h, 500));
        ids.push(id);
        id.id()
    });
    f.run();
    for (h, &id) in ids.iter().enumerate() {
        let src = (h + HOSTS - 2) % HOSTS;
        let got = f.host(id).sink.from_source(mac(src as u8));
        assert_eq!(
            (got.frames, got.bad, got.out_of_order),
            (500, 0, 0),
            "host {h}"
        );
    }
    // Every flow crosses an edge switch at each end; a flow within its pod one
    // aggregation switch, a flow between pods one in each pod and a core switch.
    let cross = (0..HOSTS)
        .filter(|&h| t.pod_of(h) != t.pod_of((h + 2) % HOSTS))
        .count() as u64;
    let sum = |v: &[Option<roce_sim::SwitchId>]| {
        v.iter().flatten().map(|&s| forwarded(&f, s)).sum::<u64>()
    };
    assert_eq!(cross, 8);
    assert_eq!(sum(&part.cores), 500 * cross);
    assert_eq!(sum(&part.aggs), 500 * (2 * cross + (HOSTS as u64 - cross)));
    assert_eq!(sum(&part.edges), 2 * 500 * HOSTS as u64);
    assert_eq!(t.switch_hops(0, 1), 1);
    assert_eq!(t.switch_hops(0, 2), 3);
    assert_eq!(t.switch_hops(0, 4), 5);
}

/// One partition of the parallel fat-tree.
struct Part {
    fabric: Fabric,
    peers: Vec<(usize, HostId<Peer>)>,
}

impl Partition for Part {
    fn fabric(&self) -> &Fabric {
        &self.fabric
    }
    fn fabric_mut(&mut self) -> &mut Fabric {
        &mut self.fabric
    }
}

/// What a run of the partitioned tree gives: every partition's counters, and what each
/// host received, by host.
type Outcome = (Vec<Counters>, Vec<(usize, SinkStats)>, Profile);

/// The k = 4 tree in one partition per pod, run for `until` ns on `threads` threads.
fn partitioned(
    seed: u64,
    threads: usize,
    link: LinkConfig,
    sw: SwitchConfig,
    count: u64,
    until: Nanos,
) -> Outcome {
    let t = tree(link, sw);
    let mut par = Parallel::new(K, threads, link.delay_ns, move |p| {
        let mut fabric = Fabric::new(partition_seed(seed, p));
        let mut peers = Vec::new();
        t.build(&mut fabric, p, K, &macs(), |h, f| {
            let id = f.add_host(peer(h, count));
            peers.push((h, id));
            id.id()
        });
        Part { fabric, peers }
    });
    assert_eq!(par.threads(), threads.min(K));
    par.run_until(until);
    let parts = par.each(|_, part| {
        let got: Vec<(usize, SinkStats)> = part
            .peers
            .iter()
            .map(|&(h, id)| (h, part.fabric.host(id).sink.total()))
            .collect();
        (part.fabric.counters(), got)
    });
    let mut counters = Vec::new();
    let mut got = Vec::new();
    for (c, g) in parts {
        counters.push(c);
        got.extend(g);
    }
    got.sort_by_key(|&(h, _)| h);
    (counters, got, par.profile())
}

#[test]
fn a_partitioned_tree_delivers_everything_across_partitions() {
    let link = LinkConfig::new(G100, 1000);
    let (_, got, _) = partitioned(3, 2, link, SwitchConfig::default(), 300, 1_000_000_000);
    assert_eq!(got.len(), HOSTS);
    for (h, s) in got {
        assert_eq!((s.frames, s.bad, s.out_of_order), (300, 0, 0), "host {h}");
    }
}

#[test]
fn the_same_seed_gives_the_same_run_on_1_2_and_4_threads() {
    // Every fault on every link and ECN marking, so that the random streams and the
    // order of events at each switch both show in the counters.
    let faults = every_fault();
    let link = LinkConfig::new(G100, 1000).with_faults(faults);
    let sw = SwitchConfig {
        red: Some(RedConfig::new(5_000, 50_000, 0.2)),
        ..SwitchConfig::default()
    };
    let run = |seed, threads| partitioned(seed, threads, link, sw.clone(), 2000, 200_000);
    let one = run(9, 1);
    assert_eq!(one, run(9, 2));
    assert_eq!(one, run(9, 4));
    // The run did something worth comparing: losses, marks, frames across partitions.
    let (counters, got, profile) = &one;
    let lost: u64 = counters
        .iter()
        .flat_map(|c| &c.links)
        .map(|l| l[0].lost)
        .sum();
    let marked: u64 = got.iter().map(|(_, s)| s.ce_marked).sum();
    assert!(lost > 50 && marked > 50, "lost {lost}, marked {marked}");
    // The profile: every window of every partition, the critical path between the
    // busiest partition alone and everything on one thread, the busiest thread's share
    // below it.
    let events = profile.events();
    assert_eq!(profile.per_partition.len(), K);
    assert_eq!(profile.critical_path(1), events);
    assert_eq!(profile.busiest_thread(1), events);
    let two = profile.critical_path(2);
    assert!(two < events && 2 * two >= events, "{two} of {events}");
    assert!(profile.critical_path(K) <= two);
    assert!(profile.busiest_thread(2) <= two && 2 * profile.busiest_thread(2) >= events);
    assert_ne!(one, run(10, 2));
}

#[test]
#[should_panic(expected = "shorter than the lookahead")]
fn a_link_shorter_than_the_lookahead_is_refused() {
    let link = LinkConfig::new(G100, 100);
    let t = tree(link, SwitchConfig::default());
    let mut par = Parallel::new(K, 1, 1000, move |p| {
        let mut fabric = Fabric::new(p as u64);
        t.build(&mut fabric, p, K, &macs(), |h, f| {
            f.add_host(peer(h, 10)).id()
        });
        fabric
    });
    par.run_until(1_000_000);
}

/// A host that keeps the last byte of each received frame's source MAC, in order.
#[derive(Default)]
struct Recorder {
    seen: Vec<(Nanos, u8)>,
}

impl Node for Recorder {
    fn handle_frame(&mut self, now: Nanos, _port: usize, frame: &[u8]) {
        self.seen.push((now, frame[11]));
    }
    fn poll_transmit(&mut self, _: Nanos, _: usize, _: Priorities, _: &mut [u8]) -> Option<usize> {
        None
    }
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }
    fn handle_timeout(&mut self, _: Nanos) {}
}

enum Side {
    Switch(Fabric, HostId<Recorder>),
    Sender(Fabric),
}

impl Partition for Side {
    fn fabric(&self) -> &Fabric {
        match self {
            Side::Switch(f, _) | Side::Sender(f) => f,
        }
    }
    fn fabric_mut(&mut self) -> &mut Fabric {
        match self {
            Side::Switch(f, _) | Side::Sender(f) => f,
        }
    }
}

#[test]
fn frames_due_at_one_nanosecond_from_several_partitions_keep_one_order_on_any_threads() {
    // Partition 0: a switch in front of a recorder, with a local sender and links from
    // partitions 1 and 2, whose senders are the same: three frames reach the switch at
    // the same nanosecond, 20 times over, and the switch forwards them in the order
    // they arrived. The engine's rule: other partitions' frames first, by partition,
    // then the partition's own; on 1, 2 and 3 threads, whenever the threads ran.
    let link = LinkConfig::new(G100, 1000);
    let build = move |p: usize| {
        let mut fabric = Fabric::new(partition_seed(5, p));
        let to = |partition, link| roce_sim::RemoteEnd { partition, link };
        if p == 0 {
            let sw = fabric.add_switch(SwitchConfig::default(), 4);
            let rec = fabric.add_host(Recorder::default());
            let local = fabric.add_host(Generator::new(flow(3, 9, 1024, 20)));
            fabric.switch_mut(sw).add_route(mac(9), 0);
            fabric.connect(rec, 0, sw, 0, link);
            fabric.connect(local, 0, sw, 1, link);
            fabric.connect_remote(sw, 2, to(1, 0), link.reversed());
            fabric.connect_remote(sw, 3, to(2, 1), link.reversed());
            Side::Switch(fabric, rec)
        } else {
            let gen = fabric.add_host(Generator::new(flow(p as u8, 9, 1024, 20)));
            fabric.connect_remote(gen, 0, to(0, p as u32 - 1), link);
            Side::Sender(fabric)
        }
    };
    let run = |threads| {
        let mut par = Parallel::new(3, threads, link.delay_ns, build);
        par.run_until(1_000_000);
        par.each(|_, side| match side {
            Side::Switch(f, rec) => f.host(*rec).seen.clone(),
            Side::Sender(_) => Vec::new(),
        })
        .swap_remove(0)
    };
    let one = run(1);
    assert_eq!(one.len(), 60);
    for (i, three) in one.chunks(3).enumerate() {
        let sources: Vec<u8> = three.iter().map(|&(_, s)| s).collect();
        assert_eq!(sources, [1, 2, 3], "frames {}..{}", 3 * i, 3 * i + 3);
    }
    for threads in [2, 3, 3, 3, 2] {
        assert_eq!(run(threads), one, "{threads} threads");
    }
}
