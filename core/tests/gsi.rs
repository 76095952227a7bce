//! QP1 (the GSI QP) carrying the communication manager between two engines: each side's
//! `Cm` hands out MADs, which go as UD SENDs from QP1 to the peer's QP1 with the GSI
//! Q_Key, arrive in QP1's receive buffers behind the 40-byte GRH area, and go back into
//! the peer's `Cm`. The REQ/REP/RTU exchange sets up an RC connection that then moves
//! data, and DREQ/DREP take it down, as `rdma_connect`/`rdma_disconnect` over rxe do.

mod common;

use common::*;
use roce_core::cm::{eui64_from_mac, CmAddr, CmConfig, CmEvent, CmState};
use roce_core::memory::MrKeys;
use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::transport::{
    ipv4_gid, AddressVector, Error, Instant, QpInitAttr, QpType, RecvWr, SendFlags, SendWr, UdDest,
    WcOpcode, WcStatus, WrOp, GRH_LEN,
};
use roce_core::wire::cm::{port_space, rdma_cm_service_id, CmMsg, RepRepr, ReqRepr};
use roce_core::wire::mad::MAD_LEN;

type Cm = roce_core::cm::Cm<8, 2, 8>;

const SERVICE: u64 = rdma_cm_service_id(port_space::TCP, 7471);
const RECVS: u64 = 8;
const SLOT: usize = GRH_LEN + MAD_LEN;

/// One side's CM agent: the CM, its GSI QP, receive and send buffers.
struct Agent {
    cm: Cm,
    qp1: Qpn,
    rx: (u64, MrKeys),
    tx: (u64, MrKeys),
    /// Completions of `Node::wcs` already looked at.
    seen: usize,
    sent: usize,
}

fn gsi_init(n: &Node) -> QpInitAttr {
    QpInitAttr {
        qp_type: QpType::Ud,
        pd: n.pd,
        send_cq: n.cq.0,
        recv_cq: n.cq.0,
        sq_sig_all: false,
        max_inline_data: 0,
        srq: None,
    }
}

fn agent(n: &mut Node, first_comm_id: u32) -> Agent {
    let qp1 = n.eng.create_gsi_qp(&gsi_init(n)).unwrap();
    assert_eq!(qp1, Qpn::GSI);
    bring_up_ud(n, qp1, Qkey::GSI);
    let rx = n.buffer(SLOT * RECVS as usize);
    for i in 0..RECVS {
        post_slot(n, qp1, rx, i);
    }
    let tx = n.buffer(MAD_LEN * 64);
    Agent {
        cm: Cm::new(CmConfig {
            ca_guid: eui64_from_mac(n.mac),
            first_comm_id,
        }),
        qp1,
        rx,
        tx,
        seen: 0,
        sent: 0,
    }
}

fn post_slot(n: &mut Node, qp1: Qpn, (addr, k): (u64, MrKeys), i: u64) {
    let wr = RecvWr::new(i).sge(addr + i * SLOT as u64, SLOT as u32, k.lkey);
    n.post_recv(qp1, &wr);
}

/// Sends what the CM has for the wire: each MAD a UD SEND from QP1 to the peer's QP1.
fn transmit(n: &mut Node, ag: &mut Agent, peer_mac: [u8; 6]) {
    let mut buf = [0u8; MAD_LEN];
    while let Some((to, len)) = ag.cm.poll_transmit(&mut buf) {
        let at = ag.tx.0 + (ag.sent % 64 * MAD_LEN) as u64;
        ag.sent += 1;
        n.mem.write(at, &buf[..len]);
        let mut wr = SendWr::new(0, WrOp::Send).sge(at, len as u32, ag.tx.1.lkey);
        wr.ud = Some(UdDest {
            av: AddressVector {
                dmac: peer_mac,
                dgid: to.gid,
                sgid_index: to.sgid_index,
                hop_limit: 64,
                ..AddressVector::default()
            },
            remote_qpn: Qpn::GSI,
            remote_qkey: Qkey::GSI,
        });
        n.post_send(ag.qp1, &wr);
    }
}

/// Hands every MAD QP1 received to the CM (the sender's GID from the GRH area: IPv4's
/// source address at offset 20 + 12), and posts the buffer again.
fn receive(n: &mut Node, ag: &mut Agent, now: Instant) {
    while ag.seen < n.wcs.len() {
        let wc = n.wcs[ag.seen];
        ag.seen += 1;
        if wc.qp_num != ag.qp1 || wc.opcode != WcOpcode::Recv {
            continue;
        }
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.src_qp, Qpn::GSI, "MADs come from the peer's QP1");
        let slot = ag.rx.0 + wc.wr_id * SLOT as u64;
        let grh = n.mem.read(slot, GRH_LEN);
        let src = ipv4_gid([grh[32], grh[33], grh[34], grh[35]]);
        let mad = n
            .mem
            .read(slot + GRH_LEN as u64, wc.byte_len as usize - GRH_LEN);
        assert!(ag.cm.handle_mad(
            now,
            CmAddr {
                gid: src,
                sgid_index: 0
            },
            &mad
        ));
        post_slot(n, ag.qp1, ag.rx, wc.wr_id);
    }
}

