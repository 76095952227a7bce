//! Typed protocol numbers: 24-bit sequence numbers and queue-pair numbers, and the
//! 32-bit keys. A 24-bit number is never a bare `u32` (style.md, habit 1).
//!
//! Ordering of [`Psn`] and [`Msn`] follows the half-window rule of roce-facts §6.1:
//! `cmp(a, b) = ((a - b) << 8) as i32`, so `a` is after `b` when `(a - b) mod 2^24` lies in
//! `[1, 2^23 - 1]` and before it when it lies in `[2^23, 2^24 - 1]`.

use core::cmp::Ordering;
use core::fmt;

/// Mask of the 24 bits that PSNs, MSNs and QPNs occupy.
pub const MASK24: u32 = 0x00FF_FFFF;

macro_rules! seq24 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            /// The zero value.
            pub const ZERO: Self = Self(0);

            /// Makes a value from the low 24 bits of `v` (higher bits are dropped, as Linux
            /// core does for `sq_psn` / `rq_psn`).
            pub const fn new(v: u32) -> Self {
                Self(v & MASK24)
            }

            /// The 24-bit value.
            pub const fn value(self) -> u32 {
                self.0
            }

            /// `self + n` modulo 2^24.
            #[must_use]
            pub const fn add(self, n: u32) -> Self {
                Self(self.0.wrapping_add(n) & MASK24)
            }

            /// `self - n` modulo 2^24.
            #[must_use]
            pub const fn sub(self, n: u32) -> Self {
                Self(self.0.wrapping_sub(n) & MASK24)
            }

            /// The successor modulo 2^24.
            #[must_use]
            pub const fn next(self) -> Self {
                self.add(1)
            }

            /// Signed distance `self - other` under the half-window rule: positive when
            /// `self` is after `other`, in `[-2^23, 2^23 - 1]`.
            pub const fn diff(self, other: Self) -> i32 {
                (self.0.wrapping_sub(other.0) << 8) as i32 >> 8
            }

            /// Wrap-around comparison (roce-facts §6.1). This is not a total order, which
            /// is why the type implements no `Ord`.
            pub fn cmp_wrapping(self, other: Self) -> Ordering {
                self.diff(other).cmp(&0)
            }

            /// `self` comes strictly before `other` in sequence space.
            pub fn before(self, other: Self) -> bool {
                self.diff(other) < 0
            }

            /// `self` comes strictly after `other` in sequence space.
            pub fn after(self, other: Self) -> bool {
                self.diff(other) > 0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#08x})"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

seq24!(
    /// Packet sequence number (BTH bits 23..0 of bytes 8..11).
    Psn
);
seq24!(
    /// Message sequence number (AETH bytes 1..3).
    Msn
);

/// Queue-pair number: 24 bits (BTH DestQP, DETH SrcQP). QPNs are identifiers, not
/// sequence numbers, so they have no wrap-around ordering.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Qpn(u32);

impl Qpn {
    /// The General Services Interface QP.
    pub const GSI: Self = Self(1);

    /// Makes a QPN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Self(v & MASK24)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }
}

impl fmt::Debug for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Qpn({:#x})", self.0)
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

macro_rules! key32 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#010x})"), self.0)
            }
        }
    };
}

key32!(
    /// Remote key: names a memory region to a remote peer (RETH, AtomicETH, IETH).
    Rkey
);
key32!(
    /// Local key: names a memory region in a local scatter/gather element.
    Lkey
);
key32!(
    /// Queue key of a UD QP (DETH).
    Qkey
);

impl Qkey {
    /// The Q_Key the GSI QP always uses (rxe `GSI_QKEY`).
    pub const GSI: Self = Self(0x8001_0000);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_window_rule_matches_the_facts_sheet() {
        // (a - b) mod 2^24 in [1, 2^23 - 1]: a is after b.
        assert!(Psn::new(1).after(Psn::new(0)));
        assert!(Psn::new(0).after(Psn::new(0xFF_FFFF)));
        assert!(Psn::new(0x7F_FFFF).after(Psn::new(0)));
        // (a - b) mod 2^24 in [2^23, 2^24 - 1]: a is before b.
        assert!(Psn::new(0x80_0000).before(Psn::new(0)));
        assert!(Psn::new(0xFF_FFFF).before(Psn::new(0)));
        assert_eq!(Psn::new(5).cmp_wrapping(Psn::new(5)), Ordering::Equal);
        assert_eq!(Psn::new(0).diff(Psn::new(0xFF_FFFE)), 2);
        assert_eq!(Psn::new(0xFF_FFFE).diff(Psn::new(0)), -2);
    }

    #[test]
    fn arithmetic_wraps_at_24_bits() {
        assert_eq!(Psn::new(0xFF_FFFF).next(), Psn::new(0));
        assert_eq!(Psn::new(0).sub(1), Psn::new(0xFF_FFFF));
        assert_eq!(Psn::new(0x1FF_FFFF).value(), 0xFF_FFFF);
        assert_eq!(Msn::new(0xFF_FFF0).add(0x20), Msn::new(0x10));
    }
}
