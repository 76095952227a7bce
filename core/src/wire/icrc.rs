//! The RoCE Invariant CRC (roce-facts §5).
//!
//! Coverage, in order: 8 bytes of 0xFF (the masked IB LRH RoCEv2 does not carry), the IP
//! header with its variant fields set to ones, the UDP header with its checksum set to
//! ones, the BTH with byte 4 (FECN, BECN, resv6) set to ones, then every extended header,
//! the payload and the pad unmasked. The CRC is the standard CRC-32 (zlib's), and goes on
//! the wire least-significant byte first.
//!
//! Only the few header bytes are copied (to apply the masks); the payload is fed to the
//! CRC where it lies, and may be fed in pieces ([`Icrc::update`]), so a datapath can check
//! it while the payload streams past.
//!
//! The CRC engine is `crc32fast`: slice-by-16 tables everywhere, and a PCLMULQDQ
//! (carry-less multiply) path on x86-64 / AArch64 when the target has it: detected at run
//! time with this crate's `std` feature, or fixed at build time by `-C target-feature`.
//!
//! RoCEv1 (GRH over Ethernet, no UDP) is masked by the IPv6 rule (TClass, FlowLabel and
//! HopLmt set to ones). That rule is the analogue the facts sheet names (§1.7) and is
//! **not yet checked against hardware**.

use super::Truncated;

/// Which network header the ICRC coverage starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcrcKind {
    /// RoCEv2 over IPv4: IP header (IHL x 4 bytes) + UDP + BTH.
    Ipv4,
    /// RoCEv2 over IPv6: 40-byte IP header + UDP + BTH.
    Ipv6,
    /// RoCEv1: 40-byte GRH + BTH (no UDP).
    RoceV1,
}

/// Bytes of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The 8 bytes of 0xFF that stand in for the LRH.
const LRH: usize = 8;
/// Bytes copied and hashed together with the LRH stand-in: at least the largest masked
/// prefix (IPv4 with 40 bytes of options + UDP + BTH = 80).
const CHUNK: usize = 128;

/// A streaming ICRC computation.
#[derive(Clone)]
pub struct Icrc {
    hasher: crc32fast::Hasher,
}

impl Icrc {
    /// Starts a computation over `headers`, the bytes from the start of the IP header (or
    /// GRH) up to at least the end of the BTH. The masked prefix (IP + UDP + BTH) is
    /// hashed with its masks applied; any bytes after it in `headers` are hashed as they
    /// are. Fails if `headers` is too short for the prefix.
    pub fn start(kind: IcrcKind, headers: &[u8]) -> Result<Self, Truncated> {
        let prefix = masked_prefix_len(kind, headers)?;
        // One stack copy of the LRH stand-in and the first CHUNK bytes, masked in place,
        // hashed in one call: short frames (ACKs, READ requests) need no other call.
        let mut buf = [0xFFu8; LRH + CHUNK];
        let n = headers.len().min(CHUNK);
        let (head, rest) = headers.split_at(n);
        let m = buf.get_mut(LRH..LRH + n).ok_or(Truncated)?;
        m.copy_from_slice(head);
        let bth = match kind {
            IcrcKind::Ipv4 => {
                m[1] = 0xFF; // TOS: DSCP + ECN
                m[8] = 0xFF; // TTL
                m[10] = 0xFF; // header checksum
                m[11] = 0xFF;
                let udp = prefix - 20;
                m[udp + 6] = 0xFF; // UDP checksum
                m[udp + 7] = 0xFF;
                prefix - 12
            }
            IcrcKind::Ipv6 | IcrcKind::RoceV1 => {
                m[0] |= 0x0F; // traffic class and flow label (the version nibble stays)
                m[1] = 0xFF;
                m[2] = 0xFF;
                m[3] = 0xFF;
                m[7] = 0xFF; // hop limit
                if kind == IcrcKind::Ipv6 {
                    m[46] = 0xFF; // UDP checksum
                    m[47] = 0xFF;
                }
                prefix - 12
            }
        };
        m[bth + 4] = 0xFF; // FECN, BECN, resv6
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&buf[..LRH + n]);
        if !rest.is_empty() {
            hasher.update(rest);
        }
        Ok(Self { hasher })
    }

    /// Feeds the next bytes (extended headers, payload, pad) unmasked.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
    }

    /// The ICRC value. It goes on the wire as `value.to_le_bytes()`.
    #[inline]
    pub fn finish(self) -> u32 {
        self.hasher.finalize()
    }
}

