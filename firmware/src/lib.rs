#![no_std]
#![forbid(unsafe_code)]
//! roce-firmware: the NIC runtime that runs on the soft core (and, unchanged, on the host
//! against the software or RTL datapath), and the host/NIC ABI it shares with the driver.
//!
//! * [`abi`]: the `roce-abi` crate, re-exported: the one source of truth for registers,
//!   rings, WQE/CQE and command layouts, which the host driver uses too.
//! * [`hal`]: what the runtime needs from a platform (registers, DMA, datapath, clock).
//! * [`qp_map`]: per-QP bitmaps with a summary level (the doorbell latch, pending QPs).
//! * [`runtime`]: the [`runtime::Nic`] poll loop over the transport engine.
//! * [`datapath`]: the software datapath (roce-core's parse on receive) and a loopback.
//! * [`config`]: the firmware's capacities.

pub use roce_abi as abi;
pub mod config;
pub mod datapath;
pub mod fastpath;
pub mod hal;
pub mod qp_map;
pub mod runtime;
pub mod stats;
