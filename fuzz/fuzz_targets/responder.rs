//! A responder with registered memory fed arbitrary frame sequences (issue 3): frames
//! are raw bytes, or real requester frames with bytes patched and the ICRC (and IPv4
//! checksum) optionally fixed so the forgeries reach the transport logic. Whatever
//! arrives, no byte of a region without remote access, and no byte outside every
//! region, may change; nothing may panic. Half the inputs run with selective repeat.

#![no_main]

#[path = "../../core/tests/common/mod.rs"]
mod common;

use common::{bring_up, Node, QpOpts};
use libfuzzer_sys::fuzz_target;
use roce_core::memory::AccessFlags;
use roce_core::num::Rkey;
use roce_core::transport::{AckTimeout, Instant, QpType, RecvWr, SendFlags, SendWr, SrAttr, WrOp};
use roce_core::wire::{self, icrc, ipv4, L3Repr};

struct World {
    b: Node,
    templates: Vec<Vec<u8>>,
    /// (address, length) of memory no frame may change.
    protected: Vec<(u64, usize)>,
}

/// `sr`: both ends use selective repeat, so WRITEs go out as WRITE_ONLY pieces and the
/// responder places pieces that arrive out of order.
fn world(sr: bool) -> World {
    let (mut a, mut b) = (Node::new(1), Node::new(2));
    let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
    let o = QpOpts {
        sr: sr.then(|| SrAttr {
            enabled: true,
            max_inflight: 0,
            rto_low: AckTimeout::new(3).unwrap_or(AckTimeout::INFINITE),
        }),
        ..QpOpts::default()
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    bring_up(&mut a, qa, QpType::Rc, ava, qb, &o, 0x100, 0x200);
    bring_up(&mut b, qb, QpType::Rc, avb, qa, &o, 0x200, 0x100);
    let (src, ka) = a.buffer(8192);
    let (win, kw) = b.buffer(4096);
    let (ro, kr) = b.buffer_with(4096, AccessFlags::LOCAL_WRITE);
    let guard = b.mem.alloc(4096);
    for (addr, seed) in [(win, 1u8), (ro, 2), (guard, 3)] {
        b.mem.fill_pattern(addr, 4096, seed);
    }
    let (rbuf, kb) = b.buffer(4096);
    for i in 0..4 {
        b.post_recv(qb, &RecvWr::new(i).sge(rbuf, 4096, kb.lkey));
    }
    // Real requester frames of every kind, aimed at the window and at the read-only region.
    let sig = SendFlags::SIGNALED;
    let wrs = [
        SendWr::new(
            1,
            WrOp::RdmaWrite {
                remote_addr: win,
                rkey: kw.rkey,
            },
        )
        .sge(src, 3000, ka.lkey),
        SendWr::new(
            2,
            WrOp::RdmaWrite {
                remote_addr: ro,
                rkey: kr.rkey,
            },
        )
        .sge(src, 64, ka.lkey),
        SendWr::new(
            3,
            WrOp::RdmaRead {
                remote_addr: win,
                rkey: kw.rkey,
            },
        )
        .sge(src, 2000, ka.lkey),
        SendWr::new(4, WrOp::Send).sge(src, 100, ka.lkey),
        SendWr::new(
            5,
            WrOp::AtomicFetchAndAdd {
                remote_addr: win + 8,
                rkey: kw.rkey,
                add: 3,
            },
        )
        .sge(src, 8, ka.lkey),
        SendWr::new(
            6,
            WrOp::AtomicCmpAndSwp {
                remote_addr: ro,
                rkey: kr.rkey,
                compare: 0,
                swap: 1,
            },
        )
        .sge(src, 8, ka.lkey),
        SendWr::new(
            7,
            WrOp::SendWithInv {
                rkey: Rkey(kw.rkey.0),
            },
        )
        .sge(src, 10, ka.lkey),
        SendWr::new(
            8,
            WrOp::RdmaWriteWithImm {
                remote_addr: win + 100,
                rkey: kw.rkey,
                imm: 9,
            },
        )
        .sge(src, 5, ka.lkey),
    ];
    for wr in &wrs {
        a.post_send(qa, &wr.clone().flags(sig));
    }
    let mut templates = Vec::new();
    let mut buf = vec![0u8; 4096 + 256];
    while let Some(n) = a
        .eng
        .poll_transmit(Instant::from_nanos(0), &mut buf, &mut a.mem)
    {
        templates.push(buf[..n].to_vec());
    }
    assert!(templates.len() >= wrs.len());
    World {
        b,
        templates,
        protected: vec![(ro, 4096), (guard, 4096)],
    }
}

/// Recomputes the IPv4 checksum and the ICRC of a frame that still parses far enough.
fn fix(frame: &mut [u8]) {
    let Ok(p) = wire::parse_unverified(frame) else {
        return;
    };
    let (layout, net) = (p.layout(), p.l3());
    let (l3, at) = (layout.l3, layout.icrc);
    let kind = net.icrc_kind();
    let v4 = matches!(net, L3Repr::Ipv4(_));
    if v4 {
        ipv4::Packet::new_unchecked(&mut frame[l3..]).fill_checksum();
    }
    if let Ok(crc) = icrc::compute(kind, &frame[l3..at]) {
        frame[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    // Inputs of odd length run with selective repeat (leaving every byte's meaning as
    // it was, so the corpus stays valid).
    let mut w = world(data.len() % 2 == 1);
    let before: Vec<Vec<u8>> = w
        .protected
        .iter()
        .map(|&(a, n)| w.b.mem.read(a, n))
        .collect();
    let mut input = data;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = input.split_at_checked(n)?;
        input = rest;
        Some(head)
    };
    let mut out = vec![0u8; 4096 + 256];
    let mut now = 0u64;
    while let Some(&[op]) = take(1) {
        let frame = if op & 3 == 0 {
            let Some(&[hi, lo]) = take(2) else { break };
            let len = usize::from(u16::from_be_bytes([hi, lo])) % 4400;
            match take(len) {
                Some(f) => f.to_vec(),
                None => break,
            }
        } else {
            let Some(&[t, n]) = take(2) else { break };
            let mut f = w.templates[usize::from(t) % w.templates.len()].clone();
            for _ in 0..n % 8 {
                let Some(&[o1, o2, v]) = take(3) else { break };
                let at = usize::from(u16::from_be_bytes([o1, o2])) % f.len();
                f[at] = v;
            }
            if op & 4 != 0 {
                fix(&mut f);
            }
            f
        };
        now += u64::from(op >> 3) * 1_000_000;
        let t = Instant::from_nanos(now);
        w.b.eng.handle_packet(t, &frame, &mut w.b.mem);
        w.b.eng.handle_timeout(t);
        while w.b.eng.poll_transmit(t, &mut out, &mut w.b.mem).is_some() {}
        w.b.poll();
    }
    for (&(a, n), old) in w.protected.iter().zip(&before) {
        assert!(
            w.b.mem.read(a, n) == *old,
            "protected memory at {a:#x} changed"
        );
    }
});
