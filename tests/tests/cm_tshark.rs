//! The CM's MADs against two independent truths: real ones that Linux (rxe, kernel 6.1)
//! sent during `rping`, `ib_write_bw -R` and `udaddy` (`data/captures/rxe_cm.pcap`, see
//! its `SOURCE.md`), which must parse and re-emit byte for byte; and Wireshark's CM
//! dissector, which must read back every field of the messages this project emits.

use roce_core::num::{Psn, Qkey, Qpn};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::cm::{
    attr, port_space, rdma_cm_service_id, rej_reason, sidr_status, CmMsg, CmMsgKind, CmPath,
    CmTransport, CommIdsRepr, DreqRepr, IpCmHdr, MraRepr, PrivateData, RejRepr, RepRepr, ReqRepr,
    SidrRepRepr, SidrReqRepr, ARI_LEN,
};
use roce_core::wire::deth::DethRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::mad::MAD_LEN;
use roce_core::wire::opcode::Opcode;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{self, ExtHeaders, Headers, L3Repr};
use roce_tests::{check_with_tshark, have, scratch};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn rxe_capture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/captures/rxe_cm.pcap")
}

/// Every frame of `pcap` with its MAD (the UD payload after the DETH).
fn mads(pcap: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut r = roce_capture::open(pcap).expect("open capture");
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("read frame") {
        let frame = f.data.to_vec();
        let pkt = wire::parse(&frame).expect("a valid RoCE frame");
        assert_eq!(pkt.opcode(), Opcode::UD_SEND_ONLY);
        assert_eq!(pkt.dest_qp(), Qpn::GSI);
        let deth = pkt.deth().expect("DETH");
        assert_eq!((deth.qkey, deth.src_qp), (Qkey::GSI, Qpn::GSI));
        let mad = pkt.payload().to_vec();
        out.push((frame, mad));
    }
    out
}

#[test]
fn linux_cm_mads_parse_and_reemit_byte_for_byte() {
    let got = mads(&rxe_capture());
    let names: Vec<&str> = got
        .iter()
        .map(|(_, m)| CmMsg::parse(m).expect("a CM message").1.name())
        .collect();
    assert_eq!(
        names,
        ["REQ", "REP", "RTU", "DREQ", "DREP", "REQ", "REJ", "SIDR_REQ", "SIDR_REP"]
    );
    for (_, mad) in &got {
        assert_eq!(mad.len(), MAD_LEN);
        let (tid, msg) = CmMsg::parse(mad).unwrap();
        let mut again = [0u8; MAD_LEN];
        msg.emit(tid, &mut again).unwrap();
        assert_eq!(&again[..], &mad[..], "{} re-emitted", msg.name());
    }
    // What rping's REQ said (values read with tshark, `SOURCE.md`).
    let CmMsg::Req(req) = CmMsg::parse(&got[0].1).unwrap().1 else {
        panic!()
    };
    assert_eq!(req.service_id, rdma_cm_service_id(port_space::TCP, 7174));
    assert_eq!(req.local_qpn, Qpn::new(0x11));
    assert_eq!(req.starting_psn, Psn::new(0x17e0b2));
    assert_eq!(req.local_ca_guid, 0x5054_00ff_fe77_0002);
    assert_eq!(
        (
            req.remote_cm_response_timeout,
            req.local_cm_response_timeout
        ),
        (20, 20)
    );
    assert_eq!(
        (req.retry_count, req.rnr_retry_count, req.max_cm_retries),
        (7, 7, 15)
    );
    assert_eq!((req.path_mtu, req.pkey), (3, 0xFFFF));
    assert_eq!((req.primary.local_lid, req.primary.hop_limit), (0xFFFF, 64));
    assert_eq!(req.primary.local_ack_timeout, 19);
    assert_eq!(req.primary.flow_label, 0x61f9b);
    let ip = IpCmHdr::parse(&req.private_data.0).expect("RDMA CM's IP header");
    assert_eq!(ip.ipv4_addrs(), Some(([10, 77, 0, 3], [10, 77, 0, 2])));
    assert_eq!(ip.src_port, 0xb5cb);
    // The REP answers with the REQ's transaction ID and names the REQ's comm ID.
    let (tid0, _) = CmMsg::parse(&got[0].1).unwrap();
    let (tid1, CmMsg::Rep(rep)) = CmMsg::parse(&got[1].1).unwrap() else {
        panic!()
    };
    assert_eq!(tid0, tid1);
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_eq!((rep.target_ack_delay, rep.rnr_retry_count), (15, 7));
    let CmMsg::Rej(rej) = CmMsg::parse(&got[6].1).unwrap().1 else {
        panic!()
    };
    assert_eq!(rej.reason, rej_reason::INVALID_SERVICE_ID);
    assert_eq!(rej.local_comm_id, 0);
    let CmMsg::SidrRep(sidr) = CmMsg::parse(&got[8].1).unwrap().1 else {
        panic!()
    };
    assert_eq!(
        (sidr.status, sidr.qpn, sidr.qkey),
        (sidr_status::SUCCESS, Qpn::new(0x11), Qkey(0x0123_4567))
    );
}

