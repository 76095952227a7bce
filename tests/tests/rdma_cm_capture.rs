//! What two NICs put on the wire when `roce_host::rdma_cm` connects them, sends over
//! the connection and disconnects, checked by Wireshark: every frame dissects and its
//! ICRC verifies (computed independently), the MADs are CM messages from QP1 to QP1 in
//! protocol order, and the REQ's private data starts with the RDMA CM IP header for
//! the two addresses. The same for a UD lookup (udaddy's SIDR_REQ/SIDR_REP, then a
//! datagram), whose MADs Wireshark 4.0 does not dissect: they are compared with the
//! ones Linux sent (`data/captures/rxe_cm.pcap`) byte for byte.

use roce_core::memory::AccessFlags;
use roce_core::num::Qpn;
use roce_core::transport::{
    QpType, RecvWr, SendFlags, SendWr, UdDest, WcFlags, WcOpcode, WorkCompletion, WrOp, GRH_LEN,
};
use roce_core::wire::{self, opcode::Opcode};
use roce_device::LocalNic;
use roce_host::rdma_cm::{CmAgent, RdmaCmEvent, RDMA_UDP_QKEY};
use roce_host::Context;
use roce_tests::{check_with_tshark, have, nic_pair, pump_pair, scratch, tshark_rows};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

/// Two NICs, 10.0.0.1 and 10.0.0.2, with their contexts and CM agents, each agent
/// knowing the other NIC as its neighbour.
fn cm_pair() -> ([Rc<LocalNic>; 2], [Context; 2], [CmAgent; 2]) {
    let [na, nb] = nic_pair();
    let (ca, cb) = (
        Context::open(na.clone()).unwrap(),
        Context::open(nb.clone()).unwrap(),
    );
    let (mut a, mut b) = (CmAgent::new(&ca).unwrap(), CmAgent::new(&cb).unwrap());
    let ((ga, ma), (gb, mb)) = (ca.port_addr(), cb.port_addr());
    a.add_neighbour(gb, mb);
    b.add_neighbour(ga, ma);
    ([na, nb], [ca, cb], [a, b])
}

/// Moves frames between the two NICs and lets both agents run, a few rounds.
fn pump_agents(nics: [&Rc<LocalNic>; 2], agents: [&mut CmAgent; 2], log: &mut Vec<Vec<u8>>) {
    let [a, b] = agents;
    for _ in 0..6 {
        pump_pair(nics, log);
        a.progress().unwrap();
        b.progress().unwrap();
    }
}

fn write_pcap(name: &str, log: &[Vec<u8>]) -> PathBuf {
    let pcap = scratch("rdma_cm_capture").join(name);
    let mut w = roce_capture::write::Writer::create(&pcap).unwrap();
    for (i, f) in log.iter().enumerate() {
        w.write(Duration::from_micros(i as u64), f).unwrap();
    }
    w.finish().unwrap();
    pcap
}

/// Two NICs connect through `rdma_cm`, one WRITE goes over, they disconnect: the
/// frames as a pcap named `name`.
fn capture_connection(name: &str) -> PathBuf {
    let ([na, nb], [ca, cb], [mut a, mut b]) = cm_pair();
    let gb = cb.port_addr().0;
    let qp = |ctx: &Context| {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16).unwrap();
        let mr = pd
            .reg_mr(4096, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE)
            .unwrap();
        (pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap(), mr, cq)
    };
    let ((qa, mra, _cqa), (qb, mrb, _cqb)) = (qp(&ca), qp(&cb));
    let mut log = Vec::new();
    let pump = |a: &mut CmAgent, b: &mut CmAgent, log: &mut Vec<Vec<u8>>| {
        pump_agents([&na, &nb], [a, b], log)
    };

    b.listen(7471).unwrap();
    let ia = a.connect(&qa, gb, 7471, b"capture").unwrap();
    pump(&mut a, &mut b, &mut log);
    let Some(RdmaCmEvent::ConnectRequest { id: ib, .. }) = b.poll_event() else {
        panic!("no connect request");
    };
    b.accept(ib, &qb).unwrap();
    pump(&mut a, &mut b, &mut log);
    assert_eq!(a.poll_event(), Some(RdmaCmEvent::Established { id: ia }));
    let write = SendWr::new(1, WrOp::rdma_write(mrb.addr(), mrb.rkey()))
        .sge(mra.addr(), 3000.min(mra.len() as u32), mra.lkey())
        .flags(SendFlags::SIGNALED);
    qa.post_send(&write).unwrap();
    pump(&mut a, &mut b, &mut log);
    a.disconnect(ia).unwrap();
    pump(&mut a, &mut b, &mut log);
    write_pcap(name, &log)
}

