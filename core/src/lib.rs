#![no_std]
#![forbid(unsafe_code)]
//! roce-core
