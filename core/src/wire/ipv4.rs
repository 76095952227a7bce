//! IPv4 header (roce-facts §1.4). RoCE stacks send IHL = 5 without options.

use super::field::{get_u16, set_u16};
use super::Truncated;
use core::net::Ipv4Addr;

/// IP protocol number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// View of an IPv4 header. `check_len` checks the fixed 20 bytes; `header_len()` reads
/// IHL, which the caller validates against the buffer before reading options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Length of the header without options.
    pub const MIN_LEN: usize = 20;

    /// Wraps `buffer` without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer`, failing if it cannot hold the fixed 20-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, Truncated> {
        let v = Self::new_unchecked(buffer);
        v.check_len()?;
        Ok(v)
    }

    /// Fails if the buffer cannot hold the fixed 20-byte header.
    pub fn check_len(&self) -> Result<(), Truncated> {
        if self.buffer.as_ref().len() < Self::MIN_LEN {
            Err(Truncated)
        } else {
            Ok(())
        }
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Version nibble (4).
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    /// Header length in bytes (IHL x 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[0] & 0x0F) * 4
    }
    /// Differentiated services code point (TOS bits 7..2).
    pub fn dscp(&self) -> u8 {
        self.b()[1] >> 2
    }
    /// ECN codepoint (TOS bits 1..0): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    pub fn ecn(&self) -> u8 {
        self.b()[1] & 0x03
    }
    /// Total length (header + payload).
    pub fn total_len(&self) -> u16 {
        get_u16(self.b(), 2)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        get_u16(self.b(), 4)
    }
    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.b()[6] & 0x40 != 0
    }
    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.b()[6] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        get_u16(self.b(), 6) & 0x1FFF
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[8]
    }
    /// Protocol of the payload (17 = UDP).
    pub fn protocol(&self) -> u8 {
        self.b()[9]
    }
    /// Header checksum as on the wire.
    pub fn checksum(&self) -> u16 {
        get_u16(self.b(), 10)
    }
    /// Source address.
    pub fn src(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }
    /// Destination address.
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.b();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }
    /// True when the header checksum verifies. The caller has checked that the buffer
    /// holds `header_len()` bytes.
    pub fn verify_checksum(&self) -> bool {
        let b = &self.b()[..self.header_len()];
        match b.first_chunk::<20>() {
            Some(h) if b.len() == 20 => checksum20(h) == 0,
            _ => checksum(b) == 0,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets the total length.
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.bm(), 2, v);
    }
    /// Sets the checksum field as given.
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.bm(), 10, v);
    }
    /// Computes and writes the header checksum over `header_len()` bytes.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let b = &self.buffer.as_ref()[..self.header_len()];
        let sum = match b.first_chunk::<20>() {
            Some(h) if b.len() == 20 => checksum20(h),
            _ => checksum(b),
        };
        self.set_checksum(sum);
    }
}

/// The Internet checksum (RFC 1071) of `data`: the ones' complement of the ones'
/// complement sum. Over a header with its checksum in place the result is 0.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// [`checksum`] of a header without options (IHL 5), in straight line: the ones'
/// complement sum does not depend on byte order (RFC 1071 §2), so five native-order
/// 32-bit words are summed, the carries folded, and the result swapped to network order.
#[inline(always)]
pub fn checksum20(h: &[u8; 20]) -> u16 {
    let w = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let sum = w(0) + w(4) + w(8) + w(12) + w(16); // < 5 * 2^32
    let sum = (sum & 0xFFFF_FFFF) + (sum >> 32); // < 2^32 + 5
    let sum = (sum & 0xFFFF) + (sum >> 16); // < 2^17
    let sum = (sum & 0xFFFF) + (sum >> 16); // <= 2^16
    let sum = (sum & 0xFFFF) + (sum >> 16); // <= 0xFFFF
    !(sum as u16).swap_bytes()
}

