//! What the fuzz targets share: the wire layer's test oracle of `core/tests/oracle`
//! (which the property tests use too), and the engine-level world of [`world`].

pub mod nic;
#[path = "../../core/tests/oracle/mod.rs"]
mod oracle;
pub mod port;
pub mod world;

pub use oracle::*;
