//! A buggy or hostile host against the firmware runtime (issue 17): arbitrary commands,
//! send and receive WQEs, doorbell values and ring indices, from the kernel's command
//! queue down to a tenant's rings, while a victim tenant on the same NIC runs a fixed
//! workload (WRITE, SEND, READ, FETCH_ADD between two RC QPs). `fuzz/src/nic.rs` says
//! what the hostile tenant controls and what the kernel filters.
//!
//! The hostile tenant also drives shared receive queues (CREATE/MODIFY/QUERY/DESTROY_SRQ,
//! QPs attached to them, WQEs and doorbells of their rings) and the GSI QP (QP1: created
//! as `QPT_GSI`, its doorbell pair at `reg::GSI_QP_INDEX`, UD sends to it with the GSI
//! Q_Key).
//!
//! The kernel also drives the port's commands (ABI 1.1, opcodes 12..=22: QUERY/MODIFY of
//! the MAC and MTU, the GID table, DCB, DCQCN, QUERY_COUNTERS; ABI 1.6, 30 and 31:
//! QUERY/MODIFY_ETS, the priority assignment table), and the hostile tenant
//! QUERY/MODIFY_QP_CC of its QPs (action bytes 0xE0..=0xEF).
//!
//! Memory windows and fast registration (ABI 1.3): the hostile tenant issues ALLOC_MW,
//! DEALLOC_MW and ALLOC_MR (command bytes 0xDD..=0xDF), posts BIND_MW, REG_MR,
//! LOCAL_INV and SEND_WITH_INV naming live windows and regions (the victim's among
//! them), and sends RDMA WRITEs and atomics through window R_Keys. The victim binds a
//! type 1 window onto its target region and a type 2 window that its atomic goes
//! through; the hostile tenant starts with an unbound window of each type and a
//! fast-registration MR.
//!
//! Invariants, whatever the host does:
//! * every DMA access is to a ring the host configured or to a live memory region of the
//!   tenant whose frame is being handled (`nic::HostMem` panics at the access); a QP on
//!   an SRQ never reads its own receive ring;
//! * the NIC's answers agree with what the host did: the GSI QP is QP1 and there is only
//!   one; QUERY_SRQ reports the depth an SRQ was created with and the limit last armed
//!   (or 0, disarmed by its event) (`nic::Shadow::apply`); each port command answers
//!   as `fuzz/src/port.rs` says (a MODIFY's status by `docs/abi.md`'s rules, `Busy` for
//!   the MAC and GID entry the victim's connected QPs use; a QUERY gives what was set;
//!   port counters never decrease);
//! * a request through a memory window touches memory only when the window, as it was
//!   when the frame arrived, allows it, and then only the range the request names; every
//!   bound window keeps IBTA's binding rules (C10-73 to C10-75: an MR of its own PD
//!   that allows binding and holds it, rights that fit); the victim's windows stay
//!   exactly as it bound them (`fuzz/src/mw.rs`);
//! * the victim's work completes exactly as it does with no hostile tenant: the same
//!   completions in the same order, the same bytes in its memory; its QPs are never
//!   stuck, whatever state the hostile QPs and CQs are driven into;
//! * nothing panics and no poll loops without end (libFuzzer's timeout).

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use roce_core::cc::ONE;
use roce_core::memory::{AccessFlags, MemoryRegion, MemoryWindow, MwBind};
use roce_core::num::{Lkey, Psn, Qkey, Qpn, Rkey};
use roce_core::transport::ipv4_gid;
use roce_core::transport::{
    AckTimeout, AddressVector, Mtu, QpAttr, QpState, RecvWr, RetryCount, RnrTimer, SendFlags,
    SendWr, WrOp,
};
use roce_core_fuzz::mw;
use roce_core_fuzz::nic::{
    admit, boot, confine, doorbell_index, gid, Host, Nic, QpRings, Shadow, HOSTILE, MAC, VICTIM,
};
use roce_firmware::abi::{self, reg, CmdEntry, CmdOp, PortArg, QpAttrArg, RecvWqe, SendWqe};

/// The victim's buffers (addresses in its arena) and keys.
#[derive(Clone, Copy)]
struct Victim {
    src: (u64, u32),
    win: (u64, u32),
    rdst: (u64, u32),
    rbuf: (u64, u32),
    result: (u64, u32),
    /// The type 2 window (bound by `qp2`) the victim's atomic goes through.
    atomic_rkey: u32,
    cq: (u32, u64, u8),
    qp1: QpRings,
    qp2: QpRings,
}

/// What the victim's work leaves: per completion (QPN, wr_id, status, opcode,
/// byte_len), grouped by QP in each QP's order, and the bytes of its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    completions: Vec<(u32, u64, u8, u8, u32)>,
    memory: Vec<u8>,
}

/// Bytes of victim memory compared at the end: everything from its first buffer to the
/// end of its last.
const VICTIM_MEM: usize = 5 * 4096;

struct World {
    nic: Nic,
    host: Host,
    victim: Victim,
    golden: Outcome,
}

fn reg_mr(h: &mut Host, nic: &mut Nic, pd: u32, addr: u64, len: u64, access: AccessFlags) -> u32 {
    h.ok(nic, CmdOp::RegMr, |e| {
        let a = abi::RegMrArg {
            pd: pd.into(),
            access: access.bits().into(),
            addr: addr.into(),
            length: len.into(),
            ..Default::default()
        };
        abi::set_payload(e, &a);
    })
}

fn create_cq(h: &mut Host, nic: &mut Nic, ring: u64, log: u8) -> u32 {
    h.ok(nic, CmdOp::CreateCq, |e| {
        let a = abi::CreateCqArg {
            ring: ring.into(),
            log_depth: log,
            ..Default::default()
        };
        abi::set_payload(e, &a);
    })
}

/// Creates a QP with 16-entry rings at `rings` (send ring first), on SRQ `srqn` if not
/// 0, and returns it.
fn create_qp(
    h: &mut Host,
    nic: &mut Nic,
    pd: u32,
    cq: u32,
    (qp_type, srqn): (u8, u32),
    rings: u64,
) -> QpRings {
    let qpn = h.ok(nic, CmdOp::CreateQp, |e| {
        let a = abi::CreateQpArg {
            pd: pd.into(),
            send_cq: cq.into(),
            recv_cq: cq.into(),
            qp_type,
            sq_log_depth: 4,
            rq_log_depth: 4,
            sq_sig_all: 0,
            sq_ring: rings.into(),
            rq_ring: (rings + 16 * 160).into(),
            srqn: srqn.into(),
            ..Default::default()
        };
        abi::set_payload(e, &a);
    });
    *nic.hal()
        .mem
        .shadow
        .qps
        .iter()
        .find(|q| q.qpn == qpn)
        .expect("the NIC confirmed the QP")
}

