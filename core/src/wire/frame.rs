//! Whole frames: [`parse`] a received Ethernet frame into borrowed headers, payload, pad
//! and ICRC verdict, or a typed [`Error`]; [`emit`] a complete frame (lengths, IPv4
//! checksum, pad bytes and PadCnt, ICRC) into a caller's buffer.
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
use super::icrc::{self, IcrcKind, ICRC_LEN};
use super::imm::{self, IethRepr, ImmDtRepr};
use super::ipv4::{self, Ipv4Repr, PROTOCOL_UDP};
use super::ipv6::{self, GrhRepr, Ipv6Repr, NEXT_HEADER_BTH, NEXT_HEADER_UDP};
use super::opcode::{ExtHeader, OpcodeInfo};
use super::reth::{self, RethRepr};
use super::udp::{Datagram, UdpRepr, ROCEV2_PORT};
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

/// Every header of a RoCE frame as plain data.
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

/// A parsed RoCE frame, borrowing its payload from the received buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub headers: Headers,
    /// The opcode's row in the table.
    pub info: &'static OpcodeInfo,
    pub payload: &'a [u8],
    /// The PadCnt pad bytes (normally zero; covered by the ICRC).
    pub pad: &'a [u8],
    /// The ICRC value from the trailer (its bytes on the wire are `icrc.to_le_bytes()`).
    pub icrc: u32,
    /// Whether the ICRC was checked ([`parse`]) or left to a datapath that already
    /// checked it ([`parse_unverified`]).
    pub icrc_verified: bool,
    /// Bytes after the IP datagram (Ethernet padding, trailers).
    pub trailer: &'a [u8],
    pub layout: Layout,
    /// The whole frame, for reading derived fields (lengths, checksums) through views.
    pub frame: &'a [u8],
}

/// Parses and checks a whole Ethernet frame (without FCS), ICRC included.
pub fn parse(frame: &[u8]) -> Result<Packet<'_>, Error> {
    parse_impl(frame, true)
}

/// Parses a whole frame without recomputing the ICRC: for frames whose ICRC a datapath
/// has already checked. Every other check is made.
pub fn parse_unverified(frame: &[u8]) -> Result<Packet<'_>, Error> {
    parse_impl(frame, false)
}

/// Reads the fixed-size header `V` at `at`, or fails with `err`.
fn view<'a, V>(
    frame: &'a [u8],
    at: usize,
    len: usize,
    err: Error,
    make: fn(&'a [u8]) -> V,
) -> Result<V, Error> {
    match frame.get(at..).filter(|b| b.len() >= len) {
        Some(b) => Ok(make(b)),
        None => Err(err),
    }
}

