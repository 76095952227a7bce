//! The port's address table and its priority settings: what the host configures through
//! the ABI besides QPs (the GID table, Data Center Bridging).

use crate::dcb::{DcbRegs, EtsConfig, EtsError, PfcThresholds, Priorities, PriorityMap};
use crate::transport::AddressVector;

/// Entries in a port's GID table.
pub const GID_TABLE_LEN: usize = 16;

/// The RoCE version of a GID entry (Linux `enum ib_gid_type`; rdma-core's
/// `enum ibv_gid_type` numbers them 1 and 2). Linux lists each address twice, once per
/// type ("IB/RoCE v1" and "RoCE v2"); a QP speaks the type of its source entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GidType {
    /// `IB_GID_TYPE_ROCE` (`IBV_GID_TYPE_ROCE_V1`): RoCEv1, the GRH and BTH directly
    /// over Ethernet (EtherType 0x8915).
    Roce,
    /// `IB_GID_TYPE_ROCE_UDP_ENCAP` (`IBV_GID_TYPE_ROCE_V2`): RoCEv2, over IPv4 or IPv6
    /// and UDP port 4791.
    #[default]
    RoceUdpEncap,
}

/// One GID table entry (`struct ibv_gid_entry`): an address of the port, either
/// IPv4-mapped (`::ffff:a.b.c.d`; RoCEv2 carries it over IPv4) or IPv6, and its RoCE
/// version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID, in network order.
    pub gid: [u8; 16],
    /// The 802.1Q VLAN the address lives on (`None`: untagged), as a Linux GID entry
    /// belongs to a VLAN device: frames for the GID must carry this VLAN (a VID 0
    /// priority tag counts as untagged) and the frames of QPs sending from the entry
    /// carry it.
    pub vlan_id: Option<u16>,
    /// RoCEv2 unless made with [`GidEntry::roce_v1`].
    pub gid_type: GidType,
}

impl GidEntry {
    /// An untagged RoCEv2 entry for `gid`.
    pub const fn new(gid: [u8; 16]) -> Self {
        Self {
            gid,
            vlan_id: None,
            gid_type: GidType::RoceUdpEncap,
        }
    }

    /// A RoCEv2 entry for `gid` on VLAN `vid` (1 to 4094).
    pub const fn with_vlan(gid: [u8; 16], vid: u16) -> Self {
        Self {
            gid,
            vlan_id: Some(vid),
            gid_type: GidType::RoceUdpEncap,
        }
    }

    /// The same address as a RoCEv1 (`IB_GID_TYPE_ROCE`) entry.
    pub const fn roce_v1(self) -> Self {
        Self {
            gid_type: GidType::Roce,
            ..self
        }
    }

    /// Whether the GID is IPv4-mapped (its frames go over IPv4).
    pub fn is_ipv4(&self) -> bool {
        is_ipv4_mapped(&self.gid)
    }
}

/// `::ffff:a.b.c.d`.
fn is_ipv4_mapped(gid: &[u8; 16]) -> bool {
    u128::from_be_bytes(*gid) >> 32 == 0xFFFF
}

/// The port's GID table: the addresses it answers to, and the source addresses its QPs
/// pick by `sgid_index`. Unused entries are empty (`ibv_query_gid` reads them as zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidTable {
    entries: [Option<GidEntry>; GID_TABLE_LEN],
}

impl Default for GidTable {
    fn default() -> Self {
        Self::new()
    }
}

impl GidTable {
    /// An empty table.
    pub const fn new() -> Self {
        Self {
            entries: [None; GID_TABLE_LEN],
        }
    }

    /// A table with `gid` at index 0 and nothing else.
    pub const fn single(gid: [u8; 16]) -> Self {
        let mut t = Self::new();
        t.entries[0] = Some(GidEntry::new(gid));
        t
    }

    /// The entry at `index`.
    pub fn get(&self, index: u8) -> Option<&GidEntry> {
        self.entries.get(usize::from(index))?.as_ref()
    }

    /// Sets or (with `None`) clears the entry at `index`; `Err` when the table has no
    /// such index.
    pub fn set(&mut self, index: u8, entry: Option<GidEntry>) -> Result<(), GidIndexError> {
        let e = self
            .entries
            .get_mut(usize::from(index))
            .ok_or(GidIndexError(index))?;
        *e = entry;
        Ok(())
    }

