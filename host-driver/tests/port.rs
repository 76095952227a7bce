//! The port's commands of ABI 1.1 (DCB's maps and ETS: 1.3), from the host, on two NICs
//! of every model: the MAC and MTU, a GID table with IPv4-mapped and IPv6 entries, PFC
//! priorities, priority maps and ETS, DCQCN for the
//! port and per QP, and the counters (rxe's and mlx5's names). Each setting is read back
//! and seen at work on the wire; a bad one is refused and changes nothing.

mod common;

use common::{models, Model};
use roce_abi::{CmdEntry, CmdOp, CmdStatus, DcbArg, PortArg};
use roce_core::cc::{CcConfig, ONE};
use roce_core::dcb::{EtsConfig, PfcThresholds, Priorities, RX_BUFFER_BYTES};
use roce_core::engine::{DcbConfig, GidEntry};
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{ipv4_gid, Mtu, QpType, SendWr, WcStatus, WrOp};
use roce_core::wire::{self, L3Repr};
use roce_device::NicModel;
use roce_host::{
    CompletionQueue, ConnectOptions, Context, Error, MemoryRegion, QpEndpoint, QueuePair,
};
use std::rc::Rc;
use zerocopy::little_endian::U32;

struct Side {
    nic: Rc<dyn NicModel>,
    ctx: Context,
    cq: CompletionQueue,
    mr: MemoryRegion,
    pd: roce_host::ProtectionDomain,
}

fn side(m: Model, last: u8) -> Side {
    let nic = m.boot(last).model;
    let ctx = Context::open(nic.clone()).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let mr = pd.reg_mr(4096, access).unwrap();
    Side {
        nic,
        ctx,
        cq,
        mr,
        pd,
    }
}

fn qp(s: &Side) -> QueuePair {
    s.pd.create_qp(QpType::Rc, &s.cq, &s.cq).build().unwrap()
}

fn status(e: Error) -> CmdStatus {
    match e {
        Error::Command { status, .. } => status,
        other => panic!("expected a command error, got {other:?}"),
    }
}

/// Moves frames both ways until both NICs are idle, moving both clocks on to the next
/// timer (a paced QP's next packet, say) while it is due within a millisecond;
/// `on_a_to_b` may change each frame A sends; every frame A sent is kept.
fn run(a: &Side, b: &Side, mut on_a_to_b: impl FnMut(&mut Vec<u8>)) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    let mut buf = vec![0u8; 8192];
    let horizon = a.nic.now() + 1_000_000;
    loop {
        let mut busy = a.nic.poll() | b.nic.poll();
        while let Some(n) = a.nic.transmit_frame(&mut buf) {
            let mut f = buf[..n].to_vec();
            on_a_to_b(&mut f);
            b.nic.receive_frame(&f);
            sent.push(f);
            busy = true;
        }
        while let Some(n) = b.nic.transmit_frame(&mut buf) {
            a.nic.receive_frame(&buf[..n]);
            busy = true;
        }
        if !busy {
            let next = [a.nic.poll_timeout(), b.nic.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= horizon => {
                    a.nic.set_time(t);
                    b.nic.set_time(t);
                }
                _ => return sent,
            }
        }
    }
}

/// A signaled 64-byte WRITE from A's region to B's; it must complete.
fn write(a: &Side, qa: &QueuePair, b: &Side, id: u64) {
    let wr = SendWr::new(
        id,
        WrOp::RdmaWrite {
            remote_addr: b.mr.addr(),
            rkey: b.mr.rkey(),
        },
    )
    .sge(a.mr.addr(), 64, a.mr.lkey())
    .flags(roce_core::transport::SendFlags::SIGNALED);
    qa.post_send(&wr).unwrap();
}

fn completes(s: &Side, id: u64) {
    let wc = s.cq.wait(1, 10).unwrap();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(id, WcStatus::Success)]
    );
}

