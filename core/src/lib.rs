#![no_std]
#![forbid(unsafe_code)]
//! roce-core: the `no_std`, allocation-free protocol core of the RNIC.
//!
//! * [`cc`]: DCQCN reaction and notification points, pacing.
//! * [`num`]: typed 24-bit numbers (`Psn`, `Msn`, `Qpn`) and keys (`Rkey`, `Lkey`, `Qkey`).
//! * [`wire`]: one view type and one plain-data `Repr` per header, the opcode table,
//!   the ICRC and whole-frame `parse` / `emit`.

pub mod cc;
pub mod num;
pub mod wire;
