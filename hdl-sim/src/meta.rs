//! The RX metadata record (`roce_rx_pkg::rx_meta_t` in `rtl/roce_rx_pkg.sv`)
//! and the RX error codes.
//!
//! [`META_FIELDS`] lists the struct's members in declaration order, which in a
//! SystemVerilog packed struct is most significant first. A unit test parses
//! the package source and checks this table against it, member by member.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// `(name, width in bits)` of each member of `rx_meta_t`, most significant first.
pub const META_FIELDS: &[(&str, u32)] = &[
    ("error", 5),
    ("frame_len", 17),
    ("l3_kind", 2),
    ("eth_dst", 48),
    ("eth_src", 48),
    ("ethertype", 16),
    ("vlan_present", 1),
    ("vlan_pcp", 3),
    ("vlan_dei", 1),
    ("vlan_vid", 12),
    ("ip_version", 4),
    ("ip_ihl", 4),
    ("ip_dscp", 6),
    ("ip_ecn", 2),
    ("ip_flow_label", 20),
    ("ip_length", 16),
    ("ip_id", 16),
    ("ip_flags", 3),
    ("ip_frag_offset", 13),
    ("ip_ttl", 8),
    ("ip_protocol", 8),
    ("ip_checksum", 16),
    ("ip_src", 128),
    ("ip_dst", 128),
    ("udp_sport", 16),
    ("udp_dport", 16),
    ("udp_length", 16),
    ("udp_checksum", 16),
    ("bth_opcode", 8),
    ("bth_se", 1),
    ("bth_migreq", 1),
    ("bth_padcnt", 2),
    ("bth_tver", 4),
    ("bth_pkey", 16),
    ("bth_fecn", 1),
    ("bth_becn", 1),
    ("bth_resv6", 6),
    ("bth_destqp", 24),
    ("bth_ackreq", 1),
    ("bth_resv7", 7),
    ("bth_psn", 24),
    ("ext_mask", 8),
    ("reth_va", 64),
    ("reth_rkey", 32),
    ("reth_dmalen", 32),
    ("aeth_syndrome", 8),
    ("aeth_msn", 24),
    ("atomic_va", 64),
    ("atomic_rkey", 32),
    ("atomic_swap_add", 64),
    ("atomic_compare", 64),
    ("atomicack_orig", 64),
    ("immdt", 32),
    ("ieth_rkey", 32),
    ("deth_qkey", 32),
    ("deth_srcqp", 24),
    ("cnp_reserved", 128),
    ("hdr_len", 6),
    ("payload_offset", 17),
    ("payload_len", 16),
    ("pad_bytes", 24),
    ("icrc", 32),
    ("icrc_calc", 32),
    ("trailer_len", 17),
    ("stream_len", 17),
];

/// Total width of the record, bits.
pub const META_BITS: u32 = {
    let mut n = 0;
    let mut i = 0;
    while i < META_FIELDS.len() {
        n += META_FIELDS[i].1;
        i += 1;
    }
    n
};

/// Index of `name` in [`META_FIELDS`]; a compile error in const context
/// when there is no such member.
pub const fn field_index(name: &str) -> usize {
    let mut i = 0;
    while i < META_FIELDS.len() {
        let n = META_FIELDS[i].0.as_bytes();
        let m = name.as_bytes();
        if n.len() == m.len() {
            let mut k = 0;
            while k < n.len() && n[k] == m[k] {
                k += 1;
            }
            if k == n.len() {
                return i;
            }
        }
        i += 1;
    }
    panic!("rx_meta_t has no such member")
}

/// `(lsb, width)` of each member, in [`META_FIELDS`] order.
const META_SPANS: [(u32, u32); META_FIELDS.len()] = {
    let mut spans = [(0u32, 0u32); META_FIELDS.len()];
    let mut lsb = META_BITS;
    let mut i = 0;
    while i < META_FIELDS.len() {
        lsb -= META_FIELDS[i].1;
        spans[i] = (lsb, META_FIELDS[i].1);
        i += 1;
    }
    spans
};

/// The record as the model presents it: little-endian 64-bit words.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RawMeta(pub [u64; 32]);