/// A UD SEND to QP1 carrying `mad`, as the CM sends it (RoCEv2 over IPv4).
fn gsi_frame(mad: &[u8], psn: u32) -> Vec<u8> {
    let h = Headers {
        eth: EthernetRepr {
            dst: MacAddr([0x52, 0x54, 0, 0x77, 0, 1]),
            src: MacAddr([2, 0, 0x0a, 0x4d, 0, 0x0a]),
            ethertype: 0,
        },
        vlan: None,
        l3: L3Repr::Ipv4(Ipv4Repr {
            src: [10, 77, 0, 10].into(),
            dst: [10, 77, 0, 2].into(),
            dont_frag: true,
            ttl: 64,
            ..Ipv4Repr::default()
        }),
        udp: Some(UdpRepr {
            src_port: 0xC001,
            dst_port: 4791,
            checksum: 0,
        }),
        bth: BthRepr::new(Opcode::UD_SEND_ONLY, Qpn::GSI, Psn::new(psn)),
        ext: ExtHeaders {
            deth: Some(DethRepr {
                qkey: Qkey::GSI,
                src_qp: Qpn::GSI,
            }),
            ..ExtHeaders::default()
        },
    };
    let mut buf = vec![0u8; 512];
    let n = wire::emit(&h, mad, &mut buf).expect("emit");
    buf.truncate(n);
    buf
}

const OURS: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 10];
const THEIRS: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 2];

