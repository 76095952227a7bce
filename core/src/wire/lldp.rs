//! LLDP (IEEE 802.1AB) frames carrying DCBX, the IEEE 802.1Qaz exchange of a port's Data
//! Center Bridging settings: the ETS Configuration and ETS Recommendation TLVs, the PFC
//! Configuration TLV and the Application Priority TLV (here its DSCP entries: the
//! port's DSCP to priority map).
//!
//! An LLDPDU is a list of TLVs, each with a 16-bit header of a 7-bit type and a 9-bit
//! length: Chassis ID (1), Port ID (2) and Time To Live (3) first, in that order, then
//! optional ones, then End (0, length 0). DCBX's TLVs are organizationally specific
//! (type 127) with the IEEE 802.1 OUI 00-80-C2 and a subtype:
//!
//! | subtype | TLV | body after OUI and subtype |
//! |---|---|---|
//! | 0x09 | ETS Configuration | willing (bit 7), CBS (bit 6), max TCs (bits 2..0, 0 = 8); priority assignment table (4 bytes, a nibble per priority, priority 0 high nibble first); TC bandwidth table (8 bytes, percent); TSA table (8 bytes: 0 strict, 1 CBS, 2 ETS, 255 vendor) |
//! | 0x0A | ETS Recommendation | a reserved byte, then the same three tables |
//! | 0x0B | PFC Configuration | willing (bit 7), MBC (bit 6), PFC capability (bits 3..0); enable (bit `p` = priority `p`) |
//! | 0x0C | Application Priority | a reserved byte, then 3-byte entries: priority (bits 7..5), selector (bits 2..0), protocol ID (16 bits) |
//!
//! Selectors are those of Linux's `dcbnl.h` (`IEEE_8021QAZ_APP_SEL_*`): 1 EtherType, 2
//! TCP/SCTP port, 3 UDP/DCCP port, 4 TCP/SCTP/UDP/DCCP port, 5 DSCP (802.1Qcd). The layout
//! is checked against Wireshark's LLDP dissector (`tests/tests/lldp_tshark.rs`).
//!
//! This NIC's traffic classes are its priorities (priority `p` is TC `p`), so it sends
//! the identity priority assignment and takes a peer's configuration only when each of
//! the peer's classes holds one priority ([`DcbxRepr::to_config`]).

use super::ethernet::{EthernetRepr, Frame, MacAddr};
use super::field::{get_u16, set_u16};
use super::Truncated;
use crate::dcb::{EtsConfig, Priorities, PRIORITIES};
use crate::engine::DcbConfig;

/// LLDP's EtherType.
pub const ETHERTYPE_LLDP: u16 = 0x88CC;
/// The nearest-bridge group address that LLDP frames are sent to.
pub const LLDP_DST: MacAddr = MacAddr([0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E]);
/// The IEEE 802.1 OUI of DCBX's TLVs.
pub const OUI_IEEE_8021: [u8; 3] = [0x00, 0x80, 0xC2];
/// Shortest Ethernet frame without FCS; LLDP frames are padded to it.
const MIN_FRAME: usize = 60;

const TLV_END: u8 = 0;
const TLV_CHASSIS_ID: u8 = 1;
const TLV_PORT_ID: u8 = 2;
const TLV_TTL: u8 = 3;
const TLV_ORG: u8 = 127;
/// Chassis ID subtype 4 and Port ID subtype 3: a MAC address.
const CHASSIS_MAC: u8 = 4;
const PORT_MAC: u8 = 3;

const SUB_ETS_CONFIG: u8 = 0x09;
const SUB_ETS_RECO: u8 = 0x0A;
const SUB_PFC: u8 = 0x0B;
const SUB_APP: u8 = 0x0C;

/// Transmission selection algorithm: strict priority.
pub const TSA_STRICT: u8 = 0;
/// Transmission selection algorithm: credit-based shaper.
pub const TSA_CBS: u8 = 1;
/// Transmission selection algorithm: ETS.
pub const TSA_ETS: u8 = 2;
/// Application selector: the protocol ID is a DSCP (802.1Qcd, Linux
/// `IEEE_8021QAZ_APP_SEL_DSCP`).
pub const APP_SEL_DSCP: u8 = 5;
/// Application selector: the protocol ID is a UDP (or DCCP) port.
pub const APP_SEL_UDP: u8 = 3;

