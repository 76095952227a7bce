//! Turning a measurement into perftest's numbers, a table like perftest's, and the JSON
//! object of `roce perf --json`.

use super::{Measurement, Params, Test};
use serde_json::{json, Value};
use std::fmt::Write;

/// The figures of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub bytes: usize,
    pub iterations: usize,
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub msg_rate_mpps: f64,
    /// Latency in microseconds: min, median, 99th percentile, max.
    pub lat_us: [f64; 4],
    pub lat_avg_us: f64,
}

/// Window (in messages) over which the peak bandwidth is taken.
fn peak_window(p: &Params) -> usize {
    p.tx_depth.max(16)
}

pub fn figures(p: &Params, m: &Measurement) -> Figures {
    let per_msg = if p.test == Test::AtomicBw { 8 } else { p.size };
    let n = m.samples.len();
    let secs = m.elapsed_ns.max(1) as f64 / 1e9;
    let bw_avg = (per_msg * n) as f64 * 8.0 / secs / 1e9;
    let mut done: Vec<u64> = m.samples.iter().map(|s| s.1).collect();
    done.sort_unstable();
    let w = peak_window(p);
    let peak = (w..n)
        .filter_map(|j| {
            let dt = done[j].checked_sub(done[j - w]).filter(|&d| d > 0)?;
            Some((per_msg * w) as f64 * 8.0 / dt as f64)
        })
        .fold(bw_avg, f64::max);
    let mut lat: Vec<u64> = m.samples.iter().map(|s| s.1 - s.0).collect();
    lat.sort_unstable();
    let pct = |q: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((lat.len() - 1) as f64 * q).round() as usize] as f64 / 1e3
        }
    };
    let avg = if lat.is_empty() {
        0.0
    } else {
        lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e3
    };
    Figures {
        bytes: per_msg,
        iterations: p.iters,
        bw_peak_gbps: if p.test.is_latency() { 0.0 } else { peak },
        bw_avg_gbps: if p.test.is_latency() { 0.0 } else { bw_avg },
        msg_rate_mpps: n as f64 / secs / 1e6,
        lat_us: [pct(0.0), pct(0.5), pct(0.99), pct(1.0)],
        lat_avg_us: avg,
    }
}

