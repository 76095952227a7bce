//! The wire layer: every header of a RoCE frame as a checked view plus a plain-data
//! `Repr` (smoltcp's pattern, see `../shared/docs/style.md`), the opcode table, the ICRC,
//! and whole-frame [`parse`] / [`emit`].
//!
//! Contract of every view type (`ethernet::Frame`, `bth::Header`, ...):
//! * `new_unchecked` wraps a buffer without looking at it; accessors may then panic on a
//!   short buffer.
//! * `new_checked` (= `new_unchecked` + `check_len`) fails with [`Truncated`] when the
//!   buffer is shorter than the header; after it succeeds, **no accessor panics**.
//! * Every `Repr::emit` writes exactly `Repr::LEN` (or `buffer_len()`) bytes and never
//!   panics into a buffer of at least that size; shorter buffers are rejected.
//!
//! Whole frames follow the same idea one level up: [`parse`] checks a frame completely
//! (every check and its order are listed on it) but decodes nothing it does not need to
//! check. The [`Packet`] it returns borrows the frame and records where each part starts
//! ([`Layout`]) and the opcode's table row; each header is decoded from the frame only
//! when asked for (`pkt.bth()`, `pkt.l3()`, `pkt.reth()`, ..., with direct getters such
//! as `pkt.psn()` for the engine's per-packet fields), or all at once as the plain-data
//! [`Headers`] (`pkt.headers()`), which is also what [`emit`] takes. A `Packet` exists
//! only after `parse` succeeded, so **none of its accessors panics**.
//!
//! All multi-byte fields are big-endian (roce-facts §conventions); the single exception is
//! the ICRC trailer, which goes on the wire least-significant byte first (§5.2).

/// A header view was built over a buffer too short for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

impl core::fmt::Display for Truncated {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("buffer too short for the header")
    }
}

/// Defines a fixed-length header view: the struct, `new_unchecked`, `new_checked`,
/// `check_len`, `into_inner` and `LEN`. Field accessors are written per header.
macro_rules! fixed_view {
    ($(#[$meta:meta])* $name:ident, $len:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Length of the header in bytes.
            pub const LEN: usize = $len;

            /// Wraps `buffer` without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps `buffer`, failing if it is shorter than the header.
            pub fn new_checked(buffer: T) -> Result<Self, $crate::wire::Truncated> {
                let view = Self::new_unchecked(buffer);
                view.check_len()?;
                Ok(view)
            }

            /// Fails if the buffer is shorter than the header.
            pub fn check_len(&self) -> Result<(), $crate::wire::Truncated> {
                if self.buffer.as_ref().len() < Self::LEN {
                    Err($crate::wire::Truncated)
                } else {
                    Ok(())
                }
            }

            /// The wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

pub(crate) mod field;

pub mod aeth;
pub mod atomic;
pub mod bth;
pub mod cm;
pub mod cnp;
pub mod deth;
pub mod ethernet;
pub mod frame;
pub mod icrc;
pub mod imm;
pub mod ipv4;
pub mod ipv6;
pub mod lldp;
pub mod mad;
pub mod opcode;
pub mod pfc;
pub mod reth;
pub mod udp;

pub use frame::{
    emit, emit_with, parse, parse_unverified, EmitError, Error, ExtHeaders, HeaderTemplate,
    Headers, L3Repr, Layout, Packet, RxMeta,
};
pub use opcode::{ExtHeader, Opcode, OpcodeInfo, Position, Transport};
