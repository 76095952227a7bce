//! Whole frames: [`parse`] checks a received Ethernet frame and returns a lazy [`Packet`]
//! view of it (offsets, opcode row, ICRC verdict; headers decoded on demand, none of the
//! accessors panics), or a typed [`Error`]; [`emit`] writes a complete frame (lengths,
//! IPv4 checksum, pad bytes and PadCnt, ICRC) from plain-data [`Headers`] into a caller's
//! buffer.
//!
//! The frame ends where IP says it ends: bytes after the IP datagram (Ethernet padding of
//! short frames, trailers) are reported as `trailer`, never as payload. No input panics.

use super::aeth::{self, AethRepr};
use super::atomic::{AtomicAckEth, AtomicAckEthRepr, AtomicEth, AtomicEthRepr};
use super::bth::{self, BthRepr};
use super::cnp::{self, CnpRepr};
use super::deth::{self, DethRepr};
use super::ethernet::{
    EthernetRepr, Frame, VlanRepr, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCEV1,
    ETHERTYPE_VLAN,
};
use super::icrc::{self, Icrc, IcrcKind, ICRC_LEN};
use super::imm::{self, IethRepr, ImmDtRepr};
use super::ipv4::{self, Ipv4Repr, PROTOCOL_UDP};
use super::ipv6::{self, GrhRepr, Ipv6Repr, NEXT_HEADER_BTH, NEXT_HEADER_UDP};
use super::opcode::{ExtHeader, Opcode, OpcodeInfo};
use super::reth::{self, RethRepr};
use super::udp::{Datagram, UdpRepr, ROCEV2_PORT};
use crate::num::{Psn, Qpn};
use core::fmt;

/// Why a frame is not an acceptable RoCE packet. The kinds map one to one onto the error
/// names of `packet-json.md` ([`Error::name`]); where a frame has several faults, the
/// first met in header order is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The frame ends before the Ethernet, IP or UDP headers, or before the lengths in
    /// them say it should.
    TruncatedFrame,
    /// Fewer than 12 bytes (plus the 4-byte ICRC) where the BTH should be.
    TruncatedBth,
    /// The opcode's extended headers do not fit.
    TruncatedExtHeader,
    /// UDP, but the destination port is not 4791.
    NotRoceUdpPort { dport: u16 },
    /// Neither IPv4, IPv6 nor RoCEv1 (with or without one 802.1Q tag).
    UnsupportedEthertype { ethertype: u16 },
    /// The IP protocol / next header is not UDP.
    NotUdp { protocol: u8 },
    /// The version nibble does not fit the EtherType.
    BadIpVersion { version: u8 },
    /// IPv4 IHL < 5, or a GRH whose next header is not a BTH.
    BadIpHeader { reason: &'static str },
    /// The IPv4 header checksum does not verify.
    BadIpv4Checksum { checksum: u16 },
    /// IPv4 MF set or a non-zero fragment offset: RoCEv2 is never fragmented.
    IpFragment,
    /// IP and UDP lengths disagree with each other or with the frame.
    LengthMismatch { reason: &'static str },
    /// The BTH-to-ICRC length is not a multiple of 4.
    UnalignedLength { len: usize },
    /// BTH TVer is not 0.
    UnsupportedTver { tver: u8 },
    /// PadCnt is larger than the payload.
    PadExceedsPayload { pad: u8, available: usize },
    /// The opcode is not in the RC, UC, UD or CNP tables.
    UnknownOpcode { opcode: u8 },
    /// The ICRC does not verify.
    IcrcMismatch { computed: u32, wire: u32 },
}

impl Error {
    /// The snake_case name of `packet-json.md`.
    pub const fn name(&self) -> &'static str {
        match self {
            Self::TruncatedFrame => "truncated_frame",
            Self::TruncatedBth => "truncated_bth",
            Self::TruncatedExtHeader => "truncated_ext_header",
            Self::NotRoceUdpPort { .. } => "not_roce_udp_port",
            Self::UnsupportedEthertype { .. } => "unsupported_ethertype",
            Self::NotUdp { .. } => "not_udp",
            Self::BadIpVersion { .. } => "bad_ip_version",
            Self::BadIpHeader { .. } => "bad_ip_header",
            Self::BadIpv4Checksum { .. } => "bad_ipv4_checksum",
            Self::IpFragment => "ip_fragment",
            Self::LengthMismatch { .. } => "length_mismatch",
            Self::UnalignedLength { .. } => "unaligned_length",
            Self::UnsupportedTver { .. } => "unsupported_tver",
            Self::PadExceedsPayload { .. } => "pad_exceeds_payload",
            Self::UnknownOpcode { .. } => "unknown_opcode",
            Self::IcrcMismatch { .. } => "icrc_mismatch",
        }
    }

    /// Every error, in the order of `packet-json.md` (for tests and the RTL's codes).
    pub const ALL_NAMES: [&'static str; 16] = [
        "truncated_frame",
        "truncated_bth",
        "truncated_ext_header",
        "not_roce_udp_port",
        "unsupported_ethertype",
        "not_udp",
        "bad_ip_version",
        "bad_ip_header",
        "bad_ipv4_checksum",
        "ip_fragment",
        "length_mismatch",
        "unaligned_length",
        "unsupported_tver",
        "pad_exceeds_payload",
        "unknown_opcode",
        "icrc_mismatch",
    ];
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TruncatedFrame => f.write_str("the frame ends before its headers or lengths say"),
            Self::TruncatedBth => f.write_str("no room for a 12-byte BTH and the 4-byte ICRC"),
            Self::TruncatedExtHeader => f.write_str("the opcode's extended headers do not fit"),
            Self::NotRoceUdpPort { dport } => write!(f, "UDP destination port {dport}, not 4791"),
            Self::UnsupportedEthertype { ethertype } => write!(f, "EtherType {ethertype:#06x}"),
            Self::NotUdp { protocol } => write!(f, "IP protocol {protocol}, not UDP (17)"),
            Self::BadIpVersion { version } => write!(f, "IP version {version} for this EtherType"),
            Self::BadIpHeader { reason } => f.write_str(reason),
            Self::BadIpv4Checksum { checksum } => {
                write!(f, "IPv4 header checksum {checksum:#06x} is wrong")
            }
            Self::IpFragment => f.write_str("IPv4 fragment (MF set or offset non-zero)"),
            Self::LengthMismatch { reason } => f.write_str(reason),
            Self::UnalignedLength { len } => {
                write!(f, "BTH..ICRC length {len} is not a multiple of 4")
            }
            Self::UnsupportedTver { tver } => write!(f, "BTH TVer {tver}, must be 0"),
            Self::PadExceedsPayload { pad, available } => {
                write!(f, "PadCnt {pad} but only {available} payload bytes")
            }
            Self::UnknownOpcode { opcode } => {
                write!(f, "opcode {opcode:#04x} is not RC, UC, UD or CNP")
            }
            Self::IcrcMismatch { computed, wire } => {
                write!(
                    f,
                    "ICRC on the wire {wire:#010x}, computed {computed:#010x}"
                )
            }
        }
    }
}

/// The network header of a RoCE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3Repr {
    /// RoCEv2 over IPv4.
    Ipv4(Ipv4Repr),
    /// RoCEv2 over IPv6.
    Ipv6(Ipv6Repr),
    /// RoCEv1: a GRH directly over Ethernet.
    Grh(GrhRepr),
}

impl L3Repr {
    /// The EtherType that announces this header.
    pub const fn ethertype(&self) -> u16 {
        match self {
            Self::Ipv4(_) => ETHERTYPE_IPV4,
            Self::Ipv6(_) => ETHERTYPE_IPV6,
            Self::Grh(_) => ETHERTYPE_ROCEV1,
        }
    }
    /// Which ICRC masking rule applies.
    pub const fn icrc_kind(&self) -> IcrcKind {
        match self {
            Self::Ipv4(_) => IcrcKind::Ipv4,
            Self::Ipv6(_) => IcrcKind::Ipv6,
            Self::Grh(_) => IcrcKind::RoceV1,
        }
    }
    /// Bytes `emit` writes for this header.
    pub const fn header_len(&self) -> usize {
        match self {
            Self::Ipv4(_) => Ipv4Repr::LEN,
            Self::Ipv6(_) | Self::Grh(_) => Ipv6Repr::LEN,
        }
    }
    /// RoCEv2 (UDP-encapsulated) rather than RoCEv1.
    pub const fn is_rocev2(&self) -> bool {
        !matches!(self, Self::Grh(_))
    }
}

