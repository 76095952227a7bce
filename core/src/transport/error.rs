//! The verbs-level error type: one variant per kind of refusal, each naming what was
//! wrong (rust-ibverbs style).

use core::fmt;

use crate::memory::MemError;
use crate::num::Qpn;

use super::attr::{AttrMask, TransitionError};
use super::verbs::QpState;

/// Why a verb was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Error {
    /// `modify_qp`: the transition or its attribute set is not legal.
    ModifyQp(TransitionError),
    /// `modify_qp`: an attribute value is out of range.
    InvalidAttribute {
        /// Which attribute.
        attr: AttrMask,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A verb the QP's state does not allow (`post_send` in INIT, ...).
    InvalidState {
        /// The verb.
        verb: &'static str,
        /// The QP's state.
        state: QpState,
    },
    /// The send or receive queue is full.
    QueueFull {
        /// The verb.
        verb: &'static str,
    },
    /// The work request is malformed.
    InvalidWr {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A capability asked of a new object is beyond the NIC's (`ibv_qp_cap`, SRQ
    /// attributes): creation fails with EINVAL, as rxe's `rxe_qp_chk_cap`.
    InvalidCap {
        /// Which capability.
        cap: &'static str,
    },
    /// No QP with this number.
    NoSuchQp(Qpn),
    /// No CQ with this handle.
    NoSuchCq(u16),
    /// No SRQ with this handle.
    NoSuchSrq(u16),
    /// A fixed-capacity table is full.
    TableFull {
        /// Which table.
        table: &'static str,
    },
    /// The object is still in use (a CQ with QPs attached).
    Busy {
        /// What is busy.
        what: &'static str,
    },
    /// A memory verb failed.
    Memory(MemError),
    /// A QP context read back from the context store is not one the engine wrote for
    /// this QP (CRC, version, QPN or a field out of range; `engine::ctx`).
    BadContext(Qpn),
}

impl From<TransitionError> for Error {
    fn from(e: TransitionError) -> Self {
        Self::ModifyQp(e)
    }
}

impl From<MemError> for Error {
    fn from(e: MemError) -> Self {
        Self::Memory(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ModifyQp(e) => write!(f, "modify_qp: {e}"),
            Self::InvalidAttribute { attr, reason } => {
                write!(f, "modify_qp: attribute {attr}: {reason}")
            }
            Self::InvalidState { verb, state } => write!(f, "{verb} not allowed in state {state}"),
            Self::QueueFull { verb } => write!(f, "{verb}: queue full"),
            Self::InvalidWr { reason } => write!(f, "invalid work request: {reason}"),
            Self::InvalidCap { cap } => write!(f, "{cap} above the NIC's limit"),
            Self::NoSuchQp(q) => write!(f, "no QP {q}"),
            Self::NoSuchCq(c) => write!(f, "no CQ {c}"),
            Self::NoSuchSrq(s) => write!(f, "no SRQ {s}"),
            Self::TableFull { table } => write!(f, "{table} table full"),
            Self::Busy { what } => write!(f, "{what} still in use"),
            Self::Memory(e) => write!(f, "{e}"),
            Self::BadContext(q) => write!(f, "QP {q}: stored context is corrupt"),
        }
    }
}
