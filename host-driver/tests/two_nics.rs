//! Two in-process NICs wired back to back, driven through the verbs API only: every
//! operation moves the right bytes and completes with the right status.

mod common;

use common::{models, Model};
use roce_core::memory::AccessFlags;
use roce_core::num::{Lkey, Psn};
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WrOp};
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QpEndpoint, QueuePair};

struct Side {
    nic: common::Nic,
    ctx: Context,
}

fn side(m: Model, last: u8) -> Side {
    let nic = m.boot(last);
    let ctx = Context::open(nic.model.clone()).unwrap();
    Side { nic, ctx }
}

/// What `q`'s peer needs to connect to it, starting at `psn`.
fn endpoint(s: &Side, q: &QueuePair, psn: u32) -> QpEndpoint {
    let (gid, mac) = s.ctx.port_addr();
    QpEndpoint {
        qpn: q.qpn(),
        psn: Psn::new(psn),
        gid,
        mac,
    }
}

/// Moves frames between the two ports until both NICs are idle.
fn run(a: &Side, b: &Side) {
    common::run(&*a.nic.model, &*b.nic.model);
}

struct Pair {
    a: Side,
    b: Side,
    qa: QueuePair,
    qb: QueuePair,
    cqa: CompletionQueue,
    cqb: CompletionQueue,
    ma: MemoryRegion,
    mb: MemoryRegion,
}

fn connected(m: Model, qp_type: QpType) -> Pair {
    connected_inline(m, qp_type, 0)
}