/// The extended transport headers present in a packet. Which ones an opcode carries,
/// and in what order, is the opcode table's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    pub reth: Option<RethRepr>,
    pub aeth: Option<AethRepr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    pub immdt: Option<ImmDtRepr>,
    pub ieth: Option<IethRepr>,
    pub deth: Option<DethRepr>,
    pub cnp: Option<CnpRepr>,
}

/// Every header of a RoCE frame as plain data: what [`emit`] and [`emit_with`] write, and
/// what [`Packet::headers`] decodes.
///
/// On `emit`, the derived fields are computed and the values here ignored: the
/// EtherTypes (from `l3` and `vlan`), IP and UDP lengths, the IPv4 checksum, and (in
/// [`emit`], not [`emit_with`]) BTH PadCnt. `parse` fills them in as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Headers {
    pub eth: EthernetRepr,
    pub vlan: Option<VlanRepr>,
    pub l3: L3Repr,
    /// Present for RoCEv2, absent for RoCEv1.
    pub udp: Option<UdpRepr>,
    pub bth: BthRepr,
    pub ext: ExtHeaders,
}

/// Byte offsets of the parts of a frame, from the start of the Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Layout {
    /// Start of the IP header or GRH.
    pub l3: usize,
    /// Start of the UDP header (RoCEv2).
    pub udp: Option<usize>,
    pub bth: usize,
    /// Start of the payload (after the extended headers).
    pub payload: usize,
    /// Start of the pad bytes.
    pub pad: usize,
    /// Start of the ICRC trailer.
    pub icrc: usize,
    /// End of the IP datagram; Ethernet padding or trailer bytes may follow.
    pub end: usize,
}

/// A parsed RoCE frame: a view of the received buffer that [`parse`] has checked, plus the
/// offsets it found ([`Layout`]) and the opcode's row in the table.
///
/// `parse` decodes only what it must check; every header is decoded from the frame when
/// it is asked for (`bth()`, `l3()`, `reth()`, ...), and the hot-path BTH fields have
/// getters that read their bytes directly (`opcode()`, `dest_qp()`, `psn()`, ...).
/// [`Packet::headers`] decodes everything into the plain-data [`Headers`] that `emit`
/// takes. A `Packet` can only be made by `parse`, so its offsets always lie within its
/// frame: **no accessor panics**. Accessors decode on every call: code that reads a
/// header's fields many times should decode it once (`let bth = pkt.bth();`).
///
/// What used to be fields are methods: `frame()`, `info()`, `layout()`, `payload()`,
/// `pad()`, `icrc()`, `icrc_verified()`, `trailer()`. `Debug` prints the decoded headers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    frame: &'a [u8],
    info: &'static OpcodeInfo,
    /// The ICRC value from the trailer.
    icrc: u32,
    /// Offset of the ICRC trailer; the datagram ends 4 bytes later. (Offsets fit in u32:
    /// the datagram ends at most 18 + 65535 + 40 bytes into the frame.)
    icrc_at: u32,
    /// Offset of the IP header or GRH: 14, or 18 after an 802.1Q tag.
    l3: u8,
    /// Offset of the BTH (at most 18 + 60 + 8); UDP is the 8 bytes before it (RoCEv2).
    bth: u8,
    /// Bytes of extended headers after the BTH.
    ext_len: u8,
    /// PadCnt.
    pad: u8,
    /// Which network header: IPv4, IPv6, or a RoCEv1 GRH.
    l3_kind: IcrcKind,
    icrc_verified: bool,
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("headers", &self.headers())
            .field("info", &self.info.name)
            .field("payload", &self.payload())
            .field("pad", &self.pad())
            .field("icrc", &format_args!("{:#010x}", self.icrc))
            .field("icrc_verified", &self.icrc_verified)
            .field("trailer", &self.trailer())
            .field("layout", &self.layout())
            .finish()
    }
}

