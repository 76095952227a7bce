//! ECMP over a two-tier leaf-spine.

use crate::common::{flow, mac, G100};
use roce_sim::nodes::{Generator, GeneratorConfig, Sink};
use roce_sim::topology::{self, Attach, LeafSpine};
use roce_sim::{Fabric, HostId, LinkConfig, SwitchConfig};

/// Two leaves of two hosts, four spines. Host 0 sends to host 2 (on the other leaf)
/// over `flows` UDP source ports.
fn two_leaves(flows: u16) -> (Fabric, LeafSpine, HostId<Sink>) {
    let mut f = Fabric::new(11);
    let g = f.add_host(Generator::new(GeneratorConfig {
        flows,
        ..flow(0, 2, 1024, 4000)
    }));
    let idle = f.add_host(Sink::new());
    let s = f.add_host(Sink::new());
    let idle2 = f.add_host(Sink::new());
    let hosts = [
        Attach::new(g, mac(0)),
        Attach::new(idle, mac(1)),
        Attach::new(s, mac(2)),
        Attach::new(idle2, mac(3)),
    ];
    let link = LinkConfig::new(G100, 500);
    let ls = topology::leaf_spine(&mut f, &hosts, 2, 4, link, link, SwitchConfig::default());
    f.run();
    (f, ls, s)
}

/// Frames each spine forwarded.
fn per_spine(f: &Fabric, ls: &LeafSpine) -> Vec<u64> {
    ls.spines
        .iter()
        .map(|&s| {
            let c = f.switch(s).counters();
            c.ports
                .iter()
                .flat_map(|p| p.queues.iter())
                .map(|q| q.dequeued)
                .sum()
        })
        .collect()
}

#[test]
fn many_flows_spread_over_all_spines() {
    let (f, ls, s) = two_leaves(256);
    assert_eq!(f.host(s).total().frames, 4000);
    let spread = per_spine(&f, &ls);
    assert_eq!(spread.iter().sum::<u64>(), 4000);
    // 256 flows hashed onto 4 spines: 64 +- 6.9 flows (binomial) each; 3.5 sd is
    // +- 24 flows, 375 frames.
    assert!(
        spread.iter().all(|&n| (625..=1375).contains(&n)),
        "{spread:?}"
    );
}

#[test]
fn one_flow_keeps_one_path_and_its_order() {
    let (f, ls, s) = two_leaves(1);
    let spread = per_spine(&f, &ls);
    assert_eq!(spread.iter().filter(|&&n| n > 0).count(), 1, "{spread:?}");
    let got = f.host(s).total();
    assert_eq!((got.frames, got.out_of_order), (4000, 0));
}
