//! What the `abi` target knows of the port's configuration commands (ABI 1.1, opcodes
//! 12..=22, and 1.6's QUERY_ETS/MODIFY_ETS, 30 and 31; `docs/abi.md`) and checks in
//! every entry the NIC writes back:
//! * a MODIFY's status is the one `docs/abi.md`'s rules give, worked out here from the
//!   payload: `BadParam` for unknown mask bits or flags and out-of-range values (among
//!   them a PFC XOFF above the receive buffer, a priority in a traffic class above 7, an
//!   algorithm neither strict nor ETS, shares against 802.1Qaz), `Busy`
//!   for a new MAC or a new GID entry 0 (the victim's QPs are always connected and
//!   use both), else `Ok`;
//! * a QUERY answers what the last successful MODIFY set (a failed one changed nothing);
//!   MODIFY_DCB's ETS and MODIFY_ETS set the same classes, so QUERY_DCB and QUERY_ETS
//!   both answer the last of either;
//! * MODIFY_QP_CC then QUERY_QP_CC of the same QP agree on the reaction point;
//! * QUERY_COUNTERS of the port says how many counters the set has, and no port counter
//!   ever decreases.

use roce_core::cc::ONE;
use roce_core::dcb::RX_BUFFER_BYTES;
use roce_core::engine::{PortConfig, GID_TABLE_LEN};
use roce_firmware::abi::{
    self, CcArg, CmdEntry, CmdOp, CmdStatus, CounterScope, DcbArg, EtsArg, GidArg, PortArg,
    QpCcArg, QueryCountersArg, PORT_COUNTERS, QP_COUNTERS,
};
use zerocopy::IntoBytes;

/// The port as the host configured it (learnt from the NIC's first answers, then kept).
#[derive(Clone, Debug, Default)]
pub struct PortModel {
    pub mac: [u8; 6],
    pub mtu: u8,
    /// Per index: the GID, its VLAN (`GidArg::NO_VLAN`: untagged) and its
    /// `roce_version`.
    pub gids: [Option<([u8; 16], u16, u8)>; GID_TABLE_LEN],
    /// QUERY_DCB's answer: the last settings set.
    pub dcb: DcbArg,
    /// The traffic class of each priority (ABI 1.6, MODIFY_ETS; MODIFY_DCB leaves it).
    /// Each class's algorithm and share are `dcb.ets_strict` and `dcb.ets_bw`.
    pub prio_tc: [u8; 8],
    /// QUERY_CC's answer: the last configuration set.
    pub cc: CcArg,
    /// Per QPN, the reaction point MODIFY_QP_CC last set (forgotten when the QP goes).
    pub qp_rp: Vec<(u32, bool)>,
    /// The largest value seen so far of each port counter.
    pub counters: Vec<u64>,
}

fn status(e: &CmdEntry) -> Option<CmdStatus> {
    CmdStatus::from_u32(e.status.get())
}

/// The wire value of `enum ibv_mtu` a port may be set to (256..4096).
fn mtu_ok(mtu: u8) -> bool {
    (1..=5).contains(&mtu)
}

impl PortModel {
    /// The port as the NIC booted with `cfg`.
    pub fn boot(cfg: &PortConfig) -> Self {
        let mut gids = [None; GID_TABLE_LEN];
        for (i, g) in gids.iter_mut().enumerate() {
            *g = cfg.gids.get(i as u8).map(|e| {
                let arg = GidArg::from_entry(i as u8, Some(e));
                (e.gid, arg.vlan_id.get(), arg.roce_version)
            });
        }
        Self {
            mac: cfg.mac,
            mtu: cfg.active_mtu as u8,
            gids,
            // The fuzzed NIC's datapath has the default DCB block's buffer.
            dcb: DcbArg::from_config(&cfg.dcb, RX_BUFFER_BYTES),
            prio_tc: cfg.dcb.ets.prio_tc,
            cc: CcArg::from_config(&cfg.cc),
            qp_rp: Vec::new(),
            counters: vec![0; PORT_COUNTERS.len()],
        }
    }

