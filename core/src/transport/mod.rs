//! The transport layer: verbs-level types, `modify_qp` rules, and (later) the RC, UC
//! and UD queue pairs as sans-IO state machines.

mod attr;
mod time;
mod verbs;

pub use attr::{check_transition, AttrMask, QpAttr, TransitionError};
pub use time::Instant;
pub use verbs::*;
