//! PFC: lossless incast and hop-by-hop pause propagation (issue 7, roce-facts §8).

use crate::common::{drops, flow, incast, mac, Holder, G100, G25};
use roce_sim::nodes::{Generator, Sink};
use roce_sim::topology::{self, Attach};
use roce_sim::{Fabric, LinkConfig, PfcConfig, Priorities, SwitchConfig};

/// 64 KiB per port, 1 MiB shared; with PFC on priority 3 (the generators' DSCP 26):
/// XOFF above 40 KB per ingress, XON at 20 KB, 60 KB headroom.
fn switch(pfc: bool) -> SwitchConfig {
    SwitchConfig {
        port_buffer: 64 * 1024,
        shared_buffer: 1024 * 1024,
        pfc: pfc.then(|| PfcConfig::new(Priorities::only(3), 40_000, 20_000, 60_000)),
        ..SwitchConfig::default()
    }
}

#[test]
fn an_eight_to_one_incast_is_lossless_with_pfc_and_lossy_without() {
    let per_sender = 300;
    for pfc in [true, false] {
        let mut t = incast(5, 8, LinkConfig::new(G100, 1000), switch(pfc), |h| {
            flow(h, 0, 4096, per_sender)
        });
        t.fabric.run();
        let sw = t.fabric.switch(t.star.switch).counters();
        let (dropped, headroom) = drops(&sw);
        let delivered = t.fabric.host(t.sink).total();
        let pauses_sent: u64 = sw.ports.iter().map(|p| p.pause_frames_sent).sum();
        if pfc {
            assert_eq!((dropped, headroom), (0, 0));
            assert_eq!(delivered.frames, 8 * per_sender);
            assert!(pauses_sent > 0);
            for (i, g) in t.senders.iter().enumerate() {
                let port = t.fabric.port_counters(*g, 0);
                assert!(
                    port.xoff_rx[3] > 0 && port.paused_ns[3] > 0,
                    "sender {i}: {port:?}"
                );
                assert_eq!(sw.ports[i + 1].pfc[3].xoff_sent, port.xoff_rx[3]);
                assert_eq!(sw.ports[i + 1].pfc[3].xon_sent, port.xon_rx[3]);
                // Every pause was lifted in the end.
                assert!(port.xon_rx[3] > 0);
            }
        } else {
            assert!(dropped > 0);
            assert_eq!(delivered.frames + dropped, 8 * per_sender);
            assert_eq!(pauses_sent, 0);
        }
    }
}

#[test]
fn pauses_propagate_hop_by_hop_through_a_chain() {
    // host 1 -100G- s0 -100G- s1 -25G- host 2: s1's egress backs up first, pauses s0,
    // whose own queue then backs up and pauses host 1.
    let mut f = Fabric::new(6);
    let n = 1000;
    let g = f.add_host(Generator::new(flow(1, 2, 4096, n)));
    let s = f.add_host(Sink::new());
    let hop = LinkConfig::new(G100, 1000);
    let chain = topology::chain(
        &mut f,
        Attach::new(g, mac(1)),
        Attach::new(s, mac(2)),
        &[hop, hop, LinkConfig::new(G25, 1000)],
        switch(true),
    );
    f.run();
    let (s0, s1) = (chain.switches[0], chain.switches[1]);
    let (c0, c1) = (f.switch(s0).counters(), f.switch(s1).counters());
    assert_eq!(drops(&c0), (0, 0));
    assert_eq!(drops(&c1), (0, 0));
    assert_eq!(f.host(s).total().frames, n);
    // s1 paused s0 (s1 port 0 faces s0; s0 port 1 faces s1) ...
    assert!(c1.ports[0].pfc[3].xoff_sent > 0);
    let s0_up = f.port_counters(s0, 1);
    assert!(s0_up.xoff_rx[3] > 0 && s0_up.paused_ns[3] > 0);
    // ... so s0's queue towards s1 grew past XOFF and s0 paused the sender.
    assert!(c0.ports[1].queues[3].max_depth_bytes > 40_000);
    assert!(c0.ports[0].pfc[3].xoff_sent > 0);
    let sender = f.port_counters(g, 0);
    assert!(sender.xoff_rx[3] > 0 && sender.paused_ns[3] > 0);
    // The sender was held back for most of the time the 25G bottleneck needed.
    assert!(sender.paused_ns[3] > 100_000, "{sender:?}");
}

#[test]
fn a_pause_stops_the_priority_for_quanta_times_512_bit_times() {
    // The receiver pauses priority 3 for 1000 quanta = 512_000 bit times = 5120 ns at
    // 100 Gb/s. Its 60-byte PFC frame takes (60 + 24) * 8 / 100 = 6.72 -> 7 ns and 1000
    // ns of flight: the switch's egress is paused from 1007 to 6127 ns.
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 0, 1068, 3)));
    let h = f.add_host(Holder::new(3, 1000));
    let star = topology::two_hosts_one_switch(
        &mut f,
        Attach::new(g, mac(1)),
        Attach::new(h, mac(0)),
        LinkConfig::new(G100, 1000),
        SwitchConfig::default(),
    );
    f.run();
    // The first frame (92 ns per hop) waited at the switch; it leaves at 6127 and lands
    // 92 + 1000 ns later, the next two right behind it.
    assert_eq!(f.host(h).times, [7219, 7311, 7403]);
    let egress = f.port_counters(star.switch, 1);
    assert_eq!((egress.xoff_rx[3], egress.paused_ns[3]), (1, 5120));
    // Other priorities were never paused.
    assert_eq!(egress.paused_ns.iter().sum::<u64>(), 5120);
}
