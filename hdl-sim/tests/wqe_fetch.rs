//! The WQE fetch in RTL (`rtl/fp_sqf.sv` in `roce_fp_top`, `docs/fastpath.md` §3.8)
//! against the model's (`roce_firmware::fastpath::FastPathPort`'s `sq_*` methods, the
//! rule `roce_core::fastpath::wqe_msg`): the same `FastPath` calls on `FpPort` and on
//! the model, over the same host memory, must give the same decisions (WQEs taken, of
//! them SENDs, where the fetch stops or waits), the same frames byte for byte, the same
//! deadline and the same state at the take-back. The WQEs cover what the fetch takes
//! (WRITE, SEND, with immediate, signaled or not, solicited, zero-length SGEs with any
//! key, RDMA_READ, CMP_AND_SWP, FETCH_AND_ADD) and each reason it stops at one (an L_Key
//! the table does not hold, a foreign PD, a range past the MR, an invalidated MR, the
//! firmware's reserved key, inline, fence, a misaligned or two-SGE atomic, a READ into
//! an MR without local write, SEND_WITH_INV, five SGEs, more than 2^31 bytes, a producer
//! index past the ring, a ring the host cannot read) or holds back (the engine's
//! send-queue depth, the READ and atomic credits of `max_rd_atomic`).

mod common;

use common::host_mem::HostMem;
use common::Wire;
use roce_core::fastpath::layout;
use roce_core::fastpath::{ack_frame, AckDesc, MrEntry, RecvCtx, SendCtx, SqIdle};
use roce_core::memory::{AccessFlags, Dma, Pd};
use roce_core::num::{Lkey, Msn, Psn, Qpn, Rkey};
use roce_core::transport::{Mtu, SendFlags, SendWr, WrOp};
use roce_core::wire::aeth::{NakCode, Syndrome};
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::udp::{UdpRepr, ROCEV2_PORT};
use roce_core::wire::{HeaderTemplate, L3Repr};
use roce_firmware::abi::SendWqe;
use roce_firmware::fastpath::{CqRing, FastPathPort, SqBack, SqRing, SqRung};
use roce_firmware::hal::FastPath;
use roce_hdl_sim::{rtl_available, DataWidth, FpPort, FP_CTX_ENTRIES};
use std::net::Ipv4Addr;
use zerocopy::IntoBytes;

const MEM_BASE: u64 = 0x10_0000;
const MEM_LEN: usize = 96 * 1024;
/// The send ring (16 WQEs), the send CQ, the data the WQEs point at.
const RING: u64 = MEM_BASE;
const RING_LOG: u8 = 4;
const CQ_RING: u64 = MEM_BASE + 0x1000;
const DATA: u64 = MEM_BASE + 0x2000;
const DATA_LEN: u64 = 0x10000;
/// The QP (in context entry 3), its MR (table entry 5) and the PDs.
const QPN: u32 = 3 + FP_CTX_ENTRIES as u32;
const MR_INDEX: u32 = 5;
const KEY: u32 = (MR_INDEX << 8) | 0x3C;
const PD: u16 = 2;
const CQ: u16 = 7;
const PSN: u32 = 0xFF_FFF0;
const RTO: u64 = 4_096_000;

fn template() -> HeaderTemplate {
    headers(1, 2, 50_000)
}

/// The headers from host `from` (10.0.0.`from`, MAC 2:0:0:0:0:`from`) to host `to`, UDP
/// source port `sport`.
fn headers(from: u8, to: u8, sport: u16) -> HeaderTemplate {
    let eth = EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, to]),
        src: MacAddr([2, 0, 0, 0, 0, from]),
        ethertype: 0,
    };
    let l3 = L3Repr::Ipv4(Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, from),
        dst: Ipv4Addr::new(10, 0, 0, to),
        ..Ipv4Repr::default()
    });
    let udp = UdpRepr {
        src_port: sport,
        dst_port: ROCEV2_PORT,
        checksum: 0,
    };
    HeaderTemplate::new(&eth, None, &l3, Some(&udp)).expect("template")
}