fn modify(h: &mut Host, nic: &mut Nic, qpn: u32, attr: &QpAttr) {
    h.ok(nic, CmdOp::ModifyQp, |e| {
        abi::set_payload(e, &QpAttrArg::from_attr(Qpn::new(qpn), attr));
    });
}

/// INIT, RTR, RTS towards `dest` on this NIC (RC or UC).
fn connect(h: &mut Host, nic: &mut Nic, qpn: u32, dest: u32, rc: bool) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qp_access_flags =
        Some(AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC);
    modify(h, nic, qpn, &init);
    let mut rtr = QpAttr::to_state(QpState::Rtr);
    rtr.ah_attr = Some(av());
    rtr.path_mtu = Some(Mtu::Mtu1024);
    rtr.dest_qp_num = Some(Qpn::new(dest));
    rtr.rq_psn = Some(Psn::new(dest * 1000));
    if rc {
        rtr.max_dest_rd_atomic = Some(4);
        rtr.min_rnr_timer = RnrTimer::new(1);
    }
    modify(h, nic, qpn, &rtr);
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(qpn * 1000));
    if rc {
        rts.timeout = AckTimeout::new(14);
        rts.retry_cnt = RetryCount::new(7);
        rts.rnr_retry = RetryCount::new(7);
        rts.max_rd_atomic = Some(4);
    }
    modify(h, nic, qpn, &rts);
}

/// A UD (or the GSI) QP through INIT and RTR to RTS, with Q_Key `qkey`.
fn ud_to_rts(h: &mut Host, nic: &mut Nic, qpn: u32, qkey: u32) {
    let mut init = QpAttr::to_state(QpState::Init);
    init.pkey_index = Some(0);
    init.port_num = Some(1);
    init.qkey = Some(Qkey(qkey));
    modify(h, nic, qpn, &init);
    modify(h, nic, qpn, &QpAttr::to_state(QpState::Rtr));
    let mut rts = QpAttr::to_state(QpState::Rts);
    rts.sq_psn = Some(Psn::new(0));
    modify(h, nic, qpn, &rts);
}

/// ALLOC_MW of type `mw_type` in `pd`: the window's R_Key.
fn alloc_mw(h: &mut Host, nic: &mut Nic, pd: u32, mw_type: u8) -> u32 {
    h.ok(nic, CmdOp::AllocMw, |e| {
        let a = abi::AllocMwArg {
            pd: pd.into(),
            mw_type,
            ..Default::default()
        };
        abi::set_payload(e, &a);
    })
}

/// Binds window `mw` through QP `qp` (completing on CQ `cq`) onto `len` bytes at
/// offset `off` of region `mr` with rights `access`, and returns its new R_Key.
fn bind(
    h: &mut Host,
    nic: &mut Nic,
    (qp, cq): (&QpRings, (u32, u64, u8)),
    mw: u32,
    (mr, off, len, access): ((u64, u32), u64, u64, AccessFlags),
) -> u32 {
    let rkey = mw & !0xFF | (mw + 1) & 0xFF;
    let b = MwBind {
        mw: Rkey(mw),
        rkey: Rkey(rkey),
        mr: Lkey(mr.1),
        addr: mr.0 + off,
        length: len,
        access,
    };
    let wr = SendWr::new(u64::from(mw), WrOp::BindMw(b)).flags(SendFlags::SIGNALED);
    h.post_send(nic, qp, &SendWqe::from_wr(&wr));
    for _ in 0..100 {
        nic.poll();
        if let Some(c) = h.poll_cq(nic, cq.0, cq.1, cq.2).first() {
            assert_eq!((c.status, c.opcode), (0, 5), "the victim's BIND_MW");
            return rkey;
        }
    }
    panic!("the victim's BIND_MW did not complete");
}

/// The NIC's memory windows now.
fn nic_windows(nic: &Nic) -> Vec<MemoryWindow> {
    nic.engine().memory().windows().copied().collect()
}

/// One poll of the NIC between the checks of `fuzz/src/mw.rs`: the windows' snapshot
/// before it, the binding rules after it.
fn poll(nic: &mut Nic) -> bool {
    // Buffers kept between polls: fresh vectors at each of an input's ~100 polls cost
    // more than the checks.
    SCRATCH.with_borrow_mut(|(qp_pds, windows, regions)| {
        qp_pds.clear();
        qp_pds.extend(nic.hal().mem.shadow.qps.iter().map(|q| (q.qpn, q.pd)));
        mw::refresh(nic.engine().memory().windows().copied(), qp_pds.drain(..));
        let busy = nic.poll();
        let mem = nic.engine().memory();
        windows.clear();
        windows.extend(mem.windows().copied());
        regions.clear();
        regions.extend(mem.regions().copied());
        mw::check_bindings(windows, regions, &nic.hal().mem.shadow.victim_windows);
        busy
    })
}

type Scratch = (Vec<(u32, u32)>, Vec<MemoryWindow>, Vec<MemoryRegion>);

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// This NIC's own address: the port loops frames back.
fn av() -> AddressVector {
    AddressVector {
        dmac: MAC,
        dgid: gid(),
        hop_limit: 64,
        ..Default::default()
    }
}

const HOSTILE_QKEY: u32 = 0x2222;
/// The GSI QP's well-known Q_Key (IBTA 13.5.1.2; `IB_QP1_QKEY`).
const GSI_QKEY: u32 = 0x8001_0000;

