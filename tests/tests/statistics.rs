//! The statistics of the committed results (issue 16): the loss sweep's interval for
//! Go-Back-N at 1e-3 (20 runs of 1 GiB, `docs/results/loss_sweep.csv`) holds the long-run
//! check (20 other seeds, 8 GiB each, `docs/results/loss_sweep_long.csv`), both
//! recomputed here from the runs' times.

use roce_sim::stats::Interval;
use std::path::PathBuf;

/// The run times (ns) of the rows of `file` for Go-Back-N, timeout 14, loss 1e-3, and
/// their seeds.
fn runs(file: &str) -> (Vec<f64>, Vec<u64>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/results")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (rec, t, loss, el, seed) = (
        col("recovery"),
        col("timeout"),
        col("loss"),
        col("elapsed_ns"),
        col("seed"),
    );
    let mut out = (Vec::new(), Vec::new());
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        if f[rec] == "go_back_n" && f[t] == "14" && f[loss].parse::<f64>().unwrap() == 1e-3 {
            out.0.push(f[el].parse().unwrap());
            out.1.push(f[seed].parse().unwrap());
        }
    }
    out
}

#[test]
fn the_shipped_go_back_n_interval_holds_the_long_runs() {
    let (short, short_seeds) = runs("loss_sweep.csv");
    let (long, long_seeds) = runs("loss_sweep_long.csv");
    assert_eq!(short.len(), 20);
    assert_eq!(long.len(), 20);
    // Independent draws: no seed in common.
    assert!(short_seeds.iter().all(|s| !long_seeds.contains(s)));
    let gib = (1u64 << 30) as f64 * 8.0;
    // Long-run goodput: bytes over the mean time; the interval of the mean time, mapped.
    let i = Interval::of(&short);
    let (low, high) = (gib / i.high(), gib / i.low());
    let long_gbps = 8.0 * gib / (long.iter().sum::<f64>() / long.len() as f64);
    assert!(
        (low..=high).contains(&long_gbps),
        "8 GiB runs give {long_gbps:.2} Gb/s, outside the shipped {low:.2}..{high:.2}"
    );
    // And the collapse is real: well below the lossless 98 Gb/s.
    assert!(high < 90.0, "{high}");
}