#[test]
fn port_mac_and_active_mtu_are_set_read_back_and_used() {
    for m in models() {
        port_mac_and_mtu(m);
    }
}

fn port_mac_and_mtu(m: Model) {
    let (a, b) = (side(m, 1), side(m, 2));
    let before = a.ctx.query_port().unwrap();
    assert_eq!(before.mac, [2, 0, 0, 0, 0, 1]);
    assert_eq!(before.active_mtu, Mtu::Mtu4096);
    assert_eq!(before.gid_tbl_len, 16);
    // A multicast MAC and an unknown mask bit are refused, and change nothing.
    assert_eq!(
        status(a.ctx.set_port_mac([3, 0, 0, 0, 0, 9]).unwrap_err()),
        CmdStatus::BadParam
    );
    let mut e = CmdEntry::default();
    roce_abi::set_payload(
        &mut e,
        &PortArg {
            mask: U32::new(1 << 7),
            ..PortArg::default()
        },
    );
    assert_eq!(
        status(
            a.ctx
                .raw_command(CmdOp::ModifyPort as u16, &mut e)
                .unwrap_err()
        ),
        CmdStatus::BadParam
    );
    assert_eq!(a.ctx.query_port().unwrap(), before);

    let mac = [2, 0, 0, 0, 0xAA, 1];
    a.ctx.set_port_mac(mac).unwrap();
    a.ctx.set_active_mtu(Mtu::Mtu1024).unwrap();
    let now = a.ctx.query_port().unwrap();
    assert_eq!((now.mac, now.active_mtu), (mac, Mtu::Mtu1024));
    assert_eq!(a.ctx.port_addr().1, mac, "the driver's view follows");

    // A path MTU above the active MTU is refused; at it, traffic flows from the new MAC.
    let (qa, qb) = (qp(&a), qp(&b));
    let too_big = ConnectOptions {
        mtu: Mtu::Mtu2048,
        ..ConnectOptions::default()
    };
    let err = qa.connect(&qb.endpoint(Psn::new(1)), Psn::new(1), &too_big);
    assert_eq!(status(err.unwrap_err()), CmdStatus::IllegalTransition);
    let (qa, qb) = (qp(&a), qp(&b));
    let o = ConnectOptions::default();
    qa.connect(&qb.endpoint(Psn::new(1)), Psn::new(1), &o)
        .unwrap();
    qb.connect(&qa.endpoint(Psn::new(1)), Psn::new(1), &o)
        .unwrap();
    write(&a, &qa, &b, 7);
    let sent = run(&a, &b, |_| {});
    completes(&a, 7);
    assert!(!sent.is_empty());
    assert!(
        sent.iter().all(|f| f[6..12] == mac),
        "source MAC of every frame"
    );
}

fn v6(last: u8) -> [u8; 16] {
    [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]
}

#[test]
fn the_gid_table_holds_ipv4_and_ipv6_entries() {
    for m in models() {
        gid_table(m);
    }
}

