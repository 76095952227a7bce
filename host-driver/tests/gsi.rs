//! QP1 through the ABI: each NIC's GSI QP (created with `create_gsi_qp`, QPN 1, its
//! doorbells at `reg::GSI_QP_INDEX`) carries a host CM agent's MADs (`roce_core::cm`)
//! as UD SENDs to the peer's QP1; the REQ/REP/RTU exchange connects an RC pair whose
//! numbers and PSNs only the MADs carried, data moves, DREQ/DREP end it. On every NIC
//! model behind the boundary.

mod common;

use common::{models, Model};
use roce_core::cm::{eui64_from_mac, CmAddr, CmConfig, CmEvent};
use roce_core::memory::AccessFlags;
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    ipv4_gid, AddressVector, Instant, QpType, RecvWr, SendFlags, SendWr, UdDest, WcOpcode,
    WcStatus, WrOp, GRH_LEN,
};
use roce_core::wire::cm::{port_space, rdma_cm_service_id, RepRepr, ReqRepr};
use roce_core::wire::mad::MAD_LEN;
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QpEndpoint, QueuePair};

type Cm = roce_core::cm::Cm<8, 2, 8>;

const SLOT: usize = GRH_LEN + MAD_LEN;
const RECVS: u64 = 8;

/// A NIC, its verbs objects and its CM agent on QP1.
struct Host {
    nic: common::Nic,
    ctx: Context,
    cq: CompletionQueue,
    qp1: QueuePair,
    rc: QueuePair,
    mr: MemoryRegion,
    cm: Cm,
    /// MADs sent (their buffers rotate through the region's second half).
    sent: usize,
}

fn host(m: Model, last: u8) -> Host {
    let nic = m.boot(last);
    let ctx = Context::open(nic.model.clone()).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let qp1 = pd.create_gsi_qp(&cq, &cq).build().unwrap();
    assert_eq!(qp1.qpn(), Qpn::new(1));
    // A UD QP: the endpoint is not used, the Q_Key is the GSI's.
    let (gid, mac) = ctx.port_addr();
    let me = QpEndpoint {
        qpn: qp1.qpn(),
        psn: Psn::new(0),
        gid,
        mac,
    };
    let ud = ConnectOptions {
        qkey: Qkey::GSI,
        ..ConnectOptions::default()
    };
    qp1.connect(&me, Psn::new(0), &ud).unwrap();
    let rc = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd.reg_mr(65536, access).unwrap();
    for i in 0..RECVS {
        let wr = RecvWr::new(i).sge(mr.addr() + i * SLOT as u64, SLOT as u32, mr.lkey());
        qp1.post_recv(&wr).unwrap();
    }
    let cm = Cm::new(CmConfig {
        ca_guid: eui64_from_mac(mac),
        first_comm_id: u32::from(last) << 12,
    });
    Host {
        nic,
        ctx,
        cq,
        qp1,
        rc,
        mr,
        cm,
        sent: 0,
    }
}

impl Host {
    fn addr(&self) -> CmAddr {
        CmAddr {
            gid: self.ctx.port_addr().0,
            sgid_index: 0,
        }
    }

    /// Posts what the CM has to send as UD SENDs from QP1 to `peer`'s QP1.
    fn transmit(&mut self, peer_mac: [u8; 6]) {
        let mut buf = [0u8; MAD_LEN];
        while let Some((to, len)) = self.cm.poll_transmit(&mut buf) {
            let off = 32768 + (self.sent % 16) * MAD_LEN;
            self.sent += 1;
            self.mr.write(off, &buf[..len]).unwrap();
            let mut wr = SendWr::new(0, WrOp::Send)
                .sge(self.mr.addr() + off as u64, len as u32, self.mr.lkey())
                .flags(SendFlags::SIGNALED);
            wr.ud = Some(UdDest {
                av: AddressVector {
                    dmac: peer_mac,
                    dgid: to.gid,
                    hop_limit: 64,
                    ..AddressVector::default()
                },
                remote_qpn: Qpn::new(1),
                remote_qkey: Qkey::GSI,
            });
            self.qp1.post_send(&wr).unwrap();
        }
    }

    /// Hands every MAD QP1 received to the CM (sender from the GRH area) and reposts
    /// its buffer; returns the other completions.
    fn receive(&mut self) -> Vec<roce_core::transport::WorkCompletion> {
        let mut other = Vec::new();
        for wc in self.cq.wait(64, 2).unwrap() {
            if wc.qp_num != self.qp1.qpn() || wc.opcode != WcOpcode::Recv {
                if wc.qp_num != self.qp1.qpn() {
                    other.push(wc);
                }
                continue;
            }
            assert_eq!((wc.status, wc.src_qp), (WcStatus::Success, Qpn::new(1)));
            let at = wc.wr_id as usize * SLOT;
            let mut grh = [0u8; GRH_LEN];
            self.mr.read(at, &mut grh).unwrap();
            let mut mad = vec![0u8; wc.byte_len as usize - GRH_LEN];
            self.mr.read(at + GRH_LEN, &mut mad).unwrap();
            let from = CmAddr {
                gid: ipv4_gid([grh[32], grh[33], grh[34], grh[35]]),
                sgid_index: 0,
            };
            assert!(self.cm.handle_mad(Instant::ZERO, from, &mad));
            let wr =
                RecvWr::new(wc.wr_id).sge(self.mr.addr() + at as u64, SLOT as u32, self.mr.lkey());
            self.qp1.post_recv(&wr).unwrap();
        }
        other
    }
}

