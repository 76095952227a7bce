//! `roce decode`: every frame of a capture, decoded, filtered and written as a line of
//! text or JSON, streaming (output starts before the input has ended).

use crate::filter::Filter;
use crate::read::{Frame, LinkType, Reader, Truncation};
use roce_core::wire::{self, ipv4, ipv6, udp, Headers, L3Repr, Packet};
use std::io::{Read, Write};

/// A decoded frame as the writers need it: the headers, the length and checksum fields
/// `Headers` leaves derived, and the byte parts. The software decoder and the RTL
/// datapath each fill one, so both print through the same code.
pub struct Decoded<'a> {
    pub headers: Headers,
    /// IPv4 total length, or IPv6 / GRH payload length, as received.
    pub ip_length: u16,
    /// IPv4 header checksum as received.
    pub ip_checksum: u16,
    /// UDP length as received (RoCEv2).
    pub udp_length: u16,
    pub payload: &'a [u8],
    pub pad: &'a [u8],
    pub icrc: u32,
    pub trailer: &'a [u8],
}

impl<'a> Decoded<'a> {
    /// From roce-core's parse.
    pub fn from_packet(p: &Packet<'a>) -> Self {
        let frame = p.frame();
        let layout = p.layout();
        let l3 = &frame[layout.l3..];
        let headers = p.headers();
        let (ip_length, ip_checksum) = match headers.l3 {
            L3Repr::Ipv4(_) => {
                let v = ipv4::Packet::new_unchecked(l3);
                (v.total_len(), v.checksum())
            }
            L3Repr::Ipv6(_) | L3Repr::Grh(_) => (ipv6::Packet::new_unchecked(l3).payload_len(), 0),
        };
        let udp_length = layout
            .udp
            .map_or(0, |at| udp::Datagram::new_unchecked(&frame[at..]).length());
        Self {
            headers,
            ip_length,
            ip_checksum,
            udp_length,
            payload: p.payload(),
            pad: p.pad(),
            icrc: p.icrc(),
            trailer: p.trailer(),
        }
    }
}

/// Why a frame did not decode: a `packet-json.md` error name and a detail for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub name: &'static str,
    pub detail: String,
}

impl From<wire::Error> for Failure {
    fn from(e: wire::Error) -> Self {
        Self {
            name: e.name(),
            detail: e.to_string(),
        }
    }
}

impl Failure {
    /// A frame of a link type other than Ethernet.
    fn link_type(frame: &Frame<'_>) -> Self {
        Self {
            name: "unsupported_ethertype",
            detail: format!(
                "link type {} on interface {} is not Ethernet: skipped",
                frame.link, frame.interface
            ),
        }
    }
}

/// What turns a frame into [`Decoded`]: roce-core ([`Software`]) or the RTL datapath.
pub trait Decoder {
    /// The frame's verdict; `Err` only when the decoder itself fails.
    fn decode<'a>(&'a mut self, frame: &'a [u8]) -> anyhow::Result<Result<Decoded<'a>, Failure>>;
}

/// roce-core's `wire::parse`, ICRC included.
pub struct Software;

impl Decoder for Software {
    fn decode<'a>(&'a mut self, frame: &'a [u8]) -> anyhow::Result<Result<Decoded<'a>, Failure>> {
        Ok(match wire::parse(frame) {
            Ok(p) => Ok(Decoded::from_packet(&p)),
            Err(e) => Err(e.into()),
        })
    }
}

/// How each frame is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One line of text per frame (`text::line`).
    Text,
    /// One JSON object per line, `packet-json.md`.
    Json,
}

/// What a decode went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Frames read.
    pub frames: u64,
    /// Frames written (those the filter kept).
    pub written: u64,
    /// Where the capture was cut short, if it was.
    pub truncated: Option<Truncation>,
}

/// Output is handed to the writer in pieces of about this size.
const CHUNK: usize = 64 << 10;

/// Decodes every frame of `reader` the filter keeps into `out`. Output is flushed
/// whenever the reader would have to wait for input, so a live capture on a pipe shows
/// each frame as it comes. A corrupt record is an error after every frame before it has
/// been written.
pub fn decode<R: Read>(
    reader: &mut Reader<R>,
    decoder: &mut impl Decoder,
    format: Format,
    filter: &Filter,
    out: &mut impl Write,
) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    let mut buf = Vec::with_capacity(2 * CHUNK);
    let mut first = None;
    loop {
        if buf.len() >= CHUNK || (!buf.is_empty() && !reader.has_buffered_frame()) {
            out.write_all(&buf)?;
            buf.clear();
            if !reader.has_buffered_frame() {
                out.flush()?;
            }
        }
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            // A corrupt record ends the capture: the frames before it are shown first,
            // as Wireshark does.
            Err(e) => {
                out.write_all(&buf)?;
                out.flush()?;
                return Err(e.into());
            }
        };
        outcome.frames += 1;
        let start = *first.get_or_insert(frame.timestamp);
        let since_first = frame.timestamp.saturating_sub(start);
        let result = if frame.link == LinkType::ETHERNET {
            decoder.decode(frame.data)?
        } else {
            Err(Failure::link_type(&frame))
        };
        if !filter.keeps(&frame, since_first, &result) {
            continue;
        }
        outcome.written += 1;
        match format {
            Format::Json => crate::json::write::line(&mut buf, frame.index, &result),
            Format::Text => crate::text::line(&mut buf, frame.index, since_first, &result),
        }
    }
    out.write_all(&buf)?;
    out.flush()?;
    outcome.truncated = reader.truncated();
    Ok(outcome)
}
