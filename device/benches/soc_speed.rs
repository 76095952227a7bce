//! How fast the NIC SoC model simulates, and what the firmware measures of itself:
//! two SoCs (`hdl-sim/rtl/soc/`, the image of `make-images.sh`) on one core, first idle
//! (the firmware's polling loop: the baseline), then carrying RC SEND, WRITE, READ and
//! both atomics of 8 KiB (MTU 1024) through the host driver.
//!
//! `cargo bench -p roce-device --bench soc_speed [-- ROUNDS]`
//!
//! Simulated cycles per CPU second of this thread (`/proc/thread-self/schedstat`, so
//! other load on the machine does not count), both SoCs' cycles added; per frame, the
//! cycles and instructions the firmware counted (`mcycle`, `minstret`) in the busy polls
//! of its loop, over the frames it sent and received.

#[path = "../tests/soc_pair/mod.rs"]
mod soc_pair;

use roce_device::soc::{default_image, soc_available, thread_cpu_ns as cpu_ns, CLOCK_HZ};
use soc_pair::{pair, rc_ops, Wire};

fn cycles(w: &Wire) -> u64 {
    w.nics.iter().map(|n| n.cycles()).sum()
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(4);
    let image = default_image();
    if !soc_available() || !image.exists() {
        eprintln!("SKIPPED: no SoC model or no image at {}", image.display());
        return;
    }
    let mut p = pair(&image, 0.0, 14);

    let (c0, t0) = (cycles(&p.wire), cpu_ns());
    for _ in 0..500 {
        p.wire.step(2_000);
    }
    let (c1, t1) = (cycles(&p.wire), cpu_ns());

    let before = p.wire.nics.each_ref().map(|n| n.firmware_stats());
    for _ in 0..rounds {
        rc_ops(&mut p, 8192, 200_000_000);
    }
    let (c2, t2) = (cycles(&p.wire), cpu_ns());
    let after = p.wire.nics.each_ref().map(|n| n.firmware_stats());

    let rate = |c: u64, t: u64| c as f64 / (t as f64 / 1e9) / 1e6;
    println!("SoC model, two SoCs on one core (cycles of both per CPU second of this thread)");
    println!(
        "  idle firmware loop:   {:.2} M cycles/s ({} cycles)",
        rate(c1 - c0, t1 - t0),
        c1 - c0
    );
    println!(
        "  RC traffic, {rounds} rounds: {:.2} M cycles/s ({} cycles, {:.2} ms at {} MHz)",
        rate(c2 - c1, t2 - t1),
        c2 - c1,
        (c2 - c1) as f64 / 2.0 / CLOCK_HZ as f64 * 1e3,
        CLOCK_HZ / 1_000_000
    );
    for (i, (a, b)) in after.iter().zip(&before).enumerate() {
        let d = a.since(b);
        println!(
            "  SoC {i}: {} frames sent, {} received; per frame {} cycles, {} instructions (CPI {:.2})",
            d.frames_tx,
            d.frames_rx,
            d.busy_cycles / d.frames().max(1),
            d.busy_instret / d.frames().max(1),
            d.busy_cycles as f64 / d.busy_instret.max(1) as f64
        );
    }
    for (i, used) in p.wire.stack_used().iter().enumerate() {
        println!("  SoC {i}: {used} bytes of stack used since reset");
    }
}