/// Application priority entries a frame may carry here: a DSCP map (64) and some more.
pub const MAX_APPS: usize = 80;

/// The ETS Configuration (or Recommendation) TLV's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EtsTlv {
    /// The sender accepts its peer's configuration (Configuration TLV only).
    pub willing: bool,
    /// Credit-based shaper supported (Configuration TLV only).
    pub cbs: bool,
    /// Traffic classes supported, 1..8 (Configuration TLV only; 0 in a Recommendation).
    pub max_tcs: u8,
    /// The traffic class of each priority (0..7).
    pub prio_tc: [u8; PRIORITIES],
    /// Each traffic class's bandwidth share in percent.
    pub tc_bw: [u8; PRIORITIES],
    /// Each traffic class's transmission selection algorithm ([`TSA_STRICT`],
    /// [`TSA_ETS`], ...).
    pub tsa: [u8; PRIORITIES],
}

/// The PFC Configuration TLV.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PfcTlv {
    pub willing: bool,
    /// MACsec bypass capability.
    pub mbc: bool,
    /// How many priorities may have PFC on at once (0..8).
    pub cap: u8,
    /// Bit `p`: PFC on priority `p`.
    pub enable: u8,
}

/// One Application Priority entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AppEntry {
    pub priority: u8,
    /// [`APP_SEL_DSCP`], [`APP_SEL_UDP`], ...
    pub selector: u8,
    pub protocol: u16,
}

/// An LLDPDU with its DCBX TLVs: the sender's MAC as chassis and port ID, the TTL, and
/// what the sender announces of its DCB settings. Other TLVs are skipped on parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcbxRepr {
    /// Chassis ID and Port ID (both the port's MAC here).
    pub mac: MacAddr,
    /// Seconds the receiver keeps this information.
    pub ttl: u16,
    pub ets: Option<EtsTlv>,
    pub ets_reco: Option<EtsTlv>,
    pub pfc: Option<PfcTlv>,
    pub apps: heapless::Vec<AppEntry, MAX_APPS>,
}

/// Why a frame is not a valid LLDPDU with DCBX TLVs this port understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LldpError {
    Truncated,
    NotLldp,
    /// The TLV at this byte offset (of the LLDPDU) runs past the frame.
    TlvOverrun(usize),
    /// Chassis ID, Port ID and TTL must come first, in that order (the type found).
    MandatoryTlv(u8),
    /// A Chassis or Port ID that is not a MAC address (its subtype).
    IdSubtype(u8),
    /// No End TLV.
    NoEnd,
    /// A DCBX TLV of the wrong length (its subtype).
    DcbxLength(u8),
    /// More Application Priority entries than [`MAX_APPS`].
    TooManyApps,
    /// A value out of range in a DCBX TLV (its subtype).
    BadValue(u8),
}

impl From<Truncated> for LldpError {
    fn from(_: Truncated) -> Self {
        Self::Truncated
    }
}

/// Why a peer's DCBX configuration cannot be run by this port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DcbxError {
    /// A traffic class holds several priorities (this port's classes are its
    /// priorities): the class.
    SharedClass(u8),
    /// A transmission selection algorithm other than strict or ETS (the class).
    Tsa(u8),
    /// The ETS tables break 802.1Qaz's rules (`DcbConfig::validate`).
    Invalid(&'static str),
}

impl EtsTlv {
    /// The tables of `ets`: priority `p` in class `p`, strict classes with TSA 0 and no
    /// share, ETS classes with TSA 2 and their share.
    pub fn from_ets(ets: &EtsConfig, willing: bool) -> Self {
        let mut tsa = [TSA_ETS; PRIORITIES];
        for (p, t) in tsa.iter_mut().enumerate() {
            if ets.strict.contains(p as u8) {
                *t = TSA_STRICT;
            }
        }
        Self {
            willing,
            cbs: false,
            max_tcs: PRIORITIES as u8,
            prio_tc: core::array::from_fn(|p| p as u8),
            tc_bw: ets.bw,
            tsa,
        }
    }

