//! Memory windows (type 1 and type 2) and fast-registration MRs between two engines:
//! binding, remote access through a window and outside it, invalidation (local and by
//! the peer's SEND_WITH_INV), re-keying an invalidated MR by REG_MR. Expected statuses
//! and opcodes are rxe's (`rxe_do_local_ops`: a failed bind completes MW_BIND_ERR, a
//! failed REG_MR or LOCAL_INV LOC_QP_OP_ERR; a refused R_Key is NAKed "remote access
//! error", REM_ACCESS_ERR at the requester).

mod common;

use common::*;
use roce_core::memory::{AccessFlags, FastReg, MrKeys, MwBind, MwType};
use roce_core::num::{Lkey, Qpn, Rkey};
use roce_core::transport::{
    QpState, QpType, RecvWr, SendFlags, SendWr, WcFlags, WcOpcode, WcStatus, WrOp,
};

const SIG: SendFlags = SendFlags::SIGNALED;

fn remote_rw() -> AccessFlags {
    AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE
}

/// B's buffer of `len` bytes registered for local write and binding only: no remote
/// right of its own, so only a window opens it to the peer.
fn bindable(n: &mut Node, len: usize) -> (u64, MrKeys) {
    n.buffer_with(len, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
}

fn bind(mw: Rkey, tag: u8, mr: Lkey, addr: u64, length: u64, access: AccessFlags) -> WrOp {
    WrOp::BindMw(MwBind {
        mw,
        rkey: Rkey(mw.0 & !0xFF | u32::from(tag)),
        mr,
        addr,
        length,
        access,
    })
}

/// The last completion of `n` as (wr_id, opcode, status).
fn last(n: &Node) -> (u64, WcOpcode, WcStatus) {
    let w = n.wcs.last().expect("a completion");
    (w.wr_id, w.opcode, w.status)
}

/// A WRITEs 64 bytes of a pattern to `addr` under `rkey` on `qa`; returns the status.
fn write(p: &mut Pair, qa: Qpn, addr: u64, rkey: Rkey, id: u64) -> WcStatus {
    let (src, ka) = p.a.buffer(64);
    p.a.mem.fill_pattern(src, 64, id as u8);
    p.a.post_send(
        qa,
        &SendWr::new(id, WrOp::rdma_write(addr, rkey))
            .sge(src, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    let st = last(&p.a);
    assert_eq!(st.0, id);
    if st.2 == WcStatus::Success {
        assert_eq!(p.b.mem.read(addr, 64), p.a.mem.read(src, 64));
    }
    st.2
}

#[test]
fn a_type2_window_opens_exactly_its_range_to_the_qp_that_bound_it() {
    let mut p = Pair::new(1);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 512);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type2).unwrap();
    // Unbound: nothing reaches memory through it.
    assert!(p.b.eng.memory().window(mw).unwrap().binding.is_none());
    p.b.post_send(
        qb,
        &SendWr::new(7, bind(mw, 0x5A, kb.lkey, base + 128, 256, remote_rw())).flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.b), (7, WcOpcode::BindMw, WcStatus::Success));
    let key = Rkey(mw.0 & !0xFF | 0x5A);
    assert!(
        p.b.eng.memory().window(mw).is_none(),
        "the old tag is stale"
    );
    // WRITE and READ inside the window.
    assert_eq!(write(&mut p, qa, base + 128, key, 1), WcStatus::Success);
    assert_eq!(write(&mut p, qa, base + 320, key, 2), WcStatus::Success);
    let (rd, ka) = p.a.buffer(64);
    p.a.post_send(
        qa,
        &SendWr::new(3, WrOp::rdma_read(base + 128, key))
            .sge(rd, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.a), (3, WcOpcode::RdmaRead, WcStatus::Success));
    assert_eq!(p.a.mem.read(rd, 64), p.b.mem.read(base + 128, 64));
    // One byte past the window's end (still inside the MR): refused, the connection
    // fails with a remote access error on both sides.
    assert_eq!(
        write(&mut p, qa, base + 128 + 256 - 63, key, 4),
        WcStatus::RemAccessErr
    );
    assert_eq!(p.b.state(qb), QpState::Err);
    assert_eq!(
        p.b.mem.read(base + 384, 64),
        vec![0; 64],
        "nothing written past the window"
    );
}

