//! DCBX over LLDP (`roce_core::wire::lldp`, issue 18) against Wireshark's LLDP
//! dissector: every TLV the port announces (Chassis and Port ID, TTL, ETS Configuration
//! and Recommendation, PFC Configuration, the DSCP entries of Application Priority)
//! must read back field for field in tshark, with no malformed or expert mark, and the
//! frames must parse back into the configuration they came from. Then two NICs on a
//! simulated link, each with the host's DCBX agent (`roce_testbed::dcbx`): the willing
//! one takes the other's settings through MODIFY_DCB, and the capture of their link
//! decodes in tshark.

use roce_core::dcb::{EtsConfig, Priorities};
use roce_core::engine::DcbConfig;
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::lldp::DcbxRepr;
use roce_sim::{LinkConfig, MemoryCapture};
use roce_testbed::dcbx::DcbxAgent;
use roce_testbed::{nic, Sim, World};
use roce_tests::{have, scratch};
use std::process::Command;
use std::time::Duration;

/// The configurations announced: the defaults, ETS 80/20 with PFC on 3 and DSCP 10 on
/// priority 1 (willing), and every class strict with PFC on 3 and 4 and DSCP 26 on 5.
fn configs() -> Vec<(DcbConfig, bool)> {
    let mut ets = DcbConfig {
        pfc_enable: 0b1000,
        ets: EtsConfig {
            strict: Priorities(0b1111_0101),
            bw: [0, 20, 0, 80, 0, 0, 0, 0],
            ..EtsConfig::STRICT
        },
        ..DcbConfig::OFF
    };
    ets.map.dscp[10] = 1;
    let mut strict = DcbConfig {
        pfc_enable: 0b1_1000,
        ets: EtsConfig::STRICT,
        ..DcbConfig::OFF
    };
    strict.map.dscp[26] = 5;
    vec![(DcbConfig::OFF, false), (ets, true), (strict, false)]
}

const FIELDS: &[&str] = &[
    "lldp.chassis.id.mac",
    "lldp.port.id.mac",
    "lldp.time_to_live",
    "lldp.ieee.802_1.subtype",
    "lldp.dcbx.ieee.willing",
    "lldp.dcbx.ieee.ets.maxtcs",
    "lldp.dcbx.ieee.pfc.numtcs",
    "lldp.dcbx.ieee.app.prio",
    "lldp.dcbx.iee.app.sf",
    "lldp.dcbx.feature.app.proto",
    "_ws.malformed",
    "_ws.expert",
];

/// Field name, then the fields of priority or class `p` for each table.
fn per_prio(p: usize) -> [String; 4] {
    [
        format!("lldp.dcbx.feature.pg.pgid_prio{p}"),
        format!("lldp.dcbx.feature.pg.per{p}"),
        format!("lldp.dcbx.ieee.ets.tsa{p}"),
        format!("lldp.dcbx.feature.pfc.prio{p}"),
    ]
}

