//! Streaming reader of pcap and pcapng captures, from a file or a pipe.
//!
//! Frames come out one at a time as slices of one reusable buffer, so the first frame is
//! available as soon as its bytes have arrived and memory stays bounded whatever the
//! capture's length. A capture cut short in the middle of a record (what killing tcpdump
//! leaves) ends after its last complete frame, and [`Reader::truncated`] says where it was
//! cut; a file that is not a capture at all is refused up front with its first bytes
//! ([`Error::NotCapture`]).
//!
//! pcap: both byte orders, microsecond and nanosecond magics. pcapng: any number of
//! sections (each with its own byte order) and interfaces, each with its own link type,
//! timestamp resolution (`if_tsresol`) and offset (`if_tsoffset`); Enhanced, Simple and
//! (obsolete) Packet blocks carry frames, every other block is skipped.

use std::fmt;
use std::io::{self, Read};
use std::time::Duration;

/// A link-layer header type (tcpdump.org's `LINKTYPE_*` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkType(pub u16);

impl LinkType {
    pub const ETHERNET: Self = Self(1);

    /// The tcpdump.org name of the common link types.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "NULL",
            1 => "ETHERNET",
            101 => "RAW",
            105 => "IEEE802_11",
            113 => "LINUX_SLL",
            127 => "IEEE802_11_RADIOTAP",
            228 => "IPV4",
            229 => "IPV6",
            247 => "INFINIBAND",
            276 => "LINUX_SLL2",
            _ => return None,
        })
    }
}

impl fmt::Display for LinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{} ({n})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// One captured frame, borrowed from the reader until the next call.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The frame number, counting every packet record from 1 (as Wireshark does).
    pub index: u64,
    /// Time since the epoch, as recorded. A pcapng Simple Packet Block carries none and
    /// takes the previous frame's.
    pub timestamp: Duration,
    pub link: LinkType,
    /// The pcapng interface (0 for pcap).
    pub interface: u32,
    /// The bytes captured (possibly fewer than were on the wire).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub original_len: u32,
}

/// The longest frame [`Frame::headers_view`] makes whole: pcap's largest snap length
/// (a larger `original_len` is not a frame anyone captured, and no allocation follows it).
const LONGEST_FRAME: usize = 262_144;

impl<'a> Frame<'a> {
    /// Whether the capture kept only the frame's start (a snap length, `tcpdump -s 128`).
    pub fn snapped(&self) -> bool {
        self.data.len() < self.original_len as usize
    }

    /// The frame's bytes as far as its headers go: a snapped frame's missing tail is made
    /// up of zeros (in `room`) so that its lengths hold and its headers can be parsed
    /// (with `wire::parse_unverified`: the made-up ICRC is wrong).
    pub fn headers_view<'s>(&self, room: &'s mut Vec<u8>) -> &'s [u8]
    where
        'a: 's,
    {
        if !self.snapped() || self.original_len as usize > LONGEST_FRAME {
            return self.data;
        }
        room.clear();
        room.extend_from_slice(self.data);
        room.resize(self.original_len as usize, 0);
        room
    }
}

/// Where a capture was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// The frame number the unfinished record would have had.
    pub index: u64,
    /// Bytes of the record that arrived, and the bytes it needed.
    pub have: usize,
    pub need: usize,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the capture is cut short in the middle of frame {} ({} of its {} bytes); \
             the frames before it are complete",
            self.index, self.have, self.need
        )
    }
}

