//! Verilated RNIC datapath RTL driven from Rust. Work in progress: see the open issues.