impl<'a> Packet<'a> {
    /// The whole frame, for reading derived fields (lengths, checksums) through views.
    #[inline]
    pub fn frame(&self) -> &'a [u8] {
        self.frame
    }

    /// The opcode's row in the table.
    #[inline]
    pub fn info(&self) -> &'static OpcodeInfo {
        self.info
    }

    /// Where each part of the frame starts.
    #[inline]
    pub fn layout(&self) -> Layout {
        let bth = usize::from(self.bth);
        let icrc = self.icrc_at as usize;
        Layout {
            l3: usize::from(self.l3),
            udp: self.is_rocev2().then(|| bth - UdpRepr::LEN),
            bth,
            payload: self.payload_at(),
            pad: icrc - usize::from(self.pad),
            icrc,
            end: icrc + ICRC_LEN,
        }
    }

    /// Offset of the payload.
    #[inline]
    fn payload_at(&self) -> usize {
        usize::from(self.bth) + BthRepr::LEN + usize::from(self.ext_len)
    }

    /// The payload (after the extended headers, before the pad).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.frame[self.payload_at()..self.icrc_at as usize - usize::from(self.pad)]
    }

    /// The PadCnt pad bytes (normally zero; covered by the ICRC).
    #[inline]
    pub fn pad(&self) -> &'a [u8] {
        let icrc = self.icrc_at as usize;
        &self.frame[icrc - usize::from(self.pad)..icrc]
    }

    /// The ICRC value from the trailer (its bytes on the wire are `icrc.to_le_bytes()`).
    #[inline]
    pub fn icrc(&self) -> u32 {
        self.icrc
    }

    /// Whether the ICRC was checked ([`parse`]) or left to a datapath that already
    /// checked it ([`parse_unverified`]).
    #[inline]
    pub fn icrc_verified(&self) -> bool {
        self.icrc_verified
    }

    /// Bytes after the IP datagram (Ethernet padding, trailers).
    #[inline]
    pub fn trailer(&self) -> &'a [u8] {
        &self.frame[self.icrc_at as usize + ICRC_LEN..]
    }

    /// Which ICRC masking rule applies (which network header the frame has).
    #[inline]
    pub fn icrc_kind(&self) -> IcrcKind {
        self.l3_kind
    }

    /// RoCEv2 (UDP-encapsulated) rather than RoCEv1.
    #[inline]
    pub fn is_rocev2(&self) -> bool {
        self.l3_kind != IcrcKind::RoceV1
    }

    // --- Whole headers, decoded on demand --------------------------------------------

    /// The Ethernet header.
    #[inline]
    pub fn eth(&self) -> EthernetRepr {
        EthernetRepr::parse(&Frame::new_unchecked(&self.frame[..EthernetRepr::LEN]))
    }

    /// The 802.1Q tag, if there is one.
    #[inline]
    pub fn vlan(&self) -> Option<VlanRepr> {
        let at = EthernetRepr::LEN;
        (usize::from(self.l3) > at)
            .then(|| VlanRepr::parse(&VlanTag::new_unchecked(&self.frame[at..at + VlanRepr::LEN])))
    }

    /// The IP header or GRH (IPv4 options are skipped).
    #[inline]
    pub fn l3(&self) -> L3Repr {
        let net = &self.frame[usize::from(self.l3)..];
        match self.l3_kind {
            IcrcKind::Ipv4 => L3Repr::Ipv4(Ipv4Repr::parse(&ipv4::Packet::new_unchecked(
                &net[..Ipv4Repr::LEN],
            ))),
            IcrcKind::Ipv6 => L3Repr::Ipv6(Ipv6Repr::parse(&ipv6::Packet::new_unchecked(
                &net[..Ipv6Repr::LEN],
            ))),
            IcrcKind::RoceV1 => L3Repr::Grh(Ipv6Repr::parse(&ipv6::Packet::new_unchecked(
                &net[..Ipv6Repr::LEN],
            ))),
        }
    }

    /// The UDP header (RoCEv2), or `None` (RoCEv1).
    #[inline]
    pub fn udp(&self) -> Option<UdpRepr> {
        let at = usize::from(self.bth) - UdpRepr::LEN;
        self.is_rocev2()
            .then(|| UdpRepr::parse(&Datagram::new_unchecked(&self.frame[at..at + UdpRepr::LEN])))
    }

    /// The BTH's 12 bytes.
    #[inline]
    fn bth_view(&self) -> bth::Header<&'a [u8]> {
        let at = usize::from(self.bth);
        bth::Header::new_unchecked(&self.frame[at..at + BthRepr::LEN])
    }

    /// The BTH.
    #[inline]
    pub fn bth(&self) -> BthRepr {
        BthRepr::parse(&self.bth_view())
    }

    /// The bytes of extended header `h`, if the opcode carries it.
    #[inline]
    pub fn ext_bytes(&self, h: ExtHeader) -> Option<&'a [u8]> {
        let mut at = usize::from(self.bth) + BthRepr::LEN;
        for &x in self.info.headers {
            if x == h {
                return Some(&self.frame[at..at + h.wire_len()]);
            }
            at += x.wire_len();
        }
        None
    }

    /// The RETH, if the opcode carries one.
    #[inline]
    pub fn reth(&self) -> Option<RethRepr> {
        self.ext_bytes(ExtHeader::Reth)
            .map(|b| RethRepr::parse(&reth::Header::new_unchecked(b)))
    }

    /// The AETH, if the opcode carries one.
    #[inline]
    pub fn aeth(&self) -> Option<AethRepr> {
        self.ext_bytes(ExtHeader::Aeth)
            .map(|b| AethRepr::parse(&aeth::Header::new_unchecked(b)))
    }

    /// The AtomicETH, if the opcode carries one.
    #[inline]
    pub fn atomic_eth(&self) -> Option<AtomicEthRepr> {
        self.ext_bytes(ExtHeader::AtomicEth)
            .map(|b| AtomicEthRepr::parse(&AtomicEth::new_unchecked(b)))
    }

    /// The AtomicAckETH, if the opcode carries one.
    #[inline]
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEthRepr> {
        self.ext_bytes(ExtHeader::AtomicAckEth)
            .map(|b| AtomicAckEthRepr::parse(&AtomicAckEth::new_unchecked(b)))
    }

    /// The ImmDt, if the opcode carries one.
    #[inline]
    pub fn immdt(&self) -> Option<ImmDtRepr> {
        self.ext_bytes(ExtHeader::ImmDt)
            .map(|b| ImmDtRepr::parse(&imm::Header::new_unchecked(b)))
    }

    /// The IETH, if the opcode carries one.
    #[inline]
    pub fn ieth(&self) -> Option<IethRepr> {
        self.ext_bytes(ExtHeader::Ieth)
            .map(|b| IethRepr::parse(&imm::Header::new_unchecked(b)))
    }

    /// The DETH, if the opcode carries one.
    #[inline]
    pub fn deth(&self) -> Option<DethRepr> {
        self.ext_bytes(ExtHeader::Deth)
            .map(|b| DethRepr::parse(&deth::Header::new_unchecked(b)))
    }

    /// The CNP's reserved bytes, if this is a CNP.
    #[inline]
    pub fn cnp(&self) -> Option<CnpRepr> {
        self.ext_bytes(ExtHeader::Cnp)
            .map(|b| CnpRepr::parse(&cnp::Header::new_unchecked(b)))
    }

    /// Every extended header the opcode carries.
    pub fn ext(&self) -> ExtHeaders {
        let mut out = ExtHeaders::default();
        let mut at = usize::from(self.bth) + BthRepr::LEN;
        for &h in self.info.headers {
            let b = &self.frame[at..at + h.wire_len()];
            match h {
                ExtHeader::Reth => {
                    out.reth = Some(RethRepr::parse(&reth::Header::new_unchecked(b)))
                }
                ExtHeader::Aeth => {
                    out.aeth = Some(AethRepr::parse(&aeth::Header::new_unchecked(b)))
                }
                ExtHeader::AtomicEth => {
                    out.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEth::new_unchecked(b)))
                }
                ExtHeader::AtomicAckEth => {
                    out.atomic_ack_eth =
                        Some(AtomicAckEthRepr::parse(&AtomicAckEth::new_unchecked(b)))
                }
                ExtHeader::ImmDt => {
                    out.immdt = Some(ImmDtRepr::parse(&imm::Header::new_unchecked(b)))
                }
                ExtHeader::Ieth => out.ieth = Some(IethRepr::parse(&imm::Header::new_unchecked(b))),
                ExtHeader::Deth => {
                    out.deth = Some(DethRepr::parse(&deth::Header::new_unchecked(b)))
                }
                ExtHeader::Cnp => out.cnp = Some(CnpRepr::parse(&cnp::Header::new_unchecked(b))),
            }
            at += h.wire_len();
        }
        out
    }

    /// Every header as plain data (the derived fields as received), as `emit` takes them.
    pub fn headers(&self) -> Headers {
        Headers {
            eth: self.eth(),
            vlan: self.vlan(),
            l3: self.l3(),
            udp: self.udp(),
            bth: self.bth(),
            ext: self.ext(),
        }
    }

    // --- Addresses the engine checks per packet, straight from their bytes -----------

    /// The Ethernet destination address.
    #[inline]
    pub fn dst_mac(&self) -> [u8; 6] {
        self.frame.first_chunk::<6>().copied().unwrap_or_default()
    }

    /// The source and destination GIDs: the IPv6 / GRH addresses, or the IPv4 addresses
    /// as IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, RoCEv2's GID form).
    #[inline]
    pub fn gids(&self) -> ([u8; 16], [u8; 16]) {
        let net = &self.frame[usize::from(self.l3)..];
        let addr = |at: usize| -> [u8; 16] {
            net.get(at..at + 16)
                .and_then(|b| b.try_into().ok())
                .unwrap_or_default()
        };
        if self.l3_kind == IcrcKind::Ipv4 {
            let mapped = |at: usize| {
                let mut g = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0];
                if let Some(ip) = net.get(at..at + 4) {
                    g[12..].copy_from_slice(ip);
                }
                g
            };
            (mapped(12), mapped(16))
        } else {
            (addr(8), addr(24))
        }
    }

    /// The ECN codepoint of the IP header (RoCEv1's GRH: 0, it has none).
    #[inline]
    pub fn ecn(&self) -> u8 {
        let net = &self.frame[usize::from(self.l3)..];
        match self.l3_kind {
            // IPv4: the low bits of the TOS byte; IPv6: of the traffic class, which
            // straddles bytes 0 and 1.
            IcrcKind::Ipv4 => net.get(1).map_or(0, |b| b & 3),
            IcrcKind::Ipv6 => net.get(1).map_or(0, |b| (b >> 4) & 3),
            IcrcKind::RoceV1 => 0,
        }
    }

    // --- BTH fields the engine reads per packet, straight from their bytes ------------

    /// BTH OpCode (the same as `info().opcode`).
    #[inline]
    pub fn opcode(&self) -> Opcode {
        self.info.opcode
    }

    /// BTH DestQP.
    #[inline]
    pub fn dest_qp(&self) -> Qpn {
        self.bth_view().dest_qp()
    }

    /// BTH PSN.
    #[inline]
    pub fn psn(&self) -> Psn {
        self.bth_view().psn()
    }

    /// BTH AckReq.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.bth_view().ack_req()
    }

    /// BTH SE (solicited event).
    #[inline]
    pub fn se(&self) -> bool {
        self.bth_view().se()
    }

    /// BTH P_Key.
    #[inline]
    pub fn pkey(&self) -> u16 {
        self.bth_view().pkey()
    }

    /// BTH PadCnt (the same as `pad().len()`).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        self.bth_view().pad_count()
    }

    /// BTH BECN (set in CNPs).
    #[inline]
    pub fn becn(&self) -> bool {
        self.bth_view().becn()
    }
}

