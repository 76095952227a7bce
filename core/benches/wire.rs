//! Wire-layer throughput (issue 2), in one run:
//!
//! * `parse` = `wire::parse`, ICRC verify included, of a 62-byte RC ACKNOWLEDGE (untagged
//!   IPv4: 14 + 20 + 8 + 12 + 4 AETH + 4 ICRC) and of a 4170-byte RC RDMA_WRITE_ONLY with
//!   4096 bytes of payload;
//! * `emit` = `wire::emit` of the same two frames (lengths, IPv4 checksum, pad, ICRC);
//! * `crc32` = the baseline: `crc32fast::hash` over the same whole-frame bytes.
//!
//! Targets: ACK parse+verify >= 30 Mpps (<= 33 ns) on one core; 4 KiB parse+verify
//! within 10% of the CRC-32 baseline.
//!
//! Run: `cargo bench -p roce-core --bench wire --features std -- --warm-up-time 1
//! --measurement-time 3`. The `std` feature makes crc32fast pick PCLMULQDQ / VPCLMULQDQ
//! at run time (otherwise only when the build's target features include them). The
//! `crc32fast` dev-dependency has `std` on, which Cargo's feature unification already
//! passes to the core in bench builds, so a plain `cargo bench` measures the same code;
//! `--features std` says so explicitly. The baseline always uses the same crc32fast
//! build as the core.
//!
//! Criterion reports the ACK group in elements/s (frames/s) and the 4 KiB group in
//! bytes/s (its GiB/s are 2^30 bytes/s). After criterion, an unfiltered run prints a
//! summary table: every measurement timed in interleaved rounds, so all see the same
//! load on a shared machine, with min and median ns/frame, Mpps and GB/s (10^9 bytes/s),
//! and the parse/baseline ratios. It adds breakdown rows (`parse_unverified`,
//! `icrc::compute`).

use criterion::{black_box, criterion_group, Criterion, Throughput};
use roce_core::num::{Msn, Psn, Qpn, Rkey};
use roce_core::wire::aeth::{AethRepr, Syndrome};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::icrc::IcrcKind;
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::opcode::Opcode;
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{emit, parse, parse_unverified, ExtHeaders, Headers, L3Repr};
use std::net::Ipv4Addr;

/// Untagged RoCEv2-over-IPv4 headers for `opcode` with the given extended headers.
fn headers(opcode: Opcode, ext: ExtHeaders) -> Headers {
    Headers {
        eth: EthernetRepr {
            dst: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            src: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            ethertype: 0,
        },
        vlan: None,
        l3: L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 26,
            ecn: 2,
            ..Ipv4Repr::default()
        }),
        udp: Some(UdpRepr {
            src_port: 0xC001,
            dst_port: 4791,
            checksum: 0,
        }),
        bth: BthRepr::new(opcode, Qpn::new(0x12), Psn::new(0xABCDE)),
        ext,
    }
}

