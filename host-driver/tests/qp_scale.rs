//! Many more QPs than the NIC has slots (`docs/scale.md`): with an ICM the firmware's 8
//! slots cache 1,024 QPs a side; every QP moves its bytes, the cache counts its misses
//! and write-backs, and the ABI's rules for the ICM hold.

mod common;

use common::Model;
use roce_abi::CmdStatus;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    QpType, RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_device::NicModel;
use roce_host::{ConnectOptions, Context, Error, QpEndpoint};

const QPS: usize = 1024;
const LEN: usize = 1500;

fn drive(m: Model) {
    let (na, nb) = (m.boot(1), m.boot(2));
    let (a, b) = (
        Context::open(na.model.clone()).unwrap(),
        Context::open(nb.model.clone()).unwrap(),
    );
    let slots = a.query_device().max_qp.get();
    for c in [&a, &b] {
        c.set_icm(QPS as u32).unwrap();
        assert_eq!(c.query_device().max_qp.get(), QPS as u32);
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let (pda, pdb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (cqa, cqb) = (a.create_cq(2 * QPS).unwrap(), b.create_cq(2 * QPS).unwrap());
    let (ma, mb) = (
        pda.reg_mr(QPS * LEN, access).unwrap(),
        pdb.reg_mr(QPS * LEN, access).unwrap(),
    );
    let src: Vec<u8> = (0..QPS * LEN).map(|i| (i * 7 + i / 251) as u8).collect();
    ma.write(0, &src).unwrap();
    let qa: Vec<_> = (0..QPS)
        .map(|_| pda.create_qp(QpType::Rc, &cqa, &cqa).build().unwrap())
        .collect();
    let qb: Vec<_> = (0..QPS)
        .map(|_| pdb.create_qp(QpType::Rc, &cqb, &cqb).build().unwrap())
        .collect();
    // One more than the ICM holds: refused.
    assert!(pda.create_qp(QpType::Rc, &cqa, &cqa).build().is_err());
    // The ICM is set once, before any QP.
    assert!(matches!(
        a.set_icm(16),
        Err(Error::Command {
            status: CmdStatus::Busy,
            ..
        })
    ));
    let ep = |c: &Context, q: &roce_host::QueuePair| {
        let (gid, mac) = c.port_addr();
        QpEndpoint {
            qpn: q.qpn(),
            psn: Psn::new(q.qpn().value() * 3),
            gid,
            mac,
        }
    };
    let o = ConnectOptions::default();
    for (x, y) in qa.iter().zip(&qb) {
        x.connect(&ep(&b, y), ep(&a, x).psn, &o).unwrap();
        y.connect(&ep(&a, x), ep(&b, y).psn, &o).unwrap();
    }
    // Every other QP: a WRITE; the rest: a SEND into a posted receive.
    for (i, (x, y)) in qa.iter().zip(&qb).enumerate() {
        let off = i * LEN;
        let op = if i % 2 == 0 {
            WrOp::rdma_write(mb.addr() + off as u64, mb.rkey())
        } else {
            y.post_recv(&RecvWr::new(i as u64).sge(mb.addr() + off as u64, LEN as u32, mb.lkey()))
                .unwrap();
            WrOp::Send
        };
        x.post_send(
            &SendWr::new(i as u64, op)
                .sge(ma.addr() + off as u64, LEN as u32, ma.lkey())
                .flags(SendFlags::SIGNALED),
        )
        .unwrap();
    }
    run(&*na.model, &*nb.model);
    let mut wcs = vec![WorkCompletion::default(); 4 * QPS];
    let mut ids: Vec<u64> = cqa
        .poll(&mut wcs)
        .unwrap()
        .iter()
        .inspect(|w| assert_eq!(w.status, WcStatus::Success, "{w:?}"))
        .map(|w| w.wr_id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..QPS as u64).collect::<Vec<_>>(), "{m:?}");
    let got = cqb.poll(&mut wcs).unwrap();
    assert_eq!(got.len(), QPS / 2);
    assert!(got.iter().all(|w| w.opcode == WcOpcode::Recv));
    assert_eq!(mb.to_vec(), src, "{m:?}");
    // A stored QP answers a query and can be destroyed.
    assert!(qa[3].query().is_ok());
    // The cache's counters, read through QUERY_COUNTERS as any host would.
    let c = a.query_counters().unwrap().runtime;
    assert!(c.qp_cache_misses >= QPS as u64, "{c:?}");
    assert!(
        c.qp_cache_evictions >= (QPS as u64) - u64::from(slots),
        "{c:?}"
    );
    assert_eq!(
        c.qp_ctx_dma_bytes,
        1024 * (c.qp_cache_misses + c.qp_cache_evictions)
    );
    drop((qa, qb));
}

/// Moves frames one at a time (each NIC answers before the next one arrives, as on a
/// link) and runs the NICs' timers when nothing else happens, until both are idle.
fn run(a: &dyn NicModel, b: &dyn NicModel) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = a.poll() | b.poll();
        for (from, to) in [(a, b), (b, a)] {
            if let Some(n) = from.transmit_frame(&mut buf) {
                to.receive_frame(&buf[..n]);
                busy = true;
            }
        }
        if !busy {
            let Some(t) = [a.poll_timeout(), b.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
            else {
                return;
            };
            a.set_time(t.max(a.now()));
            b.set_time(t.max(b.now()));
        }
    }
}

#[test]
fn a_thousand_qps_through_eight_slots() {
    // The host-compiled runtime, with and without the fast path's model in front
    // (with an ICM its QPs run in firmware). The RTL and SoC models take minutes for
    // 2,048 QPs (device/tests/soc.rs runs 24 QPs through the SoC's 8 slots).
    for m in common::models() {
        if matches!(m, Model::Software | Model::FastPath) {
            drive(m);
        }
    }
}
