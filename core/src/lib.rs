#![no_std]
#![forbid(unsafe_code)]
//! roce-core: the `no_std`, allocation-free protocol core of the RNIC.
//!
//! * [`cc`]: DCQCN reaction and notification points, pacing.
//! * [`cm`]: the communication manager's protocol (REQ/REP/RTU, REJ, MRA, DREQ/DREP,
//!   SIDR) as a sans-IO state machine over QP1's MADs.
//! * [`dcb`]: Data Center Bridging per priority: classification, PFC pause timers and
//!   generation, ETS transmission selection.
//! * [`engine`]: fixed-capacity tables and the sans-IO entry points the firmware drives.
//! * [`memory`]: protection domains, memory regions, bounds checks, the DMA trait.
//! * [`num`]: typed 24-bit numbers (`Psn`, `Msn`, `Qpn`) and keys (`Rkey`, `Lkey`, `Qkey`).
//! * [`wire`]: one view type and one plain-data `Repr` per header, the opcode table,
//!   the ICRC and whole-frame `parse` / `emit`.
//! * [`transport`]: verbs-level types (QP types and states, work requests and
//!   completions) and the queue-pair transition rules, and the RC/UC/UD queue pairs.

pub mod cc;
pub mod cm;
pub mod dcb;
pub mod engine;
pub mod fastpath;
pub mod memory;
pub mod num;
pub mod transport;
pub mod wire;
