//! Arbitrary bytes into `parse` and `parse_unverified`: no panic; the two agree; an
//! accepted frame's payload, pad, ICRC and trailer lie within it in layout order, and
//! its ICRC matches the independent reference.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = roce_core_fuzz::check_frame(data);
});