    /// QUERY_ETS's answer: the classes of the priorities, and each class's algorithm and
    /// share as the last MODIFY_ETS or MODIFY_DCB set them (dcbnl's `ieee_ets`).
    pub fn ets(&self) -> EtsArg {
        EtsArg {
            ets_cap: 8,
            reserved: [0; 7],
            prio_tc: self.prio_tc,
            tc_tsa: std::array::from_fn(|t| {
                if self.dcb.ets_strict & (1 << t) != 0 {
                    EtsArg::TSA_STRICT
                } else {
                    EtsArg::TSA_ETS
                }
            }),
            tc_tx_bw: self.dcb.ets_bw,
        }
    }

    /// The bytes a successful QUERY_COUNTERS of the port wrote: (host address, values).
    pub fn counters_written(e: &CmdEntry) -> Option<(u64, usize)> {
        if CmdOp::from_u16(e.opcode.get()) != Some(CmdOp::QueryCounters)
            || status(e) != Some(CmdStatus::Ok)
        {
            return None;
        }
        let a = abi::payload::<QueryCountersArg>(e);
        if a.scope != CounterScope::Port as u8 {
            return None;
        }
        let n = PORT_COUNTERS.len();
        let first = usize::from(a.first.get()).min(n);
        let count = usize::from(a.count.get()).min(n - first);
        Some((a.addr.get(), count))
    }