/// What a hardware parser hands on with a frame it accepted (`docs/fastpath.md` §3.1,
/// §3.5): where the parts of the frame start, so the firmware can view the frame again
/// without parsing it ([`Packet::from_meta`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxMeta {
    /// Which network header.
    pub l3_kind: IcrcKind,
    /// An 802.1Q tag precedes it (the IP header starts at 18, else 14).
    pub vlan: bool,
    /// Offset of the BTH.
    pub bth: u16,
    /// Offset and length of the payload (without pad).
    pub payload_off: u16,
    pub payload_len: u16,
    /// BTH PadCnt.
    pub pad: u8,
}

impl Packet<'_> {
    /// The metadata a hardware parser reports for this frame.
    pub fn meta(&self) -> RxMeta {
        let payload_off = self.payload_at();
        let payload_len = self.icrc_at as usize - usize::from(self.pad) - payload_off;
        RxMeta {
            l3_kind: self.l3_kind,
            vlan: self.l3 != EthernetRepr::LEN as u8,
            bth: u16::from(self.bth),
            // Lossless: the frame parsed, so these lie within 18 + 65535 + 40 bytes of
            // its start, and a frame the NIC takes is at most a few KiB.
            payload_off: payload_off as u16,
            payload_len: payload_len as u16,
            pad: self.pad,
        }
    }
}

impl<'a> Packet<'a> {
    /// A view of `frame` from a hardware parser's metadata, without parsing it again:
    /// the parser checked the frame (ICRC included). Only what every accessor relies on
    /// is checked here (the offsets lie in the frame and agree with the opcode's
    /// extended headers), so no accessor can panic whatever `meta` says; a `meta` that
    /// does not describe the frame gives wrong field values, never a fault.
    pub fn from_meta(frame: &'a [u8], meta: &RxMeta) -> Result<Self, Error> {
        let l3 = if meta.vlan {
            EthernetRepr::LEN + VlanRepr::LEN
        } else {
            EthernetRepr::LEN
        };
        let bth = usize::from(meta.bth);
        let net_len = match meta.l3_kind {
            IcrcKind::Ipv4 => Ipv4Repr::LEN + UdpRepr::LEN,
            IcrcKind::Ipv6 => Ipv6Repr::LEN + UdpRepr::LEN,
            IcrcKind::RoceV1 => Ipv6Repr::LEN,
        };
        if bth < l3 + net_len || bth > u8::MAX as usize {
            return Err(Error::TruncatedBth);
        }
        let opcode = *frame.get(bth).ok_or(Error::TruncatedBth)?;
        let (info, ext_len) = Opcode(opcode)
            .info_and_ext_len()
            .ok_or(Error::UnknownOpcode { opcode })?;
        let payload_at = bth + BthRepr::LEN + ext_len;
        if usize::from(meta.payload_off) != payload_at {
            return Err(Error::TruncatedExtHeader);
        }
        let icrc_at = payload_at + usize::from(meta.payload_len) + usize::from(meta.pad & 3);
        let trailer = frame
            .get(icrc_at..)
            .and_then(|t| t.first_chunk::<4>())
            .ok_or(Error::TruncatedFrame)?;
        Ok(Packet {
            frame,
            info,
            icrc: u32::from_le_bytes(*trailer),
            icrc_at: icrc_at as u32,
            l3: l3 as u8,
            bth: bth as u8,
            ext_len: ext_len as u8,
            pad: meta.pad & 3,
            icrc_verified: true,
            l3_kind: meta.l3_kind,
        })
    }
}

/// Parses and checks a whole Ethernet frame (without FCS), ICRC included.
///
/// What is checked, in this order (the first fault is the [`Error`]): the Ethernet header
/// and the optional 802.1Q tag fit; the EtherType is IPv4, IPv6 or RoCEv1; the IP version;
/// for IPv4, IHL >= 5, the header fits, its checksum, no fragment, protocol UDP, total
/// length >= IHL; for IPv6, the header fits and the next header is UDP (RoCEv1: a BTH);
/// for RoCEv2, UDP destination port 4791 and the UDP length against the IP length; the
/// datagram fits the frame; the BTH and the ICRC fit; TVer 0; a known opcode; its
/// extended headers fit; BTH-to-ICRC length a multiple of 4; PadCnt within the payload;
/// no payload on an opcode that carries none; the ICRC.
///
/// Nothing else is decoded: the headers are read from the frame when asked for, through
/// [`Packet`]'s accessors, none of which panics.
pub fn parse(frame: &[u8]) -> Result<Packet<'_>, Error> {
    parse_impl(frame, true)
}

/// Parses a whole frame without recomputing the ICRC: for frames whose ICRC a datapath
/// has already checked. Every other check is made.
pub fn parse_unverified(frame: &[u8]) -> Result<Packet<'_>, Error> {
    parse_impl(frame, false)
}

/// A big-endian u16 from two bytes.
#[inline(always)]
fn be16(hi: u8, lo: u8) -> u16 {
    u16::from_be_bytes([hi, lo])
}

#[inline(always)]
fn parse_impl(frame: &[u8], verify: bool) -> Result<Packet<'_>, Error> {
    const TRUNCATED: Error = Error::TruncatedFrame;
    let Some(eth) = frame.first_chunk::<{ EthernetRepr::LEN }>() else {
        return Err(TRUNCATED);
    };
    let mut ethertype = be16(eth[12], eth[13]);
    let mut l3 = EthernetRepr::LEN;
    if ethertype == ETHERTYPE_VLAN {
        let Some(tag) = frame.get(l3..l3 + VlanRepr::LEN) else {
            return Err(TRUNCATED);
        };
        ethertype = be16(tag[2], tag[3]);
        l3 += VlanRepr::LEN;
    }
    let net = frame.get(l3..).unwrap_or(&[]);

    // The network header: which one, where the next header starts, where the datagram
    // ends.
    let (kind, next, end) = match ethertype {
        ETHERTYPE_IPV4 => {
            let Some(&b0) = net.first() else {
                return Err(TRUNCATED);
            };
            if b0 >> 4 != 4 {
                return Err(Error::BadIpVersion { version: b0 >> 4 });
            }
            let ihl = usize::from(b0 & 0x0F) * 4;
            if ihl < 20 {
                return Err(Error::BadIpHeader {
                    reason: "IPv4 IHL below 5",
                });
            }
            let (Some(hdr), Some(ip)) = (net.get(..ihl), net.first_chunk::<20>()) else {
                return Err(TRUNCATED);
            };
            let sum = if ihl == 20 {
                ipv4::checksum20(ip)
            } else {
                ipv4::checksum(hdr)
            };
            if sum != 0 {
                return Err(Error::BadIpv4Checksum {
                    checksum: be16(ip[10], ip[11]),
                });
            }
            if be16(ip[6], ip[7]) & 0x3FFF != 0 {
                return Err(Error::IpFragment);
            }
            if ip[9] != PROTOCOL_UDP {
                return Err(Error::NotUdp { protocol: ip[9] });
            }
            let total = usize::from(be16(ip[2], ip[3]));
            if total < ihl {
                return Err(Error::LengthMismatch {
                    reason: "IPv4 total length below the header length",
                });
            }
            (IcrcKind::Ipv4, ihl, total)
        }
        ETHERTYPE_IPV6 | ETHERTYPE_ROCEV1 => {
            let Some(&b0) = net.first() else {
                return Err(TRUNCATED);
            };
            if b0 >> 4 != 6 {
                return Err(Error::BadIpVersion { version: b0 >> 4 });
            }
            let Some(ip) = net.first_chunk::<{ Ipv6Repr::LEN }>() else {
                return Err(TRUNCATED);
            };
            let end = Ipv6Repr::LEN + usize::from(be16(ip[4], ip[5]));
            let next_header = ip[6];
            if ethertype == ETHERTYPE_IPV6 {
                if next_header != NEXT_HEADER_UDP {
                    return Err(Error::NotUdp {
                        protocol: next_header,
                    });
                }
                (IcrcKind::Ipv6, Ipv6Repr::LEN, end)
            } else {
                if next_header != NEXT_HEADER_BTH {
                    return Err(Error::BadIpHeader {
                        reason: "GRH next header is not a BTH (0x1B)",
                    });
                }
                (IcrcKind::RoceV1, Ipv6Repr::LEN, end)
            }
        }
        _ => return Err(Error::UnsupportedEthertype { ethertype }),
    };

    // The rest, with the common IPv4 header without options as a constant offset.
    if kind == IcrcKind::Ipv4 && next == 20 {
        parse_transport(frame, verify, l3, net, kind, 20, end)
    } else {
        parse_transport(frame, verify, l3, net, kind, next, end)
    }
}

