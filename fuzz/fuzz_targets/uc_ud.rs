//! UC and UD receive fed arbitrary frame sequences (issue 17): raw bytes, or real UC
//! (SEND, WRITE, WRITE_WITH_IMM, SEND_WITH_IMM, multi-packet) and UD (SEND,
//! SEND_WITH_IMM) frames with bytes patched and the checksums optionally fixed (see
//! `world::Script`). One engine holds both QPs, so a frame meant for one may reach the
//! other.
//!
//! Invariants, whatever arrives (the memory rule of the `responder` target):
//! * every DMA access is a write into a posted receive buffer of the QP (UC, UD) or into
//!   the region the UC QP's peer may write; neither QP ever reads host memory (neither
//!   answers anything), and a local-only region, another PD's region with every right,
//!   and unregistered memory are never touched;
//! * receive completions only for posted receive WRs of that QP, each once, in order,
//!   after an error only flushes, never more bytes than the buffer holds; no send
//!   completion (nothing was posted);
//! * neither QP transmits anything (UC and UD send no acknowledgements);
//! * nothing panics.

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use roce_core::memory::AccessFlags;
use roce_core::num::{Qkey, Qpn};
use roce_core::transport::{
    Instant, Mtu, QpType, RecvWr, SendFlags, SendWr, UdDest, WcStatus, WrOp, GRH_LEN,
};
use roce_core_fuzz::world::{
    connect, connect_ud, replay, run_script, Access, Completions, Conn, Queue, Script, Side,
};

const QKEY: Qkey = Qkey(0x1111_0000);
/// Bytes of each receive buffer.
const UC_RECV: u32 = 1024;
const UD_RECV: u32 = GRH_LEN as u32 + 256;

struct World {
    pristine: Side,
    queues: Vec<Queue>,
    templates: Vec<Vec<u8>>,
}

