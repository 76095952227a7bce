//! Checks shared by the fuzz targets: the wire layer's test oracle of
//! `core/tests/oracle`, which the property tests use too.

#[path = "../../core/tests/oracle/mod.rs"]
mod oracle;

pub use oracle::*;
