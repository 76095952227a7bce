//! The transport engine alone (issue 3): two engines connected directly in memory, one
//! RC QP each, RDMA WRITEs at path MTU 4096, in one run:
//!
//! * 64 KiB messages: Gb/s of payload moved per core;
//! * 64-byte messages: millions of messages per second;
//! * the baseline over the same bytes: per packet of at most 4 KiB, a copy into the frame
//!   and one out (the DMA the sender and receiver do) plus one CRC-32 (the ICRC).
//!
//! Both engines run on this one core, so the figure is the whole conversation (requester,
//! responder, ACKs) per core. Run: `cargo bench -p roce-core --bench engine --features std`;
//! `-- --once` runs 20,000 64-byte WRITEs once, for `valgrind --tool=callgrind`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{bring_up, Node, QpOpts};
use roce_core::transport::{Instant, Mtu, QpType, SendFlags, SendWr, WcStatus, WrOp};
use std::time::Instant as Wall;

/// Moves `iters` WRITEs of `size` bytes from a to b with up to `depth` in flight; returns
/// the wall seconds taken.
fn run(size: usize, iters: usize, depth: usize) -> f64 {
    let (mut a, mut b) = (Node::new(1), Node::new(2));
    let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
    let o = QpOpts {
        mtu: Mtu::Mtu4096,
        ..QpOpts::default()
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    bring_up(&mut a, qa, QpType::Rc, ava, qb, &o, 1, 1);
    bring_up(&mut b, qb, QpType::Rc, avb, qa, &o, 1, 1);
    let (src, ka) = a.buffer(size);
    let (dst, kb) = b.buffer(size);
    let mut frame = vec![0u8; 4096 + 128];
    let (mut posted, mut done, mut inflight) = (0, 0, 0);
    let t = Wall::now();
    while done < iters {
        while posted < iters && inflight < depth {
            let wr = SendWr::new(
                posted as u64,
                WrOp::RdmaWrite {
                    remote_addr: dst,
                    rkey: kb.rkey,
                },
            )
            .sge(src, size as u32, ka.lkey)
            .flags(SendFlags::SIGNALED);
            a.eng.post_send(qa, &wr).unwrap();
            posted += 1;
            inflight += 1;
        }
        let now = Instant::from_nanos(0);
        while let Some(n) = a.eng.poll_transmit(now, &mut frame, &mut a.mem) {
            b.eng.handle_packet(now, &frame[..n], &mut b.mem);
        }
        while let Some(n) = b.eng.poll_transmit(now, &mut frame, &mut b.mem) {
            a.eng.handle_packet(now, &frame[..n], &mut a.mem);
        }
        while let Some(wc) = a.eng.poll_completion(a.cq) {
            assert_eq!(wc.status, WcStatus::Success);
            done += 1;
            inflight -= 1;
        }
    }
    t.elapsed().as_secs_f64()
}

/// The same bytes per packet of at most 4 KiB (the path MTU): copied into a frame and
/// CRC'd (the sender's DMA and ICRC), then copied out (the receiver's DMA).
fn baseline(size: usize, iters: usize) -> f64 {
    let src = vec![0x5Au8; size];
    let (mut frame, mut dst) = (vec![0u8; 4096], vec![0u8; size]);
    let t = Wall::now();
    let mut acc = 0u32;
    for _ in 0..iters {
        for (from, to) in std::hint::black_box(&src)
            .chunks(4096)
            .zip(dst.chunks_mut(4096))
        {
            let f = &mut frame[..from.len()];
            f.copy_from_slice(from);
            acc ^= crc32fast::hash(f);
            to.copy_from_slice(f);
        }
    }
    std::hint::black_box((acc, &dst));
    t.elapsed().as_secs_f64()
}

fn best(f: impl Fn() -> f64) -> f64 {
    (0..5).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::args().any(|a| a == "--once") {
        // One short run of the small-message loop, for instruction counts under
        // `valgrind --tool=callgrind` (machine-independent, unlike the timings).
        std::hint::black_box(run(64, 20_000, 64));
        return;
    }
    println!(
        "{:<34} {:>10} {:>12}",
        "measurement (best of 5)", "engine", "baseline"
    );
    let (n, size) = (4000, 65536);
    let (e, b) = (best(|| run(size, n, 16)), best(|| baseline(size, n)));
    let gbps = |s: f64| (size * n) as f64 * 8.0 / s / 1e9;
    println!(
        "{:<34} {:>10.2} {:>12.2}",
        "RC WRITE 64 KiB, MTU 4096: Gb/s",
        gbps(e),
        gbps(b)
    );
    let (n, size) = (200_000, 64);
    let (e, b) = (best(|| run(size, n, 64)), best(|| baseline(size, n)));
    let mpps = |s: f64| n as f64 / s / 1e6;
    println!(
        "{:<34} {:>10.3} {:>12.3}",
        "RC WRITE 64 B: Mpps",
        mpps(e),
        mpps(b)
    );
}