/// One message of each kind with a distinct value in every field.
fn messages() -> Vec<CmMsg> {
    let mut private = [0u8; 92];
    IpCmHdr::ipv4([10, 77, 0, 10], 0xC123, [10, 77, 0, 2])
        .emit(&mut private)
        .unwrap();
    private[36..40].copy_from_slice(b"ping");
    let req = ReqRepr {
        local_comm_id: 0x1122_3344,
        service_id: rdma_cm_service_id(port_space::TCP, 7174),
        local_ca_guid: 0x0000_0aff_fe4d_000a,
        local_qkey: Qkey(0x0000_0042),
        local_qpn: Qpn::new(0x000abc),
        responder_resources: 0x10,
        local_eecn: 0x0a0b0c,
        initiator_depth: 0x08,
        remote_eecn: 0x0d0e0f,
        remote_cm_response_timeout: 0x13,
        transport: CmTransport::Uc,
        end_to_end_flow_control: true,
        starting_psn: Psn::new(0x456789),
        local_cm_response_timeout: 0x12,
        retry_count: 6,
        pkey: 0x8123,
        path_mtu: 5,
        rdc_exists: true,
        rnr_retry_count: 5,
        max_cm_retries: 14,
        srq: true,
        extended_transport: 0,
        primary: CmPath {
            local_lid: 0xFFFF,
            remote_lid: 0xFFFE,
            local_gid: OURS,
            remote_gid: THEIRS,
            flow_label: 0x12345,
            packet_rate: 16,
            traffic_class: 0x68,
            hop_limit: 0x3f,
            sl: 3,
            subnet_local: true,
            local_ack_timeout: 0x11,
        },
        alternate: CmPath::default(),
        private_data: PrivateData(private),
    };
    let rep = RepRepr {
        local_comm_id: 0x5566_7788,
        remote_comm_id: 0x1122_3344,
        local_qkey: Qkey(0x0000_0077),
        local_qpn: Qpn::new(0x000def),
        local_eecn: 0x010203,
        starting_psn: Psn::new(0xabcdef),
        responder_resources: 0x04,
        initiator_depth: 0x02,
        target_ack_delay: 0x0f,
        failover_accepted: 2,
        end_to_end_flow_control: true,
        rnr_retry_count: 6,
        srq: true,
        local_ca_guid: 0x5254_00ff_fe77_0001,
        private_data: PrivateData::from_slice(b"accepted").unwrap(),
    };
    let ids = CommIdsRepr {
        local_comm_id: 0x1122_3344,
        remote_comm_id: 0x5566_7788,
        private_data: PrivateData::from_slice(b"rtu").unwrap(),
    };
    let mut ari = [0u8; ARI_LEN];
    ari[0] = 0xAA;
    vec![
        CmMsg::Req(req),
        CmMsg::Rep(rep),
        CmMsg::Rtu(ids),
        CmMsg::Rej(RejRepr {
            local_comm_id: 0x5566_7788,
            remote_comm_id: 0x1122_3344,
            message_rejected: CmMsgKind::Rep,
            reject_info_len: 1,
            reason: rej_reason::CONSUMER_DEFINED,
            ari,
            private_data: PrivateData::from_slice(b"busy").unwrap(),
        }),
        CmMsg::Dreq(DreqRepr {
            local_comm_id: 0x1122_3344,
            remote_comm_id: 0x5566_7788,
            remote_qpn: Qpn::new(0x000def),
            private_data: PrivateData::from_slice(b"bye").unwrap(),
        }),
        CmMsg::Drep(CommIdsRepr {
            local_comm_id: 0x5566_7788,
            remote_comm_id: 0x1122_3344,
            private_data: PrivateData::default(),
        }),
        CmMsg::Mra(MraRepr {
            local_comm_id: 0x5566_7788,
            remote_comm_id: 0x1122_3344,
            message_mraed: CmMsgKind::Req,
            service_timeout: 0x15,
            private_data: PrivateData::default(),
        }),
        CmMsg::SidrReq(SidrReqRepr {
            request_id: 0x0bad_cafe,
            pkey: 0xFFFF,
            service_id: rdma_cm_service_id(port_space::UDP, 7174),
            private_data: PrivateData::default(),
        }),
        CmMsg::SidrRep(SidrRepRepr {
            request_id: 0x0bad_cafe,
            status: sidr_status::SUCCESS,
            qpn: Qpn::new(0x000123),
            service_id: rdma_cm_service_id(port_space::UDP, 7174),
            qkey: Qkey(0x0123_4567),
            ..SidrRepRepr::default()
        }),
    ]
}

