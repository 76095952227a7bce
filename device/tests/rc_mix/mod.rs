//! One RC workload that checks its own data: a WRITE, a SEND, a READ back, a
//! FETCH_AND_ADD and a CMP_AND_SWP from NIC 0's region `a` to NIC 1's region `b`. Shared
//! by every test that joins two NIC models (`firmware_on_rtl.rs`, `soc_pair/`), so each
//! model is held to the same expectations.
//!
//! Layout (both regions at least 64 KiB): the WRITE fills `b[0..len]`; the SEND puts
//! `len / 2 + 1` bytes at `b[20_000..]`; the READ brings `b[0..len]` to `a[16_384..]`;
//! the atomics work on `b[40_000]` (77 before) and return the old values to `a[36_000]`
//! and `a[36_008]`.

use roce_core::transport::{RecvWr, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp};
use roce_host::{MemoryRegion, QueuePair};

/// The largest `len` the layout holds.
pub const MAX_LEN: usize = 16_384;

/// Writes the data and posts the receive on NIC 1 and the five requests on NIC 0; returns
/// the data the checks expect.
pub fn post(qp: [&QueuePair; 2], a: &MemoryRegion, b: &MemoryRegion, len: usize) -> Vec<u8> {
    let data = prepare(qp[1], a, b, len);
    qp[0].post_send_list(&wrs(a, b, len)).unwrap();
    data
}

/// [`post`]'s first half: writes the data and posts the receive on NIC 1 (`qp1`);
/// returns the data the checks expect. [`wrs`] are the requests to post then.
pub fn prepare(qp1: &QueuePair, a: &MemoryRegion, b: &MemoryRegion, len: usize) -> Vec<u8> {
    assert!(len <= MAX_LEN, "rc_mix holds at most {MAX_LEN} bytes");
    let data: Vec<u8> = (0..len as u32).map(|i| (i * 13 + 5) as u8).collect();
    a.write(0, &data).unwrap();
    b.write(40_000, &77u64.to_ne_bytes()).unwrap();
    qp1.post_recv(&RecvWr::new(50).sge(b.addr() + 20_000, MAX_LEN as u32, b.lkey()))
        .unwrap();
    data
}

/// The five requests, signaled, WR IDs 1 to 5 in this order: WRITE, SEND, READ,
/// FETCH_AND_ADD, CMP_AND_SWP (the last two depend on the order).
pub fn wrs(a: &MemoryRegion, b: &MemoryRegion, len: usize) -> [SendWr; 5] {
    let sig = SendFlags::SIGNALED;
    [
        SendWr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: b.addr(),
                rkey: b.rkey(),
            },
        )
        .sge(a.addr(), len as u32, a.lkey())
        .flags(sig),
        SendWr::new(2, WrOp::Send)
            .sge(a.addr(), len as u32 / 2 + 1, a.lkey())
            .flags(sig),
        SendWr::new(
            3,
            WrOp::RdmaRead {
                remote_addr: b.addr(),
                rkey: b.rkey(),
            },
        )
        .sge(a.addr() + 16_384, len as u32, a.lkey())
        .flags(sig),
        SendWr::new(
            4,
            WrOp::AtomicFetchAndAdd {
                remote_addr: b.addr() + 40_000,
                rkey: b.rkey(),
                add: 3,
            },
        )
        .sge(a.addr() + 36_000, 8, a.lkey())
        .flags(sig),
        SendWr::new(
            5,
            WrOp::AtomicCmpAndSwp {
                remote_addr: b.addr() + 40_000,
                rkey: b.rkey(),
                compare: 80,
                swap: 1,
            },
        )
        .sge(a.addr() + 36_008, 8, a.lkey())
        .flags(sig),
    ]
}

/// Checks NIC 0's five completions, NIC 1's receive completion and every byte the
/// workload moved. `what` names the model in the messages.
pub fn check(
    what: &str,
    a: &MemoryRegion,
    b: &MemoryRegion,
    data: &[u8],
    sent: &[WorkCompletion],
    received: &[WorkCompletion],
) {
    let len = data.len();
    let got: Vec<_> = sent.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        (1..=5).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
        "{what}: send completions"
    );
    let rx = &received[0];
    assert_eq!(
        (rx.wr_id, rx.status, rx.opcode, rx.byte_len),
        (50, WcStatus::Success, WcOpcode::Recv, len as u32 / 2 + 1),
        "{what}: receive completion"
    );
    let mut buf = vec![0u8; len];
    b.read(0, &mut buf).unwrap();
    assert!(buf == data, "{what}: WRITE data differs");
    a.read(16_384, &mut buf).unwrap();
    assert!(buf == data, "{what}: READ data differs");
    let mut sent = vec![0u8; len / 2 + 1];
    b.read(20_000, &mut sent).unwrap();
    assert!(sent[..] == data[..len / 2 + 1], "{what}: SEND data differs");
    let word = |mr: &MemoryRegion, at: usize| {
        let mut w = [0u8; 8];
        mr.read(at, &mut w).unwrap();
        u64::from_ne_bytes(w)
    };
    assert_eq!(
        word(a, 36_000),
        77,
        "{what}: FETCH_AND_ADD returns the old value"
    );
    assert_eq!(
        word(a, 36_008),
        80,
        "{what}: CMP_AND_SWP returns the old value"
    );
    assert_eq!(
        word(b, 40_000),
        1,
        "{what}: 80 after the add, then swapped for 1"
    );
}
