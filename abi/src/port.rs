//! The port's configuration commands (ABI 1.1): addresses and MTU, the GID table,
//! priority flow control, and congestion control (DCQCN) for the port and per QP. Each
//! payload has room to grow: a later minor version appends fields and, where a command
//! takes a `mask`, new mask bits; a NIC refuses mask bits it does not know with
//! `BadParam`, so a host never mistakes an ignored setting for an applied one.

use crate::DecodeError;
use roce_core::cc::{CcConfig, DcqcnConfig, QpCcInfo, ONE};
use roce_core::dcb::{EtsConfig, PfcThresholds, Priorities, PRIORITIES};
use roce_core::engine::{DcbConfig, GidEntry, GidType};
use roce_core::num::Qpn;
use roce_core::transport::Mtu;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// QUERY_PORT result and MODIFY_PORT parameters.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct PortArg {
    /// MODIFY_PORT: which fields to change ([`PortArg::MAC`], [`PortArg::MTU`]).
    /// QUERY_PORT: the fields this NIC can change.
    pub mask: U32,
    /// The port's Ethernet address (unicast, not zero).
    pub mac: [u8; 6],
    /// The active MTU (`enum ibv_mtu`): the largest path MTU a QP may use.
    pub active_mtu: u8,
    pub reserved: u8,
}

impl PortArg {
    /// Mask bit: `mac`.
    pub const MAC: u32 = 1 << 0;
    /// Mask bit: `active_mtu`.
    pub const MTU: u32 = 1 << 1;
    /// Every mask bit of this version.
    pub const ALL: u32 = Self::MAC | Self::MTU;

    /// The active MTU, checked.
    pub fn mtu(&self) -> Result<Mtu, DecodeError> {
        Mtu::from_u8(self.active_mtu).ok_or(DecodeError("bad active MTU"))
    }

    /// The MAC, checked: a unicast address, not zero.
    pub fn unicast_mac(&self) -> Result<[u8; 6], DecodeError> {
        if self.mac[0] & 1 != 0 || self.mac == [0; 6] {
            return Err(DecodeError("the port MAC must be a unicast address"));
        }
        Ok(self.mac)
    }
}

/// QUERY_GID and MODIFY_GID: one entry of the port's GID table (`struct ibv_gid_entry`).
/// QUERY_GID takes `index` and fills the rest; MODIFY_GID writes the entry (or clears
/// it, without [`GidArg::VALID`]).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct GidArg {
    /// Index in the table (below `DeviceAttr::gid_tbl_len`).
    pub index: U16,
    /// [`GidArg::VALID`]: the entry holds an address.
    pub flags: u8,
    /// The RoCE version of the entry, as rdma-core's `enum ibv_gid_type` numbers it:
    /// [`GidArg::ROCE_V2`] (`IBV_GID_TYPE_ROCE_V2`, Linux `IB_GID_TYPE_ROCE_UDP_ENCAP`)
    /// or, from ABI 1.4, [`GidArg::ROCE_V1`] (`IBV_GID_TYPE_ROCE_V1`, Linux
    /// `IB_GID_TYPE_ROCE`: GRH over Ethernet). Anything else is refused.
    pub roce_version: u8,
    /// The entry's 802.1Q VLAN (1 to 4094), or 0xFFFF for untagged (ABI 1.3; 1.2
    /// refused any VLAN). Frames for the GID must carry it; QPs sending from the entry
    /// tag their frames with it.
    pub vlan_id: U16,
    pub reserved: U16,
    /// The GID: IPv4-mapped (`::ffff:a.b.c.d`) or IPv6, network order.
    pub gid: [u8; 16],
}

impl GidArg {
    /// Flag: the entry holds an address.
    pub const VALID: u8 = 1 << 0;
    /// `roce_version` of a RoCEv1 entry (ABI 1.4).
    pub const ROCE_V1: u8 = 1;
    /// `roce_version` of a RoCEv2 entry.
    pub const ROCE_V2: u8 = 2;
    /// `vlan_id` of an untagged entry.
    pub const NO_VLAN: u16 = 0xFFFF;