/// The fields Wireshark's dissector should show for `m`, as (field, value): numbers
/// compare as numbers, addresses as text. Wireshark 4.0 has no dissector for MRA and
/// SIDR: for those, the MAD data it shows is compared byte for byte instead.
///
/// Not compared: the REQ's primary flow label and packet rate. Wireshark 4.0 reads them
/// a byte early (from byte 87; the kernel's `ibta_vol1_c12.h` puts the 20-bit flow
/// label at byte 88 and the rate in the low 6 bits of byte 91, and the real capture
/// agrees: see `linux_cm_mads_parse_and_reemit_byte_for_byte`).
fn expected(m: &CmMsg) -> Vec<(&'static str, String)> {
    let n = |v: u64| v.to_string();
    match m {
        CmMsg::Req(r) => vec![
            ("infiniband.cm.req", n(r.local_comm_id.into())),
            ("infiniband.cm.req.serviceid", n(r.service_id)),
            ("infiniband.cm.req.localcaguid", n(r.local_ca_guid)),
            ("infiniband.cm.req.localqkey", n(r.local_qkey.0.into())),
            ("infiniband.cm.req.localqpn", n(r.local_qpn.value().into())),
            (
                "infiniband.cm.req.responderres",
                n(r.responder_resources.into()),
            ),
            ("infiniband.cm.req.localeecn", n(r.local_eecn.into())),
            ("infiniband.cm.req.initdepth", n(r.initiator_depth.into())),
            ("infiniband.cm.req.remoteeecn", n(r.remote_eecn.into())),
            (
                "infiniband.cm.req.remoteresptout",
                n(r.remote_cm_response_timeout.into()),
            ),
            ("infiniband.cm.req.transpsvctype", n(r.transport as u64)),
            (
                "infiniband.cm.req.e2eflowctrl",
                n(r.end_to_end_flow_control.into()),
            ),
            (
                "infiniband.cm.req.startpsn",
                n(r.starting_psn.value().into()),
            ),
            (
                "infiniband.cm.req.localresptout",
                n(r.local_cm_response_timeout.into()),
            ),
            ("infiniband.cm.req.retrcount", n(r.retry_count.into())),
            ("infiniband.cm.req.pkey", n(r.pkey.into())),
            ("infiniband.cm.req.pppmtu", n(r.path_mtu.into())),
            ("infiniband.cm.req.rdcexist", n(r.rdc_exists.into())),
            (
                "infiniband.cm.req.rnrretrcount",
                n(r.rnr_retry_count.into()),
            ),
            ("infiniband.cm.req.maxcmretr", n(r.max_cm_retries.into())),
            ("infiniband.cm.req.srq", n(r.srq.into())),
            (
                "infiniband.cm.req.ext_transport",
                n(r.extended_transport.into()),
            ),
            (
                "infiniband.cm.req.prim_locallid",
                n(r.primary.local_lid.into()),
            ),
            (
                "infiniband.cm.req.prim_remotelid",
                n(r.primary.remote_lid.into()),
            ),
            ("infiniband.cm.req.prim_localgid_ipv4", "10.77.0.10".into()),
            ("infiniband.cm.req.prim_remotegid_ipv4", "10.77.0.2".into()),
            (
                "infiniband.cm.req.prim_tfcclass",
                n(r.primary.traffic_class.into()),
            ),
            (
                "infiniband.cm.req.prim_hoplim",
                n(r.primary.hop_limit.into()),
            ),
            ("infiniband.cm.req.prim_sl", n(r.primary.sl.into())),
            (
                "infiniband.cm.req.prim_subnetlocal",
                n(r.primary.subnet_local.into()),
            ),
            (
                "infiniband.cm.req.prim_localacktout",
                n(r.primary.local_ack_timeout.into()),
            ),
            ("infiniband.cm.req.ip_cm.ipv", "4".into()),
            ("infiniband.cm.req.ip_cm.sport", n(0xC123)),
            ("infiniband.cm.req.ip_cm.sip4", "10.77.0.10".into()),
            ("infiniband.cm.req.ip_cm.dip4", "10.77.0.2".into()),
        ],
        CmMsg::Rep(r) => vec![
            ("infiniband.cm.rep", n(r.local_comm_id.into())),
            ("infiniband.cm.rep.remotecommid", n(r.remote_comm_id.into())),
            ("infiniband.cm.rep.localqkey", n(r.local_qkey.0.into())),
            ("infiniband.cm.rep.localqpn", n(r.local_qpn.value().into())),
            ("infiniband.cm.rep.localeecn", n(r.local_eecn.into())),
            (
                "infiniband.cm.rep.startpsn",
                n(r.starting_psn.value().into()),
            ),
            ("infiniband.cm.rep.respres", n(r.responder_resources.into())),
            ("infiniband.cm.rep.initdepth", n(r.initiator_depth.into())),
            (
                "infiniband.cm.rep.tgtackdelay",
                n(r.target_ack_delay.into()),
            ),
            (
                "infiniband.cm.rep.failoveracc",
                n(r.failover_accepted.into()),
            ),
            (
                "infiniband.cm.rep.e2eflowctrl",
                n(r.end_to_end_flow_control.into()),
            ),
            (
                "infiniband.cm.rep.rnrretrcount",
                n(r.rnr_retry_count.into()),
            ),
            ("infiniband.cm.rep.srq", n(r.srq.into())),
            ("infiniband.cm.rep.localcaguid", n(r.local_ca_guid)),
        ],
        CmMsg::Rtu(r) => vec![
            ("infiniband.cm.rtu.localcommid", n(r.local_comm_id.into())),
            ("infiniband.cm.rtu.remotecommid", n(r.remote_comm_id.into())),
        ],
        CmMsg::Rej(r) => vec![
            ("infiniband.cm.rej.localcommid", n(r.local_comm_id.into())),
            ("infiniband.cm.rej.remotecommid", n(r.remote_comm_id.into())),
            ("infiniband.cm.rej.msgrej", n(r.message_rejected as u64)),
            ("infiniband.cm.rej.rejinfolen", n(r.reject_info_len.into())),
            ("infiniband.cm.rej.reason", n(r.reason.into())),
        ],
        CmMsg::Dreq(r) => vec![
            ("infiniband.cm.dreq.localcommid", n(r.local_comm_id.into())),
            (
                "infiniband.cm.dreq.remotecommid",
                n(r.remote_comm_id.into()),
            ),
            (
                "infiniband.cm.req.remoteqpneecn",
                n(r.remote_qpn.value().into()),
            ),
        ],
        CmMsg::Drep(r) => vec![
            ("infiniband.cm.drsp.localcommid", n(r.local_comm_id.into())),
            (
                "infiniband.cm.drsp.remotecommid",
                n(r.remote_comm_id.into()),
            ),
        ],
        CmMsg::Mra(_) | CmMsg::SidrReq(_) | CmMsg::SidrRep(_) => vec![],
    }
}

