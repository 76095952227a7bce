//! RC error paths: every NAK, RNR retry and exhaustion, retry exhaustion, local errors,
//! invalidation, and the flush of everything outstanding when a QP goes to ERR.

mod common;

use std::cell::Cell;
use std::rc::Rc;

use common::*;
use roce_core::memory::AccessFlags;
use roce_core::num::Rkey;
use roce_core::transport::{
    QpState, QpType, RecvWr, SendFlags, SendWr, WcFlags, WcOpcode, WcStatus, WrOp,
};
use roce_core::wire::aeth::{NakCode, Syndrome};
use roce_core::wire::Opcode;

const SIG: SendFlags = SendFlags::SIGNALED;

fn statuses(n: &Node) -> Vec<(u64, WcStatus)> {
    n.wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// A WRITE that fails at the responder, followed by two more WRs: the first completes
/// with `expect`, the others are flushed, both QPs end in ERR, and B's posted receive is
/// flushed too.
fn fatal_write(bad: impl FnOnce(&mut Pair, u64, Rkey) -> (u64, Rkey), expect: WcStatus) {
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(256);
    let (dst, kb) = p.b.buffer(256);
    let (addr, rkey) = bad(&mut p, dst, kb.rkey);
    p.b.post_recv(qb, &RecvWr::new(77));
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(addr, rkey))
            .sge(src, 256, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(qa, &SendWr::new(2, WrOp::Send).flags(SIG));
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_write(dst, kb.rkey)).flags(SendFlags::NONE),
    );
    p.settle();
    assert_eq!(
        statuses(&p.a),
        vec![
            (1, expect),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.a.state(qa), QpState::Err);
    assert_eq!(p.b.state(qb), QpState::Err);
    assert_eq!(statuses(&p.b), vec![(77, WcStatus::WrFlushErr)]);
}

#[test]
fn nak_remote_access_error_for_a_bad_rkey() {
    fatal_write(|_, dst, k| (dst, Rkey(k.0 ^ 0x100)), WcStatus::RemAccessErr);
}

#[test]
fn nak_remote_access_error_out_of_bounds() {
    fatal_write(|_, dst, k| (dst + 1, k), WcStatus::RemAccessErr);
}

#[test]
fn nak_remote_access_error_near_the_top_of_the_address_space() {
    fatal_write(|_, _, k| (u64::MAX - 100, k), WcStatus::RemAccessErr);
}

#[test]
fn nak_remote_access_error_for_a_region_without_remote_write() {
    fatal_write(
        |p, _, _| {
            let (a, k) =
                p.b.buffer_with(256, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ);
            (a, k.rkey)
        },
        WcStatus::RemAccessErr,
    );
}

#[test]
fn nak_remote_access_error_for_another_pd() {
    fatal_write(
        |p, _, _| {
            let pd2 = p.b.eng.alloc_pd().unwrap();
            let a = p.b.mem.alloc(256);
            let k = p.b.eng.reg_mr(pd2, a, 256, AccessFlags::ALL).unwrap();
            (a, k.rkey)
        },
        WcStatus::RemAccessErr,
    );
}

#[test]
fn nak_invalid_request_when_the_qp_forbids_remote_write() {
    let mut p = Pair::new(2);
    let o = QpOpts {
        access: AccessFlags::REMOTE_READ,
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Rc, &o);
    let (src, ka) = p.a.buffer(16);
    let (dst, kb) = p.b.buffer(16);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 16, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemInvReqErr)]);
    assert_eq!(p.b.state(qb), QpState::Err);
}

#[test]
fn nak_invalid_request_for_a_misaligned_atomic() {
    let mut p = Pair::new(3);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (t, kb) = p.b.buffer(32);
    let (r, ka) = p.a.buffer(8);
    p.a.post_send(
        qa,
        &SendWr::new(
            1,
            WrOp::AtomicFetchAndAdd {
                remote_addr: t + 4,
                rkey: kb.rkey,
                add: 1,
            },
        )
        .sge(r, 8, ka.lkey)
        .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemInvReqErr)]);
    assert_eq!(p.b.mem.read(t, 16), vec![0; 16]);
}

#[test]
fn nak_invalid_request_for_read_without_responder_resources() {
    let mut p = Pair::new(4);
    let o = QpOpts {
        max_dest_rd_atomic: 0,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    let (t, kb) = p.b.buffer(32);
    let (r, ka) = p.a.buffer(32);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_read(t, kb.rkey))
            .sge(r, 32, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemInvReqErr)]);
}

