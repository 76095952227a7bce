//! The firmware runtime, compiled for the host, behind the ABI: command errors change
//! nothing, doorbells are served in order, rings wrap, a CQ overflow is reported as an
//! event, and a QP in ERR flushes every outstanding WQE in order.

mod common;

use common::{models, Model};
use roce_abi::{self as abi, CmdEntry, CmdOp, CmdStatus};
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    ipv4_gid, QpAttr, QpState, QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WrOp,
};
use roce_host::{ConnectOptions, Context, Error, QpEndpoint};
use zerocopy::little_endian::U32;

fn nic(m: Model, last: u8) -> (common::Nic, Context) {
    let nic = m.boot(last);
    let ctx = Context::open(nic.model.clone()).unwrap();
    (nic, ctx)
}

fn status(e: Error) -> CmdStatus {
    match e {
        Error::Command { status, .. } => status,
        other => panic!("expected a command error, got {other:?}"),
    }
}

fn handle_cmd(ctx: &Context, op: CmdOp, handle: u32) -> Result<CmdEntry, Error> {
    let mut e = CmdEntry::default();
    abi::set_payload(
        &mut e,
        &abi::HandleArg {
            handle: U32::new(handle),
        },
    );
    ctx.raw_command(op as u16, &mut e).map(|()| e)
}

#[test]
fn bad_commands_get_an_error_status_and_change_nothing() {
    for m in models() {
        bad_commands(m);
    }
}

fn bad_commands(m: Model) {
    let (_nic, ctx) = nic(m, 1);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let mut e = CmdEntry::default();
    assert_eq!(
        status(ctx.raw_command(99, &mut e).unwrap_err()),
        CmdStatus::BadOpcode
    );
    assert_eq!(
        status(handle_cmd(&ctx, CmdOp::DeallocPd, 3).unwrap_err()),
        CmdStatus::BadHandle
    );
    assert_eq!(
        status(handle_cmd(&ctx, CmdOp::DeregMr, 0x1234).unwrap_err()),
        CmdStatus::BadHandle
    );
    assert_eq!(
        status(handle_cmd(&ctx, CmdOp::DestroyQp, 0xFFFF).unwrap_err()),
        CmdStatus::BadHandle
    );
    // Objects in use cannot go.
    assert_eq!(
        status(handle_cmd(&ctx, CmdOp::DestroyCq, cq.cqn()).unwrap_err()),
        CmdStatus::Busy
    );
    // Illegal transition: RESET -> RTS. The QP stays in RESET.
    let err = qp.modify(&QpAttr::to_state(QpState::Rts)).unwrap_err();
    assert_eq!(status(err), CmdStatus::IllegalTransition);
    assert_eq!(qp.query().unwrap().qp_state, Some(QpState::Reset));
    // INIT without its required attributes is refused too; with them it works.
    let err = qp.modify(&QpAttr::to_state(QpState::Init)).unwrap_err();
    assert_eq!(status(err), CmdStatus::IllegalTransition);
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(AccessFlags::REMOTE_WRITE);
    qp.modify(&init).unwrap();
    assert_eq!(qp.query().unwrap().qp_state, Some(QpState::Init));
    // Out of resources: more QPs than the device has (max_qp); the ones made still work.
    let mut qps = vec![];
    let err = loop {
        match pd.create_qp(QpType::Uc, &cq, &cq).build() {
            Ok(q) => qps.push(q),
            Err(e) => break e,
        }
    };
    assert_eq!(status(err), CmdStatus::NoResources);
    assert_eq!(qps.len(), ctx.query_device().max_qp.get() as usize - 1);
    assert_eq!(qps[0].query().unwrap().qp_state, Some(QpState::Reset));
    // A ring deeper than the device allows never reaches the device.
    assert!(matches!(
        ctx.create_cq(1 << 20),
        Err(Error::InvalidArgument(_))
    ));
}

/// Two connected RC QPs on two NICs, with frames shuttled by `run`.
struct Link {
    a: common::Nic,
    b: common::Nic,
}

