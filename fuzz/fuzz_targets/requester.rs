//! An RC requester with work in flight fed forged responses (issue 17): ACKs, NAKs, READ
//! responses and atomic ACKs, raw or made from the real responder's answers with bytes
//! patched and the checksums optionally fixed (see `world::Script`). Half the inputs
//! (odd lengths) run with selective repeat.
//!
//! Invariants, whatever arrives:
//! * completions only for posted WRs, each exactly once, in posting order; after an error
//!   completion only flushes;
//! * liveness: once the frames stop, the timers run out (one retry, one RNR retry) and
//!   every posted WR has completed, successfully or not: no WR is left stuck;
//! * the requester reads only the buffers its WRITEs and SENDs gather from, and writes
//!   only the buffers of its READs and atomics (a region of every right that no WR
//!   names, and unregistered memory, are never touched: `world::Arena` panics there);
//! * nothing panics.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use roce_core::memory::AccessFlags;
use roce_core::num::Qpn;
use roce_core::transport::{Instant, Mtu, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};
use roce_core_fuzz::world::{
    connect, replay, run_script, settle, Access, Completions, Conn, Queue, Script, Side,
};

/// The requester's state with every request sent and none answered, and the responder's
/// answers.
struct World {
    pristine: Side,
    qa: Qpn,
    posted: Vec<u64>,
    templates: Vec<Vec<u8>>,
}

fn world(sr: bool) -> World {
    let (mut a, mut b) = (Side::new(1), Side::new(2));
    let (qa, qb) = (a.create_qp(QpType::Rc), b.create_qp(QpType::Rc));
    let conn = |sq_psn, rq_psn| Conn {
        mtu: Mtu::Mtu256,
        sq_psn,
        rq_psn,
        sr,
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    connect(&mut a, qa, QpType::Rc, ava, qb, conn(0xFF_FFF0, 0x200));
    connect(&mut b, qb, QpType::Rc, avb, qa, conn(0x200, 0xFF_FFF0));

    let (src, ks) = a.register(a.pd, 1024, AccessFlags::NONE);
    let (rdst, kr) = a.register(a.pd, 700, AccessFlags::LOCAL_WRITE);
    let (small, km) = a.register(a.pd, 24, AccessFlags::LOCAL_WRITE);
    let (spare, _) = a.buffer(1024);
    a.mem.fill(src, 1024, 1);
    a.mem.fill(spare, 1024, 2);
    a.mem.allow(src, 1024, Access::Read, "send/write source");
    a.mem.allow(rdst, 700, Access::Write, "READ destination");
    a.mem
        .allow(small, 24, Access::Write, "atomic results, small READ");

    let (win, kw) = b.buffer(2048);
    let (rbuf, kb) = b.buffer(1024);
    b.mem
        .allow(win, 2048, Access::ReadWrite, "responder window");
    b.mem
        .allow(rbuf, 1024, Access::ReadWrite, "responder receive buffer");
    b.mem.fill(win, 2048, 3);
    for i in 0..4 {
        b.eng
            .post_recv(qb, &RecvWr::new(i).sge(rbuf, 1024, kb.lkey))
            .expect("post_recv");
    }

    let wrs = [
        SendWr::new(1, WrOp::rdma_write(win, kw.rkey)).sge(src, 600, ks.lkey),
        SendWr::new(2, WrOp::rdma_read(win, kw.rkey)).sge(rdst, 700, kr.lkey),
        SendWr::new(3, WrOp::Send).sge(src, 300, ks.lkey),
        SendWr::new(
            4,
            WrOp::AtomicFetchAndAdd {
                remote_addr: win + 1024,
                rkey: kw.rkey,
                add: 5,
            },
        )
        .sge(small, 8, km.lkey),
        SendWr::new(
            5,
            WrOp::AtomicCmpAndSwp {
                remote_addr: win + 1032,
                rkey: kw.rkey,
                compare: 0,
                swap: 7,
            },
        )
        .sge(small + 8, 8, km.lkey),
        SendWr::new(6, WrOp::rdma_read(win + 16, kw.rkey)).sge(small + 16, 8, km.lkey),
        SendWr::new(
            7,
            WrOp::RdmaWriteWithImm {
                remote_addr: win + 1500,
                rkey: kw.rkey,
                imm: 0x1234,
            },
        )
        .sge(src, 10, ks.lkey),
        SendWr::new(8, WrOp::SendWithImm { imm: 0x5678 }),
    ];
    for wr in &wrs {
        a.eng
            .post_send(qa, &wr.clone().flags(SendFlags::SIGNALED))
            .expect("post_send");
    }
    let requests = a.drain(Instant::ZERO);
    // The responder's answers to every request, and to every request again (the
    // duplicates' answers: repeated READ responses, replayed atomic results).
    let mut templates = Vec::new();
    for _ in 0..2 {
        for f in &requests {
            b.eng.handle_packet(Instant::ZERO, f, &mut b.mem);
            templates.extend(b.drain(Instant::ZERO));
        }
    }
    // The answers complete every WR, successfully and in order.
    let got: Vec<_> = replay(&a, &templates)
        .iter()
        .map(|wc| (wc.wr_id, wc.status))
        .collect();
    let want: Vec<_> = wrs.iter().map(|w| (w.wr_id, WcStatus::Success)).collect();
    assert_eq!(got, want);
    World {
        pristine: a,
        qa,
        posted: wrs.iter().map(|w| w.wr_id).collect(),
        templates,
    }
}

thread_local! {
    static STATE: RefCell<Option<([World; 2], Side)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    STATE.with_borrow_mut(|state| {
        let (worlds, a) = state.get_or_insert_with(|| {
            let worlds = [world(false), world(true)];
            let a = worlds[0].pristine.clone();
            (worlds, a)
        });
        let w = &worlds[data.len() % 2];
        a.restore(&w.pristine);
        let mut done = Completions::new(vec![
            Queue::new(w.qa, false, w.posted.clone()),
            Queue::new(w.qa, true, Vec::new()),
        ]);
        let now = run_script(
            a,
            &mut Script::new(data),
            &w.templates,
            &mut done,
            &mut |_| {},
        );
        assert!(
            settle(a, now, 64, &mut done),
            "timers still armed after 64 expiries"
        );
        for q in &done.queues {
            assert!(
                q.all_done(),
                "posted WRs never completed: {q:?}; completions {:?}",
                done.seen
            );
        }
    });
});
