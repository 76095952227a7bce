#![no_std]
#![forbid(unsafe_code)]
//! roce-firmware: the NIC runtime that runs on the soft core (and, unchanged, on the host
//! against the software or RTL datapath), and the host/NIC ABI it shares with the driver.
//!
//! * [`abi`]: the one source of truth for registers, rings, WQE/CQE and command layouts.

pub mod abi;