fn gid_table(m: Model) {
    let (a, b) = (side(m, 1), side(m, 2));
    assert_eq!(
        a.ctx.query_gid(0).unwrap(),
        Some(GidEntry::new(ipv4_gid([10, 0, 0, 1])))
    );
    assert_eq!(a.ctx.query_gid(1).unwrap(), None);
    assert_eq!(
        status(a.ctx.query_gid(16).unwrap_err()),
        CmdStatus::BadParam
    );
    for (s, last) in [(&a, 1), (&b, 2)] {
        s.ctx.set_gid(3, Some(GidEntry::new(v6(last)))).unwrap();
    }
    assert_eq!(a.ctx.query_gid(3).unwrap(), Some(GidEntry::new(v6(1))));
    // Beyond the table, or the zero GID: refused.
    assert_eq!(
        status(a.ctx.set_gid(16, Some(GidEntry::new(v6(9)))).unwrap_err()),
        CmdStatus::BadParam
    );
    assert_eq!(
        status(a.ctx.set_gid(4, Some(GidEntry::new([0; 16]))).unwrap_err()),
        CmdStatus::BadParam
    );
    assert_eq!(a.ctx.query_gid(4).unwrap(), None);

    // One QP pair over IPv4 (index 0), one over IPv6 (index 3), on the same ports.
    let o = ConnectOptions::default();
    let o6 = ConnectOptions { sgid_index: 3, ..o };
    let ep6 = |q: &QueuePair, last| QpEndpoint {
        gid: v6(last),
        ..q.endpoint(Psn::new(5))
    };
    let (qa, qb) = (qp(&a), qp(&b));
    qa.connect(&qb.endpoint(Psn::new(5)), Psn::new(5), &o)
        .unwrap();
    qb.connect(&qa.endpoint(Psn::new(5)), Psn::new(5), &o)
        .unwrap();
    let (qa6, qb6) = (qp(&a), qp(&b));
    qa6.connect(&ep6(&qb6, 2), Psn::new(5), &o6).unwrap();
    qb6.connect(&ep6(&qa6, 1), Psn::new(5), &o6).unwrap();
    // An index whose entry is of the other IP version is refused.
    let qx = qp(&a);
    let err = qx.connect(&qb.endpoint(Psn::new(5)), Psn::new(5), &o6);
    assert_eq!(status(err.unwrap_err()), CmdStatus::IllegalTransition);

    for (q, id, want_v4) in [(&qa, 1, true), (&qa6, 2, false)] {
        write(&a, q, &b, id);
        let sent = run(&a, &b, |_| {});
        completes(&a, id);
        let pkt = wire::parse(sent.last().unwrap()).unwrap();
        let v4 = matches!(pkt.headers().l3, L3Repr::Ipv4(_));
        assert_eq!(v4, want_v4, "WRITE {id}");
        let (src, dst) = pkt.gids();
        if !want_v4 {
            assert_eq!((src, dst), (v6(1), v6(2)));
        }
    }

    // An entry a connected QP sends from stays while the QP lives: refused, unchanged.
    assert_eq!(
        status(b.ctx.set_gid(3, None).unwrap_err()),
        CmdStatus::Busy,
        "{m:?}"
    );
    assert_eq!(b.ctx.query_gid(3).unwrap(), Some(GidEntry::new(v6(2))));
    // B destroys that QP and drops its IPv6 address: A's next WRITE over IPv6 is not
    // for B any more.
    drop(qb6);
    b.ctx.set_gid(3, None).unwrap();
    assert_eq!(b.ctx.query_gid(3).unwrap(), None);
    let before = b.ctx.query_counters().unwrap().engine.rcvd_not_for_us;
    write(&a, &qa6, &b, 3);
    run(&a, &b, |_| {});
    assert!(b.ctx.query_counters().unwrap().engine.rcvd_not_for_us > before);
}

#[test]
fn pfc_priorities_are_set_and_read_back() {
    for m in models() {
        let a = side(m, 1);
        assert_eq!(
            a.ctx.query_dcb().unwrap().pfc_enable,
            0,
            "{m:?}: off by default"
        );
        a.ctx.set_pfc(0b0100_1000).unwrap();
        assert_eq!(a.ctx.query_dcb().unwrap().pfc_enable, 0b0100_1000);
        // A field this NIC does not know (a later version's mask bit) is refused.
        let mut e = CmdEntry::default();
        roce_abi::set_payload(
            &mut e,
            &DcbArg {
                mask: U32::new(DcbArg::PFC | 1 << 7),
                ..DcbArg::default()
            },
        );
        assert_eq!(
            status(
                a.ctx
                    .raw_command(CmdOp::ModifyDcb as u16, &mut e)
                    .unwrap_err()
            ),
            CmdStatus::BadParam
        );
        assert_eq!(a.ctx.query_dcb().unwrap().pfc_enable, 0b0100_1000);
    }
}

