//! RC reliability: Go-Back-N under loss, duplication, reordering and corruption.

mod common;

use common::*;
use roce_core::transport::{Mtu, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};

/// `common::mixed_workload` over Go-Back-N QPs with a 262 us ACK timeout.
fn mixed_workload(seed: u64, link: LinkCfg, mtu: Mtu, n: usize) {
    let o = QpOpts {
        mtu,
        timeout: 6,
        ..QpOpts::default()
    };
    common::mixed_workload(seed, link, &o, n);
}

#[test]
fn clean_link_mixed() {
    mixed_workload(1, LinkCfg::default(), Mtu::Mtu1024, 40);
}

#[test]
fn drops_only() {
    for seed in 0..10 {
        mixed_workload(
            seed,
            LinkCfg {
                drop: 0.05,
                ..LinkCfg::default()
            },
            Mtu::Mtu1024,
            40,
        );
    }
}

#[test]
fn duplicates_only() {
    for seed in 0..10 {
        mixed_workload(
            seed,
            LinkCfg {
                dup: 0.1,
                ..LinkCfg::default()
            },
            Mtu::Mtu512,
            40,
        );
    }
}

#[test]
fn reordering_only() {
    for seed in 0..10 {
        mixed_workload(
            seed,
            LinkCfg {
                reorder: 0.1,
                ..LinkCfg::default()
            },
            Mtu::Mtu256,
            40,
        );
    }
}

#[test]
fn corruption_is_caught_by_the_icrc() {
    for seed in 0..10 {
        mixed_workload(
            seed,
            LinkCfg {
                corrupt: 0.05,
                ..LinkCfg::default()
            },
            Mtu::Mtu1024,
            40,
        );
    }
}

#[test]
fn everything_at_ten_percent() {
    for seed in 0..20 {
        let link = LinkCfg {
            corrupt: 0.02,
            ..LinkCfg::lossy(0.1)
        };
        mixed_workload(seed, link, Mtu::Mtu4096, 40);
    }
}

#[test]
fn counters_show_the_recovery() {
    let mut p = Pair::with_links(
        3,
        LinkCfg {
            drop: 0.1,
            dup: 0.1,
            reorder: 0.1,
            ..LinkCfg::default()
        },
    );
    let o = QpOpts {
        timeout: 6,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    let (src, ka) = p.a.buffer(64 * 1024);
    let (dst, kb) = p.b.buffer(64 * 1024);
    p.a.mem.fill_pattern(src, 64 * 1024, 5);
    for i in 0..16u64 {
        p.a.post_send(
            qa,
            &SendWr::new(i, WrOp::rdma_write(dst + i * 4096, kb.rkey))
                .sge(src + i * 4096, 4096, ka.lkey)
                .flags(SendFlags::SIGNALED),
        );
    }
    p.settle();
    assert_eq!(p.b.mem.read(dst, 64 * 1024), p.a.mem.read(src, 64 * 1024));
    let ca = *p.a.eng.counters();
    let cb = *p.b.eng.counters();
    eprintln!(
        "a: {ca:#?}\nb: {cb:#?}\nlinks: {} {} dropped {} {}",
        p.ab.sent, p.ba.sent, p.ab.dropped, p.ba.dropped
    );
    assert!(ca.completer_retry_err > 0);
    assert!(cb.out_of_seq_request > 0);
    assert!(cb.duplicate_request > 0);
}

#[test]
fn several_qp_pairs_share_the_engines_and_a_lossy_link() {
    for seed in 0..5 {
        let mut p = Pair::with_links(seed, LinkCfg::lossy(0.05));
        let o = QpOpts {
            timeout: 7,
            ..QpOpts::default()
        };
        let pairs: Vec<_> = (0..6).map(|_| p.connect(QpType::Rc, &o)).collect();
        let len = 5000;
        let (src, ka) = p.a.buffer(len * 6);
        p.a.mem.fill_pattern(src, len * 6, seed as u8);
        let (dst, kb) = p.b.buffer(len * 6 * 10);
        let (back, ka2) = p.a.buffer(len * 6);
        for round in 0..10u64 {
            for (i, &(qa, qb)) in pairs.iter().enumerate() {
                let off = (i * len) as u64;
                let d = dst + off + round * (len * 6) as u64;
                p.b.post_recv(qb, &RecvWr::new(round));
                let id = (i as u64) << 32 | round;
                let op = if round % 2 == 0 {
                    WrOp::RdmaWriteWithImm {
                        remote_addr: d,
                        rkey: kb.rkey,
                        imm: id as u32,
                    }
                } else {
                    WrOp::rdma_write(d, kb.rkey)
                };
                p.a.post_send(
                    qa,
                    &SendWr::new(id, op)
                        .sge(src + off, len as u32, ka.lkey)
                        .flags(SendFlags::SIGNALED),
                );
                if round == 9 {
                    // Read the last round back, fenced behind the writes.
                    p.a.post_send(
                        qa,
                        &SendWr::new(id | 1 << 31, WrOp::rdma_read(d, kb.rkey))
                            .sge(back + off, len as u32, ka2.lkey)
                            .flags(SendFlags::SIGNALED | SendFlags::FENCE),
                    );
                }
            }
        }
        p.settle();
        for (i, &(qa, _)) in pairs.iter().enumerate() {
            let ids: Vec<u64> =
                p.a.wcs
                    .iter()
                    .filter(|w| w.qp_num == qa)
                    .map(|w| w.wr_id)
                    .collect();
            let mut want: Vec<u64> = (0..10).map(|r| (i as u64) << 32 | r).collect();
            want.push((i as u64) << 32 | 9 | 1 << 31);
            assert_eq!(ids, want, "seed {seed} qp {i}");
            let off = (i * len) as u64;
            assert_eq!(p.a.mem.read(back + off, len), p.a.mem.read(src + off, len));
        }
        assert!(p
            .a
            .wcs
            .iter()
            .chain(p.b.wcs.iter())
            .all(|w| w.status == WcStatus::Success));
        assert_eq!(p.b.wcs.len(), 6 * 5);
    }
}