/// Two connected QPs whose senders may send `max_inline` bytes inline.
fn connected_inline(m: Model, qp_type: QpType, max_inline: u32) -> Pair {
    let (a, b) = (side(m, 1), side(m, 2));
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let (pda, pdb) = (a.ctx.alloc_pd().unwrap(), b.ctx.alloc_pd().unwrap());
    let (cqa, cqb) = (a.ctx.create_cq(64).unwrap(), b.ctx.create_cq(64).unwrap());
    let qa = pda
        .create_qp(qp_type, &cqa, &cqa)
        .max_inline_data(max_inline)
        .build()
        .unwrap();
    let qb = pdb
        .create_qp(qp_type, &cqb, &cqb)
        .max_inline_data(max_inline)
        .build()
        .unwrap();
    let ma = pda.reg_mr(65536, access).unwrap();
    let mb = pdb.reg_mr(65536, access).unwrap();
    let o = ConnectOptions::default();
    qa.connect(&endpoint(&b, &qb, 0xFF_FFF0), Psn::new(100), &o)
        .unwrap();
    qb.connect(&endpoint(&a, &qa, 100), Psn::new(0xFF_FFF0), &o)
        .unwrap();
    Pair {
        a,
        b,
        qa,
        qb,
        cqa,
        cqb,
        ma,
        mb,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn rc_write_moves_bytes_and_completes() {
    for m in models() {
        rc_write(m);
    }
}

fn rc_write(m: Model) {
    let p = connected(m, QpType::Rc);
    let data = pattern(10_000, 7);
    p.ma.write(0, &data).unwrap();
    let wr = SendWr::new(
        42,
        WrOp::RdmaWrite {
            remote_addr: p.mb.addr() + 100,
            rkey: p.mb.rkey(),
        },
    )
    .sge(p.ma.addr(), data.len() as u32, p.ma.lkey())
    .flags(SendFlags::SIGNALED);
    p.qa.post_send(&wr).unwrap();
    run(&p.a, &p.b);
    let wc = p.cqa.wait(1, 10).unwrap();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (42, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    let mut got = vec![0; data.len()];
    p.mb.read(100, &mut got).unwrap();
    assert_eq!(got, data);
    assert_eq!(p.qa.send_outstanding(), 0);
    if m == Model::FastPath {
        // The fast path did the work: A's fetched the WQE from the ring itself
        // (`docs/fastpath.md` §3.8: no descriptor from the firmware), its segmenter sent
        // the 10 WRITE packets (path MTU 1024) and it took B's one ACK; B placed them
        // and ACKed.
        let (a, b) = (
            p.a.ctx.query_counters().unwrap().runtime,
            p.b.ctx.query_counters().unwrap().runtime,
        );
        assert_eq!(
            (a.send_wqes, a.fp_descriptors, a.fastpath.tx_frames),
            (1, 0, 10)
        );
        assert_eq!((b.fastpath.rx_handled, b.fastpath.rx_exceptions), (10, 0));
        assert_eq!((b.fastpath.tx_frames, a.fastpath.rx_handled), (1, 1));
    }
}

#[test]
fn rc_send_read_and_atomics() {
    for m in models() {
        rc_send_read_atomics(m);
    }
}

fn rc_send_read_atomics(m: Model) {
    let p = connected(m, QpType::Rc);
    // SEND with immediate into a posted receive (across PSN wrap: sq_psn 0xFFFFF0).
    let msg = pattern(3000, 1);
    p.mb.write(0, &msg).unwrap();
    p.qa.post_recv(&RecvWr::new(7).sge(p.ma.addr() + 8192, 4096, p.ma.lkey()))
        .unwrap();
    let send = SendWr::new(8, WrOp::SendWithImm { imm: 0xDEAD_BEEF })
        .sge(p.mb.addr(), msg.len() as u32, p.mb.lkey())
        .flags(SendFlags::SIGNALED);
    p.qb.post_send(&send).unwrap();
    run(&p.a, &p.b);
    let rx = p.cqa.wait(1, 10).unwrap();
    assert_eq!(
        (
            rx[0].wr_id,
            rx[0].status,
            rx[0].opcode,
            rx[0].byte_len,
            rx[0].imm_data
        ),
        (7, WcStatus::Success, WcOpcode::Recv, 3000, 0xDEAD_BEEF)
    );
    let mut got = vec![0; msg.len()];
    p.ma.read(8192, &mut got).unwrap();
    assert_eq!(got, msg);
    assert_eq!(p.cqb.wait(1, 10).unwrap()[0].status, WcStatus::Success);

    // READ 5000 bytes of B's region into A's.
    let remote = pattern(5000, 9);
    p.mb.write(20_000, &remote).unwrap();
    let read = SendWr::new(
        9,
        WrOp::RdmaRead {
            remote_addr: p.mb.addr() + 20_000,
            rkey: p.mb.rkey(),
        },
    )
    .sge(p.ma.addr() + 30_000, 5000, p.ma.lkey())
    .flags(SendFlags::SIGNALED);
    p.qa.post_send(&read).unwrap();
    run(&p.a, &p.b);
    let wc = p.cqa.wait(1, 10).unwrap();
    assert_eq!(
        (wc[0].status, wc[0].opcode, wc[0].byte_len),
        (WcStatus::Success, WcOpcode::RdmaRead, 5000)
    );
    let mut got = vec![0; 5000];
    p.ma.read(30_000, &mut got).unwrap();
    assert_eq!(got, remote);

    // FETCH_ADD then CMP_SWAP on an 8-byte word of B.
    p.mb.write(40_000, &100u64.to_ne_bytes()).unwrap();
    let fa = SendWr::new(
        10,
        WrOp::AtomicFetchAndAdd {
            remote_addr: p.mb.addr() + 40_000,
            rkey: p.mb.rkey(),
            add: 5,
        },
    )
    .sge(p.ma.addr() + 50_000, 8, p.ma.lkey())
    .flags(SendFlags::SIGNALED);
    let cs = SendWr::new(
        11,
        WrOp::AtomicCmpAndSwp {
            remote_addr: p.mb.addr() + 40_000,
            rkey: p.mb.rkey(),
            compare: 105,
            swap: 7,
        },
    )
    .sge(p.ma.addr() + 50_008, 8, p.ma.lkey())
    .flags(SendFlags::SIGNALED);
    p.qa.post_send(&fa).unwrap();
    p.qa.post_send(&cs).unwrap();
    run(&p.a, &p.b);
    let wc = p.cqa.wait(2, 10).unwrap();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(10, WcStatus::Success), (11, WcStatus::Success)]
    );
    let mut word = [0u8; 8];
    p.mb.read(40_000, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 7);
    p.ma.read(50_000, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 100);
    p.ma.read(50_008, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), 105);
}

#[test]
fn inline_sends_copy_at_post_time() {
    for m in models() {
        inline_sends(m);
    }
}