    /// The ETS of these tables on a port whose classes are its priorities: each
    /// priority takes its class's algorithm and share. Refused when a class holds
    /// several priorities (their share could not be split), uses an algorithm other
    /// than strict or ETS, or the shares break the rules.
    pub fn to_ets(&self) -> Result<EtsConfig, DcbxError> {
        let mut ets = EtsConfig::STRICT;
        let mut seen = 0u8;
        for p in 0..PRIORITIES {
            let tc = self.prio_tc[p] & 7;
            if seen & 1 << tc != 0 {
                return Err(DcbxError::SharedClass(tc));
            }
            seen |= 1 << tc;
            match self.tsa[usize::from(tc)] {
                TSA_STRICT => {}
                TSA_ETS => {
                    ets.strict = ets.strict.without(Priorities::only(p as u8));
                    ets.bw[p] = self.tc_bw[usize::from(tc)];
                }
                _ => return Err(DcbxError::Tsa(tc)),
            }
        }
        let probe = DcbConfig {
            ets,
            ..DcbConfig::OFF
        };
        probe.validate_rules().map_err(DcbxError::Invalid)?;
        Ok(ets)
    }

    fn parse(body: &[u8], config: bool) -> Result<Self, LldpError> {
        let sub = if config { SUB_ETS_CONFIG } else { SUB_ETS_RECO };
        let &[flags, ref rest @ ..] = body else {
            return Err(LldpError::DcbxLength(sub));
        };
        let (Some(pa), Some(bw), Some(tsa), 21) = (
            rest.get(0..4),
            rest.get(4..12),
            rest.get(12..20),
            body.len(),
        ) else {
            return Err(LldpError::DcbxLength(sub));
        };
        let mut t = Self::default();
        if config {
            t.willing = flags & 0x80 != 0;
            t.cbs = flags & 0x40 != 0;
            t.max_tcs = match flags & 7 {
                0 => 8,
                n => n,
            };
        }
        for (p, tc) in t.prio_tc.iter_mut().enumerate() {
            *tc = pa[p / 2] >> (4 * (1 - p % 2)) & 0x0F;
            if *tc > 7 {
                return Err(LldpError::BadValue(sub));
            }
        }
        t.tc_bw.copy_from_slice(bw);
        t.tsa.copy_from_slice(tsa);
        Ok(t)
    }

    fn emit(&self, config: bool, out: &mut [u8]) {
        out[0] = if config {
            u8::from(self.willing) << 7 | u8::from(self.cbs) << 6 | (self.max_tcs & 7)
        } else {
            0
        };
        for (i, b) in out[1..5].iter_mut().enumerate() {
            *b = (self.prio_tc[2 * i] & 0x0F) << 4 | (self.prio_tc[2 * i + 1] & 0x0F);
        }
        out[5..13].copy_from_slice(&self.tc_bw);
        out[13..21].copy_from_slice(&self.tsa);
    }
}

impl DcbxRepr {
    /// What a port with MAC `mac` and settings `dcb` announces: its ETS as
    /// Configuration and Recommendation, its PFC (capability 8), and its whole DSCP map
    /// as Application Priority entries; `willing`: it would take its peer's settings.
    pub fn from_config(mac: MacAddr, dcb: &DcbConfig, willing: bool, ttl: u16) -> Self {
        let mut apps = heapless::Vec::new();
        for (d, &p) in dcb.map.dscp.iter().enumerate() {
            // 64 entries always fit MAX_APPS.
            let _ = apps.push(AppEntry {
                priority: p & 7,
                selector: APP_SEL_DSCP,
                protocol: d as u16,
            });
        }
        Self {
            mac,
            ttl,
            ets: Some(EtsTlv::from_ets(&dcb.ets, willing)),
            ets_reco: Some(EtsTlv {
                max_tcs: 0,
                ..EtsTlv::from_ets(&dcb.ets, false)
            }),
            pfc: Some(PfcTlv {
                willing,
                mbc: false,
                cap: PRIORITIES as u8,
                enable: dcb.pfc_enable,
            }),
            apps,
        }
    }

