//! RC scenarios on a clean link: every WR type completes with the right data and
//! completion fields.

mod common;

use common::*;
use roce_core::num::Rkey;
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WcFlags, WcOpcode, WcStatus, WrOp};

fn sig() -> SendFlags {
    SendFlags::SIGNALED
}

#[test]
fn send_only_delivers_into_the_receive_buffer() {
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(100);
    let (dst, kb) = p.b.buffer(128);
    p.a.mem.fill_pattern(src, 100, 7);
    p.b.post_recv(qb, &RecvWr::new(55).sge(dst, 128, kb.lkey));
    p.a.post_send(
        qa,
        &SendWr::new(11, WrOp::Send)
            .sge(src, 100, ka.lkey)
            .flags(sig()),
    );
    p.settle();
    assert_eq!(p.b.mem.read(dst, 100), p.a.mem.read(src, 100));
    let wa = p.a.wcs.clone();
    assert_eq!(wa.len(), 1);
    assert_eq!(
        (wa[0].wr_id, wa[0].status, wa[0].opcode, wa[0].byte_len),
        (11, WcStatus::Success, WcOpcode::Send, 100)
    );
    let wb = p.b.wcs.clone();
    assert_eq!(wb.len(), 1);
    assert_eq!(
        (wb[0].wr_id, wb[0].status, wb[0].opcode, wb[0].byte_len),
        (55, WcStatus::Success, WcOpcode::Recv, 100)
    );
    assert_eq!(wb[0].qp_num, qb);
}

#[test]
fn multi_packet_send_with_imm_spans_receive_sges() {
    let mut p = Pair::new(2);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let len = 5000;
    let (src, ka) = p.a.buffer(len);
    p.a.mem.fill_pattern(src, len, 3);
    let (d1, k1) = p.b.buffer(1500);
    let (d2, k2) = p.b.buffer(4000);
    p.b.post_recv(
        qb,
        &RecvWr::new(1).sge(d1, 1500, k1.lkey).sge(d2, 4000, k2.lkey),
    );
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::SendWithImm { imm: 0xDEAD_BEEF })
            .sge(src, 3000, ka.lkey)
            .sge(src + 3000, 2000, ka.lkey)
            .flags(sig() | SendFlags::SOLICITED),
    );
    p.settle();
    let mut got = p.b.mem.read(d1, 1500);
    got.extend(p.b.mem.read(d2, 3500));
    assert_eq!(got, p.a.mem.read(src, len));
    let wb = p.b.wcs[0];
    assert_eq!(wb.byte_len, 5000);
    assert_eq!(wb.imm_data, 0xDEAD_BEEF);
    assert!(wb.wc_flags.contains(WcFlags::WITH_IMM));
    assert!(wb.solicited);
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
}

#[test]
fn rdma_write_and_write_with_imm() {
    let mut p = Pair::new(3);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(3000);
    p.a.mem.fill_pattern(src, 3000, 9);
    let (dst, kb) = p.b.buffer(4096);
    p.a.post_send(
        qa,
        &SendWr::new(1, WrOp::rdma_write(dst + 10, kb.rkey))
            .sge(src, 3000, ka.lkey)
            .flags(sig()),
    );
    p.b.post_recv(qb, &RecvWr::new(9));
    p.a.post_send(
        qa,
        &SendWr::new(
            2,
            WrOp::RdmaWriteWithImm {
                remote_addr: dst,
                rkey: kb.rkey,
                imm: 42,
            },
        )
        .sge(src, 8, ka.lkey)
        .flags(sig()),
    );
    p.settle();
    let mut expect = p.a.mem.read(src, 8);
    expect.extend(p.a.mem.read(src + 2, 3000 - 2));
    assert_eq!(p.b.mem.read(dst, 3008)[..8], expect[..8]);
    assert_eq!(p.b.mem.read(dst + 10, 3000), p.a.mem.read(src, 3000));
    let ids: Vec<_> =
        p.a.wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect();
    assert_eq!(
        ids,
        vec![
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::RdmaWrite)
        ]
    );
    let wb = p.b.wcs[0];
    assert_eq!(
        (wb.wr_id, wb.opcode, wb.byte_len, wb.imm_data),
        (9, WcOpcode::RecvRdmaWithImm, 8, 42)
    );
}