/// Moves MADs until neither CM has one to send.
fn shuttle(p: &mut Pair, a: &mut Agent, b: &mut Agent) {
    loop {
        let before = a.sent + b.sent;
        transmit(&mut p.a, a, p.b.mac);
        transmit(&mut p.b, b, p.a.mac);
        p.settle();
        let now = Instant::from_nanos(p.now);
        receive(&mut p.a, a, now);
        receive(&mut p.b, b, now);
        if a.sent + b.sent == before {
            return;
        }
    }
}

#[test]
fn the_cm_connects_and_disconnects_an_rc_pair_over_qp1() {
    let mut p = Pair::new(11);
    p.keep_trace = true;
    let (mut a, mut b) = (agent(&mut p.a, 0x100), agent(&mut p.b, 0x900));
    // One GSI QP per port.
    assert_eq!(
        p.a.eng.create_gsi_qp(&gsi_init(&p.a)),
        Err(Error::Busy { what: "QPN" })
    );
    let (qa, qb) = (p.a.create_qp(QpType::Rc), p.b.create_qp(QpType::Rc));
    let o = QpOpts::default();

    b.cm.listen(SERVICE).unwrap();
    let req = ReqRepr::rc(SERVICE, qa, Psn::new(0x1000), p.a.gid, p.b.gid);
    let to_b = CmAddr {
        gid: p.b.gid,
        sgid_index: 0,
    };
    let ia = a.cm.connect(Instant::from_nanos(p.now), to_b, req).unwrap();
    shuttle(&mut p, &mut a, &mut b);

    // Passive side: the REQ names A's QP and PSN; B readies its QP and answers.
    let Some(CmEvent::ReqReceived { id: ib, from, req }) = b.cm.poll_event() else {
        panic!("B's CM got no REQ");
    };
    assert_eq!((from.gid, req.local_qpn), (p.a.gid, qa));
    let (ava, avb) = (p.a.av_to(&p.b), p.b.av_to(&p.a));
    bring_up(
        &mut p.b,
        qb,
        QpType::Rc,
        avb,
        req.local_qpn,
        &o,
        0x2000,
        0x1000,
    );
    let rep = RepRepr {
        local_qpn: qb,
        starting_psn: Psn::new(0x2000),
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        ..RepRepr::default()
    };
    b.cm.accept(Instant::from_nanos(p.now), ib, rep).unwrap();
    shuttle(&mut p, &mut a, &mut b);

    // Active side: the REP names B's QP; A readies its QP and sends the RTU.
    let Some(CmEvent::RepReceived { id, rep }) = a.cm.poll_event() else {
        panic!("A's CM got no REP");
    };
    assert_eq!((id, rep.local_qpn), (ia, qb));
    bring_up(
        &mut p.a,
        qa,
        QpType::Rc,
        ava,
        rep.local_qpn,
        &o,
        0x1000,
        0x2000,
    );
    a.cm.rtu(ia).unwrap();
    shuttle(&mut p, &mut a, &mut b);
    assert_eq!(b.cm.poll_event(), Some(CmEvent::Established { id: ib }));
    assert_eq!(a.cm.state(ia), Some(CmState::Established));

    // The connection the CM set up moves data.
    let (src, ka) = p.a.buffer(5000);
    let (dst, kb) = p.b.buffer(5000);
    p.a.mem.fill_pattern(src, 5000, 7);
    let write = SendWr::new(77, WrOp::rdma_write(dst, kb.rkey))
        .sge(src, 5000, ka.lkey)
        .flags(SendFlags::SIGNALED);
    p.a.post_send(qa, &write);
    p.settle();
    assert!(p
        .a
        .wcs
        .iter()
        .any(|w| w.wr_id == 77 && w.status == WcStatus::Success));
    assert_eq!(p.b.mem.read(dst, 5000), p.a.mem.read(src, 5000));

    // And the CM takes it down.
    a.cm.disconnect(Instant::from_nanos(p.now), ia).unwrap();
    shuttle(&mut p, &mut a, &mut b);
    let Some(CmEvent::DreqReceived { id, .. }) = b.cm.poll_event() else {
        panic!("B's CM got no DREQ");
    };
    b.cm.disconnect(Instant::from_nanos(p.now), id).unwrap();
    shuttle(&mut p, &mut a, &mut b);
    assert_eq!(a.cm.poll_event(), Some(CmEvent::DrepReceived { id: ia }));

    // On the wire: five UD SENDs between the QP1s, each a CM MAD, in protocol order.
    let mads: Vec<&'static str> = p
        .trace
        .iter()
        .filter_map(|(_, _, f)| {
            let pkt = roce_core::wire::parse(f).ok()?;
            let deth = pkt.deth()?;
            (pkt.dest_qp() == Qpn::GSI).then(|| {
                assert_eq!((deth.src_qp, deth.qkey), (Qpn::GSI, Qkey::GSI));
                CmMsg::parse(pkt.payload()).expect("a CM MAD").1.name()
            })
        })
        .collect();
    assert_eq!(mads, ["REQ", "REP", "RTU", "DREQ", "DREP"]);
}
