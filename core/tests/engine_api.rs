//! The verbs surface of the engine: state rules, errors that name what was wrong,
//! queue limits, CQ back-pressure, SQD, RESET, the timer contract, IPv6 and VLAN
//! addressing, the AckReq policy and the outstanding-PSN window.

mod common;

use common::*;
use roce_core::engine::{Engine, GidEntry, PortConfig};
use roce_core::memory::{AccessFlags, MemError, WQE_LKEY};
use roce_core::num::{Psn, Qpn};
use roce_core::transport::{
    AttrMask, Error, Instant, Mtu, QpAttr, QpInitAttr, QpState, QpType, RecvWr, SendFlags, SendWr,
    TransitionError, WcStatus, WrOp,
};
use roce_core::wire::Opcode;

const SIG: SendFlags = SendFlags::SIGNALED;

#[test]
fn verbs_refuse_what_the_state_does_not_allow() {
    let mut n = Node::new(1);
    let q = n.create_qp(QpType::Rc);
    assert_eq!(
        n.eng.post_send(q, &SendWr::new(1, WrOp::Send)),
        Err(Error::InvalidState {
            verb: "post_send",
            state: QpState::Reset
        })
    );
    assert_eq!(
        n.eng.post_recv(q, &RecvWr::new(1)),
        Err(Error::InvalidState {
            verb: "post_recv",
            state: QpState::Reset
        })
    );
    assert_eq!(
        n.eng.modify_qp(q, &QpAttr::to_state(QpState::Rts)),
        Err(Error::ModifyQp(TransitionError::InvalidTransition {
            qp_type: QpType::Rc,
            from: QpState::Reset,
            to: QpState::Rts
        }))
    );
    let e = n
        .eng
        .modify_qp(q, &QpAttr::to_state(QpState::Init))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "modify_qp: RESET -> INIT requires ACCESS_FLAGS|PKEY_INDEX|PORT"
    );
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(9);
    init.port_num = Some(1);
    init.qp_access_flags = Some(roce_core::memory::AccessFlags::NONE);
    assert!(matches!(
        n.eng.modify_qp(q, &init),
        Err(Error::InvalidAttribute {
            attr: AttrMask::PKEY_INDEX,
            ..
        })
    ));
    init.pkey_index = Some(0);
    n.eng.modify_qp(q, &init).unwrap();
    // INIT: receives may be posted, sends may not.
    n.eng.post_recv(q, &RecvWr::new(1)).unwrap();
    assert!(n.eng.post_send(q, &SendWr::new(1, WrOp::Send)).is_err());
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(Default::default());
    rtr.path_mtu = Some(Mtu::Mtu4096);
    rtr.dest_qp_num = Some(Qpn::new(5));
    rtr.rq_psn = Some(Psn::new(0));
    rtr.max_dest_rd_atomic = Some(200);
    rtr.min_rnr_timer = roce_core::transport::RnrTimer::new(1);
    assert!(matches!(
        n.eng.modify_qp(q, &rtr),
        Err(Error::InvalidAttribute {
            attr: AttrMask::MAX_DEST_RD_ATOMIC,
            ..
        })
    ));
    assert_eq!(
        n.eng.query_qp(q).unwrap().state,
        QpState::Init,
        "a refused modify changes nothing"
    );
    assert_eq!(
        n.eng.post_send(Qpn::new(99), &SendWr::new(1, WrOp::Send)),
        Err(Error::NoSuchQp(Qpn::new(99)))
    );
}

#[test]
fn queues_fill_up_and_work_requests_are_checked() {
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    for i in 0..64 {
        p.b.eng.post_recv(qb, &RecvWr::new(i)).unwrap();
    }
    assert_eq!(
        p.b.eng.post_recv(qb, &RecvWr::new(64)),
        Err(Error::QueueFull { verb: "post_recv" })
    );
    let (buf, k) = p.a.buffer(8);
    let short = SendWr::new(
        1,
        WrOp::AtomicFetchAndAdd {
            remote_addr: 0,
            rkey: roce_core::num::Rkey(1),
            add: 1,
        },
    )
    .sge(buf, 4, k.lkey);
    assert!(matches!(
        p.a.eng.post_send(qa, &short),
        Err(Error::InvalidWr { .. })
    ));
    let huge = SendWr::new(1, WrOp::Send)
        .sge(buf, u32::MAX, k.lkey)
        .sge(buf, 2, k.lkey);
    assert!(matches!(
        p.a.eng.post_send(qa, &huge),
        Err(Error::InvalidWr { .. })
    ));
    for i in 0..64 {
        p.a.eng.post_send(qa, &SendWr::new(i, WrOp::Send)).unwrap();
    }
    assert_eq!(
        p.a.eng.post_send(qa, &SendWr::new(64, WrOp::Send)),
        Err(Error::QueueFull { verb: "post_send" })
    );
}