impl Link {
    fn run(&self) {
        common::run(&*self.a.model, &*self.b.model);
    }
}

/// Two NICs, one RC QP each (A's send queue `max_send_wr` deep, both CQs 4 deep, 4 KiB
/// regions), connected.
struct Pair {
    link: Link,
    ca: Context,
    qa: roce_host::QueuePair,
    cqa: roce_host::CompletionQueue,
    ma: roce_host::MemoryRegion,
    mb: roce_host::MemoryRegion,
    _b: (Context, roce_host::QueuePair, roce_host::CompletionQueue),
}

fn pair(m: Model, max_send_wr: usize) -> Pair {
    let ((a, ca), (b, cb)) = (nic(m, 1), nic(m, 2));
    let (pda, pdb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
    let (cqa, cqb) = (ca.create_cq(4).unwrap(), cb.create_cq(4).unwrap());
    let qa = pda
        .create_qp(QpType::Rc, &cqa, &cqa)
        .max_send_wr(max_send_wr)
        .build()
        .unwrap();
    let qb = pdb.create_qp(QpType::Rc, &cqb, &cqb).build().unwrap();
    let all = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let (ma, mb) = (
        pda.reg_mr(4096, all).unwrap(),
        pdb.reg_mr(4096, all).unwrap(),
    );
    let ep = |c: &Context, q: &roce_host::QueuePair| {
        let (gid, mac) = c.port_addr();
        QpEndpoint {
            qpn: q.qpn(),
            psn: Psn::new(1),
            gid,
            mac,
        }
    };
    let o = ConnectOptions::default();
    qa.connect(&ep(&cb, &qb), Psn::new(1), &o).unwrap();
    qb.connect(&ep(&ca, &qa), Psn::new(1), &o).unwrap();
    Pair {
        link: Link { a, b },
        ca,
        qa,
        cqa,
        ma,
        mb,
        _b: (cb, qb, cqb),
    }
}

#[test]
fn rings_wrap_and_doorbells_are_served_in_order() {
    for m in models() {
        rings_wrap(m);
    }
}

fn rings_wrap(m: Model) {
    let Pair {
        link,
        ca,
        qa,
        cqa,
        ma,
        mb,
        ..
    } = &pair(m, 4);

    // 40 batches of 3 WRITEs, each batch behind one doorbell: byte k of batch i goes to
    // offset 3*i+k. The send queue (4) and the CQ (4) wrap ten times over.
    for i in 0..40u32 {
        let wrs: Vec<_> = (0..3u32)
            .map(|k| {
                let off = 3 * i + k;
                ma.write(off as usize, &[(off % 251) as u8 + 1]).unwrap();
                SendWr::new(
                    u64::from(off),
                    WrOp::RdmaWrite {
                        remote_addr: mb.addr() + u64::from(off),
                        rkey: mb.rkey(),
                    },
                )
                .sge(ma.addr() + u64::from(off), 1, ma.lkey())
                .flags(SendFlags::SIGNALED)
            })
            .collect();
        qa.post_send_list(&wrs).unwrap();
        link.run();
        let wcs = cqa.wait(3, 5).unwrap();
        let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        let want: Vec<_> = (0..3)
            .map(|k| (u64::from(3 * i + k), WcStatus::Success))
            .collect();
        assert_eq!(ids, want, "batch {i}");
    }
    let mut got = vec![0u8; 120];
    mb.read(0, &mut got).unwrap();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &v)| v == (i % 251) as u8 + 1));
    // The command queue (16 deep) wraps: 40 more commands, each answered correctly.
    for _ in 0..40 {
        assert_eq!(qa.query().unwrap().qp_state, Some(QpState::Rts));
    }
    assert!(ca.query_counters().unwrap().runtime.commands > 40);
}

#[test]
fn cq_overflow_is_an_error_event_and_loses_nothing() {
    for m in models() {
        cq_overflow(m);
    }
}