/// A tshark value as a number ("0x.." hex, or decimal), or as it is.
fn norm(v: &str) -> String {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).map_or(v.to_string(), |x| x.to_string()),
        None => v.to_string(),
    }
}

#[test]
fn wireshark_reads_every_field_of_the_mads_we_emit() {
    if !have("tshark") {
        return;
    }
    let msgs = messages();
    let dir = scratch("cm_tshark");
    let pcap = dir.join("cm.pcap");
    let mut w = roce_capture::write::Writer::create(&pcap).unwrap();
    let mut mads = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut mad = [0u8; MAD_LEN];
        m.emit(0x0102_0304_0000_0000 | i as u64, &mut mad).unwrap();
        w.write(Duration::from_millis(i as u64), &gsi_frame(&mad, i as u32))
            .unwrap();
        mads.push(mad);
    }
    w.finish().unwrap();
    // Every frame dissects, with an ICRC computed independently.
    assert!(check_with_tshark(&pcap));
    let mut fields: Vec<&str> = vec![
        "infiniband.mad.baseversion",
        "infiniband.mad.mgmtclass",
        "infiniband.mad.classversion",
        "infiniband.mad.method",
        "infiniband.mad.transactionid",
        "infiniband.mad.attributeid",
        "infiniband.mad.data",
        "_ws.malformed",
    ];
    for m in &msgs {
        fields.extend(expected(m).iter().map(|(f, _)| *f));
    }
    fields.sort_unstable();
    fields.dedup();
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"])
        .arg(&pcap)
        .args(["-T", "fields", "-E", "occurrence=f"]);
    for f in &fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<HashMap<&str, &str>> = text
        .lines()
        .map(|l| fields.iter().copied().zip(l.split('\t')).collect())
        .collect();
    assert_eq!(rows.len(), msgs.len(), "{text}");
    for (i, ((m, row), mad)) in msgs.iter().zip(&rows).zip(&mads).enumerate() {
        let name = m.name();
        assert_eq!(row["_ws.malformed"], "", "{name} is malformed to tshark");
        assert_eq!(row["infiniband.mad.baseversion"], "0x01", "{name}");
        assert_eq!(row["infiniband.mad.mgmtclass"], "0x07", "{name}");
        assert_eq!(row["infiniband.mad.classversion"], "0x02", "{name}");
        assert_eq!(row["infiniband.mad.method"], "0x03", "{name}");
        assert_eq!(
            norm(row["infiniband.mad.transactionid"]),
            (0x0102_0304_0000_0000u64 | i as u64).to_string()
        );
        assert_eq!(
            norm(row["infiniband.mad.attributeid"]),
            m.attr_id().to_string(),
            "{name}"
        );
        let data: String = mad[24..].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            row["infiniband.mad.data"].replace(':', ""),
            data,
            "{name} data"
        );
        for (f, want) in expected(m) {
            assert_eq!(norm(row[f]), want, "{name}: {f}");
        }
    }
    // The attribute IDs Wireshark names, for the record.
    assert_eq!(
        msgs.iter().map(CmMsg::attr_id).collect::<Vec<_>>(),
        [
            attr::REQ,
            attr::REP,
            attr::RTU,
            attr::REJ,
            attr::DREQ,
            attr::DREP,
            attr::MRA,
            attr::SIDR_REQ,
            attr::SIDR_REP
        ]
    );
}
