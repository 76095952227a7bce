//! Integration tests of the fabric, through its public API only. One test binary (with
//! a module per topic) keeps link time down on a small machine.

mod common;
mod determinism;
mod ecmp;
mod ecn;
mod ets;
mod fat_tree;
mod faults;
mod pfc;
mod switching;
mod timing;
