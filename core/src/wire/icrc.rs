//! The RoCE Invariant CRC (roce-facts §5).
//!
//! Coverage, in order: 8 bytes of 0xFF (the masked IB LRH RoCEv2 does not carry), the IP
//! header with its variant fields set to ones, the UDP header with its checksum set to
//! ones, the BTH with byte 4 (FECN, BECN, resv6) set to ones, then every extended header,
//! the payload and the pad unmasked. The CRC is the standard CRC-32 (zlib's), and goes on
//! the wire least-significant byte first.
//!
//! Nothing is copied: the masks are applied by correcting the CRC's starting state (a
//! few table lookups; the derivation is in the source), and everything is fed to the CRC where it lies, in one
//! call for a whole frame, or in pieces ([`Icrc::update`]) so a datapath can check the
//! payload while it streams past. IPv4 headers with options take a slower path (a
//! masked copy of the prefix).
//!
//! The CRC engine is `roce-crc32`: crc32fast (slice-by-16 tables everywhere, and a
//! PCLMULQDQ (carry-less multiply) path on x86-64 / AArch64 when the target has it:
//! detected at run time with this crate's `std` feature, or fixed at build time by `-C
//! target-feature`), with its own AVX-512 kernel for frames of 1 KiB and more, whose
//! cheaper end saves about a third of a 4 KiB frame's ICRC.
//!
//! RoCEv1 (GRH over Ethernet, no UDP) is masked by the IPv6 rule (TClass, FlowLabel and
//! HopLmt set to ones). That rule is the analogue the facts sheet names (§1.7) and is
//! **not yet checked against hardware**.

use super::Truncated;
use crate::memory::{Dma, DmaError};

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

/// The CRC-32 of the LRH stand-in, 8 bytes of 0xFF: every computation starts from it
/// instead of hashing them.
const LRH_CRC: u32 = 0x2144_DF1C;

// The masks without a copy. The CRC register after bytes m_0..m_{n-1} from register r is
// A^n r ^ sum_k A^(n-k) e(m_k), where e(b) puts byte b in the register's low byte and A
// is one zero-byte step, r -> (r >> 8) ^ TABLE[r & 0xFF] (linear and invertible). So
// hashing a masked prefix (prefix ^ delta) from register r gives the same register as
// hashing the prefix as it is from r ^ C(delta), where C(delta) = sum_p A^-p e(delta_p)
// over the masked positions p. The ICRC is then one CRC call over the covered
// bytes where they lie, started from the LRH state corrected by C: a few table lookups
// instead of a masked copy and a second CRC call. (The CRC's state is the complement
// of the register, and complementing commutes with the XOR of C.)

/// The reflected CRC-32 byte table (polynomial 0xEDB88320).
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `TOP[t]` = the byte `i` whose `TABLE[i]` has top byte `t` (a permutation).
const TOP: [u8; 256] = {
    let mut inv = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        inv[(TABLE[i] >> 24) as usize] = i as u8;
        i += 1;
    }
    inv
};

/// A^-1: the register one zero-byte step back. `r >> 8` has a zero top byte, so the top
/// byte of `A(r)` names `r & 0xFF`.
const fn unstep(r: u32) -> u32 {
    let i = TOP[(r >> 24) as usize];
    ((r ^ TABLE[i as usize]) << 8) | i as u32
}

/// The masked positions, beyond position 0, of the prefixes with a fixed layout: IPv4
/// without options (TOS, TTL, checksum; UDP checksum; BTH byte 4), IPv6 (traffic class
/// and flow label, hop limit; UDP checksum; BTH byte 4) and the RoCEv1 GRH (as IPv6,
/// without UDP). Position 0 (IPv6 and GRH: the low nibble, traffic class and flow label)
/// needs no table: A^0 is the identity.
const POSITIONS: [usize; 14] = [1, 2, 3, 7, 8, 10, 11, 26, 27, 32, 44, 46, 47, 52];
/// Rows of [`SHIFT_BACK`] per kind: (position, row).
const IPV4_SPOTS: [(usize, usize); 7] =
    [(1, 0), (8, 4), (10, 5), (11, 6), (26, 7), (27, 8), (32, 9)];
const IPV6_SPOTS: [(usize, usize); 7] =
    [(1, 0), (2, 1), (3, 2), (7, 3), (46, 11), (47, 12), (52, 13)];
const ROCEV1_SPOTS: [(usize, usize); 5] = [(1, 0), (2, 1), (3, 2), (7, 3), (44, 10)];

