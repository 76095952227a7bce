//! The transport layer: verbs-level types, `modify_qp` rules, and the RC, UC and UD
//! queue pairs as sans-IO state machines (quinn-proto's model: time is passed in, the
//! QP never reads a clock, allocates, or does I/O).
//!
//! A QP is a small context ([`Qp`]) plus its queues ([`QpQueues`]); the engine owns
//! tables of both and hands the transport the rest of the world (memory protection,
//! DMA, completion queues, counters) for the duration of one call.

mod attr;
mod completer;
mod counters;
mod error;
mod qp;
mod requester;
mod responder;
mod sgl;
mod time;
mod verbs;

pub use attr::{check_transition, AttrMask, QpAttr, TransitionError};
pub use counters::Counters;
pub use error::Error;
pub use qp::{CompletionSink, Qp, QpInfo, QpInitAttr, QpQueues, TransportConfig};
pub use responder::GRH_LEN;
pub use time::Instant;
pub use verbs::*;

pub(crate) use qp::{udp_sport, Env, PortLimits, QpRef, TxDesc};
