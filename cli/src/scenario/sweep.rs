//! The loss sweep (issue 7): two NICs back to back on a link that loses frames i.i.d. in
//! both directions, `ib_write_bw`-style RC WRITEs, and the goodput for each loss rate,
//! local ACK timeout and loss recovery mode.
//!
//! Statistics (issue 16). Rare events decide the goodput under loss (a lost NAK or
//! resend costs Go-Back-N a whole ACK timeout), so each cell runs `runs` times with the
//! seeds `seed`, `seed + 1`, ... Its goodput is the long-run one, all bytes over all the
//! time (`bytes / mean elapsed`), and its 95 % interval is the t interval of the mean
//! elapsed time mapped through the same division. The runs are independent and run on
//! every core; the result does not depend on how many.

use crate::perf::{self, Params, Test};
use crate::progress::ProgressBar;
use anyhow::{bail, Context as _, Result};
use roce_core::transport::SrAttr;
use roce_sim::stats::Interval;
use roce_sim::{Faults, LinkConfig};
use roce_testbed::nic::Datapath;
use roce_testbed::Sim;
use serde::Deserialize;
use std::io::Write;

/// How a requester recovers lost packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Resend everything from the first lost packet (IBTA RC, rxe).
    GoBackN,
    /// Resend only what was lost.
    SelectiveRepeat,
}

impl Recovery {
    pub fn name(self) -> &'static str {
        match self {
            Self::GoBackN => "Go-Back-N",
            Self::SelectiveRepeat => "selective repeat",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Self::GoBackN => "go_back_n",
            Self::SelectiveRepeat => "selective_repeat",
        }
    }
}

/// `[loss_sweep]` of a scenario file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossSweep {
    /// Link rate (`100g`).
    pub link: String,
    /// One-way propagation delay (`2us`).
    pub delay: String,
    /// Bytes per RDMA WRITE.
    pub message: usize,
    /// WRITEs per run.
    pub messages: usize,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// WRITEs outstanding.
    pub tx_depth: usize,
    /// Frame loss probabilities, per link direction.
    pub loss: Vec<f64>,
    /// Local ACK timeout exponents (4.096 us x 2^t).
    pub timeout: Vec<u8>,
    pub recovery: Vec<Recovery>,
    /// Selective repeat's RTO_low (IRN), used while at most 3 packets are in flight
    /// (rounded up to 4.096 us x 2^n; `"0"` = off). Default 64 us, as `roce perf`'s.
    #[serde(default = "default_rto_low")]
    pub rto_low: String,
    /// Runs per cell, seeded `seed`, `seed + 1`, ...
    #[serde(default = "super::one")]
    pub runs: u64,
}

fn default_rto_low() -> String {
    "64us".into()
}

/// One run of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    pub recovery: Recovery,
    pub timeout: u8,
    pub loss: f64,
    pub seed: u64,
    pub goodput_gbps: f64,
    pub elapsed_ns: u64,
    pub retransmits: u64,
    pub lost: u64,
}

/// Every run of one (recovery, timeout, loss) together.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub recovery: Recovery,
    pub timeout: u8,
    pub loss: f64,
    pub runs: usize,
    /// All bytes over all the time of the runs.
    pub goodput_gbps: f64,
    /// The 95 % interval of the goodput (0 and infinity with a single run).
    pub low_gbps: f64,
    pub high_gbps: f64,
    /// Totals over the runs.
    pub retransmits: u64,
    pub lost: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SweepResult {
    pub sweep: LossSweep,
    /// Every run, in (recovery, timeout, loss, seed) order.
    pub rows: Vec<SweepRow>,
    /// The runs of each cell combined, in (recovery, timeout, loss) order.
    pub cells: Vec<Cell>,
}