#[test]
fn the_mr_key_itself_gives_no_remote_access() {
    let mut p = Pair::new(2);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 256);
    assert_eq!(write(&mut p, qa, base, kb.rkey, 1), WcStatus::RemAccessErr);
}

#[test]
fn a_type2_window_is_refused_to_another_qp_and_beyond_its_rights() {
    let mut p = Pair::new(3);
    let (qa1, qb1) = p.connect(QpType::Rc, &QpOpts::default());
    let (qa2, _qb2) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 256);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type2).unwrap();
    p.b.post_send(
        qb1,
        &SendWr::new(1, bind(mw, 1, kb.lkey, base, 256, AccessFlags::REMOTE_READ)).flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.b).2, WcStatus::Success);
    let key = Rkey(mw.0 & !0xFF | 1);
    // Read-only window: a WRITE through it is refused.
    assert_eq!(write(&mut p, qa1, base, key, 2), WcStatus::RemAccessErr);
    // Another QP of the same PD may not use a type 2 window at all.
    let (rd, ka) = p.a.buffer(64);
    p.a.post_send(
        qa2,
        &SendWr::new(3, WrOp::rdma_read(base, key))
            .sge(rd, 64, ka.lkey)
            .flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.a), (3, WcOpcode::RdmaRead, WcStatus::RemAccessErr));
}

#[test]
fn invalidating_a_type2_window_frees_it_for_a_new_bind_with_a_new_tag() {
    let mut p = Pair::new(4);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 256);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type2).unwrap();
    let k1 = Rkey(mw.0 & !0xFF | 0x11);
    let k2 = Rkey(mw.0 & !0xFF | 0x22);
    p.b.post_send(
        qb,
        &SendWr::new(1, bind(mw, 0x11, kb.lkey, base, 256, remote_rw())).flags(SIG),
    );
    // Binding a bound type 2 window is not allowed (o10-37.2.30): it must be freed.
    p.b.post_send(qb, &SendWr::new(2, WrOp::LocalInv { rkey: k1 }).flags(SIG));
    p.b.post_send(
        qb,
        &SendWr::new(3, bind(k1, 0x22, kb.lkey, base, 128, remote_rw())).flags(SIG),
    );
    p.settle();
    let got: Vec<_> =
        p.b.wcs
            .iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect();
    assert_eq!(
        got,
        vec![
            (1, WcOpcode::BindMw, WcStatus::Success),
            (2, WcOpcode::LocalInv, WcStatus::Success),
            (3, WcOpcode::BindMw, WcStatus::Success),
        ]
    );
    assert_eq!(write(&mut p, qa, base, k2, 4), WcStatus::Success);
    // The first tag names nothing any more.
    assert_eq!(write(&mut p, qa, base, k1, 5), WcStatus::RemAccessErr);
}

#[test]
fn send_with_invalidate_frees_the_peers_type2_window() {
    let mut p = Pair::new(5);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 256);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type2).unwrap();
    let key = Rkey(mw.0 & !0xFF | 9);
    p.b.post_send(
        qb,
        &SendWr::new(1, bind(mw, 9, kb.lkey, base, 256, remote_rw())).flags(SIG),
    );
    p.b.post_recv(qb, &RecvWr::new(2));
    p.settle();
    assert_eq!(write(&mut p, qa, base, key, 3), WcStatus::Success);
    p.a.post_send(
        qa,
        &SendWr::new(4, WrOp::SendWithInv { rkey: key }).flags(SIG),
    );
    p.settle();
    let w = *p.b.wcs.last().unwrap();
    assert_eq!(
        (w.wr_id, w.opcode, w.status),
        (2, WcOpcode::Recv, WcStatus::Success)
    );
    assert!(w.wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(w.invalidated_rkey, key);
    assert!(p.b.eng.memory().window(key).unwrap().binding.is_none());
    assert_eq!(write(&mut p, qa, base, key, 5), WcStatus::RemAccessErr);
}