impl RawMeta {
    /// Bits `lsb .. lsb + width` (width <= 128).
    fn bits(&self, lsb: u32, width: u32) -> u128 {
        let mut v: u128 = 0;
        let mut got = 0;
        while got < width {
            let b = lsb + got;
            let off = b % 64;
            let take = (64 - off).min(width - got);
            let chunk = (self.0[(b / 64) as usize] >> off) & (u64::MAX >> (64 - take));
            v |= u128::from(chunk) << got;
            got += take;
        }
        v
    }

    /// Member `i` of `rx_meta_t` (see [`field_index`]).
    pub fn field_at(&self, i: usize) -> u128 {
        let (lsb, w) = META_SPANS[i];
        self.bits(lsb, w)
    }

    /// The member `name` of `rx_meta_t`. Panics on a name not in [`META_FIELDS`].
    pub fn field(&self, name: &str) -> u128 {
        match META_FIELDS.iter().position(|&(n, _)| n == name) {
            Some(i) => self.field_at(i),
            None => panic!("rx_meta_t has no member {name}"),
        }
    }
}

/// `raw.field("name")` with the index resolved at compile time.
macro_rules! fld {
    ($raw:expr, $name:literal) => {{
        const I: usize = field_index($name);
        $raw.field_at(I)
    }};
}

impl fmt::Debug for RawMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for &(n, _) in META_FIELDS {
            m.entry(&n, &format_args!("{:#x}", self.field(n)));
        }
        m.finish()
    }
}

/// Why a received frame is not a usable RoCE packet: exactly the error names
/// of `packet-json.md`, in its table order (= the RTL's `rx_err_e` codes 1..16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RxError {
    TruncatedFrame = 1,
    TruncatedBth = 2,
    TruncatedExtHeader = 3,
    NotRoceUdpPort = 4,
    UnsupportedEthertype = 5,
    NotUdp = 6,
    BadIpVersion = 7,
    BadIpHeader = 8,
    BadIpv4Checksum = 9,
    IpFragment = 10,
    LengthMismatch = 11,
    UnalignedLength = 12,
    UnsupportedTver = 13,
    PadExceedsPayload = 14,
    UnknownOpcode = 15,
    IcrcMismatch = 16,
}

impl RxError {
    /// All errors, in code order.
    pub const ALL: [RxError; 16] = [
        RxError::TruncatedFrame,
        RxError::TruncatedBth,
        RxError::TruncatedExtHeader,
        RxError::NotRoceUdpPort,
        RxError::UnsupportedEthertype,
        RxError::NotUdp,
        RxError::BadIpVersion,
        RxError::BadIpHeader,
        RxError::BadIpv4Checksum,
        RxError::IpFragment,
        RxError::LengthMismatch,
        RxError::UnalignedLength,
        RxError::UnsupportedTver,
        RxError::PadExceedsPayload,
        RxError::UnknownOpcode,
        RxError::IcrcMismatch,
    ];

    /// The RTL code: `Ok(None)` for 0 (no error), `Err(code)` for an unknown code.
    pub fn from_code(code: u8) -> Result<Option<RxError>, u8> {
        match code {
            0 => Ok(None),
            1..=16 => Ok(Some(Self::ALL[usize::from(code) - 1])),
            c => Err(c),
        }
    }

    /// The snake_case name of packet-json.md.
    pub fn name(self) -> &'static str {
        match self {
            RxError::TruncatedFrame => "truncated_frame",
            RxError::TruncatedBth => "truncated_bth",
            RxError::TruncatedExtHeader => "truncated_ext_header",
            RxError::NotRoceUdpPort => "not_roce_udp_port",
            RxError::UnsupportedEthertype => "unsupported_ethertype",
            RxError::NotUdp => "not_udp",
            RxError::BadIpVersion => "bad_ip_version",
            RxError::BadIpHeader => "bad_ip_header",
            RxError::BadIpv4Checksum => "bad_ipv4_checksum",
            RxError::IpFragment => "ip_fragment",
            RxError::LengthMismatch => "length_mismatch",
            RxError::UnalignedLength => "unaligned_length",
            RxError::UnsupportedTver => "unsupported_tver",
            RxError::PadExceedsPayload => "pad_exceeds_payload",
            RxError::UnknownOpcode => "unknown_opcode",
            RxError::IcrcMismatch => "icrc_mismatch",
        }
    }

    /// Inverse of [`RxError::name`].
    pub fn from_name(name: &str) -> Option<RxError> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }
}