#[test]
fn an_rdma_cm_connection_on_the_wire_dissects_in_wireshark() {
    if !have("tshark") {
        return;
    }
    let pcap = capture_connection("rdma_cm.pcap");
    assert!(check_with_tshark(&pcap));

    // The CM's MADs, QP1 to QP1, in order; the REQ names service 0x0106 << 16 | 7471
    // and carries the RDMA CM IP header (version 4, the two addresses).
    let rows = tshark_rows(
        &pcap,
        Some("infiniband.mad"),
        &[
            "infiniband.bth.destqp",
            "infiniband.deth.srcqp",
            "infiniband.mad.attributeid",
            "infiniband.cm.req.serviceid",
            "infiniband.cm.req.ip_cm.ipv",
            "infiniband.cm.req.ip_cm.sip4",
            "infiniband.cm.req.ip_cm.dip4",
            "infiniband.cm.req.ip_cm.private",
        ],
    );
    let text = format!("{rows:?}");
    let ids: Vec<&str> = rows.iter().map(|r| r[2].as_str()).collect();
    assert_eq!(
        ids,
        ["0x0010", "0x0013", "0x0014", "0x0015", "0x0016"],
        "REQ, REP, RTU, DREQ, DREP:\n{text}"
    );
    for r in &rows {
        // BTH destination QP (24 bits) and DETH source QP (shown as 32 bits): both 1.
        assert_eq!(
            (r[0].as_str(), r[1].as_str()),
            ("0x000001", "0x00000001"),
            "QP1 to QP1: {r:?}"
        );
    }
    // rdma_cm_service_id(TCP, 7471): 0x0000_0000_0106 << 16 | port.
    assert_eq!(rows[0][3], "0x0000000001061d2f", "{text}");
    assert_eq!(
        (
            rows[0][4].as_str(),
            rows[0][5].as_str(),
            rows[0][6].as_str()
        ),
        ("0x04", "10.0.0.1", "10.0.0.2"),
        "the RDMA CM IP header's addresses: {text}"
    );
    assert!(
        rows[0][7].replace(':', "").starts_with(&hex(b"capture")),
        "{text}"
    );
}

/// Linux's reading of the starting PSNs (as captured between two rxe running rping):
/// each side sends from the PSN its peer announced, so the active side's first WRITE
/// carries the REP's starting PSN.
#[test]
fn the_active_side_sends_from_the_reps_starting_psn() {
    if !have("tshark") {
        return;
    }
    let pcap = capture_connection("psn.pcap");
    let field = |filter: &str, f: &str| -> String {
        let rows = tshark_rows(&pcap, Some(filter), &[f]);
        rows.first().map(|r| r[0].clone()).unwrap_or_default()
    };
    let rep_psn = field("infiniband.cm.rep.startpsn", "infiniband.cm.rep.startpsn");
    let first_write = field("infiniband.reth", "infiniband.bth.psn");
    let rep_psn = u32::from_str_radix(rep_psn.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(first_write.parse::<u32>().unwrap(), rep_psn);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// udaddy between two NICs: B listens on UDP-space port 7174 with a UD QP, A looks it
/// up (SIDR_REQ/SIDR_REP) and sends one datagram with its QPN as immediate, as udaddy
/// does. Returns the pcap and B's QPN.
fn capture_sidr(name: &str) -> (PathBuf, Qpn) {
    let ([na, nb], [ca, cb], [mut a, mut b]) = cm_pair();
    let gb = cb.port_addr().0;
    let ud = |ctx: &Context| {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16).unwrap();
        let mr = pd.reg_mr(4096, AccessFlags::LOCAL_WRITE).unwrap();
        let qp = pd.create_qp(QpType::Ud, &cq, &cq).build().unwrap();
        roce_host::rdma_cm::init_ud_qp(&qp).unwrap();
        (qp, mr, cq)
    };
    let ((qa, mra, _cqa), (qb, mrb, cqb)) = (ud(&ca), ud(&cb));
    qb.post_recv(&RecvWr::new(7).sge(mrb.addr(), 4096, mrb.lkey()))
        .unwrap();
    let mut log = Vec::new();
    let pump = |a: &mut CmAgent, b: &mut CmAgent, log: &mut Vec<Vec<u8>>| {
        pump_agents([&na, &nb], [a, b], log)
    };
    b.listen_udp(7174).unwrap();
    let ia = a.connect_ud(gb, 7174, &[]).unwrap();
    pump(&mut a, &mut b, &mut log);
    let Some(RdmaCmEvent::ConnectRequest { id: ib, port, .. }) = b.poll_event() else {
        panic!("no connect request");
    };
    assert_eq!(port, 7174);
    b.accept(ib, &qb).unwrap();
    pump(&mut a, &mut b, &mut log);
    let Some(RdmaCmEvent::UdEstablished {
        id,
        remote_qpn,
        remote_qkey,
        av,
    }) = a.poll_event()
    else {
        panic!("no SIDR_REP");
    };
    assert_eq!((id, remote_qpn, remote_qkey), (ia, qb.qpn(), RDMA_UDP_QKEY));
    let mut send = SendWr::new(
        1,
        WrOp::SendWithImm {
            imm: qa.qpn().value(),
        },
    )
    .sge(mra.addr(), 100, mra.lkey())
    .flags(SendFlags::SIGNALED);
    send.ud = Some(UdDest {
        av,
        remote_qpn,
        remote_qkey,
    });
    qa.post_send(&send).unwrap();
    pump(&mut a, &mut b, &mut log);
    let mut wc = [WorkCompletion::default()];
    let got = cqb.poll(&mut wc).unwrap();
    let [wc] = got else {
        panic!("the datagram did not arrive");
    };
    assert_eq!(
        (wc.opcode, wc.byte_len as usize, wc.src_qp, wc.imm_data),
        (WcOpcode::Recv, GRH_LEN + 100, qa.qpn(), qa.qpn().value())
    );
    assert!(wc.wc_flags.contains(WcFlags::WITH_IMM));
    (write_pcap(name, &log), qb.qpn())
}

/// The MADs (UD payload after the DETH) of the frames of `pcap` sent to QP1.
fn mads(pcap: &Path) -> Vec<Vec<u8>> {
    let mut r = roce_capture::open(pcap).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read frame") {
        let frame = f.data.to_vec();
        let pkt = wire::parse(&frame).expect("a valid RoCE frame");
        if pkt.opcode() == Opcode::UD_SEND_ONLY && pkt.dest_qp() == Qpn::GSI {
            out.push(pkt.payload().to_vec());
        }
    }
    out
}