#[test]
fn send_longer_than_the_receive_buffer() {
    let mut p = Pair::new(5);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(2000);
    let (dst, kb) = p.b.buffer(1000);
    p.b.post_recv(qb, &RecvWr::new(9).sge(dst, 1000, kb.lkey));
    p.b.post_recv(qb, &RecvWr::new(10).sge(dst, 1000, kb.lkey));
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::Send)
            .sge(src, 2000, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemInvReqErr)]);
    assert_eq!(
        statuses(&p.b),
        vec![(9, WcStatus::LocLenErr), (10, WcStatus::WrFlushErr)]
    );
}

#[test]
fn receive_wqe_with_a_bad_lkey_is_a_remote_operational_error() {
    let mut p = Pair::new(6);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(100);
    let (dst, kb) = p.b.buffer(100);
    p.b.post_recv(
        qb,
        &RecvWr::new(9).sge(dst, 100, roce_core::num::Lkey(kb.lkey.0 + 0x100)),
    );
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::Send).sge(src, 100, ka.lkey).flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemOpErr)]);
    assert_eq!(statuses(&p.b), vec![(9, WcStatus::LocQpOpErr)]);
}

#[test]
fn local_protection_error_for_a_bad_lkey() {
    let mut p = Pair::new(7);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(100);
    let (dst, kb) = p.b.buffer(100);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 100, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(dst, kb.rkey)).sge(src, 101, ka.lkey),
    );
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_write(dst, kb.rkey)).sge(src, 100, ka.lkey),
    );
    p.settle();
    // WR 1 may or may not have been acknowledged before WR 2 failed locally.
    let s = statuses(&p.a);
    assert!(
        s == vec![
            (1, WcStatus::Success),
            (2, WcStatus::LocProtErr),
            (3, WcStatus::WrFlushErr)
        ] || s
            == vec![
                (1, WcStatus::WrFlushErr),
                (2, WcStatus::LocProtErr),
                (3, WcStatus::WrFlushErr)
            ],
        "{s:?}"
    );
    assert_eq!(p.a.state(qa), QpState::Err);
}

#[test]
fn read_into_a_buffer_without_local_write_is_a_local_protection_error() {
    let mut p = Pair::new(8);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (l, ka) = p.a.buffer_with(64, AccessFlags::NONE);
    let (r, kb) = p.b.buffer(64);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_read(r, kb.rkey))
            .sge(l, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::LocProtErr)]);
}

#[test]
fn rnr_nak_then_success_once_a_receive_is_posted() {
    let mut p = Pair::new(9);
    p.keep_trace = true;
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(3000);
    let (dst, kb) = p.b.buffer(3000);
    p.a.mem.fill_pattern(src, 3000, 4);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::Send)
            .sge(src, 3000, ka.lkey)
            .flags(SIG),
    );
    assert!(!p.run(100_000));
    let rnr = p
        .seen(false)
        .iter()
        .filter(|s| matches!(s.syndrome, Some(Syndrome::RnrNak(_))))
        .count();
    assert!(rnr >= 1);
    p.b.post_recv(qb, &RecvWr::new(2).sge(dst, 3000, kb.lkey));
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.mem.read(dst, 3000), p.a.mem.read(src, 3000));
    assert!(p.a.eng.counters().rcvd_rnr_err >= 1);
    assert_eq!(
        p.b.eng.counters().send_rnr_err,
        p.a.eng.counters().rcvd_rnr_err
    );
}

