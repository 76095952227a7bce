//! Serialization and propagation timing is exact.

use crate::common::{flow, frame_len, mac, G100};
use roce_sim::nodes::{Generator, Sink};
use roce_sim::topology::{self, Attach};
use roce_sim::{Fabric, LinkConfig, SwitchConfig};

#[test]
fn one_frame_arrives_after_serialization_plus_delay() {
    // 1068 bytes of payload: a 1126-byte frame, 1150 bytes on the wire with the 24 of
    // FCS, preamble/SFD and IFG: 9200 bits, 92 ns at 100 Gb/s.
    assert_eq!(frame_len(1068), 1126);
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 2, 1068, 1)));
    let s = f.add_host(Sink::new());
    topology::back_to_back(&mut f, g, s, LinkConfig::new(G100, 1000));
    f.run();
    let got = f.host(s).total();
    assert_eq!(got.frames, 1);
    assert_eq!(got.first_ns, Some(92 + 1000));
}

#[test]
fn a_train_arrives_at_exactly_line_rate() {
    // 4096-byte payloads: 4154-byte frames, 4178 bytes on the wire, 334.24 ns each; the
    // k-th frame's last bit lands at ceil(k * 334.24) + delay.
    let n = 1000u64;
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 2, 4096, n)));
    let s = f.add_host(Sink::new());
    topology::back_to_back(&mut f, g, s, LinkConfig::new(G100, 500));
    f.run();
    let got = f.host(s).total();
    assert_eq!(got.frames, n);
    assert_eq!(got.bad, 0);
    let wire_bits = (frame_len(4096) as u64 + 24) * 8;
    assert_eq!(
        got.first_ns,
        Some((wire_bits * 1_000_000_000).div_ceil(G100) + 500)
    );
    assert_eq!(
        got.last_ns,
        Some((n * wire_bits * 1_000_000_000).div_ceil(G100) + 500)
    );
    assert_eq!(got.last_ns, Some(334_240 + 500));
}

#[test]
fn a_switch_stores_and_forwards() {
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 2, 1068, 1)));
    let s = f.add_host(Sink::new());
    topology::two_hosts_one_switch(
        &mut f,
        Attach::new(g, mac(1)),
        Attach::new(s, mac(2)),
        LinkConfig::new(G100, 700),
        SwitchConfig::default(),
    );
    f.run();
    // Two hops of 92 ns serialization and 700 ns propagation each.
    assert_eq!(f.host(s).total().first_ns, Some(2 * (92 + 700)));
}

#[test]
fn pacing_and_idle_gaps_restart_the_transmitter_clock() {
    // A 10 Gb/s paced sender on a 100 Gb/s link: frame k leaves at k * 920 ns and takes
    // 92 ns, so it lands at k * 920 + 92 + delay.
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(roce_sim::nodes::GeneratorConfig {
        rate_bps: Some(10_000_000_000),
        ..flow(1, 2, 1068, 5)
    }));
    let s = f.add_host(Sink::new());
    topology::back_to_back(&mut f, g, s, LinkConfig::new(G100, 100));
    f.run();
    let got = f.host(s).total();
    assert_eq!(got.frames, 5);
    assert_eq!(got.last_ns, Some(4 * 920 + 92 + 100));
}