/// The QP's contexts, its MR (and a second one of another PD, and an invalidated one)
/// and its send CQ, written the same way into either fast path.
fn setup(fp: &mut dyn FastPath) {
    fp.set_port([2, 0, 0, 0, 0, 1], [0; 16]);
    let q = Qpn::new(QPN);
    let ctx = SendCtx {
        valid: true,
        template: template(),
        pkey: 0xFFFF,
        dest_qpn: Qpn::new(0x1234),
        mtu: Mtu::Mtu1024,
        sr: false,
        max_pkts_per_ack: 64,
        next_psn: Psn::new(PSN),
        noack: 0,
        una_psn: Psn::new(PSN),
        window: 1 << 20,
    };
    fp.write_sctx(q, 0, &layout::encode_sctx(&ctx));
    let rctx = RecvCtx {
        access: AccessFlags::LOCAL_WRITE,
        ..RecvCtx::idle(q, Pd::from_index(PD), Mtu::Mtu1024)
    };
    fp.write_rctx(q, &layout::encode_rctx(&rctx));
    let rw = AccessFlags::LOCAL_WRITE;
    for (index, key, pd, valid, access) in [
        (MR_INDEX, KEY, PD, true, rw),
        (MR_INDEX + 1, ((MR_INDEX + 1) << 8) | 1, PD + 1, true, rw),
        (MR_INDEX + 2, ((MR_INDEX + 2) << 8) | 1, PD, false, rw),
        // read-only: a SEND or WRITE may use it, a READ or atomic may not
        (
            MR_INDEX + 3,
            ((MR_INDEX + 3) << 8) | 1,
            PD,
            true,
            AccessFlags::NONE,
        ),
    ] {
        let e = MrEntry {
            key,
            pd: Pd::from_index(pd),
            base: DATA,
            length: DATA_LEN,
            access,
            valid,
        };
        fp.write_mr(index as usize, &layout::encode_mr(&e));
    }
    if let Some(w) = fp.cq_writer() {
        w.set(
            CQ,
            Some(CqRing {
                ring: CQ_RING,
                log_depth: 4,
                pi: 0,
                ci: 0,
            }),
        );
    }
    fp.set_send_cq(q, Some(CQ));
}

fn wqe(wr: &SendWr) -> [u8; 160] {
    let mut b = [0u8; 160];
    b.copy_from_slice(SendWqe::from_wr(wr).as_bytes());
    b
}

/// An atomic (`op` 5 CMP_AND_SWP, 6 FETCH_AND_ADD) into an 8-byte buffer, its remote
/// address `misalign` bytes off an 8-byte boundary.
fn atomic(op: u8, misalign: u64) -> SendWr {
    let (remote_addr, rkey) = (0xABCD_0000 + misalign, Rkey(0x77));
    let wr = if op == 5 {
        WrOp::AtomicCmpAndSwp {
            remote_addr,
            rkey,
            compare: 1,
            swap: 2,
        }
    } else {
        WrOp::AtomicFetchAndAdd {
            remote_addr,
            rkey,
            add: 3,
        }
    };
    SendWr::new(0x2000, wr)
        .sge(DATA + 8, 8, Lkey(KEY))
        .flags(SendFlags::SIGNALED)
}

fn write(len: u32, off: u64) -> SendWr {
    SendWr::new(
        0x1000 + off,
        WrOp::RdmaWrite {
            remote_addr: 0xABCD_0000 + off,
            rkey: Rkey(0x77),
        },
    )
    .sge(DATA + off, len, Lkey(KEY))
    .flags(SendFlags::SIGNALED)
}

/// What the fetch must take: every kind, signaled or not, solicited, several SGEs,
/// zero-length SGEs whatever their key, a message of 0 bytes.
fn good() -> Vec<[u8; 160]> {
    let send = |id: u64| SendWr::new(id, WrOp::Send);
    vec![
        wqe(&write(3000, 0)),
        wqe(&send(2)
            .sge(DATA + 100, 700, Lkey(KEY))
            .sge(DATA + 5000, 0, Lkey(0xDEAD_BEEF))
            .sge(DATA + 900, 1300, Lkey(KEY))
            .flags(SendFlags::SIGNALED | SendFlags::SOLICITED)),
        wqe(&SendWr::new(
            3,
            WrOp::RdmaWriteWithImm {
                remote_addr: 0x9000,
                rkey: Rkey(0x55),
                imm: 0x0102_0304,
            },
        )
        .sge(DATA + 7, 1024, Lkey(KEY))),
        wqe(&SendWr::new(4, WrOp::SendWithImm { imm: 0xA5A5_5A5A })
            .sge(DATA + 3, 1, Lkey(KEY))
            .flags(SendFlags::SIGNALED)),
        wqe(&send(5).flags(SendFlags::SIGNALED)),
        wqe(&write(DATA_LEN as u32, 0)),
    ]
}