/// `SHIFT_BACK[row][d]` = A^-p e(d) for `p = POSITIONS[row]` (14 KiB).
static SHIFT_BACK: [[u32; 256]; POSITIONS.len()] = {
    let mut t = [[0u32; 256]; POSITIONS.len()];
    let mut d = 0;
    while d < 256 {
        let mut r = d as u32;
        let mut p = 0;
        let mut row = 0;
        while row < POSITIONS.len() {
            while p < POSITIONS[row] {
                r = unstep(r);
                p += 1;
            }
            t[row][d] = r;
            row += 1;
        }
        d += 1;
    }
    t
};

/// C(delta) over `spots` of `prefix`, each byte masked to ones (delta = !byte).
#[inline(always)]
fn correction<const N: usize>(prefix: &[u8], spots: &[(usize, usize); N]) -> u32 {
    let mut c = 0;
    for &(p, row) in spots {
        c ^= spot(prefix, p, row);
    }
    c
}

/// [`correction`] over [`IPV4_SPOTS`] written out: every frame of an IPv4 QP takes it,
/// and whether the loop was unrolled was the inliner's choice in each caller (~28
/// instructions more a frame built when it was not, with no change to this code).
#[inline(always)]
fn correction_ipv4(prefix: &[u8]) -> u32 {
    let s = |i: usize| {
        IPV4_SPOTS
            .get(i)
            .map_or(0, |&(p, row)| spot(prefix, p, row))
    };
    s(0) ^ s(1) ^ s(2) ^ s(3) ^ s(4) ^ s(5) ^ s(6)
}

/// One spot's C(delta): byte `p` of `prefix` masked to ones, row `row`.
#[inline(always)]
fn spot(prefix: &[u8], p: usize, row: usize) -> u32 {
    match (prefix.get(p), SHIFT_BACK.get(row)) {
        (Some(&b), Some(t)) => t[usize::from(!b)],
        _ => 0,
    }
}

/// A streaming ICRC computation.
#[derive(Clone)]
pub struct Icrc {
    hasher: roce_crc32::Hasher,
}

impl Icrc {
    /// Starts a computation over `headers`, the bytes from the start of the IP header (or
    /// GRH) up to at least the end of the BTH. The masked prefix (IP + UDP + BTH) is
    /// hashed with its masks applied; any bytes after it in `headers` are hashed as they
    /// are. Fails if `headers` is too short for the prefix.
    #[inline(always)]
    pub fn start(kind: IcrcKind, headers: &[u8]) -> Result<Self, Truncated> {
        let prefix = masked_prefix_len(kind, headers)?;
        let c = match kind {
            IcrcKind::Ipv4 if prefix == 20 + 8 + 12 => correction_ipv4(headers),
            IcrcKind::Ipv4 => {
                let mut hasher = roce_crc32::Hasher::new_with_initial(LRH_CRC);
                start_ipv4_options(&mut hasher, headers, prefix);
                return Ok(Self { hasher });
            }
            IcrcKind::Ipv6 | IcrcKind::RoceV1 => {
                let nibble = u32::from(!headers[0] & 0x0F); // position 0: A^0 e(delta)
                nibble
                    ^ if kind == IcrcKind::Ipv6 {
                        correction(headers, &IPV6_SPOTS)
                    } else {
                        correction(headers, &ROCEV1_SPOTS)
                    }
            }
        };
        let mut hasher = roce_crc32::Hasher::new_with_initial(LRH_CRC ^ c);
        hasher.update(headers);
        Ok(Self { hasher })
    }

    /// Feeds the next bytes (extended headers, payload, pad) unmasked.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
    }

    /// Reads `buf.len()` bytes at `addr` through `dma` into `buf` (a frame's payload) and
    /// feeds them: one pass over the bytes where the DMA can ([`Dma::read_crc`]). On a
    /// fault the computation is left where it was.
    #[inline]
    pub fn read(&mut self, dma: &mut dyn Dma, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let crc = dma.read_crc(addr, buf, self.hasher.finalize())?;
        self.hasher = roce_crc32::Hasher::new_with_initial(crc);
        Ok(())
    }

    /// Reads `buf.len()` bytes at `addr` through `dma` into `buf`, feeding them to
    /// `icrc` when one is given ([`Icrc::read`]), else a plain read: the one step of
    /// every payload gather whose frame may hash as it reads.
    #[inline]
    pub fn read_opt(
        icrc: Option<&mut Self>,
        dma: &mut dyn Dma,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), DmaError> {
        match icrc {
            Some(c) => c.read(dma, addr, buf),
            None => dma.read(addr, buf),
        }
    }

    /// The ICRC value. It goes on the wire as `value.to_le_bytes()`.
    #[inline]
    pub fn finish(self) -> u32 {
        self.hasher.finalize()
    }
}