fn world() -> World {
    let mut nic = boot();
    let mut h = Host::default();
    // The victim tenant.
    let pd = h.ok(&mut nic, CmdOp::AllocPd, |_| {});
    let buf = |i: u64| VICTIM + 4096 * (i + 1);
    let remote = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let src = (
        buf(0),
        reg_mr(&mut h, &mut nic, pd, buf(0), 4096, AccessFlags::NONE),
    );
    let win = (
        buf(1),
        reg_mr(
            &mut h,
            &mut nic,
            pd,
            buf(1),
            4096,
            remote | AccessFlags::MW_BIND,
        ),
    );
    let lw = AccessFlags::LOCAL_WRITE;
    let rdst = (buf(2), reg_mr(&mut h, &mut nic, pd, buf(2), 4096, lw));
    let rbuf = (buf(3), reg_mr(&mut h, &mut nic, pd, buf(3), 1024, lw));
    let result = (buf(4), reg_mr(&mut h, &mut nic, pd, buf(4), 8, lw));
    let cq_ring = VICTIM + 8 * 4096;
    let cq = (create_cq(&mut h, &mut nic, cq_ring, 5), cq_ring, 5);
    let qp1 = create_qp(&mut h, &mut nic, pd, cq.0, (2, 0), VICTIM + 9 * 4096);
    let qp2 = create_qp(&mut h, &mut nic, pd, cq.0, (2, 0), VICTIM + 11 * 4096);
    connect(&mut h, &mut nic, qp1.qpn, qp2.qpn, true);
    connect(&mut h, &mut nic, qp2.qpn, qp1.qpn, true);
    // Its windows: type 1 over the first half of its target, type 2 (bound by qp2)
    // over the last 64 bytes, where its atomic goes.
    let remote_rw = AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
    let mw1 = alloc_mw(&mut h, &mut nic, pd, 1);
    bind(&mut h, &mut nic, (&qp1, cq), mw1, (win, 0, 2048, remote_rw));
    let mw2 = alloc_mw(&mut h, &mut nic, pd, 2);
    let atomic = AccessFlags::REMOTE_ATOMIC | AccessFlags::REMOTE_READ;
    let atomic_rkey = bind(&mut h, &mut nic, (&qp2, cq), mw2, (win, 4032, 64, atomic));
    let victim_windows = nic_windows(&nic);
    let mem = &mut nic.hal().mem;
    for (i, (addr, _)) in [src, win].into_iter().enumerate() {
        let bytes: Vec<u8> = (0..4096u32).map(|j| (j * 7 + i as u32) as u8).collect();
        mem.put(addr, &bytes);
    }
    let shadow: &mut Shadow = &mut mem.shadow;
    shadow.victim_pd = Some(pd);
    shadow.victim_windows = victim_windows;
    shadow.victim_cq = Some(cq.0);
    shadow.victim_qps = vec![qp1.qpn, qp2.qpn];
    nic.hal().port.victim_qps = vec![qp1.qpn, qp2.qpn];

    // The hostile tenant, with a region, a CQ, two connected RC QPs and a UD QP ready,
    // an SRQ with two receives posted and a UD QP on it, and the GSI QP (QP1).
    let hpd = h.ok(&mut nic, CmdOp::AllocPd, |_| {});
    let hkey = reg_mr(
        &mut h,
        &mut nic,
        hpd,
        HOSTILE,
        8192,
        AccessFlags::ALL | AccessFlags::MW_BIND,
    );
    // Windows of each type, unbound, and a fast-registration MR.
    alloc_mw(&mut h, &mut nic, hpd, 1);
    alloc_mw(&mut h, &mut nic, hpd, 2);
    h.ok(&mut nic, CmdOp::AllocMr, |e| {
        let a = abi::RegMrArg {
            pd: hpd.into(),
            length: 4096.into(),
            ..Default::default()
        };
        abi::set_payload(e, &a);
    });
    let hcq = create_cq(&mut h, &mut nic, HOSTILE + 8192, 4);
    let h1 = create_qp(&mut h, &mut nic, hpd, hcq, (2, 0), HOSTILE + 3 * 4096);
    let h2 = create_qp(&mut h, &mut nic, hpd, hcq, (2, 0), HOSTILE + 5 * 4096);
    let h3 = create_qp(&mut h, &mut nic, hpd, hcq, (4, 0), HOSTILE + 7 * 4096);
    connect(&mut h, &mut nic, h1.qpn, h2.qpn, true);
    connect(&mut h, &mut nic, h2.qpn, h1.qpn, true);
    ud_to_rts(&mut h, &mut nic, h3.qpn, HOSTILE_QKEY);
    let srqn = h.ok(&mut nic, CmdOp::CreateSrq, |e| {
        let a = abi::CreateSrqArg {
            pd: hpd.into(),
            log_depth: 4,
            srq_limit: 1.into(),
            ring: (HOSTILE + 9 * 4096).into(),
            ..Default::default()
        };
        abi::set_payload(e, &a);
    });
    let h4 = create_qp(&mut h, &mut nic, hpd, hcq, (4, srqn), HOSTILE + 10 * 4096);
    ud_to_rts(&mut h, &mut nic, h4.qpn, HOSTILE_QKEY);
    let srq = *nic.hal().mem.shadow.srqs.first().expect("the SRQ");
    for i in 0..2 {
        let wr = RecvWr::new(200 + i).sge(HOSTILE + 1024 * i, 1024, Lkey(hkey));
        h.post_srq_recv(&mut nic, &srq, &RecvWqe::from_wr(&wr));
    }
    let gsi = create_qp(
        &mut h,
        &mut nic,
        hpd,
        hcq,
        (abi::QPT_GSI, 0),
        HOSTILE + 11 * 4096,
    );
    ud_to_rts(&mut h, &mut nic, gsi.qpn, GSI_QKEY);

    let victim = Victim {
        src,
        win,
        rdst,
        rbuf,
        result,
        atomic_rkey,
        cq,
        qp1,
        qp2,
    };
    // The victim's work alone: what every input must reproduce.
    let golden = {
        let (mut nic, mut h) = (nic.clone(), h.clone());
        for i in 0..VICTIM_WRS {
            post_victim(&mut h, &mut nic, &victim, i);
        }
        finish(&mut h, &mut nic, &victim)
    };
    check_golden(&golden, &victim);
    World {
        nic,
        host: h,
        victim,
        golden,
    }
}

/// The victim's work requests, posted one at a time.
const VICTIM_WRS: usize = 5;