/// READs and atomics among a WRITE and a SEND: a READ of two SGEs (5 packets of
/// responses at 1024), a CMP_AND_SWP, a SEND, a FETCH_AND_ADD, a READ of 100 bytes.
fn reads() -> Vec<[u8; 160]> {
    let read = |id: u64, off: u64| {
        SendWr::new(
            id,
            WrOp::RdmaRead {
                remote_addr: 0x7700_0000 + off,
                rkey: Rkey(0x99),
            },
        )
        .flags(SendFlags::SIGNALED)
    };
    vec![
        wqe(&write(3000, 0)),
        wqe(&read(11, 0)
            .sge(DATA + 0x100, 3000, Lkey(KEY))
            .sge(DATA + 0x2000, 2000, Lkey(KEY))),
        wqe(&atomic(5, 0)),
        wqe(&SendWr::new(12, WrOp::Send).sge(DATA + 5, 200, Lkey(KEY))),
        wqe(&atomic(6, 0)),
        wqe(&read(13, 0x40).sge(DATA + 0x3000, 100, Lkey(KEY))),
    ]
}

/// A case: the WQEs in the ring, the producer index rung, the engine's send-queue depth.
struct Case {
    name: &'static str,
    wqes: Vec<[u8; 160]>,
    pi: u32,
    depth: u32,
    ring: u64,
    /// The QP's `max_rd_atomic`: the READs and atomics the fetch may hold (no response
    /// comes here, so a READ or atomic past them waits to the take-back).
    max_rd_atomic: u8,
}

fn cases() -> Vec<Case> {
    let ok = |name, wqes: Vec<[u8; 160]>| Case {
        name,
        pi: wqes.len() as u32,
        wqes,
        depth: 64,
        ring: RING,
        max_rd_atomic: 4,
    };
    // the good mix with WQE 2 replaced by `bad`
    let with = |name, bad: [u8; 160]| {
        let mut w = good();
        w[2] = bad;
        ok(name, w)
    };
    let mutate = |f: &dyn Fn(&mut [u8; 160])| {
        let mut b = wqe(&write(100, 0));
        f(&mut b);
        b
    };
    vec![
        ok("the good mix", good()),
        with(
            "an L_Key of another generation",
            wqe(&SendWr::new(9, WrOp::Send).sge(DATA, 8, Lkey(KEY ^ 1))),
        ),
        with(
            "an L_Key the table does not hold",
            wqe(&SendWr::new(9, WrOp::Send).sge(DATA, 8, Lkey(0x4200 | 0x3C))),
        ),
        with(
            "an MR of another PD",
            wqe(&SendWr::new(9, WrOp::Send).sge(DATA, 8, Lkey(((MR_INDEX + 1) << 8) | 1))),
        ),
        with(
            "an invalidated MR",
            wqe(&SendWr::new(9, WrOp::Send).sge(DATA, 8, Lkey(((MR_INDEX + 2) << 8) | 1))),
        ),
        with("one byte past the MR", wqe(&write(101, DATA_LEN - 100))),
        with(
            "before the MR",
            wqe(&SendWr::new(9, WrOp::Send).sge(DATA - 1, 8, Lkey(KEY))),
        ),
        with(
            "the firmware's key",
            mutate(&|b| b[108..112].copy_from_slice(&u32::MAX.to_le_bytes())),
        ),
        with("inline", mutate(&|b| b[9] |= 8)),
        with("fence", mutate(&|b| b[9] |= 1)),
        with("READ", mutate(&|b| b[8] = 4)),
        with("CMP_AND_SWP", wqe(&atomic(5, 0))),
        with("FETCH_AND_ADD", wqe(&atomic(6, 0))),
        // the credits: all six taken with 4; with 2 the fetch waits at the FETCH_AND_ADD
        // (the READ and the CMP_AND_SWP hold both), with 1 at the CMP_AND_SWP
        ok("READs and atomics among WRITEs and SENDs", reads()),
        Case {
            max_rd_atomic: 2,
            ..ok("max_rd_atomic 2", reads())
        },
        Case {
            max_rd_atomic: 1,
            ..ok("max_rd_atomic 1", reads())
        },
        with("a misaligned atomic", wqe(&atomic(6, 4))),
        with(
            "an atomic of two SGEs",
            wqe(&atomic(5, 0).sge(DATA + 64, 8, Lkey(KEY))),
        ),
        with(
            "a READ into an MR without local write",
            mutate(&|b| {
                b[8] = 4;
                b[108..112].copy_from_slice(&(((MR_INDEX + 3) << 8) | 1).to_le_bytes());
            }),
        ),
        with("SEND_WITH_INV", mutate(&|b| b[8] = 9)),
        with("five SGEs", mutate(&|b| b[10] = 5)),
        with(
            "more than 2^31 bytes",
            wqe(&SendWr::new(9, WrOp::Send)
                .sge(DATA, 0x4000_0000, Lkey(KEY))
                .sge(DATA, 0x4000_0001, Lkey(KEY))),
        ),
        Case {
            name: "a producer index past the ring",
            pi: 17,
            ..ok("", good())
        },
        Case {
            name: "the engine's depth",
            depth: 3,
            ..ok("", good())
        },
        Case {
            name: "a ring the host cannot read",
            ring: MEM_BASE + MEM_LEN as u64 - 320,
            ..ok("", good())
        },
    ]
}

