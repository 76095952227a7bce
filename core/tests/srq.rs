//! Shared receive queues in the engine: several RC QPs consume one SRQ's WQEs in post
//! order, each holding the WQE its message took until the message completes (rxe's
//! `get_srq_wqe`); the limit event fires once per arming when fewer WQEs than the limit
//! remain (IBTA o11-4.2); an empty SRQ is answered with RNR NAKs until a post refills it.

mod common;

use common::*;
use roce_core::num::Qpn;
use roce_core::transport::{
    Error, QpInitAttr, QpType, RecvWr, SendFlags, SendWr, SrqHandle, SrqInfo, WcOpcode, WcStatus,
    WrOp,
};

/// Two RC connections A1 -> B1 and A2 -> B2 whose B ends receive from one SRQ of
/// `max_wr` entries, its limit armed at `limit`.
fn shared(max_wr: u32, limit: u32) -> (Pair, [Qpn; 2], [Qpn; 2], SrqHandle) {
    let mut p = Pair::new(7);
    let srq = p.b.eng.create_srq(p.b.pd, max_wr, limit).unwrap();
    let o = QpOpts::default();
    let (mut a, mut b) = ([Qpn::new(0); 2], [Qpn::new(0); 2]);
    for i in 0..2 {
        a[i] = p.a.create_qp(QpType::Rc);
        b[i] =
            p.b.eng
                .create_qp(&QpInitAttr {
                    qp_type: QpType::Rc,
                    pd: p.b.pd,
                    send_cq: p.b.cq.0,
                    recv_cq: p.b.cq.0,
                    sq_sig_all: false,
                    max_inline_data: 0,
                    srq: Some(srq),
                })
                .unwrap();
    }
    let (ava, avb) = (p.a.av_to(&p.b), p.b.av_to(&p.a));
    for i in 0..2 {
        bring_up(&mut p.a, a[i], QpType::Rc, ava, b[i], &o, 0x100, 0x200);
        bring_up(&mut p.b, b[i], QpType::Rc, avb, a[i], &o, 0x200, 0x100);
    }
    (p, a, b, srq)
}

fn send(p: &mut Pair, qpn: Qpn, wr_id: u64, len: usize, seed: u8) -> Vec<u8> {
    let (addr, k) = p.a.buffer(len);
    p.a.mem.fill_pattern(addr, len, seed);
    let wr = SendWr::new(wr_id, WrOp::Send)
        .sge(addr, len as u32, k.lkey)
        .flags(SendFlags::SIGNALED);
    p.a.post_send(qpn, &wr);
    p.a.mem.read(addr, len)
}

#[test]
fn two_qps_share_one_srq_and_the_limit_fires_once() {
    let (mut p, a, b, srq) = shared(8, 2);
    let mut bufs = Vec::new();
    for id in 0..4 {
        let (addr, k) = p.b.buffer(4096);
        p.b.eng
            .post_srq_recv(srq, &RecvWr::new(100 + id).sge(addr, 4096, k.lkey))
            .unwrap();
        bufs.push(addr);
    }
    // A QP attached to an SRQ has no receive queue of its own (rxe: EINVAL).
    assert!(matches!(
        p.b.eng.post_recv(b[0], &RecvWr::new(1)),
        Err(Error::InvalidWr { .. })
    ));
    assert_eq!(
        p.b.eng.query_srq(srq),
        Ok(SrqInfo {
            max_wr: 8,
            srq_limit: 2,
            outstanding: 4
        })
    );

    // A 3000-byte SEND (three packets) on A1 beside a short one on A2 (the engine sends
    // its QPs round robin): each B QP keeps the WQE its first packet took.
    let long = send(&mut p, a[0], 1, 3000, 1);
    let short = send(&mut p, a[1], 2, 100, 2);
    p.settle();
    let rx: Vec<_> =
        p.b.wcs
            .iter()
            .filter(|w| w.opcode == WcOpcode::Recv)
            .collect();
    assert_eq!(rx.len(), 2);
    for w in &rx {
        assert_eq!(w.status, WcStatus::Success);
        let i = (w.wr_id - 100) as usize;
        let want = if w.qp_num == b[0] { &long } else { &short };
        assert_eq!(w.byte_len as usize, want.len(), "{w:?}");
        assert_eq!(&p.b.mem.read(bufs[i], want.len()), want);
    }
    let mut ids: Vec<_> = rx.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [100, 101], "the SRQ's two oldest WQEs");
    // Two left, limit 2: not below it yet.
    assert_eq!(p.b.eng.poll_srq_event(), None);

    // The third take leaves one: the event fires, once, and the limit disarms.
    send(&mut p, a[1], 3, 10, 3);
    p.settle();
    assert_eq!(p.b.eng.poll_srq_event(), Some(srq));
    assert_eq!(p.b.eng.poll_srq_event(), None);
    assert_eq!(p.b.eng.query_srq(srq).map(|i| i.srq_limit), Ok(0));
    send(&mut p, a[0], 4, 10, 4);
    p.settle();
    assert_eq!(p.b.eng.poll_srq_event(), None, "disarmed: no second event");
    assert_eq!(p.b.eng.query_srq(srq).map(|i| i.outstanding), Ok(0));
    assert_eq!(
        p.a.wcs
            .iter()
            .filter(|w| w.status == WcStatus::Success)
            .count(),
        4
    );
}

#[test]
fn an_empty_srq_is_an_rnr_until_a_post_refills_it() {
    let (mut p, a, _b, srq) = shared(4, 0);
    send(&mut p, a[0], 1, 64, 1);
    // Long enough for a few RNR retries at 10 us, short of anything else.
    p.run(200_000);
    assert!(p.a.wcs.is_empty(), "no receive WQE: the SEND waits");
    assert!(p.b.eng.counters().send_rnr_err > 0);
    let (addr, k) = p.b.buffer(64);
    p.b.eng
        .post_srq_recv(srq, &RecvWr::new(9).sge(addr, 64, k.lkey))
        .unwrap();
    p.settle();
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
    assert_eq!(p.b.wcs[0].wr_id, 9);
}

#[test]
fn srq_verbs_check_their_arguments() {
    let (mut p, _a, b, srq) = shared(4, 0);
    let e = &mut p.b.eng;
    // Limit above max_wr, depth above the engine's, an SRQ that does not exist.
    assert_eq!(
        e.modify_srq(srq, 5),
        Err(Error::InvalidCap { cap: "srq_limit" })
    );
    assert_eq!(
        e.create_srq(p.b.pd, 1 << 20, 0),
        Err(Error::InvalidCap { cap: "max_wr" })
    );
    assert_eq!(e.modify_srq(SrqHandle(3), 1), Err(Error::NoSuchSrq(3)));
    for i in 0..4 {
        e.post_srq_recv(srq, &RecvWr::new(i)).unwrap();
    }
    assert_eq!(
        e.post_srq_recv(srq, &RecvWr::new(4)),
        Err(Error::QueueFull {
            verb: "post_srq_recv"
        })
    );
    // In use by two QPs: destroying it is refused until both are gone.
    assert_eq!(e.destroy_srq(srq), Err(Error::Busy { what: "SRQ" }));
    e.destroy_qp(b[0]).unwrap();
    assert_eq!(e.destroy_srq(srq), Err(Error::Busy { what: "SRQ" }));
    e.destroy_qp(b[1]).unwrap();
    assert_eq!(e.destroy_srq(srq), Ok(()));
    assert_eq!(e.query_srq(srq), Err(Error::NoSuchSrq(0)));
}