fn post_victim(h: &mut Host, nic: &mut Nic, v: &Victim, i: usize) {
    let sig = SendFlags::SIGNALED;
    let (src, win) = (v.src, v.win);
    let wr = match i {
        0 => {
            let wr = RecvWr::new(100).sge(v.rbuf.0, 1024, Lkey(v.rbuf.1));
            h.post_recv(nic, &v.qp2, &RecvWqe::from_wr(&wr));
            return;
        }
        1 => SendWr::new(1, WrOp::rdma_write(win.0, Rkey(win.1))).sge(src.0, 1500, Lkey(src.1)),
        2 => SendWr::new(2, WrOp::Send).sge(src.0 + 1500, 700, Lkey(src.1)),
        3 => SendWr::new(3, WrOp::rdma_read(win.0 + 2048, Rkey(win.1))).sge(
            v.rdst.0,
            1000,
            Lkey(v.rdst.1),
        ),
        _ => SendWr::new(
            4,
            WrOp::AtomicFetchAndAdd {
                remote_addr: win.0 + 4088,
                rkey: Rkey(v.atomic_rkey),
                add: 1,
            },
        )
        .sge(v.result.0, 8, Lkey(v.result.1)),
    };
    h.post_send(nic, &v.qp1, &SendWqe::from_wr(&wr.flags(sig)));
}

/// Runs the NIC until the victim has its five completions (or gives up: then the
/// outcome is short, and differs from the golden one).
fn finish(h: &mut Host, nic: &mut Nic, v: &Victim) -> Outcome {
    let mut completions = Vec::new();
    for _ in 0..20_000 {
        for c in h.poll_cq(nic, v.cq.0, v.cq.1, v.cq.2) {
            completions.push((
                c.qp_num.get(),
                c.wr_id.get(),
                c.status,
                c.opcode,
                c.byte_len.get(),
            ));
        }
        if completions.len() >= VICTIM_WRS {
            break;
        }
        let busy = poll(nic);
        let hal = nic.hal();
        hal.clock += 1_000;
        if !busy {
            if let Some(t) = nic.poll_timeout() {
                let hal = nic.hal();
                hal.clock = hal.clock.max(t);
            }
        }
    }
    // Each QP's completions in order; how the two QPs' interleave depends on timing.
    completions.sort_by_key(|c| c.0);
    let memory = nic
        .hal()
        .mem
        .get(v.src.0, VICTIM_MEM)
        .expect("victim memory");
    Outcome {
        completions,
        memory,
    }
}

/// The golden run did the victim's work right (so a difference is the hostile host's).
fn check_golden(g: &Outcome, v: &Victim) {
    let (q1, q2) = (v.qp1.qpn, v.qp2.qpn);
    let got: Vec<_> = g.completions.iter().map(|c| (c.0, c.1, c.2)).collect();
    assert_eq!(
        got,
        [(q1, 1, 0), (q1, 2, 0), (q1, 3, 0), (q1, 4, 0), (q2, 100, 0)],
        "the victim alone"
    );
    let at = |addr: u64, len: usize| {
        let off = (addr - v.src.0) as usize;
        &g.memory[off..off + len]
    };
    assert_eq!(at(v.win.0, 1500), at(v.src.0, 1500), "WRITE");
    assert_eq!(at(v.rbuf.0, 700), at(v.src.0 + 1500, 700), "SEND");
    assert_eq!(at(v.rdst.0, 1000), at(v.win.0 + 2048, 1000), "READ");
}

/// The fuzz input, read front to back; every read past the end gives `None`.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([
            self.u8()?,
            self.u8()?,
            self.u8()?,
            self.u8()?,
        ]))
    }
    /// One of `items` (by the next byte), or `None` when there is none.
    fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        let b = self.u8()?;
        (!items.is_empty()).then(|| items[usize::from(b) % items.len()])
    }
    /// A handle: one of `live` or (high bit of the byte set) a raw value.
    fn handle(&mut self, live: &[u32]) -> Option<u32> {
        let b = self.u8()?;
        if b & 0x80 != 0 || live.is_empty() {
            return Some(u32::from(b & 0x7F));
        }
        Some(live[usize::from(b) % live.len()])
    }
}

/// The hostile tenant's live objects (as the NIC confirmed them).
fn hostile_qps(s: &Shadow) -> Vec<QpRings> {
    s.qps
        .iter()
        .filter(|q| Some(q.pd) != s.victim_pd)
        .copied()
        .collect()
}