    /// `base` with what this announcement says, as a willing port takes its peer's
    /// settings (802.1Qaz): ETS from the Recommendation TLV (else the Configuration),
    /// PFC's enable bits, and each DSCP entry of the Application Priority table (other
    /// entries and the PCP map are left alone).
    pub fn to_config(&self, base: &DcbConfig) -> Result<DcbConfig, DcbxError> {
        let mut c = *base;
        if let Some(ets) = self.ets_reco.as_ref().or(self.ets.as_ref()) {
            c.ets = ets.to_ets()?;
        }
        if let Some(pfc) = &self.pfc {
            c.pfc_enable = pfc.enable;
        }
        for a in self.apps.iter().filter(|a| a.selector == APP_SEL_DSCP) {
            if let Some(slot) = c.map.dscp.get_mut(usize::from(a.protocol)) {
                *slot = a.priority & 7;
            }
        }
        c.validate_rules().map_err(DcbxError::Invalid)?;
        Ok(c)
    }

    /// Bytes of the frame (without FCS) this writes: padded to 60.
    pub fn frame_len(&self) -> usize {
        let mut n = EthernetRepr::LEN + (2 + 7) * 2 + (2 + 2) + 2;
        if self.ets.is_some() {
            n += 2 + 25;
        }
        if self.ets_reco.is_some() {
            n += 2 + 25;
        }
        if self.pfc.is_some() {
            n += 2 + 6;
        }
        if !self.apps.is_empty() {
            n += 2 + 5 + 3 * self.apps.len();
        }
        n.max(MIN_FRAME)
    }

    /// Writes the whole frame from `mac` to the nearest-bridge address into `buf`.
    pub fn emit_frame(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let len = self.frame_len();
        let b = buf.get_mut(..len).ok_or(Truncated)?;
        b.fill(0);
        EthernetRepr {
            dst: LLDP_DST,
            src: self.mac,
            ethertype: ETHERTYPE_LLDP,
        }
        .emit(b)?;
        let mut at = EthernetRepr::LEN;
        // Writes a TLV header at `at`, moves `at` past the TLV; returns where its body
        // starts.
        let tlv = |b: &mut [u8], t: u8, body_len: usize, at: &mut usize| -> usize {
            set_u16(b, *at, u16::from(t) << 9 | body_len as u16);
            *at += 2 + body_len;
            *at - body_len
        };
        let s = tlv(b, TLV_CHASSIS_ID, 7, &mut at);
        b[s] = CHASSIS_MAC;
        b[s + 1..s + 7].copy_from_slice(&self.mac.0);
        let s = tlv(b, TLV_PORT_ID, 7, &mut at);
        b[s] = PORT_MAC;
        b[s + 1..s + 7].copy_from_slice(&self.mac.0);
        let s = tlv(b, TLV_TTL, 2, &mut at);
        set_u16(b, s, self.ttl);
        let org = |b: &mut [u8], s: usize, sub: u8| {
            b[s..s + 3].copy_from_slice(&OUI_IEEE_8021);
            b[s + 3] = sub;
            s + 4
        };
        for (t, config) in [(&self.ets, true), (&self.ets_reco, false)] {
            if let Some(t) = t {
                let s = tlv(b, TLV_ORG, 25, &mut at);
                let sub = if config { SUB_ETS_CONFIG } else { SUB_ETS_RECO };
                let s = org(b, s, sub);
                t.emit(config, &mut b[s..s + 21]);
            }
        }
        if let Some(p) = &self.pfc {
            let s = tlv(b, TLV_ORG, 6, &mut at);
            let s = org(b, s, SUB_PFC);
            b[s] = u8::from(p.willing) << 7 | u8::from(p.mbc) << 6 | (p.cap & 0x0F);
            b[s + 1] = p.enable;
        }
        if !self.apps.is_empty() {
            let s = tlv(b, TLV_ORG, 5 + 3 * self.apps.len(), &mut at);
            let s = org(b, s, SUB_APP) + 1;
            for (i, a) in self.apps.iter().enumerate() {
                let e = s + 3 * i;
                b[e] = (a.priority & 7) << 5 | (a.selector & 7);
                set_u16(b, e + 1, a.protocol);
            }
        }
        tlv(b, TLV_END, 0, &mut at);
        Ok(len)
    }

