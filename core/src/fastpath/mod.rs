//! A software model of the RC fast path (`docs/fastpath.md`): the contexts and
//! descriptors the firmware writes, the segmenter that turns one message descriptor
//! into frames, the receive placement that checks and places in-sequence WRITE and
//! SEND packets and acknowledges them, and the response path that takes ACKs and places
//! READ responses and ATOMIC ACKNOWLEDGEs. Everything the rules do not cover becomes an [`Event`] for the
//! firmware. [`layout`] holds the byte encodings, the contract the RTL implements; the
//! RTL is tested against this model, the model against the engine
//! (`core/tests/fastpath.rs`), which stays the reference.
//!
//! No state lives here beyond the contexts and lists the caller owns, as in hardware
//! where they sit in block RAM indexed by QPN.

pub mod layout;
mod pace;
mod rx;
mod sq;
mod tx;

pub use pace::{Pace, PaceWrite};
pub use rx::{
    dispatch, receive, respond, Answered, Event, Exception, Inflight, InflightKind, MrEntry,
    MrTable, PortAddr, RecvCtx, RecvState, RxCur, RxOutcome, RD_MAX,
};
pub use sq::{wqe_msg, SqIdle, SqSpent};
pub use tx::{
    ack_frame, atomic_ack_frame, read_response, segment, window_open, AckDesc, AtomicResp, MsgOp,
    ReadResp, SendCtx, TxError, TxMsg,
};

/// A receive buffer the firmware loads ahead of the next SEND (`docs/fastpath.md` §3.4,
/// `Engine::fastpath_recv_next`): the head receive WQE's one SGE, and what the CQE
/// writer needs to write its CQE (§3.7, "Receive CQEs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvBuf {
    pub addr: u64,
    pub len: u32,
    pub cqe: RecvCqe,
}

/// What the CQE writer needs of a receive WQE to write its CQE itself (§3.7): the WQE's
/// `wr_id` and the QP's receive CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCqe {
    pub wr_id: u64,
    pub cq: u16,
}

/// How a QP's acknowledged PSN goes back to the hardware after the firmware handled an
/// exception (`Engine::fastpath_una_back`, `docs/fastpath.md` §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaBack {
    /// In the FLUSH the QP owes (its requester was rewound), written for posting: the
    /// FLUSH carries `una_psn` (§3.2).
    Flush,
    /// Alone: the send context's `una_psn` is this PSN.
    Una(crate::num::Psn),
}