#[test]
fn rnr_retry_exhaustion() {
    let mut p = Pair::new(10);
    let o = QpOpts {
        rnr_retry: 2,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    p.a.post_send(qa, &SendWr::new(1, WrOp::Send).flags(SIG));
    p.a.post_send(qa, &SendWr::new(2, WrOp::Send).flags(SIG));
    p.settle();
    assert_eq!(
        statuses(&p.a),
        vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    // The first RNR NAK and two retries, each answered by an RNR NAK.
    assert_eq!(p.a.eng.counters().rcvd_rnr_err, 3);
    assert_eq!(p.a.eng.counters().retry_rnr_exceeded_err, 1);
    assert_eq!(p.a.state(qa), QpState::Err);
}

#[test]
fn rnr_retry_seven_is_infinite() {
    let mut p = Pair::new(11);
    let o = QpOpts {
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Rc, &o);
    p.a.post_send(qa, &SendWr::new(1, WrOp::Send).flags(SIG));
    assert!(!p.run(10_000_000)); // 10 ms of 10 us RNR waits
    assert!(p.a.eng.counters().rcvd_rnr_err > 100);
    assert!(p.a.wcs.is_empty());
    p.b.post_recv(qb, &RecvWr::new(5));
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(statuses(&p.b), vec![(5, WcStatus::Success)]);
}

#[test]
fn transport_retry_exhaustion_on_a_dead_link() {
    let mut p = Pair::new(12);
    let o = QpOpts {
        retry_cnt: 3,
        timeout: 5,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    p.ab.cfg.drop = 1.0;
    let (src, ka) = p.a.buffer(10);
    let (dst, kb) = p.b.buffer(10);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 10, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(qa, &SendWr::new(2, WrOp::Send).flags(SendFlags::NONE));
    let t0 = p.now;
    p.settle();
    assert_eq!(
        statuses(&p.a),
        vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    let c = p.a.eng.counters();
    assert_eq!(c.retry_exceeded_err, 1);
    assert_eq!(c.completer_retry_err, 3);
    // Four timeouts of 4.096 us * 2^5 = 131 us.
    let elapsed = p.now - t0;
    assert!((4 * 131_072..5 * 131_072).contains(&elapsed), "{elapsed}");
}

#[test]
fn one_psn_sequence_nak_per_gap() {
    let mut p = Pair::new(13);
    p.keep_trace = true;
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    // Drop the third packet a sends, once.
    let n = Rc::new(Cell::new(0));
    let n2 = n.clone();
    p.ab.filter = Some(Box::new(move |_| {
        n2.set(n2.get() + 1);
        n2.get() != 3
    }));
    let (src, ka) = p.a.buffer(10 * 1024);
    let (dst, kb) = p.b.buffer(10 * 1024);
    p.a.mem.fill_pattern(src, 10 * 1024, 8);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 10 * 1024, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.mem.read(dst, 10 * 1024), p.a.mem.read(src, 10 * 1024));
    let naks: Vec<_> = p
        .seen(false)
        .into_iter()
        .filter(|s| s.syndrome == Some(Syndrome::Nak(NakCode::PsnSequenceError)))
        .collect();
    assert_eq!(naks.len(), 1, "{naks:?}");
    assert_eq!(naks[0].psn.value(), 0x102);
    assert_eq!(p.a.eng.counters().rcvd_seq_err, 1);
    assert_eq!(p.b.eng.counters().out_of_seq_request, 7);
}

#[test]
fn psn_wraps_at_2_pow_24() {
    for (a_psn, b_psn) in [
        (0xFF_FFF0, 0xFF_FFFE),
        (0xFF_FFFF, 0),
        (0x7F_FFF0, 0xFF_FFFF),
    ] {
        let mut p = Pair::with_links(a_psn as u64, LinkCfg::lossy(0.05));
        let o = QpOpts {
            a_psn,
            b_psn,
            mtu: roce_core::transport::Mtu::Mtu256,
            timeout: 6,
            ..QpOpts::default()
        };
        let (qa, qb) = p.connect(QpType::Rc, &o);
        let len = 40 * 256 + 3;
        let (src, ka) = p.a.buffer(len);
        let (dst, kb) = p.b.buffer(len);
        let (rd, ka2) = p.a.buffer(len);
        let (sd, kb2) = p.b.buffer(len);
        p.a.mem.fill_pattern(src, len, 1);
        p.b.post_recv(qb, &RecvWr::new(1).sge(sd, len as u32, kb2.lkey));
        p.a.post_send(
            qa,
            &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
                .sge(src, len as u32, ka.lkey)
                .flags(SIG),
        );
        p.a.post_send(
            qa,
            &SendWr::new(2, WrOp::Send)
                .sge(src, len as u32, ka.lkey)
                .flags(SIG),
        );
        p.a.post_send(
            qa,
            &SendWr::new(3, WrOp::rdma_read(dst, kb.rkey))
                .sge(rd, len as u32, ka2.lkey)
                .flags(SIG | SendFlags::FENCE),
        );
        p.settle();
        assert_eq!(
            statuses(&p.a),
            vec![
                (1, WcStatus::Success),
                (2, WcStatus::Success),
                (3, WcStatus::Success)
            ]
        );
        assert_eq!(p.b.mem.read(dst, len), p.a.mem.read(src, len));
        assert_eq!(p.b.mem.read(sd, len), p.a.mem.read(src, len));
        assert_eq!(p.a.mem.read(rd, len), p.a.mem.read(src, len));
        // 41 + 41 + 41 PSNs later.
        let info = p.a.eng.query_qp(qa).unwrap();
        assert_eq!(info.sq_psn.value(), (a_psn + 123) & 0xFF_FFFF);
    }
}

#[test]
fn send_with_invalidate_revokes_the_rkey() {
    let mut p = Pair::new(14);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (dst, kb) = p.b.buffer(64);
    let (src, ka) = p.a.buffer(64);
    p.b.post_recv(qb, &RecvWr::new(1));
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::SendWithInv { rkey: kb.rkey }).flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(
        statuses(&p.a),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::RemAccessErr)
        ]
    );
    let w = p.b.wcs[0];
    assert!(w.wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(w.invalidated_rkey, kb.rkey);
}

#[test]
fn local_invalidate_then_use_is_a_local_protection_error() {
    let mut p = Pair::new(15);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    p.a.post_send(
        qa,
        &SendWr::new(
            1,
            WrOp::LocalInv {
                rkey: Rkey(ka.lkey.0),
            },
        )
        .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    let got: Vec<_> =
        p.a.wcs
            .iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect();
    assert_eq!(
        got,
        vec![
            (1, WcOpcode::LocalInv, WcStatus::Success),
            (2, WcOpcode::RdmaWrite, WcStatus::LocProtErr)
        ]
    );
}

#[test]
fn duplicate_write_is_acknowledged_but_not_executed_again() {
    let mut p = Pair::new(16);
    let (qa, _qb) = p.connect(
        QpType::Rc,
        &QpOpts {
            timeout: 5,
            ..QpOpts::default()
        },
    );
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    p.a.mem.fill_pattern(src, 64, 1);
    // Lose b's first ACK: a times out and sends the WRITE again.
    let n = Rc::new(Cell::new(0));
    let n2 = n.clone();
    p.ba.filter = Some(Box::new(move |_| {
        n2.set(n2.get() + 1);
        n2.get() != 1
    }));
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    // Run until b has executed the WRITE, then scribble over the target.
    while p.b.eng.counters().rcvd_pkts == 0 {
        p.step();
    }
    p.b.mem.write(dst, &[0xEE; 64]);
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.eng.counters().duplicate_request, 1);
    assert_eq!(p.b.mem.read(dst, 64), vec![0xEE; 64]);
}

#[test]
fn duplicate_atomic_replays_the_saved_result() {
    let mut p = Pair::new(17);
    let (qa, _qb) = p.connect(
        QpType::Rc,
        &QpOpts {
            timeout: 5,
            ..QpOpts::default()
        },
    );
    let (t, kb) = p.b.buffer(8);
    p.b.mem.write(t, &41u64.to_le_bytes());
    let (r, ka) = p.a.buffer(8);
    let n = Rc::new(Cell::new(0));
    let n2 = n.clone();
    p.ba.filter = Some(Box::new(move |_| {
        n2.set(n2.get() + 1);
        n2.get() != 1
    }));
    p.a.post_send(
        qa,
        &SendWr::new(
            1,
            WrOp::AtomicFetchAndAdd {
                remote_addr: t,
                rkey: kb.rkey,
                add: 1,
            },
        )
        .sge(r, 8, ka.lkey)
        .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(p.b.mem.read(t, 8), 42u64.to_le_bytes());
    assert_eq!(p.a.mem.read(r, 8), 41u64.to_le_bytes());
    assert_eq!(p.b.eng.counters().duplicate_request, 1);
}

#[test]
fn duplicate_read_is_executed_again() {
    let mut p = Pair::new(18);
    let (qa, _qb) = p.connect(
        QpType::Rc,
        &QpOpts {
            timeout: 5,
            ..QpOpts::default()
        },
    );
    let (t, kb) = p.b.buffer(5000);
    p.b.mem.fill_pattern(t, 5000, 3);
    let (r, ka) = p.a.buffer(5000);
    // Lose the second READ response.
    let n = Rc::new(Cell::new(0));
    let n2 = n.clone();
    p.ba.filter = Some(Box::new(move |_| {
        n2.set(n2.get() + 1);
        n2.get() != 2
    }));
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_read(t, kb.rkey))
            .sge(r, 5000, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::Success)]);
    assert_eq!(p.a.mem.read(r, 5000), p.b.mem.read(t, 5000));
    assert!(p.b.eng.counters().duplicate_request >= 1);
}

