//! Management datagrams (IBTA vol. 1 §13.4): the 256-byte payload of a UD SEND to QP1
//! (the GSI QP, Q_Key 0x80010000), a 24-byte common header and 232 bytes of class data.
//! The communication manager's messages (class 0x07) are [`super::cm`]'s.
//!
//! | offset | width | field |
//! |---|---|---|
//! | 0 | 1 | BaseVersion (1) |
//! | 1 | 1 | MgmtClass |
//! | 2 | 1 | ClassVersion |
//! | 3 | 1 | R (bit 7: response) and Method (bits 6..0) |
//! | 4 | 2 | Status |
//! | 6 | 2 | ClassSpecific |
//! | 8 | 8 | TransactionID |
//! | 16 | 2 | AttributeID |
//! | 18 | 2 | reserved |
//! | 20 | 4 | AttributeModifier |
//!
//! (Linux `include/rdma/ib_mad.h` `struct ib_mad_hdr`; Wireshark's `infiniband.mad.*`.)

use super::field::{get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};
use super::Truncated;

/// Bytes of a whole MAD (the UD payload).
pub const MAD_LEN: usize = 256;
/// Bytes of the common header.
pub const HEADER_LEN: usize = 24;
/// Bytes of class data after the header.
pub const DATA_LEN: usize = MAD_LEN - HEADER_LEN;

/// `BaseVersion` of every MAD (`IB_MGMT_BASE_VERSION`).
pub const BASE_VERSION: u8 = 1;
/// Management class of the communication manager (`IB_MGMT_CLASS_CM`).
pub const CLASS_CM: u8 = 0x07;
/// The CM's class version (`IB_CM_CLASS_VERSION`).
pub const CM_CLASS_VERSION: u8 = 2;
/// Method `Send` (`IB_MGMT_METHOD_SEND`): every CM message uses it.
pub const METHOD_SEND: u8 = 0x03;

fixed_view!(
    /// View of the MAD common header.
    Header,
    24
);

impl<T: AsRef<[u8]>> Header<T> {
    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    /// MgmtClass.
    pub fn mgmt_class(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[2]
    }
    /// The method byte (response bit and method).
    pub fn method(&self) -> u8 {
        self.buffer.as_ref()[3]
    }
    /// Status.
    pub fn status(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 4)
    }
    /// ClassSpecific.
    pub fn class_specific(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 6)
    }
    /// TransactionID.
    pub fn tid(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 8)
    }
    /// AttributeID.
    pub fn attr_id(&self) -> u16 {
        get_u16(self.buffer.as_ref(), 16)
    }
    /// AttributeModifier.
    pub fn attr_mod(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 20)
    }
}

/// Plain-data MAD common header (the reserved bytes are sent as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MadRepr {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub class_specific: u16,
    pub tid: u64,
    pub attr_id: u16,
    pub attr_mod: u32,
}

impl MadRepr {
    /// Bytes this header occupies.
    pub const LEN: usize = HEADER_LEN;

    /// The header of a CM message with attribute `attr_id`.
    pub const fn cm(attr_id: u16, tid: u64) -> Self {
        Self {
            base_version: BASE_VERSION,
            mgmt_class: CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            tid,
            attr_id,
            attr_mod: 0,
        }
    }

    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(v: &Header<T>) -> Self {
        Self {
            base_version: v.base_version(),
            mgmt_class: v.mgmt_class(),
            class_version: v.class_version(),
            method: v.method(),
            status: v.status(),
            class_specific: v.class_specific(),
            tid: v.tid(),
            attr_id: v.attr_id(),
            attr_mod: v.attr_mod(),
        }
    }

    /// Writes the header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Truncated> {
        let b = buf.get_mut(..Self::LEN).ok_or(Truncated)?;
        b[0] = self.base_version;
        b[1] = self.mgmt_class;
        b[2] = self.class_version;
        b[3] = self.method;
        set_u16(b, 4, self.status);
        set_u16(b, 6, self.class_specific);
        set_u64(b, 8, self.tid);
        set_u16(b, 16, self.attr_id);
        set_u16(b, 18, 0);
        set_u32(b, 20, self.attr_mod);
        Ok(Self::LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cm_header_round_trips() {
        // A REQ's header as the kernel's CM sends it: base 1, class 7, version 2, Send,
        // TID, attribute 0x0010.
        let raw = [
            1, 7, 2, 3, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 0x10, 0, 0,
            0, 0, 0, 0,
        ];
        let h = MadRepr::parse(&Header::new_checked(&raw[..]).unwrap());
        assert_eq!(h, MadRepr::cm(0x0010, 0x1234_5678_9abc_def0));
        let mut out = [0xAAu8; 24];
        h.emit(&mut out).unwrap();
        assert_eq!(out, raw);
        assert!(Header::new_checked(&raw[..23]).is_err());
    }
}
