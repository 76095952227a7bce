//! Bytes -> `parse` -> (if accepted) `emit_with` into a buffer of exactly
//! `frame_len(body_len)`, payload and pad as received and PadCnt as received -> `parse`
//! again: the same headers, payload and pad. `emit` with the same payload gives the
//! same frame with a zero pad, and too small a buffer is an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_core::wire::{emit, emit_with, EmitError};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = roce_core_fuzz::check_frame(data) else {
        return;
    };
    let h = p.headers();
    let body_len = p.payload().len() + p.pad().len();
    let len = h
        .frame_len(body_len)
        .expect("a parsed opcode is in the table");
    let mut buf = vec![0u8; len];
    let layout = emit_with(&h, body_len, &mut buf, |b| {
        let (data, pad) = b.split_at_mut(p.payload().len());
        data.copy_from_slice(p.payload());
        pad.copy_from_slice(p.pad());
    })
    .expect("a parsed frame re-emits");
    assert_eq!(layout.end, len);
    assert!(
        len <= p.layout().end,
        "re-emitted frame is longer than the datagram"
    );

    let q = roce_core_fuzz::check_frame(&buf).expect("a re-emitted frame parses");
    // The derived fields (EtherTypes, PadCnt) were read from a valid frame, so they are
    // what emit derives: the headers compare whole.
    assert_eq!(q.headers(), h);
    assert_eq!((q.payload(), q.pad()), (p.payload(), p.pad()));
    assert!(q.trailer().is_empty());
    // IPv4 options and reserved bits are dropped, so bytes may differ only inside the
    // headers; from the payload on, the frames agree.
    assert_eq!(
        &buf[q.layout().payload..q.layout().icrc],
        &data[p.layout().payload..p.layout().icrc]
    );

    // `emit` pads with zeros: the same frame when the received pad was zero.
    let mut zero_pad = vec![0u8; len];
    assert_eq!(emit(&h, p.payload(), &mut zero_pad), Ok(len));
    if p.pad().iter().all(|&b| b == 0) {
        assert_eq!(zero_pad, buf);
    }

    // Too small a buffer: an error naming the size, for every shortfall.
    for short in [0, len / 2, len - 1] {
        let mut small = vec![0u8; short];
        let needed = Err(EmitError::BufferTooSmall { needed: len });
        let fill = |_: &mut [u8]| panic!("fill called on a too-small buffer");
        assert_eq!(
            emit_with(&h, body_len, &mut small, fill).map(|l| l.end),
            needed
        );
        assert_eq!(emit(&h, p.payload(), &mut small), needed);
    }
});