    /// Parses an untagged LLDP frame (without FCS).
    pub fn parse_frame(frame: &[u8]) -> Result<Self, LldpError> {
        let eth = Frame::new_checked(frame).map_err(|_| LldpError::Truncated)?;
        if eth.ethertype() != ETHERTYPE_LLDP {
            return Err(LldpError::NotLldp);
        }
        let pdu = frame.get(EthernetRepr::LEN..).ok_or(LldpError::Truncated)?;
        let mut out = Self {
            mac: MacAddr([0; 6]),
            ttl: 0,
            ets: None,
            ets_reco: None,
            pfc: None,
            apps: heapless::Vec::new(),
        };
        let mut at = 0;
        let mut index = 0;
        loop {
            let header = pdu.get(at..at + 2).ok_or(LldpError::NoEnd)?;
            let head = get_u16(header, 0);
            let (t, len) = ((head >> 9) as u8, usize::from(head & 0x1FF));
            let body = pdu
                .get(at + 2..at + 2 + len)
                .ok_or(LldpError::TlvOverrun(at))?;
            let want = [TLV_CHASSIS_ID, TLV_PORT_ID, TLV_TTL];
            if let Some(&w) = want.get(index) {
                if t != w {
                    return Err(LldpError::MandatoryTlv(t));
                }
            }
            match t {
                TLV_END => return Ok(out),
                TLV_CHASSIS_ID | TLV_PORT_ID => {
                    let mac_subtype = if t == TLV_CHASSIS_ID {
                        CHASSIS_MAC
                    } else {
                        PORT_MAC
                    };
                    match body {
                        [s, mac @ ..] if *s == mac_subtype && mac.len() == 6 => {
                            if t == TLV_CHASSIS_ID {
                                out.mac.0.copy_from_slice(mac);
                            }
                        }
                        [s, ..] => return Err(LldpError::IdSubtype(*s)),
                        [] => return Err(LldpError::Truncated),
                    }
                }
                TLV_TTL => {
                    let [hi, lo] = body else {
                        return Err(LldpError::Truncated);
                    };
                    out.ttl = u16::from_be_bytes([*hi, *lo]);
                }
                TLV_ORG if body.get(..3) == Some(&OUI_IEEE_8021) && body.len() >= 4 => {
                    out.parse_dcbx(body[3], &body[4..])?;
                }
                _ => {}
            }
            at += 2 + len;
            index += 1;
        }
    }

    fn parse_dcbx(&mut self, sub: u8, body: &[u8]) -> Result<(), LldpError> {
        match sub {
            SUB_ETS_CONFIG => self.ets = Some(EtsTlv::parse(body, true)?),
            SUB_ETS_RECO => self.ets_reco = Some(EtsTlv::parse(body, false)?),
            SUB_PFC => {
                let &[flags, enable] = body else {
                    return Err(LldpError::DcbxLength(sub));
                };
                if flags & 0x0F > 8 {
                    return Err(LldpError::BadValue(sub));
                }
                self.pfc = Some(PfcTlv {
                    willing: flags & 0x80 != 0,
                    mbc: flags & 0x40 != 0,
                    cap: flags & 0x0F,
                    enable,
                });
            }
            SUB_APP => {
                let Some(entries) = body.get(1..).filter(|e| e.len() % 3 == 0) else {
                    return Err(LldpError::DcbxLength(sub));
                };
                self.apps.clear();
                for e in entries.chunks_exact(3) {
                    let entry = AppEntry {
                        priority: e[0] >> 5,
                        selector: e[0] & 7,
                        protocol: u16::from_be_bytes([e[1], e[2]]),
                    };
                    self.apps.push(entry).map_err(|_| LldpError::TooManyApps)?;
                }
            }
            // Other 802.1 TLVs (VLAN names, congestion notification, ...).
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x11]);

