//! `roce sim SCENARIO`: experiments on the simulated fabric, described in TOML (the
//! shipped ones are in `scenarios/`), written out as CSV time series, a PNG figure and a
//! Markdown table.
//!
//! A scenario file has a `name`, a `title`, a `seed`, and exactly one experiment:
//! * `[loss_sweep]`: two NICs on one lossy link, RC WRITE goodput for every loss rate,
//!   ACK timeout and loss recovery mode ([`sweep`]);
//! * `[fabric]`: NICs around switches (PFC, ECN, DCQCN) running long-lived flows, sampled
//!   over time: per-flow rates, the bottleneck queue, pauses, CNPs, retransmissions
//!   ([`fabric`]);
//! * `[fct]`: a k-ary fat-tree of NICs and a workload of flows (permutation, incast,
//!   all-to-all, Poisson arrivals of WebSearch sizes), flow completion time slowdown by
//!   size over several seeds ([`fct`]), on the parallel engine.
//!
//! Everything is seeded: the same file gives the same numbers, bit for bit.

pub mod fabric;
pub mod fct;
pub mod plot;
pub mod sweep;

use crate::progress::ProgressBar;
use anyhow::{bail, Context as _, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One experiment, as read from its TOML file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Stem of the output files.
    pub name: String,
    /// Title of the figure.
    pub title: String,
    /// Seed of every random draw (link faults, ECN marks).
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub loss_sweep: Option<sweep::LossSweep>,
    pub fabric: Option<fabric::FabricScenario>,
    pub fct: Option<fct::FctScenario>,
    /// Not from the file: the threads that run a `[fct]` experiment or the runs of a
    /// `[loss_sweep]` (all cores when `None`). The results are the same whatever it is.
    #[serde(skip)]
    pub threads: Option<usize>,
}

fn default_seed() -> u64 {
    1
}

impl Scenario {
    /// Parses a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Self> {
        let s: Self = toml::from_str(text)?;
        let kinds = [s.loss_sweep.is_some(), s.fabric.is_some(), s.fct.is_some()];
        if kinds.iter().filter(|&&k| k).count() != 1 {
            bail!("a scenario has exactly one of [loss_sweep], [fabric] and [fct]");
        }
        Ok(s)
    }

    /// Reads a scenario file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}", path.display()))
    }
}

/// What a scenario measured.
#[derive(Debug, Clone)]
pub enum Outcome {
    Sweep(sweep::SweepResult),
    Fabric(fabric::FabricResult),
    Fct(fct::FctResult),
}

impl Outcome {
    /// The results as a Markdown table (what `docs/results.md` shows).
    pub fn table(&self) -> String {
        match self {
            Self::Sweep(r) => r.table(),
            Self::Fabric(r) => r.table(),
            Self::Fct(r) => r.table(),
        }
    }
}

/// Runs the scenario, drawing a progress bar on `progress`.
pub fn run(s: &Scenario, progress: &ProgressBar) -> Result<Outcome> {
    let threads = s.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    if let Some(sw) = &s.loss_sweep {
        return Ok(Outcome::Sweep(sweep::run(sw, s.seed, threads, progress)?));
    }
    if let Some(f) = &s.fabric {
        return Ok(Outcome::Fabric(fabric::run_seeds(
            f, s.seed, threads, progress,
        )?));
    }
    if let Some(f) = &s.fct {
        return Ok(Outcome::Fct(fct::run(f, s.seed, threads, progress)?));
    }
    bail!("empty scenario")
}

/// Writes `NAME.csv`, `NAME.png` and `NAME.md` into `dir`; returns their paths.
pub fn write(s: &Scenario, outcome: &Outcome, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = |ext: &str| dir.join(format!("{}.{ext}", s.name));
    let (csv, png, md) = (path("csv"), path("png"), path("md"));
    let mut written = Vec::new();
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&csv).with_context(|| format!("cannot create {}", csv.display()))?,
    );
    match outcome {
        Outcome::Sweep(r) => {
            r.write_csv(&mut out)?;
            plot::sweep(&png, &s.title, r)?;
        }
        Outcome::Fabric(r) => {
            r.write_csv(&mut out)?;
            plot::fabric(&png, &s.title, r)?;
            for c in &r.captures {
                let pcap = dir.join(format!("{}-{}.pcap", s.name, c.host));
                std::fs::write(&pcap, &c.pcap)
                    .with_context(|| format!("cannot write {}", pcap.display()))?;
                written.push(pcap);
            }
        }
        Outcome::Fct(r) => {
            r.write_csv(&mut out)?;
            plot::fct(&png, &s.title, r)?;
        }
    }
    std::io::Write::flush(&mut out)?;
    std::fs::write(&md, outcome.table())?;
    written.splice(0..0, [csv, png, md]);
    Ok(written)
}

/// `f` of every job on `threads` threads (each job builds and runs its own world there),
/// the results in job order; the progress bar counts finished jobs.
pub(crate) fn in_parallel<J: Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> Result<R> + Sync,
    progress: &ProgressBar,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<R>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            std::thread::Builder::new()
                // A host-sized NIC is built on the stack before it is boxed.
                .stack_size(256 << 20)
                .spawn_scoped(scope, || loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let r = f(job);
                    out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    done.fetch_add(1, Ordering::Relaxed);
                })
                .expect("spawn a sweep thread");
        }
        progress.set_length(jobs.len() as u64);
        while done.load(Ordering::Relaxed) < jobs.len() {
            std::thread::sleep(std::time::Duration::from_millis(50));
            progress.set_position(done.load(Ordering::Relaxed) as u64);
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The default number of runs.
pub(crate) fn one() -> u64 {
    1
}

/// A duration of the scenario file (`10ms`, `2us`, `0`) in nanoseconds.
pub(crate) fn nanos(what: &str, s: &str) -> Result<u64> {
    crate::perf_cmd::parse_duration(s).with_context(|| format!("{what} = {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::fabric::jain;
    use super::*;

    #[test]
    fn jains_index_by_hand() {
        assert_eq!(jain(&[3.0, 3.0, 3.0, 3.0]), 1.0);
        // One of four takes everything: 1/n.
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), 0.25);
        // (1 + 2)^2 / (2 (1 + 4)) = 9/10.
        assert!((jain(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
        assert_eq!(jain(&[]), 0.0);
    }

    const SWEEP: &str = r#"
        name = "s"
        title = "t"
        [loss_sweep]
        link = "100g"
        delay = "2us"
        message = 4096
        messages = 1
        mtu = 4096
        tx_depth = 1
        loss = [0]
        timeout = [14]
        recovery = ["go_back_n"]
    "#;

    #[test]
    fn a_scenario_has_exactly_one_experiment_and_no_unknown_keys() {
        let s = Scenario::parse(SWEEP).unwrap();
        assert_eq!((s.seed, s.loss_sweep.unwrap().mtu), (1, 4096));
        assert!(Scenario::parse("name = \"s\"\ntitle = \"t\"\n").is_err());
        let typo = SWEEP.replace("tx_depth", "txdepth");
        assert!(Scenario::parse(&typo).is_err());
        let bad_mode = SWEEP.replace("go_back_n", "go_back_m");
        assert!(Scenario::parse(&bad_mode).is_err());
    }
}
