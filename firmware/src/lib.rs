#![no_std]
//! NIC runtime over a datapath HAL (no_std). Work in progress: see the open issues.