    /// The entry at `index` (`None`: empty).
    pub fn from_entry(index: u8, entry: Option<&GidEntry>) -> Self {
        Self {
            index: U16::new(u16::from(index)),
            flags: if entry.is_some() { Self::VALID } else { 0 },
            roce_version: match entry.map(|e| e.gid_type) {
                Some(GidType::Roce) => Self::ROCE_V1,
                Some(GidType::RoceUdpEncap) => Self::ROCE_V2,
                None => 0,
            },
            vlan_id: U16::new(entry.and_then(|e| e.vlan_id).unwrap_or(Self::NO_VLAN)),
            reserved: U16::new(0),
            gid: entry.map_or([0; 16], |e| e.gid),
        }
    }

    /// The index, as the table counts (`Err` above 255).
    pub fn table_index(&self) -> Result<u8, DecodeError> {
        u8::try_from(self.index.get()).map_err(|_| DecodeError("GID index out of range"))
    }

    /// The entry it describes: `None` clears the index.
    pub fn to_entry(&self) -> Result<Option<GidEntry>, DecodeError> {
        if self.flags & !Self::VALID != 0 {
            return Err(DecodeError("unknown GID entry flags"));
        }
        if self.flags & Self::VALID == 0 {
            return Ok(None);
        }
        let v1 = match self.roce_version {
            Self::ROCE_V1 => true,
            Self::ROCE_V2 => false,
            _ => {
                return Err(DecodeError(
                    "GID entry type neither RoCEv1 (1) nor RoCEv2 (2)",
                ))
            }
        };
        if self.gid == [0; 16] {
            return Err(DecodeError("the zero GID is not an address"));
        }
        let entry = match self.vlan_id.get() {
            Self::NO_VLAN => GidEntry::new(self.gid),
            // 0 is a priority tag and 4095 reserved (802.1Q): neither is a VLAN.
            vid @ 1..=4094 => GidEntry::with_vlan(self.gid, vid),
            _ => return Err(DecodeError("VLAN ID outside 1..=4094")),
        };
        Ok(Some(if v1 { entry.roce_v1() } else { entry }))
    }
}

/// QUERY_DCB result and MODIFY_DCB parameters: the port's Data Center Bridging settings.
/// ABI 1.1 had `mask` and `pfc_enable` (8 bytes); 1.3 gives the reserved byte 5 and
/// appends the ETS shares and the priority maps, each group with a mask bit of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DcbArg {
    /// MODIFY_DCB: which fields to change ([`DcbArg::PFC`], [`DcbArg::ETS`],
    /// [`DcbArg::PCP_MAP`], [`DcbArg::DSCP_MAP`]). QUERY_DCB: the fields this NIC can
    /// change.
    pub mask: U32,
    /// 802.1Qbb: priorities with PFC on, bit `p` for priority `p`.
    pub pfc_enable: u8,
    /// 802.1Qaz (1.3): the strict-priority classes, bit `p` for priority `p`; the others
    /// are ETS classes.
    pub ets_strict: u8,
    pub reserved: [u8; 2],
    /// 802.1Qaz (1.3): each ETS class's bandwidth share in percent (0 for a strict
    /// class); the ETS classes' shares add up to 100.
    pub ets_bw: [u8; 8],
    /// (1.3) The priority of a VLAN-tagged frame with PCP `i`.
    pub pcp_prio: [u8; 8],
    /// (1.3) The priority of an untagged frame with DSCP `i`.
    pub dscp_prio: [u8; 64],
    /// (1.5) PFC: send XOFF when a lossless priority holds more than this many bytes
    /// of the receive buffer.
    pub pfc_xoff: U32,
    /// (1.5) Send XON when it is back to this many bytes or fewer (below `pfc_xoff`).
    pub pfc_xon: U32,
    /// (1.5) Pause time an XOFF asks for, in quanta of 512 bit times.
    pub pfc_quanta: U16,
    pub reserved2: U16,
    /// (1.5) QUERY_DCB: the receive buffer's size in bytes (MODIFY_DCB ignores it); the
    /// headroom of a lossless priority is this minus `pfc_xoff`.
    pub rx_buffer: U32,
    /// (1.5) The PCP of a VLAN-tagged frame of priority `i` (the egress map).
    pub prio_pcp: [u8; 8],
}

