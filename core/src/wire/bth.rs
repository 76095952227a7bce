//! Base Transport Header, 12 bytes (roce-facts §2).

use super::field::{get_u16, get_u24, set_u16, set_u24};
use super::opcode::Opcode;
use super::Truncated;
use crate::num::{Psn, Qpn};

/// Default partition key (full member, default partition).
pub const DEFAULT_PKEY: u16 = 0xFFFF;

fixed_view!(
    /// View of the 12-byte BTH.
    Header,
    12
);

impl<T: AsRef<[u8]>> Header<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// OpCode (bits 7..5 transport, 4..0 operation).
    pub fn opcode(&self) -> Opcode {
        Opcode(self.b()[0])
    }
    /// SE: solicited event.
    pub fn se(&self) -> bool {
        self.b()[1] & 0x80 != 0
    }
    /// M: migration request (APM; ignored on receive).
    pub fn migreq(&self) -> bool {
        self.b()[1] & 0x40 != 0
    }
    /// PadCnt: 0..3 pad bytes after the payload.
    pub fn pad_count(&self) -> u8 {
        (self.b()[1] >> 4) & 0x3
    }
    /// TVer: transport header version, must be 0.
    pub fn tver(&self) -> u8 {
        self.b()[1] & 0x0F
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        get_u16(self.b(), 2)
    }
    /// FECN (IB forward congestion notification).
    pub fn fecn(&self) -> bool {
        self.b()[4] & 0x80 != 0
    }
    /// BECN (set in RoCEv2 CNPs).
    pub fn becn(&self) -> bool {
        self.b()[4] & 0x40 != 0
    }
    /// The six reserved bits after FECN and BECN (resv6; masked in the ICRC).
    pub fn resv6(&self) -> u8 {
        self.b()[4] & 0x3F
    }
    /// The seven reserved bits after AckReq (resv7; covered by the ICRC).
    pub fn resv7(&self) -> u8 {
        self.b()[8] & 0x7F
    }
    /// Destination QP.
    pub fn dest_qp(&self) -> Qpn {
        Qpn::new(get_u24(self.b(), 5))
    }
    /// AckReq: the requester asks for an acknowledgement.
    pub fn ack_req(&self) -> bool {
        self.b()[8] & 0x80 != 0
    }
    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(get_u24(self.b(), 9))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets PadCnt.
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = self.buffer.as_mut();
        b[1] = (b[1] & !0x30) | ((pad & 3) << 4);
    }
    /// Sets FECN and BECN (both masked in the ICRC, so a switch may rewrite them).
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        let b = self.buffer.as_mut();
        b[4] = (b[4] & 0x3F) | (u8::from(fecn) << 7) | (u8::from(becn) << 6);
    }
}

/// Plain-data BTH. The reserved bits are sent as 0 by this stack and ignored on receive,
/// but kept, so that a captured frame (some NICs set resv6) is reproduced exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub se: bool,
    pub migreq: bool,
    /// Derived by the whole-frame `emit` from the payload length.
    pub pad_count: u8,
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub resv6: u8,
    pub dest_qp: Qpn,
    pub ack_req: bool,
    pub resv7: u8,
    pub psn: Psn,
}

impl BthRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = 12;

    /// A BTH with every flag clear and the default P_Key.
    pub const fn new(opcode: Opcode, dest_qp: Qpn, psn: Psn) -> Self {
        Self {
            opcode,
            se: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            resv6: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            opcode: v.opcode(),
            se: v.se(),
            migreq: v.migreq(),
            pad_count: v.pad_count(),
            tver: v.tver(),
            pkey: v.pkey(),
            fecn: v.fecn(),
            becn: v.becn(),
            resv6: v.resv6(),
            dest_qp: v.dest_qp(),
            ack_req: v.ack_req(),
            resv7: v.resv7(),
            psn: v.psn(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        self.write(buf.first_chunk_mut().ok_or(Truncated)?);
        Ok(Self::LEN)
    }

    /// [`Self::emit`] into exactly the header's bytes, inlined: where the fields are
    /// constants (a CNP's), the header folds to a few stores.
    #[inline(always)]
    pub fn write(&self, b: &mut [u8; Self::LEN]) {
        b[0] = self.opcode.0;
        b[1] = (u8::from(self.se) << 7)
            | (u8::from(self.migreq) << 6)
            | ((self.pad_count & 3) << 4)
            | (self.tver & 0x0F);
        set_u16(b, 2, self.pkey);
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6) | (self.resv6 & 0x3F);
        set_u24(b, 5, self.dest_qp.value());
        b[8] = (u8::from(self.ack_req) << 7) | (self.resv7 & 0x7F);
        set_u24(b, 9, self.psn.value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uc_send_only_bth_from_scapy_test() {
        // roce-facts §5.5: UC_SEND_ONLY, M=1, PadCnt=2, QPN 211, PSN 13571856.
        let raw = [
            0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10,
        ];
        let repr = BthRepr::parse(&Header::new_checked(&raw[..]).unwrap());
        assert_eq!(repr.opcode, Opcode::UC_SEND_ONLY);
        assert!(repr.migreq && !repr.se && !repr.ack_req);
        assert_eq!((repr.pad_count, repr.tver, repr.pkey), (2, 0, 0xFFFF));
        assert_eq!(
            (repr.dest_qp, repr.psn),
            (Qpn::new(211), Psn::new(13_571_856))
        );
        let mut out = [0u8; 12];
        repr.emit(&mut out).unwrap();
        assert_eq!(out, raw);
    }

    #[test]
    fn cnp_bth_has_becn() {
        // ConnectX-4 Lx CNP (roce-facts §5.4).
        let raw = [
            0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00,
        ];
        let h = Header::new_checked(&raw[..]).unwrap();
        assert!(h.becn() && !h.fecn());
        assert_eq!(h.dest_qp(), Qpn::new(0x118));
    }
}
