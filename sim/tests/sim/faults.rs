//! Seeded link faults: loss, corruption, duplication, reordering.

use crate::common::{binomial_bounds, flow, G100};
use roce_sim::nodes::{Generator, Sink, SinkStats};
use roce_sim::topology;
use roce_sim::{Fabric, Faults, LinkConfig, LinkCounters};

/// `n` frames of 1068-byte payload over one faulty cable; the sink's view and the
/// link's counters.
fn over_faulty_link(seed: u64, n: u64, faults: Faults) -> (SinkStats, LinkCounters) {
    let mut f = Fabric::new(seed);
    let g = f.add_host(Generator::new(flow(1, 2, 1068, n)));
    let s = f.add_host(Sink::new());
    let link = topology::back_to_back(
        &mut f,
        g,
        s,
        LinkConfig::new(G100, 1000).with_faults(faults),
    );
    f.run();
    (f.host(s).total(), f.link_counters(link)[0])
}

#[test]
fn loss_rate_is_statistically_right() {
    let n = 20_000;
    let (got, link) = over_faulty_link(
        7,
        n,
        Faults {
            loss: 0.1,
            ..Faults::default()
        },
    );
    let (lo, hi) = binomial_bounds(n, 0.1, 5.0);
    assert!(
        (lo..=hi).contains(&(link.lost as f64)),
        "lost {}",
        link.lost
    );
    assert_eq!(got.frames, n - link.lost);
    assert_eq!(link.frames, n, "lost frames still took the wire");
    assert_eq!(got.bad + got.out_of_order, 0);
}

#[test]
fn corrupted_frames_are_delivered_and_caught_by_the_receiver_checks() {
    let n = 5_000;
    let (got, link) = over_faulty_link(
        8,
        n,
        Faults {
            corrupt: 0.3,
            ..Faults::default()
        },
    );
    let (lo, hi) = binomial_bounds(n, 0.3, 5.0);
    assert!((lo..=hi).contains(&(link.corrupted as f64)));
    assert_eq!(got.frames, n);
    // Without an FCS, a flip is invisible to the RoCE checks only in the 12 MAC bytes,
    // the UDP checksum (2) and BTH byte 4 (1): 15 of 1126 bytes.
    assert!(got.bad <= link.corrupted);
    let undetected = link.corrupted - got.bad;
    let (_, hi) = binomial_bounds(link.corrupted, 15.0 / 1126.0, 5.0);
    assert!((undetected as f64) <= hi, "{undetected} undetected");
}

#[test]
fn duplicates_arrive_right_behind_their_original() {
    let n = 5_000;
    let (got, link) = over_faulty_link(
        9,
        n,
        Faults {
            duplicate: 0.1,
            ..Faults::default()
        },
    );
    let (lo, hi) = binomial_bounds(n, 0.1, 5.0);
    assert!((lo..=hi).contains(&(link.duplicated as f64)));
    assert_eq!(got.frames, n + link.duplicated);
    // Each copy repeats the PSN just seen.
    assert_eq!(got.out_of_order, link.duplicated);
    assert_eq!(got.bad, 0);
}

#[test]
fn held_back_frames_are_overtaken() {
    let n = 5_000;
    let reorder = Faults {
        reorder: 0.05,
        reorder_max_delay_ns: 2_000,
        ..Faults::default()
    };
    let (got, link) = over_faulty_link(10, n, reorder);
    let (lo, hi) = binomial_bounds(n, 0.05, 5.0);
    assert!((lo..=hi).contains(&(link.reordered as f64)));
    assert_eq!(got.frames, n);
    // Frames leave every 92 ns; one held back by more than that is overtaken (all but
    // about 92/2000 of them).
    assert!(got.out_of_order <= link.reordered);
    assert!(got.out_of_order as f64 >= 0.85 * link.reordered as f64);
    let (clean, _) = over_faulty_link(10, n, Faults::default());
    assert_eq!(clean.out_of_order, 0);
}