/// Moves frames and MADs until both NICs and both CMs are quiet; returns completions
/// that were not QP1's.
fn shuttle(a: &mut Host, b: &mut Host) -> Vec<roce_core::transport::WorkCompletion> {
    let mut other = Vec::new();
    for _ in 0..16 {
        let before = a.sent + b.sent;
        let (ma, mb) = (a.ctx.port_addr().1, b.ctx.port_addr().1);
        a.transmit(mb);
        b.transmit(ma);
        common::run(&*a.nic.model, &*b.nic.model);
        other.extend(a.receive());
        other.extend(b.receive());
        if a.sent + b.sent == before {
            break;
        }
    }
    other
}

fn rc_up(h: &Host, remote: Qpn, peer: &Host, sq_psn: u32, rq_psn: u32) {
    let (gid, mac) = peer.ctx.port_addr();
    let ep = QpEndpoint {
        qpn: remote,
        psn: Psn::new(rq_psn),
        gid,
        mac,
    };
    h.rc.connect(&ep, Psn::new(sq_psn), &ConnectOptions::default())
        .unwrap();
}

#[test]
fn the_cm_over_qp1_connects_two_nics() {
    for m in models() {
        cm_over_qp1(m);
    }
}

fn cm_over_qp1(m: Model) {
    let (mut a, mut b) = (host(m, 1), host(m, 2));
    let service = rdma_cm_service_id(port_space::TCP, 7471);
    b.cm.listen(service).unwrap();
    let req = ReqRepr::rc(
        service,
        a.rc.qpn(),
        Psn::new(0x1000),
        a.addr().gid,
        b.addr().gid,
    );
    let to_b = b.addr();
    let ia = a.cm.connect(Instant::ZERO, to_b, req).unwrap();
    shuttle(&mut a, &mut b);
    let Some(CmEvent::ReqReceived { id: ib, from, req }) = b.cm.poll_event() else {
        panic!("{m:?}: B's CM got no REQ");
    };
    assert_eq!((from.gid, req.local_qpn), (a.addr().gid, a.rc.qpn()));
    rc_up(&b, req.local_qpn, &a, 0x2000, req.starting_psn.value());
    let rep = RepRepr {
        local_qpn: b.rc.qpn(),
        starting_psn: Psn::new(0x2000),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        ..RepRepr::default()
    };
    b.cm.accept(Instant::ZERO, ib, rep).unwrap();
    shuttle(&mut a, &mut b);
    let Some(CmEvent::RepReceived { rep, .. }) = a.cm.poll_event() else {
        panic!("{m:?}: A's CM got no REP");
    };
    rc_up(&a, rep.local_qpn, &b, 0x1000, rep.starting_psn.value());
    a.cm.rtu(ia).unwrap();
    shuttle(&mut a, &mut b);
    assert_eq!(b.cm.poll_event(), Some(CmEvent::Established { id: ib }));

    // The RC pair the MADs described moves data.
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    a.mr.write(40_000, &data).unwrap();
    let wr = SendWr::new(5, WrOp::rdma_write(b.mr.addr() + 40_000, b.mr.rkey()))
        .sge(a.mr.addr() + 40_000, 3000, a.mr.lkey())
        .flags(SendFlags::SIGNALED);
    a.rc.post_send(&wr).unwrap();
    let done = shuttle(&mut a, &mut b);
    assert!(
        done.iter()
            .any(|w| w.wr_id == 5 && w.status == WcStatus::Success),
        "{m:?}: {done:?}"
    );
    let mut got = vec![0u8; 3000];
    b.mr.read(40_000, &mut got).unwrap();
    assert_eq!(got, data, "{m:?}");

    a.cm.disconnect(Instant::ZERO, ia).unwrap();
    shuttle(&mut a, &mut b);
    let Some(CmEvent::DreqReceived { id, .. }) = b.cm.poll_event() else {
        panic!("{m:?}: B's CM got no DREQ");
    };
    b.cm.disconnect(Instant::ZERO, id).unwrap();
    shuttle(&mut a, &mut b);
    assert_eq!(a.cm.poll_event(), Some(CmEvent::DrepReceived { id: ia }));
}
