#![no_std]
#![forbid(unsafe_code)]
//! roce-core: the `no_std`, allocation-free protocol core of the RNIC.
//!
//! * [`num`]: typed 24-bit numbers (`Psn`, `Msn`, `Qpn`) and keys (`Rkey`, `Lkey`, `Qkey`).
//! * [`wire`]: one view type and one plain-data `Repr` per header, the opcode table,
//!   the ICRC and whole-frame `parse` / `emit`.

pub mod engine;
pub mod memory;
pub mod num;
pub mod transport;
pub mod wire;