/// What one fast path did with a case.
#[derive(Debug, PartialEq)]
struct Outcome {
    handed: bool,
    rung: SqRung,
    frames: Vec<Vec<u8>>,
    deadline: Option<u64>,
    back: Option<SqBack>,
}

/// The host memory with a pattern in every byte.
fn blank_memory() -> HostMem {
    HostMem {
        base: MEM_BASE,
        bytes: (0..MEM_LEN)
            .map(|i| (i as u8).wrapping_mul(37) ^ 0x5A)
            .collect(),
    }
}

fn memory(c: &Case) -> HostMem {
    let mut m = blank_memory();
    for (i, w) in c.wqes.iter().enumerate() {
        let at = c.ring + 160 * i as u64;
        let _ = m.write(at, w);
    }
    m
}

/// The QP's state at a hand-over: next PSN `psn`, the engine's send-queue depth, its
/// `max_rd_atomic`; the local ACK timeout [`RTO`], full retry budgets.
fn idle_at(psn: u32, depth: u32, max_rd_atomic: u8) -> SqIdle {
    SqIdle {
        psn: Psn::new(psn),
        rto: Some(RTO),
        sig_all: false,
        pd: Pd::from_index(PD),
        depth,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic,
    }
}

/// Hands the QP's queue over, rings, lets the fast path run, takes the queue back.
fn play(fp: &mut dyn FastPath, c: &Case, mem: &mut HostMem) -> Outcome {
    setup(fp);
    fp.run_at(mem, 1_000);
    let idle = idle_at(PSN, c.depth, c.max_rd_atomic);
    let ring = SqRing {
        ring: c.ring,
        log: RING_LOG,
        ci: 0,
    };
    let q = Qpn::new(QPN);
    let handed = fp.sq_hand_over(q, ring, &idle);
    let rung = fp.sq_doorbell(q, c.pi, 2_000, mem);
    for t in 0..4 {
        fp.run_at(mem, 3_000 + t);
    }
    let deadline = fp.sq_deadline(q);
    let back = fp.sq_take_back(q);
    Outcome {
        handed,
        rung,
        frames: Vec::new(),
        deadline,
        back,
    }
}

/// Whether the RTL was built (under CI=true it must be).
fn rtl_here() -> bool {
    if !rtl_available() {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true but roce-hdl-sim was built without Verilator"
        );
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
    }
    rtl_available()
}