#[test]
fn rdma_read_multi_packet() {
    let mut p = Pair::new(4);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let len = 10_000;
    let (rsrc, kb) = p.b.buffer(len);
    p.b.mem.fill_pattern(rsrc, len, 77);
    let (ldst, ka) = p.a.buffer(len);
    p.a.post_send(
        qa,
        &SendWr::new(5, WrOp::rdma_read(rsrc, kb.rkey))
            .sge(ldst, len as u32, ka.lkey)
            .flags(sig()),
    );
    p.settle();
    assert_eq!(p.a.mem.read(ldst, len), p.b.mem.read(rsrc, len));
    assert_eq!(p.a.wcs[0].opcode, WcOpcode::RdmaRead);
    assert_eq!(p.a.wcs[0].byte_len, len as u32);
    assert_eq!(p.a.wcs[0].status, WcStatus::Success);
}

#[test]
fn atomics_return_the_original_value() {
    let mut p = Pair::new(5);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (target, kb) = p.b.buffer(16);
    p.b.mem.write(target, &100u64.to_le_bytes());
    let (res, ka) = p.a.buffer(16);
    p.a.post_send(
        qa,
        &SendWr::new(
            1,
            WrOp::AtomicFetchAndAdd {
                remote_addr: target,
                rkey: kb.rkey,
                add: 5,
            },
        )
        .sge(res, 8, ka.lkey)
        .flags(sig()),
    );
    p.a.post_send(
        qa,
        &SendWr::new(
            2,
            WrOp::AtomicCmpAndSwp {
                remote_addr: target,
                rkey: kb.rkey,
                compare: 105,
                swap: 7,
            },
        )
        .sge(res + 8, 8, ka.lkey)
        .flags(sig()),
    );
    p.settle();
    assert_eq!(p.a.mem.read(res, 8), 100u64.to_le_bytes());
    assert_eq!(p.a.mem.read(res + 8, 8), 105u64.to_le_bytes());
    assert_eq!(p.b.mem.read(target, 8), 7u64.to_le_bytes());
    let ops: Vec<_> = p.a.wcs.iter().map(|w| (w.opcode, w.status)).collect();
    assert_eq!(
        ops,
        vec![
            (WcOpcode::FetchAdd, WcStatus::Success),
            (WcOpcode::CompSwap, WcStatus::Success)
        ]
    );
}

#[test]
fn zero_length_messages() {
    let mut p = Pair::new(6);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    p.b.post_recv(qb, &RecvWr::new(1));
    p.a.post_send(qa, &SendWr::new(1, WrOp::Send).flags(sig()));
    // Zero-length RDMA: the R_Key is not checked at all.
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(0, Rkey(0xBAD))).flags(sig()),
    );
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_read(0, Rkey(0xBAD))).flags(sig()),
    );
    p.settle();
    let got: Vec<_> =
        p.a.wcs
            .iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::Success, 0),
            (2, WcStatus::Success, 0),
            (3, WcStatus::Success, 0)
        ]
    );
    assert_eq!(p.b.wcs[0].byte_len, 0);
}

#[test]
fn unsignaled_wrs_complete_silently_but_in_order() {
    let mut p = Pair::new(7);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    for i in 0..10 {
        let f = if i % 3 == 0 { sig() } else { SendFlags::NONE };
        p.a.post_send(
            qa,
            &SendWr::new(i, WrOp::rdma_write(dst, kb.rkey))
                .sge(src, 64, ka.lkey)
                .flags(f),
        );
    }
    p.settle();
    let ids: Vec<_> = p.a.wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![0, 3, 6, 9]);
    assert_eq!(p.a.eng.query_qp(qa).unwrap().sq_outstanding, 0);
}
