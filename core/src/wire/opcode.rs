//! The opcode table as data (roce-facts §3): for every RC, UC, UD and CNP opcode, its
//! name, transport, operation, position in a message, the extended headers that follow
//! the BTH in order, and whether it carries payload. Source: rxe `rxe_opcode.c`,
//! `include/rdma/ib_pack.h`.

use core::fmt;

/// A BTH opcode byte. Unknown values are representable; [`Opcode::info`] says whether the
/// table knows them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// Transport service, from the opcode's top three bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Rc,
    Uc,
    Ud,
    Cnp,
}

/// What a packet does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Send,
    RdmaWrite,
    RdmaReadRequest,
    RdmaReadResponse,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    Cnp,
}

/// Where the packet sits in its message. Single-packet operations (ACKs, atomics, READ
/// requests, CNPs) are `Only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    First,
    Middle,
    Last,
    Only,
}

impl Position {
    /// FIRST or ONLY: the packet starts a message.
    pub const fn starts(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }
    /// LAST or ONLY: the packet ends a message.
    pub const fn ends(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }
}

/// An extended transport header (roce-facts §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    Reth,
    Aeth,
    AtomicEth,
    AtomicAckEth,
    ImmDt,
    Ieth,
    Deth,
    /// The 16 reserved bytes of a RoCEv2 CNP.
    Cnp,
}

impl ExtHeader {
    /// Length in bytes (roce-facts §9).
    pub const fn wire_len(self) -> usize {
        match self {
            Self::Reth | Self::Cnp => 16,
            Self::Aeth | Self::ImmDt | Self::Ieth => 4,
            Self::AtomicEth => 28,
            Self::AtomicAckEth | Self::Deth => 8,
        }
    }
}

/// One row of the opcode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    pub opcode: Opcode,
    /// Transport prefix plus IBTA name, as `packet-json.md` spells it.
    pub name: &'static str,
    pub transport: Transport,
    pub operation: Operation,
    pub position: Position,
    /// Extended headers after the BTH, in wire order.
    pub headers: &'static [ExtHeader],
    /// Carries a data payload (rxe `RXE_PAYLOAD_MASK`).
    pub payload: bool,
}

impl OpcodeInfo {
    /// Total length of the extended headers.
    pub const fn ext_len(&self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.headers.len() {
            n += self.headers[i].wire_len();
            i += 1;
        }
        n
    }
    /// Whether `h` is among the extended headers.
    pub fn has(&self, h: ExtHeader) -> bool {
        self.headers.contains(&h)
    }
}

use ExtHeader as H;
use Operation as O;
use Position as P;
use Transport as T;

macro_rules! table {
    ($($konst:ident = $val:expr, $name:expr, $t:ident, $op:ident, $pos:ident, [$($h:ident),*], $payload:expr;)*) => {
        impl Opcode {
            $(
                #[doc = $name]
                pub const $konst: Opcode = Opcode($val);
            )*
        }
        /// Every opcode this stack knows, in numeric order.
        pub static OPCODES: &[OpcodeInfo] = &[$(
            OpcodeInfo {
                opcode: Opcode($val),
                name: $name,
                transport: T::$t,
                operation: O::$op,
                position: P::$pos,
                headers: &[$(H::$h),*],
                payload: $payload,
            },
        )*];
    };
}