fn inline_sends(m: Model) {
    let p = connected_inline(m, QpType::Rc, 40);
    // Any request up to the WQE's room gets all of it, as rxe rounds up.
    assert_eq!(p.qa.max_inline_data(), roce_abi::MAX_INLINE_DATA);
    assert_eq!(roce_abi::MAX_INLINE_DATA, 64);

    // A SEND from two pieces, the second with a key that names nothing: inline data is
    // copied by the driver and no L_Key is checked (libibverbs semantics).
    let msg = pattern(50, 3);
    p.ma.write(0, &msg[..30]).unwrap();
    p.ma.write(1000, &msg[30..]).unwrap();
    p.qb.post_recv(&RecvWr::new(1).sge(p.mb.addr(), 256, p.mb.lkey()))
        .unwrap();
    let send = SendWr::new(2, WrOp::SendWithImm { imm: 7 })
        .sge(p.ma.addr(), 30, p.ma.lkey())
        .sge(p.ma.addr() + 1000, 20, Lkey(0xDEAD_0001))
        .flags(SendFlags::SIGNALED | SendFlags::INLINE);
    p.qa.post_send(&send).unwrap();
    // The source may be reused as soon as post_send returns.
    p.ma.write(0, &[0xEE; 30]).unwrap();
    p.ma.write(1000, &[0xEE; 20]).unwrap();

    // An inline WRITE of exactly max_inline_data bytes.
    let block = pattern(64, 9);
    p.ma.write(2000, &block).unwrap();
    let write = SendWr::new(
        3,
        WrOp::RdmaWrite {
            remote_addr: p.mb.addr() + 4096,
            rkey: p.mb.rkey(),
        },
    )
    .sge(p.ma.addr() + 2000, 64, p.ma.lkey())
    .flags(SendFlags::SIGNALED | SendFlags::INLINE);
    p.qa.post_send(&write).unwrap();
    p.ma.write(2000, &[0; 64]).unwrap();
    run(&p.a, &p.b);

    let wc = p.cqa.wait(2, 10).unwrap();
    assert_eq!(
        wc.iter()
            .map(|w| (w.wr_id, w.status, w.opcode))
            .collect::<Vec<_>>(),
        [
            (2, WcStatus::Success, WcOpcode::Send),
            (3, WcStatus::Success, WcOpcode::RdmaWrite)
        ]
    );
    let rx = p.cqb.wait(1, 10).unwrap();
    assert_eq!(
        (rx[0].wr_id, rx[0].status, rx[0].byte_len, rx[0].imm_data),
        (1, WcStatus::Success, 50, 7)
    );
    let mut got = vec![0; 50];
    p.mb.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
    let mut got = vec![0; 64];
    p.mb.read(4096, &mut got).unwrap();
    assert_eq!(got, block);
    // A QP that may send inline stays with the firmware (its payload is in the send
    // queue, which the fast path's segmenter cannot read).
    let c = p.a.ctx.query_counters().unwrap().runtime;
    assert_eq!(c.fp_descriptors, 0, "{m:?}");

    // Refused at post time, as rxe refuses them (EINVAL): longer than the QP allows,
    // on a READ, and on a QP created without inline room.
    let long = SendWr::new(4, WrOp::Send)
        .sge(p.ma.addr(), 65, p.ma.lkey())
        .flags(SendFlags::INLINE);
    assert!(p.qa.post_send(&long).is_err());
    let read = SendWr::new(5, WrOp::rdma_read(p.mb.addr(), p.mb.rkey()))
        .sge(p.ma.addr(), 8, p.ma.lkey())
        .flags(SendFlags::INLINE);
    assert!(p.qa.post_send(&read).is_err());
    let plain = connected(m, QpType::Rc);
    assert_eq!(plain.qa.max_inline_data(), 0);
    let small = SendWr::new(6, WrOp::Send)
        .sge(plain.ma.addr(), 4, plain.ma.lkey())
        .flags(SendFlags::INLINE);
    assert!(plain.qa.post_send(&small).is_err());
    // More than the WQE holds cannot be asked for.
    let pd = p.a.ctx.alloc_pd().unwrap();
    assert!(pd
        .create_qp(QpType::Rc, &p.cqa, &p.cqa)
        .max_inline_data(65)
        .build()
        .is_err());
}

#[test]
fn an_srq_feeds_two_qps_and_reports_its_limit() {
    for m in models() {
        srq_shared(m);
    }
}