/// (name, headers, payload, frame bytes) of the two measured frames.
fn frames() -> [(&'static str, Headers, Vec<u8>, Vec<u8>); 2] {
    let ack = headers(
        Opcode::RC_ACKNOWLEDGE,
        ExtHeaders {
            aeth: Some(AethRepr {
                syndrome: Syndrome::ACK,
                msn: Msn::new(1),
            }),
            ..ExtHeaders::default()
        },
    );
    let write = headers(
        Opcode::RC_RDMA_WRITE_ONLY,
        ExtHeaders {
            reth: Some(RethRepr {
                va: 0x7f00_0000_1000,
                rkey: Rkey(0x1234),
                dma_len: 4096,
            }),
            ..ExtHeaders::default()
        },
    );
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    [
        ("ack_62B", ack, Vec::new()),
        ("write_only_4KiB", write, payload),
    ]
    .map(|(name, h, p)| {
        let mut buf = vec![0u8; 8192];
        let n = emit(&h, &p, &mut buf).unwrap();
        buf.truncate(n);
        assert!(parse(&buf).is_ok());
        (name, h, p, buf)
    })
}

fn wire(c: &mut Criterion) {
    let [ack, write] = frames();
    assert_eq!(ack.3.len(), 62);
    assert_eq!(write.3.len(), 14 + 20 + 8 + 12 + 16 + 4096 + 4);
    for (name, h, payload, frame) in [ack, write] {
        let mut g = c.benchmark_group(name);
        g.throughput(if frame.len() < 100 {
            Throughput::Elements(1)
        } else {
            Throughput::Bytes(frame.len() as u64)
        });
        g.bench_function("parse", |b| b.iter(|| parse(black_box(&frame[..])).is_ok()));
        let mut buf = vec![0u8; frame.len()];
        g.bench_function("emit", |b| {
            b.iter(|| emit(black_box(&h), black_box(&payload), black_box(&mut buf[..])))
        });
        g.bench_function("crc32", |b| {
            b.iter(|| crc32fast::hash(black_box(&frame[..])))
        });
        g.finish();
    }
}

/// One row of the summary: a name, the frame bytes it covers, and a closure that runs
/// the measured call `n` times.
type Row<'a> = (&'static str, usize, Box<dyn FnMut(u32) + 'a>);

/// A row whose closure calls `f` in a tight, monomorphic loop.
fn row<'a, R>(name: &'static str, bytes: usize, mut f: impl FnMut() -> R + 'a) -> Row<'a> {
    let run = move |n: u32| {
        for _ in 0..n {
            black_box(f());
        }
    };
    (name, bytes, Box::new(run))
}

/// The summary table: every row timed in interleaved rounds (so all rows see the same
/// machine load), reporting the minimum and the median per-call time over the rounds.
/// On a shared machine the minimum is the better estimate of the uncontended cost.
fn summary() {
    let [ack, write] = frames();
    let (a, w) = (&ack.3[..], &write.3[..]);
    let (mut abuf, mut wbuf) = (vec![0u8; a.len()], vec![0u8; w.len()]);
    let (ah, wh, wp) = (ack.1, write.1, &write.2[..]);
    let (acov, wcov) = (&a[14..a.len() - 4], &w[14..w.len() - 4]);
    let icrc = |c: &[u8]| roce_core::wire::icrc::compute(IcrcKind::Ipv4, black_box(c));
    let (na, nw) = (a.len(), w.len());
    let mut rows = [
        row("ack parse+verify", na, || parse(black_box(a)).is_ok()),
        row("ack emit", na, || emit(&ah, &[], black_box(&mut abuf[..]))),
        row("ack crc32 baseline", na, || crc32fast::hash(black_box(a))),
        row("write4k parse+verify", nw, || parse(black_box(w)).is_ok()),
        row("write4k emit", nw, || {
            emit(&wh, wp, black_box(&mut wbuf[..]))
        }),
        row("write4k crc32 baseline", nw, || {
            crc32fast::hash(black_box(w))
        }),
        row("ack parse_unverified", na, || {
            parse_unverified(black_box(a)).is_ok()
        }),
        row("ack icrc::compute", na, || icrc(acov)),
        row("write4k parse_unverified", nw, || {
            parse_unverified(black_box(w)).is_ok()
        }),
        row("write4k icrc::compute", nw, || icrc(wcov)),
    ];
    const ROUNDS: usize = 400;
    let mut ns = vec![Vec::with_capacity(ROUNDS); rows.len()];
    for _ in 0..ROUNDS {
        for ((_, bytes, run), times) in rows.iter_mut().zip(&mut ns) {
            let n = if *bytes < 100 { 2000 } else { 200 };
            let t = std::time::Instant::now();
            run(n);
            times.push(t.elapsed().as_nanos() as f64 / f64::from(n));
        }
    }
    println!("\nsummary ({ROUNDS} interleaved rounds; min and median ns per frame; Mpps and GB/s from the min)");
    println!(
        "{:<28} {:>6} {:>8} {:>8} {:>7} {:>7}",
        "", "bytes", "min ns", "med ns", "Mpps", "GB/s"
    );
    let mut min = std::collections::HashMap::new();
    for ((name, bytes, _), times) in rows.iter().zip(&mut ns) {
        times.sort_by(f64::total_cmp);
        let (lo, med) = (times[0], times[ROUNDS / 2]);
        min.insert(*name, lo);
        let (mpps, gbs) = (1e3 / lo, *bytes as f64 / lo);
        println!("{name:<28} {bytes:>6} {lo:>8.1} {med:>8.1} {mpps:>7.2} {gbs:>7.2}");
    }
    let ratio = |x: &str, base: &str| min[x] / min[base];
    println!(
        "vs crc32 baseline (min): ack parse+verify {:.2}x, write4k {:.2}x",
        ratio("ack parse+verify", "ack crc32 baseline"),
        ratio("write4k parse+verify", "write4k crc32 baseline"),
    );
}

criterion_group!(benches, wire);

/// Criterion's benchmarks, then the summary table (skipped when a filter is given or
/// when run as a test by `cargo test --benches`).
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filtered = args
        .iter()
        .any(|a| !a.starts_with('-') && a.parse::<f64>().is_err());
    if args.iter().any(|a| a == "--bench") && !filtered {
        summary();
    }
}