/// Plain-data IPv4 header. The total length and the checksum are derived by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dscp: u8,
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    pub frag_offset: u16,
    pub ttl: u8,
    pub protocol: u8,
}

impl Default for Ipv4Repr {
    fn default() -> Self {
        Self {
            src: Ipv4Addr::UNSPECIFIED,
            dst: Ipv4Addr::UNSPECIFIED,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: PROTOCOL_UDP,
        }
    }
}

impl Ipv4Repr {
    /// Bytes `emit` writes (no options).
    pub const LEN: usize = 20;

    /// Reads a checked view (options, if any, are skipped).
    pub fn parse<T: AsRef<[u8]>>(v: &Packet<T>) -> Self {
        Self {
            src: v.src(),
            dst: v.dst(),
            dscp: v.dscp(),
            ecn: v.ecn(),
            ident: v.ident(),
            dont_frag: v.dont_frag(),
            more_frags: v.more_frags(),
            frag_offset: v.frag_offset(),
            ttl: v.ttl(),
            protocol: v.protocol(),
        }
    }

    /// Writes a 20-byte header for `payload_len` bytes of payload, with its checksum.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) -> Result<usize, Truncated> {
        let total = u16::try_from(payload_len + Self::LEN).map_err(|_| Truncated)?;
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        b[0] = 0x45;
        b[1] = (self.dscp << 2) | (self.ecn & 3);
        set_u16(b, 2, total);
        set_u16(b, 4, self.ident);
        let flags = (u16::from(self.dont_frag) << 14) | (u16::from(self.more_frags) << 13);
        set_u16(b, 6, flags | (self.frag_offset & 0x1FFF));
        b[8] = self.ttl;
        b[9] = self.protocol;
        b[12..16].copy_from_slice(&self.src.octets());
        b[16..20].copy_from_slice(&self.dst.octets());
        Packet::new_unchecked(b).fill_checksum();
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header of the ConnectX-4 Lx CNP (roce-facts §5.4).
    static CNP_IP: [u8; 20] = [
        0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11,
        0x01, 0x0a, 0x00, 0x12, 0x01,
    ];

    #[test]
    fn deconstruct_real_header() {
        let p = Packet::new_checked(&CNP_IP[..]).unwrap();
        assert_eq!(
            (p.version(), p.header_len(), p.dscp(), p.ecn()),
            (4, 20, 48, 2)
        );
        assert_eq!(
            (p.total_len(), p.ident(), p.ttl(), p.protocol()),
            (60, 0x718c, 64, 17)
        );
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.checksum(), 0x9161);
        assert!(p.verify_checksum());
        assert_eq!(p.src(), Ipv4Addr::new(10, 0, 17, 1));
    }

    #[test]
    fn construct_reproduces_length_and_checksum() {
        let repr = Ipv4Repr::parse(&Packet::new_checked(&CNP_IP[..]).unwrap());
        let mut buf = [0u8; 20];
        repr.emit(&mut buf, 40).unwrap();
        assert_eq!(buf, CNP_IP);
    }

    #[test]
    fn checksum20_equals_the_loop() {
        let mut h = [0u8; 20];
        assert_eq!(checksum20(&h), checksum(&h));
        h = [0xFF; 20];
        assert_eq!(checksum20(&h), checksum(&h));
        let mut x: u32 = 0x1234_5678;
        for _ in 0..10_000 {
            for b in &mut h {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = (x >> 24) as u8 | if x & 0x100 != 0 { 0xF0 } else { 0 };
            }
            assert_eq!(checksum20(&h), checksum(&h), "{h:02x?}");
        }
        assert_eq!(checksum20(&CNP_IP), 0);
    }

    #[test]
    fn oversize_payload_and_short_buffer_fail() {
        let repr = Ipv4Repr::default();
        assert_eq!(repr.emit(&mut [0u8; 20], 65_516), Err(Truncated));
        assert_eq!(repr.emit(&mut [0u8; 19], 0), Err(Truncated));
    }
}