fn cq_overflow(m: Model) {
    let Pair {
        link,
        ca,
        qa,
        cqa,
        ma,
        mb,
        ..
    } = &pair(m, 16);
    let wrs: Vec<_> = (0..6u64)
        .map(|i| {
            SendWr::new(
                i,
                WrOp::RdmaWrite {
                    remote_addr: mb.addr(),
                    rkey: mb.rkey(),
                },
            )
            .sge(ma.addr(), 8, ma.lkey())
            .flags(SendFlags::SIGNALED)
        })
        .collect();
    qa.post_send_list(&wrs).unwrap();
    link.run();
    // Six completions for a ring of four, none consumed: the CQ overflowed.
    let ev = ca.take_events();
    assert_eq!(ev.cq_error, Some(cqa.cqn()));
    assert!(ca.query_counters().unwrap().runtime.cq_overflows >= 1);
    // The host drains what fits, then the NIC delivers the rest: nothing was lost.
    let mut got = cqa.wait(4, 2).unwrap();
    link.run();
    got.extend(cqa.wait(2, 5).unwrap());
    link.run();
    let ids: Vec<_> = got.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn qp_in_error_flushes_every_wqe_in_order() {
    for m in models() {
        qp_in_error_flushes(m);
    }
}

fn qp_in_error_flushes(m: Model) {
    let (_a, ctx) = nic(m, 1);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(32).unwrap();
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
    // Connected to a peer that does not exist: nothing will ever be acknowledged.
    let peer = QpEndpoint {
        qpn: roce_core::num::Qpn::new(0x99),
        psn: Psn::new(0),
        gid: ipv4_gid([10, 0, 0, 9]),
        mac: [2, 0, 0, 0, 0, 9],
    };
    qp.connect(&peer, Psn::new(0), &ConnectOptions::default())
        .unwrap();
    for i in 0..3 {
        qp.post_recv(&RecvWr::new(100 + i).sge(mr.addr(), 64, mr.lkey()))
            .unwrap();
    }
    for i in 0..4 {
        // Unsignaled WRs still complete when flushed.
        let flags = if i % 2 == 0 {
            SendFlags::SIGNALED
        } else {
            SendFlags::NONE
        };
        qp.post_send(
            &SendWr::new(i, WrOp::Send)
                .sge(mr.addr(), 16, mr.lkey())
                .flags(flags),
        )
        .unwrap();
    }
    qp.modify(&QpAttr::to_state(QpState::Err)).unwrap();
    let wcs = cq.wait(7, 10).unwrap();
    let sends: Vec<_> = wcs
        .iter()
        .filter(|w| (w.opcode as u8) < 128)
        .map(|w| (w.wr_id, w.status))
        .collect();
    let recvs: Vec<_> = wcs
        .iter()
        .filter(|w| w.opcode == WcOpcode::Recv)
        .map(|w| (w.wr_id, w.status))
        .collect();
    let flush = WcStatus::WrFlushErr;
    assert_eq!(sends, [(0, flush), (1, flush), (2, flush), (3, flush)]);
    assert_eq!(recvs, [(100, flush), (101, flush), (102, flush)]);
    assert_eq!(qp.send_outstanding(), 0);
}

#[test]
fn selective_repeat_is_set_through_the_abi_and_queried_back() {
    for m in models() {
        selective_repeat_attr(m);
    }
}

fn selective_repeat_attr(m: Model) {
    use roce_core::transport::{AckTimeout, SrAttr};
    let ((_a, ca), (_b, cb)) = (nic(m, 1), nic(m, 2));
    let pd = ca.alloc_pd().unwrap();
    let cq = ca.create_cq(4).unwrap();
    let (gid, mac) = cb.port_addr();
    let peer = QpEndpoint {
        qpn: roce_core::num::Qpn::new(16),
        psn: Psn::new(1),
        gid,
        mac,
    };
    let sr = SrAttr {
        enabled: true,
        max_inflight: 64,
        rto_low: AckTimeout::new(3).unwrap(),
    };
    for want in [Some(sr), None] {
        let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
        let o = ConnectOptions {
            selective_repeat: want,
            ..ConnectOptions::default()
        };
        qp.connect(&peer, Psn::new(1), &o).unwrap();
        assert_eq!(qp.query().unwrap().selective_repeat, want);
    }
}

/// The `abi` fuzz target's first find (issue 17): a send doorbell written five entries
/// *behind* the NIC's consumer index claims 2^32 - 5 new WQEs, and the runtime read and
/// completed them one by one, so one `poll` ran for minutes. Now a producer index more
/// than the ring's depth ahead fails that QP alone, with `QP_FATAL`, at once.
#[test]
fn a_doorbell_beyond_the_ring_fails_only_its_qp() {
    for m in models() {
        doorbell_beyond_the_ring(m);
    }
}

/// The `abi` fuzz target's find with SRQs (issue 17): a receive doorbell of a QP on an
/// SRQ made the NIC read WQEs from the QP's own receive ring, which the ABI says is
/// unused (a driver need not allocate it: the NIC then read whatever host memory the
/// address names). Now the doorbell is ignored and counted; no WQE is read from that
/// ring and the QP and its SRQ are untouched.
#[test]
fn a_receive_doorbell_of_a_qp_on_an_srq_reads_nothing() {
    for m in models() {
        receive_doorbell_on_srq(m);
    }
}

fn receive_doorbell_on_srq(m: Model) {
    use roce_abi::reg;
    let (nic, ctx) = nic(m, 1);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let srq = pd.create_srq(8, 0).unwrap();
    let qp = pd
        .create_qp(QpType::Ud, &cq, &cq)
        .srq(&srq)
        .build()
        .unwrap();
    let before = ctx.query_counters().unwrap().runtime;
    let index = qp.qpn().value() - abi::QPN_BASE;
    nic.model.write_reg(reg::rq_db(index), 3);
    nic.model.progress();
    let (b, c) = (before, ctx.query_counters().unwrap().runtime);
    assert_eq!(c.bad_wqes, b.bad_wqes, "WQEs read from the unused ring");
    assert_eq!(c.recv_wqes, b.recv_wqes);
    assert_eq!(c.bad_doorbells, b.bad_doorbells + 1);
    assert_eq!(ctx.take_events().qp_fatal, None);
    assert_eq!(qp.query().unwrap().qp_state, Some(QpState::Reset));
}

fn doorbell_beyond_the_ring(m: Model) {
    use roce_abi::reg;
    let (nic, ctx) = nic(m, 1);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(8).unwrap();
    let bad = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let good = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let init = {
        let mut a = QpAttr::to_state(QpState::Init);
        a.pkey_index = Some(0);
        a.port_num = Some(1);
        a.qp_access_flags = Some(AccessFlags::NONE);
        a
    };
    bad.modify(&init).unwrap();
    good.modify(&init).unwrap();
    let index = bad.qpn().value() - abi::QPN_BASE;
    for db in [reg::sq_db(index), reg::rq_db(index)] {
        nic.model.write_reg(db, 0u32.wrapping_sub(5));
        nic.model.progress();
        let ev = ctx.take_events();
        assert_eq!(ev.qp_fatal, Some(bad.qpn()), "doorbell {db:#x}");
        assert_eq!(bad.query().unwrap().qp_state, Some(QpState::Err));
    }
    assert_eq!(ctx.query_counters().unwrap().runtime.bad_doorbells, 2);
    assert_eq!(good.query().unwrap().qp_state, Some(QpState::Init));
    // The objects go while their context's command queue still works.
    drop((bad, good, cq, pd));
    // The same for the command queue: the bogus range is skipped and counted.
    let m = &nic.model;
    m.write_reg(reg::CMDQ_PI, m.read_reg(reg::CMDQ_CI).wrapping_sub(5));
    m.progress();
    // This context's command queue is out of step now; a fresh one reads the counters.
    let fresh = Context::open(m.clone()).unwrap();
    assert_eq!(fresh.query_counters().unwrap().runtime.bad_doorbells, 3);
}
