//! RoCEv1 between two of these NICs, set up through the ABI (a GID entry of type
//! `IB_GID_TYPE_ROCE`, `roce_version` 1) and the verbs API: an RC QP on that entry sends
//! and answers with the GRH and BTH directly over Ethernet. rxe speaks no RoCEv1, so the
//! peer is our own NIC, and the frames are judged by Wireshark: each one is EtherType
//! 0x8915, dissects as InfiniBand GRH (next header 0x1B) + BTH with no UDP, and carries
//! an ICRC computed here with a bitwise CRC-32 of the IBA rule (the GRH's traffic class,
//! flow label and hop limit and BTH byte 4 masked to ones, behind eight bytes of ones
//! for the absent LRH), independently of the core's table-driven code. A RoCEv2 frame
//! for the RoCEv1-only address is not the port's.

use roce_core::engine::GidEntry;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{QpType, RecvWr, SendFlags, SendWr, WcStatus, WorkCompletion, WrOp};
use roce_core::wire::icrc::{self, IcrcKind};
use roce_device::NicModel;
use roce_host::{ConnectOptions, Context, QpEndpoint};
use roce_tests::{have, nic_pair, pump_pair, scratch, tshark_rows};
use std::time::Duration;

/// CRC-32 (IEEE 802.3, reflected, the ICRC's), one bit at a time.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The ICRC of a RoCEv1 frame (no VLAN tag): eight bytes of ones for the LRH, then the
/// GRH with traffic class, flow label and hop limit set to ones, the BTH with its
/// reserved byte 4 set to ones, and the rest up to the ICRC.
fn icrc_v1(frame: &[u8]) -> u32 {
    let mut m = vec![0xFF; 8];
    let mut grh = frame[14..54].to_vec();
    grh[0] |= 0x0F;
    grh[1..4].fill(0xFF);
    grh[7] = 0xFF;
    m.extend(grh);
    let mut rest = frame[54..frame.len() - 4].to_vec();
    rest[4] = 0xFF;
    m.extend(rest);
    crc32(&m)
}

fn poll_one(cq: &roce_host::CompletionQueue) -> WorkCompletion {
    let mut wcs = [WorkCompletion::default(); 1];
    let got = cq.poll(&mut wcs).unwrap();
    assert_eq!(got.len(), 1, "one completion expected");
    assert_eq!(got[0].status, WcStatus::Success, "{:?}", got[0]);
    got[0]
}