#[test]
fn wireshark_reads_every_dcbx_field_we_emit() {
    if !have("tshark") {
        return;
    }
    let dir = scratch("lldp_tshark");
    let pcap = dir.join("lldp.pcap");
    let mut w = roce_capture::write::Writer::create(&pcap).unwrap();
    let mut sent = Vec::new();
    for (i, (cfg, willing)) in configs().into_iter().enumerate() {
        let mac = MacAddr([0x02, 0, 0, 0, 0x10, i as u8]);
        let r = DcbxRepr::from_config(mac, &cfg, willing, 120 + i as u16);
        let mut buf = [0u8; 1500];
        let n = r.emit_frame(&mut buf).unwrap();
        // Parsed back, and taken by a willing port with the defaults as they were.
        let back = DcbxRepr::parse_frame(&buf[..n]).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.to_config(&DcbConfig::OFF), Ok(cfg));
        w.write(Duration::from_millis(i as u64), &buf[..n]).unwrap();
        sent.push((mac, cfg, willing, 120 + i as u16));
    }
    w.finish().unwrap();

    let mut fields: Vec<String> = FIELDS.iter().map(|f| f.to_string()).collect();
    for p in 0..8 {
        fields.extend(per_prio(p));
    }
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(&pcap).args([
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
        "-E",
        "separator=|",
    ]);
    for f in &fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), sent.len(), "{text}");

    for (row, (mac, cfg, willing, ttl)) in rows.iter().zip(&sent) {
        let get = |name: &str| row[fields.iter().position(|f| f == name).unwrap()];
        let macs = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            mac.0[0], mac.0[1], mac.0[2], mac.0[3], mac.0[4], mac.0[5]
        );
        let w = u8::from(*willing);
        let want: Vec<(&str, String)> = vec![
            ("lldp.chassis.id.mac", macs.clone()),
            ("lldp.port.id.mac", macs),
            ("lldp.time_to_live", ttl.to_string()),
            ("lldp.ieee.802_1.subtype", "0x09,0x0a,0x0b,0x0c".into()),
            // ETS Configuration's and PFC's (the Recommendation has none).
            ("lldp.dcbx.ieee.willing", format!("{w},{w}")),
            // Eight classes are written as 0 (a 3-bit field).
            ("lldp.dcbx.ieee.ets.maxtcs", "0".into()),
            ("lldp.dcbx.ieee.pfc.numtcs", "8".into()),
            (
                "lldp.dcbx.ieee.app.prio",
                join((0..64).map(|d| cfg.map.dscp[d])),
            ),
            ("lldp.dcbx.iee.app.sf", join((0..64).map(|_| 5))),
            (
                "lldp.dcbx.feature.app.proto",
                join((0..64).map(|d| format!("0x{d:04x}"))),
            ),
            ("_ws.malformed", String::new()),
            ("_ws.expert", String::new()),
        ];
        for (f, v) in &want {
            assert_eq!(get(f), v, "{f} of {cfg:?}");
        }
        for p in 0..8 {
            let [tc, bw, tsa, pfc] = per_prio(p);
            let strict = cfg.ets.strict.contains(p as u8);
            // Both ETS TLVs: priority p in class p, its share and algorithm.
            assert_eq!(get(&tc), format!("{p},{p}"));
            let share = cfg.ets.bw[p];
            assert_eq!(get(&bw), format!("{share},{share}"), "{bw}");
            let alg = if strict { 0 } else { 2 };
            assert_eq!(get(&tsa), format!("{alg},{alg}"), "{tsa}");
            let on = u8::from(cfg.pfc_enable & 1 << p != 0);
            assert_eq!(get(&pfc), on.to_string(), "{pfc}");
        }
    }
}