#[test]
fn dcb_maps_and_ets_are_set_whole_and_read_back() {
    for m in models() {
        let a = side(m, 1);
        // The NIC's own receive buffer: the SoC's DCB block has 16 KiB (`nic_soc`'s
        // DCB_BUF_BYTES), the other models the DCB block's default 64 KiB.
        let buf = a.ctx.dcb_rx_buffer().unwrap();
        let want_buf = if m == Model::Soc {
            16_384
        } else {
            RX_BUFFER_BYTES
        };
        assert_eq!(buf, want_buf, "{m:?}");
        // Unconfigured: DSCP d is priority d >> 3, PCP p is p, ETS with equal shares,
        // PFC thresholds at a quarter and an eighth of the buffer.
        let d = a.ctx.query_dcb().unwrap();
        let booted = DcbConfig {
            pfc_thresholds: PfcThresholds::for_buffer(buf),
            ..DcbConfig::OFF
        };
        assert_eq!(d, booted, "{m:?}");
        assert_eq!(d.map.dscp[48], 6, "{m:?}: the CNPs' DSCP on priority 6");
        assert_eq!(d.ets.bw.iter().map(|&b| u32::from(b)).sum::<u32>(), 100);
        // One configuration as DCBX would hand it over: PFC on 3, priority 6 strict,
        // ETS 80/20 between priorities 3 and 1 (the rest 0 % would break the rules, so
        // they are strict too), DSCP 26 -> 3, DSCP 10 -> 1, PCP 5 -> 3.
        let mut want = DcbConfig {
            pfc_enable: 0b1000,
            ets: EtsConfig {
                strict: Priorities(0b1111_0101),
                bw: [0, 20, 0, 80, 0, 0, 0, 0],
                ..EtsConfig::STRICT
            },
            ..DcbConfig::OFF
        };
        want.map.dscp[10] = 1;
        want.map.pcp[5] = 3;
        // ABI 1.4: the receive buffer's PFC thresholds and the egress map (priority 3
        // tagged as PCP 5, the inverse of the PCP map's entry above).
        want.pfc_thresholds = PfcThresholds {
            xoff: buf * 5 / 16,
            xon: buf * 3 / 16,
            quanta: 3_000,
        };
        want.prio_pcp[3] = 5;
        want.prio_pcp[5] = 3;
        a.ctx.set_dcb(&want).unwrap();
        assert_eq!(a.ctx.query_dcb().unwrap(), want, "{m:?}");
        // The SoC's firmware keeps its live configuration in the soft core's RAM, and
        // `SocNic::port_config` gives the boot configuration (its doc): there the
        // query above is the read-back; `device/tests/soc.rs`'s PFC test checks the
        // SoC's DCB block against the model.
        if m != Model::Soc {
            assert_eq!(a.nic.port_config().dcb, want, "{m:?}: the NIC runs with it");
        }
        // Refused, and nothing changes: shares summing to 90, a map entry beyond 7.
        let mut bad = want;
        bad.ets.bw[3] = 70;
        assert_eq!(
            status(a.ctx.set_dcb(&bad).unwrap_err()),
            CmdStatus::BadParam
        );
        let mut bad = want;
        bad.map.dscp[0] = 8;
        assert_eq!(
            status(a.ctx.set_dcb(&bad).unwrap_err()),
            CmdStatus::BadParam
        );
        // XON not below XOFF, XOFF beyond the NIC's buffer (on the SoC that includes
        // thresholds a 64 KiB buffer would run).
        for (xoff, xon) in [(5_000, 5_000), (buf + 1, 1_000), (20_000, 12_000)] {
            if xoff <= buf && xon < xoff {
                continue;
            }
            let mut bad = want;
            bad.pfc_thresholds.xoff = xoff;
            bad.pfc_thresholds.xon = xon;
            assert_eq!(
                status(a.ctx.set_dcb(&bad).unwrap_err()),
                CmdStatus::BadParam
            );
        }
        assert_eq!(a.ctx.query_dcb().unwrap(), want, "{m:?}");
        // set_pfc changes PFC alone.
        a.ctx.set_pfc(0b1001_0000).unwrap();
        want.pfc_enable = 0b1001_0000;
        assert_eq!(a.ctx.query_dcb().unwrap(), want, "{m:?}");
    }
}