    /// Checks one entry the NIC wrote back (any status) and learns from it; `values` are
    /// the counters a port QUERY_COUNTERS wrote ([`PortModel::counters_written`]).
    pub fn check(&mut self, e: &CmdEntry, values: Option<&[u64]>) {
        let Some(op) = CmdOp::from_u16(e.opcode.get()) else {
            return;
        };
        let got = status(e);
        let ok = got == Some(CmdStatus::Ok);
        match op {
            CmdOp::ModifyPort => {
                let a = abi::payload::<PortArg>(e);
                let mask = a.mask.get();
                let bad = mask & !PortArg::ALL != 0
                    || (mask & PortArg::MAC != 0 && (a.mac[0] & 1 != 0 || a.mac == [0; 6]))
                    || (mask & PortArg::MTU != 0 && !mtu_ok(a.active_mtu));
                let new_mac = mask & PortArg::MAC != 0 && a.mac != self.mac;
                expect(op, got, bad, new_mac);
                if ok && mask & PortArg::MTU != 0 {
                    self.mtu = a.active_mtu;
                }
            }
            CmdOp::QueryPort if ok => {
                let a = abi::payload::<PortArg>(e);
                assert_eq!(
                    (a.mask.get(), a.mac, a.active_mtu),
                    (PortArg::ALL, self.mac, self.mtu),
                    "QUERY_PORT (mask, MAC, MTU) against what was set"
                );
            }
            CmdOp::ModifyGid => {
                let a = abi::payload::<GidArg>(e);
                let index = usize::from(a.index.get());
                let valid = a.flags & GidArg::VALID != 0;
                let bad = index >= GID_TABLE_LEN
                    || a.flags & !GidArg::VALID != 0
                    || (valid
                        && (![GidArg::ROCE_V1, GidArg::ROCE_V2].contains(&a.roce_version)
                            || !vlan_ok(a.vlan_id.get())
                            || a.gid == [0; 16]));
                let entry = valid.then_some((a.gid, a.vlan_id.get(), a.roce_version));
                // Entry 0 is the victim's QPs' source.
                let busy = index == 0 && entry != self.gids[0];
                expect(op, got, bad, busy);
                if ok {
                    self.gids[index] = entry;
                }
            }
            CmdOp::QueryGid => {
                let a = abi::payload::<GidArg>(e);
                let index = usize::from(a.index.get());
                if index >= GID_TABLE_LEN {
                    assert_eq!(got, Some(CmdStatus::BadParam), "QUERY_GID of index {index}");
                } else {
                    assert!(ok, "QUERY_GID of index {index}: {got:?}");
                    let want = GidArg::from_entry(index as u8, None);
                    let want = match self.gids[index] {
                        Some((gid, vlan, roce_version)) => GidArg {
                            flags: GidArg::VALID,
                            roce_version,
                            vlan_id: vlan.into(),
                            gid,
                            ..want
                        },
                        None => want,
                    };
                    assert_eq!(a, want, "QUERY_GID of index {index} against what was set");
                }
            }
            CmdOp::ModifyDcb => {
                let a = abi::payload::<DcbArg>(e);
                let mask = a.mask.get();
                let mut n = self.dcb;
                if mask & DcbArg::PFC != 0 {
                    n.pfc_enable = a.pfc_enable;
                }
                if mask & DcbArg::ETS != 0 {
                    (n.ets_strict, n.ets_bw) = (a.ets_strict, a.ets_bw);
                }
                if mask & DcbArg::PCP_MAP != 0 {
                    n.pcp_prio = a.pcp_prio;
                }
                if mask & DcbArg::DSCP_MAP != 0 {
                    n.dscp_prio = a.dscp_prio;
                }
                if mask & DcbArg::PFC_THRESHOLDS != 0 {
                    (n.pfc_xoff, n.pfc_xon, n.pfc_quanta) = (a.pfc_xoff, a.pfc_xon, a.pfc_quanta);
                }
                if mask & DcbArg::PCP_EGRESS != 0 {
                    n.prio_pcp = a.prio_pcp;
                }
                expect(op, got, mask & !DcbArg::ALL != 0 || !dcb_valid(&n), false);
                if ok {
                    self.dcb = n;
                }
            }
            CmdOp::QueryDcb if ok => {
                let a = abi::payload::<DcbArg>(e);
                assert_eq!(a, self.dcb, "QUERY_DCB against what was set");
            }
            CmdOp::ModifyCc => {
                let a = abi::payload::<CcArg>(e);
                let bad = a.flags & !(CcArg::NP | CcArg::RP) != 0
                    || a.cnp_dscp > 63
                    || a.cnp_prio > 7
                    || a.line_rate.get() == 0
                    || a.min_rate.get() > a.line_rate.get()
                    || a.g.get() > ONE
                    || a.initial_alpha.get() > ONE;
                expect(op, got, bad, false);
                if ok {
                    // QUERY_CC answers the fields, not what the reserved bytes held.
                    self.cc = CcArg {
                        reserved: 0,
                        reserved1: 0.into(),
                        reserved2: 0.into(),
                        ..a
                    };
                }
            }
            CmdOp::ModifyEts => {
                let a = abi::payload::<EtsArg>(e);
                // dcbnl's algorithms: 0 strict, 2 ETS; others (1 credit-based shaper,
                // 255 vendor) this NIC does not have.
                let mut strict = 0u8;
                let mut tsa_ok = true;
                for (t, &tsa) in a.tc_tsa.iter().enumerate() {
                    match tsa {
                        EtsArg::TSA_STRICT => strict |= 1 << t,
                        EtsArg::TSA_ETS => {}
                        _ => tsa_ok = false,
                    }
                }
                let bad = !tsa_ok
                    || a.prio_tc.iter().any(|&tc| tc > 7)
                    || !ets_valid(strict, &a.tc_tx_bw);
                expect(op, got, bad, false);
                if ok {
                    self.prio_tc = a.prio_tc;
                    (self.dcb.ets_strict, self.dcb.ets_bw) = (strict, a.tc_tx_bw);
                }
            }
            CmdOp::QueryEts if ok => {
                let a = abi::payload::<EtsArg>(e);
                assert_eq!(a, self.ets(), "QUERY_ETS against what was set");
            }
            CmdOp::QueryCc if ok => {
                let a = abi::payload::<CcArg>(e);
                assert_eq!(
                    a.as_bytes(),
                    self.cc.as_bytes(),
                    "QUERY_CC against what was set: {a:?} vs {:?}",
                    self.cc
                );
            }
            CmdOp::ModifyQpCc => {
                let a = abi::payload::<QpCcArg>(e);
                if a.flags & !QpCcArg::RP != 0 {
                    assert_eq!(
                        got,
                        Some(CmdStatus::BadParam),
                        "MODIFY_QP_CC flags {:#x}",
                        a.flags
                    );
                }
                if ok {
                    let qpn = a.qpn.get();
                    self.qp_rp.retain(|q| q.0 != qpn);
                    self.qp_rp.push((qpn, a.flags & QpCcArg::RP != 0));
                }
            }
            CmdOp::QueryQpCc if ok => {
                let a = abi::payload::<QpCcArg>(e);
                if let Some(&(_, rp)) = self.qp_rp.iter().find(|q| q.0 == a.qpn.get()) {
                    assert_eq!(
                        a.flags & QpCcArg::RP != 0,
                        rp,
                        "QUERY_QP_CC of QP {} against MODIFY_QP_CC",
                        a.qpn.get()
                    );
                }
            }
            CmdOp::QueryCounters if ok => {
                let a = abi::payload::<QueryCountersArg>(e);
                let len = if a.scope == CounterScope::Port as u8 {
                    PORT_COUNTERS.len()
                } else {
                    QP_COUNTERS.len()
                };
                assert_eq!(e.out.get() as usize, len, "QUERY_COUNTERS' set length");
                let first = usize::from(a.first.get());
                self.counters.resize(PORT_COUNTERS.len(), 0);
                for (i, &v) in values.unwrap_or(&[]).iter().enumerate() {
                    let name = PORT_COUNTERS[first + i];
                    let seen = &mut self.counters[first + i];
                    assert!(
                        v >= *seen,
                        "port counter {name} went from {seen} down to {v}"
                    );
                    *seen = v;
                }
            }
            CmdOp::DestroyQp if ok => {
                let qpn = abi::payload::<abi::HandleArg>(e).handle.get();
                self.qp_rp.retain(|q| q.0 != qpn);
            }
            _ => {}
        }
    }
}