#[test]
fn resources_in_use_cannot_be_freed() {
    let mut n = Node::new(1);
    let q = n.create_qp(QpType::Rc);
    let (_, k) = n.buffer(16);
    assert_eq!(n.eng.dealloc_pd(n.pd), Err(Error::Memory(MemError::Busy)));
    assert_eq!(n.eng.destroy_cq(n.cq), Err(Error::Busy { what: "CQ" }));
    n.eng.destroy_qp(q).unwrap();
    n.eng.dereg_mr(k.lkey).unwrap();
    n.eng.destroy_cq(n.cq).unwrap();
    n.eng.dealloc_pd(n.pd).unwrap();
}

#[test]
fn a_full_cq_holds_completions_back_without_losing_any() {
    let mut p = Pair::new(2);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    // The tests' CQ holds 1024 entries; use 1100 receives completed in bursts without
    // polling b, so b must RNR-NAK while its CQ is full.
    let n = 1100u64;
    let mut posted = 0;
    let mut done = 0;
    while done < n {
        while posted < n && posted - done < 64 {
            p.b.eng.post_recv(qb, &RecvWr::new(posted)).unwrap();
            p.a.eng
                .post_send(qa, &SendWr::new(posted, WrOp::Send).flags(SIG))
                .unwrap();
            posted += 1;
        }
        for _ in 0..2000 {
            if !p.step() {
                break;
            }
        }
        // Drain a but only drain b's CQ when it is nearly full.
        p.a.poll();
        done = p.a.wcs.len() as u64;
        if posted >= 1050 {
            p.b.poll();
        }
    }
    p.settle();
    let ids: Vec<u64> = p.b.wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
    assert!(p.a.wcs.iter().all(|w| w.status == WcStatus::Success));
    assert!(p.b.eng.counters().send_rnr_err > 0, "the CQ never filled");
}

#[test]
fn sqd_finishes_what_started_and_starts_nothing_new() {
    let mut p = Pair::new(3);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(64 * 1024);
    let (dst, kb) = p.b.buffer(64 * 1024);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64 * 1024, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.step();
    p.a.eng
        .modify_qp(qa, &QpAttr::to_state(QpState::Sqd))
        .unwrap();
    p.settle();
    let ids: Vec<_> = p.a.wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![1]);
    p.a.eng
        .modify_qp(qa, &QpAttr::to_state(QpState::Rts))
        .unwrap();
    p.settle();
    let ids: Vec<_> = p.a.wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![1, 2]);
}

#[test]
fn err_flushes_in_order_and_reset_makes_the_qp_reusable() {
    let mut p = Pair::new(4);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    for i in 0..5 {
        p.b.post_recv(qb, &RecvWr::new(100 + i));
        p.a.post_send(
            qa,
            &SendWr::new(i, WrOp::Send).flags(if i % 2 == 0 { SIG } else { SendFlags::NONE }),
        );
    }
    p.a.eng
        .modify_qp(qa, &QpAttr::to_state(QpState::Err))
        .unwrap();
    p.b.eng
        .modify_qp(qb, &QpAttr::to_state(QpState::Err))
        .unwrap();
    // Posting in ERR is accepted and flushed at once.
    p.a.post_send(qa, &SendWr::new(5, WrOp::Send));
    p.settle();
    let a: Vec<_> = p.a.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        a,
        (0..6)
            .map(|i| (i, WcStatus::WrFlushErr))
            .collect::<Vec<_>>(),
        "unsignaled WRs flush too"
    );
    let b: Vec<_> = p.b.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        b,
        (100..105)
            .map(|i| (i, WcStatus::WrFlushErr))
            .collect::<Vec<_>>()
    );
    assert_eq!(p.ab.sent + p.ba.sent, 0);
    // RESET and bring both up again.
    for (n, q) in [(&mut p.a, qa), (&mut p.b, qb)] {
        n.eng
            .modify_qp(q, &QpAttr::to_state(QpState::Reset))
            .unwrap();
        assert_eq!(n.eng.query_qp(q).unwrap().sq_outstanding, 0);
    }
    let o = QpOpts::default();
    let (ava, avb) = (p.a.av_to(&p.b), p.b.av_to(&p.a));
    bring_up(&mut p.a, qa, QpType::Rc, ava, qb, &o, 7, 9);
    bring_up(&mut p.b, qb, QpType::Rc, avb, qa, &o, 9, 7);
    p.b.post_recv(qb, &RecvWr::new(1));
    p.a.post_send(qa, &SendWr::new(9, WrOp::Send).flags(SIG));
    p.settle();
    assert_eq!(
        p.a.wcs.last().map(|w| (w.wr_id, w.status)),
        Some((9, WcStatus::Success))
    );
}