impl Default for DcbArg {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl DcbArg {
    /// Mask bit: `pfc_enable`.
    pub const PFC: u32 = 1 << 0;
    /// Mask bit (1.3): `ets_strict` and `ets_bw`.
    pub const ETS: u32 = 1 << 1;
    /// Mask bit (1.3): `pcp_prio`.
    pub const PCP_MAP: u32 = 1 << 2;
    /// Mask bit (1.3): `dscp_prio`.
    pub const DSCP_MAP: u32 = 1 << 3;
    /// Mask bit (1.5): `pfc_xoff`, `pfc_xon` and `pfc_quanta`.
    pub const PFC_THRESHOLDS: u32 = 1 << 4;
    /// Mask bit (1.5): `prio_pcp`.
    pub const PCP_EGRESS: u32 = 1 << 5;
    /// Every mask bit of this version.
    pub const ALL: u32 = Self::PFC
        | Self::ETS
        | Self::PCP_MAP
        | Self::DSCP_MAP
        | Self::PFC_THRESHOLDS
        | Self::PCP_EGRESS;

    /// The settings, with every field of this version; `rx_buffer` is the NIC's receive
    /// buffer (QUERY_DCB; 0 in a MODIFY_DCB, which ignores it).
    pub fn from_config(c: &DcbConfig, rx_buffer: u32) -> Self {
        Self {
            mask: U32::new(Self::ALL),
            pfc_enable: c.pfc_enable,
            ets_strict: c.ets.strict.0,
            reserved: [0; 2],
            ets_bw: c.ets.bw,
            pcp_prio: c.map.pcp,
            dscp_prio: c.map.dscp,
            pfc_xoff: U32::new(c.pfc_thresholds.xoff),
            pfc_xon: U32::new(c.pfc_thresholds.xon),
            pfc_quanta: U16::new(c.pfc_thresholds.quanta),
            reserved2: U16::new(0),
            rx_buffer: U32::new(rx_buffer),
            prio_pcp: c.prio_pcp,
        }
    }

    /// `c` with the fields the mask names changed. Unknown mask bits, a priority above
    /// 7 in a map, ETS shares that break 802.1Qaz's rules (a strict class with a
    /// share, an ETS class without one, shares not adding up to 100) or PFC thresholds
    /// with XON not below XOFF or no pause time are errors
    /// ([`DcbConfig::validate_rules`]). Whether XOFF fits the receive buffer is the
    /// NIC's to check against its own buffer ([`DcbConfig::validate`]).
    pub fn apply(&self, c: &DcbConfig) -> Result<DcbConfig, DecodeError> {
        let mask = self.mask.get();
        if mask & !Self::ALL != 0 {
            return Err(DecodeError("unknown DCB mask bits"));
        }
        let mut out = *c;
        if mask & Self::PFC != 0 {
            out.pfc_enable = self.pfc_enable;
        }
        if mask & Self::ETS != 0 {
            out.ets = EtsConfig {
                strict: Priorities(self.ets_strict),
                bw: self.ets_bw,
                // (no priority assignment table in this command: it stays)
                ..out.ets
            };
        }
        if mask & Self::PCP_MAP != 0 {
            out.map.pcp = self.pcp_prio;
        }
        if mask & Self::DSCP_MAP != 0 {
            out.map.dscp = self.dscp_prio;
        }
        if mask & Self::PFC_THRESHOLDS != 0 {
            out.pfc_thresholds = PfcThresholds {
                xoff: self.pfc_xoff.get(),
                xon: self.pfc_xon.get(),
                quanta: self.pfc_quanta.get(),
            };
        }
        if mask & Self::PCP_EGRESS != 0 {
            out.prio_pcp = self.prio_pcp;
        }
        out.validate_rules().map_err(DecodeError)?;
        Ok(out)
    }
}

/// QUERY_ETS result and MODIFY_ETS parameters (ABI 1.6): the port's 802.1Qaz
/// transmission selection as Linux dcbnl's `ieee_ets` holds it: the priority assignment
/// table (`prio_tc`) and each traffic class's algorithm (`tc_tsa`) and share
/// (`tc_tx_bw`). MODIFY_ETS sets all of it at once (a table and the shares of its
/// classes are only valid together); MODIFY_DCB's `ets_strict`/`ets_bw` are the same
/// per-class fields and leave the table as it is. A command of its own because
/// `DcbArg` fills the command payload.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct EtsArg {
    /// QUERY_ETS: the traffic classes the NIC schedules (dcbnl's `ets_cap`, 8).
    /// MODIFY_ETS ignores it.
    pub ets_cap: u8,
    pub reserved: [u8; 7],
    /// The traffic class of priority `i` (0..7).
    pub prio_tc: [u8; 8],
    /// Class `t`'s algorithm: [`EtsArg::TSA_STRICT`] or [`EtsArg::TSA_ETS`].
    pub tc_tsa: [u8; 8],
    /// Class `t`'s bandwidth share in percent (0 for a strict class); the ETS classes'
    /// shares add up to 100.
    pub tc_tx_bw: [u8; 8],
}

