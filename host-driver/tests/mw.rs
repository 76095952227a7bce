//! Memory windows and fast-registration MRs through the ABI (1.3), on two NICs of every
//! model (on the fast-path models a window's key misses the hardware's MR table, so its
//! packets go to the firmware, which checks windows): a type 2 window bound by a work
//! request opens part of an MR that has no remote rights of its own; a fast-registration
//! MR is registered, invalidated by the peer's SEND_WITH_INV and registered again under
//! a new key; an access outside the window fails with a remote access error. Statuses
//! and opcodes are rxe's (`IBV_WC_BIND_MW`, `IB_WC_REG_MR`, `REM_ACCESS_ERR`).

mod common;

use common::{models, Model};
use roce_core::memory::{AccessFlags, MwType};
use roce_core::num::{Psn, Rkey};
use roce_core::transport::{
    QpType, RecvWr, SendFlags, SendWr, WcFlags, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_device::NicModel;
use roce_host::{
    CompletionQueue, ConnectOptions, Context, MemoryRegion, MwBindInfo, ProtectionDomain, QueuePair,
};
use std::rc::Rc;

const SIG: SendFlags = SendFlags::SIGNALED;

struct Side {
    nic: Rc<dyn NicModel>,
    _ctx: Context,
    cq: CompletionQueue,
    pd: ProtectionDomain,
    mr: MemoryRegion,
}

fn side(m: Model, last: u8, access: AccessFlags) -> Side {
    let nic = m.boot(last).model;
    let ctx = Context::open(nic.clone()).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16).unwrap();
    let mr = pd
        .reg_mr(4096, access)
        .unwrap_or_else(|e| panic!("{m:?} {access:?} {e:?}"));
    Side {
        nic,
        _ctx: ctx,
        cq,
        pd,
        mr,
    }
}

/// Lets both NICs exchange frames until neither has anything to do; returns the
/// completions `s` then holds (waiting for at least one).
fn run(a: &Side, b: &Side, s: &Side) -> Vec<WorkCompletion> {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = a.nic.poll() | b.nic.poll();
        while let Some(n) = a.nic.transmit_frame(&mut buf) {
            b.nic.receive_frame(&buf[..n]);
            busy = true;
        }
        while let Some(n) = b.nic.transmit_frame(&mut buf) {
            a.nic.receive_frame(&buf[..n]);
            busy = true;
        }
        if !busy {
            return s.cq.wait(1, 100).unwrap();
        }
    }
}

fn one(wcs: &[WorkCompletion]) -> (u64, WcOpcode, WcStatus) {
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    (wcs[0].wr_id, wcs[0].opcode, wcs[0].status)
}

/// A 64-byte WRITE of `fill` bytes from A's region to `addr` under `rkey`.
fn write(a: &Side, qa: &QueuePair, addr: u64, rkey: Rkey, id: u64, fill: u8) {
    a.mr.write(0, &[fill; 64]).unwrap();
    let wr = SendWr::new(id, WrOp::rdma_write(addr, rkey))
        .sge(a.mr.addr(), 64, a.mr.lkey())
        .flags(SIG);
    qa.post_send(&wr).unwrap();
}

fn bytes(mr: &MemoryRegion, off: usize, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    mr.read(off, &mut v).unwrap();
    v
}

#[test]
fn windows_and_fast_registration_on_every_model() {
    for m in models() {
        windows_and_fast_registration(m);
    }
}