fn srq_shared(m: Model) {
    let (a, b) = (side(m, 1), side(m, 2));
    let access = AccessFlags::LOCAL_WRITE;
    let (pda, pdb) = (a.ctx.alloc_pd().unwrap(), b.ctx.alloc_pd().unwrap());
    let (cqa, cqb) = (a.ctx.create_cq(64).unwrap(), b.ctx.create_cq(64).unwrap());
    let srq = pdb.create_srq(8, 3).unwrap();
    assert_eq!(
        srq.query().unwrap(),
        roce_host::SrqAttr {
            max_wr: 8,
            srq_limit: 3
        }
    );
    let o = ConnectOptions::default();
    let mut qas = Vec::new();
    let mut qbs = Vec::new();
    for _ in 0..2 {
        let qa = pda.create_qp(QpType::Rc, &cqa, &cqa).build().unwrap();
        let qb = pdb
            .create_qp(QpType::Rc, &cqb, &cqb)
            .srq(&srq)
            .build()
            .unwrap();
        qa.connect(&endpoint(&b, &qb, 500), Psn::new(100), &o)
            .unwrap();
        qb.connect(&endpoint(&a, &qa, 100), Psn::new(500), &o)
            .unwrap();
        qas.push(qa);
        qbs.push(qb);
    }
    let ma = pda.reg_mr(65536, access).unwrap();
    let mb = pdb.reg_mr(65536, access).unwrap();
    // Only the SRQ takes receives.
    assert!(qbs[0].post_recv(&RecvWr::new(0)).is_err());
    for i in 0..5u64 {
        let off = i * 4096;
        srq.post_recv(&RecvWr::new(100 + i).sge(mb.addr() + off, 4096, mb.lkey()))
            .unwrap();
    }
    run(&a, &b);

    // Three SENDs over both QPs take the SRQ's three oldest WQEs, in post order; the
    // third leaves 2 < 3 and fires the limit event once.
    let msgs = [pattern(3000, 1), pattern(200, 2), pattern(1500, 3)];
    for (i, (msg, qp)) in msgs.iter().zip([0, 1, 0]).enumerate() {
        let off = 20_000 + i * 4096;
        ma.write(off, msg).unwrap();
        let wr = SendWr::new(i as u64, WrOp::Send)
            .sge(ma.addr() + off as u64, msg.len() as u32, ma.lkey())
            .flags(SendFlags::SIGNALED);
        qas[qp].post_send(&wr).unwrap();
        run(&a, &b);
    }
    assert_eq!(cqa.wait(3, 10).unwrap().len(), 3);
    let rx = cqb.wait(3, 10).unwrap();
    for (i, (w, qp)) in rx.iter().zip([0, 1, 0]).enumerate() {
        assert_eq!(
            (w.wr_id, w.status, w.qp_num, w.byte_len as usize),
            (
                100 + i as u64,
                WcStatus::Success,
                qbs[qp].qpn(),
                msgs[i].len()
            ),
            "{m:?}"
        );
        let mut got = vec![0; msgs[i].len()];
        mb.read(i * 4096, &mut got).unwrap();
        assert_eq!(got, msgs[i]);
    }
    let events = b.ctx.take_events();
    assert_eq!(events.srq_limit, Some(srq.srqn()), "{m:?}");
    assert_eq!(srq.query().unwrap().srq_limit, 0, "disarmed");
    assert_eq!(srq.outstanding(), 2);
    // Armed again at 2: the next take leaves 1 and fires again.
    srq.arm_limit(2).unwrap();
    assert!(srq.arm_limit(9).is_err(), "above max_wr");
    ma.write(0, b"ping").unwrap();
    qas[1]
        .post_send(&SendWr::new(9, WrOp::Send).sge(ma.addr(), 4, ma.lkey()))
        .unwrap();
    run(&a, &b);
    assert_eq!(cqb.wait(1, 10).unwrap()[0].wr_id, 103);
    assert_eq!(b.ctx.take_events().srq_limit, Some(srq.srqn()));
    // SRQ QPs stay with the firmware: B's fast path handled none of their packets.
    let c = b.ctx.query_counters().unwrap().runtime;
    assert_eq!(c.fastpath.rx_handled, 0, "{m:?}");
}