    /// Whether some entry is `gid` of the frame's RoCE version `ty`, on the frame's
    /// VLAN `vid` (`None` or 0: untagged or priority-tagged), so the frame is for this
    /// port. A frame for a GID on a VLAN that no entry of that GID owns is not (Linux
    /// finds GIDs per VLAN device, as rxe and mlx5 do), nor a RoCEv1 frame for a GID
    /// that is only a RoCEv2 entry, or the reverse. Compared as one integer per entry:
    /// this runs for every frame.
    #[inline]
    pub fn accepts(&self, gid: &[u8; 16], vid: Option<u16>, ty: GidType) -> bool {
        let g = u128::from_ne_bytes(*gid);
        let vid = vid.filter(|&v| v != 0);
        self.entries
            .iter()
            .flatten()
            .any(|e| u128::from_ne_bytes(e.gid) == g && e.vlan_id == vid && e.gid_type == ty)
    }

    /// Whether some entry is `gid`, on any VLAN.
    pub fn contains(&self, gid: &[u8; 16]) -> bool {
        self.entries.iter().flatten().any(|e| e.gid == *gid)
    }

    /// The source entry for frames towards `av`: the one at `av.sgid_index`, if it
    /// exists and is of the same IP version as the destination.
    pub fn source_for(&self, av: &AddressVector) -> Option<&GidEntry> {
        self.get(av.sgid_index)
            .filter(|e| e.is_ipv4() == av.is_ipv4())
    }
}

/// A GID index beyond the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidIndexError(pub u8);

/// The port's Data Center Bridging settings: which priorities are lossless (802.1Qbb
/// PFC), how frames map to priorities, and how the port's transmit queues share the link
/// (802.1Qaz ETS). The host sets them through the ABI's MODIFY_DCB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcbConfig {
    /// Priorities with PFC on (bit `p` for priority `p`): the port sends pause frames
    /// for them when its receive buffer fills, and honours the pause frames it receives
    /// for them. No priority is lossless by default.
    pub pfc_enable: u8,
    /// The priority of a frame: its DSCP's when untagged, its PCP's when VLAN-tagged. A
    /// QP's frames take the priority of its traffic class (or SL as the PCP), CNPs that
    /// of the port's CNP DSCP and priority. Default: DSCP `d` is priority `d >> 3`, PCP
    /// `p` is priority `p`.
    pub map: PriorityMap,
    /// Transmission selection among the eight priorities' transmit queues.
    pub ets: EtsConfig,
    /// The receive buffer's PFC thresholds (XOFF/XON in bytes per priority, the pause
    /// time of an XOFF), which the firmware writes to the DCB block.
    pub pfc_thresholds: PfcThresholds,
    /// The PCP a VLAN-tagged frame of priority `p` carries (the VLAN's egress map, as
    /// Linux's `egress-qos-map`). A tagged QP's priority is its SL, a CNP's the port's
    /// CNP priority. Default: PCP `p` for priority `p`. Keep it the inverse of
    /// `map.pcp` on the priorities in use: the MAC and the peer classify a tagged frame
    /// by its PCP.
    pub prio_pcp: [u8; 8],
}

impl DcbConfig {
    /// PFC on no priority, the default maps, and ETS with equal shares (a `const`, for
    /// `PortConfig::new`).
    pub const OFF: Self = Self {
        pfc_enable: 0,
        map: PriorityMap::new(),
        ets: EtsConfig::EQUAL,
        pfc_thresholds: PfcThresholds::DEFAULT,
        prio_pcp: [0, 1, 2, 3, 4, 5, 6, 7],
    };

    /// Why the settings cannot be applied on a NIC whose receive buffer holds
    /// `rx_buffer` bytes: [`DcbConfig::validate_rules`], or an XOFF threshold beyond
    /// that buffer (the NIC's own: QUERY_DCB's `rx_buffer`, the firmware's
    /// `Datapath::rx_buffer_bytes`).
    pub fn validate(&self, rx_buffer: u32) -> Result<(), &'static str> {
        self.validate_rules()?;
        if !self.pfc_thresholds.is_valid(rx_buffer) {
            return Err("PFC thresholds: XOFF beyond the NIC's receive buffer");
        }
        Ok(())
    }

    /// The rules that hold whatever the NIC: no map entry above priority 7 (or PCP 7),
    /// ETS shares by 802.1Qaz's rules, XON below XOFF and a pause of at least one
    /// quantum. What DCBX (whose TLVs carry no thresholds) checks; the NIC adds its
    /// buffer's size ([`DcbConfig::validate`]).
    pub fn validate_rules(&self) -> Result<(), &'static str> {
        if !self.map.is_valid() || self.prio_pcp.iter().any(|&p| p > 7) {
            return Err("a priority map entry above 7");
        }
        if !self.pfc_thresholds.is_consistent() {
            return Err("PFC thresholds: need XON < XOFF and quanta > 0");
        }
        self.ets.validate().map_err(|e| match e {
            EtsError::StrictWithShare(_) => "a strict ETS class with a bandwidth share",
            EtsError::NoShare(_) => "an ETS class without a bandwidth share",
            EtsError::Sum(_) => "ETS shares that do not add up to 100 %",
            EtsError::Class(_) => "a priority assigned to a traffic class above 7",
        })
    }
}

