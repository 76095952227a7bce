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
//! still do (see [`payload_floor_ns`]), then the same work split between two threads as
//! the two-thread run splits it, each frame's buffer handed over by ownership: what
//! moving the payload between the cores costs (see [`payload_two_threads_ns`]).

use roce_cli::progress::ProgressBar;
use roce_cli::scenario::fct::{run_flows, Net, Setup};
use roce_core::memory::SliceMemory;
use roce_core::transport::Mtu;
use roce_core::wire::icrc::{self, Icrc, IcrcKind};
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
    let mut src = vec![0x5Au8; BUFFER];
    let mut dst = vec![0u8; BUFFER];
    let mut frame = vec![0u8; FRAME_HEADERS + payload + 4];
    let slots = BUFFER / payload;
    let packets = slots * 128;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let wall = Instant::now();
        let mut x = 0u32;
        for k in 0..packets {
            let at = k % slots * payload;
            send_half(&mut frame, &mut src[at..at + payload]);
            let received = std::hint::black_box(&frame);
            x ^= receive_half(received, &mut dst[at..at + payload]);
        }
        std::hint::black_box((x, &dst));
        best = best.min(wall.elapsed().as_nanos() as f64 / packets as f64);
    }
    best
}

/// Ethernet 14, IPv4 20 (IHL 5), UDP 8, BTH 12: the bytes before the payload.
const FRAME_HEADERS: usize = 54;

/// The sender's payload work on `frame` (headers, `payload.len()` bytes, the ICRC), as
/// the engine does it: the ICRC begun over the headers, then the DMA read of `payload`
/// into the frame hashed as it is read (`Icrc::read`: one pass over the bytes), and the
/// ICRC appended. (`payload` is mutable only because a `SliceMemory` maps it so.)
fn send_half(frame: &mut [u8], payload: &mut [u8]) {
    let end = FRAME_HEADERS + payload.len();
    frame[14] = 0x45;
    let (headers, body) = frame.split_at_mut(FRAME_HEADERS);
    let mut crc = Icrc::start(IcrcKind::Ipv4, &headers[14..]).expect("IPv4, UDP and BTH");
    let len = payload.len();
    crc.read(&mut SliceMemory::new(0, payload), 0, &mut body[..len])
        .expect("the payload is mapped");
    frame[end..end + 4].copy_from_slice(&crc.finish().to_le_bytes());
}

/// The receiver's payload work on `frame`: the ICRC computed for the check, and the
/// DMA write of the payload into `dst` (its length). Returns the ICRC, to keep the work.
fn receive_half(frame: &[u8], dst: &mut [u8]) -> u32 {
    let end = FRAME_HEADERS + dst.len();
    let crc = icrc::compute(IcrcKind::Ipv4, &frame[14..end]).unwrap_or(0);
    dst.copy_from_slice(&frame[FRAME_HEADERS..end]);
    crc
}

/// A buffer from `rx`, spinning (then yielding the core) while there is none: the
/// engine's threads wait for each other the same way.
fn take(rx: &std::sync::mpsc::Receiver<Box<[u8]>>) -> Box<[u8]> {
    let mut spins = 0u32;
    loop {
        match rx.try_recv() {
            Ok(b) => return b,
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                spins += 1;
                if spins < 2_000 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// The payload's work split over two threads as the two-thread run splits it: the
/// sender's half (DMA read into a frame buffer, ICRC) on one, the receiver's (ICRC
/// check, DMA write) on the other, each frame's buffer handed over by ownership (as the
/// engine's mail hands frames to the partition they arrive in) and given back for the
/// sender's next frame; eight frames in flight at most. Nanoseconds per packet: the
/// wall time, and the time each thread spent working (not waiting), best of three
/// rounds. With `touch` false the threads pass the buffers without touching the bytes:
/// what the hand-over itself costs.
fn payload_two_threads_ns(payload: usize, touch: bool) -> [f64; 3] {
    use std::sync::mpsc::sync_channel;
    const BUFFER: usize = 1 << 20;
    const IN_FLIGHT: usize = 8;
    let slots = BUFFER / payload;
    let packets = slots * 128;
    let mut best = [f64::MAX; 3];
    for _ in 0..3 {
        let (to_rx, from_tx) = sync_channel::<Box<[u8]>>(IN_FLIGHT);
        let (back, spares) = sync_channel::<Box<[u8]>>(IN_FLIGHT);
        for _ in 0..IN_FLIGHT {
            back.send(vec![0u8; FRAME_HEADERS + payload + 4].into_boxed_slice())
                .expect("the spares' channel is open");
        }
        let wall = Instant::now();
        let (sender_ns, receiver_ns) = std::thread::scope(|s| {
            let receiver = s.spawn(move || {
                let mut dst = vec![0u8; BUFFER];
                let (mut busy, mut x) = (0u128, 0u32);
                for k in 0..packets {
                    let frame = take(&from_tx);
                    let t = Instant::now();
                    if touch {
                        let at = k % slots * payload;
                        x ^= receive_half(&frame, &mut dst[at..at + payload]);
                    }
                    busy += t.elapsed().as_nanos();
                    // The sender may have finished: its spares are no longer needed.
                    let _ = back.send(frame);
                }
                std::hint::black_box((x, &dst));
                busy
            });
            let mut src = vec![0x5Au8; BUFFER];
            let mut busy = 0u128;
            for k in 0..packets {
                let mut frame = take(&spares);
                let t = Instant::now();
                if touch {
                    let at = k % slots * payload;
                    send_half(&mut frame, &mut src[at..at + payload]);
                }
                busy += t.elapsed().as_nanos();
                to_rx
                    .send(frame)
                    .expect("the receiver runs until the last frame");
            }
            (busy, receiver.join().expect("the receiver thread"))
        });
        let round = [
            wall.elapsed().as_nanos() as f64,
            sender_ns as f64,
            receiver_ns as f64,
        ]
        .map(|ns| ns / packets as f64);
        if round[0] < best[0] {
            best = round;
        }
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
        // The same work split between two cores, sender's half and receiver's half, as
        // the two-thread run splits it: what moving each 4 KiB between the cores costs.
        let [wall, tx, rx] = payload_two_threads_ns(4096, true);
        let [hand_wall, hand_tx, hand_rx] = payload_two_threads_ns(4096, false);
        println!(
            "payload work on two threads (sender's half, receiver's half, each buffer handed \
             over by ownership): {wall:.0} ns per packet; working {tx:.0} ns (sender), \
             {rx:.0} ns (receiver); the hand-over alone {hand_wall:.0} ns ({hand_tx:.0} / \
             {hand_rx:.0})"
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