/// A GID entry's VLAN (ABI 1.3): untagged, or an 802.1Q VLAN ID 1..=4094 (0 is a
/// priority tag, 4095 reserved).
fn vlan_ok(vlan: u16) -> bool {
    vlan == GidArg::NO_VLAN || (1..=4094).contains(&vlan)
}

/// 802.1Qaz's rules (and dcbnl's) for the port's DCB settings: map entries are
/// priorities (and PCPs) 0..=7; the classes' shares by [`ets_valid`]; the PFC
/// thresholds (ABI 1.5) have XON below XOFF, XOFF within the receive buffer the NIC
/// reports, and a pause of at least one quantum.
fn dcb_valid(d: &DcbArg) -> bool {
    let maps = d
        .pcp_prio
        .iter()
        .chain(&d.dscp_prio)
        .chain(&d.prio_pcp)
        .all(|&p| p <= 7);
    let thresholds = d.pfc_xon.get() < d.pfc_xoff.get()
        && d.pfc_xoff.get() <= d.rx_buffer.get()
        && d.pfc_quanta.get() > 0;
    maps && thresholds && ets_valid(d.ets_strict, &d.ets_bw)
}

/// 802.1Qaz's rules for the traffic classes (`strict`: bit `t` for a strict class `t`):
/// a strict class has no bandwidth share, an ETS class has one, and the ETS classes'
/// shares add up to 100 unless every class is strict.
fn ets_valid(strict: u8, bw: &[u8; 8]) -> bool {
    let mut sum = 0u32;
    for (t, &bw) in bw.iter().enumerate() {
        match (strict & (1 << t) != 0, bw) {
            (true, 0) => {}
            (false, 0) | (true, _) => return false,
            (false, bw) => sum += u32::from(bw),
        }
    }
    strict == 0xFF || sum == 100
}

