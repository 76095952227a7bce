//! A port with several GIDs: QPs pick their source address by `sgid_index`, IPv4-mapped
//! entries send over IPv4 and IPv6 entries over IPv6, a frame for any entry is for the
//! port, and an index that is empty or of the other IP version is refused.

mod common;

use common::*;
use roce_core::engine::{GidEntry, PortConfig};
use roce_core::num::Qpn;
use roce_core::transport::{
    AttrMask, Error, QpAttr, QpState, QpType, SendFlags, SendWr, WcStatus, WrOp,
};
use roce_core::wire::L3Repr;

const SIG: SendFlags = SendFlags::SIGNALED;

fn v6(last: u8) -> [u8; 16] {
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]
}

/// Two nodes with 10.0.0.id at GID index 0 and fd00::id at index 2.
fn pair() -> Pair {
    let mut p = Pair::new(11);
    p.keep_trace = true;
    let both = |id: u8| {
        Node::with_port(id, |c: &mut PortConfig| {
            c.gids.set(2, Some(GidEntry::new(v6(id)))).unwrap();
        })
    };
    p.a = both(1);
    p.b = both(2);
    p
}

/// The source and destination addresses of the last frame A sent.
fn last_addresses(p: &Pair) -> ([u8; 16], [u8; 16], bool) {
    let f = &p.trace.iter().rev().find(|t| t.1).unwrap().2;
    let pkt = roce_core::wire::parse(f).unwrap();
    let (src, dst) = pkt.gids();
    let v4 = matches!(pkt.headers().l3, L3Repr::Ipv4(_));
    (src, dst, v4)
}