/// Runs every (recovery, timeout, loss, seed) combination, in that nesting, on
/// `threads` threads.
pub fn run(
    s: &LossSweep,
    seed: u64,
    threads: usize,
    progress: &ProgressBar,
) -> Result<SweepResult> {
    let rate = crate::perf_cmd::parse_rate(&s.link)?;
    let delay = super::nanos("delay", &s.delay)?;
    let mtu = crate::perf_cmd::parse_mtu(s.mtu)?;
    let rto_low = crate::perf_cmd::ack_timeout_at_least(super::nanos("rto_low", &s.rto_low)?)?;
    if s.runs == 0 {
        bail!("runs must be at least 1");
    }
    let mut jobs = Vec::new();
    for &recovery in &s.recovery {
        for &timeout in &s.timeout {
            for &loss in &s.loss {
                for r in 0..s.runs {
                    jobs.push((recovery, timeout, loss, seed + r));
                }
            }
        }
    }
    let one = |&(recovery, timeout, loss, seed): &(Recovery, u8, f64, u64)| -> Result<SweepRow> {
        let p = Params {
            test: Test::WriteBw,
            size: s.message,
            iters: s.messages,
            qps: 1,
            mtu,
            tx_depth: s.tx_depth,
            selective_repeat: (recovery == Recovery::SelectiveRepeat).then_some(SrAttr {
                enabled: true,
                max_inflight: 0,
                rto_low,
            }),
            timeout,
        };
        let faults = Faults {
            loss,
            ..Faults::default()
        };
        let link = LinkConfig::new(rate, delay).with_faults(faults);
        let nics = perf::nics(&p, Datapath::Software, false)?;
        let mut sim = Sim::back_to_back(nics, link, seed)?;
        let m = perf::run(&mut sim, &p, &ProgressBar::hidden()).with_context(|| {
            format!(
                "{} timeout {timeout} loss {loss} seed {seed}",
                recovery.name()
            )
        })?;
        let bits = (s.message * s.messages) as f64 * 8.0;
        Ok(SweepRow {
            recovery,
            timeout,
            loss,
            seed,
            goodput_gbps: bits / m.elapsed_ns as f64,
            elapsed_ns: m.elapsed_ns,
            retransmits: m.retransmits,
            lost: m.drops,
        })
    };
    let rows = super::in_parallel(&jobs, threads, one, progress)?;
    let bits = (s.message * s.messages) as f64 * 8.0;
    let cells = rows
        .chunks(s.runs as usize)
        .map(|runs| {
            let elapsed: Vec<f64> = runs.iter().map(|r| r.elapsed_ns as f64).collect();
            let i = Interval::of(&elapsed);
            let gbps = |ns: f64| if ns > 0.0 { bits / ns } else { f64::INFINITY };
            Cell {
                recovery: runs[0].recovery,
                timeout: runs[0].timeout,
                loss: runs[0].loss,
                runs: runs.len(),
                goodput_gbps: gbps(i.mean),
                low_gbps: if i.half_width.is_finite() {
                    gbps(i.high())
                } else {
                    0.0
                },
                high_gbps: gbps(i.low()),
                retransmits: runs.iter().map(|r| r.retransmits).sum(),
                lost: runs.iter().map(|r| r.lost).sum(),
            }
        })
        .collect();
    Ok(SweepResult {
        sweep: s.clone(),
        rows,
        cells,
    })
}

impl SweepResult {
    /// The runs of (recovery, timeout, loss) combined.
    pub fn get(&self, r: Recovery, timeout: u8, loss: f64) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|x| x.recovery == r && x.timeout == timeout && x.loss == loss)
    }

    /// `recovery,timeout,loss,goodput_gbps,elapsed_ns,retransmits,lost,seed` rows, one
    /// per run.
    pub fn write_csv(&self, mut w: impl Write) -> std::io::Result<()> {
        writeln!(
            w,
            "recovery,timeout,loss,goodput_gbps,elapsed_ns,retransmits,lost,seed"
        )?;
        for r in &self.rows {
            writeln!(
                w,
                "{},{},{:e},{:.3},{},{},{},{}",
                r.recovery.key(),
                r.timeout,
                r.loss,
                r.goodput_gbps,
                r.elapsed_ns,
                r.retransmits,
                r.lost,
                r.seed
            )?;
        }
        Ok(())
    }

    /// Goodput in Gb/s: one row per loss rate, one column per (recovery, timeout).
    pub fn table(&self) -> String {
        let s = &self.sweep;
        let mut out = String::from("| loss |");
        let mut rule = String::from("| ---: |");
        for r in &s.recovery {
            for t in &s.timeout {
                let us = 4.096 * f64::from(1u32 << t);
                out += &format!(" {} t={t} ({}) |", r.name(), human_us(us));
                rule += " ---: |";
            }
        }
        out += "\n";
        out += &rule;
        out += "\n";
        for &loss in &s.loss {
            out += &format!("| {} |", loss_label(loss));
            for &r in &s.recovery {
                for &t in &s.timeout {
                    let cell = match self.get(r, t, loss) {
                        Some(x) if x.runs > 1 => format!(
                            "{:.2} ({:.2} - {})",
                            x.goodput_gbps,
                            x.low_gbps,
                            if x.high_gbps.is_finite() {
                                format!("{:.2}", x.high_gbps)
                            } else {
                                "inf".into()
                            }
                        ),
                        Some(x) => format!("{:.2}", x.goodput_gbps),
                        None => "n/a".into(),
                    };
                    out += &format!(" {cell} |");
                }
            }
            out += "\n";
        }
        out
    }
}

/// `0`, `1e-5`, ...
pub fn loss_label(loss: f64) -> String {
    if loss == 0.0 {
        "0".into()
    } else {
        format!("{loss:e}")
    }
}

fn human_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} us")
    }
}
