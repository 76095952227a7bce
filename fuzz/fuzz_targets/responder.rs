//! An RC responder fed arbitrary frame sequences (issue 3, issue 17): raw bytes, or real
//! requester frames with bytes patched and the checksums optionally fixed so forgeries
//! reach the transport (see `world::Script`). Half the inputs (odd lengths) run with
//! selective repeat.
//!
//! Invariants, whatever arrives:
//! * every DMA access lies in a window the responder may use: READs and atomics read,
//!   and WRITEs and atomics write, only the region registered with remote rights in the
//!   QP's PD; SENDs write only the posted receive buffer; a region with local rights
//!   only, a region of another PD with every right, and unregistered memory are never
//!   read or written (`world::Arena` panics at the access);
//! * receive completions only for posted receive WRs, each once, in order; after an
//!   error completion only flushes; no send completion at all (nothing was posted);
//! * nothing panics.
//!
//! The world (both engines, the requester's frames) is built once per process; each
//! input starts from a snapshot of the responder.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use roce_core::memory::AccessFlags;
use roce_core::num::{Qpn, Rkey};
use roce_core::transport::{Instant, Mtu, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};
use roce_core_fuzz::world::{
    connect, replay, run_script, Access, Completions, Conn, Queue, Script, Side,
};

/// The responder's pristine state and the requester frames, for one setting of
/// selective repeat.
struct World {
    pristine: Side,
    qb: Qpn,
    recvs: Vec<u64>,
    templates: Vec<Vec<u8>>,
}

fn world(sr: bool) -> World {
    let (mut a, mut b) = (Side::new(1), Side::new(2));
    let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
    let conn = |sq_psn, rq_psn| Conn {
        mtu: Mtu::Mtu1024,
        sq_psn,
        rq_psn,
        sr,
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    connect(&mut a, qa, QpType::Rc, ava, qb, conn(0x100, 0x200));
    connect(&mut b, qb, QpType::Rc, avb, qa, conn(0x200, 0x100));
    let (src, ka) = a.buffer(8192);
    a.mem
        .allow(src, 8192, Access::ReadWrite, "requester memory");

    let pd = b.pd;
    let (win, kw) = b.register(pd, 4096, AccessFlags::ALL);
    let (ro, kr) = b.register(pd, 4096, AccessFlags::LOCAL_WRITE);
    let other = b.other_pd;
    let (foreign, kf) = b.register(other, 4096, AccessFlags::ALL);
    let (rbuf, kb) = b.register(pd, 4096, AccessFlags::LOCAL_WRITE);
    let guard = b.mem.alloc(4096);
    for (addr, seed) in [(win, 1u8), (ro, 2), (foreign, 3), (rbuf, 4), (guard, 5)] {
        b.mem.fill(addr, 4096, seed);
    }
    b.mem
        .allow(win, 4096, Access::ReadWrite, "remote-access window");
    b.mem.allow(rbuf, 4096, Access::Write, "receive buffer");
    let recvs: Vec<u64> = (0..4).collect();
    for &i in &recvs {
        b.eng
            .post_recv(qb, &RecvWr::new(i).sge(rbuf, 4096, kb.lkey))
            .expect("post_recv");
    }

    // Real requester frames of every kind: first those the responder accepts (the last
    // of them invalidates the window's key), then those aimed at the local-only region
    // and at the other PD's region, which it must refuse.
    let (write, read) = (WrOp::rdma_write, WrOp::rdma_read);
    let wrs = [
        SendWr::new(1, write(win, kw.rkey)).sge(src, 3000, ka.lkey),
        SendWr::new(2, read(win, kw.rkey)).sge(src, 2000, ka.lkey),
        SendWr::new(3, WrOp::Send).sge(src, 100, ka.lkey),
        SendWr::new(
            4,
            WrOp::AtomicFetchAndAdd {
                remote_addr: win + 8,
                rkey: kw.rkey,
                add: 3,
            },
        )
        .sge(src, 8, ka.lkey),
        SendWr::new(
            5,
            WrOp::RdmaWriteWithImm {
                remote_addr: win + 100,
                rkey: kw.rkey,
                imm: 9,
            },
        )
        .sge(src, 5, ka.lkey),
        SendWr::new(
            6,
            WrOp::SendWithInv {
                rkey: Rkey(kw.rkey.0),
            },
        )
        .sge(src, 10, ka.lkey),
        SendWr::new(7, write(ro, kr.rkey)).sge(src, 64, ka.lkey),
        SendWr::new(8, write(foreign, kf.rkey)).sge(src, 64, ka.lkey),
        SendWr::new(
            9,
            WrOp::AtomicCmpAndSwp {
                remote_addr: ro,
                rkey: kr.rkey,
                compare: 0,
                swap: 1,
            },
        )
        .sge(src, 8, ka.lkey),
    ];
    for wr in &wrs {
        a.eng
            .post_send(qa, &wr.clone().flags(SendFlags::SIGNALED))
            .expect("post_send");
    }
    let templates = a.drain(Instant::ZERO);
    let got: Vec<_> = replay(&b, &templates)
        .iter()
        .map(|wc| (wc.wr_id, wc.status, wc.byte_len))
        .collect();
    // In order, the frames fill three receives; the WRITE into the local-only region is
    // a remote access error that takes the QP to ERR, flushing the last receive.
    let (ok, flush) = (WcStatus::Success, WcStatus::WrFlushErr);
    assert_eq!(got, [(0, ok, 100), (1, ok, 5), (2, ok, 10), (3, flush, 0)]);
    World {
        pristine: b,
        qb,
        recvs,
        templates,
    }
}

thread_local! {
    /// The two worlds (Go-Back-N, selective repeat) and the side each input runs on.
    static STATE: RefCell<Option<([World; 2], Side)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    STATE.with_borrow_mut(|state| {
        let (worlds, b) = state.get_or_insert_with(|| {
            let worlds = [world(false), world(true)];
            let b = worlds[0].pristine.clone();
            (worlds, b)
        });
        // Odd lengths run with selective repeat (every byte keeps its meaning).
        let w = &worlds[data.len() % 2];
        b.restore(&w.pristine);
        let mut done = Completions::new(vec![
            Queue::new(w.qb, true, w.recvs.clone()),
            Queue::new(w.qb, false, Vec::new()),
        ]);
        run_script(
            b,
            &mut Script::new(data),
            &w.templates,
            &mut done,
            &mut |_| {},
        );
    });
});
