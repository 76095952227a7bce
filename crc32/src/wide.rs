//! The AVX-512 VPCLMULQDQ kernel (see the crate's documentation for what it changes).
//!
//! The fold (Gopal et al., "Fast CRC computation for generic polynomials using
//! PCLMULQDQ", Intel 2009, bit-reflected form): a 128-bit stream `(lo, hi)` moves forward
//! by `d` bits, onto data `d` bits later, as `lo * key(d + 32) ^ hi * key(d - 32)`
//! (carry-less products), with `key(n)` the reflected `x^n mod P` shifted left by one.
//! crc32fast's constants are this formula at `d` = 128, 512, 1024 and 2048 (the tests
//! check it).

use core::arch::x86_64::{
    __m128i, __m512i, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32, _mm512_loadu_si512,
    _mm512_maskz_mov_epi64, _mm512_set_epi64, _mm512_storeu_si512, _mm512_ternarylogic_epi64,
    _mm512_xor_si512, _mm512_zextsi128_si512, _mm_add_epi8, _mm_and_si128, _mm_clmulepi64_si128,
    _mm_cvtsi32_si128, _mm_extract_epi32, _mm_loadu_si128, _mm_set1_epi8, _mm_set_epi32,
    _mm_set_epi64x, _mm_setr_epi8, _mm_shuffle_epi8, _mm_srli_si128, _mm_xor_si128,
};

/// The CRC-32 polynomial, not reflected, with its x^32 term.
const POLY: u64 = 0x1_04C1_1DB7;

/// `x^n mod P`, reflected and shifted left by one: the carry-less multiplier that moves a
/// 64-bit half by `n - 32` bits in the reflected domain.
const fn key(n: u32) -> i64 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= POLY;
        }
        i += 1;
    }
    ((r as u32).reverse_bits() as i64) << 1
}

/// The pair of multipliers that moves a 128-bit stream forward by `bits`: (for its low
/// half, for its high half).
const fn fold(bits: u32) -> (i64, i64) {
    (key(bits + 32), key(bits - 32))
}

/// P reflected, with its x^32 term (Barrett's reduction).
const POLY_REFLECTED: i64 = ((POLY as u32).reverse_bits() as i64) << 1 | 1;
/// floor(x^64 / P) reflected (33 bits): Barrett's constant.
const MU: i64 = {
    // Long division of x^64 by P over GF(2).
    let (mut rem, mut q): (u128, u64) = (1 << 64, 0);
    let mut bit = 32;
    while bit >= 0 {
        if rem & (1u128 << (bit + 32)) != 0 {
            rem ^= (POLY as u128) << bit;
            q |= 1 << bit;
        }
        bit -= 1;
    }
    ((q as u32).reverse_bits() as i64) << 1 | (q >> 32) as i64
};

/// One 256-byte round of the main loop: each of the 16 streams onto the data 2,048 bits on.
const ROUND: (i64, i64) = fold(2048);
/// One 16-byte block: the tail's fold.
const BLOCK: (i64, i64) = fold(128);

/// For register `r` of the four, the multipliers of its four lanes (qwords low to high):
/// lane `j` holds the stream at byte `64 r + 16 j` of the last 256-byte round and moves to
/// the last lane's place (byte 240), by `(240 - 64 r - 16 j) * 8` bits. The last lane
/// itself does not move: its multipliers are 0 and it is added as it is.
const fn collapse(r: u32) -> [i64; 8] {
    let mut k = [0i64; 8];
    let mut j = 0;
    while j < 4 {
        let bits = (240 - 64 * r - 16 * j) * 8;
        if bits > 0 {
            let (lo, hi) = fold(bits);
            k[2 * j as usize] = lo;
            k[2 * j as usize + 1] = hi;
        }
        j += 1;
    }
    k
}
const COLLAPSE: [[i64; 8]; 4] = [collapse(0), collapse(1), collapse(2), collapse(3)];

/// Whether this CPU can run the kernel (cached by the standard library after the first
/// look; without `std`, what the build's target features promise).
#[inline]
pub(crate) fn available() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse4.1")
            && std::is_x86_feature_detected!("ssse3")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(
            target_feature = "avx512f",
            target_feature = "vpclmulqdq",
            target_feature = "pclmulqdq",
            target_feature = "sse4.1",
            target_feature = "ssse3"
        ))
    }
}

/// The CRC of `buf` continued from `crc` by the kernel, or `None` if this CPU lacks it or
/// `buf` is shorter than one round.
#[inline]
pub(crate) fn update(crc: u32, buf: &[u8]) -> Option<u32> {
    let (first, rest) = buf.split_first_chunk::<256>()?;
    if !available() {
        return None;
    }
    // SAFETY: `available` checked every feature the kernel enables.
    Some(unsafe { kernel(crc, first, rest, None) })
}

