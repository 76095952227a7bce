//! Differential fuzzing of the hardware against the software (issue 17): every input is
//! one Ethernet frame, parsed by the Verilated RX datapath (`hdl-sim/rtl/`) and by
//! `roce_core::wire::parse`. Even lengths go through the 512-bit build, odd lengths
//! through the 64-bit one (one parser instance each, reused: the RTL's state after a
//! frame is part of what is tested).
//!
//! Invariant: both accept the frame and agree on every header field, the payload, the
//! pad, the ICRC and the trailer; or both refuse it with the same error name (the
//! comparison of `hdl-sim/tests/common/diff.rs`, which the differential tests use). The
//! RTL answers every frame within its cycle budget.

#![no_main]

#[path = "../../hdl-sim/tests/common/diff.rs"]
#[allow(dead_code)]
mod diff;

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use roce_hdl_sim::{DataWidth, RtlDatapath};
// Linked for its build script's coverage hook (`csrc/rtl_coverage.c`) only.
use roce_core_fuzz as _;

/// Lower-case hex, as the comparison prints byte strings.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

thread_local! {
    static RTL: RefCell<Option<[RtlDatapath; 2]>> = const { RefCell::new(None) };
}

fuzz_target!(|frame: &[u8]| {
    RTL.with_borrow_mut(|rtl| {
        let dps = rtl.get_or_insert_with(|| {
            [DataWidth::W512, DataWidth::W64].map(|w| {
                RtlDatapath::new(w).expect("the Verilated datapath (is Verilator installed?)")
            })
        });
        let dp = &mut dps[frame.len() % 2];
        let verdict = dp
            .rx(frame)
            .unwrap_or_else(|e| panic!("the RTL gave no verdict: {e}"));
        if let Err(d) = diff::compare(frame, &verdict) {
            panic!("RTL and core disagree: {d}");
        }
    });
});