#[test]
fn handle_timeout_early_or_late_only_acts_on_due_timers() {
    let mut p = Pair::new(5);
    let o = QpOpts {
        timeout: 10,
        retry_cnt: 1,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    p.ab.cfg.drop = 1.0;
    p.a.post_send(qa, &SendWr::new(1, WrOp::Send).flags(SIG));
    p.step();
    let t = p.a.eng.poll_timeout().expect("retransmit timer armed");
    assert!(t.as_nanos() - p.now.min(t.as_nanos()) <= 4_194_304);
    // Early: nothing happens.
    p.a.eng
        .handle_timeout(Instant::from_nanos(t.as_nanos() - 1));
    assert_eq!(p.a.eng.counters().completer_retry_err, 0);
    // Late by far: one retry, not many.
    p.a.eng
        .handle_timeout(Instant::from_nanos(t.as_nanos() + 1_000_000_000));
    assert_eq!(p.a.eng.counters().completer_retry_err, 1);
    assert_eq!(p.a.eng.counters().local_ack_timeout_err, 1);
}

#[test]
fn ipv6_and_vlan_addressing() {
    let mut p = Pair::new(6);
    p.keep_trace = true;
    let gid_a = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let gid_b = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    // Both addresses live on VLAN 100: frames for them are taken only there.
    let on_vlan = |mac, gid| {
        let mut c = PortConfig::new(mac, gid);
        c.gids.set(0, Some(GidEntry::with_vlan(gid, 100))).unwrap();
        c
    };
    *p.a.eng = Eng::new(on_vlan(p.a.mac, gid_a));
    *p.b.eng = Eng::new(on_vlan(p.b.mac, gid_b));
    for n in [&mut p.a, &mut p.b] {
        n.pd = n.eng.alloc_pd().unwrap();
        n.cq = n.eng.create_cq().unwrap();
    }
    p.a.gid = gid_a;
    p.b.gid = gid_b;
    let qa = p.a.create_qp(QpType::Rc);
    let qb = p.b.create_qp(QpType::Rc);
    let mut ava = p.a.av_to(&p.b);
    ava.vlan_id = Some(100);
    ava.sl = 3;
    ava.flow_label = 0x12345;
    ava.traffic_class = 0x68;
    let avb = p.b.av_to(&p.a);
    let o = QpOpts::default();
    bring_up(&mut p.a, qa, QpType::Rc, ava, qb, &o, 1, 2);
    bring_up(&mut p.b, qb, QpType::Rc, avb, qa, &o, 2, 1);
    let (src, ka) = p.a.buffer(100);
    let (dst, kb) = p.b.buffer(100);
    p.a.mem.fill_pattern(src, 100, 3);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 100, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
    assert_eq!(p.b.mem.read(dst, 100), p.a.mem.read(src, 100));
    let f = &p.trace.iter().find(|t| t.1).unwrap().2;
    let pkt = roce_core::wire::parse(f).unwrap();
    let vlan = pkt.headers().vlan.unwrap();
    assert_eq!((vlan.vid, vlan.pcp), (100, 3));
    match pkt.headers().l3 {
        roce_core::wire::L3Repr::Ipv6(ip) => {
            assert_eq!(ip.flow_label, 0x12345);
            assert_eq!((ip.dscp, ip.ecn), (0x68 >> 2, 0));
        }
        other => panic!("{other:?}"),
    }
    // rdma_flow_label_to_udp_sport(0x12345) = 0xE37D.
    assert_eq!(
        pkt.headers().udp.unwrap().src_port,
        ((0x12345 & 0x3FFF) ^ ((0x12345 & 0xFC000) >> 14)) as u16 | 0xC000
    );
}

#[test]
fn ack_request_on_the_last_packet_and_every_64_and_a_128_psn_window() {
    let mut p = Pair::new(7);
    p.keep_trace = true;
    // A slow, long link so the window, not the link, limits the sender.
    p.ab.cfg.delay_ns = 1_000_000;
    p.ba.cfg.delay_ns = 1_000_000;
    let o = QpOpts {
        mtu: Mtu::Mtu256,
        timeout: 14,
        ..QpOpts::default()
    };
    let (qa, _qb) = p.connect(QpType::Rc, &o);
    let len = 300 * 256;
    let (src, ka) = p.a.buffer(len);
    let (dst, kb) = p.b.buffer(len);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, len as u32, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    let sent: Vec<_> = p
        .trace
        .iter()
        .filter(|t| t.1)
        .map(|t| (t.0, seen(&t.2).unwrap()))
        .collect();
    assert_eq!(sent.len(), 300);
    let acks: Vec<u32> = sent
        .iter()
        .filter(|s| s.1.ack_req)
        .map(|s| s.1.psn.value() - 0x100)
        .collect();
    assert_eq!(acks, vec![63, 127, 191, 255, 299]);
    // Nothing beyond PSN 128 leaves before the first ACK can have come back (2 ms).
    let first_burst = sent.iter().filter(|s| s.0 < 1_500_000).count();
    assert_eq!(first_burst, 128);
    assert_eq!(sent[0].1.opcode, Opcode::RC_RDMA_WRITE_FIRST);
    assert_eq!(sent[299].1.opcode, Opcode::RC_RDMA_WRITE_LAST);
}

#[test]
fn create_qp_checks_its_pd_and_cqs() {
    let mut e: Box<Eng> = Box::new(Engine::new(PortConfig::new([2, 0, 0, 0, 0, 1], [0; 16])));
    let pd = e.alloc_pd().unwrap();
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        pd,
        send_cq: 0,
        recv_cq: 0,
        sq_sig_all: false,
        max_inline_data: 0,
        srq: None,
    };
    assert_eq!(e.create_qp(&init), Err(Error::NoSuchCq(0)));
    let cq = e.create_cq().unwrap();
    let q = e
        .create_qp(&QpInitAttr {
            send_cq: cq.0,
            recv_cq: cq.0,
            ..init
        })
        .unwrap();
    assert_eq!(q, Qpn::new(16));
    for _ in 1..8 {
        e.create_qp(&QpInitAttr {
            send_cq: cq.0,
            recv_cq: cq.0,
            ..init
        })
        .unwrap();
    }
    assert_eq!(
        e.create_qp(&QpInitAttr {
            send_cq: cq.0,
            recv_cq: cq.0,
            ..init
        }),
        Err(Error::TableFull { table: "QP" })
    );
}

