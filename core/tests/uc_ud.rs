//! UC and UD: no acknowledgements; UC drops damaged messages and resynchronises at the
//! next FIRST/ONLY; UD carries a DETH, checks the Q_Key and fills a 40-byte GRH area.

mod common;

use common::*;
use roce_core::num::{Qkey, Qpn};
use roce_core::transport::{
    Mtu, QpType, RecvWr, SendFlags, SendWr, UdDest, WcFlags, WcOpcode, WcStatus, WrOp, GRH_LEN,
};

const SIG: SendFlags = SendFlags::SIGNALED;

#[test]
fn uc_send_and_write_on_a_clean_link() {
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Uc, &QpOpts::default());
    let (src, ka) = p.a.buffer(5000);
    p.a.mem.fill_pattern(src, 5000, 2);
    let (dst, kb) = p.b.buffer(5000);
    let (wdst, kb2) = p.b.buffer(5000);
    p.b.post_recv(qb, &RecvWr::new(1).sge(dst, 5000, kb.lkey));
    p.b.post_recv(qb, &RecvWr::new(2));
    p.a.post_send(
        qa,
        &SendWr::new(10, WrOp::Send)
            .sge(src, 5000, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(
            11,
            WrOp::RdmaWriteWithImm {
                remote_addr: wdst,
                rkey: kb2.rkey,
                imm: 3,
            },
        )
        .sge(src, 5000, ka.lkey)
        .flags(SIG),
    );
    p.settle();
    assert_eq!(p.b.mem.read(dst, 5000), p.a.mem.read(src, 5000));
    assert_eq!(p.b.mem.read(wdst, 5000), p.a.mem.read(src, 5000));
    let a: Vec<_> = p.a.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(a, vec![(10, WcStatus::Success), (11, WcStatus::Success)]);
    let b: Vec<_> =
        p.b.wcs
            .iter()
            .map(|w| (w.wr_id, w.opcode, w.byte_len))
            .collect();
    assert_eq!(
        b,
        vec![
            (1, WcOpcode::Recv, 5000),
            (2, WcOpcode::RecvRdmaWithImm, 5000)
        ]
    );
    // UC sends no ACKs at all.
    assert_eq!(p.ba.sent, 0);
}