impl EtsArg {
    /// Strict priority (dcbnl's `IEEE_8021QAZ_TSA_STRICT`).
    pub const TSA_STRICT: u8 = 0;
    /// Enhanced transmission selection (dcbnl's `IEEE_8021QAZ_TSA_ETS`).
    pub const TSA_ETS: u8 = 2;

    /// The settings, for QUERY_ETS (and MODIFY_ETS).
    pub fn from_config(e: &EtsConfig) -> Self {
        Self {
            ets_cap: PRIORITIES as u8,
            reserved: [0; 7],
            prio_tc: e.prio_tc,
            tc_tsa: core::array::from_fn(|t| {
                if e.strict.contains(t as u8) {
                    Self::TSA_STRICT
                } else {
                    Self::TSA_ETS
                }
            }),
            tc_tx_bw: e.bw,
        }
    }

    /// The settings, checked: an algorithm other than strict or ETS, a class above 7,
    /// or shares that break 802.1Qaz's rules are errors.
    pub fn to_config(&self) -> Result<EtsConfig, DecodeError> {
        let mut strict = Priorities::NONE;
        for (t, &tsa) in self.tc_tsa.iter().enumerate() {
            match tsa {
                Self::TSA_STRICT => strict = strict.with(t as u8),
                Self::TSA_ETS => {}
                _ => return Err(DecodeError("a traffic class neither strict nor ETS")),
            }
        }
        let e = EtsConfig {
            strict,
            bw: self.tc_tx_bw,
            prio_tc: self.prio_tc,
        };
        e.validate()
            .map_err(|_| DecodeError("ETS settings that break 802.1Qaz's rules"))?;
        Ok(e)
    }
}

/// QUERY_CC result and MODIFY_CC parameters: DCQCN for the whole port (the host reads,
/// changes and writes back the whole set). Rates in bit/s, times in nanoseconds,
/// fractions in Q20 (1.0 = 2^20). The mlx5 names of the same knobs are given in
/// `docs/abi.md`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct CcArg {
    /// [`CcArg::NP`], [`CcArg::RP`].
    pub flags: u8,
    /// DSCP of the CNPs the port sends.
    pub cnp_dscp: u8,
    /// 802.1p priority of the CNPs (VLAN-tagged QPs).
    pub cnp_prio: u8,
    pub reserved: u8,
    pub reserved1: U32,
    /// Fewest nanoseconds between two CNPs to one QP.
    pub cnp_interval_ns: U64,
    /// The rate a QP starts at, and the cap.
    pub line_rate: U64,
    /// Gain g, Q20.
    pub g: U32,
    /// Alpha before the first CNP, Q20.
    pub initial_alpha: U32,
    /// K: alpha decays after this long without a CNP.
    pub alpha_timer_ns: U64,
    /// Rate-increase timer period.
    pub increase_timer_ns: U64,
    /// A rate-increase event every this many bytes sent (0: the timer only).
    pub byte_counter: U64,
    /// F: fast-recovery steps.
    pub fast_recovery_steps: U32,
    pub reserved2: U32,
    /// R_AI: additive increase step.
    pub rate_ai: U64,
    /// R_HAI: hyper increase step.
    pub rate_hai: U64,
    /// Floor of a QP's rate.
    pub min_rate: U64,
}