/// [`update`] over `src` that also copies it into `dst` (as long) in the same pass, or
/// `None` (nothing written) if this CPU lacks the kernel, `src` is shorter than one round
/// or the lengths differ.
#[inline]
pub(crate) fn copy_update(crc: u32, src: &[u8], dst: &mut [u8]) -> Option<u32> {
    let (first, rest) = src.split_first_chunk::<256>()?;
    if dst.len() != src.len() || !available() {
        return None;
    }
    // SAFETY: `available` checked every feature the kernel enables.
    Some(unsafe { kernel(crc, first, rest, Some(dst)) })
}

#[inline]
fn zmm(k: &[i64; 8]) -> __m512i {
    // SAFETY: a value-only intrinsic of AVX-512F, which every caller has.
    unsafe { _mm512_set_epi64(k[7], k[6], k[5], k[4], k[3], k[2], k[1], k[0]) }
}

/// Loads `bytes` (64 of them) as a vector.
#[inline(always)]
fn load512(bytes: &[u8; 64]) -> __m512i {
    // SAFETY: 64 readable bytes; the load needs no alignment. AVX-512F is enabled in the
    // only caller, whose body this is inlined into.
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
}

#[inline(always)]
fn load128(bytes: &[u8; 16]) -> __m128i {
    // SAFETY: 16 readable bytes, no alignment needed; SSE2 is baseline on x86-64.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

/// The four 64-byte quarters of a 256-byte round.
#[inline(always)]
fn quarters(round: &[u8; 256]) -> [__m512i; 4] {
    let (a, b) = round.split_at(128);
    let (q0, q1) = a.split_at(64);
    let (q2, q3) = b.split_at(64);
    [q0, q1, q2, q3].map(|q| load512(q.try_into().unwrap_or(&[0; 64])))
}

/// Stores the four quarters of a round at `out[at..at + 256]` (nothing where `out` is
/// shorter).
#[inline(always)]
fn store_round(out: &mut [u8], at: usize, v: &[__m512i; 4]) {
    for (k, q) in v.iter().enumerate() {
        let start = at + 64 * k;
        if let Some(d) = out.get_mut(start..start + 64) {
            // SAFETY: 64 writable bytes; the store needs no alignment. AVX-512F is enabled
            // in the only caller, whose body this is inlined into.
            unsafe { _mm512_storeu_si512(d.as_mut_ptr().cast(), *q) }
        }
    }
}

/// The CRC of `first` then `rest`, continued from `crc`; with `out` (as long as both), the
/// bytes are also copied there as they are loaded: a DMA read into a frame and its ICRC in
/// one pass over the bytes, the fold's multiplies overlapping the loads' misses.
#[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse4.1,ssse3")]
fn kernel(crc: u32, first: &[u8; 256], rest: &[u8], mut out: Option<&mut [u8]>) -> u32 {
    // 16 streams, stream s (register s / 4, lane s % 4) at bytes 16 s.. of each round; the
    // starting state is folded into the first stream's low bits.
    let mut v = quarters(first);
    if let Some(o) = out.as_deref_mut() {
        store_round(o, 0, &v);
    }
    v[0] = _mm512_xor_si512(v[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128(!crc as i32)));
    let round = zmm(&[
        ROUND.0, ROUND.1, ROUND.0, ROUND.1, ROUND.0, ROUND.1, ROUND.0, ROUND.1,
    ]);
    let mut rounds = rest.chunks_exact(256);
    let mut at = 256;
    for r in &mut rounds {
        let next = quarters(r.try_into().unwrap_or(&[0; 256]));
        if let Some(o) = out.as_deref_mut() {
            store_round(o, at, &next);
        }
        at += 256;
        for (acc, data) in v.iter_mut().zip(next) {
            *acc = _mm512_ternarylogic_epi64::<0x96>(
                _mm512_clmulepi64_epi128::<0x00>(*acc, round),
                _mm512_clmulepi64_epi128::<0x11>(*acc, round),
                data,
            );
        }
    }

    // The collapse: every stream moved to the last one's place at once, then all XORed.
    let moved = |r: usize| {
        let k = zmm(&COLLAPSE[r]);
        (
            _mm512_clmulepi64_epi128::<0x00>(v[r], k),
            _mm512_clmulepi64_epi128::<0x11>(v[r], k),
        )
    };
    let (m0, n0) = moved(0);
    let (m1, n1) = moved(1);
    let (m2, n2) = moved(2);
    let (m3, n3) = moved(3);
    let last = _mm512_maskz_mov_epi64(0b1100_0000, v[3]);
    let s = _mm512_ternarylogic_epi64::<0x96>(
        _mm512_ternarylogic_epi64::<0x96>(m0, n0, m1),
        _mm512_ternarylogic_epi64::<0x96>(n1, m2, n2),
        _mm512_ternarylogic_epi64::<0x96>(m3, n3, last),
    );
    let mut x = _mm_xor_si128(
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<0>(s),
            _mm512_extracti32x4_epi32::<1>(s),
        ),
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<2>(s),
            _mm512_extracti32x4_epi32::<3>(s),
        ),
    );

    // Whole 16-byte blocks left, one by one.
    let block = _mm_set_epi64x(BLOCK.1, BLOCK.0);
    let mut tail = rounds.remainder();
    if let Some(d) = out.and_then(|o| o.get_mut(at..)) {
        // The last 0..=255 bytes copied as they are (less than a round: no gain in folding
        // them into the stores).
        if d.len() == tail.len() {
            d.copy_from_slice(tail);
        }
    }
    while let Some((b, after)) = tail.split_first_chunk::<16>() {
        x = _mm_xor_si128(
            _mm_xor_si128(
                _mm_clmulepi64_si128::<0x00>(x, block),
                _mm_clmulepi64_si128::<0x11>(x, block),
            ),
            load128(b),
        );
        tail = after;
    }

    // The last 1..=15 bytes (crc32fast's method): the accumulator moves up by `n` bytes
    // to take them, and its top `n` bytes, shifted out, fold onto it by 128 bits.
    let n = tail.len();
    if n > 0 {
        let seq = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let shl = _mm_add_epi8(seq, _mm_set1_epi8(n as i8 - 16));
        let shr = _mm_xor_si128(shl, _mm_set1_epi8(-128));
        let overflow = _mm_shuffle_epi8(x, shl);
        let part = partial(tail);
        let part = _mm_set_epi64x((part >> 64) as i64, part as i64);
        x = _mm_xor_si128(_mm_shuffle_epi8(x, shr), _mm_shuffle_epi8(part, shl));
        x = _mm_xor_si128(
            x,
            _mm_xor_si128(
                _mm_clmulepi64_si128::<0x00>(overflow, block),
                _mm_clmulepi64_si128::<0x11>(overflow, block),
            ),
        );
    }

    // 128 bits to 64 (by x^64 mod P), then Barrett's reduction to 32, bit-reflected, as
    // crc32fast (and the paper's section 4) does.
    let low32 = _mm_set_epi32(0, 0, 0, -1);
    let x = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x10>(x, block),
        _mm_srli_si128::<8>(x),
    );
    let x = _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(_mm_and_si128(x, low32), _mm_set_epi64x(0, key(64))),
        _mm_srli_si128::<4>(x),
    );
    let pu = _mm_set_epi64x(MU, POLY_REFLECTED);
    let t1 = _mm_clmulepi64_si128::<0x10>(_mm_and_si128(x, low32), pu);
    let t2 = _mm_clmulepi64_si128::<0x00>(_mm_and_si128(t1, low32), pu);
    !(_mm_extract_epi32::<1>(_mm_xor_si128(x, t2)) as u32)
}

