//! The parallel engine against real time (issue 16): one 100 Gb/s stream of 4 KiB
//! packets (an RC QP writing 1 MiB RDMA WRITEs, four outstanding, MTU 4096) between two
//! NICs back to back on a 1 us link, with the whole stack at both ends (host driver,
//! firmware runtime, engine), run three ways in one run:
//!
//! 1. one partition on one thread: the sequential fabric, the baseline;
//! 2. two partitions (one NIC each, joined by the link: 1 us of lookahead) on one
//!    thread: what the engine's windows and frame hand-over cost;
//! 3. the same two partitions on two threads.
//!
//! Each prints simulated time per wall second (1.0 = real time), the process's CPU time
//! per simulated second, the events, the engine's steps (a partition running up to its
//! neighbour's horizon) and waits (a thread finding neither partition able to move),
//! and the speed-up two threads can give at most given how the events split between
//! the partitions. The machine is
//! shared: the load average is printed, and the wall-clock figures are only as good as
//! the share of the cores the run got (CPU time tells how much it got).
//!
//! `cargo bench -p roce-cli --bench stream [-- MIB [FILTER]]` (default 256 MiB per run;
//! FILTER picks the runs whose name holds it, e.g. `"2 threads"`; `STREAM_LINK_NS=N` in
//! the environment makes the link N ns long instead of 1 us; `STREAM_FASTPATH=1` gives
//! the NICs the RC fast path's model, as `roce perf` has by default). `wait %` is the share of
//! the threads' wall time spent waiting for each other.
//!
//! First (unless FILTER picks runs) it times the payload's own work per packet without
//! the simulator: what any schedule that keeps both ends' payload on one core must
//! still do (see [`payload_floor_ns`]).

use roce_cli::progress::ProgressBar;
use roce_cli::scenario::fct::{run_flows, Net, Setup};
use roce_core::transport::Mtu;
use roce_core::wire::icrc::{self, IcrcKind};
use roce_sim::workload::Flow;
use roce_sim::{LinkConfig, WIRE_OVERHEAD};
use std::time::Instant;

/// CPU time of this process so far (all threads), in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Nanoseconds per 4 KiB packet of the payload's own work on one core, as the model
/// does it: the sender's DMA read from its 1 MiB source buffer into the frame, the ICRC
/// computed at the sender and checked at the receiver (crc32fast, the engine's), and
/// the receiver's DMA write into its 1 MiB buffer. Best of three rounds.
fn payload_floor_ns(payload: usize) -> f64 {
    const BUFFER: usize = 1 << 20;
    let src = vec![0x5Au8; BUFFER];
    let mut dst = vec![0u8; BUFFER];
    // Ethernet 14, IPv4 20 (IHL 5), UDP 8, BTH 12, the payload, the ICRC 4.
    let mut frame = vec![0u8; 54 + payload + 4];
    frame[14] = 0x45;
    let end = frame.len() - 4;
    let slots = BUFFER / payload;
    let packets = slots * 128;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let wall = Instant::now();
        let mut x = 0u32;
        for k in 0..packets {
            let at = k % slots * payload;
            frame[54..54 + payload].copy_from_slice(&src[at..at + payload]);
            x ^= icrc::compute(IcrcKind::Ipv4, &frame[14..end]).unwrap_or(0);
            let received = std::hint::black_box(&frame[14..end]);
            x ^= icrc::compute(IcrcKind::Ipv4, received).unwrap_or(0);
            dst[at..at + payload].copy_from_slice(&frame[54..54 + payload]);
        }
        std::hint::black_box((x, &dst));
        best = best.min(wall.elapsed().as_nanos() as f64 / packets as f64);
    }
    best
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let mib: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(256);
    // Only the runs whose name holds this (for callgrind, one at a time).
    let filter = std::env::args()
        .skip(1)
        .find(|a| a.parse::<u64>().is_err() && !a.starts_with('-'))
        .unwrap_or_default();
    // The link's delay (the lookahead), 1 us unless STREAM_LINK_NS says otherwise: to
    // tell what costs per step (fewer with a longer link) from what costs per packet.
    let delay: u64 = std::env::var("STREAM_LINK_NS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    // The NICs with the RC fast path's model (`roce perf`'s default) when
    // STREAM_FASTPATH=1; the firmware handling every packet otherwise.
    let fastpath = std::env::var("STREAM_FASTPATH").is_ok_and(|v| v == "1");
    let flow = Flow {
        id: 0,
        src: 0,
        dst: 1,
        size: mib << 20,
        start: 0,
    };
    let setup = |partitions| Setup {
        net: Net::BackToBack(LinkConfig::new(100_000_000_000, delay)),
        partitions,
        seed: 1,
        dcqcn: false,
        pfc: false,
        mtu: Mtu::Mtu4096,
        timeout: 14,
        dscp: 26,
        limit: u64::MAX / 2,
        fastpath,
    };
    println!(
        "100 Gb/s stream of {mib} MiB in 4 KiB packets, two NICs{} back to back on a {delay} ns \
         link (load average {})",
        if fastpath { " with the fast path" } else { "" },
        loadavg()
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7} {:>11}",
        "run",
        "sim ms",
        "wall ms",
        "CPU ms",
        "x real time",
        "CPU/sim",
        "events",
        "steps",
        "waits",
        "wait %",
        "2-thr bound"
    );
    if filter.is_empty() || "payload".contains(&filter) {
        // 4 KiB of payload in a frame of 4,154 bytes: its wire time at 100 Gb/s.
        let wire_ns = (54 + 4096 + 4 + WIRE_OVERHEAD) as f64 * 8.0 / 100.0;
        let ns = payload_floor_ns(4096);
        println!(
            "payload work alone (DMA read, ICRC at both ends, DMA write; one core): {ns:.0} ns \
             per packet against {wire_ns:.0} ns on the wire: {:.2}x real time at most",
            wire_ns / ns
        );
    }
    let mut fct = Vec::new();
    for (name, partitions, threads) in [
        ("1 partition, 1 thread (sequential)", 1, 1),
        ("2 partitions, 1 thread", 2, 1),
        ("2 partitions, 2 threads", 2, 2),
    ] {
        if !name.contains(&filter) {
            continue;
        }
        let (cpu0, wall) = (cpu_seconds(), Instant::now());
        let r = run_flows(
            &setup(partitions),
            vec![flow],
            threads,
            &ProgressBar::hidden(),
        )
        .expect("the stream runs");
        let wall = wall.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu0;
        let sim = r.flows[0].fct_ns.expect("the stream completes") as f64 / 1e9;
        fct.push(r.flows[0].fct_ns);
        println!(
            "{:<34} {:>9.2} {:>9.0} {:>9.0} {:>12.3} {:>10.2} {:>10} {:>9} {:>9} {:>7.1} {:>11.2}",
            name,
            sim * 1e3,
            wall * 1e3,
            cpu * 1e3,
            sim / wall,
            cpu / sim,
            r.profile.events(),
            r.waits.steps,
            r.waits.waits,
            // Of the time the threads were there (each thread's share of the wall).
            100.0 * r.waits.wait_ns as f64 / 1e9 / (wall * threads as f64),
            r.profile.balance_bound(2),
        );
    }
    // The three are the same model: the same stream, to the nanosecond.
    assert!(fct.windows(2).all(|w| w[0] == w[1]), "{fct:?}");
}