table! {
    RC_SEND_FIRST = 0x00, "RC_SEND_FIRST", Rc, Send, First, [], true;
    RC_SEND_MIDDLE = 0x01, "RC_SEND_MIDDLE", Rc, Send, Middle, [], true;
    RC_SEND_LAST = 0x02, "RC_SEND_LAST", Rc, Send, Last, [], true;
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", Rc, Send, Last, [ImmDt], true;
    RC_SEND_ONLY = 0x04, "RC_SEND_ONLY", Rc, Send, Only, [], true;
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", Rc, Send, Only, [ImmDt], true;
    RC_RDMA_WRITE_FIRST = 0x06, "RC_RDMA_WRITE_FIRST", Rc, RdmaWrite, First, [Reth], true;
    RC_RDMA_WRITE_MIDDLE = 0x07, "RC_RDMA_WRITE_MIDDLE", Rc, RdmaWrite, Middle, [], true;
    RC_RDMA_WRITE_LAST = 0x08, "RC_RDMA_WRITE_LAST", Rc, RdmaWrite, Last, [], true;
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Rc, RdmaWrite, Last, [ImmDt], true;
    RC_RDMA_WRITE_ONLY = 0x0A, "RC_RDMA_WRITE_ONLY", Rc, RdmaWrite, Only, [Reth], true;
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Rc, RdmaWrite, Only, [Reth, ImmDt], true;
    RC_RDMA_READ_REQUEST = 0x0C, "RC_RDMA_READ_REQUEST", Rc, RdmaReadRequest, Only, [Reth], false;
    RC_RDMA_READ_RESPONSE_FIRST = 0x0D, "RC_RDMA_READ_RESPONSE_FIRST", Rc, RdmaReadResponse, First, [Aeth], true;
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", Rc, RdmaReadResponse, Middle, [], true;
    RC_RDMA_READ_RESPONSE_LAST = 0x0F, "RC_RDMA_READ_RESPONSE_LAST", Rc, RdmaReadResponse, Last, [Aeth], true;
    RC_RDMA_READ_RESPONSE_ONLY = 0x10, "RC_RDMA_READ_RESPONSE_ONLY", Rc, RdmaReadResponse, Only, [Aeth], true;
    RC_ACKNOWLEDGE = 0x11, "RC_ACKNOWLEDGE", Rc, Acknowledge, Only, [Aeth], false;
    RC_ATOMIC_ACKNOWLEDGE = 0x12, "RC_ATOMIC_ACKNOWLEDGE", Rc, AtomicAcknowledge, Only, [Aeth, AtomicAckEth], false;
    RC_CMP_SWAP = 0x13, "RC_CMP_SWAP", Rc, CompareSwap, Only, [AtomicEth], false;
    RC_FETCH_ADD = 0x14, "RC_FETCH_ADD", Rc, FetchAdd, Only, [AtomicEth], false;
    RC_SEND_LAST_WITH_INVALIDATE = 0x16, "RC_SEND_LAST_WITH_INVALIDATE", Rc, Send, Last, [Ieth], true;
    RC_SEND_ONLY_WITH_INVALIDATE = 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", Rc, Send, Only, [Ieth], true;
    UC_SEND_FIRST = 0x20, "UC_SEND_FIRST", Uc, Send, First, [], true;
    UC_SEND_MIDDLE = 0x21, "UC_SEND_MIDDLE", Uc, Send, Middle, [], true;
    UC_SEND_LAST = 0x22, "UC_SEND_LAST", Uc, Send, Last, [], true;
    UC_SEND_LAST_WITH_IMMEDIATE = 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", Uc, Send, Last, [ImmDt], true;
    UC_SEND_ONLY = 0x24, "UC_SEND_ONLY", Uc, Send, Only, [], true;
    UC_SEND_ONLY_WITH_IMMEDIATE = 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", Uc, Send, Only, [ImmDt], true;
    UC_RDMA_WRITE_FIRST = 0x26, "UC_RDMA_WRITE_FIRST", Uc, RdmaWrite, First, [Reth], true;
    UC_RDMA_WRITE_MIDDLE = 0x27, "UC_RDMA_WRITE_MIDDLE", Uc, RdmaWrite, Middle, [], true;
    UC_RDMA_WRITE_LAST = 0x28, "UC_RDMA_WRITE_LAST", Uc, RdmaWrite, Last, [], true;
    UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", Uc, RdmaWrite, Last, [ImmDt], true;
    UC_RDMA_WRITE_ONLY = 0x2A, "UC_RDMA_WRITE_ONLY", Uc, RdmaWrite, Only, [Reth], true;
    UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", Uc, RdmaWrite, Only, [Reth, ImmDt], true;
    UD_SEND_ONLY = 0x64, "UD_SEND_ONLY", Ud, Send, Only, [Deth], true;
    UD_SEND_ONLY_WITH_IMMEDIATE = 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", Ud, Send, Only, [Deth, ImmDt], true;
    CNP = 0x81, "CNP", Cnp, Cnp, Only, [Cnp], false;
}