#[test]
fn uc_drops_a_message_with_a_lost_packet_and_resyncs() {
    let mut p = Pair::new(2);
    let o = QpOpts {
        mtu: Mtu::Mtu256,
        ..QpOpts::default()
    };
    let (qa, qb) = p.connect(QpType::Uc, &o);
    let n = std::rc::Rc::new(std::cell::Cell::new(0));
    let n2 = n.clone();
    // Drop the second packet of the first message (4 packets).
    p.ab.filter = Some(Box::new(move |_| {
        n2.set(n2.get() + 1);
        n2.get() != 2
    }));
    let (src, ka) = p.a.buffer(1024);
    p.a.mem.fill_pattern(src, 1024, 9);
    let (d1, kb1) = p.b.buffer(1024);
    let (d2, kb2) = p.b.buffer(1024);
    p.b.post_recv(qb, &RecvWr::new(1).sge(d1, 1024, kb1.lkey));
    p.b.post_recv(qb, &RecvWr::new(2).sge(d2, 1024, kb2.lkey));
    p.a.post_send(
        qa,
        &SendWr::new(10, WrOp::Send)
            .sge(src, 1024, ka.lkey)
            .flags(SIG),
    );
    p.a.post_send(
        qa,
        &SendWr::new(11, WrOp::Send)
            .sge(src, 600, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    // The sender completes both; the receiver got only the second, in the first WQE.
    assert_eq!(p.a.wcs.len(), 2);
    let b: Vec<_> = p.b.wcs.iter().map(|w| (w.wr_id, w.byte_len)).collect();
    assert_eq!(b, vec![(1, 600)]);
    assert_eq!(p.b.mem.read(d1, 600), p.a.mem.read(src, 600));
}

#[test]
fn uc_under_random_loss_never_delivers_a_damaged_message() {
    for seed in 0..10 {
        let mut p = Pair::with_links(seed, LinkCfg::lossy(0.1));
        let o = QpOpts {
            mtu: Mtu::Mtu512,
            ..QpOpts::default()
        };
        let (qa, qb) = p.connect(QpType::Uc, &o);
        let len = 2000;
        let (src, ka) = p.a.buffer(len * 20);
        p.a.mem.fill_pattern(src, len * 20, 1);
        let (dst, kb) = p.b.buffer(len * 20);
        for i in 0..20u64 {
            p.b.post_recv(
                qb,
                &RecvWr::new(i).sge(dst + i * len as u64, len as u32, kb.lkey),
            );
        }
        for i in 0..20u64 {
            // Each message starts with its index so the receiver can tell them apart.
            p.a.mem.write(src + i * len as u64, &[i as u8; 4]);
            p.a.post_send(
                qa,
                &SendWr::new(i, WrOp::Send)
                    .sge(src + i * len as u64, len as u32, ka.lkey)
                    .flags(SIG),
            );
        }
        p.settle();
        assert_eq!(p.a.wcs.len(), 20);
        for (slot, w) in p.b.wcs.iter().enumerate() {
            assert_eq!(w.status, WcStatus::Success);
            assert_eq!(w.byte_len, len as u32);
            let got = p.b.mem.read(dst + slot as u64 * len as u64, len);
            let i = got[0] as u64;
            assert_eq!(got, p.a.mem.read(src + i * len as u64, len), "seed {seed}");
        }
    }
}

fn ud_pair(seed: u64) -> (Pair, Qpn, Qpn) {
    let mut p = Pair::new(seed);
    let qa = p.a.create_qp(QpType::Ud);
    let qb = p.b.create_qp(QpType::Ud);
    bring_up_ud(&mut p.a, qa, Qkey(0x1111));
    bring_up_ud(&mut p.b, qb, Qkey(0x2222));
    (p, qa, qb)
}

/// A to B's UD QP `qb`, with the Q_Key `ud_pair` gave it.
fn to_b(p: &Pair, qb: Qpn) -> UdDest {
    UdDest {
        av: p.a.av_to(&p.b),
        remote_qpn: qb,
        remote_qkey: Qkey(0x2222),
    }
}

#[test]
fn ud_send_fills_the_grh_area_and_names_the_source() {
    let (mut p, qa, qb) = ud_pair(3);
    let (src, ka) = p.a.buffer(1000);
    p.a.mem.fill_pattern(src, 1000, 5);
    let (dst, kb) = p.b.buffer(2000);
    p.b.post_recv(qb, &RecvWr::new(7).sge(dst, 2000, kb.lkey));
    let dest = to_b(&p, qb);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::SendWithImm { imm: 9 })
            .sge(src, 1000, ka.lkey)
            .ud(dest)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
    let w = p.b.wcs[0];
    assert_eq!(
        (w.wr_id, w.status, w.byte_len, w.src_qp, w.imm_data),
        (7, WcStatus::Success, 1040, qa, 9)
    );
    assert!(w.wc_flags.contains(WcFlags::GRH));
    let grh = p.b.mem.read(dst, GRH_LEN);
    assert_eq!(&grh[..20], &[0; 20]);
    assert_eq!(grh[20] >> 4, 4, "IPv4 header in the second half");
    assert_eq!(&grh[32..36], &[10, 0, 0, 1], "source address");
    assert_eq!(p.b.mem.read(dst + 40, 1000), p.a.mem.read(src, 1000));
}

#[test]
fn ud_wrong_qkey_no_receive_or_short_buffer_is_dropped_silently() {
    let (mut p, qa, qb) = ud_pair(4);
    let (src, ka) = p.a.buffer(100);
    let (dst, kb) = p.b.buffer(100);
    let av = p.a.av_to(&p.b);
    let send = |p: &mut Pair, id, qkey| {
        p.a.post_send(
            qa,
            &SendWr::new(id, WrOp::Send)
                .sge(src, 100, ka.lkey)
                .ud(UdDest {
                    av,
                    remote_qpn: qb,
                    remote_qkey: Qkey(qkey),
                })
                .flags(SIG),
        );
    };
    send(&mut p, 1, 0x2222); // no receive posted
    p.settle();
    send(&mut p, 2, 0x9999); // wrong Q_Key
    p.b.post_recv(qb, &RecvWr::new(20).sge(dst, 100, kb.lkey)); // too short for GRH + 100
    send(&mut p, 3, 0x2222);
    p.settle();
    assert!(p.b.wcs.is_empty());
    assert_eq!(p.a.wcs.len(), 3);
    assert_eq!(p.b.eng.counters().rcvd_qkey_err, 1);
    assert_eq!(p.b.eng.counters().resp_dropped, 2);
}

#[test]
fn ud_message_longer_than_the_mtu_completes_without_sending() {
    let (mut p, qa, qb) = ud_pair(5);
    let (src, ka) = p.a.buffer(5000);
    let dest = to_b(&p, qb);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::Send)
            .sge(src, 5000, ka.lkey)
            .ud(dest)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
    assert_eq!(p.ab.sent, 0);
}

#[test]
fn ud_messages_go_up_to_the_port_mtu() {
    // rxe's get_mtu: a UD QP sends one packet of up to the port's MTU (4096 here), whatever
    // its path MTU (found against rxe: ibv_ud_pingpong -s 4096 on a 4200-byte link).
    let (mut p, qa, qb) = ud_pair(7);
    let (src, ka) = p.a.buffer(4096);
    let (dst, kb) = p.b.buffer(4096 + GRH_LEN);
    p.b.post_recv(
        qb,
        &RecvWr::new(3).sge(dst, (4096 + GRH_LEN) as u32, kb.lkey),
    );
    let dest = to_b(&p, qb);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::Send)
            .sge(src, 4096, ka.lkey)
            .ud(dest)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(p.ab.sent, 1);
    assert_eq!(p.b.wcs[0].status, WcStatus::Success);
    assert_eq!(p.b.wcs[0].byte_len as usize, 4096 + GRH_LEN);
}

#[test]
fn ud_rejects_rdma_at_post_time() {
    let (mut p, qa, _qb) = ud_pair(6);
    let e = p.a.eng.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(0, roce_core::num::Rkey(1))),
    );
    assert!(e.is_err());
}