/// A WRITE from `qa` to B that must arrive.
fn write(p: &mut Pair, qa: Qpn, id: u64) {
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    p.a.mem.fill_pattern(src, 64, id as u8);
    p.a.post_send(
        qa,
        &SendWr::new(id, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(
        p.a.wcs.last().map(|w| (w.wr_id, w.status)),
        Some((id, WcStatus::Success))
    );
    assert_eq!(p.b.mem.read(dst, 64), p.a.mem.read(src, 64));
}

/// An RC QP pair between fd00::1 and fd00::2 (GID index 2 on both ports).
fn connect_v6(p: &mut Pair) -> (Qpn, Qpn) {
    let o = QpOpts::default();
    let (qa, qb) = (p.a.create_qp(QpType::Rc), p.b.create_qp(QpType::Rc));
    let mut ava = p.a.av_to(&p.b);
    (ava.dgid, ava.sgid_index) = (v6(2), 2);
    let mut avb = p.b.av_to(&p.a);
    (avb.dgid, avb.sgid_index) = (v6(1), 2);
    bring_up(&mut p.a, qa, QpType::Rc, ava, qb, &o, 1, 1);
    bring_up(&mut p.b, qb, QpType::Rc, avb, qa, &o, 1, 1);
    (qa, qb)
}

#[test]
fn each_qp_sends_from_the_gid_its_sgid_index_names() {
    let mut p = pair();
    let o = QpOpts::default();
    // Over IPv4 from index 0.
    let (qa, qb) = p.connect(QpType::Rc, &o);
    write(&mut p, qa, 1);
    let (src, dst, v4) = last_addresses(&p);
    assert!(v4);
    assert_eq!((src, dst), (p.a.gid, p.b.gid));

    // Over IPv6 from index 2, on the same ports.
    let (qa6, _) = connect_v6(&mut p);
    write(&mut p, qa6, 2);
    let (src, dst, v4) = last_addresses(&p);
    assert!(!v4);
    assert_eq!((src, dst), (v6(1), v6(2)));
    // The first pair still speaks IPv4.
    write(&mut p, qa, 3);
    assert!(last_addresses(&p).2);
    let _ = qb;
}

#[test]
fn an_empty_or_mismatched_sgid_index_is_refused() {
    let mut p = pair();
    let qa = p.a.create_qp(QpType::Rc);
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags = Some(QpOpts::default().access);
    p.a.eng.modify_qp(qa, &init).unwrap();
    let to_b = p.a.av_to(&p.b);
    let rtr = |sgid_index: u8, dgid: [u8; 16]| {
        let mut a = QpAttr::to_state(QpState::Rtr);
        let mut av = to_b;
        av.sgid_index = sgid_index;
        av.dgid = dgid;
        a.ah_attr = Some(av);
        a.path_mtu = Some(roce_core::transport::Mtu::Mtu1024);
        a.dest_qp_num = Some(Qpn::new(17));
        a.rq_psn = Some(roce_core::num::Psn::new(0));
        a.max_dest_rd_atomic = Some(1);
        a.min_rnr_timer = roce_core::transport::RnrTimer::new(1);
        a
    };
    let refused = |r: Result<(), Error>| matches!(r, Err(Error::InvalidAttribute { attr, .. }) if attr == AttrMask::AV);
    // Index 1 is empty; index 0 is IPv4 but the destination IPv6; index 2 the reverse.
    let gid_b = p.b.gid;
    assert!(refused(p.a.eng.modify_qp(qa, &rtr(1, gid_b))));
    assert!(refused(p.a.eng.modify_qp(qa, &rtr(0, v6(2)))));
    assert!(refused(p.a.eng.modify_qp(qa, &rtr(2, gid_b))));
    assert_eq!(
        p.a.state(qa),
        QpState::Init,
        "a refused modify changes nothing"
    );
    p.a.eng.modify_qp(qa, &rtr(2, v6(2))).unwrap();
}

#[test]
fn frames_for_a_removed_gid_are_not_for_the_port() {
    let mut p = pair();
    let (qa, qb) = connect_v6(&mut p);
    write(&mut p, qa, 1);
    // B cannot drop fd00::2 while its connected QP uses it; once that QP is reset, it
    // can, and A's next WRITE reaches a port that no longer answers to that address.
    let mut cfg = *p.b.eng.config();
    cfg.gids.set(2, None).unwrap();
    assert!(matches!(p.b.eng.set_config(cfg), Err(Error::Busy { .. })));
    assert!(
        p.b.eng.config().gids.get(2).is_some(),
        "a refused change changes nothing"
    );
    p.b.eng
        .modify_qp(qb, &QpAttr::to_state(QpState::Reset))
        .unwrap();
    p.b.eng.set_config(cfg).unwrap();
    let before = p.b.eng.counters().rcvd_not_for_us;
    let (src, ka) = p.a.buffer(64);
    let (dst, kb) = p.b.buffer(64);
    p.a.post_send(
        qa,
        &SendWr::new(2, WrOp::rdma_write(dst, kb.rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    for _ in 0..50 {
        if !p.step() {
            break;
        }
    }
    assert!(p.b.eng.counters().rcvd_not_for_us > before);
    assert_eq!(
        p.b.eng.counters().rcvd_pkts,
        1,
        "only the first WRITE was taken"
    );
}

/// `frame` with its 802.1Q tag replaced: `vid` Some tags it (PCP 0), None strips it.
/// The ICRC does not cover the Ethernet and VLAN headers, so the frame stays valid.
fn retag(frame: &[u8], vid: Option<u16>) -> Vec<u8> {
    let tagged = frame[12..14] == [0x81, 0x00];
    let rest = if tagged { &frame[16..] } else { &frame[12..] };
    let mut out = frame[..12].to_vec();
    if let Some(v) = vid {
        out.extend_from_slice(&[0x81, 0x00]);
        out.extend_from_slice(&(v & 0x0FFF).to_be_bytes());
    }
    out.extend_from_slice(rest);
    out
}

#[test]
fn each_gid_lives_on_its_own_vlan() {
    // 10.0.0.id untagged at index 0, fd00::id on VLAN 100 at index 2.
    let mut p = Pair::new(12);
    p.keep_trace = true;
    let node = |id: u8| {
        Node::with_port(id, |c: &mut PortConfig| {
            c.gids
                .set(2, Some(GidEntry::with_vlan(v6(id), 100)))
                .unwrap();
        })
    };
    p.a = node(1);
    p.b = node(2);
    let (qa6, _) = connect_v6(&mut p);
    write(&mut p, qa6, 1);
    // Both ways the frames of the VLAN entry carry VID 100 (the address vectors say
    // no VLAN: the entry's wins); the untagged entry's carry none.
    let vids = |p: &Pair| -> Vec<Option<u16>> {
        p.trace
            .iter()
            .map(|t| roce_core::wire::parse(&t.2).unwrap().vlan().map(|v| v.vid))
            .collect()
    };
    assert!(vids(&p).iter().all(|v| *v == Some(100)), "{:?}", vids(&p));
    p.trace.clear();
    let (qa4, _) = p.connect(QpType::Rc, &QpOpts::default());
    write(&mut p, qa4, 2);
    assert!(vids(&p).iter().all(|v| v.is_none()));

    // Replayed onto the wrong VLAN, a frame is not for the port: dropped and counted.
    let v6_frame = {
        p.trace.clear();
        write(&mut p, qa6, 3);
        p.trace.iter().find(|t| t.1).unwrap().2.clone()
    };
    let v4_frame = {
        p.trace.clear();
        write(&mut p, qa4, 4);
        p.trace.iter().find(|t| t.1).unwrap().2.clone()
    };
    let now = roce_core::transport::Instant::from_nanos(p.now);
    let cases = [
        (retag(&v6_frame, None), "the VLAN GID's frame untagged"),
        (
            retag(&v6_frame, Some(0)),
            "the VLAN GID's frame priority-tagged",
        ),
        (
            retag(&v6_frame, Some(200)),
            "the VLAN GID's frame on VLAN 200",
        ),
        (
            retag(&v4_frame, Some(100)),
            "the untagged GID's frame on VLAN 100",
        ),
    ];
    for (f, what) in cases {
        let before = p.b.eng.counters().rcvd_not_for_us;
        p.b.eng.handle_packet(now, &f, &mut p.b.mem);
        assert_eq!(p.b.eng.counters().rcvd_not_for_us, before + 1, "{what}");
    }
    // A priority tag (VID 0) on the untagged GID's frame is untagged traffic: taken
    // (a duplicate of the last WRITE, so it is only re-acknowledged).
    let before = p.b.eng.counters().duplicate_request;
    p.b.eng
        .handle_packet(now, &retag(&v4_frame, Some(0)), &mut p.b.mem);
    assert_eq!(p.b.eng.counters().duplicate_request, before + 1);
}