/// 1..=15 bytes as a little-endian number, read by overlapping word loads (a copy into a
/// zeroed buffer would make the vector load wait for narrow stores).
#[inline(always)]
fn partial(data: &[u8]) -> u128 {
    let n = data.len();
    if let (Some(lo), Some(hi)) = (data.first_chunk::<8>(), data.last_chunk::<8>()) {
        u128::from(u64::from_le_bytes(*lo)) | u128::from(u64::from_le_bytes(*hi)) << (8 * (n - 8))
    } else if let (Some(lo), Some(hi)) = (data.first_chunk::<4>(), data.last_chunk::<4>()) {
        u128::from(u32::from_le_bytes(*lo)) | u128::from(u32::from_le_bytes(*hi)) << (8 * (n - 4))
    } else {
        let byte = |i: usize| u128::from(data.get(i).copied().unwrap_or(0)) << (8 * i);
        byte(0) | byte(n / 2) | byte(n.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_crc32fasts_constants() {
        // crc32fast 1.5's K3/K4 (128 bits), K1/K2 (512), and its AVX2 (1024) and AVX-512
        // (2048) round constants.
        assert_eq!(fold(128), (0x1751997d0, 0x0ccaa009e));
        assert_eq!(fold(512), (0x154442bd4, 0x1c6e41596));
        assert_eq!(fold(1024), (0x1e88ef372, 0x14a7fe880));
        assert_eq!(fold(2048), (0x11542778a, 0x1322d1430));
        // K5, P_X and U_PRIME of its Barrett reduction.
        assert_eq!(key(64), 0x163cd6124);
        assert_eq!(POLY_REFLECTED, 0x1DB710641);
        assert_eq!(MU, 0x1F7011641);
    }

    #[test]
    fn the_kernel_runs_here_when_the_cpu_has_it() {
        let buf = [7u8; 300];
        assert_eq!(update(0, &buf).is_some(), available());
        assert_eq!(update(0, &buf[..255]), None);
    }
}