/// [`parse_impl`] from the UDP header on: `net` starts at the network header (offset `l3`
/// in `frame`), whose `kind` and length `next` are checked, and the datagram ends at
/// `end`.
#[inline(always)]
fn parse_transport<'a>(
    frame: &'a [u8],
    verify: bool,
    l3: usize,
    net: &'a [u8],
    kind: IcrcKind,
    next: usize,
    end: usize,
) -> Result<Packet<'a>, Error> {
    const TRUNCATED: Error = Error::TruncatedFrame;
    // UDP (RoCEv2 only): port first, so foreign datagrams are named as such even when
    // truncated by a capture's snap length; then the lengths against each other and the
    // frame.
    let bth_at = if kind != IcrcKind::RoceV1 {
        let too_short = Error::LengthMismatch {
            reason: "IP payload too short for a UDP header",
        };
        let Some(udp) = net.get(next..next + UdpRepr::LEN) else {
            return Err(if end < next + UdpRepr::LEN {
                too_short
            } else {
                TRUNCATED
            });
        };
        let dport = be16(udp[2], udp[3]);
        if dport != ROCEV2_PORT {
            return Err(Error::NotRoceUdpPort { dport });
        }
        if end < next + UdpRepr::LEN {
            return Err(too_short);
        }
        if usize::from(be16(udp[4], udp[5])) != end - next {
            return Err(Error::LengthMismatch {
                reason: "UDP length disagrees with the IP length",
            });
        }
        next + UdpRepr::LEN
    } else {
        next
    };
    // bth_at <= end: IPv4 total >= IHL, UDP length >= 8, GRH end >= 40.
    let Some(transport) = net.get(bth_at..end) else {
        return Err(TRUNCATED);
    };

    // BTH and extended headers.
    let Some(bth) = transport
        .first_chunk::<{ BthRepr::LEN }>()
        .filter(|_| transport.len() >= BthRepr::LEN + ICRC_LEN)
    else {
        return Err(Error::TruncatedBth);
    };
    let tver = bth[1] & 0x0F;
    if tver != 0 {
        return Err(Error::UnsupportedTver { tver });
    }
    let Some((info, ext_len)) = Opcode(bth[0]).info_and_ext_len() else {
        return Err(Error::UnknownOpcode { opcode: bth[0] });
    };
    let ext_end = BthRepr::LEN + ext_len;
    let len = transport.len();
    if len < ext_end + ICRC_LEN {
        return Err(Error::TruncatedExtHeader);
    }
    if len % 4 != 0 {
        return Err(Error::UnalignedLength { len });
    }
    let icrc_at = len - ICRC_LEN;
    let body = icrc_at - ext_end;
    let pad = (bth[1] >> 4) & 3;
    if usize::from(pad) > body {
        return Err(Error::PadExceedsPayload {
            pad,
            available: body,
        });
    }
    if !info.payload && body != 0 {
        return Err(Error::LengthMismatch {
            reason: "payload bytes on an opcode that carries none",
        });
    }
    let Some(trailer) = transport.get(icrc_at..).and_then(|t| t.first_chunk::<4>()) else {
        return Err(Error::TruncatedBth);
    };
    let wire = u32::from_le_bytes(*trailer);
    if verify {
        let computed =
            icrc::compute(kind, &net[..bth_at + icrc_at]).map_err(|_| Error::TruncatedBth)?;
        if computed != wire {
            return Err(Error::IcrcMismatch { computed, wire });
        }
    }
    // Lossless: l3 + end <= 18 + 40 + 65535 (IPv6 payload length), l3 <= 18,
    // l3 + bth_at <= 18 + 60 + 8 (IHL 15 + UDP), ext_len <= 28.
    let (icrc_abs, bth_abs) = ((l3 + bth_at + icrc_at) as u32, (l3 + bth_at) as u8);
    let (l3, ext_len) = (l3 as u8, ext_len as u8);
    Ok(Packet {
        frame,
        info,
        icrc: wire,
        icrc_at: icrc_abs,
        l3,
        bth: bth_abs,
        ext_len,
        pad,
        icrc_verified: verify,
        l3_kind: kind,
    })
}

/// Why a frame could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitError {
    /// The buffer is shorter than the frame; `needed` bytes are required.
    BufferTooSmall { needed: usize },
    /// The BTH opcode is not in the table.
    UnknownOpcode { opcode: u8 },
    /// The opcode carries this extended header, but `Headers::ext` lacks it.
    MissingHeader(ExtHeader),
    /// RoCEv2 needs a UDP header; RoCEv1 must not have one.
    UdpMismatch,
    /// The datagram would exceed the 16-bit IP / UDP length fields.
    TooLong,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BufferTooSmall { needed } => write!(f, "buffer too small: {needed} bytes needed"),
            Self::UnknownOpcode { opcode } => write!(f, "opcode {opcode:#04x} is not in the table"),
            Self::MissingHeader(h) => write!(f, "the opcode needs a {h:?} header"),
            Self::UdpMismatch => f.write_str("RoCEv2 needs a UDP header and RoCEv1 has none"),
            Self::TooLong => f.write_str("the datagram exceeds the IP length field"),
        }
    }
}

impl Headers {
    /// Length of the whole frame for `body_len` bytes of payload plus pad.
    pub fn frame_len(&self, body_len: usize) -> Result<usize, EmitError> {
        let info = self.bth.opcode.info().ok_or(EmitError::UnknownOpcode {
            opcode: self.bth.opcode.0,
        })?;
        let l2 = EthernetRepr::LEN
            + if self.vlan.is_some() {
                VlanRepr::LEN
            } else {
                0
            };
        let udp = if self.l3.is_rocev2() { UdpRepr::LEN } else { 0 };
        let headers = l2 + self.l3.header_len() + udp + BthRepr::LEN + info.ext_len() + ICRC_LEN;
        headers.checked_add(body_len).ok_or(EmitError::TooLong)
    }
}

/// Writes a complete frame whose payload and pad (`body_len` bytes together) are written
/// by `fill`, in place: a datapath can DMA the payload straight into the frame. BTH PadCnt
/// is written as given. Returns where everything went.
///
/// This is [`HeaderTemplate::new`] followed by [`HeaderTemplate::emit_with`]; a sender
/// that sends many frames with the same addresses keeps the template instead.
pub fn emit_with(
    h: &Headers,
    body_len: usize,
    buf: &mut [u8],
    fill: impl FnOnce(&mut [u8]),
) -> Result<Layout, EmitError> {
    h.bth.opcode.info().ok_or(EmitError::UnknownOpcode {
        opcode: h.bth.opcode.0,
    })?;
    HeaderTemplate::new(&h.eth, h.vlan.as_ref(), &h.l3, h.udp.as_ref())?
        .emit_with(&h.bth, &h.ext, body_len, buf, fill)
}

