//! Message sizes from 0 bytes to 16 MiB at every path MTU.

mod common;

use common::*;
use roce_core::transport::{Mtu, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};

const MTUS: [Mtu; 5] = [
    Mtu::Mtu256,
    Mtu::Mtu512,
    Mtu::Mtu1024,
    Mtu::Mtu2048,
    Mtu::Mtu4096,
];

/// WRITE, SEND and READ of `len` bytes at `mtu`; checks data and completions.
fn roundtrip(seed: u64, mtu: Mtu, len: usize, link: LinkCfg) {
    let mut p = Pair::with_links(seed, link);
    let o = QpOpts {
        mtu,
        timeout: 6,
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Rc, &o);
    let (src, ka) = p.a.buffer(len);
    p.a.mem.fill_pattern(src, len, seed as u8);
    let (wdst, kb) = p.b.buffer(len);
    let (sdst, kb2) = p.b.buffer(len);
    let (rdst, ka2) = p.a.buffer(len);
    let l = len as u32;
    p.b.post_recv(qb, &RecvWr::new(1).sge(sdst, l, kb2.lkey));
    let f = SendFlags::SIGNALED;
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(wdst, kb.rkey))
            .sge(src, l, ka.lkey)
            .flags(f),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::Send).sge(src, l, ka.lkey).flags(f),
    );
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_read(wdst, kb.rkey))
            .sge(rdst, l, ka2.lkey)
            .flags(f | SendFlags::FENCE),
    );
    assert!(p.run(600_000_000_000), "{mtu:?} {len}: not idle");
    let got: Vec<_> =
        p.a.wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::Success, l),
            (2, WcStatus::Success, l),
            (3, WcStatus::Success, l)
        ],
        "{mtu:?} {len}"
    );
    assert_eq!(p.b.wcs[0].byte_len, l);
    let want = p.a.mem.read(src, len);
    assert!(p.b.mem.read(wdst, len) == want, "{mtu:?} {len}: write data");
    assert!(p.b.mem.read(sdst, len) == want, "{mtu:?} {len}: send data");
    assert!(p.a.mem.read(rdst, len) == want, "{mtu:?} {len}: read data");
}

#[test]
fn every_mtu_around_the_packet_boundaries() {
    for mtu in MTUS {
        let m = mtu.bytes() as usize;
        for len in [
            0,
            1,
            2,
            3,
            4,
            5,
            m - 1,
            m,
            m + 1,
            2 * m - 1,
            2 * m,
            2 * m + 1,
            7 * m + 3,
        ] {
            roundtrip(len as u64, mtu, len, LinkCfg::default());
        }
    }
}

#[test]
fn every_mtu_with_loss() {
    for (i, mtu) in MTUS.into_iter().enumerate() {
        roundtrip(
            i as u64,
            mtu,
            50 * mtu.bytes() as usize + 1,
            LinkCfg::lossy(0.05),
        );
    }
}

#[test]
fn one_mebibyte_at_mtu_256() {
    roundtrip(9, Mtu::Mtu256, 1 << 20, LinkCfg::default());
}

#[test]
fn sixteen_mebibytes_at_mtu_4096() {
    roundtrip(10, Mtu::Mtu4096, 16 << 20, LinkCfg::default());
}

#[test]
fn sixteen_mebibytes_at_mtu_1024_with_one_percent_loss() {
    roundtrip(
        11,
        Mtu::Mtu1024,
        16 << 20,
        LinkCfg {
            drop: 0.01,
            ..LinkCfg::default()
        },
    );
}
