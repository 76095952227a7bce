//! The library behind the `roce` command, so tests drive the same code the binary runs.
//! Captures (`roce decode`, `encode`, `analyze`) live in `roce-capture`.

pub mod dcb_args;
#[cfg(target_os = "linux")]
pub mod interop;
pub mod perf;
pub mod perf_cmd;
pub mod progress;
pub mod scenario;