fn join<T: ToString>(it: impl Iterator<Item = T>) -> String {
    it.map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// Both ports willing (802.1Qaz's tie-break, as lldpad's `pfc_sm`): the port with the
/// numerically lower MAC takes the other's settings, the higher keeps its own, whichever
/// of the two was configured.
#[test]
fn with_both_willing_the_lower_mac_yields() {
    let caps = nic::capacities(1, 1);
    let boot = |i| nic::boot(nic::Datapath::Software, false, nic::port_config(i), caps).unwrap();
    let (low, high) = if nic::port_config(0).mac < nic::port_config(1).mac {
        (0, 1)
    } else {
        (1, 0)
    };
    let (want, _) = configs()[1];
    const MS: u64 = 1_000_000;
    for configured in [high, low] {
        let mut sim = Sim::back_to_back(
            [boot(0), boot(1)],
            LinkConfig::new(100_000_000_000, 1_000),
            1,
        )
        .unwrap();
        let ctx = sim.contexts().map(Clone::clone);
        let defaults = ctx[0].query_dcb().unwrap();
        assert_ne!(defaults, want);
        ctx[configured].set_dcb(&want).unwrap();
        for (side, c) in ctx.iter().enumerate() {
            sim.node_mut(side)
                .set_dcbx(DcbxAgent::new(c.clone(), true).with_interval(MS));
        }
        for side in 0..2 {
            sim.kick(side);
        }
        sim.fabric.run_until(2 * MS + MS / 2);
        // Both end with the higher MAC's settings.
        let agreed = if configured == high { want } else { defaults };
        for (side, c) in ctx.iter().enumerate() {
            assert_eq!(
                c.query_dcb().unwrap(),
                agreed,
                "side {side} (configured: side {configured}, lower MAC: side {low})"
            );
        }
        let adopted = |i: usize| sim.node(i).dcbx().unwrap().counters.adopted;
        assert_eq!(adopted(high), 0, "the higher MAC never adopts");
        assert_eq!(adopted(low), 1, "the lower MAC adopts once");
    }
}

#[test]
fn a_willing_port_takes_its_peers_settings_over_lldp() {
    let caps = nic::capacities(1, 1);
    let boot = |i| nic::boot(nic::Datapath::Software, false, nic::port_config(i), caps).unwrap();
    let mut sim = Sim::back_to_back(
        [boot(0), boot(1)],
        LinkConfig::new(100_000_000_000, 1_000),
        1,
    )
    .unwrap();
    let capture = MemoryCapture::new();
    let tap = sim.fabric.tap(sim.link, capture.clone()).unwrap();
    // Side 0 is configured and not willing (a switch port, say); side 1 is willing.
    let (want, _) = configs()[1];
    let [a, b] = sim.contexts().map(Clone::clone);
    a.set_dcb(&want).unwrap();
    const MS: u64 = 1_000_000;
    sim.node_mut(0)
        .set_dcbx(DcbxAgent::new(a.clone(), false).with_interval(MS));
    sim.node_mut(1)
        .set_dcbx(DcbxAgent::new(b.clone(), true).with_interval(MS));
    for side in 0..2 {
        sim.kick(side);
    }
    sim.fabric.run_until(MS / 2);
    assert_eq!(
        b.query_dcb().unwrap(),
        want,
        "side 1 adopted side 0's settings"
    );
    assert_eq!(a.query_dcb().unwrap(), want, "side 0 keeps its own");
    let counters = |s: &Sim, i: usize| s.node(i).dcbx().unwrap().counters;
    assert_eq!(counters(&sim, 1).adopted, 1);
    assert_eq!(
        counters(&sim, 0).adopted,
        0,
        "side 1 is willing: side 0 never adopts"
    );
    // Side 0's host changes PFC: side 0 announces at once (not at the next interval),
    // side 1 follows.
    let mut next = want;
    next.pfc_enable = 0b1001_0000;
    a.set_dcb(&next).unwrap();
    sim.kick(0);
    sim.fabric.run_until(MS / 2 + 10_000);
    assert_eq!(b.query_dcb().unwrap(), next);
    assert_eq!(counters(&sim, 1).adopted, 2);
    // Periodic announcements: one per interval from each side.
    sim.fabric.run_until(3 * MS + MS / 4);
    let sent = [counters(&sim, 0).sent, counters(&sim, 1).sent];
    assert!(sent.iter().all(|&n| (4..=6).contains(&n)), "{sent:?}");
    assert_eq!(counters(&sim, 1).received, counters(&sim, 0).sent);
    assert_eq!(counters(&sim, 1).adopted, 2, "nothing changed since");
    sim.fabric.close_tap(tap).unwrap();

    if !have("tshark") {
        return;
    }
    let dir = scratch("lldp_sim");
    let pcap = dir.join("link.pcap");
    std::fs::write(&pcap, capture.bytes()).unwrap();
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "lldp", "-T", "fields", "-E", "occurrence=f", "-e"])
        .args(["lldp.chassis.id.mac", "-e", "lldp.dcbx.ieee.willing", "-e"])
        .args([
            "lldp.dcbx.feature.pg.per3",
            "-e",
            "lldp.dcbx.feature.pfc.prio7",
            "-e",
        ])
        .arg("_ws.malformed")
        .output()
        .expect("run tshark");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len() as u64, sent[0] + sent[1], "{text}");
    let mac = |i: usize| {
        let m = nic::port_config(i).mac;
        format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    };
    for r in &rows {
        let side = usize::from(r[0] != mac(0));
        assert_eq!(r[0], mac(side));
        assert_eq!(r[1], if side == 0 { "0" } else { "1" }, "{r:?}");
        assert_eq!(r[4], "", "malformed: {r:?}");
    }
    // Side 1 announced the defaults first (12 % for priority 3), then what it adopted
    // (80 %); side 0 announced 80 % throughout; PFC on 7 once side 0's host turned it on.
    let of = |side: usize| -> Vec<(&str, &str)> {
        rows.iter()
            .filter(|r| r[0] == mac(side))
            .map(|r| (r[2], r[3]))
            .collect()
    };
    assert!(of(0).iter().all(|&(bw, _)| bw == "80"));
    assert_eq!(of(1)[0], ("12", "0"));
    assert_eq!(of(1).last(), Some(&("80", "1")));
    assert_eq!(of(0).last(), Some(&("80", "1")));
}