impl fmt::Display for RxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The network layer behind the EtherType.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3Kind {
    /// EtherType not supported
    None,
    /// IPv4 (RoCEv2)
    Ipv4,
    /// IPv6 (RoCEv2)
    Ipv6,
    /// InfiniBand GRH on EtherType 0x8915 (RoCEv1)
    Grh,
}

/// 802.1Q tag control information.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vlan {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
}

/// IPv4, IPv6 or GRH fields (roce-facts.md section 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpMeta {
    pub version: u8,
    /// IPv4 only: header length in 32-bit words (options when > 5)
    pub ihl: u8,
    pub dscp: u8,
    pub ecn: u8,
    /// IPv6 / GRH only
    pub flow_label: u32,
    /// IPv4 total length, IPv6 payload length, GRH PayLen
    pub length: u16,
    /// IPv4 only
    pub id: u16,
    /// IPv4 only: bit 2 reserved, bit 1 DF, bit 0 MF
    pub flags: u8,
    /// IPv4 only
    pub frag_offset: u16,
    /// TTL / hop limit
    pub ttl: u8,
    /// protocol / next header
    pub protocol: u8,
    /// IPv4 only
    pub checksum: u16,
    /// IPv4 addresses in the last 4 bytes
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

impl IpMeta {
    /// IPv4 source address (meaningful for IPv4 only).
    pub fn src_v4(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.src[12], self.src[13], self.src[14], self.src[15])
    }
    /// IPv4 destination address (meaningful for IPv4 only).
    pub fn dst_v4(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.dst[12], self.dst[13], self.dst[14], self.dst[15])
    }
    pub fn src_v6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src)
    }
    pub fn dst_v6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst)
    }
}

/// UDP header (absent for RoCEv1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpMeta {
    pub sport: u16,
    pub dport: u16,
    pub length: u16,
    pub checksum: u16,
}

/// Base Transport Header (roce-facts.md section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BthMeta {
    pub opcode: u8,
    pub se: bool,
    pub migreq: bool,
    pub padcnt: u8,
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub resv6: u8,
    pub destqp: u32,
    pub ackreq: bool,
    pub resv7: u8,
    pub psn: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dmalen: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deth {
    pub qkey: u32,
    pub srcqp: u32,
}

/// The extended transport headers the opcode carries (roce-facts.md section 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtHeaders {
    pub reth: Option<Reth>,
    pub aeth: Option<Aeth>,
    pub atomiceth: Option<AtomicEth>,
    /// AtomicAckETH: original remote data
    pub atomicacketh: Option<u64>,
    pub immdt: Option<u32>,
    /// IETH: R_Key to invalidate
    pub ieth: Option<u32>,
    pub deth: Option<Deth>,
    /// CNP: the 16 reserved bytes
    pub cnp: Option<[u8; 16]>,
}

/// One decoded metadata record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// `None`: a good RoCE packet. Otherwise the header fields below hold
    /// whatever the parser saw and must not be used.
    pub error: Option<RxError>,
    pub frame_len: u32,
    pub l3_kind: L3Kind,
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    /// inner EtherType when tagged
    pub ethertype: u16,
    pub vlan: Option<Vlan>,
    pub ip: IpMeta,
    /// `None` for RoCEv1
    pub udp: Option<UdpMeta>,
    pub bth: BthMeta,
    pub ext: ExtHeaders,
    /// BTH + extended headers, bytes
    pub hdr_len: u8,
    /// first payload byte, from the start of the frame
    pub payload_offset: u32,
    pub payload_len: u32,
    /// the pad bytes (BTH.PadCnt of them)
    pub pad: [u8; 3],
    /// ICRC as received (the CRC value; on the wire least significant byte first)
    pub icrc: u32,
    /// ICRC computed by the RTL over the received frame
    pub icrc_calc: u32,
    /// Ethernet bytes after the IP datagram
    pub trailer_len: u32,
    /// bytes the RTL sent on the payload stream for this frame
    pub stream_len: u32,
}

impl RxMeta {
    /// The pad bytes the BTH announces (`padcnt` of the three before the ICRC).
    pub fn pad_bytes(&self) -> &[u8] {
        &self.pad[3 - usize::from(self.bth.padcnt.min(3))..]
    }