/// A command built from the input: an opcode, then its arguments with handles taken
/// from the live objects (or raw), addresses and sizes from the input.
fn command(inp: &mut Input, s: &Shadow, windows: &[MemoryWindow]) -> Option<CmdEntry> {
    let mut e = CmdEntry::default();
    let op = inp.u8()?;
    // 0..=12 (ABI 1.0 and an unknown one) as before SRQs existed, so older inputs keep
    // their meaning; the top bytes the SRQ commands 23..=26, the three below them the
    // memory-window commands 27..=29.
    let op = match op {
        0xE0.. => 23 + op % 4,
        0xDD.. => 27 + (op - 0xDD),
        _ => op % 13,
    };
    e.opcode.set(u16::from(op));
    let pds: Vec<u32> = s.pds.clone();
    let mrs: Vec<u32> = s.mrs.iter().map(|m| m.lkey).collect();
    let cqs: Vec<u32> = s.cqs.iter().map(|c| c.0).collect();
    let qps: Vec<u32> = s.qps.iter().map(|q| q.qpn).collect();
    let srqs: Vec<u32> = s.srqs.iter().map(|q| q.srqn).collect();
    let handle = match CmdOp::from_u16(e.opcode.get()) {
        Some(CmdOp::DeallocPd) => inp.handle(&pds)?,
        Some(CmdOp::DeregMr) => inp.handle(&mrs)?,
        Some(CmdOp::DestroyCq) => inp.handle(&cqs)?,
        Some(CmdOp::DestroyQp | CmdOp::QueryQp) => inp.handle(&qps)?,
        Some(CmdOp::DestroySrq | CmdOp::QuerySrq) => inp.handle(&srqs)?,
        Some(CmdOp::DeallocMw) => {
            // Any key the window has had names it: sometimes a stale tag.
            let keys: Vec<u32> = windows.iter().map(|w| w.rkey.0).collect();
            inp.handle(&keys)? ^ u32::from(inp.u8()? & 1)
        }
        Some(CmdOp::AllocMw) => {
            let a = abi::AllocMwArg {
                pd: inp.handle(&pds)?.into(),
                mw_type: inp.pick(&[1, 2, 0, 3])?,
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::AllocMr) => {
            let b = inp.u8()?;
            let a = abi::RegMrArg {
                pd: inp.handle(&pds)?.into(),
                // ALLOC_MR takes neither (else BadParam), rarely given.
                access: u32::from(b >> 6 & 1).into(),
                addr: u64::from(b >> 7).into(),
                length: match b & 0x3F {
                    0 => u64::MAX,
                    n => u64::from(n) * 256,
                }
                .into(),
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::CreateSrq) => {
            let a = abi::CreateSrqArg {
                pd: inp.handle(&pds)?.into(),
                log_depth: inp.u8()? % 17,
                srq_limit: u32::from(inp.u8()? % 20).into(),
                // Any offset: the ring must be 64-byte aligned.
                ring: u64::from(inp.u16()?).into(),
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::ModifySrq) => {
            let a = abi::SrqAttrArg {
                srqn: inp.handle(&srqs)?.into(),
                attr_mask: u32::from(inp.u8()? % 4).into(),
                max_wr: u32::from(inp.u8()?).into(),
                srq_limit: u32::from(inp.u8()? % 20).into(),
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::RegMr) => {
            let a = abi::RegMrArg {
                pd: inp.handle(&pds)?.into(),
                access: u32::from(inp.u8()? & 0x1F).into(),
                addr: u64::from(inp.u16()?).into(),
                length: match inp.u8()? {
                    0 => u64::MAX,
                    n => u64::from(n) * 64,
                }
                .into(),
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::CreateCq) => {
            let a = abi::CreateCqArg {
                ring: u64::from(inp.u16()?).into(),
                log_depth: inp.u8()? % 17,
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::CreateQp) => {
            let logs = inp.u8()?;
            let a = abi::CreateQpArg {
                pd: inp.handle(&pds)?.into(),
                send_cq: inp.handle(&cqs)?.into(),
                recv_cq: inp.handle(&cqs)?.into(),
                qp_type: inp.pick(&[2, 3, 4, 0, 9, abi::QPT_GSI])?,
                sq_log_depth: logs & 0x0F,
                rq_log_depth: logs >> 4,
                sq_sig_all: inp.u8()? & 1,
                sq_ring: u64::from(inp.u16()?).into(),
                rq_ring: u64::from(inp.u16()?).into(),
                db_record: u64::from(inp.u16()?).into(),
                // Mostly none; else a live SRQ or a raw number.
                srqn: match inp.u8()? {
                    b if b & 0x40 != 0 => inp.handle(&srqs)?,
                    _ => 0,
                }
                .into(),
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
            return Some(e);
        }
        Some(CmdOp::ModifyQp) => {
            let qpn = inp.handle(&qps)?;
            abi::set_payload(&mut e, &modify_arg(inp, qpn, &qps)?);
            return Some(e);
        }
        _ => 0,
    };
    abi::set_payload(
        &mut e,
        &abi::HandleArg {
            handle: handle.into(),
        },
    );
    Some(e)
}

/// MODIFY_QP arguments: the usual transitions with input-chosen values, or a raw mask.
fn modify_arg(inp: &mut Input, qpn: u32, qps: &[u32]) -> Option<QpAttrArg> {
    let state = inp.u8()?;
    let mut a = match state % 5 {
        0 => {
            let mut a = QpAttr::to_state(QpState::Init);
            a.pkey_index = Some(0);
            a.port_num = Some(1);
            a.qp_access_flags = AccessFlags::from_bits(u32::from(inp.u8()? & 0xF));
            a.qkey = Some(Qkey(HOSTILE_QKEY));
            a
        }
        1 => {
            let mut a = QpAttr::to_state(QpState::Rtr);
            a.ah_attr = Some(av());
            a.path_mtu = Mtu::from_u8(inp.u8()? % 6);
            a.dest_qp_num = Some(Qpn::new(inp.handle(qps)?));
            a.rq_psn = Some(Psn::new(u32::from(inp.u16()?)));
            a.max_dest_rd_atomic = Some(inp.u8()? % 8);
            a.min_rnr_timer = RnrTimer::new(inp.u8()? % 32);
            a
        }
        2 => {
            let mut a = QpAttr::to_state(QpState::Rts);
            a.sq_psn = Some(Psn::new(u32::from(inp.u16()?)));
            a.timeout = AckTimeout::new(inp.u8()? % 32);
            a.retry_cnt = RetryCount::new(inp.u8()? % 8);
            a.rnr_retry = RetryCount::new(inp.u8()? % 8);
            a.max_rd_atomic = Some(inp.u8()? % 8);
            a
        }
        3 => QpAttr::to_state(QpState::from_u8(inp.u8()? % 8).unwrap_or(QpState::Err)),
        _ => {
            let mut a = QpAttrArg::from_attr(Qpn::new(qpn), &QpAttr::default());
            a.attr_mask.set(inp.u32()?);
            a.qp_state = inp.u8()?;
            a.dest_qp_num.set(inp.handle(qps)?);
            return Some(a);
        }
    };
    if state & 0x80 != 0 {
        a.cur_qp_state = QpState::from_u8(inp.u8()? % 8);
    }
    Some(QpAttrArg::from_attr(Qpn::new(qpn), &a))
}

/// A local key: a live region's (the victim's among them) or raw, and an address near it.
fn key_addr(inp: &mut Input, s: &Shadow) -> Option<(u32, u64)> {
    let b = inp.u8()?;
    let off = u64::from(inp.u16()?);
    let Some(m) = (b & 0x80 == 0 && !s.mrs.is_empty()).then(|| s.mrs[usize::from(b) % s.mrs.len()])
    else {
        return Some((u32::from(b), HOSTILE + off));
    };
    Some((m.lkey, m.addr.wrapping_add(off % (m.len.min(8192) + 64))))
}

fn sges(inp: &mut Input, s: &Shadow) -> Option<(u8, [abi::WqeSge; abi::WQE_SGES])> {
    let n = inp.u8()? % 6;
    let mut sge = [abi::WqeSge::default(); abi::WQE_SGES];
    for x in sge.iter_mut().take(usize::from(n)) {
        let (lkey, addr) = key_addr(inp, s)?;
        *x = abi::WqeSge {
            addr: addr.into(),
            length: u32::from(inp.u16()? % 5000).into(),
            lkey: lkey.into(),
        };
    }
    Some((n, sge))
}

/// The NIC's keys when an action is drawn: its windows, and every region's key
/// (fast-registration MRs among them).
struct Keys {
    windows: Vec<MemoryWindow>,
    regions: Vec<u32>,
}

/// A window's R_Key (flag bit 6 of a WQE asks for one: a live window, its current key
/// or one with another tag) and an address in or near its binding.
fn window_addr(inp: &mut Input, k: &Keys) -> Option<(u32, u64)> {
    let w = inp.pick(&k.windows)?;
    let b = inp.u8()?;
    let base = w.binding.map_or(HOSTILE, |b| b.addr);
    let key = if b & 0x80 != 0 {
        w.rkey.0 ^ 1
    } else {
        w.rkey.0
    };
    Some((
        key,
        base.wrapping_add(u64::from(b & 0x7F) * 8).wrapping_sub(64),
    ))
}

fn send_wqe(inp: &mut Input, s: &Shadow, k: &Keys, wr_id: u64) -> Option<SendWqe> {
    let opcode = inp.pick(&[0, 1, 2, 3, 4, 5, 6, 7, 9, 8, 200, 0x20])?;
    let flags = inp.u8()?;
    let (num_sge, sge) = sges(inp, s)?;
    let (rkey, remote_addr) = match flags & 0x40 {
        0 => key_addr(inp, s)?,
        _ => window_addr(inp, k)?,
    };
    let qpns: Vec<u32> = s.qps.iter().map(|q| q.qpn).collect();
    let mut w = SendWqe {
        wr_id: wr_id.into(),
        opcode,
        send_flags: flags,
        num_sge,
        imm_or_inv: u32::from(inp.u8()?).into(),
        remote_addr: (remote_addr & !u64::from(flags >> 7)).into(),
        rkey: rkey.into(),
        remote_qpn: inp.handle(&qpns)?.into(),
        compare: u64::from(inp.u8()?).into(),
        swap_add: u64::from(inp.u8()?).into(),
        remote_qkey: inp.pick(&[HOSTILE_QKEY, 7, GSI_QKEY])?.into(),
        av: abi::WireAv::from_av(&av()),
        sge,
        ..Default::default()
    };
    local_op_fields(inp, s, k, &mut w)?;
    Some(w)
}

/// The fields of BIND_MW, REG_MR, LOCAL_INV and SEND_WITH_INV (`docs/abi.md`'s table):
/// live windows and regions (the victim's among them), in or out of bounds, any rights.
fn local_op_fields(inp: &mut Input, s: &Shadow, k: &Keys, w: &mut SendWqe) -> Option<()> {
    let windows: Vec<u32> = k.windows.iter().map(|w| w.rkey.0).collect();
    match w.opcode {
        8 => {
            w.imm_or_inv = inp.handle(&windows)?.into();
            let (lkey, addr) = key_addr(inp, s)?;
            w.swap_add = u64::from(lkey).into();
            w.remote_addr = addr.into();
            w.rkey = u32::from(inp.u8()?).into();
            w.compare = u64::from(inp.u16()? % 9000).into();
            w.remote_qkey = u32::from(inp.u8()? & 0x1F).into();
        }
        0x20 => {
            let key = inp.handle(&k.regions)?;
            w.imm_or_inv = key.into();
            // The kernel consumer maps its own pages (`ib_map_mr_sg`): the region lies
            // in the hostile arena.
            w.remote_addr = confine(u64::from(inp.u16()?)).into();
            w.rkey = (key & !0xFF | u32::from(inp.u8()?)).into();
            w.compare = u64::from(inp.u16()? % 9000).into();
            w.remote_qkey = u32::from(inp.u8()? & 0x1F).into();
        }
        7 | 9 => {
            let keys = [&windows[..], &k.regions[..]].concat();
            w.imm_or_inv = inp.handle(&keys)?.into();
        }
        _ => {}
    }
    Some(())
}

fn recv_wqe(inp: &mut Input, s: &Shadow, wr_id: u64) -> Option<RecvWqe> {
    let (num_sge, sge) = sges(inp, s)?;
    Some(RecvWqe {
        wr_id: wr_id.into(),
        num_sge,
        sge,
        ..Default::default()
    })
}

/// One hostile action, then one poll of the NIC. `None` when the input ran out.
fn act(inp: &mut Input, h: &mut Host, nic: &mut Nic, n: u64) -> Option<()> {
    // The shadow is taken out while the action reads it (a copy per action cost more
    // than the action) and put back before the NIC runs: only its DMA checks read it.
    let mut s = std::mem::take(&mut nic.hal().mem.shadow);
    let done = action(inp, h, nic, &mut s, n);
    nic.hal().mem.shadow = s;
    done?;
    poll(nic);
    nic.hal().clock += 1_000;
    Some(())
}

/// The action of [`act`]: the host's side only, the NIC does not run.
fn action(inp: &mut Input, h: &mut Host, nic: &mut Nic, s: &mut Shadow, n: u64) -> Option<()> {
    // What the NIC holds now (`Keys`, the hostile QPs) is gathered only by the actions
    // that draw from it: ~100 actions per input, most of them need neither.
    let keys = |nic: &Nic| {
        let mem = nic.engine().memory();
        Keys {
            windows: mem.windows().copied().collect(),
            regions: mem.regions().map(|m| m.key).collect(),
        }
    };
    let action = inp.u8()?;
    if action >= 0xF0 {
        return srq_act(inp, h, nic, s, n, action);
    }
    if action >= 0xE0 {
        return port_act(inp, h, nic, s);
    }
    match action % 8 {
        0 => {
            let mut e = command(inp, s, &keys(nic).windows)?;
            if admit(&mut e, s) {
                s.note_buffers(&e);
                h.command(nic, &e);
            }
        }
        1 => {
            let q = inp.pick(&hostile_qps(s))?;
            let w = send_wqe(inp, s, &keys(nic), n)?;
            if w.opcode == 0x20 {
                s.note_fast_reg(q.pd, &w);
            }
            h.post_send(nic, &q, &w);
        }
        2 => {
            let q = inp.pick(&hostile_qps(s))?;
            let w = recv_wqe(inp, s, n)?;
            h.post_recv(nic, &q, &w);
        }
        3 => {
            // A doorbell: the producer index moved by a small step either way, or any value.
            let q = inp.pick(&hostile_qps(s))?;
            let how = inp.u8()?;
            let pis = *h.pis(q.qpn);
            let index = doorbell_index(q.qpn);
            let (db, pi) = if how & 1 == 0 {
                (reg::sq_db(index), pis.1)
            } else {
                (reg::rq_db(index), pis.2)
            };
            let value = if how & 2 == 0 {
                pi.wrapping_add(u32::from(how >> 2)).wrapping_sub(16)
            } else {
                inp.u32()?
            };
            nic.hal().host_write(db, value);
        }
        4 => {
            // A hostile CQ: consumed as a driver would, or its doorbell set to anything.
            let cqs: Vec<_> = s.cqs.iter().filter(|c| Some(c.0) != s.victim_cq).collect();
            let &(cqn, ring, log) = inp.pick(&cqs)?;
            if inp.u8()? & 1 == 0 {
                h.poll_cq(nic, cqn, ring.addr, log);
            } else {
                let v = inp.u32()?;
                nic.hal().host_write(reg::cq_db(cqn), v);
            }
        }
        5 => {
            // The kernel's own bugs: a command-queue producer index or depth.
            let v = inp.u32()?;
            let hal = nic.hal();
            if v & 1 == 0 {
                hal.host_write(reg::CMDQ_PI, v >> 1);
            } else {
                hal.host_write(reg::CMDQ_LOG_DEPTH, v >> 1);
                hal.mem.set_cmdq_log(v >> 1);
            }
        }
        6 => {
            let wait = u64::from(inp.u8()?) * 100_000;
            nic.hal().clock += wait;
        }
        _ => {
            // Events acknowledged, or not.
            let v = inp.u32()?;
            nic.hal().host_write(reg::EVENT_STATUS, v);
        }
    }
    Some(())
}

/// An SRQ action (the action bytes 0xF0..): a receive WQE posted to a hostile SRQ, or
/// its doorbell moved by a small step either way or set to any value.
fn srq_act(
    inp: &mut Input,
    h: &mut Host,
    nic: &mut Nic,
    s: &Shadow,
    n: u64,
    action: u8,
) -> Option<()> {
    let srqs: Vec<_> = s
        .srqs
        .iter()
        .filter(|q| Some(q.pd) != s.victim_pd)
        .copied()
        .collect();
    let srq = inp.pick(&srqs)?;
    if action & 1 == 0 {
        let w = recv_wqe(inp, s, n)?;
        h.post_srq_recv(nic, &srq, &w);
    } else {
        let how = inp.u8()?;
        let pi = *h.srq_pi(srq.srqn);
        let value = if how & 1 == 0 {
            pi.wrapping_add(u32::from(how >> 1)).wrapping_sub(64)
        } else {
            inp.u32()?
        };
        nic.hal().host_write(reg::srq_db(srq.srqn), value);
    }
    Some(())
}

/// A port command (action bytes 0xE0..=0xEF): the kernel's QUERY/MODIFY of the port's
/// addresses and MTU, GID table, DCB, ETS and DCQCN (port-wide: no tenant issues them), a
/// tenant's QUERY/MODIFY_QP_CC (the kernel refuses the victim's QPs), QUERY_COUNTERS
/// into a buffer the kernel places; `nic::Shadow` (`fuzz/src/port.rs`) checks every
/// answer.
fn port_act(inp: &mut Input, h: &mut Host, nic: &mut Nic, s: &mut Shadow) -> Option<()> {
    let mut e = port_command(inp, s)?;
    if admit(&mut e, s) {
        s.note_buffers(&e);
        h.command(nic, &e);
    }
    Some(())
}

/// One of the port commands (12..=22, 1.6's QUERY_ETS and MODIFY_ETS 30 and 31) with
/// arguments from the input: mostly values a host would send, sometimes out-of-range or
/// raw ones.
fn port_command(inp: &mut Input, s: &Shadow) -> Option<CmdEntry> {
    let mut e = CmdEntry::default();
    let op = match inp.u8()? % 13 {
        11 => CmdOp::QueryEts as u8,
        12 => CmdOp::ModifyEts as u8,
        op => 12 + op,
    };
    e.opcode.set(u16::from(op));
    let qps: Vec<u32> = s.qps.iter().map(|q| q.qpn).collect();
    let port = &s.port;
    match CmdOp::from_u16(u16::from(op)) {
        Some(CmdOp::ModifyPort) => {
            let a = PortArg {
                mask: inp
                    .pick(&[PortArg::MTU, PortArg::MAC, PortArg::ALL, 0, 4, 0x8000_0001])?
                    .into(),
                mac: match inp.u8()? % 4 {
                    0 => port.mac,
                    1 => [0x02, 0, 0, 0, 0, inp.u8()?],
                    2 => [inp.u8()?, 0, 0, 0, 0, 1],
                    _ => [0; 6],
                },
                active_mtu: inp.u8()? % 8,
                reserved: 0,
            };
            abi::set_payload(&mut e, &a);
        }
        Some(CmdOp::QueryGid | CmdOp::ModifyGid) => {
            let index = match inp.u8()? {
                b if b & 0x80 != 0 => u16::from(b) << 1,
                b => u16::from(b % 20),
            };
            let gid = match inp.u8()? % 4 {
                0 => port.gids[0].map_or([0; 16], |g| g.0),
                1 => ipv4_gid([10, 0, 1, inp.u8()?]),
                2 => [0; 16],
                _ => {
                    let mut g = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                    g[15] = inp.u8()?;
                    g
                }
            };
            let a = abi::GidArg {
                index: index.into(),
                flags: inp.pick(&[abi::GidArg::VALID, 0, 3])?,
                roce_version: inp.pick(&[abi::GidArg::ROCE_V2, 1])?,
                vlan_id: inp.pick(&[abi::GidArg::NO_VLAN, 5, 0, 4095])?.into(),
                gid,
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
        }
        Some(CmdOp::ModifyDcb) => abi::set_payload(&mut e, &dcb_arg(inp, &port.dcb)?),
        Some(CmdOp::ModifyCc) => abi::set_payload(&mut e, &cc_arg(inp, &port.cc)?),
        Some(CmdOp::ModifyEts) => abi::set_payload(&mut e, &ets_arg(inp, port.ets())?),
        Some(CmdOp::QueryQpCc | CmdOp::ModifyQpCc) => {
            let a = abi::QpCcArg {
                qpn: inp.handle(&qps)?.into(),
                flags: inp.pick(&[abi::QpCcArg::RP, 0, 2])?,
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
        }
        Some(CmdOp::QueryCounters) => {
            let a = abi::QueryCountersArg {
                scope: inp.pick(&[0, 0, 1, 2])?,
                handle: inp.handle(&qps)?.into(),
                first: u16::from(inp.u8()? % 64).into(),
                count: u16::from(inp.u8()? % 64).into(),
                addr: u64::from(inp.u16()?).into(),
                ..Default::default()
            };
            abi::set_payload(&mut e, &a);
        }
        // The queries of the whole port take no argument; any bytes are ignored.
        _ => {}
    }
    Some(e)
}

/// MODIFY_DCB arguments: the current settings with some fields changed, in or out of
/// 802.1Qaz's rules, and a mask of some groups.
fn dcb_arg(inp: &mut Input, cur: &abi::DcbArg) -> Option<abi::DcbArg> {
    use abi::DcbArg as D;
    let mut a = *cur;
    a.mask = inp
        .pick(&[
            D::PFC,
            D::ETS,
            D::PCP_MAP,
            D::DSCP_MAP,
            D::PFC_THRESHOLDS,
            D::PCP_EGRESS,
            D::ALL,
            0,
            1 << 6,
        ])?
        .into();
    for _ in 0..inp.u8()? % 4 {
        let v = inp.u8()?;
        match inp.u8()? % 9 {
            0 => a.pfc_enable = v,
            1 => a.ets_strict = v,
            2 => {
                a.ets_bw = inp.pick(&[
                    [0, 80, 0, 20, 0, 0, 0, 0],
                    [13, 13, 12, 12, 12, 12, 13, 13],
                    [0; 8],
                    [50, 50, 0, 0, 0, 0, 0, 0],
                ])?
            }
            3 => a.ets_bw[usize::from(v % 8)] = inp.u8()? % 101,
            4 => a.pcp_prio[usize::from(v % 8)] = inp.u8()? % 9,
            5 => a.dscp_prio[usize::from(v % 64)] = inp.u8()? % 9,
            // 1.5: thresholds in and out of the buffer's rules, the egress map.
            6 => a.pfc_xoff = inp.pick(&[16_384, 65_536, 65_537, 0, 8_192])?.into(),
            7 => a.pfc_xon = inp.pick(&[8_192, 0, 16_384, 70_000])?.into(),
            _ => {
                if v & 1 == 0 {
                    a.pfc_quanta = inp.pick(&[0xFFFF, 0, 1, 500])?.into();
                } else {
                    a.prio_pcp[usize::from(v / 2 % 8)] = inp.u8()? % 9;
                }
            }
        }
    }
    Some(a)
}

/// MODIFY_ETS arguments (ABI 1.6): the current table and classes with some fields
/// changed, in or out of 802.1Qaz's rules (a class above 7, an algorithm neither strict
/// nor ETS, shares that do not add up), `ets_cap` and the reserved bytes anything.
fn ets_arg(inp: &mut Input, mut a: abi::EtsArg) -> Option<abi::EtsArg> {
    a.ets_cap = inp.u8()?;
    for _ in 0..inp.u8()? % 4 {
        let v = inp.u8()?;
        match inp.u8()? % 7 {
            0 => a.prio_tc[usize::from(v % 8)] = inp.u8()? % 9,
            1 => {
                a.prio_tc = inp.pick(&[
                    [0, 1, 2, 3, 4, 5, 6, 7],
                    [0; 8],
                    [0, 0, 1, 1, 2, 2, 3, 3],
                    [1, 0, 0, 0, 0, 0, 0, 7],
                ])?
            }
            2 => a.tc_tsa[usize::from(v % 8)] = inp.pick(&[0, 2, 1, 0xFF])?,
            3 => a.tc_tsa = if v & 1 == 0 { [0; 8] } else { [2; 8] },
            4 => {
                a.tc_tx_bw = inp.pick(&[
                    [0, 80, 0, 20, 0, 0, 0, 0],
                    [13, 13, 12, 12, 12, 12, 13, 13],
                    [0; 8],
                    [50, 50, 0, 0, 0, 0, 0, 0],
                    [100, 0, 0, 0, 0, 0, 0, 0],
                ])?
            }
            5 => a.tc_tx_bw[usize::from(v % 8)] = inp.u8()? % 101,
            _ => a.reserved[usize::from(v % 7)] = inp.u8()?,
        }
    }
    Some(a)
}

/// MODIFY_CC arguments: the current set with some fields changed, in or out of range.
fn cc_arg(inp: &mut Input, cur: &abi::CcArg) -> Option<abi::CcArg> {
    let mut a = *cur;
    for _ in 0..inp.u8()? % 4 {
        let v = inp.u8()?;
        match inp.u8()? % 10 {
            0 => a.flags = v % 8,
            1 => a.cnp_dscp = v % 70,
            2 => a.cnp_prio = v % 10,
            3 => {
                a.line_rate = inp
                    .pick(&[100_000_000_000, 25_000_000_000, 1_000, 0])?
                    .into()
            }
            4 => a.min_rate = inp.pick(&[0, 1_000, 200_000_000_000])?.into(),
            5 => a.g = inp.pick(&[ONE / 256, ONE, ONE + 1])?.into(),
            6 => a.initial_alpha = inp.pick(&[0, ONE, ONE + 1])?.into(),
            7 => a.cnp_interval_ns = u64::from(v).into(),
            8 => a.increase_timer_ns = (u64::from(v) * 1_000).into(),
            _ => a.reserved1 = u32::from(v).into(),
        }
    }
    Some(a)
}

thread_local! {
    static STATE: RefCell<Option<(World, Nic, Host)>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    STATE.with_borrow_mut(|state| {
        let (w, nic, host) = state.get_or_insert_with(|| {
            let w = world();
            let (nic, host) = (w.nic.clone(), w.host.clone());
            (w, nic, host)
        });
        nic.clone_from(&w.nic);
        host.clone_from(&w.host);
        let mut inp = Input(data);
        let mut posted = 0;
        for n in 0.. {
            if posted < VICTIM_WRS {
                post_victim(host, nic, &w.victim, posted);
                posted += 1;
            }
            if act(&mut inp, host, nic, n).is_none() {
                break;
            }
        }
        for i in posted..VICTIM_WRS {
            post_victim(host, nic, &w.victim, i);
        }
        let got = finish(host, nic, &w.victim);
        assert_eq!(
            got.completions, w.golden.completions,
            "the victim's completions differ from its run alone"
        );
        assert!(
            got.memory == w.golden.memory,
            "the victim's memory differs from its run alone"
        );
    });
});
