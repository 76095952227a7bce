//! Same seed, same result, bit for bit; another seed, another run.

use crate::common::{every_fault, flow, incast_on, G100};
use roce_sim::nodes::SinkStats;
use roce_sim::{Counters, Fabric, LinkConfig, MemoryCapture, RedConfig, SwitchConfig};

type Outcome = (Counters, Vec<u8>, SinkStats);

/// A 4:1 incast with every fault on every link and ECN marking, for 100 us, with a pcap
/// tap on the receiver's link.
fn run(seed: u64) -> Outcome {
    run_on(Fabric::new(seed)).0
}

/// [`run`] on `fabric`; the fabric is handed back as the run left it.
fn run_on(fabric: Fabric) -> (Outcome, Fabric) {
    let faults = every_fault();
    let sw = SwitchConfig {
        red: Some(RedConfig::new(20_000, 200_000, 0.2)),
        ..SwitchConfig::default()
    };
    let mut t = incast_on(
        fabric,
        4,
        LinkConfig::new(G100, 1000).with_faults(faults),
        sw,
        |h| flow(h, 0, 1024, 2_000),
    );
    let capture = MemoryCapture::new();
    let tap = t.fabric.tap(t.star.links[0], capture.clone()).unwrap();
    t.fabric.run_until(100_000);
    t.fabric.close_tap(tap).unwrap();
    let outcome = (
        t.fabric.counters(),
        capture.bytes(),
        t.fabric.host(t.sink).total(),
    );
    (outcome, t.fabric)
}

#[test]
fn same_seed_gives_identical_counters_and_pcap_bytes() {
    let (c1, pcap1, s1) = run(42);
    let (c2, pcap2, s2) = run(42);
    assert_eq!(c1, c2);
    assert_eq!(s1, s2);
    assert_eq!(pcap1, pcap2);
    // The run did something worth comparing.
    assert!(s1.frames > 1000 && s1.ce_marked > 0 && s1.bad > 0);
    assert!(c1.links.iter().any(|l| l[0].lost > 0));
    assert!(pcap1.len() > 1_000_000);
}

#[test]
fn another_seed_gives_another_loss_pattern() {
    let (c1, pcap1, _) = run(42);
    let (c2, pcap2, _) = run(43);
    let lost = |c: &Counters| c.links.iter().map(|l| l[0].lost).collect::<Vec<_>>();
    assert_ne!(lost(&c1), lost(&c2));
    assert_ne!(pcap1, pcap2);
}

/// A fabric recycled from a run that stopped with frames in flight (queued in the
/// switch, on the wires) runs as a new one: the same counters, pcap bytes and sink, on
/// the buffers the first run allocated (no new one).
#[test]
fn a_recycled_fabric_runs_as_a_new_one() {
    let (first, used) = run_on(Fabric::new(42));
    let buffers = used.frame_buffers();
    assert!(buffers > 10, "{buffers} frames in flight at most");
    let (again, reused) = run_on(used.recycle(42));
    assert_eq!(reused.frame_buffers(), buffers);
    assert_eq!(again.0, first.0);
    assert_eq!(again.1, first.1);
    assert_eq!(again.2, first.2);
}