/// Length of the masked prefix (IP [+ UDP] + BTH) for `kind`, reading IHL for IPv4.
fn masked_prefix_len(kind: IcrcKind, headers: &[u8]) -> Result<usize, Truncated> {
    let len = match kind {
        IcrcKind::Ipv4 => {
            let ihl = usize::from(headers.first().ok_or(Truncated)? & 0x0F) * 4;
            if ihl < 20 {
                return Err(Truncated);
            }
            ihl + 8 + 12
        }
        IcrcKind::Ipv6 => 40 + 8 + 12,
        IcrcKind::RoceV1 => 40 + 12,
    };
    if headers.len() < len {
        Err(Truncated)
    } else {
        Ok(len)
    }
}

/// The ICRC of `covered`: the bytes from the start of the IP header (or GRH) up to, not
/// including, the ICRC trailer.
pub fn compute(kind: IcrcKind, covered: &[u8]) -> Result<u32, Truncated> {
    Ok(Icrc::start(kind, covered)?.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> [u8; 256] {
        let mut out = [0u8; 256];
        for (i, pair) in s.as_bytes().chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16).unwrap() as u8;
            out[i] = digit(pair[0]) << 4 | digit(pair[1]);
        }
        out
    }

    /// Checks a complete frame (Ethernet header `l3` bytes long) against its trailer.
    fn check(frame_hex: &str, l3: usize, kind: IcrcKind, expect_wire: [u8; 4]) {
        let buf = hex(frame_hex);
        let end = frame_hex.len() / 2;
        assert_eq!(
            compute(kind, &buf[l3..end]).unwrap().to_le_bytes(),
            expect_wire
        );
    }

    #[test]
    fn lrh_stand_in_matches_rxe_seed() {
        // rxe seeds crc32_le() with 0xDEBB20E3 = the raw register after 8 x 0xFF.
        let mut h = crc32fast::Hasher::new();
        h.update(&[0xFF; LRH]);
        assert_eq!(!h.finalize(), 0xDEBB_20E3);
    }

    #[test]
    fn connectx4_cnp_capture() {
        // roce-facts §5.4: real ConnectX-4 Lx CNP; ICRC 82 fd 00 2a on the wire.
        check(
            "e41d2dab2bc27cfe90643b32080045c2003c718c4000401191610a0011010a001201000012b7002800008100ffff400001180000000000000000000000000000000000000000",
            14,
            IcrcKind::Ipv4,
            [0x82, 0xfd, 0x00, 0x2a],
        );
    }

    #[test]
    fn scapy_uc_send_only_vector() {
        // roce-facts §5.5: scapy asserts 0x78f353f3, which is the trailer read big-endian.
        check(
            "248a07a8fa22248a07a8fa22080045010040047840004011b4d5c0a80007c0a80007c00012b7002caca22460ffff000000d300cf17104630818be28935d90e9a95505401be885e500000",
            14,
            IcrcKind::Ipv4,
            [0x78, 0xf3, 0x53, 0xf3],
        );
    }

    #[test]
    fn facts_ipv6_vector() {
        // roce-facts §5.6: IPv6 RC SEND_ONLY "hello"; ICRC bytes d8 3b d8 4e. The sheet's hex
        // has one '0' too many in the source address (33 digits); it is removed here.
        check(
            "02000000000202000000000186dd6681234500201140fe800000000000000000000000000001fe800000000000000000000000000002c12312b7002000000430ffff000000118000010068656c6c6f000000",
            14,
            IcrcKind::Ipv6,
            [0xd8, 0x3b, 0xd8, 0x4e],
        );
    }

    #[test]
    fn streaming_equals_one_shot() {
        let buf = hex("4502004400004000401126a50a0000010a000002c00012b7003000000a00ffff00000012800abcde00007f000000100000001234000000080001020304050607");
        let covered = &buf[..64];
        let whole = compute(IcrcKind::Ipv4, covered).unwrap();
        let mut s = Icrc::start(IcrcKind::Ipv4, &covered[..40]).unwrap();
        s.update(&covered[40..50]);
        s.update(&covered[50..]);
        assert_eq!(s.finish(), whole);
        // roce-facts §5.6 RDMA_WRITE_ONLY: ICRC a7 5d 0c bb.
        assert_eq!(whole.to_le_bytes(), [0xa7, 0x5d, 0x0c, 0xbb]);
    }

    #[test]
    fn short_input_is_an_error() {
        assert_eq!(compute(IcrcKind::Ipv4, &[0x45; 39]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::Ipv4, &[0x44; 60]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::Ipv6, &[0x60; 59]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::RoceV1, &[]).err(), Some(Truncated));
    }
}