/// A MODIFY's status: `BadParam` when `bad`, else `Busy` when `busy`, else `Ok`.
fn expect(op: CmdOp, got: Option<CmdStatus>, bad: bool, busy: bool) {
    let want = if bad {
        CmdStatus::BadParam
    } else if busy {
        CmdStatus::Busy
    } else {
        CmdStatus::Ok
    };
    assert_eq!(got, Some(want), "{op:?}'s status");
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_core::transport::ipv4_gid;

    fn model() -> PortModel {
        PortModel::boot(&PortConfig::new(
            [2, 0, 0, 0, 0, 1],
            ipv4_gid([10, 0, 0, 1]),
        ))
    }

    /// An entry as the NIC writes it back: `op`, `arg`, `status`.
    fn entry<T: IntoBytes + zerocopy::Immutable>(
        op: CmdOp,
        arg: &T,
        status: CmdStatus,
    ) -> CmdEntry {
        let mut e = CmdEntry::default();
        e.opcode.set(op as u16);
        abi::set_payload(&mut e, arg);
        e.status.set(status as u32);
        e
    }

    fn port(mask: u32, mac: [u8; 6], mtu: u8) -> PortArg {
        PortArg {
            mask: mask.into(),
            mac,
            active_mtu: mtu,
            reserved: 0,
        }
    }

    /// MODIFY_PORT sets MTU 3 (1024), then QUERY_PORT answers `answered`.
    fn mtu_then_query(answered: u8) -> PortModel {
        let mut m = model();
        let mac = m.mac;
        let set = entry(
            CmdOp::ModifyPort,
            &port(PortArg::MTU, mac, 3),
            CmdStatus::Ok,
        );
        m.check(&set, None);
        let query = entry(
            CmdOp::QueryPort,
            &port(PortArg::ALL, mac, answered),
            CmdStatus::Ok,
        );
        m.check(&query, None);
        m
    }

    #[test]
    fn a_modify_then_query_that_agree_pass() {
        let mut m = mtu_then_query(3);
        let new_mac = [2, 0, 0, 0, 0, 9];
        let busy = entry(
            CmdOp::ModifyPort,
            &port(PortArg::MAC, new_mac, 0),
            CmdStatus::Busy,
        );
        m.check(&busy, None);
    }

    #[test]
    #[should_panic(expected = "QUERY_PORT")]
    fn a_query_that_forgot_the_modify_is_caught() {
        mtu_then_query(5);
    }

    #[test]
    #[should_panic(expected = "ModifyPort's status")]
    fn a_new_mac_under_connected_qps_must_be_busy() {
        let mut m = model();
        let new_mac = [2, 0, 0, 0, 0, 9];
        m.check(
            &entry(
                CmdOp::ModifyPort,
                &port(PortArg::MAC, new_mac, 0),
                CmdStatus::Ok,
            ),
            None,
        );
    }

    #[test]
    #[should_panic(expected = "went from 7 down to 6")]
    fn a_port_counter_that_decreases_is_caught() {
        let mut m = model();
        let a = QueryCountersArg {
            count: 1.into(),
            ..Default::default()
        };
        let mut e = entry(CmdOp::QueryCounters, &a, CmdStatus::Ok);
        e.out.set(PORT_COUNTERS.len() as u32);
        m.check(&e, Some(&[7]));
        m.check(&e, Some(&[6]));
    }

    /// Two classes: priorities 0..=5 share ETS class 0 (60 %), 6 and 7 ETS class 1
    /// (40 %); classes 2..=7 strict and empty.
    fn two_classes() -> EtsArg {
        EtsArg {
            ets_cap: 0,
            reserved: [0; 7],
            prio_tc: [0, 0, 0, 0, 0, 0, 1, 1],
            tc_tsa: [2, 2, 0, 0, 0, 0, 0, 0],
            tc_tx_bw: [60, 40, 0, 0, 0, 0, 0, 0],
        }
    }

    /// MODIFY_ETS of [`two_classes`] (accepted), then QUERY_ETS answers `answered`.
    fn ets_then_query(answered: EtsArg) -> PortModel {
        let mut m = model();
        m.check(
            &entry(CmdOp::ModifyEts, &two_classes(), CmdStatus::Ok),
            None,
        );
        m.check(&entry(CmdOp::QueryEts, &answered, CmdStatus::Ok), None);
        m
    }

    #[test]
    fn an_ets_modify_then_queries_that_agree_pass() {
        let m = ets_then_query(EtsArg {
            ets_cap: 8,
            ..two_classes()
        });
        // QUERY_DCB's classes are MODIFY_ETS's too.
        let mut dcb = m.dcb;
        assert_eq!((dcb.ets_strict, dcb.ets_bw), (0xFC, two_classes().tc_tx_bw));
        let mut m = m;
        m.check(&entry(CmdOp::QueryDcb, &dcb, CmdStatus::Ok), None);
        // MODIFY_DCB's ETS changes the classes and keeps the table.
        dcb.mask = DcbArg::ETS.into();
        (dcb.ets_strict, dcb.ets_bw) = (0xFE, [100, 0, 0, 0, 0, 0, 0, 0]);
        m.check(&entry(CmdOp::ModifyDcb, &dcb, CmdStatus::Ok), None);
        let want = EtsArg {
            ets_cap: 8,
            tc_tsa: [2, 0, 0, 0, 0, 0, 0, 0],
            tc_tx_bw: [100, 0, 0, 0, 0, 0, 0, 0],
            ..two_classes()
        };
        m.check(&entry(CmdOp::QueryEts, &want, CmdStatus::Ok), None);
    }

    #[test]
    #[should_panic(expected = "QUERY_ETS against what was set")]
    fn a_query_ets_that_forgot_the_table_is_caught() {
        // The table as booted (one class per priority) instead of the one set.
        ets_then_query(EtsArg {
            ets_cap: 8,
            prio_tc: [0, 1, 2, 3, 4, 5, 6, 7],
            ..two_classes()
        });
    }

    #[test]
    #[should_panic(expected = "QUERY_ETS against what was set")]
    fn a_modify_dcb_that_dropped_the_ets_table_is_caught() {
        // After MODIFY_DCB's ETS, QUERY_ETS must still give MODIFY_ETS's table.
        let mut m = model();
        m.check(
            &entry(CmdOp::ModifyEts, &two_classes(), CmdStatus::Ok),
            None,
        );
        let mut dcb = m.dcb;
        dcb.mask = DcbArg::ETS.into();
        m.check(&entry(CmdOp::ModifyDcb, &dcb, CmdStatus::Ok), None);
        let reset = EtsArg {
            prio_tc: [0, 1, 2, 3, 4, 5, 6, 7],
            ..m.ets()
        };
        m.check(&entry(CmdOp::QueryEts, &reset, CmdStatus::Ok), None);
    }

    /// MODIFY_ETS of `arg`, answered `status`.
    fn modify_ets(arg: EtsArg, status: CmdStatus) {
        model().check(&entry(CmdOp::ModifyEts, &arg, status), None);
    }

    #[test]
    fn bad_ets_settings_refused_pass() {
        let mut class_8 = two_classes();
        class_8.prio_tc[3] = 8;
        let mut cbs = two_classes();
        cbs.tc_tsa[2] = 1;
        let mut sum_99 = two_classes();
        sum_99.tc_tx_bw[1] = 39;
        let mut strict_share = two_classes();
        strict_share.tc_tx_bw[7] = 1;
        for arg in [class_8, cbs, sum_99, strict_share] {
            modify_ets(arg, CmdStatus::BadParam);
        }
        // Every class strict, no shares: allowed; `ets_cap` and reserved bytes ignored.
        modify_ets(
            EtsArg {
                ets_cap: 3,
                reserved: [9; 7],
                tc_tsa: [0; 8],
                tc_tx_bw: [0; 8],
                ..two_classes()
            },
            CmdStatus::Ok,
        );
    }

    #[test]
    #[should_panic(expected = "ModifyEts's status")]
    fn a_traffic_class_above_7_accepted_is_caught() {
        let mut a = two_classes();
        a.prio_tc[3] = 8;
        modify_ets(a, CmdStatus::Ok);
    }

    #[test]
    #[should_panic(expected = "ModifyEts's status")]
    fn an_algorithm_neither_strict_nor_ets_accepted_is_caught() {
        let mut a = two_classes();
        a.tc_tsa[0] = 1;
        modify_ets(a, CmdStatus::Ok);
    }

    #[test]
    #[should_panic(expected = "ModifyEts's status")]
    fn good_ets_settings_refused_are_caught() {
        modify_ets(two_classes(), CmdStatus::BadParam);
    }

    /// MODIFY_DCB of the PFC thresholds with XOFF at `xoff` bytes, answered `status`.
    fn xoff(xoff: u32, status: CmdStatus) {
        let mut m = model();
        let mut a = m.dcb;
        a.mask = DcbArg::PFC_THRESHOLDS.into();
        a.pfc_xoff = xoff.into();
        a.pfc_xon = 1_024.into();
        m.check(&entry(CmdOp::ModifyDcb, &a, status), None);
    }

    #[test]
    fn xoff_up_to_the_buffer_passes() {
        xoff(RX_BUFFER_BYTES, CmdStatus::Ok);
        xoff(RX_BUFFER_BYTES + 1, CmdStatus::BadParam);
    }

    #[test]
    #[should_panic(expected = "ModifyDcb's status")]
    fn xoff_above_the_receive_buffer_accepted_is_caught() {
        xoff(RX_BUFFER_BYTES + 1, CmdStatus::Ok);
    }
}