impl CcArg {
    /// Flag: the notification point (CNPs for CE-marked packets).
    pub const NP: u8 = 1 << 0;
    /// Flag: the reaction point on for QPs created from now on.
    pub const RP: u8 = 1 << 1;

    /// Encodes a configuration.
    pub fn from_config(c: &CcConfig) -> Self {
        let d = &c.dcqcn;
        Self {
            flags: if c.np { Self::NP } else { 0 } | if c.rp { Self::RP } else { 0 },
            cnp_dscp: c.cnp_dscp,
            cnp_prio: c.cnp_prio,
            cnp_interval_ns: U64::new(c.cnp_interval_ns),
            line_rate: U64::new(d.line_rate),
            g: U32::new(d.g),
            initial_alpha: U32::new(d.initial_alpha),
            alpha_timer_ns: U64::new(d.alpha_timer_ns),
            increase_timer_ns: U64::new(d.increase_timer_ns),
            byte_counter: U64::new(d.byte_counter),
            fast_recovery_steps: U32::new(d.fast_recovery_steps),
            rate_ai: U64::new(d.rate_ai),
            rate_hai: U64::new(d.rate_hai),
            min_rate: U64::new(d.min_rate),
            ..Self::default()
        }
    }

    /// Decodes and checks a configuration.
    pub fn to_config(&self) -> Result<CcConfig, DecodeError> {
        if self.flags & !(Self::NP | Self::RP) != 0 {
            return Err(DecodeError("unknown congestion control flags"));
        }
        if self.cnp_dscp > 63 || self.cnp_prio > 7 {
            return Err(DecodeError("CNP DSCP above 63 or priority above 7"));
        }
        let dcqcn = DcqcnConfig {
            line_rate: self.line_rate.get(),
            g: self.g.get(),
            initial_alpha: self.initial_alpha.get(),
            alpha_timer_ns: self.alpha_timer_ns.get(),
            increase_timer_ns: self.increase_timer_ns.get(),
            byte_counter: self.byte_counter.get(),
            fast_recovery_steps: self.fast_recovery_steps.get(),
            rate_ai: self.rate_ai.get(),
            rate_hai: self.rate_hai.get(),
            min_rate: self.min_rate.get(),
        };
        if dcqcn.line_rate == 0 || dcqcn.min_rate > dcqcn.line_rate {
            return Err(DecodeError("line rate zero or below the minimum rate"));
        }
        if dcqcn.g > ONE || dcqcn.initial_alpha > ONE {
            return Err(DecodeError("g or alpha above 1.0"));
        }
        Ok(CcConfig {
            np: self.flags & Self::NP != 0,
            rp: self.flags & Self::RP != 0,
            cnp_interval_ns: self.cnp_interval_ns.get(),
            cnp_dscp: self.cnp_dscp,
            cnp_prio: self.cnp_prio,
            dcqcn,
        })
    }
}

/// QUERY_QP_CC result and MODIFY_QP_CC parameters: one QP's reaction point. MODIFY_QP_CC
/// reads `qpn` and `flags` (the rate restarts at line rate either way); QUERY_QP_CC
/// takes `qpn` and fills the rest. The QP's CNP and ECN counters are in its counter
/// set (QUERY_COUNTERS).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct QpCcArg {
    pub qpn: U32,
    /// [`QpCcArg::RP`].
    pub flags: u8,
    pub reserved: [u8; 3],
    /// Current rate Rc, bit/s.
    pub rate: U64,
    /// Target rate Rt, bit/s.
    pub target_rate: U64,
    /// Alpha, Q20.
    pub alpha: U32,
    pub reserved1: U32,
}

