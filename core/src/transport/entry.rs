//! Plain data the QP's roles hand each other: queue entries (send and receive WQEs,
//! the responder's replay ring and output items), the ACK waiting to go out, and the
//! descriptor of one frame to send. A leaf: it depends on no other transport module but
//! the verbs vocabulary, so the roles and the context can all use it.

use crate::num::{Msn, Psn, Rkey};
use crate::wire::aeth::Syndrome;
use crate::wire::bth::BthRepr;
use crate::wire::ExtHeaders;

use super::verbs::{AddressVector, RecvWr, SendWr, WcStatus};

/// A posted send WR and its transmission state.
#[derive(Clone, Debug)]
pub(crate) struct SendWqe {
    pub wr: SendWr,
    /// Message length (sum of the SGEs; 8 for atomics).
    pub len: u32,
    /// PSN of the first packet (READ: of the request = first response).
    pub first_psn: Psn,
    /// PSN of the last packet (READ: of the last response).
    pub last_psn: Psn,
    /// PSNs assigned: at least one packet went out.
    pub started: bool,
    /// Every packet went out (for RC: awaiting acknowledgement).
    pub sent_all: bool,
    /// Finished; completes when it reaches the head of the queue.
    pub done: bool,
    /// Outcome once `done`.
    pub status: WcStatus,
    /// Holds one of the `max_rd_atomic` initiator credits.
    pub has_credit: bool,
    /// Its fast-path descriptor asked the hardware to write its CQE
    /// (`docs/fastpath.md` §3.7).
    pub cqe_hw: bool,
    /// The hardware wrote its CQE: completing it pushes no completion.
    pub cqe_written: bool,
}

impl SendWqe {
    pub fn new(wr: SendWr, len: u32) -> Self {
        Self {
            wr,
            len,
            first_psn: Psn::ZERO,
            last_psn: Psn::ZERO,
            started: false,
            sent_all: false,
            done: false,
            status: WcStatus::Success,
            has_credit: false,
            cqe_hw: false,
            cqe_written: false,
        }
    }
}

/// A posted receive WR.
#[derive(Clone, Debug)]
pub(crate) struct RecvWqe {
    pub wr: RecvWr,
}

/// A saved READ or ATOMIC (the responder's replay ring, `max_dest_rd_atomic` deep).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum RdRes {
    #[default]
    Free,
    Read {
        first_psn: Psn,
        last_psn: Psn,
        va: u64,
        len: u32,
        rkey: Rkey,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

/// An ACK or NAK waiting to go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckOut {
    pub syndrome: Syndrome,
    pub psn: Psn,
}

/// A READ response stream or ATOMIC ACK waiting to go out, in PSN order. Each item
/// carries a copy of what it needs, so recycling the replay ring cannot corrupt it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RespItem {
    /// An ACK that must precede this item (coalesced ACKs never overtake it).
    pub ack_before: Option<AckOut>,
    pub kind: ItemKind,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum ItemKind {
    Read {
        /// PSN of the next response packet.
        psn: Psn,
        va: u64,
        rkey: Rkey,
        resid: u32,
        /// The next packet may be FIRST/ONLY (the stream starts at the resource's
        /// first PSN); otherwise it is MIDDLE/LAST.
        first: bool,
        /// The MSN its responses' AETH carry: the responder's MSN when the request
        /// was taken (a new READ: counting itself), not when a response goes out.
        /// Later requests may be taken before this stream ends; rxe finishes a READ
        /// before taking the next request, so its responses never show their MSNs.
        msn: Msn,
    },
    Atomic {
        psn: Psn,
        orig: u64,
        /// The MSN its ACKNOWLEDGE carries: the responder's MSN once the atomic is
        /// executed (counting itself), as for a READ; rxe sends an atomic's ACK before
        /// it takes the next request.
        msn: Msn,
    },
}

/// The message a responder is in the middle of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum CurOp {
    #[default]
    None,
    Send,
    Write,
}

/// One frame the QP wants to send: headers as plain data, where the payload comes from,
/// and what to update once the frame really went out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxDesc {
    pub bth: BthRepr,
    pub ext: ExtHeaders,
    pub payload_len: u32,
    pub src: PayloadSrc,
    /// UD: the WR's destination (otherwise the QP's address vector).
    pub ud_av: Option<AddressVector>,
    pub commit: Commit,
}

impl TxDesc {
    /// A request or a READ response / ATOMIC ACK: what congestion control paces (ACKs and
    /// NAKs are not held back).
    pub fn carries_data(&self) -> bool {
        matches!(self.commit, Commit::Request { .. } | Commit::Item { .. })
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum PayloadSrc {
    None,
    /// From the send WQE at `idx`, starting at message byte `offset`.
    Sq {
        idx: u16,
        offset: u32,
    },
    /// From registered memory at `va` (a READ response; checked when prepared).
    Remote {
        va: u64,
    },
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Commit {
    /// A request packet of the WQE at `idx`: packet `pkt`, consuming `psns` PSNs of a
    /// WQE that needs `total_psns`; `ends` when it is the WQE's last packet.
    Request {
        idx: u16,
        psns: u32,
        total_psns: u32,
        ends: bool,
        ack_req: bool,
        is_send: bool,
        /// A selective-repeat resend: the send cursor stays where it is.
        rtx: bool,
    },
    /// The pending ACK / NAK.
    Ack,
    /// The oldest waiting selective-repeat SACK.
    Sack,
    /// The ACK in front of the head item.
    AckBefore,
    /// A packet of the head item carrying `n` payload bytes.
    Item { n: u32 },
}