/// `INDEX[opcode]` = 1 + position in [`OPCODES`], or 0 for an unknown opcode.
static INDEX: [u8; 256] = {
    let mut index = [0u8; 256];
    let mut i = 0;
    while i < OPCODES.len() {
        index[OPCODES[i].opcode.0 as usize] = (i + 1) as u8;
        i += 1;
    }
    index
};

/// `EXT_LEN[opcode]` = [`OpcodeInfo::ext_len`] of its row (0 for an unknown opcode), so
/// that the parser does not walk the header list.
static EXT_LEN: [u8; 256] = {
    let mut len = [0u8; 256];
    let mut i = 0;
    while i < OPCODES.len() {
        len[OPCODES[i].opcode.0 as usize] = OPCODES[i].ext_len() as u8;
        i += 1;
    }
    len
};

impl Opcode {
    /// [`Opcode::info`] and the row's [`OpcodeInfo::ext_len`], from tables.
    #[inline]
    pub(crate) fn info_and_ext_len(self) -> Option<(&'static OpcodeInfo, usize)> {
        let info = self.info()?;
        Some((info, usize::from(EXT_LEN[usize::from(self.0)])))
    }

    /// The table row for this opcode, or `None` for reserved, RD and vendor opcodes.
    #[inline]
    pub fn info(self) -> Option<&'static OpcodeInfo> {
        let i = INDEX[usize::from(self.0)];
        if i == 0 {
            None
        } else {
            OPCODES.get(usize::from(i - 1))
        }
    }

    /// The name from the table, if known.
    pub fn name(self) -> Option<&'static str> {
        self.info().map(|i| i.name)
    }

    /// Looks an opcode up by its table name (`"RC_SEND_ONLY"`).
    pub fn from_name(name: &str) -> Option<Self> {
        OPCODES.iter().find(|i| i.name == name).map(|i| i.opcode)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "Opcode({:#04x})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes_match_the_facts_table() {
        // "Hdr bytes incl. BTH" column of roce-facts §3.1 and §3.3.
        let expect = [
            (Opcode::RC_SEND_LAST_WITH_IMMEDIATE, 16),
            (Opcode::RC_RDMA_WRITE_FIRST, 28),
            (Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 32),
            (Opcode::RC_RDMA_READ_REQUEST, 28),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 12),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, 24),
            (Opcode::RC_CMP_SWAP, 40),
            (Opcode::UD_SEND_ONLY, 20),
            (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 24),
        ];
        for (op, len) in expect {
            assert_eq!(12 + op.info().unwrap().ext_len(), len, "{op:?}");
        }
    }

    #[test]
    fn transport_matches_the_top_three_bits() {
        for info in OPCODES {
            assert_eq!(info.opcode.info_and_ext_len(), Some((info, info.ext_len())));
            let t = match info.opcode.0 >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                3 => Transport::Ud,
                4 => Transport::Cnp,
                _ => panic!("unexpected transport bits in {:?}", info.opcode),
            };
            assert_eq!(info.transport, t);
            assert_eq!(Opcode::from_name(info.name), Some(info.opcode));
        }
    }

    #[test]
    fn reserved_and_vendor_opcodes_are_unknown() {
        for op in [
            0x15u8, 0x18, 0x1C, 0x1F, 0x30, 0x40, 0x60, 0x70, 0x80, 0xC0, 0xFF,
        ] {
            assert!(Opcode(op).info().is_none(), "{op:#x}");
        }
        assert_eq!(OPCODES.len(), 38);
    }
}