/// The `--json` object.
pub fn json(p: &Params, m: &Measurement, f: &Figures, link_gbps: f64) -> Value {
    json!({
        "test": p.test.name(),
        "bytes": f.bytes,
        "iterations": f.iterations,
        "qps": p.qps,
        "mtu": p.mtu.bytes(),
        "tx_depth": p.tx_depth,
        "selective_repeat": p.selective_repeat.is_some_and(|s| s.enabled),
        "link_gbps": link_gbps,
        "bw_peak_gbps": f.bw_peak_gbps,
        "bw_avg_gbps": f.bw_avg_gbps,
        "msg_rate_mpps": f.msg_rate_mpps,
        "lat_us": {"min": f.lat_us[0], "p50": f.lat_us[1], "p99": f.lat_us[2], "max": f.lat_us[3], "avg": f.lat_avg_us},
        "retransmits": m.retransmits,
        "drops": m.drops,
        "qp_cache_misses": m.qp_cache_misses,
        "qp_ctx_dma_bytes": m.qp_ctx_dma_bytes,
        "fw_rx_frames": m.fw_rx_frames,
        "fp_rx_frames": m.fp_rx_frames,
        "fp_ctx_cache_misses": m.fp_ctx_cache_misses,
        "fp_ctx_cache_evictions": m.fp_ctx_cache_evictions,
        "simulated": m.simulated,
    })
}

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// perftest's banner for a test.
pub fn header(p: &Params, setting: &str, gbits: bool) -> String {
    let title = match p.test {
        Test::WriteBw => "RDMA_Write BW Test",
        Test::ReadBw => "RDMA_Read BW Test",
        Test::SendBw => "Send BW Test",
        Test::AtomicBw => "Atomic FETCH_AND_ADD BW Test",
        Test::WriteLat => "RDMA_Write Latency Test",
        Test::ReadLat => "RDMA_Read Latency Test",
        Test::SendLat => "Send Latency Test",
    };
    let mut s = String::new();
    let _ = writeln!(s, "{RULE}");
    let _ = writeln!(s, "                    {title}");
    let _ = writeln!(s, " {setting}");
    let _ = writeln!(
        s,
        " Number of qps   : {:<8} Transport type : RoCEv2 (RC)",
        p.qps
    );
    let _ = writeln!(s, " MTU             : {}[B]", p.mtu.bytes());
    let _ = writeln!(s, " TX depth        : {}", p.tx_depth);
    if let Some(sr) = p.selective_repeat.filter(|s| s.enabled) {
        let _ = writeln!(
            s,
            " Retransmission  : selective repeat (max in flight {}, RTO_low {})",
            if sr.max_inflight == 0 {
                "port window".to_string()
            } else {
                format!("{} PSNs", sr.max_inflight)
            },
            match sr.rto_low.duration() {
                Some(d) => format!("{:.1} us", d.as_nanos() as f64 / 1e3),
                None => "off".to_string(),
            }
        );
    }
    let _ = writeln!(s, "{RULE}");
    if p.test.is_latency() {
        let _ = writeln!(s, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    99% percentile[usec]");
    } else {
        let u = unit(gbits);
        let _ = writeln!(
            s,
            " #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]"
        );
    }
    s
}

/// One row of the table; `gbits` selects Gb/s over perftest's default MB/s.
pub fn row(p: &Params, f: &Figures, gbits: bool) -> String {
    if p.test.is_latency() {
        format!(
            " {:<6} {:<11}    {:<14.2} {:<12.2} {:<16.2} {:<14.2} {:.2}",
            f.bytes, f.iterations, f.lat_us[0], f.lat_us[3], f.lat_us[1], f.lat_avg_us, f.lat_us[2]
        )
    } else {
        let conv = |g: f64| if gbits { g } else { g * 1e3 / 8.0 };
        format!(
            " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
            f.bytes,
            f.iterations,
            conv(f.bw_peak_gbps),
            conv(f.bw_avg_gbps),
            f.msg_rate_mpps
        )
    }
}

/// The closing lines: counters, and what the figures are.
pub fn footer(m: &Measurement) -> String {
    let what = if m.simulated {
        "SIMULATED figures: simulated time of the modelled links, not wall-clock time"
    } else {
        "wall-clock figures of this software RNIC on this CPU (NICs connected in memory)"
    };
    format!(
        "{RULE}\n retransmits: {}   drops: {}   QP cache misses: {}   context DMA: {} B\n {what}\n{RULE}",
        m.retransmits, m.drops, m.qp_cache_misses, m.qp_ctx_dma_bytes
    )
}

/// The bandwidth unit of the table.
fn unit(gbits: bool) -> &'static str {
    if gbits {
        "Gb/sec"
    } else {
        "MB/sec"
    }
}

/// What each SoC's firmware counted over a run (`--backend soc`): frames, and per frame
/// the cycles and instructions of its busy polls (`mcycle`, `minstret`); then the
/// cycles simulated and how fast.
pub fn soc_footer(
    deltas: &[roce_hdl_sim::FirmwareStats; 2],
    cycles: u64,
    cpu_ns: u64,
    clock_hz: u64,
) -> String {
    let mut out = String::new();
    for (name, d) in ["client", "server"].iter().zip(deltas) {
        let frames = d.frames().max(1);
        out.push_str(&format!(
            " SoC {name}: {} frames sent, {} received; per frame {} cycles, {} instructions (firmware's mcycle/minstret)\n",
            d.frames_tx,
            d.frames_rx,
            d.busy_cycles / frames,
            d.busy_instret / frames,
        ));
    }
    out.push_str(&format!(
        " SoC clock {} MHz; {cycles} cycles simulated (both SoCs), {:.2} M cycles per CPU second",
        clock_hz / 1_000_000,
        cycles as f64 / (cpu_ns.max(1) as f64 / 1e9) / 1e6
    ));
    out
}