/// ABI 1.6: the priority assignment table (802.1Qaz, dcbnl's `prio_tc`) through
/// QUERY_ETS/MODIFY_ETS on every model, alone and as part of `set_dcb`; a refused ETS
/// changes nothing, and a `set_dcb` the NIC refuses after its MODIFY_ETS puts the old
/// ETS back.
#[test]
fn ets_priority_assignment_is_set_through_the_abi_and_read_back() {
    for m in models() {
        let a = side(m, 1);
        let booted = a.ctx.query_ets().unwrap();
        assert_eq!(booted, EtsConfig::EQUAL, "{m:?}");
        // Priorities 1 and 2 share class 1 (ETS 50 %) against class 3 (ETS 50 %), the
        // other classes strict.
        let two = EtsConfig {
            strict: Priorities(0b1111_0101),
            bw: [0, 50, 0, 50, 0, 0, 0, 0],
            prio_tc: [0, 1, 1, 3, 4, 5, 6, 7],
        };
        a.ctx.set_ets(&two).unwrap();
        assert_eq!(a.ctx.query_ets().unwrap(), two, "{m:?}");
        assert_eq!(a.ctx.query_dcb().unwrap().ets, two, "{m:?}");
        if m != Model::Soc {
            assert_eq!(
                a.nic.port_config().dcb.ets,
                two,
                "{m:?}: the NIC runs with it"
            );
        }
        // Refused, nothing changed: a class above 7, shares summing to 90.
        for bad in [
            EtsConfig {
                prio_tc: [0, 1, 1, 3, 4, 5, 6, 8],
                ..two
            },
            EtsConfig {
                bw: [0, 50, 0, 40, 0, 0, 0, 0],
                ..two
            },
        ] {
            assert_eq!(
                status(a.ctx.set_ets(&bad).unwrap_err()),
                CmdStatus::BadParam
            );
        }
        assert_eq!(a.ctx.query_ets().unwrap(), two, "{m:?}");
        // The whole DCB configuration with a table: priorities 3 and 5 in class 3.
        let mut want = a.ctx.query_dcb().unwrap();
        want.pfc_enable = 0b0010_1000;
        want.ets.prio_tc = [0, 1, 2, 3, 4, 3, 6, 7];
        want.ets.strict = Priorities(0b1111_0110);
        want.ets.bw = [30, 0, 0, 70, 0, 0, 0, 0];
        a.ctx.set_dcb(&want).unwrap();
        assert_eq!(a.ctx.query_dcb().unwrap(), want, "{m:?}");
        if m != Model::Soc {
            assert_eq!(a.nic.port_config().dcb, want, "{m:?}: the NIC runs with it");
        }
        // A valid ETS with a map entry beyond 7: MODIFY_ETS is taken, MODIFY_DCB
        // refused, and the ETS before it is back.
        let mut bad = want;
        bad.ets = two;
        bad.map.dscp[3] = 9;
        assert_eq!(
            status(a.ctx.set_dcb(&bad).unwrap_err()),
            CmdStatus::BadParam
        );
        assert_eq!(a.ctx.query_dcb().unwrap(), want, "{m:?}");
    }
}