/// Inline sends (`IBV_SEND_INLINE`): the firmware hands the engine the payload's place in
/// the send queue under its reserved `WQE_LKEY`, which reads any local memory and writes
/// none; a QP takes them up to its `max_inline_data`, and only on SEND and WRITE.
#[test]
fn inline_sends_read_the_wqe_and_are_bounded() {
    let mut p = Pair::new(4);
    let init = |n: &Node, max_inline_data| QpInitAttr {
        qp_type: QpType::Rc,
        pd: n.pd,
        send_cq: n.cq.0,
        recv_cq: n.cq.0,
        sq_sig_all: false,
        max_inline_data,
        srq: None,
    };
    assert_eq!(
        p.a.eng.create_qp(&init(&p.a, 65)),
        Err(Error::InvalidCap {
            cap: "max_inline_data"
        })
    );
    let qa = p.a.eng.create_qp(&init(&p.a, 64)).unwrap();
    let qb = p.b.create_qp(QpType::Rc);
    let (ava, avb) = (p.a.av_to(&p.b), p.b.av_to(&p.a));
    let o = QpOpts::default();
    bring_up(&mut p.a, qa, QpType::Rc, ava, qb, &o, 10, 20);
    bring_up(&mut p.b, qb, QpType::Rc, avb, qa, &o, 20, 10);

    // The "send queue": memory no region covers.
    let wqe = p.a.mem.alloc(64);
    p.a.mem.fill_pattern(wqe, 64, 5);
    let (rbuf, rk) = p.b.buffer(64);
    p.b.post_recv(qb, &RecvWr::new(1).sge(rbuf, 64, rk.lkey));
    let inline = SendWr::new(2, WrOp::Send)
        .sge(wqe, 64, WQE_LKEY)
        .flags(SendFlags::INLINE | SIG);
    p.a.post_send(qa, &inline);
    p.settle();
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
    assert_eq!(p.b.wcs[0].byte_len, 64);
    assert_eq!(p.b.mem.read(rbuf, 64), p.a.mem.read(wqe, 64));

    let too_long = SendWr::new(3, WrOp::Send)
        .sge(wqe, 64, WQE_LKEY)
        .sge(wqe, 1, WQE_LKEY)
        .flags(SendFlags::INLINE);
    let read = SendWr::new(4, WrOp::rdma_read(0, roce_core::num::Rkey(1)))
        .sge(wqe, 8, WQE_LKEY)
        .flags(SendFlags::INLINE);
    for wr in [too_long, read] {
        assert!(matches!(
            p.a.eng.post_send(qa, &wr),
            Err(Error::InvalidWr { .. })
        ));
    }
    // The key reads; it never writes (a receive or READ target through it fails).
    let mem = p.a.eng.memory();
    assert_eq!(
        mem.check_local(p.a.pd, WQE_LKEY, 0, 1 << 40, AccessFlags::NONE),
        Ok(())
    );
    assert!(matches!(
        mem.check_local(p.a.pd, WQE_LKEY, wqe, 1, AccessFlags::LOCAL_WRITE),
        Err(MemError::AccessDenied { .. })
    ));
}