#[test]
fn a_sidr_lookup_on_the_wire_is_linuxs_and_dissects_in_wireshark() {
    if !have("tshark") {
        return;
    }
    let (pcap, server_qpn) = capture_sidr("sidr.pcap");
    assert!(check_with_tshark(&pcap));
    // tshark: two MADs from QP1 to QP1 with the GSI Q_Key, SIDR_REQ (0x0017) then
    // SIDR_REP (0x0018), then the datagram to the QPN and Q_Key the SIDR_REP named.
    let rows = tshark_rows(
        &pcap,
        None,
        &[
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.deth.q_key",
            "infiniband.mad.attributeid",
        ],
    );
    let text = format!("{rows:?}");
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(
        rows[0][1..],
        ["0x000001", "0x0000000080010000", "0x0017"],
        "{text}"
    );
    assert_eq!(
        rows[1][1..],
        ["0x000001", "0x0000000080010000", "0x0018"],
        "{text}"
    );
    // UD SEND only with immediate (101).
    assert_eq!(rows[2][0], "101", "{text}");
    assert_eq!(
        rows[2][1],
        format!("0x{:06x}", server_qpn.value()),
        "{text}"
    );
    assert_eq!(
        rows[2][2],
        format!("0x{:016x}", RDMA_UDP_QKEY.0),
        "the datagram carries RDMA_UDP_QKEY: {text}"
    );

    // Wireshark 4.0 shows SIDR as "Dissector Not Implemented": compare with what Linux
    // sent for udaddy (SIDR_REQ, SIDR_REP: the last two MADs of rxe_cm.pcap), byte for
    // byte but for what belongs to the run: the transaction ID, the request ID, the IP
    // header's source port and addresses, the server's QPN.
    let linux = mads(&Path::new(env!("CARGO_MANIFEST_DIR")).join("data/captures/rxe_cm.pcap"));
    let linux = &linux[linux.len() - 2..];
    let ours = mads(&pcap);
    assert_eq!(ours.len(), 2);
    const DATA: usize = 24;
    let same_but = |a: &[u8], b: &[u8], skip: &[std::ops::Range<usize>], what: &str| {
        assert_eq!(a.len(), b.len());
        for i in 0..a.len() {
            // The MAD header's transaction ID, and the run's own fields of the data.
            let of_the_run =
                (8..16).contains(&i) || (i >= DATA && skip.iter().any(|r| r.contains(&(i - DATA))));
            if !of_the_run {
                assert_eq!(a[i], b[i], "{what}: byte {i} of the MAD");
            }
        }
    };
    // SIDR_REQ: request ID 0..4; the RDMA CM IP header at 16: source port 18..20,
    // source address 20..36, destination 36..52 (IPv4: 12 zeros, then the address).
    same_but(
        &ours[0],
        &linux[0],
        &[0..4, 18..20, 32..36, 48..52],
        "SIDR_REQ",
    );
    assert_eq!(ours[0][DATA + 32..DATA + 36], [10, 0, 0, 1]);
    assert_eq!(ours[0][DATA + 48..DATA + 52], [10, 0, 0, 2]);
    // SIDR_REP: request ID 0..4 (the REQ's), QPN 8..11.
    same_but(&ours[1], &linux[1], &[0..4, 8..11], "SIDR_REP");
    assert_eq!(ours[1][DATA..DATA + 4], ours[0][DATA..DATA + 4]);
    assert_eq!(
        ours[1][DATA + 8..DATA + 11],
        server_qpn.value().to_be_bytes()[1..]
    );
}
