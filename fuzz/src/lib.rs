//! What the fuzz targets share: the wire layer's test oracle of `core/tests/oracle`
//! (which the property tests use too), the engine-level world of [`world`], and the
//! `abi` target's NIC ([`nic`], [`port`], [`mw`]).

pub mod mw;
pub mod nic;
#[path = "../../core/tests/oracle/mod.rs"]
mod oracle;
pub mod port;
pub mod world;

pub use oracle::*;