    fn ets_80_20() -> DcbConfig {
        let mut c = DcbConfig {
            pfc_enable: 0b1000,
            ets: EtsConfig {
                strict: Priorities(0b1111_0101),
                bw: [0, 20, 0, 80, 0, 0, 0, 0],
                ..EtsConfig::STRICT
            },
            ..DcbConfig::OFF
        };
        c.map.dscp[10] = 1;
        c
    }

    #[test]
    fn tlv_bytes_by_hand() {
        let r = DcbxRepr::from_config(MAC, &ets_80_20(), true, 120);
        let mut buf = [0u8; 512];
        let n = r.emit_frame(&mut buf).unwrap();
        assert_eq!(n, 14 + 9 + 9 + 4 + 27 + 27 + 8 + (2 + 5 + 192) + 2);
        assert_eq!(buf[12..14], [0x88, 0xCC]);
        // Chassis ID: type 1, length 7 -> 0x0207; subtype 4, the MAC.
        assert_eq!(buf[14..17], [0x02, 0x07, 0x04]);
        // TTL: type 3, length 2 -> 0x0602, 120 s.
        assert_eq!(buf[32..36], [0x06, 0x02, 0x00, 120]);
        // ETS Configuration: type 127, length 25 -> 0xFE19, OUI, subtype 9, willing,
        // max TCs 8 written as 0, identity table, shares, TSAs.
        let ets = &buf[36..63];
        assert_eq!(ets[..6], [0xFE, 0x19, 0x00, 0x80, 0xC2, 0x09]);
        assert_eq!(ets[6], 0x80);
        assert_eq!(ets[7..11], [0x01, 0x23, 0x45, 0x67]);
        assert_eq!(ets[11..19], [0, 20, 0, 80, 0, 0, 0, 0]);
        assert_eq!(ets[19..27], [0, 2, 0, 2, 0, 0, 0, 0]);
        // PFC: length 6, willing + capability 8, priority 3.
        let pfc = &buf[90..98];
        assert_eq!(pfc, [0xFE, 0x06, 0x00, 0x80, 0xC2, 0x0B, 0x88, 0x08]);
        // Application Priority: DSCP 10 on priority 1, selector 5.
        let app = &buf[98..];
        assert_eq!(app[..7], [0xFE, 0xC5, 0x00, 0x80, 0xC2, 0x0C, 0]);
        assert_eq!(app[7 + 3 * 10..7 + 3 * 11], [1 << 5 | 5, 0, 10]);
        assert_eq!(app[7 + 3 * 48..7 + 3 * 49], [6 << 5 | 5, 0, 48]);
        assert_eq!(buf[n - 2..n], [0, 0], "End");
    }