fn parse_impl(frame: &[u8], verify: bool) -> Result<Packet<'_>, Error> {
    let truncated = Error::TruncatedFrame;
    let eth = view(frame, 0, EthernetRepr::LEN, truncated, Frame::new_unchecked)?;
    let eth_repr = EthernetRepr::parse(&eth);
    let mut ethertype = eth_repr.ethertype;
    let mut l3 = EthernetRepr::LEN;
    let mut vlan = None;
    if ethertype == ETHERTYPE_VLAN {
        let tag = VlanRepr::parse(&view(
            frame,
            l3,
            VlanRepr::LEN,
            truncated,
            VlanTag::new_unchecked,
        )?);
        ethertype = tag.ethertype;
        vlan = Some(tag);
        l3 += VlanRepr::LEN;
    }
    let net = frame.get(l3..).unwrap_or(&[]);
    let version = match net.first() {
        Some(b) => b >> 4,
        None if matches!(
            ethertype,
            ETHERTYPE_IPV4 | ETHERTYPE_IPV6 | ETHERTYPE_ROCEV1
        ) =>
        {
            return Err(truncated)
        }
        None => 0,
    };

    // The network header: its repr, where the next header starts, where the datagram ends.
    let (l3_repr, next, end) = match ethertype {
        ETHERTYPE_IPV4 => {
            if version != 4 {
                return Err(Error::BadIpVersion { version });
            }
            let ip = ipv4::Packet::new_unchecked(net);
            let ihl = usize::from(net[0] & 0x0F) * 4;
            if ihl < 20 {
                return Err(Error::BadIpHeader {
                    reason: "IPv4 IHL below 5",
                });
            }
            if net.len() < ihl {
                return Err(truncated);
            }
            if !ip.verify_checksum() {
                return Err(Error::BadIpv4Checksum {
                    checksum: ip.checksum(),
                });
            }
            if ip.more_frags() || ip.frag_offset() != 0 {
                return Err(Error::IpFragment);
            }
            if ip.protocol() != PROTOCOL_UDP {
                return Err(Error::NotUdp {
                    protocol: ip.protocol(),
                });
            }
            let total = usize::from(ip.total_len());
            if total < ihl {
                return Err(Error::LengthMismatch {
                    reason: "IPv4 total length below the header length",
                });
            }
            (L3Repr::Ipv4(Ipv4Repr::parse(&ip)), ihl, total)
        }
        ETHERTYPE_IPV6 | ETHERTYPE_ROCEV1 => {
            if version != 6 {
                return Err(Error::BadIpVersion { version });
            }
            let ip = view(
                net,
                0,
                Ipv6Repr::LEN,
                truncated,
                ipv6::Packet::new_unchecked,
            )?;
            let repr = Ipv6Repr::parse(&ip);
            let end = Ipv6Repr::LEN + usize::from(ip.payload_len());
            if ethertype == ETHERTYPE_IPV6 {
                if repr.next_header != NEXT_HEADER_UDP {
                    return Err(Error::NotUdp {
                        protocol: repr.next_header,
                    });
                }
                (L3Repr::Ipv6(repr), Ipv6Repr::LEN, end)
            } else {
                if repr.next_header != NEXT_HEADER_BTH {
                    return Err(Error::BadIpHeader {
                        reason: "GRH next header is not a BTH (0x1B)",
                    });
                }
                (L3Repr::Grh(repr), Ipv6Repr::LEN, end)
            }
        }
        _ => return Err(Error::UnsupportedEthertype { ethertype }),
    };

    // UDP (RoCEv2 only): port first, so foreign datagrams are named as such even when
    // truncated by a capture's snap length; then the lengths against each other and the
    // frame.
    let (udp, bth_at) = if l3_repr.is_rocev2() {
        if net.len() < next + UdpRepr::LEN {
            return Err(if end < next + UdpRepr::LEN {
                Error::LengthMismatch {
                    reason: "IP payload too short for a UDP header",
                }
            } else {
                truncated
            });
        }
        let d = Datagram::new_unchecked(&net[next..]);
        if d.dst_port() != ROCEV2_PORT {
            return Err(Error::NotRoceUdpPort {
                dport: d.dst_port(),
            });
        }
        if end < next + UdpRepr::LEN {
            return Err(Error::LengthMismatch {
                reason: "IP payload too short for a UDP header",
            });
        }
        if usize::from(d.length()) != end - next {
            return Err(Error::LengthMismatch {
                reason: "UDP length disagrees with the IP length",
            });
        }
        (Some(UdpRepr::parse(&d)), next + UdpRepr::LEN)
    } else {
        (None, next)
    };
    if end > net.len() {
        return Err(truncated);
    }
    let transport = &net[bth_at..end];

    // BTH and extended headers.
    if transport.len() < bth::Header::<&[u8]>::LEN + ICRC_LEN {
        return Err(Error::TruncatedBth);
    }
    let bth_repr = BthRepr::parse(&bth::Header::new_unchecked(transport));
    if bth_repr.tver != 0 {
        return Err(Error::UnsupportedTver {
            tver: bth_repr.tver,
        });
    }
    let info = bth_repr.opcode.info().ok_or(Error::UnknownOpcode {
        opcode: bth_repr.opcode.0,
    })?;
    let ext_end = BthRepr::LEN + info.ext_len();
    if transport.len() < ext_end + ICRC_LEN {
        return Err(Error::TruncatedExtHeader);
    }
    if transport.len() % 4 != 0 {
        return Err(Error::UnalignedLength {
            len: transport.len(),
        });
    }
    let ext = parse_ext(info, &transport[BthRepr::LEN..ext_end]);
    let icrc_at = transport.len() - ICRC_LEN;
    let body = &transport[ext_end..icrc_at];
    let pad = usize::from(bth_repr.pad_count);
    if pad > body.len() {
        return Err(Error::PadExceedsPayload {
            pad: bth_repr.pad_count,
            available: body.len(),
        });
    }
    if !info.payload && !body.is_empty() {
        return Err(Error::LengthMismatch {
            reason: "payload bytes on an opcode that carries none",
        });
    }
    let (payload, pad_bytes) = body.split_at(body.len() - pad);
    let wire = u32::from_le_bytes([
        transport[icrc_at],
        transport[icrc_at + 1],
        transport[icrc_at + 2],
        transport[icrc_at + 3],
    ]);
    if verify {
        let computed = icrc::compute(l3_repr.icrc_kind(), &net[..bth_at + icrc_at])
            .map_err(|_| Error::TruncatedBth)?;
        if computed != wire {
            return Err(Error::IcrcMismatch { computed, wire });
        }
    }
    let bth_abs = l3 + bth_at;
    let payload_at = bth_abs + ext_end;
    Ok(Packet {
        headers: Headers {
            eth: eth_repr,
            vlan,
            l3: l3_repr,
            udp,
            bth: bth_repr,
            ext,
        },
        info,
        payload,
        pad: pad_bytes,
        icrc: wire,
        icrc_verified: verify,
        trailer: &net[end..],
        layout: Layout {
            l3,
            udp: udp.map(|_| l3 + next),
            bth: bth_abs,
            payload: payload_at,
            pad: payload_at + payload.len(),
            icrc: bth_abs + icrc_at,
            end: l3 + end,
        },
        frame,
    })
}

