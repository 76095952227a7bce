//! Forwarding, strict priority, finite buffers, pcap taps, queue sampling.

use crate::common::{drops, flow, frame_len, incast, mac, G100};
use pcap_file::pcap::PcapReader;
use roce_sim::nodes::{Generator, GeneratorConfig, Sink};
use roce_sim::topology;
use roce_sim::{Fabric, LinkConfig, MemoryCapture, SwitchConfig};

#[test]
fn strict_priority_serves_the_backlogged_high_class_first() {
    // Hosts 1 and 2 send priority 5 (DSCP 40), host 3 priority 1 (DSCP 8), all at line
    // rate into one port: the high class alone oversubscribes it 2:1.
    let mut t = incast(
        1,
        3,
        LinkConfig::new(G100, 1000),
        SwitchConfig::default(),
        |h| GeneratorConfig {
            dscp: if h == 3 { 8 } else { 40 },
            ..flow(h, 0, 4096, 300)
        },
    );
    let s = t.sink;
    // While the high class is backlogged (until ~2 x 300 frames are out), the low class
    // gets nothing but what slipped in before the first queue built up.
    t.fabric.run_until(150_000);
    let sink = t.fabric.host(s);
    assert!(
        sink.from_source(mac(3)).frames <= 1,
        "{:?}",
        sink.from_source(mac(3))
    );
    let high = sink.from_source(mac(1)).frames + sink.from_source(mac(2)).frames;
    // 150 us at 334.24 ns per frame, less the first two hops.
    assert!(high >= 430, "high class got {high} frames");
    // Once the high class is done, the low class is served.
    t.fabric.run();
    let sw = t.fabric.switch(t.star.switch).counters();
    let low_q = sw.ports[0].queues[1];
    assert_eq!(t.fabric.host(s).from_source(mac(3)).frames, low_q.dequeued);
    assert!(low_q.dequeued > 0);
}

#[test]
fn a_full_buffer_drops_and_every_frame_is_accounted_for() {
    let sw = SwitchConfig {
        port_buffer: 64 * 1024,
        shared_buffer: 256 * 1024,
        ..SwitchConfig::default()
    };
    let mut t = incast(1, 2, LinkConfig::new(G100, 1000), sw, |h| {
        flow(h, 0, 4096, 500)
    });
    t.fabric.run();
    let c = t.fabric.switch(t.star.switch).counters();
    let q = c.ports[0].queues[3];
    let (dropped, headroom) = drops(&c);
    assert!(q.dropped > 0);
    assert_eq!((dropped, headroom), (q.dropped, 0));
    assert!(q.max_depth_bytes <= 320 * 1024);
    assert!(q.max_depth_bytes > 320 * 1024 - frame_len(4096) as u64);
    let delivered = t.fabric.host(t.sink).total().frames;
    assert_eq!(delivered + q.dropped, 1000);
    assert_eq!(q.enqueued, delivered);
}

#[test]
fn a_learning_switch_floods_only_until_it_has_heard_the_destination() {
    // Hosts 1 and 2 send to each other; host 3 only listens.
    let mut f = Fabric::new(1);
    let a = f.add_host(Generator::new(flow(1, 2, 256, 10)));
    let b = f.add_host(Generator::new(flow(2, 1, 256, 10)));
    let c = f.add_host(Sink::new());
    let sw = f.add_switch(SwitchConfig::default(), 3);
    let link = LinkConfig::new(G100, 1000);
    f.connect(a, 0, sw, 0, link);
    f.connect(b, 0, sw, 1, link);
    f.connect(c, 0, sw, 2, link);
    f.run();
    // a's first frame arrives first (same instant, scheduled first): b is unknown, so it
    // is flooded; then b is learned from its own first frame, which finds a known.
    assert_eq!(f.switch(sw).counters().flooded, 1);
    assert_eq!(f.host(c).total().frames, 1);
    assert_eq!((f.host(a).received(), f.host(b).received()), (10, 10));
}

