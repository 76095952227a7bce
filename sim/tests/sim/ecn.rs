//! RED / ECN marking at the switch (issue 7, roce-facts §7.1).

use crate::common::{flow, frame_len, incast, mac, Holder, G100};
use roce_sim::nodes::{Generator, GeneratorConfig};
use roce_sim::topology::{self, Attach};
use roce_sim::{Fabric, LinkConfig, QueueMeasure, RedConfig, SwitchConfig};

const PAYLOAD: usize = 1068;
const FRAMES: usize = 100;

/// One run: FRAMES frames into a queue held by a pause longer than the run (0xFFFF
/// quanta, 335 us at 100 Gb/s); frame k joins a queue of exactly k frames. The ECN
/// codepoint of each, in FIFO order, that is by queue depth.
fn held_queue_marks(seed: u64, red: RedConfig) -> Vec<u8> {
    let mut f = Fabric::new(seed);
    let g = f.add_host(Generator::new(flow(1, 0, PAYLOAD, FRAMES as u64)));
    let h = f.add_host(Holder::new(3, 0xFFFF));
    let sw = SwitchConfig {
        red: Some(red),
        ..SwitchConfig::default()
    };
    topology::two_hosts_one_switch(
        &mut f,
        Attach::new(g, mac(1)),
        Attach::new(h, mac(0)),
        LinkConfig::new(G100, 1000),
        sw,
    );
    f.run();
    let ecn = f.host(h).ecn.clone();
    assert_eq!(ecn.len(), FRAMES);
    ecn
}

#[test]
fn marking_probability_follows_the_red_ramp() {
    let len = frame_len(PAYLOAD) as u64;
    // Kmin after 10 frames, Kmax after 90: frame k (queue of k * len bytes) is marked
    // with probability Pmax * (k - 10) / 80 for 10 < k <= 90, always after.
    let red = RedConfig::new(10 * len, 90 * len, 0.5);
    let runs = 200;
    let mut marked = [0u32; FRAMES];
    for seed in 0..runs {
        for (k, ecn) in held_queue_marks(seed, red).into_iter().enumerate() {
            marked[k] += u32::from(ecn == 3);
        }
    }
    assert!(marked[..=10].iter().all(|&m| m == 0), "{marked:?}");
    assert!(marked[91..].iter().all(|&m| m == runs as u32), "{marked:?}");
    // Buckets of ten depths, 2000 trials each, against the mean of the ramp.
    for bucket in (11..91).step_by(10) {
        let trials = 10.0 * runs as f64;
        let expect: f64 = (bucket..bucket + 10)
            .map(|k| 0.5 * (k as f64 - 10.0) / 80.0)
            .sum::<f64>()
            / 10.0;
        let got: f64 = marked[bucket..bucket + 10]
            .iter()
            .map(|&m| f64::from(m))
            .sum::<f64>()
            / trials;
        let sd = (expect * (1.0 - expect) / trials).sqrt();
        assert!(
            (got - expect).abs() < 5.0 * sd,
            "depths {bucket}..: {got} vs {expect}"
        );
    }
}

#[test]
fn an_ewma_queue_marks_later_than_the_instantaneous_one() {
    let len = frame_len(PAYLOAD) as u64;
    // Pmax 0: only a queue above Kmax marks, so the first mark is deterministic.
    let inst = RedConfig::new(20 * len, 40 * len, 0.0);
    let first = |marks: Vec<u8>| marks.iter().position(|&e| e == 3).unwrap();
    assert_eq!(first(held_queue_marks(1, inst)), 41);
    let w = 0.05;
    let ewma = RedConfig {
        measure: QueueMeasure::Ewma { weight: w },
        ..inst
    };
    // The average after frame k arrives: avg += w * (k * len - avg).
    let mut avg = 0.0;
    let expected = (0..FRAMES)
        .position(|k| {
            avg += w * ((k as u64 * len) as f64 - avg);
            avg > (40 * len) as f64
        })
        .unwrap();
    assert!(expected > 41);
    assert_eq!(first(held_queue_marks(1, ewma)), expected);
}

#[test]
fn only_ect_frames_are_marked_and_marked_frames_stay_valid() {
    // Host 1 sends ECT(0), host 2 Not-ECT; 2:1 into a port that marks everything
    // above one frame.
    let sw = SwitchConfig {
        red: Some(RedConfig::new(0, 4000, 1.0)),
        ..SwitchConfig::default()
    };
    let mut t = incast(3, 2, LinkConfig::new(G100, 1000), sw, |h| GeneratorConfig {
        ecn: if h == 1 { 2 } else { 0 },
        ..flow(h, 0, 4096, 200)
    });
    t.fabric.run();
    let sink = t.fabric.host(t.sink);
    let (ect, not_ect) = (sink.from_source(mac(1)), sink.from_source(mac(2)));
    assert_eq!((ect.frames, not_ect.frames), (200, 200));
    assert!(ect.ce_marked > 150, "{ect:?}");
    assert_eq!(not_ect.ce_marked, 0);
    // IPv4 checksum refreshed, ICRC untouched and still valid.
    assert_eq!(ect.bad + not_ect.bad, 0);
    let c = t.fabric.switch(t.star.switch).counters();
    assert_eq!(c.ports[0].queues[3].ecn_marked, ect.ce_marked);
}