fn windows_and_fast_registration(m: Model) {
    let a = side(m, 1, AccessFlags::ALL);
    // B's region allows binding and local writes, and no remote access of its own.
    let b = side(m, 2, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND);
    let qa = a.pd.create_qp(QpType::Rc, &a.cq, &a.cq).build().unwrap();
    let qb = b.pd.create_qp(QpType::Rc, &b.cq, &b.cq).build().unwrap();
    let o = ConnectOptions::default();
    qa.connect(&qb.endpoint(Psn::new(1)), Psn::new(1), &o)
        .unwrap();
    qb.connect(&qa.endpoint(Psn::new(1)), Psn::new(1), &o)
        .unwrap();

    // A type 2 window over B's bytes 1024..2048.
    let mw = b.pd.alloc_mw(MwType::Type2).unwrap();
    let before = mw.rkey();
    let info = MwBindInfo {
        mr: Some(&b.mr),
        offset: 1024,
        length: 1024,
        access: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
    };
    let key = qb.bind_mw(&mw, &info, 1, SIG).unwrap();
    assert_eq!(
        key.0,
        before.0 & !0xFF | (before.0 + 1) & 0xFF,
        "ibv_inc_rkey"
    );
    assert_eq!(
        one(&run(&a, &b, &b)),
        (1, WcOpcode::BindMw, WcStatus::Success),
        "{m:?}"
    );
    let win = b.mr.addr() + 1024;
    write(&a, &qa, win + 960, key, 2, 0xA5);
    assert_eq!(
        one(&run(&a, &b, &a)),
        (2, WcOpcode::RdmaWrite, WcStatus::Success),
        "{m:?}"
    );
    assert_eq!(bytes(&b.mr, 1984, 64), vec![0xA5; 64]);
    // READ it back through the window.
    let rd = SendWr::new(3, WrOp::rdma_read(win + 960, key))
        .sge(a.mr.addr() + 2048, 64, a.mr.lkey())
        .flags(SIG);
    qa.post_send(&rd).unwrap();
    assert_eq!(
        one(&run(&a, &b, &a)),
        (3, WcOpcode::RdmaRead, WcStatus::Success)
    );
    assert_eq!(bytes(&a.mr, 2048, 64), vec![0xA5; 64]);

    // A fast-registration MR: registered by a work request, invalidated by the
    // peer's SEND_WITH_INV, registered again under a new key.
    let fr = b.pd.alloc_mr(512).unwrap();
    let rights = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let k1 = qb.reg_mr_wr(&fr, 0x31, rights, 4, SIG).unwrap();
    assert_eq!(
        one(&run(&a, &b, &b)),
        (4, WcOpcode::RegMr, WcStatus::Success)
    );
    write(&a, &qa, fr.addr() + 448, k1.rkey, 5, 0x11);
    assert_eq!(one(&run(&a, &b, &a)).2, WcStatus::Success);
    assert_eq!(bytes(&fr, 448, 64), vec![0x11; 64]);
    qb.post_recv(&RecvWr::new(6)).unwrap();
    qa.post_send(&SendWr::new(7, WrOp::SendWithInv { rkey: k1.rkey }).flags(SIG))
        .unwrap();
    assert_eq!(one(&run(&a, &b, &a)).2, WcStatus::Success);
    let wc = b.cq.wait(1, 100).unwrap();
    assert_eq!(one(&wc), (6, WcOpcode::Recv, WcStatus::Success));
    assert!(wc[0].wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(wc[0].invalidated_rkey, k1.rkey);
    let k2 = qb.reg_mr_wr(&fr, 0x32, rights, 8, SIG).unwrap();
    assert_eq!(
        one(&run(&a, &b, &b)),
        (8, WcOpcode::RegMr, WcStatus::Success)
    );
    write(&a, &qa, fr.addr(), k2.rkey, 9, 0x22);
    assert_eq!(one(&run(&a, &b, &a)).2, WcStatus::Success);
    assert_eq!(bytes(&fr, 0, 64), vec![0x22; 64]);

    // One byte beyond the window (inside the MR): refused, and nothing written.
    write(&a, &qa, win + 961, key, 10, 0xEE);
    assert_eq!(
        one(&run(&a, &b, &a)),
        (10, WcOpcode::RdmaWrite, WcStatus::RemAccessErr),
        "{m:?}"
    );
    assert_eq!(bytes(&b.mr, 2048, 64), vec![0; 64]);
}

/// A LOCAL_INV on a QP the fast path does not carry (a UC QP: its local operations run in
/// the firmware's transmit pass, not in the descriptor post) closes the key to the fast
/// path too: after its completion, a WRITE under the key fails with a remote access
/// error and changes nothing, as the engine alone does it (IBTA 10.6.5: an invalidated
/// key is no longer valid for remote access). On the fast-path models the hardware's MR
/// table kept the key until the firmware's next sync (after an event, a command or a
/// descriptor), so the WRITE was placed and completed with success.
#[test]
fn a_local_inv_on_a_uc_qp_closes_the_key_on_every_model() {
    for m in models() {
        local_inv_on_a_uc_qp(m);
    }
}

fn local_inv_on_a_uc_qp(m: Model) {
    let a = side(m, 1, AccessFlags::ALL);
    let b = side(m, 2, AccessFlags::ALL);
    let o = ConnectOptions::default();
    let pair = |t: QpType| {
        let qa = a.pd.create_qp(t, &a.cq, &a.cq).build().unwrap();
        let qb = b.pd.create_qp(t, &b.cq, &b.cq).build().unwrap();
        qa.connect(&qb.endpoint(Psn::new(1)), Psn::new(1), &o)
            .unwrap();
        qb.connect(&qa.endpoint(Psn::new(1)), Psn::new(1), &o)
            .unwrap();
        (qa, qb)
    };
    let (qa, qb) = pair(QpType::Rc);
    let (_ua, ub) = pair(QpType::Uc);
    let fr = b.pd.alloc_mr(512).unwrap();
    let rights = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let k = qb.reg_mr_wr(&fr, 0x41, rights, 1, SIG).unwrap();
    assert_eq!(
        one(&run(&a, &b, &b)),
        (1, WcOpcode::RegMr, WcStatus::Success),
        "{m:?}"
    );
    write(&a, &qa, fr.addr(), k.rkey, 2, 0x11);
    assert_eq!(one(&run(&a, &b, &a)).2, WcStatus::Success, "{m:?}");
    assert_eq!(bytes(&fr, 0, 64), vec![0x11; 64], "{m:?}");
    ub.post_send(&SendWr::new(3, WrOp::LocalInv { rkey: k.rkey }).flags(SIG))
        .unwrap();
    assert_eq!(
        one(&run(&a, &b, &b)),
        (3, WcOpcode::LocalInv, WcStatus::Success),
        "{m:?}"
    );
    write(&a, &qa, fr.addr(), k.rkey, 4, 0x22);
    assert_eq!(
        one(&run(&a, &b, &a)),
        (4, WcOpcode::RdmaWrite, WcStatus::RemAccessErr),
        "{m:?}: a WRITE under the invalidated key"
    );
    assert_eq!(bytes(&fr, 0, 64), vec![0x11; 64], "{m:?}");
}