/// Marks a RoCEv2-over-IPv4 frame CE (the ICRC does not cover the ECN bits; the IPv4
/// header checksum does, and is recomputed).
fn mark_ce(f: &mut [u8]) {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return;
    }
    f[15] |= 0b11;
    f[24] = 0;
    f[25] = 0;
    let sum: u32 = f[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xFFFF) + (sum >> 16);
    let c = !((folded & 0xFFFF) + (folded >> 16)) as u16;
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn dcqcn_is_configured_per_port_and_switched_per_qp() {
    for m in models() {
        dcqcn(m);
    }
}

fn dcqcn(m: Model) {
    let (a, b) = (side(m, 1), side(m, 2));
    assert_eq!(a.ctx.query_cc().unwrap(), CcConfig::default());
    let cc = CcConfig::dcqcn(25_000_000_000);
    for s in [&a, &b] {
        s.ctx.set_cc(&cc).unwrap();
    }
    assert_eq!(a.ctx.query_cc().unwrap(), cc);
    // g above 1.0 is refused; the setting stays.
    let mut bad = cc;
    bad.dcqcn.g = ONE + 1;
    assert_eq!(status(a.ctx.set_cc(&bad).unwrap_err()), CmdStatus::BadParam);
    assert_eq!(a.ctx.query_cc().unwrap(), cc);

    // QPs created now have the reaction point on; one is switched off.
    let (qa, qb, qoff) = (qp(&a), qp(&b), qp(&a));
    assert!(qa.query_cc().unwrap().rp_enabled);
    qoff.set_cc(false).unwrap();
    assert!(!qoff.query_cc().unwrap().rp_enabled);
    assert_eq!(qoff.query_cc().unwrap().rate, 25_000_000_000);
    let o = ConnectOptions::default();
    qa.connect(&qb.endpoint(Psn::new(9)), Psn::new(9), &o)
        .unwrap();
    qb.connect(&qa.endpoint(Psn::new(9)), Psn::new(9), &o)
        .unwrap();

    // Every frame from A arrives CE-marked: B's notification point answers with a CNP,
    // A's reaction point cuts the QP's rate.
    for id in 0..3 {
        write(&a, &qa, &b, id);
        let mut ecn = Vec::new();
        run(&a, &b, |f| {
            ecn.push(f[15] & 3);
            mark_ce(f);
        });
        // The QP's frames leave ECN-capable: ECT(0).
        assert!(!ecn.is_empty() && ecn.iter().all(|&e| e == 0b10), "{ecn:?}");
        completes(&a, id);
    }
    let (ia, ib) = (qa.query_cc().unwrap(), qb.query_cc().unwrap());
    assert!(ib.np_ecn_marked_roce_packets >= 3, "{ib:?}");
    assert!(ib.np_cnp_sent >= 1, "{ib:?}");
    assert_eq!(ia.rp_cnp_handled, ib.np_cnp_sent);
    // The rate is cut and stays below line rate for a while; the SoC's clock runs on
    // its own while the host waits (each poll runs its firmware until idle), so there
    // DCQCN's timers may already have brought it back.
    if m != Model::Soc {
        assert!(ia.rate < 25_000_000_000, "{ia:?}");
    }
    // The port counters are the sums of the QPs'.
    let (ca, cb) = (
        a.ctx.query_counters().unwrap().engine,
        b.ctx.query_counters().unwrap().engine,
    );
    assert_eq!(cb.np_cnp_sent, ib.np_cnp_sent);
    assert_eq!(cb.np_ecn_marked_roce_packets, ib.np_ecn_marked_roce_packets);
    assert_eq!(ca.rp_cnp_handled, ia.rp_cnp_handled);
    // A QP that is not there has no counters.
    assert_eq!(
        status(
            a.ctx
                .query_qp_cc(roce_core::num::Qpn::new(0x7777))
                .unwrap_err()
        ),
        CmdStatus::BadHandle
    );
}