    /// Decodes a raw record. `Err` carries the unknown error code.
    pub fn decode(raw: &RawMeta) -> Result<RxMeta, u8> {
        macro_rules! f {
            ($n:literal) => {
                fld!(raw, $n)
            };
        }
        macro_rules! b {
            ($n:literal) => {
                fld!(raw, $n) != 0
            };
        }
        let bytes16 = |v: u128| v.to_be_bytes();
        let error = RxError::from_code(f!("error") as u8)?;
        let l3_kind = match f!("l3_kind") {
            1 => L3Kind::Ipv4,
            2 => L3Kind::Ipv6,
            3 => L3Kind::Grh,
            _ => L3Kind::None,
        };
        let mut eth_dst = [0u8; 6];
        eth_dst.copy_from_slice(&bytes16(f!("eth_dst"))[10..]);
        let mut eth_src = [0u8; 6];
        eth_src.copy_from_slice(&bytes16(f!("eth_src"))[10..]);
        let mask = f!("ext_mask") as u8;
        let has = |bit: u8| mask & (1 << bit) != 0;
        let ext = ExtHeaders {
            reth: has(0).then(|| Reth {
                va: f!("reth_va") as u64,
                rkey: f!("reth_rkey") as u32,
                dmalen: f!("reth_dmalen") as u32,
            }),
            aeth: has(1).then(|| Aeth {
                syndrome: f!("aeth_syndrome") as u8,
                msn: f!("aeth_msn") as u32,
            }),
            atomiceth: has(2).then(|| AtomicEth {
                va: f!("atomic_va") as u64,
                rkey: f!("atomic_rkey") as u32,
                swap_add: f!("atomic_swap_add") as u64,
                compare: f!("atomic_compare") as u64,
            }),
            atomicacketh: has(3).then(|| f!("atomicack_orig") as u64),
            immdt: has(4).then(|| f!("immdt") as u32),
            ieth: has(5).then(|| f!("ieth_rkey") as u32),
            deth: has(6).then(|| Deth {
                qkey: f!("deth_qkey") as u32,
                srcqp: f!("deth_srcqp") as u32,
            }),
            cnp: has(7).then(|| bytes16(f!("cnp_reserved"))),
        };
        let pad = f!("pad_bytes") as u32;
        Ok(RxMeta {
            error,
            frame_len: f!("frame_len") as u32,
            l3_kind,
            eth_dst,
            eth_src,
            ethertype: f!("ethertype") as u16,
            vlan: b!("vlan_present").then(|| Vlan {
                pcp: f!("vlan_pcp") as u8,
                dei: b!("vlan_dei"),
                vid: f!("vlan_vid") as u16,
            }),
            ip: IpMeta {
                version: f!("ip_version") as u8,
                ihl: f!("ip_ihl") as u8,
                dscp: f!("ip_dscp") as u8,
                ecn: f!("ip_ecn") as u8,
                flow_label: f!("ip_flow_label") as u32,
                length: f!("ip_length") as u16,
                id: f!("ip_id") as u16,
                flags: f!("ip_flags") as u8,
                frag_offset: f!("ip_frag_offset") as u16,
                ttl: f!("ip_ttl") as u8,
                protocol: f!("ip_protocol") as u8,
                checksum: f!("ip_checksum") as u16,
                src: bytes16(f!("ip_src")),
                dst: bytes16(f!("ip_dst")),
            },
            udp: (l3_kind != L3Kind::Grh).then(|| UdpMeta {
                sport: f!("udp_sport") as u16,
                dport: f!("udp_dport") as u16,
                length: f!("udp_length") as u16,
                checksum: f!("udp_checksum") as u16,
            }),
            bth: BthMeta {
                opcode: f!("bth_opcode") as u8,
                se: b!("bth_se"),
                migreq: b!("bth_migreq"),
                padcnt: f!("bth_padcnt") as u8,
                tver: f!("bth_tver") as u8,
                pkey: f!("bth_pkey") as u16,
                fecn: b!("bth_fecn"),
                becn: b!("bth_becn"),
                resv6: f!("bth_resv6") as u8,
                destqp: f!("bth_destqp") as u32,
                ackreq: b!("bth_ackreq"),
                resv7: f!("bth_resv7") as u8,
                psn: f!("bth_psn") as u32,
            },
            ext,
            hdr_len: f!("hdr_len") as u8,
            payload_offset: f!("payload_offset") as u32,
            payload_len: f!("payload_len") as u32,
            pad: [(pad >> 16) as u8, (pad >> 8) as u8, pad as u8],
            icrc: f!("icrc") as u32,
            icrc_calc: f!("icrc_calc") as u32,
            trailer_len: f!("trailer_len") as u32,
            stream_len: f!("stream_len") as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses the members of `rx_meta_t` out of the SystemVerilog package.
    fn sv_members() -> Vec<(String, u32)> {
        let src = include_str!("../rtl/roce_rx_pkg.sv");
        let start = src.find("typedef struct packed {").expect("struct start");
        let end = src[start..].find("} rx_meta_t;").expect("struct end") + start;
        let mut out = Vec::new();
        for line in src[start..end].lines().skip(1) {
            let code = line.split("//").next().unwrap().trim();
            let Some(rest) = code.strip_prefix("logic") else {
                continue;
            };
            let rest = rest.trim().trim_end_matches(';').trim();
            let (width, name) = match rest.strip_prefix('[') {
                Some(r) => {
                    let (range, name) = r.split_once(']').expect("range");
                    let (hi, lo) = range.split_once(':').expect("hi:lo");
                    let hi: u32 = hi.trim().parse().expect("hi");
                    let lo: u32 = lo.trim().parse().expect("lo");
                    (hi - lo + 1, name.trim())
                }
                None => (1, rest),
            };
            out.push((name.to_string(), width));
        }
        out
    }

    #[test]
    fn field_table_matches_the_systemverilog_struct() {
        let sv = sv_members();
        let rs: Vec<(String, u32)> = META_FIELDS
            .iter()
            .map(|&(n, w)| (n.to_string(), w))
            .collect();
        assert_eq!(
            sv, rs,
            "META_FIELDS and rtl/roce_rx_pkg.sv rx_meta_t differ"
        );
        const { assert!(META_BITS <= 32 * 64) };
    }

    #[test]
    fn error_codes_match_the_systemverilog_enum() {
        let src = include_str!("../rtl/roce_rx_pkg.sv");
        for e in RxError::ALL {
            let sv_name = format!("ERR_{}", e.name().to_uppercase());
            let line = src
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{sv_name} ")))
                .unwrap_or_else(|| panic!("{sv_name} not in rx_err_e"));
            let code: u8 = line
                .split("5'd")
                .nth(1)
                .unwrap()
                .trim_end_matches(',')
                .trim()
                .parse()
                .unwrap();
            assert_eq!(code, e as u8, "{sv_name}");
            assert_eq!(RxError::from_code(code), Ok(Some(e)));
            assert_eq!(RxError::from_name(e.name()), Some(e));
        }
        assert_eq!(RxError::from_code(0), Ok(None));
        assert_eq!(RxError::from_code(17), Err(17));
    }

    #[test]
    fn word_wise_extraction_matches_bit_by_bit() {
        let mut raw = RawMeta([0; 32]);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for w in raw.0.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *w = x;
        }
        for (i, &(_, w)) in META_FIELDS.iter().enumerate() {
            let (lsb, _) = META_SPANS[i];
            let mut slow: u128 = 0;
            for k in 0..w {
                let b = lsb + k;
                slow |= u128::from((raw.0[(b / 64) as usize] >> (b % 64)) & 1) << k;
            }
            assert_eq!(raw.field_at(i), slow, "{}", META_FIELDS[i].0);
        }
    }

    #[test]
    fn raw_field_extraction_is_msb_first() {
        // error is the top 5 bits of the record
        let mut raw = RawMeta([0; 32]);
        let top = META_BITS - 5;
        for i in 0..5 {
            let b = top + i;
            if (16u32 >> i) & 1 == 1 {
                raw.0[(b / 64) as usize] |= 1 << (b % 64);
            }
        }
        assert_eq!(raw.field("error"), 16);
        assert_eq!(raw.field("stream_len"), 0);
        // stream_len is the bottom 17 bits
        raw.0[0] = 0x1_2345;
        assert_eq!(raw.field("stream_len"), 0x1_2345);
        assert_eq!(raw.field("trailer_len"), 0);
    }
}