fn world() -> World {
    let (mut a, mut b) = (Side::new(1), Side::new(2));
    let (ua, ub) = (a.create_qp(QpType::Uc), b.create_qp(QpType::Uc));
    let (da, db) = (a.create_qp(QpType::Ud), b.create_qp(QpType::Ud));
    let conn = |sq_psn, rq_psn| Conn {
        mtu: Mtu::Mtu256,
        sq_psn,
        rq_psn,
        sr: false,
    };
    let (ava, avb) = (a.av_to(&b), b.av_to(&a));
    connect(&mut a, ua, QpType::Uc, ava, ub, conn(0xFF_FFFE, 0x40));
    connect(&mut b, ub, QpType::Uc, avb, ua, conn(0x40, 0xFF_FFFE));
    connect_ud(&mut a, da, QKEY);
    connect_ud(&mut b, db, QKEY);

    let (src, ks) = a.buffer(1024);
    a.mem.allow(src, 1024, Access::ReadWrite, "sender memory");
    a.mem.fill(src, 1024, 1);

    let pd = b.pd;
    let (win, kw) = b.register(pd, 1024, AccessFlags::ALL);
    let (urb, ku) = b.register(pd, UC_RECV as usize, AccessFlags::LOCAL_WRITE);
    let (drb, kd) = b.register(pd, UD_RECV as usize, AccessFlags::LOCAL_WRITE);
    let (ro, _) = b.register(pd, 512, AccessFlags::LOCAL_WRITE);
    let other = b.other_pd;
    let (foreign, kf) = b.register(other, 512, AccessFlags::ALL);
    b.mem
        .allow(win, 1024, Access::Write, "UC remote-write window");
    b.mem
        .allow(urb, UC_RECV as usize, Access::Write, "UC receive buffer");
    b.mem
        .allow(drb, UD_RECV as usize, Access::Write, "UD receive buffer");
    b.mem.fill(ro, 512, 2);
    b.mem.fill(foreign, 512, 3);
    let uc_recvs: Vec<u64> = (0..4).collect();
    let ud_recvs: Vec<u64> = (10..14).collect();
    for &i in &uc_recvs {
        let wr = RecvWr::new(i).sge(urb, UC_RECV, ku.lkey);
        b.eng.post_recv(ub, &wr).expect("post_recv UC");
    }
    for &i in &ud_recvs {
        let wr = RecvWr::new(i).sge(drb, UD_RECV, kd.lkey);
        b.eng.post_recv(db, &wr).expect("post_recv UD");
    }

    let ud = UdDest {
        av: a.av_to(&b),
        remote_qpn: db,
        remote_qkey: QKEY,
    };
    let uc_wrs = [
        SendWr::new(1, WrOp::Send).sge(src, 600, ks.lkey),
        SendWr::new(2, WrOp::rdma_write(win, kw.rkey)).sge(src, 500, ks.lkey),
        SendWr::new(3, WrOp::rdma_write(foreign, kf.rkey)).sge(src, 64, ks.lkey),
        SendWr::new(
            4,
            WrOp::RdmaWriteWithImm {
                remote_addr: win + 600,
                rkey: kw.rkey,
                imm: 7,
            },
        )
        .sge(src, 100, ks.lkey),
        SendWr::new(5, WrOp::SendWithImm { imm: 8 }).sge(src, 20, ks.lkey),
    ];
    for wr in &uc_wrs {
        a.eng
            .post_send(ua, &wr.clone().flags(SendFlags::SIGNALED))
            .expect("post_send UC");
    }
    let ud_wrs = [
        SendWr::new(6, WrOp::Send).sge(src, 200, ks.lkey),
        SendWr::new(7, WrOp::SendWithImm { imm: 9 }),
    ];
    for wr in &ud_wrs {
        let wr = wr.clone().flags(SendFlags::SIGNALED).ud(ud);
        a.eng.post_send(da, &wr).expect("post_send UD");
    }
    let templates = a.drain(Instant::ZERO);
    // The frames as sent fill the receives they should, and nothing else.
    let mut got: Vec<_> = replay(&b, &templates)
        .iter()
        .map(|wc| (wc.qp_num, wc.wr_id, wc.status, wc.byte_len))
        .collect();
    got.sort_by_key(|&(q, id, ..)| (q, id));
    let ok = WcStatus::Success;
    let ud_len = GRH_LEN as u32;
    assert_eq!(
        got,
        [
            (ub, 0, ok, 600),
            (ub, 1, ok, 100),
            (ub, 2, ok, 20),
            (db, 10, ok, ud_len + 200),
            (db, 11, ok, ud_len)
        ]
    );
    World {
        pristine: b,
        queues: vec![
            Queue::new(ub, true, uc_recvs),
            Queue::new(ub, false, Vec::new()),
            Queue::new(db, true, ud_recvs),
            Queue::new(db, false, Vec::new()),
        ],
        templates,
    }
}

/// The receive buffer length of QP `qpn`'s WRs.
fn recv_len(w: &World, qpn: Qpn) -> u32 {
    if qpn == w.queues[0].qpn {
        UC_RECV
    } else {
        UD_RECV
    }
}

thread_local! {
    static STATE: RefCell<Option<(World, Side)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    STATE.with_borrow_mut(|state| {
        let (w, b) = state.get_or_insert_with(|| {
            let w = world();
            let b = w.pristine.clone();
            (w, b)
        });
        b.restore(&w.pristine);
        let mut done = Completions::new(w.queues.clone());
        let mut sent = 0;
        run_script(
            b,
            &mut Script::new(data),
            &w.templates,
            &mut done,
            &mut |_| sent += 1,
        );
        assert_eq!(sent, 0, "a UC or UD receiver transmitted");
        for wc in &done.seen {
            if wc.status == WcStatus::Success {
                assert!(
                    wc.byte_len <= recv_len(w, wc.qp_num),
                    "more bytes than the buffer: {wc:?}"
                );
            }
        }
    });
});
