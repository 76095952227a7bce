//! ETS (802.1Qaz) at a switch's egress port: two classes sharing a bottleneck get their
//! configured bandwidth shares; strict priority starves the lower class.

use crate::common::{flow, incast, Incast, G100};
use roce_core::dcb::{EtsConfig, Priorities};
use roce_sim::{LinkConfig, PfcConfig, SwitchConfig};

/// Two senders at line rate into one receiver port: host 1 on DSCP 8 (priority 1) with
/// `payload1`-byte frames, host 2 on DSCP 26 (priority 3) with 4 KiB frames. The
/// bottleneck is the switch's port 0 (the receiver's), whose ETS is `ets`. Both
/// priorities are lossless, so each sender is paused rather than dropped and both queues
/// stay backlogged (XON at 100 KB leaves 10 us of frames at 80 Gb/s, several round
/// trips): what a class gets is the scheduler's doing, not the buffer's (with
/// drops, a starved class would fill the shared buffer and starve the other in turn).
fn two_classes(ets: EtsConfig, payload1: usize) -> Incast {
    let sw = SwitchConfig {
        ets,
        pfc: Some(PfcConfig::new(Priorities(0b1010), 200_000, 100_000, 60_000)),
        ..SwitchConfig::default()
    };
    incast(1, 2, LinkConfig::new(G100, 1000), sw, |h| {
        let mut c = flow(h, 0, if h == 1 { payload1 } else { 4096 }, 0);
        c.count = None;
        c.dscp = if h == 1 { 8 } else { 26 };
        c
    })
}

/// Bytes the bottleneck sent of priorities 1 and 3 between 1 ms and 11 ms (10 ms).
fn bytes_over_10ms(t: &mut Incast) -> (u64, u64) {
    let port = |t: &Incast| {
        let c = t.fabric.switch(t.star.switch).counters();
        let q = c.ports[0].queues;
        (q[1].dequeued_bytes, q[3].dequeued_bytes)
    };
    t.fabric.run_until(1_000_000);
    let (a0, b0) = port(t);
    t.fabric.run_until(11_000_000);
    let (a1, b1) = port(t);
    (a1 - a0, b1 - b0)
}

fn ets(share1: u8, share3: u8) -> EtsConfig {
    let mut bw = [0u8; 8];
    bw[1] = share1;
    bw[3] = share3;
    EtsConfig {
        strict: Priorities(0b1111_0101),
        bw,
        ..EtsConfig::STRICT
    }
}

#[test]
fn ets_shares_are_within_two_percent_of_the_weights_over_10_ms() {
    for (s1, s3) in [(50, 50), (80, 20), (20, 80)] {
        // Equal frames, and priority 1 with 1 KiB frames against 4 KiB: the shares are
        // of bytes, whatever the frame sizes.
        for payload1 in [4096, 1024] {
            let mut t = two_classes(ets(s1, s3), payload1);
            let (a, b) = bytes_over_10ms(&mut t);
            let share = a as f64 / (a + b) as f64;
            let want = f64::from(s1) / 100.0;
            assert!(
                (share - want).abs() <= 0.02 * want,
                "ETS {s1}/{s3}, {payload1} B frames: priority 1 got {:.2} %",
                100.0 * share
            );
            // The port stays busy: the two shares fill it.
            let wire = (a + b) as f64 * 8.0 / 10e-3;
            assert!(wire > 0.95 * G100 as f64, "{wire}");
        }
    }
}

#[test]
fn strict_priority_starves_the_lower_class_and_one_port_can_differ() {
    let mut t = two_classes(EtsConfig::STRICT, 4096);
    let (a, b) = bytes_over_10ms(&mut t);
    assert_eq!(a, 0, "priority 1 sent behind a busy priority 3");
    assert!(b > 0);
    // ETS on the receiver's port only.
    let mut t = two_classes(EtsConfig::STRICT, 4096);
    let sw = t.star.switch;
    t.fabric
        .switch_mut(sw)
        .set_port_ets(0, ets(50, 50))
        .unwrap();
    assert_eq!(t.fabric.switch(sw).port_ets(1), EtsConfig::STRICT);
    let (a, b) = bytes_over_10ms(&mut t);
    let share = a as f64 / (a + b) as f64;
    assert!((share - 0.5).abs() < 0.01, "{share}");
    // A bad configuration is refused.
    let mut bad = ets(50, 40);
    assert!(t.fabric.switch_mut(sw).set_port_ets(0, bad).is_err());
    bad.bw[3] = 50;
    bad.strict = Priorities::ALL;
    assert!(t.fabric.switch_mut(sw).set_port_ets(0, bad).is_err());
}

/// Several priorities per traffic class at the switch (802.1Qaz's priority assignment
/// table, `EtsConfig::prio_tc`): three senders, host 1 on priority 1 (DSCP 8), host 2 on
/// priority 2 (DSCP 16), host 3 on priority 3 (DSCP 26), all lossless. Priorities 1 and
/// 2 form class 1, priority 3 class 3, ETS 50/50 between the classes: over 10 ms the
/// two priorities of class 1 together get half of the bottleneck within 2 %, and share
/// it between them (in turn, equal frames: a quarter each within 2 % of it).
#[test]
fn priorities_of_one_class_share_its_weight_over_10_ms() {
    let mut ets = ets(50, 50);
    ets.prio_tc = [0, 1, 1, 3, 4, 5, 6, 7];
    let sw = SwitchConfig {
        ets,
        pfc: Some(PfcConfig::new(Priorities(0b1110), 200_000, 100_000, 60_000)),
        ..SwitchConfig::default()
    };
    let mut t = incast(1, 3, LinkConfig::new(G100, 1000), sw, |h| {
        let mut c = flow(h, 0, 4096, 0);
        c.count = None;
        c.dscp = [0, 8, 16, 26][usize::from(h)];
        c
    });
    let port = |t: &Incast| {
        let q = t.fabric.switch(t.star.switch).counters().ports[0].queues;
        [1, 2, 3].map(|p| q[p].dequeued_bytes)
    };
    t.fabric.run_until(1_000_000);
    let before = port(&t);
    t.fabric.run_until(11_000_000);
    let after = port(&t);
    let b: [f64; 3] = std::array::from_fn(|i| (after[i] - before[i]) as f64);
    let all = b.iter().sum::<f64>();
    let class1 = (b[0] + b[1]) / all;
    assert!(
        (class1 - 0.5).abs() <= 0.02 * 0.5,
        "class 1 got {:.2} %",
        100.0 * class1
    );
    for (p, x) in [(1, b[0]), (2, b[1])] {
        let share = x / all;
        assert!(
            (share - 0.25).abs() <= 0.02 * 0.25,
            "priority {p} got {:.2} %",
            100.0 * share
        );
    }
    assert!(all * 8.0 / 10e-3 > 0.95 * G100 as f64);
}