impl DcbConfig {
    /// The DCB block's registers for these settings, the port's MAC (the source of its
    /// PFC frames) and its link's bit times per clock cycle (Q16.8).
    pub fn registers(&self, mac: [u8; 6], bits_per_cycle_q8: u32) -> DcbRegs {
        DcbRegs {
            pfc_enable: Priorities(self.pfc_enable),
            ets: self.ets,
            map: self.map,
            thresholds: self.pfc_thresholds,
            mac,
            bits_per_cycle_q8,
        }
    }
}

impl Default for DcbConfig {
    fn default() -> Self {
        Self::OFF
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::ipv4_gid;

    #[test]
    fn gid_table_entries_and_source_rules() {
        let v4 = ipv4_gid([10, 0, 0, 1]);
        let v6 = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut t = GidTable::single(v4);
        t.set(3, Some(GidEntry::new(v6))).unwrap();
        assert_eq!(t.set(GID_TABLE_LEN as u8, None), Err(GidIndexError(16)));
        assert!(t.contains(&v4) && t.contains(&v6));
        assert!(!t.contains(&ipv4_gid([10, 0, 0, 2])));
        assert!(t.get(0).unwrap().is_ipv4() && !t.get(3).unwrap().is_ipv4());
        assert_eq!(t.get(1), None);
        // A source entry must exist and match the destination's IP version.
        let mut av = AddressVector {
            dgid: ipv4_gid([10, 0, 0, 9]),
            ..AddressVector::default()
        };
        assert_eq!(t.source_for(&av).map(|e| e.gid), Some(v4));
        av.sgid_index = 3;
        assert_eq!(t.source_for(&av), None);
        av.dgid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        assert_eq!(t.source_for(&av).map(|e| e.gid), Some(v6));
        av.sgid_index = 1;
        assert_eq!(t.source_for(&av), None);
        t.set(0, None).unwrap();
        assert!(!t.contains(&v4));
    }

    #[test]
    fn a_gid_is_accepted_only_on_its_own_vlan() {
        let v2 = GidType::RoceUdpEncap;
        let v4 = ipv4_gid([10, 0, 0, 1]);
        let mut t = GidTable::single(v4);
        t.set(1, Some(GidEntry::with_vlan(v4, 100))).unwrap();
        let v4b = ipv4_gid([10, 0, 0, 2]);
        t.set(2, Some(GidEntry::with_vlan(v4b, 200))).unwrap();
        assert!(t.accepts(&v4, None, v2) && t.accepts(&v4, Some(0), v2));
        assert!(t.accepts(&v4, Some(100), v2));
        assert!(!t.accepts(&v4, Some(200), v2));
        assert!(t.accepts(&v4b, Some(200), v2));
        assert!(!t.accepts(&v4b, None, v2) && !t.accepts(&v4b, Some(0), v2));
        assert!(!t.accepts(&v4b, Some(100), v2));
        assert!(t.contains(&v4b));
    }

    #[test]
    fn a_gid_is_accepted_only_in_its_own_roce_version() {
        // Linux lists an address once per type; a frame must match an entry of its own.
        let g = ipv4_gid([10, 0, 0, 1]);
        let mut t = GidTable::single(g);
        assert!(t.accepts(&g, None, GidType::RoceUdpEncap));
        assert!(!t.accepts(&g, None, GidType::Roce));
        t.set(1, Some(GidEntry::new(g).roce_v1())).unwrap();
        assert!(t.accepts(&g, None, GidType::Roce));
        t.set(0, None).unwrap();
        assert!(!t.accepts(&g, None, GidType::RoceUdpEncap));
        assert_eq!(t.get(1).unwrap().gid_type, GidType::Roce);
    }
}