#[test]
fn the_rtl_fetch_decides_as_the_model() {
    if !rtl_here() {
        return;
    }
    let mut failures = Vec::new();
    for c in cases() {
        let mut mem_m = memory(&c);
        let mut model = FastPathPort::<Wire, { FP_CTX_ENTRIES }>::new(Wire::default());
        let want = play(&mut model, &c, &mut mem_m);
        let want = Outcome {
            frames: std::mem::take(&mut model.inner.sent),
            ..want
        };
        let mut mem_r = memory(&c);
        let mut rtl = FpPort::new(DataWidth::W64, Wire::default()).expect("the RTL fast path");
        let got = play(&mut rtl, &c, &mut mem_r);
        let got = Outcome {
            frames: std::mem::take(&mut rtl.port_mut().sent),
            ..got
        };
        assert!(rtl.fault().is_none(), "{}: {:?}", c.name, rtl.fault());
        assert!(want.handed, "{}: the model refused the queue", c.name);
        eprintln!(
            "{}: taken {} (sends {}), stopped {}, {} frames",
            c.name,
            want.rung.taken,
            want.rung.sends,
            want.rung.stopped,
            want.frames.len()
        );
        // the model's own decisions where the rule says them (the RTL's must then equal)
        let expect = match c.name {
            "READ" | "CMP_AND_SWP" | "FETCH_AND_ADD" => Some(c.pi),
            "READs and atomics among WRITEs and SENDs" => Some(6),
            "max_rd_atomic 2" => Some(4),
            "max_rd_atomic 1" => Some(2),
            _ => None,
        };
        if let Some(n) = expect.filter(|&n| (want.rung.taken, want.rung.stopped) != (n, false)) {
            failures.push(format!(
                "{}: the model {:?}, not {n} taken",
                c.name, want.rung
            ));
        }
        if want != got {
            failures.push(format!(
                "{}: model {:?}\n   RTL {:?}",
                c.name,
                (
                    want.handed,
                    want.rung,
                    want.frames.len(),
                    want.deadline,
                    want.back
                ),
                (
                    got.handed,
                    got.rung,
                    got.frames.len(),
                    got.deadline,
                    got.back
                )
            ));
        }
        // the CQ ring and the rest of host memory: nothing written but by both
        if mem_m.bytes != mem_r.bytes {
            failures.push(format!("{}: host memory differs", c.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Latency (BENCHMARKS.md, "The WQE fetch in RTL"): from the firmware's call to the last
/// beat of the first frame, for one 64-byte WRITE at 64 bits: handed to the RTL as a
/// descriptor (`post_tx`, then `run`) and fetched by it (`sq_doorbell`, the WQE read
/// by DMA with the host answering at once). The same frame both ways.
#[test]
fn doorbell_to_first_frame() {
    if !rtl_available() {
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return;
    }
    let wr = write(64, 0);
    let c = Case {
        name: "one WRITE",
        wqes: vec![wqe(&wr)],
        pi: 1,
        depth: 64,
        ring: RING,
        max_rd_atomic: 4,
    };
    let q = Qpn::new(QPN);
    // a descriptor from the firmware
    let mut mem = memory(&c);
    let mut rtl = FpPort::new(DataWidth::W64, Wire::default()).expect("the RTL fast path");
    setup(&mut rtl);
    rtl.run_at(&mut mem, 1_000);
    let msg = roce_core::fastpath::TxMsg {
        qpn: q,
        op: roce_core::fastpath::MsgOp::Write,
        solicited: false,
        replay: false,
        wqe_index: 0,
        sges: wr.sg_list.clone(),
        length: 64,
        remote_addr: 0xABCD_0000,
        rkey: Rkey(0x77),
        first_psn: Psn::new(PSN),
        start_pkt: 0,
        end_pkt: 0,
    };
    rtl.mark();
    let start = rtl.cycles();
    assert!(rtl.post_tx(&layout::encode_txd(&msg)));
    rtl.run_at(&mut mem, 2_000);
    let posted = rtl.first_frame().expect("a frame") - start;
    let by_descriptor = std::mem::take(&mut rtl.port_mut().sent);
    // the same WRITE fetched
    let mut mem = memory(&c);
    let mut rtl = FpPort::new(DataWidth::W64, Wire::default()).expect("the RTL fast path");
    setup(&mut rtl);
    rtl.run_at(&mut mem, 1_000);
    let idle = idle_at(PSN, 64, 4);
    let ring = SqRing {
        ring: RING,
        log: RING_LOG,
        ci: 0,
    };
    assert!(rtl.sq_hand_over(q, ring, &idle));
    rtl.mark();
    let start = rtl.cycles();
    let rung = rtl.sq_doorbell(q, 1, 2_000, &mut mem);
    assert_eq!((rung.taken, rung.stopped), (1, false));
    let fetched = rtl.first_frame().expect("a frame") - start;
    assert_eq!(
        by_descriptor,
        rtl.port_mut().sent,
        "the same frame both ways"
    );
    eprintln!(
        "64-byte WRITE, 64-bit RTL: call to the first frame's last beat: descriptor {posted} cycles, doorbell (WQE fetch) {fetched} cycles"
    );
}

/// Two QPs (context entries 3 and 4) whose send queues the fetch holds, for
/// [`rewinds_of_two_qps_close_together_keep_each_its_hold`]: their QPN, first PSN and
/// ring.
const TWO: [(u32, u32, u64); 2] = [
    (QPN, 0x10, RING),
    (4 + FP_CTX_ENTRIES as u32, 0x80_0000, RING + 0x1400),
];

/// The port's and the peer's addresses (10.0.0.1, 10.0.0.2) as GIDs.
fn gid_of(host: u8) -> [u8; 16] {
    Ipv4Addr::new(10, 0, 0, host).to_ipv6_mapped().octets()
}

/// The peer's frames to QP `qpn` (the headers of [`template`] turned around).
fn peer_ctx(qpn: u32) -> SendCtx {
    SendCtx {
        valid: true,
        template: headers(2, 1, 50_001),
        pkey: 0xFFFF,
        dest_qpn: Qpn::new(qpn),
        mtu: Mtu::Mtu1024,
        sr: false,
        max_pkts_per_ack: 64,
        next_psn: Psn::new(0),
        noack: 0,
        una_psn: Psn::new(0),
        window: 1 << 20,
    }
}

/// The peer's NAK "PSN sequence error" of QP `qpn` at `psn`.
fn peer_nak(qpn: u32, psn: u32) -> Vec<u8> {
    let desc = AckDesc {
        qpn: Qpn::new(0x1234),
        syndrome: Syndrome::Nak(NakCode::PsnSequenceError),
        psn: Psn::new(psn),
        msn: Msn::new(1),
    };
    let mut buf = vec![0u8; 256];
    let n = ack_frame(&peer_ctx(qpn), &desc, &mut buf).expect("NAK frame");
    buf.truncate(n);
    buf
}

/// What one fast path did with the NAKs of [`rewinds_of_two_qps_close_together_keep_each_its_hold`].
#[derive(Debug, PartialEq)]
struct Rewound {
    /// Each QP's frames, in order (the two QPs' interleave as the RTL's timing has it).
    frames: [Vec<Vec<u8>>; 2],
    naks: u32,
    retries: u32,
    back: Vec<Option<SqBack>>,
}

/// The wire of either fast path.
trait OnWire: FastPath {
    fn wire(&mut self) -> &mut Wire;
}

impl OnWire for FastPathPort<Wire, { FP_CTX_ENTRIES }> {
    fn wire(&mut self) -> &mut Wire {
        &mut self.inner
    }
}

impl OnWire for FpPort<Wire> {
    fn wire(&mut self) -> &mut Wire {
        self.port_mut()
    }
}

/// Both QPs' queues handed over (four one-packet WRITEs each, sent), then the peer's
/// NAKs of both and a second copy of the first one's, in one `run`.
fn rewind_two(fp: &mut dyn OnWire, mem: &mut HostMem) -> Rewound {
    setup(fp);
    fp.set_port([2, 0, 0, 0, 0, 1], gid_of(1));
    for &(qpn, psn, ring) in &TWO {
        let q = Qpn::new(qpn);
        let ctx = SendCtx {
            template: template(),
            dest_qpn: Qpn::new(0x1234),
            next_psn: Psn::new(psn),
            una_psn: Psn::new(psn),
            ..peer_ctx(0)
        };
        fp.write_sctx(q, 0, &layout::encode_sctx(&ctx));
        let rctx = RecvCtx {
            access: AccessFlags::LOCAL_WRITE,
            peer_gid: gid_of(2),
            ..RecvCtx::idle(q, Pd::from_index(PD), Mtu::Mtu1024)
        };
        fp.write_rctx(q, &layout::encode_rctx(&rctx));
        // (as the firmware sets it for a queue it hands over)
        fp.set_send_cq(q, Some(CQ));
        for i in 0..4u64 {
            let wr = SendWr::new(
                i,
                WrOp::RdmaWrite {
                    remote_addr: 0xABCD_0000 + 1024 * i,
                    rkey: Rkey(0x77),
                },
            )
            .sge(DATA + 1024 * i, 1024, Lkey(KEY));
            mem.write(ring + 160 * i, &wqe(&wr)).expect("ring");
        }
    }
    fp.run_at(mem, 1_000);
    for &(qpn, psn, ring) in &TWO {
        let idle = idle_at(psn, 64, 4);
        let sq = SqRing {
            ring,
            log: RING_LOG,
            ci: 0,
        };
        assert!(fp.sq_hand_over(Qpn::new(qpn), sq, &idle), "hand-over");
        let rung = fp.sq_doorbell(Qpn::new(qpn), 4, 2_000, mem);
        assert_eq!((rung.taken, rung.stopped), (4, false), "doorbell");
    }
    for t in 0..4 {
        fp.run_at(mem, 3_000 + t);
    }
    let sent = std::mem::take(&mut fp.wire().sent);
    assert_eq!(sent.len(), 8, "the WRITEs");
    let _ = fp.sq_news();
    // back to back: A's NAK of its second WRITE, B's of its third, A's again
    let (a, b) = (TWO[0], TWO[1]);
    let naks = [
        peer_nak(a.0, a.1 + 1),
        peer_nak(b.0, b.1 + 2),
        peer_nak(a.0, a.1 + 1),
    ];
    fp.wire().rx.extend(naks);
    let mut news = (0, 0);
    for t in 0..4 {
        fp.run_at(mem, 5_000 + t);
        let n = fp.sq_news();
        news.0 += n.naks;
        news.1 += n.retries;
    }
    // (none reaches the firmware: the fetch took the three)
    let mut ev = [0u32; layout::EVENT_WORDS];
    assert!(
        !fp.poll_event(&mut ev, &mut []),
        "an event: {:?}",
        layout::decode_event_words(&ev)
    );
    // (both QPs send to the peer's QP 0x1234; B's PSNs are 0x80_0000 on)
    let (b_frames, a_frames) = std::mem::take(&mut fp.wire().sent)
        .into_iter()
        .partition(|f| roce_core::wire::parse(f).is_ok_and(|p| p.psn().value() >= b.1));
    Rewound {
        frames: [a_frames, b_frames],
        naks: news.0,
        retries: news.1,
        back: TWO
            .iter()
            .map(|&(qpn, ..)| fp.sq_take_back(Qpn::new(qpn)))
            .collect(),
    }
}

/// Rewinds of two QPs close together (docs/fastpath.md §3.8, "Go-Back-N in RTL"): the
/// NAK of QP A's second WRITE, then, before `fp_sqf`'s FLUSH has landed A's `una_psn`
/// (some 20 cycles), B's NAK of its third and a duplicate of A's NAK, back to back in
/// one `run`. The model takes both NAKs as rewinds and drops the duplicate (a retry
/// under way without progress: the engine's `on_nak`); `fp_rx_check` checks A's
/// responses against A's NAK's PSN until its FLUSH lands, held per context entry
/// (`lr_rec`), so it drops it too: the same replays byte for byte, NAKs and retries
/// counted, and state at the take-back, at 64 and 512 bits. (With one register for
/// the hold, B's rewind replaced A's, and A's duplicate was checked against the
/// `una_psn` before A's rewind: progress, a second rewind and its replays.)
#[test]
fn rewinds_of_two_qps_close_together_keep_each_its_hold() {
    if !rtl_here() {
        return;
    }
    let mut mem = blank_memory();
    let mut model = FastPathPort::<Wire, { FP_CTX_ENTRIES }>::new(Wire::default());
    let want = rewind_two(&mut model, &mut mem);
    // A replays from its second WRITE (3), B from its third (2), once each
    assert_eq!((want.naks, want.retries), (3, 2), "model: NAKs, retries");
    let replays = |r: &Rewound| r.frames.clone().map(|f| f.len());
    assert_eq!(replays(&want), [3, 2], "model: replays");
    for width in DataWidth::ALL {
        let mut mem = blank_memory();
        let mut rtl = FpPort::new(width, Wire::default()).expect("the RTL fast path");
        let got = rewind_two(&mut rtl, &mut mem);
        assert!(rtl.fault().is_none(), "{width}: {:?}", rtl.fault());
        assert_eq!(
            (got.naks, got.retries, replays(&got)),
            (want.naks, want.retries, replays(&want)),
            "{width}: NAKs, retries, replays"
        );
        assert!(got.frames == want.frames, "{width}: replays differ");
        assert_eq!(got.back, want.back, "{width}: take-back");
    }
}