#[test]
fn rc_over_rocev1_between_two_nics_dissects_in_wireshark() {
    let [na, nb] = nic_pair();
    let (ca, cb) = (
        Context::open(na.clone()).unwrap(),
        Context::open(nb.clone()).unwrap(),
    );
    // Each address again at index 1 as "IB/RoCE v1", as Linux lists it; B also gets a
    // link-local IPv6 address that is RoCEv1 only.
    let v6 = |i: u8| [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, i];
    for (c, i) in [(&ca, 1u8), (&cb, 2)] {
        c.set_gid(1, Some(GidEntry::new(v6(i)).roce_v1())).unwrap();
        let e = c.query_gid(1).unwrap().unwrap();
        assert_eq!(
            e,
            GidEntry::new(v6(i)).roce_v1(),
            "QUERY_GID gives the type back"
        );
    }
    let side = |ctx: &Context| {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16).unwrap();
        let access =
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
        let mr = pd.reg_mr(16384, access).unwrap();
        (pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap(), mr, cq)
    };
    let ((qa, mra, cqa), (qb, mrb, cqb)) = (side(&ca), side(&cb));
    let opts = ConnectOptions {
        sgid_index: 1,
        ..ConnectOptions::default()
    };
    let ep = |qp: &roce_host::QueuePair, i: u8| QpEndpoint {
        qpn: qp.qpn(),
        psn: Psn::new(100 * u32::from(i)),
        gid: v6(i),
        mac: [2, 0, 0, 0, 0, i],
    };
    qa.connect(&ep(&qb, 2), Psn::new(100), &opts).unwrap();
    qb.connect(&ep(&qa, 1), Psn::new(200), &opts).unwrap();

    // A 3000-byte SEND (three packets at MTU 1024), a WRITE and a READ back.
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    mra.write(0, &data).unwrap();
    qb.post_recv(&RecvWr::new(9).sge(mrb.addr(), 4096, mrb.lkey()))
        .unwrap();
    let send = SendWr::new(1, WrOp::Send)
        .sge(mra.addr(), 3000, mra.lkey())
        .flags(SendFlags::SIGNALED);
    qa.post_send(&send).unwrap();
    let mut log = Vec::new();
    pump_pair([&na, &nb], &mut log);
    poll_one(&cqa);
    assert_eq!(poll_one(&cqb).byte_len, 3000);
    let mut got = vec![0u8; 3000];
    mrb.read(0, &mut got).unwrap();
    assert_eq!(got, data, "the SEND's payload");

    let write = SendWr::new(2, WrOp::rdma_write(mrb.addr() + 8192, mrb.rkey()))
        .sge(mra.addr(), 3000, mra.lkey())
        .flags(SendFlags::SIGNALED);
    qa.post_send(&write).unwrap();
    let read = SendWr::new(3, WrOp::rdma_read(mrb.addr() + 8192, mrb.rkey()))
        .sge(mra.addr() + 8192, 3000, mra.lkey())
        .flags(SendFlags::SIGNALED);
    qa.post_send(&read).unwrap();
    pump_pair([&na, &nb], &mut log);
    poll_one(&cqa);
    poll_one(&cqa);
    mra.read(8192, &mut got).unwrap();
    assert_eq!(
        got, data,
        "what the READ brought back is what the WRITE stored"
    );

    // Every frame is RoCEv1 with the ICRC of the IBA rule.
    assert!(log.len() >= 10, "{} frames", log.len());
    for (i, f) in log.iter().enumerate() {
        assert_eq!(&f[12..14], &[0x89, 0x15], "frame {i}: EtherType");
        assert_eq!(f[14] >> 4, 6, "frame {i}: GRH IPVer");
        assert_eq!(f[20], 0x1B, "frame {i}: GRH next header");
        let icrc = u32::from_le_bytes(f[f.len() - 4..].try_into().unwrap());
        assert_eq!(icrc, icrc_v1(f), "frame {i}: ICRC");
    }

    // The same address over RoCEv2 is not B's (only a RoCEv1 entry holds it): rebuild
    // A's first SEND frame as IPv6 + UDP and hand it to B.
    let before = cb.query_counters().unwrap().engine.rcvd_not_for_us;
    let v1 = &log[0];
    let mut v2 = v1[..14].to_vec();
    v2[12..14].copy_from_slice(&[0x86, 0xDD]);
    let mut ip = v1[14..54].to_vec();
    ip[6] = 17;
    let udp_len = (v1.len() - 54 + 8) as u16;
    ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
    v2.extend(ip);
    v2.extend(0xC000u16.to_be_bytes());
    v2.extend(4791u16.to_be_bytes());
    v2.extend(udp_len.to_be_bytes());
    v2.extend([0, 0]);
    v2.extend(&v1[54..v1.len() - 4]);
    let icrc = icrc::compute(IcrcKind::Ipv6, &v2[14..]).unwrap();
    v2.extend(icrc.to_le_bytes());
    // Proof that the rebuilt frame is a good RoCEv2 frame: the parser takes it.
    assert!(roce_core::wire::parse(&v2).is_ok());
    nb.receive_frame(&v2);
    pump_pair([&na, &nb], &mut Vec::new());
    let after = cb.query_counters().unwrap().engine.rcvd_not_for_us;
    assert_eq!(
        after,
        before + 1,
        "a RoCEv2 frame for a RoCEv1-only GID is dropped"
    );

    if !have("tshark") {
        return;
    }
    let pcap = scratch("rocev1").join("rocev1.pcap");
    let mut w = roce_capture::write::Writer::create(&pcap).unwrap();
    for (i, f) in log.iter().enumerate() {
        w.write(Duration::from_micros(i as u64), f).unwrap();
    }
    w.finish().unwrap();
    let rows = tshark_rows(
        &pcap,
        None,
        &[
            "frame.protocols",
            "infiniband.grh.nxthdr",
            "infiniband.bth.opcode",
            "infiniband.invariant.crc",
            "_ws.malformed",
            "_ws.expert",
        ],
    );
    let text = format!("{rows:?}");
    assert_eq!(rows.len(), log.len(), "{text}");
    for (r, f) in rows.iter().zip(&log) {
        assert!(
            r[0].starts_with("eth:ethertype:infiniband"),
            "dissected as InfiniBand over Ethernet: {text}"
        );
        assert_eq!(r[1], "27", "GRH next header 0x1B: {text}");
        assert_eq!(
            r[2].parse::<u8>().ok(),
            Some(f[54]),
            "tshark's BTH opcode: {text}"
        );
        let icrc = u32::from_be_bytes(f[f.len() - 4..].try_into().unwrap());
        assert_eq!(
            r[3],
            format!("0x{icrc:08x}"),
            "tshark finds the ICRC: {text}"
        );
        assert_eq!(
            (r[4].as_str(), r[5].as_str()),
            ("", ""),
            "no malformed or expert mark: {text}"
        );
    }
}
