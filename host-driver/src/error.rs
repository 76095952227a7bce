//! The driver's one error type: a variant per way a verb fails, naming what was wrong.

use roce_abi::{CmdOp, CmdStatus};
use roce_core::transport::QpState;
use std::fmt;

/// Why a verb failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The device's ID register does not say "ROCE".
    NotARoceDevice { device_id: u32 },
    /// The device speaks another major ABI version.
    AbiMismatch { major: u16 },
    /// The device refused a command (`op` is None for an opcode the ABI does not name).
    Command {
        opcode: u16,
        op: Option<CmdOp>,
        status: CmdStatus,
    },
    /// The device did not answer a command.
    CommandTimeout { opcode: u16 },
    /// The device wrote something this driver cannot read.
    BadResponse(&'static str),
    /// Host memory outside the arena.
    Dma { addr: u64 },
    /// The QP's state does not allow the verb.
    InvalidState { verb: &'static str, state: QpState },
    /// The queue is full (`ENOMEM` from `ibv_post_send`).
    QueueFull { queue: &'static str },
    /// An argument is out of range.
    InvalidArgument(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotARoceDevice { device_id } => {
                write!(f, "device id {device_id:#010x} is not this NIC")
            }
            Self::AbiMismatch { major } => {
                write!(f, "device ABI major version {major}, driver speaks 1")
            }
            Self::Command { opcode, op, status } => {
                write!(f, "command {opcode} ({op:?}) failed: {status:?}")
            }
            Self::CommandTimeout { opcode } => {
                write!(f, "command {opcode}: the device did not answer")
            }
            Self::BadResponse(what) => write!(f, "bad response from the device: {what}"),
            Self::Dma { addr } => write!(f, "host address {addr:#x} is outside host memory"),
            Self::InvalidState { verb, state } => {
                write!(f, "{verb} not allowed in state {state:?}")
            }
            Self::QueueFull { queue } => write!(f, "{queue} queue full"),
            Self::InvalidArgument(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {}