#[test]
fn a_type1_window_serves_every_qp_of_its_pd_until_rebound() {
    let mut p = Pair::new(6);
    let (qa1, qb1) = p.connect(QpType::Rc, &QpOpts::default());
    let (qa2, _qb2) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 512);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type1).unwrap();
    p.b.post_send(
        qb1,
        &SendWr::new(1, bind(mw, 1, kb.lkey, base, 256, remote_rw())).flags(SIG),
    );
    p.settle();
    let k1 = Rkey(mw.0 & !0xFF | 1);
    assert_eq!(write(&mut p, qa1, base, k1, 2), WcStatus::Success);
    assert_eq!(write(&mut p, qa2, base + 64, k1, 3), WcStatus::Success);
    // Rebinding moves the window (new tag); a type 1 window is rebound, never
    // invalidated.
    p.b.post_send(
        qb1,
        &SendWr::new(4, bind(k1, 2, kb.lkey, base + 256, 256, remote_rw())).flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.b), (4, WcOpcode::BindMw, WcStatus::Success));
    let k2 = Rkey(mw.0 & !0xFF | 2);
    assert_eq!(write(&mut p, qa2, base + 256, k2, 5), WcStatus::Success);
    assert_eq!(write(&mut p, qa2, base, k2, 6), WcStatus::RemAccessErr);
}

/// Posts one local WR on a fresh connection's B side, then a zero-length WRITE (which
/// needs nothing of A); the first completion B gets and B's QP state afterwards.
fn local_op_on_fresh_qp(
    seed: u64,
    make: impl FnOnce(&mut Node) -> WrOp,
) -> ((u64, WcOpcode, WcStatus), QpState) {
    let mut p = Pair::new(seed);
    let (_qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let op = make(&mut p.b);
    p.b.post_send(qb, &SendWr::new(1, op).flags(SIG));
    p.b.post_send(qb, &SendWr::new(2, WrOp::rdma_write(0, Rkey(0))).flags(SIG));
    p.settle();
    let first =
        p.b.wcs
            .first()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .unwrap();
    (first, p.b.state(qb))
}

#[test]
fn bind_errors_complete_mw_bind_err_and_fail_the_qp() {
    let bind_err = ((1, WcOpcode::BindMw, WcStatus::MwBindErr), QpState::Err);
    // C10-73: the MR was registered without MW_BIND.
    let got = local_op_on_fresh_qp(10, |b| {
        let (base, k) = b.buffer_with(256, AccessFlags::ALL);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base, 64, remote_rw())
    });
    assert_eq!(got, bind_err);
    // C10-74: a writable window on an MR the NIC may not write locally.
    let got = local_op_on_fresh_qp(11, |b| {
        let (base, k) = b.buffer_with(256, AccessFlags::MW_BIND);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base, 64, AccessFlags::REMOTE_WRITE)
    });
    assert_eq!(got, bind_err);
    // The same MR takes a read-only window.
    let got = local_op_on_fresh_qp(12, |b| {
        let (base, k) = b.buffer_with(256, AccessFlags::MW_BIND);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base, 64, AccessFlags::REMOTE_READ)
    });
    assert_eq!(
        got,
        ((1, WcOpcode::BindMw, WcStatus::Success), QpState::Rts)
    );
    // C10-75: the window must lie inside the MR.
    let got = local_op_on_fresh_qp(13, |b| {
        let (base, k) = bindable(b, 256);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base + 200, 57, remote_rw())
    });
    assert_eq!(got, bind_err);
    // o10-37.2.40: a type 2 window is not unbound by a zero-length bind.
    let got = local_op_on_fresh_qp(14, |b| {
        let (base, k) = bindable(b, 256);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base, 0, remote_rw())
    });
    assert_eq!(got, bind_err);
    // A stale window key (wrong tag).
    let got = local_op_on_fresh_qp(15, |b| {
        let (base, k) = bindable(b, 256);
        let mw = b.eng.alloc_mw(b.pd, MwType::Type2).unwrap();
        bind(Rkey(mw.0 ^ 1), 1, k.lkey, base, 64, remote_rw())
    });
    assert_eq!(got, bind_err);
    // A window of another PD (C10-72).
    let got = local_op_on_fresh_qp(16, |b| {
        let (base, k) = bindable(b, 256);
        let pd2 = b.eng.alloc_pd().unwrap();
        let mw = b.eng.alloc_mw(pd2, MwType::Type2).unwrap();
        bind(mw, 1, k.lkey, base, 64, remote_rw())
    });
    assert_eq!(got, bind_err);
    // C10-72 for a type 1 window too: a QP of another PD can neither unbind it
    // (length 0) nor rebind it, even onto an MR of the window's PD. Found by the `abi`
    // fuzz target (seed `fuzz/seeds/abi/unbind_of_another_pds_type1_window`): a hostile
    // tenant's QP unbound the victim's window.
    for (seed, length) in [(18, 0), (19, 64)] {
        let got = local_op_on_fresh_qp(seed, |b| {
            let pd2 = b.eng.alloc_pd().unwrap();
            let base = b.mem.alloc(256);
            let access = AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND;
            let k = b.eng.reg_mr(pd2, base, 256, access).unwrap();
            let mw = b.eng.alloc_mw(pd2, MwType::Type1).unwrap();
            bind(mw, 1, k.lkey, base, length, remote_rw())
        });
        assert_eq!(got, bind_err, "length {length}");
    }
    // o10-37.2.26: a type 1 window cannot be invalidated.
    let got = local_op_on_fresh_qp(17, |b| {
        let mw = b.eng.alloc_mw(b.pd, MwType::Type1).unwrap();
        WrOp::LocalInv { rkey: mw }
    });
    assert_eq!(
        got,
        ((1, WcOpcode::LocalInv, WcStatus::LocQpOpErr), QpState::Err)
    );
}

