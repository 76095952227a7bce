//! Arbitrary bytes into `parse` and `parse_unverified`: no panic; the two agree; an
//! accepted frame's payload, pad, ICRC and trailer lie within it in layout order, and
//! its ICRC matches the independent reference. The same bytes into the LLDP/DCBX parser
//! (`wire::lldp`), as a whole frame and as an LLDPDU behind an LLDP Ethernet header: no
//! panic, and an accepted one re-emits to a frame that parses back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_core::wire::lldp::DcbxRepr;

fn check_lldp(frame: &[u8]) {
    let Ok(repr) = DcbxRepr::parse_frame(frame) else {
        return;
    };
    let mut buf = vec![0u8; repr.frame_len()];
    let n = repr
        .emit_frame(&mut buf)
        .expect("frame_len bytes are enough");
    assert_eq!(n, buf.len());
    assert_eq!(DcbxRepr::parse_frame(&buf).as_ref(), Ok(&repr));
}

fuzz_target!(|data: &[u8]| {
    let _ = roce_core_fuzz::check_frame(data);
    check_lldp(data);
    let mut framed = vec![
        0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E, 2, 0, 0, 0, 0, 1, 0x88, 0xCC,
    ];
    framed.extend_from_slice(data);
    check_lldp(&framed);
});