/// [`Icrc::start`] for IPv4 with options (IHL > 5): the masks placed byte by byte in a
/// copy of the prefix. `prefix` (at most 80) is checked against `headers`.
#[cold]
fn start_ipv4_options(hasher: &mut roce_crc32::Hasher, headers: &[u8], prefix: usize) {
    let mut buf = [0u8; 80];
    let (head, rest) = headers.split_at(prefix);
    let m = &mut buf[..prefix];
    m.copy_from_slice(head);
    m[1] = 0xFF; // TOS: DSCP + ECN
    m[8] = 0xFF; // TTL
    m[10] = 0xFF; // header checksum
    m[11] = 0xFF;
    let udp = prefix - 20;
    m[udp + 6] = 0xFF; // UDP checksum
    m[udp + 7] = 0xFF;
    m[prefix - 12 + 4] = 0xFF; // BTH: FECN, BECN, resv6
    hasher.update(m);
    hasher.update(rest);
}

/// Length of the masked prefix (IP [+ UDP] + BTH) for `kind`, reading IHL for IPv4.
#[inline]
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
#[inline]
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
        h.update(&[0xFF; 8]);
        assert_eq!(!h.finalize(), 0xDEBB_20E3);
        assert_eq!(crc32fast::hash(&[0xFF; 8]), LRH_CRC);
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
    fn unstep_inverts_a_zero_byte_step() {
        for r in [
            0u32,
            1,
            0xFF,
            0x8000_0000,
            0xDEAD_BEEF,
            0x1234_5678,
            u32::MAX,
        ] {
            let stepped = (r >> 8) ^ TABLE[(r & 0xFF) as usize];
            assert_eq!(unstep(stepped), r);
        }
    }

    /// The masks applied to a copy, byte by byte, as roce-facts §5.3 states them.
    fn reference(kind: IcrcKind, covered: &[u8]) -> u32 {
        let mut m = covered.to_vec();
        let bth = match kind {
            IcrcKind::Ipv4 => {
                let ihl = usize::from(m[0] & 0x0F) * 4;
                for i in [1, 8, 10, 11, ihl + 6, ihl + 7] {
                    m[i] = 0xFF;
                }
                ihl + 8
            }
            IcrcKind::Ipv6 | IcrcKind::RoceV1 => {
                m[0] |= 0x0F;
                for i in [1, 2, 3, 7] {
                    m[i] = 0xFF;
                }
                if kind == IcrcKind::Ipv6 {
                    m[46] = 0xFF;
                    m[47] = 0xFF;
                    48
                } else {
                    40
                }
            }
        };
        m[bth + 4] = 0xFF;
        let mut h = crc32fast::Hasher::new();
        h.update(&[0xFF; 8]);
        h.update(&m);
        h.finalize()
    }

    #[test]
    fn masks_by_correction_equal_masks_on_a_copy() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        let mut buf = [0u8; 300];
        for round in 0..3000 {
            buf.iter_mut().for_each(|b| *b = next());
            let (kind, prefix) = match round % 4 {
                0 => (IcrcKind::Ipv4, 40),
                1 => {
                    // IPv4 with options: IHL 6..15.
                    let ihl = 6 + usize::from(next() % 10);
                    buf[0] = 0x40 | ihl as u8;
                    (IcrcKind::Ipv4, ihl * 4 + 20)
                }
                2 => (IcrcKind::Ipv6, 60),
                _ => (IcrcKind::RoceV1, 52),
            };
            if round % 4 == 0 {
                buf[0] = 0x45;
            }
            let len = prefix + usize::from(next()) % (300 - prefix);
            let covered = &buf[..len];
            assert_eq!(
                compute(kind, covered),
                Ok(reference(kind, covered)),
                "{kind:?} {len}"
            );
        }
    }

    #[test]
    fn short_input_is_an_error() {
        assert_eq!(compute(IcrcKind::Ipv4, &[0x45; 39]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::Ipv4, &[0x44; 60]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::Ipv6, &[0x60; 59]).err(), Some(Truncated));
        assert_eq!(compute(IcrcKind::RoceV1, &[]).err(), Some(Truncated));
    }
}