#[test]
fn an_mr_with_a_window_bound_cannot_be_deregistered_or_invalidated() {
    let mut p = Pair::new(20);
    let (_qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (base, kb) = bindable(&mut p.b, 256);
    let mw = p.b.eng.alloc_mw(p.b.pd, MwType::Type1).unwrap();
    p.b.post_send(
        qb,
        &SendWr::new(1, bind(mw, 1, kb.lkey, base, 64, remote_rw())).flags(SIG),
    );
    p.settle();
    assert!(p.b.eng.dereg_mr(kb.lkey).is_err());
    assert!(p.b.eng.invalidate_key(p.b.pd, kb.lkey.0).is_err());
    assert!(p.b.eng.dealloc_pd(p.b.pd).is_err());
    // Unbinding a type 1 window (length 0) releases the MR.
    let k1 = Rkey(mw.0 & !0xFF | 1);
    p.b.post_send(
        qb,
        &SendWr::new(2, bind(k1, 2, Lkey(0), 0, 0, AccessFlags::NONE)).flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.b), (2, WcOpcode::BindMw, WcStatus::Success));
    p.b.eng.dereg_mr(kb.lkey).unwrap();
    p.b.eng.dealloc_mw(Rkey(mw.0 & !0xFF | 2)).unwrap();
}

fn reg(mr: MrKeys, tag: u8, addr: u64, length: u64) -> WrOp {
    WrOp::RegMr(FastReg {
        mr: mr.lkey,
        key: mr.lkey.0 & !0xFF | u32::from(tag),
        addr,
        length,
        access: AccessFlags::LOCAL_WRITE | remote_rw(),
    })
}

fn with_tag(k: MrKeys, tag: u8) -> MrKeys {
    let key = k.lkey.0 & !0xFF | u32::from(tag);
    MrKeys {
        lkey: Lkey(key),
        rkey: Rkey(key),
    }
}

