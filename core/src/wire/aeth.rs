//! ACK Extended Transport Header, 4 bytes (roce-facts §4.2): a typed syndrome and the
//! 24-bit MSN.

use super::field::{get_u24, set_u24};
use super::Truncated;
use crate::num::Msn;

/// Number of credits each ACK credit code advertises (`credit_table` of rdmavt/qib);
/// code 31 means "invalid / unlimited".
const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR NAK timer codes in microseconds (`enum ib_rnr_timeout`; code 0 is the longest).
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// A 5-bit ACK credit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditCode(u8);

impl CreditCode {
    /// "Invalid / unlimited" (`AETH_ACK_UNLIMITED`), what rxe always sends.
    pub const UNLIMITED: Self = Self(0x1F);

    /// The code from its low 5 bits.
    pub const fn new(code: u8) -> Self {
        Self(code & 0x1F)
    }
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }
    /// Credits advertised, or `None` for code 31 (invalid / unlimited).
    pub fn credits(self) -> Option<u32> {
        CREDITS.get(usize::from(self.0)).copied()
    }
}

/// A 5-bit RNR NAK timer code: how long the requester waits before retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RnrTimer(u8);

impl RnrTimer {
    /// The code from its low 5 bits.
    pub const fn new(code: u8) -> Self {
        Self(code & 0x1F)
    }
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }
    /// The delay in nanoseconds (roce-facts §4.2 table).
    pub const fn nanos(self) -> u64 {
        RNR_TIMER_US[(self.0 & 0x1F) as usize] as u64 * 1000
    }
}

/// NAK codes (syndrome type 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0x60: PSN sequence error.
    PsnSequenceError,
    /// 0x61: invalid request.
    InvalidRequest,
    /// 0x62: remote access error.
    RemoteAccessError,
    /// 0x63: remote operational error.
    RemoteOperationalError,
    /// 0x64: invalid RD request (RD only).
    InvalidRdRequest,
    /// 0x65..0x7F: reserved; the 5-bit value is kept.
    Reserved(u8),
}

/// The AETH syndrome byte, typed (bit 7 reserved, bits 6..5 type, bits 4..0 value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Type 00: positive acknowledgement with a credit code.
    Ack(CreditCode),
    /// Type 01: receiver not ready, retry after the timer.
    RnrNak(RnrTimer),
    /// Type 11: negative acknowledgement.
    Nak(NakCode),
    /// Type 10, or bit 7 set: reserved; the whole byte is kept so it round-trips.
    Reserved(u8),
}

impl Syndrome {
    /// An ACK with unlimited credits, as rxe sends.
    pub const ACK: Self = Self::Ack(CreditCode::UNLIMITED);

    /// Decodes the syndrome byte.
    pub const fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 {
            return Self::Reserved(b);
        }
        let v = b & 0x1F;
        match (b >> 5) & 3 {
            0 => Self::Ack(CreditCode(v)),
            1 => Self::RnrNak(RnrTimer(v)),
            3 => Self::Nak(match v {
                0 => NakCode::PsnSequenceError,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccessError,
                3 => NakCode::RemoteOperationalError,
                4 => NakCode::InvalidRdRequest,
                _ => NakCode::Reserved(v),
            }),
            _ => Self::Reserved(b),
        }
    }

    /// Encodes the syndrome byte.
    pub const fn to_byte(self) -> u8 {
        match self {
            Self::Ack(c) => c.0,
            Self::RnrNak(t) => 0x20 | t.0,
            Self::Nak(n) => {
                0x60 | match n {
                    NakCode::PsnSequenceError => 0,
                    NakCode::InvalidRequest => 1,
                    NakCode::RemoteAccessError => 2,
                    NakCode::RemoteOperationalError => 3,
                    NakCode::InvalidRdRequest => 4,
                    NakCode::Reserved(v) => v & 0x1F,
                }
            }
            Self::Reserved(b) => b,
        }
    }
}

fixed_view!(
    /// View of the AETH.
    Header,
    4
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The syndrome.
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.buffer.as_ref()[0])
    }
    /// Message sequence number.
    pub fn msn(&self) -> Msn {
        Msn::new(get_u24(self.buffer.as_ref(), 1))
    }
}

/// Plain-data AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    pub syndrome: Syndrome,
    pub msn: Msn,
}

impl AethRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 4;

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            syndrome: v.syndrome(),
            msn: v.msn(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        b[0] = self.syndrome.to_byte();
        set_u24(b, 1, self.msn.value());
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b, "{b:#x}");
        }
    }

    #[test]
    fn syndromes_decode_as_the_facts_sheet_says() {
        assert_eq!(Syndrome::from_byte(0x1F), Syndrome::ACK);
        assert_eq!(Syndrome::from_byte(0x06), Syndrome::Ack(CreditCode::new(6)));
        assert_eq!(CreditCode::new(6).credits(), Some(8));
        assert_eq!(CreditCode::new(30).credits(), Some(32768));
        assert_eq!(CreditCode::UNLIMITED.credits(), None);
        assert_eq!(
            Syndrome::from_byte(0x2E),
            Syndrome::RnrNak(RnrTimer::new(14))
        );
        assert_eq!(RnrTimer::new(14).nanos(), 1_280_000);
        assert_eq!(RnrTimer::new(0).nanos(), 655_360_000);
        assert_eq!(RnrTimer::new(1).nanos(), 10_000);
        assert_eq!(
            Syndrome::from_byte(0x60),
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            Syndrome::from_byte(0x63),
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            Syndrome::from_byte(0x64),
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(Syndrome::from_byte(0x45), Syndrome::Reserved(0x45));
    }

    #[test]
    fn ack_from_facts_example() {
        // roce-facts §5.6 ACK: AETH 0x1F, MSN 1.
        let raw = [0x1f, 0, 0, 1];
        let a = AethRepr::parse(&Header::new_checked(&raw[..]).unwrap());
        assert_eq!(
            a,
            AethRepr {
                syndrome: Syndrome::ACK,
                msn: Msn::new(1)
            }
        );
    }
}