#[test]
fn counters_are_read_by_name() {
    for m in models() {
        let (a, b) = (side(m, 1), side(m, 2));
        let (qa, qb) = (qp(&a), qp(&b));
        let o = ConnectOptions::default();
        qa.connect(&qb.endpoint(Psn::new(3)), Psn::new(3), &o)
            .unwrap();
        qb.connect(&qa.endpoint(Psn::new(3)), Psn::new(3), &o)
            .unwrap();
        write(&a, &qa, &b, 1);
        let sent = run(&a, &b, |_| {});
        completes(&a, 1);
        let (ca, cb) = (
            a.ctx.query_counters().unwrap(),
            b.ctx.query_counters().unwrap(),
        );
        // One WRITE packet out of A, into B; B's ACK back.
        assert_eq!(ca.engine.sent_pkts, sent.len() as u64);
        assert_eq!(cb.engine.rcvd_pkts, sent.len() as u64);
        assert_eq!(ca.engine.rcvd_pkts, cb.engine.sent_pkts);
        assert_eq!(ca.runtime.send_wqes, 1, "{m:?}");
        assert_eq!(cb.runtime.cqes, 0, "{m:?}");
        let named: Vec<_> = ca.named().collect();
        assert_eq!(named[0], ("sent_pkts", ca.engine.sent_pkts));
        assert!(named.contains(&("retransmitted_pkts", 0)));
        assert!(named.contains(&("commands", ca.runtime.commands)));
        // The device reports this ABI (1.1 or later: it has the port's commands).
        let v = roce_abi::Version(a.nic.read_reg(roce_abi::reg::VERSION));
        assert_eq!(
            (v.major(), v.minor()),
            (roce_abi::ABI_MAJOR, roce_abi::ABI_MINOR)
        );
        assert!(v.minor() >= 1);
    }
}

#[test]
fn a_gid_on_a_vlan_tags_its_frames_and_takes_frames_of_that_vlan_only() {
    for m in models() {
        gid_on_a_vlan(m);
    }
}

fn gid_on_a_vlan(m: Model) {
    let (a, b) = (side(m, 1), side(m, 2));
    for (s, last) in [(&a, 1), (&b, 2)] {
        s.ctx
            .set_gid(3, Some(GidEntry::with_vlan(v6(last), 100)))
            .unwrap();
    }
    assert_eq!(
        a.ctx.query_gid(3).unwrap(),
        Some(GidEntry::with_vlan(v6(1), 100))
    );
    // VID 0 (a priority tag) and 4095 (reserved) are no VLAN: refused.
    for vid in [0, 4095] {
        assert_eq!(
            status(
                a.ctx
                    .set_gid(4, Some(GidEntry::with_vlan(v6(9), vid)))
                    .unwrap_err()
            ),
            CmdStatus::BadParam
        );
    }
    let o6 = ConnectOptions {
        sgid_index: 3,
        ..ConnectOptions::default()
    };
    let ep6 = |q: &QueuePair, last| QpEndpoint {
        gid: v6(last),
        ..q.endpoint(Psn::new(5))
    };
    let (qa, qb) = (qp(&a), qp(&b));
    qa.connect(&ep6(&qb, 2), Psn::new(5), &o6).unwrap();
    qb.connect(&ep6(&qa, 1), Psn::new(5), &o6).unwrap();
    write(&a, &qa, &b, 1);
    let sent = run(&a, &b, |_| {});
    completes(&a, 1);
    for f in &sent {
        let vid = wire::parse(f).unwrap().vlan().map(|v| v.vid);
        assert_eq!(vid, Some(100), "{m:?}");
    }
    // The same frames with the tag stripped are not for B's address: dropped, counted.
    let before = b.ctx.query_counters().unwrap().engine.rcvd_not_for_us;
    write(&a, &qa, &b, 2);
    run(&a, &b, |f| {
        if f[12..14] == [0x81, 0x00] {
            f.drain(12..16);
        }
    });
    assert!(
        b.ctx.query_counters().unwrap().engine.rcvd_not_for_us > before,
        "{m:?}"
    );
}