/// The headers of a frame before the BTH (Ethernet, the optional 802.1Q tag, IP or GRH,
/// UDP), written once: what a NIC keeps per connection. Each frame then copies these
/// bytes and patches only the fields that depend on its length (IP total or payload
/// length, the IPv4 checksum by RFC 1624's incremental update, UDP length) before the
/// BTH, the extended headers, the payload and the ICRC are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderTemplate {
    /// The header bytes, lengths and IPv4 checksum zero.
    bytes: [u8; HeaderTemplate::MAX_LEN],
    /// Bytes in use: the offset of the BTH.
    len: u8,
    /// Offset of the IP header or GRH.
    l3: u8,
    kind: IcrcKind,
    /// IPv4: the ones' complement sum of the header words as written (length and
    /// checksum zero), folded to 16 bits.
    ip_sum: u16,
}

impl Default for HeaderTemplate {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl HeaderTemplate {
    /// A template that emits nothing (every `emit_with` fails with `UdpMismatch`: it has
    /// no network header): a placeholder for tables.
    pub const EMPTY: Self = Self {
        bytes: [0; Self::MAX_LEN],
        len: 0,
        l3: 0,
        kind: IcrcKind::Ipv4,
        ip_sum: 0,
    };

    /// The longest prefix: Ethernet, 802.1Q, IPv6, UDP.
    pub const MAX_LEN: usize = EthernetRepr::LEN + VlanRepr::LEN + Ipv6Repr::LEN + UdpRepr::LEN;

    /// Writes the headers before the BTH. The EtherTypes are derived from `vlan` and
    /// `l3` (the values in the reprs are ignored), as [`emit_with`] does.
    pub fn new(
        eth: &EthernetRepr,
        vlan: Option<&VlanRepr>,
        l3: &L3Repr,
        udp: Option<&UdpRepr>,
    ) -> Result<Self, EmitError> {
        if udp.is_some() != l3.is_rocev2() {
            return Err(EmitError::UdpMismatch);
        }
        let mut t = Self::default();
        let buf = &mut t.bytes[..];
        let too_long = |_| EmitError::TooLong;
        let mut eth = *eth;
        eth.ethertype = if vlan.is_some() {
            ETHERTYPE_VLAN
        } else {
            l3.ethertype()
        };
        let mut at = eth.emit(buf).map_err(too_long)?;
        if let Some(tag) = vlan {
            let mut tag = *tag;
            tag.ethertype = l3.ethertype();
            at += tag.emit(&mut buf[at..]).map_err(too_long)?;
        }
        let l3_at = at;
        at += match l3 {
            L3Repr::Ipv4(ip) => {
                let n = ip.emit(&mut buf[at..], 0).map_err(too_long)?;
                // Length and checksum zero; the checksum is completed per frame.
                buf[at + 2..at + 4].fill(0);
                buf[at + 10..at + 12].fill(0);
                n
            }
            L3Repr::Ipv6(ip) | L3Repr::Grh(ip) => ip.emit(&mut buf[at..], 0).map_err(too_long)?,
        };
        if let Some(udp) = udp {
            at += udp.emit(&mut buf[at..], 0).map_err(too_long)?;
            buf[at - 4..at - 2].fill(0);
        }
        if let L3Repr::Ipv4(_) = l3 {
            if let Some(h) = buf.get(l3_at..).and_then(|b| b.first_chunk::<20>()) {
                t.ip_sum = !ipv4::checksum20(h);
            }
        }
        // Lossless: at <= MAX_LEN.
        t.len = at as u8;
        t.l3 = l3_at as u8;
        t.kind = l3.icrc_kind();
        Ok(t)
    }

    /// Marks this template for another kind of frame on the same path (a CNP towards the
    /// peer a QP's data goes to): the 802.1Q tag's PCP (when tagged), the IP DSCP and ECN
    /// (the GRH's traffic class too), the IPv6 or GRH flow label, the UDP source port
    /// (when there is UDP). The IPv4 base sum follows by RFC 1624 (the same folded sum as
    /// from scratch: both sums are never 0). The result is the template [`Self::new`]
    /// makes from the same headers so marked, at the cost of a few stores instead of
    /// every header written again; the other bytes stay. An empty template stays one
    /// that emits nothing.
    pub fn remark(&mut self, pcp: u8, dscp: u8, ecn: u8, flow_label: u32, src_port: u16) {
        if self.len == 0 {
            return;
        }
        let mark = Mark {
            pcp,
            dscp,
            ecn,
            flow_label,
            src_port,
        };
        let (l3, kind) = (usize::from(self.l3), self.kind);
        self.ip_sum = mark.apply(&mut self.bytes, l3, kind, self.ip_sum);
    }

    /// The template as a context memory holds it: the header bytes (lengths and IPv4
    /// checksum zero), the BTH offset, the IP header offset, the network header kind and
    /// the IPv4 base sum.
    pub fn raw(&self) -> (&[u8; Self::MAX_LEN], u8, u8, IcrcKind, u16) {
        (&self.bytes, self.len, self.l3, self.kind, self.ip_sum)
    }

    /// A template from [`HeaderTemplate::raw`]'s parts; `None` when the offsets cannot
    /// describe headers (a BTH offset beyond the bytes, or an IP header that does not
    /// fit before it), so emitting with the result never faults.
    pub fn from_raw(
        bytes: &[u8; Self::MAX_LEN],
        len: u8,
        l3: u8,
        kind: IcrcKind,
        ip_sum: u16,
    ) -> Option<Self> {
        let net = match kind {
            IcrcKind::Ipv4 => Ipv4Repr::LEN + UdpRepr::LEN,
            IcrcKind::Ipv6 => Ipv6Repr::LEN + UdpRepr::LEN,
            IcrcKind::RoceV1 => Ipv6Repr::LEN,
        };
        let ok = usize::from(len) <= Self::MAX_LEN && usize::from(l3) + net == usize::from(len);
        ok.then_some(Self {
            bytes: *bytes,
            len,
            l3,
            kind,
            ip_sum,
        })
    }

    /// Length of the whole frame for this BTH opcode and `body_len` bytes of payload
    /// plus pad.
    pub fn frame_len(&self, opcode: Opcode, body_len: usize) -> Result<usize, EmitError> {
        let info = opcode
            .info()
            .ok_or(EmitError::UnknownOpcode { opcode: opcode.0 })?;
        let headers = usize::from(self.len) + BthRepr::LEN + info.ext_len() + ICRC_LEN;
        headers.checked_add(body_len).ok_or(EmitError::TooLong)
    }

