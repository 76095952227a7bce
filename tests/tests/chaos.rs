//! The whole-stack chaos run (`roce_tests::chaos`, issue 17): many RC QPs, random WR
//! mixes, 10 % loss plus duplication, reordering and corruption, on the software and the
//! RTL datapath; every completion once and in order, memory equal to the reference model,
//! no QP stuck.
//!
//! `chaos_short` is CI's (about 20 s in release on a loaded machine: 32,000 WRs on the
//! software datapath, 6,400 on the RTL). `chaos_long` is `cargo xtask chaos`'s:
//! `ROCE_CHAOS_SEEDS` (FIRST..LAST, default 1..20), `ROCE_CHAOS_OPS` (WRs per QP pair,
//! default 1000), `ROCE_CHAOS_QPS` (default 8), `ROCE_CHAOS_RTL_EVERY` (every Nth seed
//! also on the RTL, default 4), `ROCE_CHAOS_PCAP` (a directory: each run's captures go
//! there, `a.pcap` and `b.pcap` (what each end sends, lost or not, and receives) and
//! `delivered.pcap`, overwritten per run); each seed's report is
//! printed, and every seed runs before the failures are listed. Odd seeds run Go-Back-N,
//! even ones selective repeat.

use roce_tests::chaos::{run, Backend, Config, FAULTS};

/// The backends: the RTL only where its model was built (always under CI).
fn rtl() -> bool {
    if roce_hdl_sim::rtl_available() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the RTL model is required under CI"
    );
    eprintln!("skipped the RTL backend: the Verilated model was not built");
    false
}

/// Runs `cfg` and prints its report; `Err` names the run and what it violated.
fn check(cfg: Config) -> Result<(), String> {
    let rc = if cfg.selective_repeat { "SR" } else { "GBN" };
    let name = format!(
        "seed {} {:?} {rc} {}x{}",
        cfg.seed, cfg.backend, cfg.qps, cfg.ops
    );
    let report = run(&cfg).map_err(|e| format!("{name}: {e}"))?;
    println!("{name}: {report}");
    Ok(())
}

/// Odd seeds run Go-Back-N, even ones selective repeat.
fn config(seed: u64, backend: Backend, qps: usize, ops: usize) -> Config {
    Config {
        seed,
        backend,
        qps,
        ops,
        faults: FAULTS,
        selective_repeat: seed % 2 == 0,
    }
}

#[test]
fn chaos_short() {
    let mut runs = (1..=4)
        .map(|seed| config(seed, Backend::Software, 8, 1000))
        .collect::<Vec<_>>();
    if rtl() {
        runs.extend((5..=6).map(|seed| config(seed, Backend::Rtl, 8, 400)));
    }
    for cfg in runs {
        if let Err(e) = check(cfg) {
            panic!("{e}");
        }
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "long: run by `cargo xtask chaos`"]
fn chaos_long() {
    let seeds = std::env::var("ROCE_CHAOS_SEEDS").unwrap_or_else(|_| "1..20".into());
    let (first, last) = seeds
        .split_once("..")
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .expect("ROCE_CHAOS_SEEDS is FIRST..LAST");
    let (ops, qps) = (env("ROCE_CHAOS_OPS", 1000), env("ROCE_CHAOS_QPS", 8));
    let rtl_every = env("ROCE_CHAOS_RTL_EVERY", 4).max(1);
    let rtl = rtl();
    // Every seed runs; the failures are listed at the end.
    let mut failed = Vec::new();
    for seed in first..=last {
        let mut backends = vec![Backend::Software];
        if rtl && seed % rtl_every == 0 {
            backends.push(Backend::Rtl);
        }
        for backend in backends {
            if let Err(e) = check(config(seed, backend, qps as usize, ops as usize)) {
                println!("FAILED {e}");
                failed.push(e);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} runs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// Seed 43 (Go-Back-N): QP pair 6's requester ends RETRY_EXC_ERR, and the captures
/// show why: after its last progress (at 497.6 ms simulated) it sent PSN 1492 seven
/// times; three intact copies reached the responder, which answered each, and the link
/// lost or corrupted every answer. The run passes with that pair out (7,682 of the
/// 8,000 WRs posted), the rest checked (`roce_tests::chaos::run`).
///
/// The event is pinned to one seed's history, which any change to the frames the stack
/// sends can move: seed 22 held it until the engine's duplicate-READ rule changed (it
/// now completes all 8,000 WRs). To re-pin, run `run` over seeds with this config and
/// take one whose report has a `spent_by_link` entry (seeds 1..400: 43 and 298).
#[test]
fn seed_43_the_link_spends_a_retry_budget() {
    let report = run(&config(43, Backend::Software, 8, 1000)).expect("seed 43");
    assert_eq!(report.spent_by_link.len(), 1, "{report}");
    let why = &report.spent_by_link[0];
    assert!(
        why.starts_with("QP pair 6: PSN 1492 sent 7 times") && why.contains("3 intact copies"),
        "{why}"
    );
}