/// Reads the extended headers `info` lists from `ext`, which holds exactly their bytes.
fn parse_ext(info: &OpcodeInfo, ext: &[u8]) -> ExtHeaders {
    let mut out = ExtHeaders::default();
    let mut at = 0;
    for h in info.headers {
        let b = &ext[at..at + h.wire_len()];
        match h {
            ExtHeader::Reth => out.reth = Some(RethRepr::parse(&reth::Header::new_unchecked(b))),
            ExtHeader::Aeth => out.aeth = Some(AethRepr::parse(&aeth::Header::new_unchecked(b))),
            ExtHeader::AtomicEth => {
                out.atomic_eth = Some(AtomicEthRepr::parse(&AtomicEth::new_unchecked(b)))
            }
            ExtHeader::AtomicAckEth => {
                out.atomic_ack_eth = Some(AtomicAckEthRepr::parse(&AtomicAckEth::new_unchecked(b)))
            }
            ExtHeader::ImmDt => out.immdt = Some(ImmDtRepr::parse(&imm::Header::new_unchecked(b))),
            ExtHeader::Ieth => out.ieth = Some(IethRepr::parse(&imm::Header::new_unchecked(b))),
            ExtHeader::Deth => out.deth = Some(DethRepr::parse(&deth::Header::new_unchecked(b))),
            ExtHeader::Cnp => out.cnp = Some(CnpRepr::parse(&cnp::Header::new_unchecked(b))),
        }
        at += h.wire_len();
    }
    out
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
pub fn emit_with(
    h: &Headers,
    body_len: usize,
    buf: &mut [u8],
    fill: impl FnOnce(&mut [u8]),
) -> Result<Layout, EmitError> {
    let info = h.bth.opcode.info().ok_or(EmitError::UnknownOpcode {
        opcode: h.bth.opcode.0,
    })?;
    if h.udp.is_some() != h.l3.is_rocev2() {
        return Err(EmitError::UdpMismatch);
    }
    let total = h.frame_len(body_len)?;
    let buf = buf
        .get_mut(..total)
        .ok_or(EmitError::BufferTooSmall { needed: total })?;
    let too_long = |_| EmitError::TooLong;

    let mut eth = h.eth;
    eth.ethertype = if h.vlan.is_some() {
        ETHERTYPE_VLAN
    } else {
        h.l3.ethertype()
    };
    let mut at = eth.emit(buf).map_err(too_long)?;
    if let Some(mut tag) = h.vlan {
        tag.ethertype = h.l3.ethertype();
        at += tag.emit(&mut buf[at..]).map_err(too_long)?;
    }
    let l3 = at;
    let transport_len = BthRepr::LEN + info.ext_len() + body_len + ICRC_LEN;
    let udp_len = if h.l3.is_rocev2() { UdpRepr::LEN } else { 0 };
    at += match &h.l3 {
        L3Repr::Ipv4(ip) => ip.emit(&mut buf[at..], udp_len + transport_len),
        L3Repr::Ipv6(ip) | L3Repr::Grh(ip) => ip.emit(&mut buf[at..], udp_len + transport_len),
    }
    .map_err(too_long)?;
    let udp_at = at;
    if let Some(udp) = &h.udp {
        at += udp.emit(&mut buf[at..], transport_len).map_err(too_long)?;
    }
    let bth_at = at;
    at += h.bth.emit(&mut buf[at..]).map_err(too_long)?;
    for hdr in info.headers {
        let b = &mut buf[at..];
        let missing = EmitError::MissingHeader(*hdr);
        let e = &h.ext;
        at += match hdr {
            ExtHeader::Reth => e.reth.ok_or(missing)?.emit(b),
            ExtHeader::Aeth => e.aeth.ok_or(missing)?.emit(b),
            ExtHeader::AtomicEth => e.atomic_eth.ok_or(missing)?.emit(b),
            ExtHeader::AtomicAckEth => e.atomic_ack_eth.ok_or(missing)?.emit(b),
            ExtHeader::ImmDt => e.immdt.ok_or(missing)?.emit(b),
            ExtHeader::Ieth => e.ieth.ok_or(missing)?.emit(b),
            ExtHeader::Deth => e.deth.ok_or(missing)?.emit(b),
            ExtHeader::Cnp => e.cnp.ok_or(missing)?.emit(b),
        }
        .map_err(too_long)?;
    }
    let payload_at = at;
    let icrc_at = payload_at + body_len;
    fill(&mut buf[payload_at..icrc_at]);
    let crc = icrc::compute(h.l3.icrc_kind(), &buf[l3..icrc_at]).map_err(too_long)?;
    buf[icrc_at..total].copy_from_slice(&crc.to_le_bytes());
    let pad = usize::from(h.bth.pad_count).min(body_len);
    Ok(Layout {
        l3,
        udp: h.udp.map(|_| udp_at),
        bth: bth_at,
        payload: payload_at,
        pad: icrc_at - pad,
        icrc: icrc_at,
        end: total,
    })
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
