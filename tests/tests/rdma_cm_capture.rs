//! What two NICs put on the wire when `roce_host::rdma_cm` connects them, sends over
//! the connection and disconnects, checked by Wireshark: every frame dissects and its
//! ICRC verifies (computed independently), the MADs are CM messages from QP1 to QP1 in
//! protocol order, and the REQ's private data starts with the RDMA CM IP header for
//! the two addresses.

use roce_core::engine::PortConfig;
use roce_core::memory::AccessFlags;
use roce_core::transport::{ipv4_gid, QpType, SendFlags, SendWr, WrOp};
use roce_device::{Capacities, LocalNic};
use roce_host::rdma_cm::{CmAgent, RdmaCmEvent};
use roce_host::Context;
use roce_tests::{check_with_tshark, have, pump_pair, scratch};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Two NICs connect through `rdma_cm`, one WRITE goes over, they disconnect: the
/// frames as a pcap named `name`.
fn capture_connection(name: &str) -> PathBuf {
    let nic = |i: u8| {
        let cfg = PortConfig::new([2, 0, 0, 0, 0, i], ipv4_gid([10, 0, 0, i]));
        LocalNic::new(cfg, Capacities::Firmware)
    };
    let (na, nb) = (nic(1), nic(2));
    let (ca, cb) = (
        Context::open(na.clone()).unwrap(),
        Context::open(nb.clone()).unwrap(),
    );
    let (mut a, mut b) = (CmAgent::new(&ca).unwrap(), CmAgent::new(&cb).unwrap());
    let ((ga, ma), (gb, mb)) = (ca.port_addr(), cb.port_addr());
    a.add_neighbour(gb, mb);
    b.add_neighbour(ga, ma);
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
        for _ in 0..6 {
            pump_pair([&na, &nb], log);
            a.progress().unwrap();
            b.progress().unwrap();
        }
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

    let pcap = scratch("rdma_cm_capture").join(name);
    let mut w = roce_capture::write::Writer::create(&pcap).unwrap();
    for (i, f) in log.iter().enumerate() {
        w.write(Duration::from_micros(i as u64), f).unwrap();
    }
    w.finish().unwrap();
    pcap
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
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args([
            "-Y",
            "infiniband.mad",
            "-T",
            "fields",
            "-E",
            "occurrence=f",
            "-e",
            "infiniband.bth.destqp",
            "-e",
            "infiniband.deth.srcqp",
            "-e",
            "infiniband.mad.attributeid",
            "-e",
            "infiniband.cm.req.serviceid",
            "-e",
            "infiniband.cm.req.ip_cm.ipv",
            "-e",
            "infiniband.cm.req.ip_cm.sip4",
            "-e",
            "infiniband.cm.req.ip_cm.dip4",
            "-e",
            "infiniband.cm.req.ip_cm.private",
        ])
        .output()
        .expect("tshark runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let ids: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(
        ids,
        ["0x0010", "0x0013", "0x0014", "0x0015", "0x0016"],
        "REQ, REP, RTU, DREQ, DREP:\n{text}"
    );
    for r in &rows {
        // BTH destination QP (24 bits) and DETH source QP (shown as 32 bits): both 1.
        assert_eq!(
            (r[0], r[1]),
            ("0x000001", "0x00000001"),
            "QP1 to QP1: {r:?}"
        );
    }
    // rdma_cm_service_id(TCP, 7471): 0x0000_0000_0106 << 16 | port.
    assert_eq!(rows[0][3], "0x0000000001061d2f", "{text}");
    assert_eq!(
        (rows[0][4], rows[0][5], rows[0][6]),
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
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&pcap)
            .args(["-Y", filter, "-T", "fields", "-E", "occurrence=f", "-e", f])
            .output()
            .expect("tshark runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().next().unwrap_or_default().to_string()
    };
    let rep_psn = field("infiniband.cm.rep.startpsn", "infiniband.cm.rep.startpsn");
    let first_write = field("infiniband.reth", "infiniband.bth.psn");
    let rep_psn = u32::from_str_radix(rep_psn.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(first_write.parse::<u32>().unwrap(), rep_psn);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
