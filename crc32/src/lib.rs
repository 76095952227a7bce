#![no_std]
//! CRC-32 (zlib's: reflected polynomial 0xEDB88320, initial and final complement), the
//! CRC the RoCE ICRC is made of.
//!
//! Everything goes to `crc32fast` except inputs of at least [`MIN_WIDE`] bytes on an
//! x86-64 CPU with AVX-512F and VPCLMULQDQ, which take the kernel here. Its main loop is
//! crc32fast's own (16 streams of 128 bits in four 512-bit registers, folded 256 bytes at
//! a time); what differs is the end. crc32fast collapses the 16 streams by 15 dependent
//! 128-bit folds, about 60 ns per call on this project's machine, half the time of a 4 KiB
//! frame's ICRC. Here every stream is folded in one step to the position of the last one,
//! each by its own distance (a per-lane constant), and the 16 results are XORed: two
//! carry-less multiplies deep instead of 30 (the tree collapse of ISA-L's by-16 kernels).
//! Its tail and final reduction are crc32fast's, inline.
//!
//! This crate holds the project's only SIMD `unsafe` (unaligned loads); `roce-core`
//! forbids `unsafe` and takes the CRC from here.

#[cfg(all(feature = "std", target_arch = "x86_64"))]
extern crate std;

#[cfg(target_arch = "x86_64")]
mod wide;

/// Inputs shorter than this go to crc32fast: the gain is the collapse, paid once per
/// call, against a setup that wants at least a few 256-byte rounds.
pub const MIN_WIDE: usize = 1024;

/// CRC-32 of `buf` continued from `crc` (a finished CRC value, 0 for a new computation),
/// as `crc32fast::Hasher::new_with_initial(crc)` then `update(buf)` then `finalize()`.
#[inline]
pub fn update(crc: u32, buf: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if buf.len() >= MIN_WIDE {
        if let Some(crc) = wide::update(crc, buf) {
            return crc;
        }
    }
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(buf);
    h.finalize()
}

/// Copies `src` into `dst` and returns [`update`]`(crc, src)`: on a CPU with the kernel
/// and for inputs of at least [`MIN_WIDE`] bytes in one pass over the bytes (each 64-byte
/// piece stored as it is loaded for the fold), otherwise a copy then `update`. `dst`
/// should be as long as `src`; if not, only their common length is copied and hashed.
#[inline]
pub fn copy_update(crc: u32, src: &[u8], dst: &mut [u8]) -> u32 {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    #[cfg(target_arch = "x86_64")]
    if n >= MIN_WIDE {
        if let Some(crc) = wide::copy_update(crc, src, dst) {
            return crc;
        }
    }
    dst.copy_from_slice(src);
    update(crc, dst)
}

/// Whether [`copy_update`] copies and hashes inputs of [`MIN_WIDE`] bytes and more in one
/// pass on this CPU (it has the AVX-512 kernel).
#[inline]
pub fn copy_update_in_one_pass() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        wide::available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A CRC-32 computation fed in pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hasher {
    crc: u32,
}

impl Hasher {
    /// Continues from `crc`, a finished CRC value (0 starts afresh).
    #[inline]
    pub const fn new_with_initial(crc: u32) -> Self {
        Self { crc }
    }

    /// Feeds the next bytes.
    #[inline]
    pub fn update(&mut self, buf: &[u8]) {
        self.crc = update(self.crc, buf);
    }

    /// The CRC of everything fed.
    #[inline]
    pub const fn finalize(self) -> u32 {
        self.crc
    }
}

/// CRC-32 of `buf`.
#[inline]
pub fn hash(buf: &[u8]) -> u32 {
    update(0, buf)
}