    /// Writes a complete frame: these headers (lengths and checksum completed), `bth`,
    /// the extended headers its opcode carries from `ext`, `body_len` bytes of payload
    /// and pad written by `fill` in place, and the ICRC. BTH PadCnt is written as given.
    #[inline]
    pub fn emit_with(
        &self,
        bth: &BthRepr,
        ext: &ExtHeaders,
        body_len: usize,
        buf: &mut [u8],
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<Layout, EmitError> {
        self.emit_with_icrc(bth, ext, body_len, buf, false, |body, _| fill(body))
    }

    /// [`emit_with`](Self::emit_with), where with `hash_in_fill` the ICRC is begun over
    /// the headers before `fill` runs and `fill` gets it to feed the body's bytes in order
    /// (all of them: payload then pad) as it writes them: a payload read by DMA is then
    /// hashed in the same pass ([`Icrc::read`]) instead of being read again from the
    /// frame. Without it `fill` gets `None` and the ICRC is one call over the frame
    /// afterwards: the cheaper way where the DMA cannot hash as it reads (on the soft
    /// core, table-driven, each CRC call costs; [`crate::memory::Dma::hashes_reads`]).
    pub fn emit_with_icrc(
        &self,
        bth: &BthRepr,
        ext: &ExtHeaders,
        body_len: usize,
        buf: &mut [u8],
        hash_in_fill: bool,
        fill: impl FnOnce(&mut [u8], Option<&mut Icrc>),
    ) -> Result<Layout, EmitError> {
        let info = bth.opcode.info().ok_or(EmitError::UnknownOpcode {
            opcode: bth.opcode.0,
        })?;
        if self.len == 0 {
            return Err(EmitError::UdpMismatch);
        }
        let total = self.frame_len(bth.opcode, body_len)?;
        let buf = buf
            .get_mut(..total)
            .ok_or(EmitError::BufferTooSmall { needed: total })?;
        let (l3, bth_at) = (usize::from(self.l3), usize::from(self.len));
        let (hdr, rest) = buf.split_at_mut(bth_at);
        hdr.copy_from_slice(&self.bytes[..bth_at]);
        let udp_at = self.set_lengths(hdr, total, self.ip_sum)?;
        let too_long = |_| EmitError::TooLong;
        let mut at = bth.emit(rest).map_err(too_long)?;
        for h in info.headers {
            at += emit_ext(*h, ext, &mut rest[at..])?;
        }
        let payload_at = bth_at + at;
        let icrc_at = payload_at + body_len;
        let crc = if hash_in_fill {
            let mut crc = Icrc::start(self.kind, &buf[l3..payload_at]).map_err(too_long)?;
            fill(&mut buf[payload_at..icrc_at], Some(&mut crc));
            crc.finish()
        } else {
            fill(&mut buf[payload_at..icrc_at], None);
            icrc::compute(self.kind, &buf[l3..icrc_at]).map_err(too_long)?
        };
        buf[icrc_at..total].copy_from_slice(&crc.to_le_bytes());
        let pad = usize::from(bth.pad_count).min(body_len);
        Ok(Layout {
            l3,
            udp: udp_at,
            bth: bth_at,
            payload: payload_at,
            pad: icrc_at - pad,
            icrc: icrc_at,
            end: total,
        })
    }

    /// Writes into `hdr` (these header bytes, copied into a frame of `total` bytes)
    /// the lengths and, for IPv4, the checksum from the base sum `ip_sum`; returns the
    /// UDP header's offset. The one place for these rules, whatever the frame.
    #[inline]
    fn set_lengths(
        &self,
        hdr: &mut [u8],
        total: usize,
        ip_sum: u16,
    ) -> Result<Option<usize>, EmitError> {
        let l3 = usize::from(self.l3);
        // The bytes after `l3` and a header of `skip` bytes.
        let len16 = |skip: usize| {
            total
                .checked_sub(l3 + skip)
                .and_then(|n| u16::try_from(n).ok())
                .ok_or(EmitError::TooLong)
        };
        // IPv4 counts its header in its length, IPv6 and the GRH do not; UDP counts its
        // own header and everything after it.
        let (ip_len, udp_at) = match self.kind {
            IcrcKind::Ipv4 => (len16(0)?, Some(l3 + Ipv4Repr::LEN)),
            IcrcKind::Ipv6 => (len16(Ipv6Repr::LEN)?, Some(l3 + Ipv6Repr::LEN)),
            IcrcKind::RoceV1 => (len16(Ipv6Repr::LEN)?, None),
        };
        let mut set16 = |at: usize, v: u16| {
            if let Some(f) = hdr.get_mut(at..at + 2) {
                f.copy_from_slice(&v.to_be_bytes());
            }
        };
        if self.kind == IcrcKind::Ipv4 {
            set16(l3 + 2, ip_len);
            // RFC 1624: the template's sum plus the length, folded, complemented (equal
            // to the checksum computed from scratch: both are the folded sum, never 0).
            let sum = u32::from(ip_sum) + u32::from(ip_len);
            let sum = (sum & 0xFFFF) + (sum >> 16);
            set16(l3 + 10, !(sum as u16));
        } else {
            set16(l3 + 4, ip_len);
        }
        if let Some(u) = udp_at {
            // Fits: `u` is past `l3 + 20`, and the IP length fitted.
            set16(u + 4, total.saturating_sub(u) as u16);
        }
        Ok(udp_at)
    }

    /// Writes a CNP: these headers re-marked as [`Self::remark`] does with `pcp`,
    /// `dscp`, `ecn`, flow label 0 and UDP source port 0 (lengths and checksum
    /// completed), `bth` (a CNP's), the 16 reserved zero bytes and the ICRC; returns its
    /// length. The frame `remark` and then [`Self::emit_with`] write, marked in the
    /// frame instead of in a copy of the template, and without the generic path's
    /// opcode table and extended-header dispatch: a notification point's CNP is the
    /// firmware's frame, each one in its per-packet budget (issue 14).
    pub fn emit_cnp(
        &self,
        pcp: u8,
        dscp: u8,
        ecn: u8,
        bth: &BthRepr,
        buf: &mut [u8],
    ) -> Result<usize, EmitError> {
        if self.len == 0 {
            return Err(EmitError::UdpMismatch);
        }
        let (l3, bth_at) = (usize::from(self.l3), usize::from(self.len));
        let icrc_at = bth_at + BthRepr::LEN + CnpRepr::LEN;
        let total = icrc_at + ICRC_LEN;
        let buf = buf
            .get_mut(..total)
            .ok_or(EmitError::BufferTooSmall { needed: total })?;
        let (hdr, rest) = buf.split_at_mut(bth_at);
        hdr.copy_from_slice(self.bytes.get(..bth_at).ok_or(EmitError::TooLong)?);
        let mark = Mark {
            pcp,
            dscp,
            ecn,
            flow_label: 0,
            src_port: 0,
        };
        let ip_sum = mark.apply(hdr, l3, self.kind, self.ip_sum);
        self.set_lengths(hdr, total, ip_sum)?;
        let too_long = |_| EmitError::TooLong;
        let (b, body) = rest.split_first_chunk_mut().ok_or(EmitError::TooLong)?;
        bth.write(b);
        CnpRepr::default().emit(body).map_err(too_long)?;
        let crc =
            icrc::compute(self.kind, buf.get(l3..icrc_at).unwrap_or(&[])).map_err(too_long)?;
        if let Some(f) = buf.get_mut(icrc_at..) {
            f.copy_from_slice(&crc.to_le_bytes());
        }
        Ok(total)
    }
}

/// How [`HeaderTemplate::remark`] marks headers: the 802.1Q tag's PCP, the IP DSCP and
/// ECN, the IPv6 or GRH flow label, the UDP source port.
struct Mark {
    pcp: u8,
    dscp: u8,
    ecn: u8,
    flow_label: u32,
    src_port: u16,
}

impl Mark {
    /// Marks header bytes `b` (a template's, IP header or GRH at `l3`, network headers
    /// of `kind`) with IPv4 base sum `ip_sum`; returns the new base sum. The one place
    /// for these rules: a template re-marked, or a CNP's headers in its frame.
    fn apply(&self, b: &mut [u8], l3: usize, kind: IcrcKind, ip_sum: u16) -> u16 {
        // The tag's TCI follows the outer EtherType: PCP is its top 3 bits.
        if l3 == EthernetRepr::LEN + VlanRepr::LEN {
            if let Some(t) = b.get_mut(EthernetRepr::LEN) {
                *t = (*t & 0x1F) | ((self.pcp & 7) << 5);
            }
        }
        let tc = (self.dscp << 2) | (self.ecn & 3);
        let mut new_sum = ip_sum;
        let udp = match kind {
            IcrcKind::Ipv4 => {
                if let Some(w) = b.get_mut(l3..l3 + 2) {
                    let old = u16::from_be_bytes([w[0], w[1]]);
                    w[1] = tc;
                    let new = u16::from_be_bytes([w[0], w[1]]);
                    let sum = u32::from(ip_sum) + u32::from(!old) + u32::from(new);
                    let sum = (sum & 0xFFFF) + (sum >> 16);
                    new_sum = ((sum & 0xFFFF) + (sum >> 16)) as u16;
                }
                Some(l3 + Ipv4Repr::LEN)
            }
            IcrcKind::Ipv6 | IcrcKind::RoceV1 => {
                let w = (6 << 28) | (u32::from(tc) << 20) | (self.flow_label & 0x000F_FFFF);
                if let Some(f) = b.get_mut(l3..l3 + 4) {
                    f.copy_from_slice(&w.to_be_bytes());
                }
                (kind == IcrcKind::Ipv6).then_some(l3 + Ipv6Repr::LEN)
            }
        };
        if let Some(f) = udp.and_then(|u| b.get_mut(u..u + 2)) {
            f.copy_from_slice(&self.src_port.to_be_bytes());
        }
        new_sum
    }
}

/// Writes extended header `h` from `ext`; returns its length.
///
/// Out of line on purpose: inlined into the loop over the opcode's headers, the compiler
/// byte-swapped the fields of every header `ExtHeaders` can hold before knowing which
/// one it writes (~260 instructions per frame on a 32-bit core).
#[inline(never)]
fn emit_ext(h: ExtHeader, ext: &ExtHeaders, b: &mut [u8]) -> Result<usize, EmitError> {
    let missing = EmitError::MissingHeader(h);
    match h {
        ExtHeader::Reth => ext.reth.ok_or(missing)?.emit(b),
        ExtHeader::Aeth => ext.aeth.ok_or(missing)?.emit(b),
        ExtHeader::AtomicEth => ext.atomic_eth.ok_or(missing)?.emit(b),
        ExtHeader::AtomicAckEth => ext.atomic_ack_eth.ok_or(missing)?.emit(b),
        ExtHeader::ImmDt => ext.immdt.ok_or(missing)?.emit(b),
        ExtHeader::Ieth => ext.ieth.ok_or(missing)?.emit(b),
        ExtHeader::Deth => ext.deth.ok_or(missing)?.emit(b),
        ExtHeader::Cnp => ext.cnp.ok_or(missing)?.emit(b),
    }
    .map_err(|_| EmitError::TooLong)
}

/// Writes a complete frame carrying `payload`: pads it to a multiple of 4 with zeros,
/// sets PadCnt, and computes every length, the IPv4 checksum and the ICRC. Returns the
/// frame length.
pub fn emit(h: &Headers, payload: &[u8], buf: &mut [u8]) -> Result<usize, EmitError> {
    let pad = payload.len().wrapping_neg() & 3;
    let mut h = *h;
    h.bth.pad_count = pad as u8;
    let layout = emit_with(&h, payload.len() + pad, buf, |body| {
        let (data, zeros) = body.split_at_mut(payload.len());
        data.copy_from_slice(payload);
        zeros.fill(0);
    })?;
    Ok(layout.end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::MacAddr;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// The Ethernet header of the template tests.
    const ETH: EthernetRepr = EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        ethertype: 0,
    };

    /// One template, many frames of different lengths: every frame's lengths and IPv4
    /// checksum are its own (the incremental checksum equals RFC 1071's from scratch),
    /// and `parse` accepts it.
    #[test]
    fn a_template_serves_frames_of_any_length() {
        let eth = ETH;
        let vlan = VlanRepr {
            pcp: 3,
            dei: false,
            vid: 100,
            ethertype: 0,
        };
        let udp = UdpRepr {
            src_port: 0xC123,
            dst_port: ROCEV2_PORT,
            checksum: 0,
        };
        let v4 = L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(192, 168, 255, 254),
            dscp: 26,
            ecn: 2,
            ..Ipv4Repr::default()
        });
        let v6 = L3Repr::Ipv6(Ipv6Repr {
            src: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2),
            dscp: 0,
            ecn: 0,
            flow_label: 0x12345,
            next_header: NEXT_HEADER_UDP,
            hop_limit: 64,
        });
        let bth = BthRepr::new(Opcode::RC_RDMA_WRITE_MIDDLE, Qpn::new(0x11), Psn::new(7));
        let mut buf = [0u8; 2048];
        for (l3, tag) in [(v4, None), (v4, Some(&vlan)), (v6, None), (v6, Some(&vlan))] {
            let t = HeaderTemplate::new(&eth, tag, &l3, Some(&udp)).unwrap();
            for body in (0..1500).step_by(4).chain([1496, 1024, 0, 4]) {
                let layout = t
                    .emit_with(&bth, &ExtHeaders::default(), body, &mut buf, |b| {
                        b.fill(0x5A)
                    })
                    .unwrap();
                let frame = &buf[..layout.end];
                let ip = &frame[layout.l3..];
                let udp_at = layout.udp.unwrap();
                let udp_len = u16::from_be_bytes([frame[udp_at + 4], frame[udp_at + 5]]);
                assert_eq!(usize::from(udp_len), layout.end - udp_at);
                if let L3Repr::Ipv4(_) = l3 {
                    assert_eq!(ipv4::checksum(&ip[..20]), 0, "body {body}");
                    let total = u16::from_be_bytes([ip[2], ip[3]]);
                    assert_eq!(usize::from(total), layout.end - layout.l3);
                } else {
                    let plen = u16::from_be_bytes([ip[4], ip[5]]);
                    assert_eq!(usize::from(plen), layout.end - layout.l3 - 40);
                }
                let pkt = parse(frame).unwrap();
                assert_eq!(pkt.payload().len(), body);
                assert_eq!(pkt.l3(), l3, "the template's fields survive every frame");
            }
        }
    }

    /// A template re-marked is the template built with that marking: every IPv4 TOS
    /// (its base sum included, by RFC 1624 against RFC 1071 from scratch), IPv6 and GRH
    /// traffic class and flow label, PCP, UDP source port, on IPv4, IPv6 and GRH headers,
    /// tagged or not.
    #[test]
    fn a_remarked_template_is_the_template_built_so_marked() {
        let eth = ETH;
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Headers of addresses `a` (kept) marked by `m`, and `m`'s marking.
        let marked = |a: u64, m: u64, l3: u8, tagged: bool| {
            let (dscp, ecn, pcp) = (m as u8, (m >> 8) as u8, (m >> 16) as u8);
            let (flow_label, port) = ((m >> 24) as u32, (m >> 48) as u16);
            let (src, dst) = (a as u32, (a >> 32) as u32);
            let v6 = |next_header| Ipv6Repr {
                src: Ipv6Addr::from(u128::from(src) << 64 | 1),
                dst: Ipv6Addr::from(u128::from(dst) << 32 | 2),
                dscp: dscp & 0x3F,
                ecn: ecn & 3,
                flow_label: flow_label & 0xF_FFFF,
                next_header,
                hop_limit: (a >> 24) as u8,
            };
            let ip = match l3 {
                0 => L3Repr::Ipv4(Ipv4Repr {
                    src: Ipv4Addr::from(src),
                    dst: Ipv4Addr::from(dst),
                    dscp: dscp & 0x3F,
                    ecn: ecn & 3,
                    ttl: (a >> 24) as u8,
                    ..Ipv4Repr::default()
                }),
                1 => L3Repr::Ipv6(v6(NEXT_HEADER_UDP)),
                _ => L3Repr::Grh(v6(NEXT_HEADER_BTH)),
            };
            let vlan = tagged.then_some(VlanRepr {
                pcp: pcp & 7,
                dei: a & 1 != 0,
                vid: (a >> 40) as u16 & 0xFFF,
                ethertype: 0,
            });
            let udp = (l3 < 2).then_some(UdpRepr {
                src_port: port,
                dst_port: ROCEV2_PORT,
                checksum: 0,
            });
            let t = HeaderTemplate::new(&eth, vlan.as_ref(), &ip, udp.as_ref()).unwrap();
            (t, (pcp, dscp & 0x3F, ecn, flow_label, port))
        };
        for i in 0..30_000 {
            let (l3, tagged) = ((i % 3) as u8, i % 2 == 0);
            let (a, m, n) = (next(), next(), next());
            let (mut t, _) = marked(a, m, l3, tagged);
            let (want, (pcp, dscp, ecn, fl, port)) = marked(a, n, l3, tagged);
            t.remark(pcp, dscp, ecn, fl, port);
            assert_eq!(t, want, "{i}: {a:#x} {m:#x} {n:#x}");
        }
        let mut empty = HeaderTemplate::EMPTY;
        empty.remark(7, 63, 3, 0xF_FFFF, 0xFFFF);
        assert_eq!(empty, HeaderTemplate::EMPTY);
    }
}