impl QpCcArg {
    /// Flag: the reaction point is on (frames ECT(0), paced at `rate`).
    pub const RP: u8 = 1 << 0;

    /// A QP's state.
    pub fn from_info(qpn: Qpn, i: &QpCcInfo) -> Self {
        Self {
            qpn: U32::new(qpn.value()),
            flags: if i.rp_enabled { Self::RP } else { 0 },
            rate: U64::new(i.rate),
            target_rate: U64::new(i.target_rate),
            alpha: U32::new(i.alpha),
            ..Self::default()
        }
    }

    /// MODIFY_QP_CC's reaction point setting; unknown flags are an error.
    pub fn rp(&self) -> Result<bool, DecodeError> {
        if self.flags & !Self::RP != 0 {
            return Err(DecodeError("unknown QP congestion control flags"));
        }
        Ok(self.flags & Self::RP != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn layouts_are_those_of_docs_abi_md() {
        use core::mem::offset_of;
        assert_eq!(size_of::<PortArg>(), 12);
        assert_eq!(
            (offset_of!(PortArg, mac), offset_of!(PortArg, active_mtu)),
            (4, 10)
        );
        assert_eq!(size_of::<GidArg>(), 24);
        assert_eq!(
            (
                offset_of!(GidArg, flags),
                offset_of!(GidArg, roce_version),
                offset_of!(GidArg, vlan_id),
                offset_of!(GidArg, gid)
            ),
            (2, 3, 4, 8)
        );
        assert_eq!(size_of::<EtsArg>(), 32);
        assert_eq!(
            [
                offset_of!(EtsArg, prio_tc),
                offset_of!(EtsArg, tc_tsa),
                offset_of!(EtsArg, tc_tx_bw),
            ],
            [8, 16, 24]
        );
        assert_eq!(size_of::<DcbArg>(), 112);
        assert_eq!(
            [
                offset_of!(DcbArg, pfc_enable),
                offset_of!(DcbArg, ets_strict),
                offset_of!(DcbArg, ets_bw),
                offset_of!(DcbArg, pcp_prio),
                offset_of!(DcbArg, dscp_prio),
                offset_of!(DcbArg, pfc_xoff),
                offset_of!(DcbArg, pfc_xon),
                offset_of!(DcbArg, pfc_quanta),
                offset_of!(DcbArg, rx_buffer),
                offset_of!(DcbArg, prio_pcp),
            ],
            [4, 5, 8, 16, 24, 88, 92, 96, 100, 104]
        );
        assert_eq!(size_of::<CcArg>(), 88);
        assert_eq!(
            [
                offset_of!(CcArg, cnp_interval_ns),
                offset_of!(CcArg, line_rate),
                offset_of!(CcArg, g),
                offset_of!(CcArg, initial_alpha),
                offset_of!(CcArg, alpha_timer_ns),
                offset_of!(CcArg, increase_timer_ns),
                offset_of!(CcArg, byte_counter),
                offset_of!(CcArg, fast_recovery_steps),
                offset_of!(CcArg, rate_ai),
                offset_of!(CcArg, rate_hai),
                offset_of!(CcArg, min_rate),
            ],
            [8, 16, 24, 28, 32, 40, 48, 56, 64, 72, 80]
        );
        assert_eq!(size_of::<QpCcArg>(), 32);
        assert_eq!(
            (
                offset_of!(QpCcArg, flags),
                offset_of!(QpCcArg, rate),
                offset_of!(QpCcArg, target_rate),
                offset_of!(QpCcArg, alpha)
            ),
            (4, 8, 16, 24)
        );
        // Little-endian on the wire, whatever the host.
        let a = QpCcArg {
            rate: U64::new(0x0102_0304_0506_0708),
            ..QpCcArg::default()
        };
        assert_eq!(a.as_bytes()[8..16], [8, 7, 6, 5, 4, 3, 2, 1]);
    }

    #[test]
    fn congestion_control_round_trips_and_checks_its_ranges() {
        let c = CcConfig::dcqcn(25_000_000_000);
        assert_eq!(CcArg::from_config(&c).to_config(), Ok(c));
        let mut bad = CcArg::from_config(&c);
        bad.g = U32::new(ONE + 1);
        assert!(bad.to_config().is_err());
        let mut bad = CcArg::from_config(&c);
        bad.flags |= 4;
        assert!(bad.to_config().is_err());
        let mut bad = CcArg::from_config(&c);
        bad.min_rate = U64::new(c.dcqcn.line_rate + 1);
        assert!(bad.to_config().is_err());
    }

    #[test]
    fn gid_entries_say_what_they_hold() {
        let gid = roce_core::transport::ipv4_gid([10, 0, 0, 1]);
        let e = GidEntry::new(gid);
        let a = GidArg::from_entry(3, Some(&e));
        assert_eq!((a.index.get(), a.flags, a.roce_version), (3, 1, 2));
        assert_eq!(a.to_entry(), Ok(Some(e)));
        assert_eq!(GidArg::from_entry(4, None).to_entry(), Ok(None));
        // IBV_GID_TYPE_ROCE_V1 (ABI 1.4) is IB_GID_TYPE_ROCE; IB (0) and others are not
        // Ethernet entries.
        let mut v1 = a;
        v1.roce_version = 1;
        assert_eq!(v1.to_entry(), Ok(Some(e.roce_v1())));
        assert_eq!(GidArg::from_entry(3, Some(&e.roce_v1())), v1);
        for bad in [0, 3, 0xFF] {
            v1.roce_version = bad;
            assert!(v1.to_entry().is_err(), "roce_version {bad}");
        }
        let mut tagged = a;
        tagged.vlan_id = U16::new(100);
        assert_eq!(tagged.to_entry(), Ok(Some(GidEntry::with_vlan(gid, 100))));
        assert_eq!(
            GidArg::from_entry(3, Some(&GidEntry::with_vlan(gid, 100))),
            tagged
        );
        for vid in [0, 4095, 0x8001] {
            tagged.vlan_id = U16::new(vid);
            assert!(tagged.to_entry().is_err(), "{vid}");
        }
        let mut zero = a;
        zero.gid = [0; 16];
        assert!(zero.to_entry().is_err());
    }

    #[test]
    fn dcb_masks_choose_what_changes() {
        let c = DcbConfig {
            pfc_enable: 0x08,
            ..DcbConfig::OFF
        };
        let mut want = DcbConfig {
            pfc_enable: 0x41,
            ..DcbConfig::OFF
        };
        want.map.dscp[26] = 5;
        want.map.pcp[1] = 0;
        want.ets = EtsConfig {
            strict: Priorities(0b1111_0101),
            bw: [0, 80, 0, 20, 0, 0, 0, 0],
            ..EtsConfig::STRICT
        };
        want.pfc_thresholds = PfcThresholds {
            xoff: 20_000,
            xon: 10_000,
            quanta: 500,
        };
        want.prio_pcp = [0, 1, 2, 5, 4, 3, 6, 7];
        let mut a = DcbArg::from_config(&want, 16_384);
        assert_eq!(a.rx_buffer.get(), 16_384);
        assert_eq!(a.apply(&c), Ok(want));
        // Each mask bit changes its own fields only.
        for (bit, field) in [
            (DcbArg::PFC, "pfc"),
            (DcbArg::ETS, "ets"),
            (DcbArg::PCP_MAP, "pcp"),
            (DcbArg::DSCP_MAP, "dscp"),
            (DcbArg::PFC_THRESHOLDS, "thresholds"),
            (DcbArg::PCP_EGRESS, "egress"),
        ] {
            a.mask = U32::new(bit);
            let got = a.apply(&c).unwrap();
            assert_eq!(got.pfc_enable == want.pfc_enable, field == "pfc");
            assert_eq!(got.ets == want.ets, field == "ets");
            assert_eq!(got.map.pcp == want.map.pcp, field == "pcp");
            assert_eq!(got.map.dscp == want.map.dscp, field == "dscp");
            assert_eq!(
                got.pfc_thresholds == want.pfc_thresholds,
                field == "thresholds"
            );
            assert_eq!(got.prio_pcp == want.prio_pcp, field == "egress");
        }
        a.mask = U32::new(0);
        assert_eq!(a.apply(&c), Ok(c));
        a.mask = U32::new(1 << 6);
        assert!(a.apply(&c).is_err());
        // An 1.1 host's 8 bytes (zeros after them) still set PFC alone.
        let old = DcbArg {
            mask: U32::new(DcbArg::PFC),
            pfc_enable: 0x10,
            ..DcbArg::default()
        };
        assert_eq!(old.apply(&c).map(|c| c.pfc_enable), Ok(0x10));
    }

    #[test]
    fn dcb_settings_that_break_the_rules_are_refused() {
        let c = DcbConfig::OFF;
        let bad = |f: &dyn Fn(&mut DcbArg)| {
            let mut a = DcbArg::from_config(&c, 0);
            f(&mut a);
            a.apply(&c)
        };
        assert!(bad(&|_| {}).is_ok());
        // ETS: shares summing to 90, a strict class with a share, an ETS class without.
        assert!(bad(&|a| a.ets_bw[7] = 3).is_err());
        assert!(bad(&|a| a.ets_strict = 1).is_err());
        assert!(bad(&|a| {
            a.ets_bw = [50, 50, 0, 0, 0, 0, 0, 0];
            a.ets_strict = 0b1111_1000;
        })
        .is_err());
        // All strict with no shares is 802.1Q's default: fine.
        assert!(bad(&|a| {
            a.ets_bw = [0; 8];
            a.ets_strict = 0xFF;
        })
        .is_ok());
        // A map entry beyond priority 7.
        assert!(bad(&|a| a.pcp_prio[2] = 8).is_err());
        assert!(bad(&|a| a.dscp_prio[63] = 9).is_err());
        assert!(bad(&|a| a.prio_pcp[0] = 8).is_err());
        // PFC thresholds: XON at or above XOFF, no pause time. Whether XOFF fits is
        // the NIC's buffer's question (the firmware's `DcbConfig::validate`).
        assert!(bad(&|a| a.pfc_xon = a.pfc_xoff).is_err());
        assert!(bad(&|a| a.pfc_quanta = U16::new(0)).is_err());
        assert!(bad(&|a| {
            a.pfc_xoff = U32::new(1 << 20);
            a.pfc_xon = U32::new(0);
        })
        .is_ok());
        // The size is the NIC's: MODIFY_DCB ignores it.
        assert!(bad(&|a| a.rx_buffer = U32::new(7)).is_ok());
    }

    #[test]
    fn ets_arg_carries_the_priority_assignment_table() {
        // Priorities 1 and 2 in class 1 (ETS 50 %), 3 in class 3 (ETS 50 %), the rest
        // strict: dcbnl's ieee_ets as `lldptool` would set it.
        let e = EtsConfig {
            strict: Priorities(0b1111_0101),
            bw: [0, 50, 0, 50, 0, 0, 0, 0],
            prio_tc: [0, 1, 1, 3, 4, 5, 6, 7],
        };
        let a = EtsArg::from_config(&e);
        assert_eq!(a.tc_tsa, [0, 2, 0, 2, 0, 0, 0, 0]);
        assert_eq!((a.ets_cap, a.prio_tc), (8, e.prio_tc));
        assert_eq!(a.to_config(), Ok(e));
        let bad = |f: &dyn Fn(&mut EtsArg)| {
            let mut a = a;
            f(&mut a);
            a.to_config()
        };
        // An algorithm dcbnl has but the NIC does not run (credit-based shaper, 1).
        assert!(bad(&|a| a.tc_tsa[4] = 1).is_err());
        // A class above 7, shares not adding up, an ETS class without a share.
        assert!(bad(&|a| a.prio_tc[2] = 8).is_err());
        assert!(bad(&|a| a.tc_tx_bw[3] = 40).is_err());
        assert!(bad(&|a| a.tc_tsa[5] = EtsArg::TSA_ETS).is_err());
        // ets_cap is the NIC's to report.
        assert!(bad(&|a| a.ets_cap = 0).is_ok());
    }
}