#[test]
fn fast_register_invalidate_and_register_again() {
    let mut p = Pair::new(30);
    let (qa, _qb) = p.connect(QpType::Rc, &QpOpts::default());
    let buf = p.b.mem.alloc(1024);
    let mr = p.b.eng.alloc_mr(p.b.pd, 512).unwrap();
    // Free until registered.
    assert_eq!(write(&mut p, qa, buf, mr.rkey, 1), WcStatus::RemAccessErr);

    let mut p = Pair::new(31);
    let (qa, qb2) = p.connect(QpType::Rc, &QpOpts::default());
    let buf = p.b.mem.alloc(1024);
    let mr = p.b.eng.alloc_mr(p.b.pd, 512).unwrap();
    p.b.post_send(qb2, &SendWr::new(1, reg(mr, 0x40, buf, 512)).flags(SIG));
    p.settle();
    assert_eq!(last(&p.b), (1, WcOpcode::RegMr, WcStatus::Success));
    let k1 = with_tag(mr, 0x40);
    assert_eq!(write(&mut p, qa, buf + 448, k1.rkey, 2), WcStatus::Success);
    // Invalidate by the peer's SEND_WITH_INV, then re-key onto the next 512 bytes.
    p.b.post_recv(qb2, &RecvWr::new(3));
    p.a.post_send(
        qa,
        &SendWr::new(4, WrOp::SendWithInv { rkey: k1.rkey }).flags(SIG),
    );
    p.settle();
    assert_eq!(last(&p.a), (4, WcOpcode::Send, WcStatus::Success));
    assert!(!p.b.eng.memory().get(k1.lkey.0).unwrap().valid);
    p.b.post_send(
        qb2,
        &SendWr::new(5, reg(k1, 0x41, buf + 512, 512)).flags(SIG),
    );
    // Registering a valid MR again is refused (rxe: "not free").
    p.b.post_send(
        qb2,
        &SendWr::new(
            6,
            WrOp::LocalInv {
                rkey: Rkey(k1.lkey.0 & !0xFF | 0x41),
            },
        )
        .flags(SIG),
    );
    p.b.post_send(
        qb2,
        &SendWr::new(7, reg(with_tag(mr, 0x41), 0x42, buf + 512, 512)).flags(SIG),
    );
    p.settle();
    let got: Vec<_> =
        p.b.wcs
            .iter()
            .map(|w| (w.wr_id, w.opcode, w.status))
            .collect();
    assert_eq!(
        &got[got.len() - 3..],
        &[
            (5, WcOpcode::RegMr, WcStatus::Success),
            (6, WcOpcode::LocalInv, WcStatus::Success),
            (7, WcOpcode::RegMr, WcStatus::Success),
        ]
    );
    let k3 = with_tag(mr, 0x42);
    assert_eq!(write(&mut p, qa, buf + 512, k3.rkey, 8), WcStatus::Success);
    // The old keys name nothing.
    assert_eq!(
        write(&mut p, qa, buf + 512, k1.rkey, 9),
        WcStatus::RemAccessErr
    );
}

#[test]
fn fast_register_errors_complete_loc_qp_op_err() {
    let err = |id| ((id, WcOpcode::RegMr, WcStatus::LocQpOpErr), QpState::Err);
    // Longer than the MR was allocated for.
    let got = local_op_on_fresh_qp(40, |b| {
        let mr = b.eng.alloc_mr(b.pd, 256).unwrap();
        reg(mr, 1, 0x1000, 257)
    });
    assert_eq!(got, err(1));
    // Already valid.
    let got = local_op_on_fresh_qp(41, |b| {
        let (_, k) = b.buffer(64);
        reg(k, 1, 0x1000, 64)
    });
    assert_eq!(got, err(1));
    // Changing more than the key's low byte.
    let got = local_op_on_fresh_qp(42, |b| {
        let mr = b.eng.alloc_mr(b.pd, 256).unwrap();
        WrOp::RegMr(FastReg {
            mr: mr.lkey,
            key: mr.lkey.0 ^ 0x100,
            addr: 0x1000,
            length: 64,
            access: AccessFlags::LOCAL_WRITE,
        })
    });
    assert_eq!(got, err(1));
    // Remote write without local write.
    let got = local_op_on_fresh_qp(43, |b| {
        let mr = b.eng.alloc_mr(b.pd, 256).unwrap();
        WrOp::RegMr(FastReg {
            mr: mr.lkey,
            key: mr.lkey.0,
            addr: 0x1000,
            length: 64,
            access: AccessFlags::REMOTE_WRITE,
        })
    });
    assert_eq!(got, err(1));
    // An MR of another PD.
    let got = local_op_on_fresh_qp(44, |b| {
        let pd2 = b.eng.alloc_pd().unwrap();
        let mr = b.eng.alloc_mr(pd2, 256).unwrap();
        reg(mr, 1, 0x1000, 64)
    });
    assert_eq!(got, err(1));
}