    /// A frame written by hand from the TLV table of the module header (Python, not this
    /// code; `fuzz/seeds/frames/lldp_dcbx`), which tshark 4.0 reads as: willing, ETS
    /// 20 % / 80 % on classes 1 and 3 (TSA ETS), the others strict, PFC on priority 3,
    /// application priorities UDP 4791 -> 3 and DSCP 10 -> 1.
    #[test]
    fn a_frame_made_by_hand_parses() {
        const FRAME: [u8; 86] = [
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0xcc,
            0x02, 0x07, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x04, 0x07, 0x03, 0x02, 0x00,
            0x00, 0x00, 0x00, 0x01, 0x06, 0x02, 0x00, 0x78, 0xfe, 0x19, 0x00, 0x80, 0xc2, 0x09,
            0x80, 0x01, 0x23, 0x45, 0x67, 0x00, 0x14, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x02, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x06, 0x00, 0x80, 0xc2, 0x0b, 0x88,
            0x08, 0xfe, 0x0b, 0x00, 0x80, 0xc2, 0x0c, 0x00, 0x63, 0x12, 0xb7, 0x25, 0x00, 0x0a,
            0x00, 0x00,
        ];
        let r = DcbxRepr::parse_frame(&FRAME).unwrap();
        assert_eq!(r.mac, MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(r.ttl, 120);
        let ets = r.ets.unwrap();
        assert!(ets.willing && !ets.cbs);
        assert_eq!(ets.max_tcs, 8);
        assert_eq!(ets.prio_tc, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(ets.tc_bw, [0, 20, 0, 80, 0, 0, 0, 0]);
        assert_eq!(ets.tsa, [0, 2, 0, 2, 0, 0, 0, 0]);
        assert_eq!(r.ets_reco, None);
        assert_eq!(
            r.pfc,
            Some(PfcTlv {
                willing: true,
                mbc: false,
                cap: 8,
                enable: 0x08
            })
        );
        let apps: &[AppEntry] = &r.apps;
        assert_eq!(
            apps,
            [
                AppEntry {
                    priority: 3,
                    selector: APP_SEL_UDP,
                    protocol: 4791
                },
                AppEntry {
                    priority: 1,
                    selector: APP_SEL_DSCP,
                    protocol: 10
                }
            ]
        );
        let c = r.to_config(&DcbConfig::OFF).unwrap();
        assert_eq!(
            c,
            ets_80_20(),
            "the same settings as the emitted frames carry"
        );
    }

    #[test]
    fn round_trip_and_adoption() {
        let want = ets_80_20();
        let r = DcbxRepr::from_config(MAC, &want, false, 120);
        let mut buf = [0u8; 512];
        let n = r.emit_frame(&mut buf).unwrap();
        let back = DcbxRepr::parse_frame(&buf[..n]).unwrap();
        assert_eq!(back, r);
        // A willing port with the defaults takes the whole configuration.
        assert_eq!(back.to_config(&DcbConfig::OFF), Ok(want));
        // A short frame is padded to 60 bytes and still parses.
        let bare = DcbxRepr {
            ets: None,
            ets_reco: None,
            pfc: None,
            apps: heapless::Vec::new(),
            ..r
        };
        let n = bare.emit_frame(&mut buf).unwrap();
        assert_eq!(n, 60);
        assert_eq!(DcbxRepr::parse_frame(&buf[..n]), Ok(bare));
    }

    #[test]
    fn what_a_port_cannot_run_or_parse_is_refused() {
        let mut t = EtsTlv::from_ets(&ets_80_20().ets, false);
        // Priorities 0 and 1 in one class.
        t.prio_tc[1] = 0;
        assert_eq!(t.to_ets(), Err(DcbxError::SharedClass(0)));
        let mut t = EtsTlv::from_ets(&ets_80_20().ets, false);
        t.tsa[1] = TSA_CBS;
        assert_eq!(t.to_ets(), Err(DcbxError::Tsa(1)));
        t.tsa[1] = TSA_ETS;
        t.tc_bw[1] = 30;
        assert!(matches!(t.to_ets(), Err(DcbxError::Invalid(_))));
        // Frames: mandatory TLVs out of order, a TLV past the end, no End.
        let r = DcbxRepr::from_config(MAC, &DcbConfig::OFF, false, 120);
        let mut buf = [0u8; 512];
        let n = r.emit_frame(&mut buf).unwrap();
        let mut swapped = buf;
        swapped[14] = 0x04; // the Chassis ID TLV claims to be a Port ID
        assert_eq!(
            DcbxRepr::parse_frame(&swapped[..n]),
            Err(LldpError::MandatoryTlv(2))
        );
        assert_eq!(DcbxRepr::parse_frame(&buf[..n - 2]), Err(LldpError::NoEnd));
        assert_eq!(
            DcbxRepr::parse_frame(&buf[..40]),
            Err(LldpError::TlvOverrun(22))
        );
        let mut pfc = buf;
        pfc[36 + 27 * 2 + 6] = 0x0F; // PFC capability 15
        assert_eq!(
            DcbxRepr::parse_frame(&pfc[..n]),
            Err(LldpError::BadValue(SUB_PFC))
        );
        // Every prefix of a valid frame is an error, never a panic.
        for k in 0..n {
            assert!(DcbxRepr::parse_frame(&buf[..k]).is_err());
        }
    }
}
