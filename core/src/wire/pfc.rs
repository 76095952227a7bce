//! IEEE 802.1Qbb priority flow control (PFC) pause frames (roce-facts §8): EtherType
//! 0x8808, opcode 0x0101, a class-enable vector and eight pause times in quanta of 512
//! bit times, padded to a 60-byte frame (64 with the FCS).

use super::ethernet::{EthernetRepr, Frame, MacAddr, ETHERTYPE_MAC_CONTROL};
use super::field::{get_u16, set_u16};
use super::Truncated;

/// Destination MAC of MAC Control frames.
pub const PFC_DST: MacAddr = MacAddr([0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
/// MAC Control opcode of class-based flow control.
pub const OPCODE_PFC: u16 = 0x0101;
/// Length of a PFC frame without the FCS.
pub const FRAME_LEN: usize = 60;
/// Bit times per pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

fixed_view!(
    /// View of the MAC Control payload of a PFC frame (after the Ethernet header).
    Pause,
    20
);

impl<T: AsRef<[u8]>> Pause<T> {
    /// MAC Control opcode (0x0101 for PFC).
    pub fn opcode(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 0)
    }
    /// The 16-bit priority-enable vector (the high byte must be 0).
    pub fn enable_vector(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 2)
    }
    /// Pause time of priority `prio` (0..7) in quanta.
    pub fn quanta(&self, prio: usize) -> u16 {
        get_u16(self.buffer.as_ref(), 4 + 2 * (prio & 7))
    }
}

/// Plain-data PFC request: which priorities it addresses and their pause times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PfcRepr {
    /// Bit n enables priority n.
    pub enable: u8,
    /// Pause time per priority in quanta; 0 on an enabled priority means resume (XON).
    pub quanta: [u16; 8],
}

/// Why a frame is not a valid PFC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PfcError {
    Truncated,
    NotMacControl,
    NotPfcOpcode(u16),
    /// The high byte of the enable vector must be zero (Wireshark `packet-macctrl.c`).
    ReservedVectorBits(u16),
}

impl PfcRepr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Pause<T>) -> Result<Self, PfcError> {
        if v.opcode() != OPCODE_PFC {
            return Err(PfcError::NotPfcOpcode(v.opcode()));
        }
        let vector = v.enable_vector();
        if vector > 0xFF {
            return Err(PfcError::ReservedVectorBits(vector));
        }
        let mut quanta = [0u16; 8];
        for (p, q) in quanta.iter_mut().enumerate() {
            *q = v.quanta(p);
        }
        Ok(Self {
            enable: vector as u8,
            quanta,
        })
    }

    /// Parses a whole Ethernet frame (untagged, as PFC frames are sent); returns the
    /// sender's MAC and the request.
    pub fn parse_frame(frame: &[u8]) -> Result<(MacAddr, Self), PfcError> {
        let eth = Frame::new_checked(frame).map_err(|_| PfcError::Truncated)?;
        if eth.ethertype() != ETHERTYPE_MAC_CONTROL {
            return Err(PfcError::NotMacControl);
        }
        let body = frame.get(EthernetRepr::LEN..).ok_or(PfcError::Truncated)?;
        let pause = Pause::new_checked(body).map_err(|_| PfcError::Truncated)?;
        Ok((eth.src(), Self::parse(&pause)?))
    }

    /// Writes a complete 60-byte PFC frame from `src` into `buf`.
    pub fn emit_frame(&self, src: MacAddr, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..FRAME_LEN).ok_or(Truncated)?;
        EthernetRepr {
            dst: PFC_DST,
            src,
            ethertype: ETHERTYPE_MAC_CONTROL,
        }
        .emit(b)?;
        set_u16(b, 14, OPCODE_PFC);
        set_u16(b, 16, u16::from(self.enable));
        for (p, q) in self.quanta.iter().enumerate() {
            set_u16(b, 18 + 2 * p, *q);
        }
        b[34..].fill(0);
        Ok(FRAME_LEN)
    }
}

/// Duration of `quanta` pause quanta on a link of `link_bps` bits per second, in
/// nanoseconds (rounded up). 65535 quanta at 100 Gb/s are about 335.5 us (roce-facts §8).
pub fn quanta_to_nanos(quanta: u16, link_bps: u64) -> u64 {
    if link_bps == 0 {
        return u64::MAX;
    }
    let bits = u64::from(quanta) * BITS_PER_QUANTUM;
    (bits * 1_000_000_000).div_ceil(link_bps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout_matches_the_facts_table() {
        let repr = PfcRepr {
            enable: 0b1000_1000,
            quanta: [0, 0, 0, 0xFFFF, 0, 0, 0, 7],
        };
        let mut buf = [0xEEu8; 64];
        assert_eq!(
            repr.emit_frame(MacAddr([2, 0, 0, 0, 0, 9]), &mut buf),
            Ok(60)
        );
        assert_eq!(buf[0..6], [0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
        assert_eq!(buf[12..18], [0x88, 0x08, 0x01, 0x01, 0x00, 0x88]);
        assert_eq!(buf[24..26], [0xFF, 0xFF]); // priority 3 at offset 18 + 2*3
        assert_eq!(buf[32..34], [0x00, 0x07]); // priority 7
        assert!(buf[34..60].iter().all(|&b| b == 0));
        assert_eq!(
            PfcRepr::parse_frame(&buf[..60]),
            Ok((MacAddr([2, 0, 0, 0, 0, 9]), repr))
        );
    }

    #[test]
    fn reserved_vector_bits_and_wrong_opcode_are_rejected() {
        let mut buf = [0u8; 60];
        PfcRepr::default()
            .emit_frame(MacAddr::default(), &mut buf)
            .unwrap();
        buf[16] = 1;
        assert_eq!(
            PfcRepr::parse_frame(&buf),
            Err(PfcError::ReservedVectorBits(0x100))
        );
        buf[16] = 0;
        buf[15] = 0x01; // classic 802.3x PAUSE opcode 0x0001
        buf[14] = 0x00;
        assert_eq!(PfcRepr::parse_frame(&buf), Err(PfcError::NotPfcOpcode(1)));
    }

    #[test]
    fn quantum_durations() {
        assert_eq!(quanta_to_nanos(1, 100_000_000_000), 6); // 5.12 ns, rounded up
        assert_eq!(quanta_to_nanos(65535, 100_000_000_000), 335_540);
        assert_eq!(quanta_to_nanos(1, 25_000_000_000), 21); // 20.48 ns
    }
}