/// Why a capture cannot be read.
#[derive(Debug)]
pub enum Error {
    /// Neither a pcap nor a pcapng magic number: the first bytes, to show.
    NotCapture {
        first: Vec<u8>,
    },
    /// The file ends inside its pcap file header or first pcapng section header.
    TruncatedHeader {
        have: usize,
        need: usize,
    },
    /// A record that cannot be right (an impossible length, an undeclared interface).
    Corrupt {
        offset: u64,
        what: String,
    },
    Io(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotCapture { first } if first.is_empty() => {
                f.write_str("not a pcap or pcapng capture: it is empty")
            }
            Self::NotCapture { first } => {
                write!(f, "not a pcap or pcapng capture: it starts with")?;
                for b in first {
                    write!(f, " {b:02x}")?;
                }
                let text: String = first
                    .iter()
                    .map(|&b| match b {
                        0x20..=0x7e => b as char,
                        _ => '.',
                    })
                    .collect();
                write!(f, " ({text:?})")?;
                if first.starts_with(&[0x1f, 0x8b]) {
                    f.write_str("; that is gzip: decompress it first")?;
                }
                Ok(())
            }
            Self::TruncatedHeader { have, need } => write!(
                f,
                "the capture ends inside its file header ({have} of {need} bytes)"
            ),
            Self::Corrupt { offset, what } => write!(f, "corrupt capture at byte {offset}: {what}"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Wireshark's limit on one record (`WTAP_MAX_PACKET_SIZE_STANDARD`): a longer one means
/// the file is corrupt.
pub const MAX_RECORD: usize = 262_144;
/// pcapng blocks other than packets are skipped without being held whole when they are
/// longer than this.
const MAX_HELD_BLOCK: usize = 1 << 20;
/// How many bytes [`Error::NotCapture`] shows.
const SHOWN: usize = 16;

const PCAP_HEADER: usize = 24;
const PCAP_RECORD: usize = 16;
const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

#[derive(Debug, Clone, Copy)]
enum Resolution {
    /// Ticks of 10^-n seconds.
    Decimal(u32),
    /// Ticks of 2^-n seconds.
    Binary(u32),
}

impl Resolution {
    fn duration(self, ticks: u64) -> Duration {
        match self {
            Self::Decimal(n) if n <= 9 => Duration::from_nanos(ticks)
                .checked_mul(10u32.pow(9 - n))
                .unwrap_or(Duration::MAX),
            Self::Decimal(n) => {
                let per_sec = 10u64.checked_pow(n).unwrap_or(u64::MAX);
                split(ticks, per_sec)
            }
            Self::Binary(n) if n >= 64 => Duration::ZERO,
            Self::Binary(n) => split(ticks, 1u64 << n),
        }
    }
}

/// `ticks` of `1 / per_sec` seconds.
fn split(ticks: u64, per_sec: u64) -> Duration {
    let secs = ticks / per_sec;
    let frac = ticks % per_sec;
    let nanos = (u128::from(frac) * 1_000_000_000 / u128::from(per_sec)) as u32;
    Duration::new(secs, nanos)
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    resolution: Resolution,
    offset_secs: i64,
}

#[derive(Debug)]
enum Format {
    Pcap {
        big: bool,
        resolution: Resolution,
        link: LinkType,
    },
    PcapNg {
        big: bool,
        interfaces: Vec<Interface>,
    },
}

/// Reads frames from a pcap or pcapng stream.
pub struct Reader<R> {
    src: R,
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    eof: bool,
    /// Stream offset of `buf[start]`, for error messages.
    offset: u64,
    format: Format,
    next_index: u64,
    last_timestamp: Duration,
    truncated: Option<Truncation>,
}

impl<R: Read> Reader<R> {
    /// Reads the file header (pcap) or first section header (pcapng).
    pub fn new(src: R) -> Result<Self, Error> {
        let mut r = Self {
            src,
            buf: vec![0; 1 << 20],
            start: 0,
            end: 0,
            eof: false,
            offset: 0,
            format: Format::PcapNg {
                big: false,
                interfaces: Vec::new(),
            },
            next_index: 1,
            last_timestamp: Duration::ZERO,
            truncated: None,
        };
        r.fill(SHOWN)?;
        let head = r.unread();
        let magic = head.first_chunk::<4>().map(|m| u32::from_le_bytes(*m));
        let pcap = match magic {
            Some(0xa1b2_c3d4) => Some((false, Resolution::Decimal(6))),
            Some(0xd4c3_b2a1) => Some((true, Resolution::Decimal(6))),
            Some(0xa1b2_3c4d) => Some((false, Resolution::Decimal(9))),
            Some(0x4d3c_b2a1) => Some((true, Resolution::Decimal(9))),
            _ => None,
        };
        if let Some((big, resolution)) = pcap {
            if !r.fill(PCAP_HEADER)? {
                return Err(Error::TruncatedHeader {
                    have: r.available(),
                    need: PCAP_HEADER,
                });
            }
            // The link type is the low 16 bits; the high ones may carry FCS information.
            let link = LinkType(r.u32_at(big, 20) as u16);
            r.consume(PCAP_HEADER);
            r.format = Format::Pcap {
                big,
                resolution,
                link,
            };
            return Ok(r);
        }
        if magic == Some(PCAPNG_SHB) {
            if r.section_header()? {
                return Ok(r);
            }
            let need = r.truncated.map_or(0, |t| t.need);
            return Err(Error::TruncatedHeader {
                have: r.available(),
                need,
            });
        }
        let first = r.unread()[..r.available().min(SHOWN)].to_vec();
        Err(Error::NotCapture { first })
    }

    /// The next frame, or `None` at the end of the capture (see [`Self::truncated`]).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, Error> {
        match self.format {
            Format::Pcap { .. } => self.next_pcap(),
            Format::PcapNg { .. } => loop {
                let Some(len) = self.peek_block()? else {
                    return Ok(None);
                };
                if let Some((at, meta)) = self.packet_block(len)? {
                    return Ok(Some(self.frame_at(at, meta)));
                }
            },
        }
    }

    /// Where the capture was cut short, once [`Self::next_frame`] has returned `None`.
    pub fn truncated(&self) -> Option<Truncation> {
        self.truncated
    }

    /// Whether the next record is already in memory, so that [`Self::next_frame`] will
    /// not wait for input. A live reader flushes its output when this is false.
    pub fn has_buffered_frame(&self) -> bool {
        let mut u = self.unread();
        match self.format {
            Format::Pcap { big, .. } => u
                .get(8..12)
                .is_some_and(|l| u.len() >= PCAP_RECORD + read_u32(big, l) as usize),
            // Whole blocks that carry no frame are passed over.
            Format::PcapNg { big, .. } => loop {
                let Some(h) = u.get(..8) else { return false };
                let len = read_u32(big, &h[4..8]) as usize;
                if len < 12 || u.len() < len {
                    return false;
                }
                if matches!(read_u32(big, &h[0..4]), 2 | 3 | 6) {
                    return true;
                }
                u = &u[len..];
            },
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Frame<'_>>, Error> {
        let Format::Pcap {
            big,
            resolution,
            link,
        } = self.format
        else {
            unreachable!("called for pcap only")
        };
        if !self.fill(PCAP_RECORD)? {
            return Ok(self.end_of_stream(PCAP_RECORD));
        }
        let secs = u64::from(self.u32_at(big, 0));
        let frac = u64::from(self.u32_at(big, 4));
        let caplen = self.u32_at(big, 8) as usize;
        let original_len = self.u32_at(big, 12);
        if caplen > MAX_RECORD {
            return Err(self.corrupt(format!(
                "frame {} claims {caplen} captured bytes, more than {MAX_RECORD}",
                self.next_index
            )));
        }
        if !self.fill(PCAP_RECORD + caplen)? {
            return Ok(self.end_of_stream(PCAP_RECORD + caplen));
        }
        let timestamp = Duration::from_secs(secs).saturating_add(resolution.duration(frac));
        self.consume(PCAP_RECORD);
        let at = self.start;
        self.consume(caplen);
        Ok(Some(self.frame(
            timestamp,
            link,
            0,
            at,
            caplen,
            original_len,
        )))
    }

    /// The length of the next pcapng block, with the whole block in memory unless it is a
    /// long one of a kind that carries no frame (then it is skipped here). `None` at the
    /// end.
    fn peek_block(&mut self) -> Result<Option<usize>, Error> {
        loop {
            let Format::PcapNg { big, .. } = self.format else {
                unreachable!("called for pcapng only")
            };
            if !self.fill(8)? {
                return Ok(self.end_of_stream(8));
            }
            let kind = self.u32_at(big, 0);
            if kind == PCAPNG_SHB {
                if !self.section_header()? {
                    return Ok(None);
                }
                continue;
            }
            let len = self.u32_at(big, 4) as usize;
            if len < 12 || len % 4 != 0 {
                return Err(self.corrupt(format!("block length {len}")));
            }
            let carries_frame = matches!(kind, 2 | 3 | 6);
            if carries_frame && len > MAX_RECORD + 64 + 4096 {
                return Err(self.corrupt(format!(
                    "a packet block of {len} bytes, longer than any frame"
                )));
            }
            if !carries_frame && len > MAX_HELD_BLOCK {
                if !self.skip(len)? {
                    return Ok(self.end_of_stream(len));
                }
                continue;
            }
            if !self.fill(len)? {
                return Ok(self.end_of_stream(len));
            }
            if self.u32_at(big, len - 4) as usize != len {
                return Err(self.corrupt(format!(
                    "block of {len} bytes whose trailing length is {}",
                    self.u32_at(big, len - 4)
                )));
            }
            return Ok(Some(len));
        }
    }

    /// Reads the section header block the stream is at (a new section forgets the
    /// interfaces of the one before); false at the end of the stream.
    fn section_header(&mut self) -> Result<bool, Error> {
        if !self.fill(12)? {
            return Ok(self.end_of_stream::<()>(12).is_some());
        }
        let big = match u32::from_le_bytes(self.unread()[8..12].try_into().expect("4 bytes")) {
            BYTE_ORDER_MAGIC => false,
            m if m == BYTE_ORDER_MAGIC.swap_bytes() => true,
            m => return Err(self.corrupt(format!("section header byte-order magic {m:#010x}"))),
        };
        let len = self.u32_at(big, 4) as usize;
        if !(28..=MAX_HELD_BLOCK).contains(&len) || len % 4 != 0 {
            return Err(self.corrupt(format!("section header block length {len}")));
        }
        if !self.fill(len)? {
            return Ok(self.end_of_stream::<()>(len).is_some());
        }
        self.consume(len);
        self.format = Format::PcapNg {
            big,
            interfaces: Vec::new(),
        };
        Ok(true)
    }

    /// Handles the block of `len` bytes at the front of the buffer: an interface
    /// description is recorded, a packet block returns where its frame lies.
    fn packet_block(&mut self, len: usize) -> Result<Option<(usize, FrameMeta)>, Error> {
        let Format::PcapNg { big, .. } = self.format else {
            unreachable!("called for pcapng only")
        };
        let kind = self.u32_at(big, 0);
        let body = self.start + 8;
        let body_len = len - 12;
        let meta = match kind {
            // Interface Description Block.
            1 => {
                let iface = self.interface(big, body, body_len)?;
                if let Format::PcapNg { interfaces, .. } = &mut self.format {
                    interfaces.push(iface);
                }
                None
            }
            // Enhanced Packet Block.
            6 if body_len >= 20 => {
                let interface = self.u32_at(big, 8);
                let ticks =
                    (u64::from(self.u32_at(big, 12)) << 32) | u64::from(self.u32_at(big, 16));
                let caplen = self.u32_at(big, 20) as usize;
                let original_len = self.u32_at(big, 24);
                if caplen > body_len - 20 {
                    return Err(self.corrupt(format!(
                        "frame {}: {caplen} captured bytes in a block of {len}",
                        self.next_index
                    )));
                }
                Some((body + 20, caplen, interface, Some(ticks), original_len))
            }
            // Simple Packet Block: interface 0, no timestamp.
            3 if body_len >= 4 => {
                let original_len = self.u32_at(big, 8);
                let snaplen = self.iface(0).map_or(0, |i| i.snaplen);
                let mut caplen = (original_len as usize).min(body_len - 4);
                if snaplen != 0 {
                    caplen = caplen.min(snaplen as usize);
                }
                Some((body + 4, caplen, 0, None, original_len))
            }
            // Packet Block (obsolete): a 16-bit interface, ticks as in the EPB.
            2 if body_len >= 20 => {
                let interface = u32::from(read_u16(big, &self.unread()[8..10]));
                let ticks =
                    (u64::from(self.u32_at(big, 12)) << 32) | u64::from(self.u32_at(big, 16));
                let caplen = self.u32_at(big, 20) as usize;
                let original_len = self.u32_at(big, 24);
                if caplen > body_len - 20 {
                    return Err(self.corrupt(format!(
                        "frame {}: {caplen} captured bytes in a block of {len}",
                        self.next_index
                    )));
                }
                Some((body + 20, caplen, interface, Some(ticks), original_len))
            }
            2 | 3 | 6 => return Err(self.corrupt(format!("packet block of {len} bytes"))),
            _ => None,
        };
        let Some((at, caplen, interface, ticks, original_len)) = meta else {
            self.consume(len);
            return Ok(None);
        };
        let Some(iface) = self.iface(interface) else {
            return Err(self.corrupt(format!(
                "frame {} is on interface {interface}, which no block declared",
                self.next_index
            )));
        };
        let timestamp = match ticks {
            Some(t) => {
                let d = iface.resolution.duration(t);
                if iface.offset_secs >= 0 {
                    d.saturating_add(Duration::from_secs(iface.offset_secs as u64))
                } else {
                    d.saturating_sub(Duration::from_secs(iface.offset_secs.unsigned_abs()))
                }
            }
            None => self.last_timestamp,
        };
        // The block is consumed; its bytes stay in the buffer until the next fill.
        self.consume(len);
        Ok(Some((
            at,
            FrameMeta {
                timestamp,
                link: iface.link,
                interface,
                caplen,
                original_len,
            },
        )))
    }

    fn iface(&self, i: u32) -> Option<Interface> {
        match &self.format {
            Format::PcapNg { interfaces, .. } => interfaces.get(i as usize).copied(),
            Format::Pcap { .. } => None,
        }
    }

    /// An Interface Description Block's body: link type, snap length, options.
    fn interface(&self, big: bool, body: usize, body_len: usize) -> Result<Interface, Error> {
        if body_len < 8 {
            return Err(self.corrupt("interface description block too short".into()));
        }
        let b = &self.buf[body..body + body_len];
        let mut iface = Interface {
            link: LinkType(read_u16(big, &b[0..2])),
            snaplen: read_u32(big, &b[4..8]),
            resolution: Resolution::Decimal(6),
            offset_secs: 0,
        };
        let mut opts = &b[8..];
        while let Some(h) = opts.get(..4) {
            let code = read_u16(big, &h[0..2]);
            let len = usize::from(read_u16(big, &h[2..4]));
            let Some(value) = opts.get(4..4 + len) else {
                break;
            };
            match (code, value) {
                (0, _) => break,
                (9, &[r]) => {
                    iface.resolution = if r & 0x80 == 0 {
                        Resolution::Decimal(u32::from(r))
                    } else {
                        Resolution::Binary(u32::from(r & 0x7f))
                    }
                }
                (14, v) if v.len() == 8 => {
                    iface.offset_secs = read_u64(big, v) as i64;
                }
                _ => {}
            }
            opts = opts.get(4 + len.next_multiple_of(4)..).unwrap_or(&[]);
        }
        Ok(iface)
    }

    fn frame_at(&mut self, at: usize, m: FrameMeta) -> Frame<'_> {
        self.frame(
            m.timestamp,
            m.link,
            m.interface,
            at,
            m.caplen,
            m.original_len,
        )
    }

    fn frame(
        &mut self,
        timestamp: Duration,
        link: LinkType,
        interface: u32,
        at: usize,
        caplen: usize,
        original_len: u32,
    ) -> Frame<'_> {
        let index = self.next_index;
        self.next_index += 1;
        self.last_timestamp = timestamp;
        Frame {
            index,
            timestamp,
            link,
            interface,
            data: &self.buf[at..at + caplen],
            original_len,
        }
    }

    /// The stream ended while `need` bytes of a record were wanted: a clean end if none
    /// of it arrived, a truncation otherwise.
    fn end_of_stream<T>(&mut self, need: usize) -> Option<T> {
        let have = self.available();
        if have > 0 {
            self.truncated = Some(Truncation {
                index: self.next_index,
                have,
                need,
            });
        }
        None
    }

    fn corrupt(&self, what: String) -> Error {
        Error::Corrupt {
            offset: self.offset,
            what,
        }
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn available(&self) -> usize {
        self.end - self.start
    }

    fn u32_at(&self, big: bool, at: usize) -> u32 {
        read_u32(big, &self.buf[self.start + at..self.start + at + 4])
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Makes at least `n` unread bytes available; false if the stream ends first.
    fn fill(&mut self, n: usize) -> io::Result<bool> {
        if self.available() >= n {
            return Ok(true);
        }
        if self.start + n > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if n > self.buf.len() {
                self.buf.resize(n, 0);
            }
        }
        while self.available() < n && !self.eof {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.available() >= n)
    }

    /// Consumes `n` bytes, reading past those not yet in memory; false if the stream
    /// ends first.
    fn skip(&mut self, n: usize) -> io::Result<bool> {
        let mut left = n;
        loop {
            let k = left.min(self.available());
            self.consume(k);
            left -= k;
            if left == 0 {
                return Ok(true);
            }
            self.start = 0;
            self.end = 0;
            if !self.fill(1)? {
                return Ok(false);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct FrameMeta {
    timestamp: Duration,
    link: LinkType,
    interface: u32,
    caplen: usize,
    original_len: u32,
}

fn read_u16(big: bool, b: &[u8]) -> u16 {
    let a = [b[0], b[1]];
    if big {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}

fn read_u32(big: bool, b: &[u8]) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

fn read_u64(big: bool, b: &[u8]) -> u64 {
    let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
    if big {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}
