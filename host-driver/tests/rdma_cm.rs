//! The rdma_cm-shaped API between two NICs: listen, connect with private data, the
//! connect request and accept, ESTABLISHED on both sides, traffic on the QPs it set up
//! (no out-of-band exchange of QPNs or PSNs), then disconnect; and a connect to a port
//! nobody listens on is rejected. On every NIC model behind the boundary.

mod common;

use common::{models, Model};
use roce_core::memory::AccessFlags;
use roce_core::transport::{QpState, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};
use roce_host::rdma_cm::{CmAgent, RdmaCmEvent};
use roce_host::{CompletionQueue, Context, MemoryRegion, QueuePair};

struct Host {
    nic: common::Nic,
    ctx: Context,
    cm: CmAgent,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
}

fn host(m: Model, last: u8) -> Host {
    let nic = m.boot(last);
    let ctx = Context::open(nic.model.clone()).unwrap();
    let cm = CmAgent::new(&ctx).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let mr = pd
        .reg_mr(65536, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
        .unwrap();
    Host {
        nic,
        ctx,
        cm,
        cq,
        qp,
        mr,
    }
}

/// Each side learns the other's MAC, as ARP would tell it.
fn neighbours(a: &mut Host, b: &mut Host) {
    let (ga, ma) = a.ctx.port_addr();
    let (gb, mb) = b.ctx.port_addr();
    a.cm.add_neighbour(gb, mb);
    b.cm.add_neighbour(ga, ma);
}

/// Runs both NICs and both agents until nothing moves.
fn pump(a: &mut Host, b: &mut Host) {
    for _ in 0..8 {
        common::run(&*a.nic.model, &*b.nic.model);
        a.cm.progress().unwrap();
        b.cm.progress().unwrap();
    }
}

#[test]
fn connect_accept_traffic_disconnect() {
    for m in models() {
        rdma_cm(m);
    }
}

fn rdma_cm(m: Model) {
    let (mut a, mut b) = (host(m, 1), host(m, 2));
    neighbours(&mut a, &mut b);
    b.cm.listen(7471).unwrap();
    let gb = b.ctx.port_addr().0;
    let ia = a.cm.connect(&a.qp, gb, 7471, b"hello, server").unwrap();
    pump(&mut a, &mut b);
    let Some(RdmaCmEvent::ConnectRequest {
        id: ib,
        port,
        private_data,
    }) = b.cm.poll_event()
    else {
        panic!("{m:?}: no connect request at B");
    };
    assert_eq!(port, 7471);
    assert_eq!(&private_data[..13], b"hello, server");
    b.cm.accept(ib, &b.qp).unwrap();
    pump(&mut a, &mut b);
    assert_eq!(a.cm.poll_event(), Some(RdmaCmEvent::Established { id: ia }));
    assert_eq!(b.cm.poll_event(), Some(RdmaCmEvent::Established { id: ib }));
    assert_eq!((a.qp.state(), b.qp.state()), (QpState::Rts, QpState::Rts));

    // A SEND and a WRITE over the QPs the CM connected.
    b.mr.write(0, &[0; 8]).unwrap();
    b.qp.post_recv(&RecvWr::new(1).sge(b.mr.addr(), 4096, b.mr.lkey()))
        .unwrap();
    let msg: Vec<u8> = (0..2000u32).map(|i| (i * 13) as u8).collect();
    a.mr.write(8192, &msg).unwrap();
    let send = SendWr::new(2, WrOp::Send)
        .sge(a.mr.addr() + 8192, 2000, a.mr.lkey())
        .flags(SendFlags::SIGNALED);
    let write = SendWr::new(3, WrOp::rdma_write(b.mr.addr() + 16384, b.mr.rkey()))
        .sge(a.mr.addr() + 8192, 2000, a.mr.lkey())
        .flags(SendFlags::SIGNALED);
    a.qp.post_send(&send).unwrap();
    a.qp.post_send(&write).unwrap();
    pump(&mut a, &mut b);
    let done = a.cq.wait(2, 10).unwrap();
    assert!(
        done.iter().all(|w| w.status == WcStatus::Success) && done.len() == 2,
        "{m:?}: {done:?}"
    );
    let rx = b.cq.wait(1, 10).unwrap();
    assert_eq!((rx[0].wr_id, rx[0].byte_len), (1, 2000));
    for off in [0, 16384] {
        let mut got = vec![0u8; 2000];
        b.mr.read(off, &mut got).unwrap();
        assert_eq!(got, msg, "{m:?} at {off}");
    }

    a.cm.disconnect(ia).unwrap();
    pump(&mut a, &mut b);
    assert_eq!(
        b.cm.poll_event(),
        Some(RdmaCmEvent::Disconnected { id: ib })
    );
    assert_eq!(
        a.cm.poll_event(),
        Some(RdmaCmEvent::Disconnected { id: ia })
    );
    assert_eq!((a.qp.state(), b.qp.state()), (QpState::Err, QpState::Err));
    // Either end may call rdma_disconnect again as its run ends, the one that asked
    // (Timewait after the DREP) and the one that was asked (Timewait after its DREP):
    // Linux returns 0 then (interop: perftest -R's server closed first and our client's
    // disconnect failed). An unknown connection is still an error.
    a.cm.disconnect(ia).unwrap();
    b.cm.disconnect(ib).unwrap();
    pump(&mut a, &mut b);
    assert_eq!((a.cm.poll_event(), b.cm.poll_event()), (None, None));
    assert!(a.cm.disconnect(roce_core::cm::ConnId(999)).is_err());

    // Nobody listens on 7472: the REQ is rejected (IBTA reason 8, invalid service ID).
    let qp2 = {
        let pd = a.ctx.alloc_pd().unwrap();
        pd.create_qp(QpType::Rc, &a.cq, &a.cq).build().unwrap()
    };
    let id = a.cm.connect(&qp2, gb, 7472, &[]).unwrap();
    pump(&mut a, &mut b);
    assert_eq!(
        a.cm.poll_event(),
        Some(RdmaCmEvent::Rejected { id, reason: 8 })
    );
}