#[test]
fn deregistering_the_target_mid_message_stops_the_write() {
    let mut p = Pair::new(19);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(20 * 1024);
    let (dst, kb) = p.b.buffer(20 * 1024);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 20 * 1024, ka.lkey)
            .flags(SIG),
    );
    while p.b.eng.counters().rcvd_pkts < 3 {
        p.step();
    }
    p.b.eng.dereg_mr(kb.lkey).unwrap();
    p.settle();
    assert_eq!(statuses(&p.a), vec![(1, WcStatus::RemAccessErr)]);
    assert_eq!(p.b.state(qb), QpState::Err);
}

#[test]
fn fence_holds_a_wr_until_earlier_ones_complete() {
    let mut p = Pair::new(20);
    p.keep_trace = true;
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (buf, kb) = p.b.buffer(4096);
    let (l, ka) = p.a.buffer(8192);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_read(buf, kb.rkey))
            .sge(l, 4096, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(buf, kb.rkey))
            .sge(l + 4096, 4096, ka.lkey)
            .flags(SIG | SendFlags::FENCE),
    );
    p.settle();
    assert_eq!(
        statuses(&p.a),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    // The WRITE's first packet left after the last READ response arrived.
    let t = &p.trace;
    let last_resp = t.iter().filter(|f| !f.1).map(|f| f.0).max().unwrap();
    let first_write = t
        .iter()
        .filter(|f| f.1 && seen(&f.2).unwrap().opcode == Opcode::RC_RDMA_WRITE_FIRST)
        .map(|f| f.0)
        .min()
        .unwrap();
    let read_resp_end = t
        .iter()
        .filter(|f| !f.1 && seen(&f.2).unwrap().opcode == Opcode::RC_RDMA_READ_RESPONSE_LAST)
        .map(|f| f.0)
        .min()
        .unwrap();
    assert!(
        first_write > read_resp_end,
        "{first_write} {read_resp_end} {last_resp}"
    );
}