#[test]
fn a_tap_records_what_the_receiver_got_with_arrival_times() {
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 2, 1068, 3)));
    let s = f.add_host(Sink::new());
    let link = topology::back_to_back(&mut f, g, s, LinkConfig::new(G100, 1000));
    let capture = MemoryCapture::new();
    let tap = f.tap(link, capture.clone()).unwrap();
    f.run();
    f.close_tap(tap).unwrap();
    let bytes = capture.bytes();
    // Little-endian nanosecond pcap magic.
    assert_eq!(bytes[..4], [0x4D, 0x3C, 0xB2, 0xA1]);
    let mut reader = PcapReader::new(&bytes[..]).unwrap();
    let mut n = 0u64;
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.timestamp.as_nanos() as u64, 1000 + 92 * (n + 1));
        let parsed = roce_core::wire::parse(&p.data).unwrap();
        assert_eq!(parsed.psn().value(), n as u32);
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn an_end_tap_sees_what_its_host_sent_even_when_the_link_loses_it() {
    // Every frame from the generator is lost: the link's tap sees none, the generator
    // end's tap all three, stamped when their transmission starts (92 ns apart).
    let mut f = Fabric::new(1);
    let g = f.add_host(Generator::new(flow(1, 2, 1068, 3)));
    let s = f.add_host(Sink::new());
    let mut cfg = LinkConfig::new(G100, 1000);
    cfg.a_to_b.loss = 1.0;
    let link = topology::back_to_back(&mut f, g, s, cfg);
    let (wire, sender, receiver) = (
        MemoryCapture::new(),
        MemoryCapture::new(),
        MemoryCapture::new(),
    );
    let taps = [
        f.tap(link, wire.clone()).unwrap(),
        f.tap_end(link, 0, sender.clone()).unwrap(),
        f.tap_end(link, 1, receiver.clone()).unwrap(),
    ];
    f.run();
    for t in taps {
        f.close_tap(t).unwrap();
    }
    let times = |c: &MemoryCapture| {
        let bytes = c.bytes();
        let mut reader = PcapReader::new(&bytes[..]).unwrap();
        let mut v = Vec::new();
        while let Some(p) = reader.next_packet() {
            v.push(p.unwrap().timestamp.as_nanos() as u64);
        }
        v
    };
    assert_eq!(times(&wire), []);
    assert_eq!(times(&sender), [0, 92, 184]);
    assert_eq!(times(&receiver), []);
    assert_eq!(f.host(s).total().frames, 0);
}

#[test]
fn queue_depth_series_shows_the_incast_queue_build_and_drain() {
    let mut t = incast(
        1,
        2,
        LinkConfig::new(G100, 1000),
        SwitchConfig::default(),
        |h| flow(h, 0, 4096, 100),
    );
    let sampler = t.fabric.sample_queues(t.star.switch, 1_000);
    t.fabric.run();
    let series = t.fabric.queue_series(sampler);
    let to_sink: Vec<_> = series.samples.iter().filter(|s| s.port == 0).collect();
    assert!(to_sink.windows(2).all(|w| w[1].time - w[0].time == 1_000));
    let peak = to_sink.iter().map(|s| s.depth[3]).max().unwrap();
    let max = t.fabric.switch(t.star.switch).counters().ports[0].queues[3].max_depth_bytes;
    // 2:1 for 100 frames each: about 100 frames queue up.
    assert!(peak <= max && peak > 90 * frame_len(4096) as u64, "{peak}");
    assert_eq!(to_sink.last().unwrap().depth, [0; 8]);
    let mut csv = Vec::new();
    series.write_csv(&mut csv).unwrap();
    assert!(csv.starts_with(b"time_ns,port,p0,"));
}

#[test]
fn a_tagged_frame_queues_by_its_pcp_and_an_untagged_one_by_its_dscp() {
    // Host 1 tags PCP 6 (with DSCP 26, which alone would mean priority 3); host 2 is
    // untagged with DSCP 10 (priority 1 under DSCP >> 3).
    let mut t = incast(
        1,
        2,
        LinkConfig::new(G100, 1000),
        SwitchConfig::default(),
        |h| match h {
            1 => GeneratorConfig {
                pcp: Some(6),
                ..flow(h, 0, 256, 10)
            },
            _ => GeneratorConfig {
                dscp: 10,
                ..flow(h, 0, 256, 10)
            },
        },
    );
    t.fabric.run();
    let q = t.fabric.switch(t.star.switch).counters().ports[0].queues;
    let enqueued: Vec<u64> = q.iter().map(|q| q.enqueued).collect();
    assert_eq!(enqueued, [0, 10, 0, 0, 0, 0, 10, 0]);
    assert_eq!(t.fabric.host(t.sink).total().bad, 0);
}