#[test]
fn max_rd_atomic_bounds_outstanding_reads() {
    let mut p = Pair::new(21);
    p.keep_trace = true;
    let o = QpOpts {
        max_rd_atomic: 2,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    let (t, kb) = p.b.buffer(64);
    let (r, ka) = p.a.buffer(64 * 8);
    for i in 0..8u64 {
        p.a.post_send(
            qa,
            &SendWr::new(i, WrOp::rdma_read(t, kb.rkey))
                .sge(r + 64 * i, 64, ka.lkey)
                .flags(SIG),
        );
    }
    p.settle();
    assert_eq!(p.a.wcs.len(), 8);
    // Replay the trace: requests sent minus responses received never exceeds 2.
    let mut events: Vec<(u64, i32)> = p
        .trace
        .iter()
        .filter_map(|f| {
            let s = seen(&f.2)?;
            match s.opcode {
                Opcode::RC_RDMA_READ_REQUEST => Some((f.0, 1)),
                // A response counts when it arrives at a (1 us + serialization later).
                Opcode::RC_RDMA_READ_RESPONSE_ONLY => Some((f.0 + 900, -1)),
                _ => None,
            }
        })
        .collect();
    events.sort();
    let mut out = 0;
    for (_, d) in events {
        out += d;
        assert!(out <= 2);
    }
}

#[test]
fn ack_coalescing_answers_a_burst_with_one_ack() {
    let mut p = Pair::new(22);
    p.keep_trace = true;
    // No serialization delay: the whole burst arrives at once.
    p.ab.cfg.ns_per_byte = 0.0;
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    for i in 0..20 {
        p.a.post_send(
            qa,
            &SendWr::new(i, WrOp::rdma_write(dst, kb.rkey))
                .sge(src, 64, ka.lkey)
                .flags(SIG),
        );
    }
    p.settle();
    assert_eq!(p.a.wcs.len(), 20);
    let acks: Vec<_> = p
        .seen(false)
        .into_iter()
        .filter(|s| s.opcode == Opcode::RC_ACKNOWLEDGE)
        .collect();
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0].psn.value(), 0x100 + 19);
}
