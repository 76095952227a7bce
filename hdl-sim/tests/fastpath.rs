//! The RC fast path in RTL (`rtl/roce_fp_top.sv`) against its software model,
//! `roce_core::fastpath` (which `core/tests/fastpath.rs` holds to the engine): random
//! contexts, descriptors and packet streams on several QPs must give the same frames
//! byte for byte, the same DMA writes, the same events and the same contexts, at 64
//! and 512 bits.

mod common;

use common::host_mem::HostMem;
use common::Wire;
use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRng, TestRunner};
use roce_core::fastpath::layout;
use roce_core::fastpath::{
    self, AckDesc, Event, Exception, Inflight, MrEntry, MrTable, MsgOp, PortAddr, RecvCqe, RecvCtx,
    RxCur, SendCtx, TxError, TxMsg,
};
use roce_core::memory::{AccessFlags, Dma, DmaError, MemoryTable, Pd};
use roce_core::num::{Lkey, Msn, Psn, Qpn, Rkey};
use roce_core::transport::{Mtu, Sge};
use roce_core::transport::{WcFlags, WcOpcode, WcStatus, WorkCompletion};
use roce_core::wire::aeth::{AethRepr, RnrTimer, Syndrome};
use roce_core::wire::atomic::AtomicAckEthRepr;
use roce_core::wire::bth::BthRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::ipv6::Ipv6Repr;
use roce_core::wire::udp::{UdpRepr, ROCEV2_PORT};
use roce_core::wire::{self, ExtHeaders, HeaderTemplate, L3Repr, Opcode};
use roce_firmware::abi::Cqe;
use roce_firmware::datapath::Loopback;
use roce_firmware::fastpath::FastPathPort;
use roce_firmware::hal::{Datapath, FastPath};
use roce_hdl_sim::{
    rtl_available, DataWidth, FpSim, Shaping, Table, ACCESSED_WORD, CQW_PI_WORD, CQW_RECV_CQ,
    CQW_RECV_WRID_HI_WORD, CQW_RECV_WRID_LO_WORD, CQW_RING_WORD, CQW_SEND_CQ_WORD, FP_CTX_ENTRIES,
};
use zerocopy::IntoBytes;

const MEM_BASE: u64 = 0x10_0000;
const MEM_LEN: usize = 80 * 1024;

/// One sim per width for the whole test binary's thread (building one takes a while).
fn sims() -> Option<Vec<RefCell<FpSim>>> {
    if !rtl_available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but roce-hdl-sim was built without Verilator");
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return None;
    }
    Some(
        DataWidth::ALL
            .iter()
            .map(|&w| RefCell::new(FpSim::new(w).expect("model")))
            .collect(),
    )
}

// ------------------------------------------------------------------ strategies

/// The lower headers of a QP: VLAN or not, IPv4 or IPv6, addresses and DSCP/ECN.
#[derive(Clone, Debug)]
struct Path {
    vlan: Option<u16>,
    ipv6: bool,
    tos: u8,
    sport: u16,
    host: u8,
}

fn path() -> impl Strategy<Value = Path> {
    (
        proptest::option::of(1u16..4095),
        any::<bool>(),
        any::<u8>(),
        49152u16..65535,
        any::<u8>(),
    )
        .prop_map(|(vlan, ipv6, tos, sport, host)| Path {
            vlan,
            ipv6,
            tos,
            sport,
            host,
        })
}

fn template(p: &Path) -> HeaderTemplate {
    let eth = EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, p.host]),
        src: MacAddr([2, 0, 0, 0, 1, 0x10]),
        ethertype: 0,
    };
    let vlan = p.vlan.map(|vid| VlanRepr {
        pcp: 3,
        dei: false,
        vid,
        ethertype: 0,
    });
    let l3 = if p.ipv6 {
        L3Repr::Ipv6(Ipv6Repr {
            src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(p.host)),
            dscp: p.tos >> 2,
            ecn: p.tos & 3,
            flow_label: u32::from(p.sport) << 4,
            next_header: 17,
            hop_limit: 64,
        })
    } else {
        L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, p.host),
            dscp: p.tos >> 2,
            ecn: p.tos & 3,
            ident: u16::from(p.host) << 8,
            ..Ipv4Repr::default()
        })
    };
    let udp = UdpRepr {
        src_port: p.sport,
        dst_port: ROCEV2_PORT,
        checksum: 0,
    };
    HeaderTemplate::new(&eth, vlan.as_ref(), &l3, Some(&udp)).expect("template")
}

fn mtu() -> impl Strategy<Value = Mtu> {
    prop_oneof![Just(Mtu::Mtu256), Just(Mtu::Mtu1024), Just(Mtu::Mtu4096)]
}

/// A send context's knobs.
#[derive(Clone, Debug)]
struct QpCfg {
    path: Path,
    mtu: Mtu,
    sr: bool,
    window: u32,
    max_pkts_per_ack: u32,
    psn: u32,
    dest_qpn: u32,
    pkey: u16,
}

fn qp_cfg() -> impl Strategy<Value = QpCfg> {
    (
        path(),
        mtu(),
        any::<bool>(),
        prop_oneof![Just(128u32), 2u32..24],
        prop_oneof![Just(64u32), 1u32..8],
        prop_oneof![0u32..16, 0xFF_FFF0u32..0x100_0000],
        any::<u32>(),
        any::<u16>(),
    )
        .prop_map(
            |(path, mtu, sr, window, max_pkts_per_ack, psn, dest, pkey)| QpCfg {
                path,
                mtu,
                sr,
                window,
                max_pkts_per_ack,
                psn,
                dest_qpn: dest & 0xFF_FFFF,
                pkey,
            },
        )
}

fn send_ctx(c: &QpCfg) -> SendCtx {
    SendCtx {
        valid: true,
        template: template(&c.path),
        pkey: c.pkey,
        dest_qpn: Qpn::new(c.dest_qpn),
        mtu: c.mtu,
        sr: c.sr,
        max_pkts_per_ack: c.max_pkts_per_ack,
        next_psn: Psn::new(c.psn),
        noack: 0,
        una_psn: Psn::new(c.psn),
        window: c.window,
    }
}

/// One descriptor of a random mix.
#[derive(Clone, Debug)]
struct Msg {
    qp: usize,
    op: u8,
    len: u32,
    cuts: Vec<u32>,
    src_off: u32,
    solicited: bool,
    /// Post a FLUSH before it.
    flush: bool,
    /// Re-post this message from packet `start` (to `end`, 0 = to the end) after it.
    replay: Option<(u32, u32)>,
    /// An ACK descriptor to post before it: (syndrome, psn, msn).
    ack: Option<(u8, u32, u32)>,
}

fn msg(nqp: usize) -> impl Strategy<Value = Msg> {
    (
        0..nqp,
        0u8..8,
        prop_oneof![0u32..300, 0u32..9000],
        proptest::collection::vec(0u32..3000, 0..4),
        0u32..4096,
        (any::<bool>(), any::<bool>()),
        proptest::option::weighted(0.2, (0u32..8, 0u32..10)),
        proptest::option::weighted(
            0.3,
            (
                prop_oneof![Just(0x1Fu8), 0u8..0x20, 0x60u8..0x65, 0x20u8..0x40],
                any::<u32>(),
                any::<u32>(),
            ),
        ),
    )
        .prop_map(
            |(qp, op, len, cuts, src_off, (solicited, flush), replay, ack)| Msg {
                qp,
                op,
                len,
                cuts,
                src_off,
                solicited,
                flush: flush && len % 3 == 0,
                replay,
                ack: ack.map(|(s, p, m)| (s, p & 0xFF_FFFF, m & 0xFF_FFFF)),
            },
        )
}

/// The SGEs of a message, cut at `cuts` (zero-length SGEs included), at most four.
fn sges(m: &Msg) -> heapless::Vec<Sge, 4> {
    let mut out = heapless::Vec::new();
    let mut at = 0u32;
    let base = MEM_BASE + u64::from(m.src_off);
    for c in m.cuts.iter().take(3) {
        let n = (*c).min(m.len - at);
        out.push(Sge {
            addr: base + u64::from(at) + 7 * u64::from(n % 3),
            length: n,
            lkey: Lkey(0),
        })
        .unwrap();
        at += n;
    }
    out.push(Sge {
        addr: base + u64::from(at) + 5,
        length: m.len - at,
        lkey: Lkey(0),
    })
    .unwrap();
    out
}

fn tx_msg(m: &Msg, qpn: Qpn, psn: Psn, wqe_index: u16) -> TxMsg {
    let op = match m.op {
        0 => MsgOp::Send,
        1 => MsgOp::SendWithImm(0xA5A5_0000 | m.len),
        2 => MsgOp::SendWithInv(Rkey(0x1234_5600 | (m.len & 0xFF))),
        3 => MsgOp::Write,
        4 => MsgOp::WriteWithImm(m.len ^ 0xDEAD_BEEF),
        5 => MsgOp::Read,
        6 => MsgOp::CmpSwap {
            compare: u64::from(m.len) << 32 | 0x1111,
            swap: u64::from(m.src_off) * 0x0101_0101,
        },
        _ => MsgOp::FetchAdd {
            add: u64::from(m.len) * 0x3_0000_0001,
        },
    };
    // an atomic's one SGE takes the 8-byte original value (one in seven too short for
    // it: the response path leaves its ATOMIC ACKNOWLEDGE to the firmware, reason 7,
    // as the model's scatter fails)
    let (sges, length) = if matches!(m.op, 6 | 7) {
        let mut v = heapless::Vec::new();
        let _ = v.push(Sge {
            addr: MEM_BASE + u64::from(m.src_off & !7) + u64::from(m.src_off % 3),
            length: if m.len % 7 == 3 { 5 } else { 8 },
            lkey: Lkey(0),
        });
        (v, 8)
    } else {
        (sges(m), m.len)
    };
    TxMsg {
        qpn,
        op,
        solicited: m.solicited,
        sges,
        length,
        remote_addr: 0x7000_0000_0000 + u64::from(m.len) * 3,
        rkey: Rkey(0x0000_4200 | (m.len & 0xFF)),
        first_psn: psn,
        replay: false,
        wqe_index,
        start_pkt: 0,
        end_pkt: 0,
    }
}

// ------------------------------------------------------------------------- TX

/// `e` as the RTL reports it: the model leaves an exception's frame slot to its caller,
/// and the RTL numbers the exception frames in order (`next` is the next one's).
fn numbered(mut e: Event, next: &mut u16) -> Event {
    if let Event::Exception { slot, .. } = &mut e {
        *slot = *next;
        *next = next.wrapping_add(1);
    }
    e
}

fn events(sim: &mut FpSim) -> Vec<Event> {
    std::iter::from_fn(|| sim.pop_event())
        .map(|e| layout::decode_event(&e.value).expect("an event the layout knows"))
        .collect()
}

fn frames(sim: &mut FpSim) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| sim.pop_tx_frame())
        .map(|f| f.value)
        .collect()
}

/// QPNs of the QPs of a case: spread over the table.
fn qpn_of(i: usize) -> Qpn {
    Qpn::new(17 + 40 * i as u32)
}

/// Runs one TX case on one sim: every descriptor (and ACK descriptor) through the model
/// and the RTL, comparing frames and the contexts' progress.
fn tx_case(sim: &mut FpSim, qps: &[QpCfg], msgs: &[Msg]) -> Result<(), TestCaseError> {
    sim.reset();
    let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
    let mut ctxs: Vec<SendCtx> = qps.iter().map(send_ctx).collect();
    for (i, c) in ctxs.iter().enumerate() {
        sim.write_record(Table::SendCtx, qpn_of(i).value(), &layout::encode_sctx(c));
    }
    sim.run_until_idle(&mut mem, 100_000).map_err(fail)?;
    let mut buf = vec![0u8; 9000];
    for (mi, m) in msgs.iter().enumerate() {
        let q = m.qp;
        let qpn = qpn_of(q);
        if let Some((syn, psn, msn)) = m.ack {
            let ack = AckDesc {
                qpn,
                syndrome: Syndrome::from_byte(syn),
                psn: Psn::new(psn),
                msn: Msn::new(msn),
            };
            sim.push_ackd(&layout::encode_ackd(&ack));
            sim.run_until_idle(&mut mem, 100_000).map_err(fail)?;
            let n = fastpath::ack_frame(&ctxs[q], &ack, &mut buf).expect("ack frame");
            prop_assert_eq!(frames(sim), vec![buf[..n].to_vec()], "ACK {:?}", ack);
        }
        if m.flush {
            let mut f = tx_msg(m, qpn, ctxs[q].next_psn, mi as u16);
            // (with the `una_psn` written below: a FLUSH's moves it only forward, and
            // the two reach the table in either order)
            f.op = MsgOp::Flush {
                una: ctxs[q].next_psn,
            };
            sim.push_txd(&layout::encode_txd(&f));
            ctxs[q].noack = 0;
        }
        // the firmware has seen every packet acknowledged before a new message
        ctxs[q].una_psn = ctxs[q].next_psn;
        sim.write_word(Table::SendCtx, qpn.value(), 4, ctxs[q].una_psn.value());
        let desc = tx_msg(m, qpn, ctxs[q].next_psn, mi as u16);
        let mut posts = vec![desc.clone()];
        if let Some((start, end)) = m.replay {
            posts.push(TxMsg {
                replay: true,
                start_pkt: start,
                end_pkt: end,
                ..desc.clone()
            });
        }
        for post in &posts {
            if post.replay {
                // Go-Back-N from `start_pkt`; from an odd one the ACK of that packet came
                // in meanwhile, so the hardware skips it
                let skip = post.start_pkt % 2;
                ctxs[q].una_psn = post.psn_of(post.start_pkt + skip);
                sim.write_word(Table::SendCtx, qpn.value(), 4, ctxs[q].una_psn.value());
            }
            sim.push_txd(&layout::encode_txd(post));
            let (mut k, to) = post.range(ctxs[q].mtu);
            loop {
                // the model's frames until the window stops it, the RTL's alike
                let mut want = Vec::new();
                let mut stalled = false;
                while k < to {
                    match fastpath::segment(&mut ctxs[q], post, k, &mut mem, &mut buf) {
                        Ok(n) => want.push(buf[..n].to_vec()),
                        // a replayed packet acknowledged meanwhile: the hardware skips it
                        Err(TxError::WindowFull)
                            if post.replay && post.psn_of(k).before(ctxs[q].una_psn) => {}
                        Err(TxError::WindowFull) => {
                            stalled = true;
                            break;
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("model: {e:?}"))),
                    }
                    k += 1;
                }
                sim.run_until_idle(&mut mem, 400_000).map_err(fail)?;
                let got = frames(sim);
                prop_assert_eq!(got.len(), want.len(), "frames of message {} ({:?})", mi, m);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    prop_assert_eq!(g, w, "frame {} of message {} ({:?})", i, mi, m);
                }
                if !stalled {
                    break;
                }
                // the firmware learns of ACKs up to packet k
                ctxs[q].una_psn = post.psn_of(k);
                sim.write_word(Table::SendCtx, qpn.value(), 4, ctxs[q].una_psn.value());
            }
        }
        let b = sim
            .read_record(Table::SendCtx, qpn.value(), layout::SCTX_LEN, &mut mem)
            .map_err(fail)?;
        let got = layout::decode_sctx(b.as_slice().try_into().unwrap())
            .map_err(|e| fail(format!("{e:?}")))?;
        prop_assert_eq!(
            got.next_psn,
            ctxs[q].next_psn,
            "next_psn after message {}",
            mi
        );
        prop_assert_eq!(got.noack, ctxs[q].noack, "noack after message {}", mi);
    }
    prop_assert_eq!(sim.bad_desc(), 0);
    Ok(())
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn cases(default: u32) -> u32 {
    std::env::var("ROCE_FP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A runner of `default` cases (`ROCE_FP_CASES` overrides). The cases are the same on
/// every run, so a CI failure is a change, not a draw: `ROCE_FP_RANDOM=1` draws new
/// ones (how the divergence below `placement_equals_the_model` was found).
fn runner(default: u32) -> TestRunner {
    let config = Config {
        cases: cases(default),
        ..Config::default()
    };
    if std::env::var_os("ROCE_FP_RANDOM").is_some() {
        return TestRunner::new(config);
    }
    let rng = TestRng::deterministic_rng(config.rng_algorithm);
    TestRunner::new_with_rng(config, rng)
}

#[test]
fn segmenter_frames_equal_the_models() {
    let Some(sims) = sims() else { return };
    let mut runner = runner(48);
    let strategy = proptest::collection::vec(qp_cfg(), 1..4).prop_flat_map(|qps| {
        let n = qps.len();
        (Just(qps), proptest::collection::vec(msg(n), 1..8))
    });
    runner
        .run(&strategy, |(qps, msgs)| {
            for s in &sims {
                let mut sim = s.borrow_mut();
                sim.set_shaping(Shaping::LINE_RATE);
                tx_case(&mut sim, &qps, &msgs)
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", sim.width())))?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn segmenter_frames_equal_the_models_under_backpressure() {
    let Some(sims) = sims() else { return };
    let mut runner = runner(16);
    let strategy =
        (proptest::collection::vec(qp_cfg(), 1..3), any::<u64>()).prop_flat_map(|(qps, seed)| {
            let n = qps.len();
            (
                Just(qps),
                proptest::collection::vec(msg(n), 1..5),
                Just(seed),
            )
        });
    runner
        .run(&strategy, |(qps, msgs, seed)| {
            for s in &sims {
                let mut sim = s.borrow_mut();
                sim.set_shaping(Shaping::random(0.3, 0.3, seed));
                let r = tx_case(&mut sim, &qps, &msgs);
                sim.set_shaping(Shaping::LINE_RATE);
                r.map_err(|e| TestCaseError::fail(format!("{}: {e}", sim.width())))?;
            }
            Ok(())
        })
        .unwrap();
}

// ------------------------------------------------------------------------- RX

/// A memory that logs its writes (the model's DMA).
struct Logged<'a> {
    mem: &'a mut HostMem,
    writes: Vec<(u64, Vec<u8>)>,
}

impl Dma for Logged<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.mem.read(addr, buf)
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        self.writes.push((addr, data.to_vec()));
        self.mem.write(addr, data)
    }
}

/// A receiving QP's knobs.
#[derive(Clone, Debug)]
struct RxQp {
    tx: QpCfg,
    remote_write: bool,
    ack_every: u8,
    msn: u32,
    on: bool,
    /// REMOTE_READ, and the context's `reads`: the hardware takes its READ requests.
    reads: bool,
}

fn rx_qp() -> impl Strategy<Value = RxQp> {
    (
        qp_cfg(),
        prop::bool::weighted(0.9),
        prop_oneof![Just(0u8), 1u8..5],
        any::<u32>(),
        prop::bool::weighted(0.95),
        prop::bool::weighted(0.8),
    )
        .prop_map(|(tx, remote_write, ack_every, msn, on, reads)| RxQp {
            tx,
            remote_write,
            ack_every,
            msn: msn & 0xFF_FFFF,
            on,
            reads,
        })
}

/// One message a peer sends: a WRITE (to MR `mr` at `off`, through a right or a wrong
/// key), a SEND, or a READ (op 5: of MR `mr` at `off`; MR 1 of each PD has REMOTE_READ).
#[derive(Clone, Debug)]
struct RxMsg {
    qp: usize,
    op: u8,
    len: u32,
    mr: usize,
    off: u32,
    bad_key: bool,
}

fn rx_msg(nqp: usize) -> impl Strategy<Value = RxMsg> {
    (
        0..nqp,
        prop_oneof![
            6 => Just(3u8),
            1 => Just(4u8),
            2 => Just(0u8),
            1 => Just(1u8),
            3 => Just(5u8)
        ],
        prop_oneof![1u32..600, 0u32..9000],
        0usize..3,
        0u32..3000,
        prop::bool::weighted(0.05),
    )
        .prop_map(|(qp, op, len, mr, off, bad_key)| RxMsg {
            qp,
            op,
            len,
            mr,
            off,
            bad_key,
        })
}

/// What happens to one frame on the way.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    Drop,
    Dup,
    /// Swapped with the next frame.
    Swap,
    /// A byte flipped (the parser rejects it, most often on the ICRC).
    Corrupt(u16),
    /// IP ECN set to CE (IPv4 checksum fixed; the ICRC does not cover it).
    Ce,
    /// `Drop` with the two frames out of sequence CE-marked.
    DropCe,
    /// `Dup` with both copies CE-marked.
    DupCe,
    /// Another destination MAC (the ICRC does not cover it).
    Mac,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        40 => Just(Fault::None),
        2 => Just(Fault::Drop),
        2 => Just(Fault::Dup),
        2 => Just(Fault::Swap),
        1 => any::<u16>().prop_map(Fault::Corrupt),
        1 => Just(Fault::Ce),
        1 => Just(Fault::Mac),
    ]
}

/// MR regions of the receiver: three per PD, the third without REMOTE_WRITE; then one
/// receive buffer per QP, which the firmware loads when a SEND starts.
const RX_BASE: u64 = 0x20_0000;
const MR_SPAN: u64 = 12 * 1024;
const RECV_BASE: u64 = RX_BASE + 6 * MR_SPAN;
const RECV_SPAN: u32 = 12 * 1024;
const RX_LEN: usize = 6 * MR_SPAN as usize + 3 * RECV_SPAN as usize;

fn set_ce(f: &mut [u8]) {
    let l3 = if f[12] == 0x81 && f[13] == 0 { 18 } else { 14 };
    match (f[l3 - 2], f[l3 - 1]) {
        (0x08, 0x00) => {
            f[l3 + 1] |= 3;
            f[l3 + 10] = 0;
            f[l3 + 11] = 0;
            let sum = (0..10).fold(0u32, |s, i| {
                s + u32::from(u16::from_be_bytes([f[l3 + 2 * i], f[l3 + 2 * i + 1]]))
            });
            let sum = (sum & 0xFFFF) + (sum >> 16);
            let sum = (sum & 0xFFFF) + (sum >> 16);
            f[l3 + 10..l3 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        _ => f[l3 + 1] |= 0x30,
    }
}

/// The frames one peer sends for its messages.
fn peer_frames(q: usize, qp: &RxQp, msgs: &[RxMsg], keys: &[u32]) -> Vec<Vec<u8>> {
    let ops: Vec<(MsgOp, RxMsg)> = msgs
        .iter()
        .filter(|m| m.qp == q)
        .map(|m| {
            let op = match m.op {
                0 => MsgOp::Send,
                1 => MsgOp::SendWithImm(m.len),
                3 => MsgOp::Write,
                5 => MsgOp::Read,
                _ => MsgOp::WriteWithImm(!m.len),
            };
            (op, m.clone())
        })
        .collect();
    peer_op_frames(q, qp, &ops, keys)
}

/// The frames one peer sends for its messages, each with the operation it asks for
/// (`m.op` aside: an atomic's operands are its `MsgOp`'s).
fn peer_op_frames(q: usize, qp: &RxQp, ops: &[(MsgOp, RxMsg)], keys: &[u32]) -> Vec<Vec<u8>> {
    let mut src = HostMem::new(MEM_BASE, MEM_LEN, 0xC3 ^ q as u8);
    let mut c = send_ctx(&qp.tx);
    c.dest_qpn = qpn_of(q);
    c.window = 1 << 20;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9000];
    for (op, m) in ops {
        let op = *op;
        let mr = q % 2 * 3 + m.mr;
        let key = if m.bad_key { keys[mr] ^ 0x10 } else { keys[mr] };
        let mut sg = heapless::Vec::new();
        let _ = sg.push(Sge {
            addr: MEM_BASE + u64::from(m.off),
            length: m.len,
            lkey: Lkey(0),
        });
        let desc = TxMsg {
            qpn: c.dest_qpn,
            op,
            solicited: false,
            sges: sg,
            length: m.len,
            remote_addr: RX_BASE + mr as u64 * MR_SPAN + u64::from(m.off),
            rkey: Rkey(key),
            first_psn: c.next_psn,
            replay: false,
            wqe_index: 0,
            start_pkt: 0,
            end_pkt: 0,
        };
        c.una_psn = c.next_psn;
        for k in 0..desc.packets(c.mtu) {
            let n = fastpath::segment(&mut c, &desc, k, &mut src, &mut buf).expect("peer frame");
            out.push(buf[..n].to_vec());
        }
    }
    out
}

/// A peer's frames as the receiver sees them: lost, duplicated, reordered, corrupted or
/// CE-marked, with Go-Back-N bringing back what got lost (from the lost frame on).
fn deliver(frames: &[Vec<u8>], faults: &mut impl Iterator<Item = Fault>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut j = 0;
    let mut budget = 4 * frames.len() + 8;
    while j < frames.len() && budget > 0 {
        budget -= 1;
        let f = &frames[j];
        match faults.next().unwrap_or(Fault::None) {
            Fault::None => {
                out.push(f.clone());
                j += 1;
            }
            Fault::Dup => {
                out.push(f.clone());
                out.push(f.clone());
                j += 1;
            }
            Fault::Drop => {
                // the next two arrive out of sequence; then the sender goes back
                out.extend(frames[j + 1..].iter().take(2).cloned());
            }
            Fault::DropCe => {
                out.extend(frames[j + 1..].iter().take(2).map(|f| {
                    let mut g = f.clone();
                    set_ce(&mut g);
                    g
                }));
            }
            Fault::DupCe => {
                let mut g = f.clone();
                set_ce(&mut g);
                out.push(g.clone());
                out.push(g);
                j += 1;
            }
            Fault::Swap => {
                if let Some(n) = frames.get(j + 1) {
                    out.push(n.clone());
                }
                out.push(f.clone());
                j += 1;
            }
            Fault::Corrupt(at) => {
                let mut g = f.clone();
                let i = usize::from(at) % g.len();
                g[i] ^= 0x41;
                out.push(g);
            }
            Fault::Ce => {
                let mut g = f.clone();
                set_ce(&mut g);
                out.push(g);
                j += 1;
            }
            Fault::Mac => {
                let mut g = f.clone();
                g[5] ^= 0x80;
                out.push(g);
            }
        }
    }
    out.extend(frames[j..].iter().cloned());
    out
}

/// The receiver's stream: every peer's deliveries, interleaved round robin.
fn rx_stream(qps: &[RxQp], msgs: &[RxMsg], faults: &[Fault], keys: &[u32]) -> Vec<Vec<u8>> {
    let mut faults = faults.iter().copied().cycle();
    let per_qp: Vec<Vec<Vec<u8>>> = (0..qps.len())
        .map(|q| deliver(&peer_frames(q, &qps[q], msgs, keys), &mut faults))
        .collect();
    let total: usize = per_qp.iter().map(Vec::len).sum();
    let mut frames = Vec::with_capacity(total);
    let mut at = vec![0usize; qps.len()];
    while frames.len() < total {
        for (q, fs) in per_qp.iter().enumerate() {
            if let Some(f) = fs.get(at[q]) {
                frames.push(f.clone());
                at[q] += 1;
            }
        }
    }
    frames
}

/// The firmware's handling of an exception, reduced to what the test needs: an
/// in-sequence packet is consumed (its payload placed where the engine would put it,
/// a SEND's first packet loads the QP's receive buffer) and the context written back;
/// anything else is left alone. Returns the memory writes, or None when it did nothing.
fn firmware(
    ctx: &mut RecvCtx,
    q: usize,
    pkt: &wire::Packet<'_>,
    reason: Exception,
) -> Option<Writes> {
    if !ctx.on {
        return None;
    }
    // the firmware writes the context back after every exception: `held` clear
    ctx.held = false;
    let ours = !matches!(reason, Exception::Address | Exception::Held);
    if !ours || pkt.psn() != ctx.epsn {
        preload(ctx, q);
        return Some(Vec::new());
    }
    // the expected packet closes a gap (the engine's responder clears `nak_sent`)
    ctx.nak_sent = false;
    let info = pkt.info();
    let (pos, payload) = (info.position, pkt.payload());
    let n = payload.len() as u32;
    let mut writes = Vec::new();
    match info.operation {
        wire::opcode::Operation::RdmaWrite => {
            if let Some(r) = pkt.reth() {
                (ctx.va, ctx.rkey, ctx.resid, ctx.length) = (r.va, r.rkey, r.dma_len, r.dma_len);
            }
            if ctx.va >= RX_BASE && ctx.va + u64::from(n) <= RECV_BASE {
                writes.push((ctx.va, payload.to_vec()));
            }
            ctx.va += u64::from(n);
            ctx.resid = ctx.resid.saturating_sub(n);
            ctx.cur = if pos.ends() {
                RxCur::None
            } else {
                RxCur::Write
            };
        }
        wire::opcode::Operation::Send => {
            if pos.starts() {
                ctx.recv_loaded = true;
                ctx.recv_addr = RECV_BASE + q as u64 * u64::from(RECV_SPAN);
                ctx.recv_resid = RECV_SPAN;
                ctx.length = 0;
            }
            if n <= ctx.recv_resid {
                writes.push((ctx.recv_addr, payload.to_vec()));
            }
            ctx.recv_addr += u64::from(n);
            ctx.recv_resid = ctx.recv_resid.saturating_sub(n);
            ctx.length += n;
            ctx.cur = if pos.ends() { RxCur::None } else { RxCur::Send };
            if pos.ends() {
                ctx.recv_loaded = false;
            }
        }
        _ => {}
    }
    if pos.ends() {
        ctx.msn = ctx.msn.add(1);
    }
    // a READ (the engine answers it) moves past its response PSNs
    let psns = match (info.operation, pkt.reth()) {
        (wire::opcode::Operation::RdmaReadRequest, Some(r)) => {
            r.dma_len.div_ceil(ctx.mtu.bytes()).max(1)
        }
        _ => 1,
    };
    ctx.epsn = ctx.epsn.add(psns);
    ctx.unacked = 0;
    preload(ctx, q);
    Some(writes)
}

/// The firmware loads QP `q`'s receive buffer ahead of its next SEND (`docs/fastpath.md`
/// §3.4) when no message is under way and none is loaded: after an exception's
/// write-back and after a MSG_DONE (`layout::load_rctx`'s conditions, the QP not held
/// then). The hardware then places the SEND's first packet.
fn preload(ctx: &mut RecvCtx, q: usize) {
    if ctx.on && !ctx.held && ctx.cur == RxCur::None && !ctx.recv_loaded {
        ctx.recv_loaded = true;
        ctx.recv_addr = RECV_BASE + q as u64 * u64::from(RECV_SPAN);
        ctx.recv_resid = RECV_SPAN;
    }
}

/// Memory writes: (address, bytes).
type Writes = Vec<(u64, Vec<u8>)>;

/// What the model's receiver (with the firmware above) does with a stream.
#[derive(Debug, Default)]
struct Expect {
    writes: Writes,
    events: Vec<Event>,
    acks: Vec<Vec<u8>>,
    exc: Vec<Vec<u8>>,
    drops: u32,
    /// Requests the receive path answered itself: out of sequence, duplicates.
    answered: [u32; 2],
    /// After frame i the firmware wrote QP q's context and these bytes to memory.
    fw: Vec<(usize, usize, RecvCtx, Writes)>,
    /// The context entries a frame hit (its QP's, on): their accessed bits.
    accessed: Vec<bool>,
    /// The frames that were READs the hardware took.
    reads: Vec<usize>,
}

/// The receiving port of the RX tests: every peer sends to it.
fn rx_port(ipv6: bool) -> PortAddr {
    PortAddr {
        mac: [2, 0, 0, 0, 0, RX_HOST],
        gid: gid(ipv6, RX_HOST),
    }
}

const RX_HOST: u8 = 9;

/// Writes `port` as the fast path's port record: its MAC and GID.
fn write_port(sim: &mut FpSim, port: &PortAddr) {
    let mut rec = [0u8; 32];
    rec[..6].copy_from_slice(&port.mac);
    rec[8..24].copy_from_slice(&port.gid);
    sim.write_record(Table::Port, 0, &rec);
}

/// The GID of `host` in the tests' templates (IPv4: `::ffff:10.0.0.host`).
fn gid(ipv6: bool, host: u8) -> [u8; 16] {
    if ipv6 {
        Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(host)).octets()
    } else {
        Ipv4Addr::new(10, 0, 0, host).to_ipv6_mapped().octets()
    }
}

fn model_rx(
    port: &PortAddr,
    frames: &[Vec<u8>],
    ctxs: &mut [RecvCtx],
    acks: &mut [SendCtx],
    table: &MrTable<256>,
    mem: &mut HostMem,
) -> Expect {
    let mut x = Expect {
        accessed: vec![false; FP_CTX_ENTRIES],
        ..Expect::default()
    };
    let mut buf = vec![0u8; 9000];
    let mut inflight = heapless::Deque::<Inflight, 4>::new();
    for (i, f) in frames.iter().enumerate() {
        let Ok(pkt) = wire::parse(f) else {
            x.drops += 1;
            continue;
        };
        let q = (0..ctxs.len())
            .find(|&i| qpn_of(i) == pkt.dest_qp())
            .expect("frames go to the case's QPs");
        if ctxs[q].on {
            x.accessed[pkt.dest_qp().value() as usize % FP_CTX_ENTRIES] = true;
        }
        let mut dma = Logged {
            mem: &mut *mem,
            writes: Vec::new(),
        };
        let out = fastpath::dispatch(
            port,
            &mut ctxs[q],
            &mut acks[q],
            &mut inflight,
            &pkt,
            table,
            &mut dma,
            0,
        );
        x.writes.append(&mut dma.writes);
        match out.answered {
            Some(fastpath::Answered::OutOfSequence) => x.answered[0] += 1,
            Some(fastpath::Answered::Duplicate) => x.answered[1] += 1,
            None => {}
        }
        if let Some(ack) = out.ack {
            let n = fastpath::ack_frame(&acks[q], &ack, &mut buf).expect("ack");
            x.acks.push(buf[..n].to_vec());
        }
        // a READ taken: its responses, all of them before the next frame (`rx_case`
        // lets the RTL send them before it gives it the next: the receive path takes
        // frames while they wait, `frames_behind_a_read_are_taken_as_the_model_takes_them`),
        // each rechecking its bytes' MR
        if let Some(mut r) = out.read {
            x.reads.push(i);
            while !r.done() {
                match fastpath::read_response(&acks[q], &mut r, table, &mut *mem, &mut buf) {
                    Ok(n) => x.acks.push(buf[..n].to_vec()),
                    Err(TxError::Dma) => {}
                    Err(e) => panic!("READ response: {e:?}"),
                }
            }
        }
        if let Some(e) = out.event {
            if let Event::Exception { reason, .. } = e {
                x.exc.push(f.clone());
                if let Some(w) = firmware(&mut ctxs[q], q, &pkt, reason) {
                    for (a, d) in &w {
                        mem.write(*a, d).expect("firmware write");
                    }
                    x.fw.push((i, q, ctxs[q], w));
                }
            }
            if let Event::MsgDone { .. } = e {
                // the next SEND's buffer, ahead of it
                preload(&mut ctxs[q], q);
                x.fw.push((i, q, ctxs[q], Vec::new()));
            }
            x.events.push(e);
        }
    }
    x
}

fn rx_case(
    sim: &mut FpSim,
    qps: &[RxQp],
    msgs: &[RxMsg],
    faults: &[Fault],
    ipv6: bool,
) -> Result<Expect, TestCaseError> {
    sim.reset();
    // every peer sends to this port, over one network protocol
    let port = rx_port(ipv6);
    let qps: Vec<RxQp> = qps
        .iter()
        .map(|q| {
            let mut q = q.clone();
            q.tx.path.host = RX_HOST;
            q.tx.path.ipv6 = ipv6;
            q.tx.pkey = 0xFFFF;
            q
        })
        .collect();
    let qps = &qps[..];
    write_port(sim, &port);
    // the receiver's memory registrations, the same for the model and the RTL
    let mut table = MemoryTable::<4, 16>::new();
    let mut mrt = MrTable::<256>::default();
    let pds: Vec<Pd> = (0..2).map(|_| table.alloc_pd().unwrap()).collect();
    let mut keys = Vec::new();
    for (p, pd) in pds.iter().enumerate() {
        for r in 0..3u64 {
            let access = match r {
                2 => AccessFlags::LOCAL_WRITE,
                1 => {
                    AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ
                }
                _ => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            };
            let addr = RX_BASE + (p as u64 * 3 + r) * MR_SPAN;
            let k = table.reg_mr(*pd, addr, MR_SPAN, access).unwrap();
            keys.push(k.rkey.0);
            let e = MrEntry::of(table.get(k.rkey.0).unwrap());
            mrt.entries[MrTable::<256>::index(e.key)] = e;
            sim.write_record(Table::Mr, k.rkey.0 >> 8, &layout::encode_mr(&e));
        }
    }
    let mut ctxs: Vec<RecvCtx> = Vec::new();
    let mut acks: Vec<SendCtx> = Vec::new();
    for (i, q) in qps.iter().enumerate() {
        let mut access = AccessFlags::LOCAL_WRITE;
        if q.remote_write {
            access = access | AccessFlags::REMOTE_WRITE;
        }
        if q.reads {
            access = access | AccessFlags::REMOTE_READ;
        }
        let mut c = RecvCtx {
            on: q.on,
            reads: q.reads,
            access,
            epsn: Psn::new(q.tx.psn),
            msn: Msn::new(q.msn),
            ack_every: q.ack_every,
            peer_gid: gid(ipv6, 1),
            ..RecvCtx::idle(qpn_of(i), pds[i % 2], q.tx.mtu)
        };
        // half the QPs come on with their first SEND's buffer loaded (a receive posted
        // before), the others take it at their first SEND's exception
        if q.msn % 2 == 0 {
            preload(&mut c, i);
        }
        sim.write_record(Table::RecvCtx, qpn_of(i).value(), &layout::encode_rctx(&c));
        ctxs.push(c);
        // the receiver's ACKs go back on its own send context
        let a = send_ctx(&qps[(i + 1) % qps.len()].tx);
        sim.write_record(Table::SendCtx, qpn_of(i).value(), &layout::encode_sctx(&a));
        acks.push(a);
    }
    let mut rtl_mem = HostMem::new(RX_BASE, RX_LEN, 0);
    let mut model_mem = rtl_mem.clone();
    sim.run_until_idle(&mut rtl_mem, 100_000).map_err(fail)?;

    let stream = rx_stream(qps, msgs, faults, &keys);
    let x = model_rx(&port, &stream, &mut ctxs, &mut acks, &mrt, &mut model_mem);
    // the RTL gets the frames back to back up to each one the firmware handles, or a
    // READ it takes, which it answers before the next (as the model above); then the
    // firmware does the same as above
    let mut fw = x.fw.iter().peekable();
    for (i, f) in stream.iter().enumerate() {
        sim.push_rx_frame(f);
        if x.reads.contains(&i) {
            sim.run_until_idle(&mut rtl_mem, 1_000_000).map_err(fail)?;
        }
        while let Some((_, q, c, w)) = fw.next_if(|a| a.0 == i) {
            sim.run_until_idle(&mut rtl_mem, 1_000_000).map_err(fail)?;
            for (a, d) in w {
                rtl_mem.write(*a, d).expect("firmware write");
            }
            sim.write_record(Table::RecvCtx, qpn_of(*q).value(), &layout::encode_rctx(c));
            // the context is whole before the next frame arrives (the model's
            // firmware answers at once; a later frame would otherwise meet `held`)
            sim.run_until_idle(&mut rtl_mem, 100_000).map_err(fail)?;
        }
    }
    sim.run_until_idle(&mut rtl_mem, 5_000_000).map_err(fail)?;

    let got_writes = sim.take_dma_writes();
    if std::env::var("FP_DEBUG").is_ok() {
        eprintln!(
            "{}: frames {} writes {} events {} (msg_done {}) acks {} drops {} firmware {}",
            sim.width(),
            stream.len(),
            x.writes.len(),
            x.events.len(),
            x.events
                .iter()
                .filter(|e| matches!(e, Event::MsgDone { .. }))
                .count(),
            x.acks.len(),
            x.drops,
            x.fw.len()
        );
    }
    prop_assert_eq!(got_writes.len(), x.writes.len(), "DMA writes");
    for (i, (g, w)) in got_writes.iter().zip(&x.writes).enumerate() {
        prop_assert_eq!(g, w, "DMA write {}", i);
    }
    let got_events = events(sim);
    let mut slot = 0u16;
    let want_events: Vec<Event> = x.events.iter().map(|e| numbered(*e, &mut slot)).collect();
    prop_assert_eq!(got_events, want_events, "events");
    let exc: Vec<Vec<u8>> = std::iter::from_fn(|| sim.pop_exc_frame())
        .map(|f| f.value)
        .collect();
    prop_assert_eq!(exc.len(), x.exc.len(), "exception frames");
    prop_assert!(exc == x.exc, "exception frames differ");
    let got_acks = frames(sim);
    prop_assert_eq!(got_acks.len(), x.acks.len(), "ACK frames");
    prop_assert!(got_acks == x.acks, "ACK frames differ");
    prop_assert_eq!(sim.rx_drops(), x.drops, "parser drops");
    prop_assert_eq!(
        sim.rx_oos_dups(),
        x.answered,
        "requests out of sequence, duplicates"
    );
    prop_assert!(rtl_mem.bytes == model_mem.bytes, "memory differs");
    for (i, c) in ctxs.iter().enumerate() {
        let b = sim
            .read_record(
                Table::RecvCtx,
                qpn_of(i).value(),
                layout::RCTX_LEN,
                &mut rtl_mem,
            )
            .map_err(fail)?;
        let got = layout::decode_rctx(b.as_slice().try_into().unwrap());
        prop_assert_eq!(got, Ok(*c), "receive context of QP {}", i);
    }
    // The accessed bits (docs/scale.md): set by the frames that hit their entry, and
    // cleared by the read that returns them (a second read finds none); a word past
    // the entries reads 0.
    let words = FP_CTX_ENTRIES.div_ceil(32);
    for w in 0..=words {
        let want = (0..32)
            .filter(|b| x.accessed.get(32 * w + b) == Some(&true))
            .fold(0u32, |a, b| a | 1 << b);
        for (read, want) in [("first", want), ("second", 0)] {
            let got = sim
                .read_word_dma_held(Table::Port, w as u32, ACCESSED_WORD)
                .map_err(fail)?;
            prop_assert_eq!(got, want, "accessed bits, word {}, {} read", w, read);
        }
    }
    Ok(x)
}

#[test]
fn placement_equals_the_model() {
    let Some(sims) = sims() else { return };
    let mut runner = runner(48);
    let strategy = (
        proptest::collection::vec(rx_qp(), 1..4),
        proptest::collection::vec(fault(), 1..40),
    )
        .prop_flat_map(|(qps, faults)| {
            let n = qps.len();
            (
                Just(qps),
                proptest::collection::vec(rx_msg(n), 1..8),
                Just(faults),
                any::<u64>(),
            )
        });
    runner
        .run(&strategy, |(qps, msgs, faults, seed)| {
            let ipv6 = seed & 2 != 0;
            for (i, s) in sims.iter().enumerate() {
                let mut sim = s.borrow_mut();
                // every other case with idle cycles and back-pressure
                if seed % 2 == 1 {
                    sim.set_shaping(Shaping::random(0.2, 0.3, seed ^ i as u64));
                }
                let r = rx_case(&mut sim, &qps, &msgs, &faults, ipv6);
                sim.set_shaping(Shaping::LINE_RATE);
                r.map_err(|e| TestCaseError::fail(format!("{}: {e}", sim.width())))?;
            }
            Ok(())
        })
        .unwrap();
}

/// A CE-marked request is judged as an unmarked one (docs/fastpath.md §3.4): WRITE and
/// SEND packets placed, requests out of sequence NAKed once and dropped, a duplicate
/// ACKed, as the model takes them, each with the firmware told of the mark (a `CE`
/// event, or the `ce` flag of a SEND's MSG_DONE) and none an exception for it. Every
/// frame is marked. Two QPs
/// at MTU 1024, their first SEND's buffer loaded; with and without idle cycles and
/// back-pressure. (Main's fp_rx_check raised reason 5 for each.)
#[test]
fn ce_marked_requests_are_taken_as_the_model_takes_them() {
    let Some(sims) = sims() else { return };
    let mut tx = line_rate_qp();
    tx.mtu = Mtu::Mtu1024;
    // (an even MSN: the first SEND's buffer loaded ahead)
    let qps = [reads_qp(tx.clone(), 4), reads_qp(tx, 6)];
    // (QP, op, length, offset; a SEND first, into the buffer loaded ahead)
    let msgs = [
        (0, 0, 700, 0),
        (0, 3, 3000, 0),
        (1, 0, 2500, 0),
        (1, 3, 500, 4000),
        (0, 3, 1024, 5000),
    ]
    .map(|(qp, op, len, off)| RxMsg {
        qp,
        op,
        len,
        mr: 0,
        off,
        bad_key: false,
    });
    // (every frame marked)
    use Fault::{Ce, DropCe, DupCe};
    let faults = [Ce, DropCe, Ce, DupCe, Ce, Ce, DropCe, Ce, Ce, DupCe, Ce];
    for (i, s) in sims.iter().enumerate() {
        let mut sim = s.borrow_mut();
        for shaped in [false, true] {
            if shaped {
                sim.set_shaping(Shaping::random(0.2, 0.3, 7 + i as u64));
            }
            let r = rx_case(&mut sim, &qps, &msgs, &faults, false);
            sim.set_shaping(Shaping::LINE_RATE);
            let w = sim.width();
            let x = r.unwrap_or_else(|e| panic!("{w} shaped {shaped}: {e}"));
            let ce = x
                .events
                .iter()
                .filter(|e| matches!(e, Event::Ce { .. }))
                .count();
            let done_ce = x
                .events
                .iter()
                .filter(|e| matches!(e, Event::MsgDone { ce: true, .. }))
                .count();
            let ecn = x.events.iter().any(|e| {
                matches!(
                    e,
                    Event::Exception {
                        reason: Exception::Ecn,
                        ..
                    }
                )
            });
            assert!(
                ce >= 10 && done_ce == 2 && !ecn && x.answered[0] > 0 && x.answered[1] > 0,
                "{w}: CE events {ce}, MSG_DONE with ce {done_ce}, an ECN exception {ecn}, answered {:?}",
                x.answered
            );
        }
    }
}

/// A case `placement_equals_the_model` found with random draws (about 1 in 2,000 cases;
/// CI's fixed cases missed it): a copy of a WRITE_LAST of 1,425 bytes with a payload byte
/// flipped (the ICRC drops it) arrives just before the good one, after a 4 KiB
/// WRITE_FIRST. The RTL was right; the harness was not: the dropped frame drains through
/// the mover for 189 cycles at 64 bits, after the FIRST's DMA write and without a
/// transfer on any port, and `FpSim::run_until_idle` took 200 quiet cycles for idle,
/// so it stopped with the good frame's verdict just taken (the waveform showed it) and
/// the test saw 5 DMA writes for the model's 6. Idle now also needs the RTL's `rx_idle`.
#[test]
fn a_dropped_corrupt_copy_does_not_lose_the_good_frame() {
    let Some(sims) = sims() else { return };
    let qp = RxQp {
        tx: QpCfg {
            path: Path {
                vlan: None,
                ipv6: false,
                tos: 17,
                sport: 58224,
                host: 245,
            },
            mtu: Mtu::Mtu4096,
            sr: false,
            window: 20,
            max_pkts_per_ack: 2,
            psn: 100,
            dest_qpn: 5_043_387,
            pkey: 50649,
        },
        remote_write: true,
        ack_every: 0,
        msn: 3_732_324,
        on: true,
        reads: false,
    };
    let write = |len| RxMsg {
        qp: 0,
        op: 3,
        len,
        mr: 0,
        off: 0,
        bad_key: false,
    };
    let msgs = [write(1), write(1), write(1), write(1), write(5521)];
    let mut faults = vec![Fault::None; 35];
    for (i, f) in [
        (5, Fault::Corrupt(44674)),
        (6, Fault::Swap),
        (15, Fault::Swap),
        (16, Fault::Dup),
        (18, Fault::Corrupt(32279)),
        (23, Fault::Ce),
        (32, Fault::Dup),
        (34, Fault::Corrupt(51396)),
    ] {
        faults[i] = f;
    }
    // The failing seed (3060851248077126410) is even (no shaping) with bit 1 set (IPv6).
    for s in &sims {
        let mut sim = s.borrow_mut();
        let r = rx_case(&mut sim, std::slice::from_ref(&qp), &msgs, &faults, true);
        assert!(r.is_ok(), "{}: {r:?}", sim.width());
    }
}

/// A receiving QP with REMOTE_WRITE and `reads`, on, no ACK coalescing.
fn reads_qp(tx: QpCfg, msn: u32) -> RxQp {
    RxQp {
        tx,
        remote_write: true,
        ack_every: 0,
        msn,
        on: true,
        reads: true,
    }
}

/// A message of QP 0 through the right key.
fn qp0_msg(op: u8, mr: usize, off: u32, len: u32) -> RxMsg {
    RxMsg {
        qp: 0,
        op,
        len,
        mr,
        off,
        bad_key: false,
    }
}

/// READ requests of a context with `reads` are the hardware's (docs/fastpath.md §3.4,
/// "READ requests"): taken (a READ event, the context past the responses' PSNs) and
/// answered with the model's responses byte for byte (FIRST/MIDDLE/LAST at MTU 1024 and
/// an ONLY, with PadCnt), read from what memory holds after the WRITE before them; the
/// ACK a WRITE asks for after a READ follows its responses. A READ of an MR without
/// REMOTE_READ and a READ of nothing go to the firmware (reasons 7 and 6), with and
/// without idle cycles and back-pressure.
#[test]
fn read_requests_are_answered_in_hardware() {
    let Some(sims) = sims() else { return };
    let mut tx = line_rate_qp();
    tx.mtu = Mtu::Mtu1024;
    let qp = reads_qp(tx, 77);
    let msg = qp0_msg;
    // (each READ the firmware gets comes after a WRITE: a check that kept a READ's
    // class from the packet before would see a WRITE's)
    let msgs = [
        msg(3, 1, 0, 3001),
        msg(5, 0, 0, 64),
        msg(5, 1, 101, 4099),
        msg(5, 1, 7, 3),
        msg(3, 1, 50, 20),
        msg(5, 1, 0, 0),
        msg(5, 1, 40, 2048),
    ];
    let faults = [Fault::None];
    for s in &sims {
        let mut sim = s.borrow_mut();
        for shaped in [false, true] {
            if shaped {
                sim.set_shaping(Shaping::random(0.2, 0.3, 7));
            }
            let r = rx_case(&mut sim, std::slice::from_ref(&qp), &msgs, &faults, false);
            sim.set_shaping(Shaping::LINE_RATE);
            let x = match r {
                Ok(x) => x,
                Err(e) => panic!("{} shaped {shaped}: {e}", sim.width()),
            };
            // the model's side: three READs taken, two for the firmware, and their
            // responses (5 + 1 + 2) among the frames with the WRITEs' ACKs
            let reads = x
                .events
                .iter()
                .filter(|e| matches!(e, Event::Read { .. }))
                .count();
            let reasons: Vec<Exception> = x
                .events
                .iter()
                .filter_map(|e| match e {
                    Event::Exception { reason, .. } => Some(*reason),
                    _ => None,
                })
                .collect();
            assert_eq!(reads, 3, "READ events");
            assert_eq!(reasons, [Exception::Key, Exception::Length]);
            assert_eq!(x.acks.len(), 8 + 2, "READ responses and ACKs");
        }
    }
}

/// A READ that follows a WRITE of the same QP returns the WRITE's bytes (the engine's
/// and the model's rule), even when the host takes DMA writes slowly and reads quickly:
/// the WRITE's last beats may still wait in the fast path (`fp_rx_move`'s output
/// slices; the host's write port ready one cycle in `every`) when
/// `fp_tx` plans the READ's responses and reads their payload. A 5,000-byte WRITE
/// (20 packets at path MTU 256, 5 at 1024) right before a READ of all its bytes, then
/// another to fresh bytes right before a READ of its last 100 bytes only, back to back
/// at the wire; the responses must equal the model's byte for byte (`rx_case`). Every
/// byte a WRITE writes differs from the one there before (the peer's and the
/// receiver's memories differ by 0xC3 at each offset of an MR), so a response read
/// before the WRITE landed cannot pass.
///
/// On main before `fp_rx_move` held a READ's descriptor behind its DMA writes
/// (docs/fastpath.md §6, "Left in RTL for READs") it failed: with writes 1 cycle in 16
/// (512 bits), 40 and 150 (both widths), not at 1 (64 bits also not at 16), the ONLY
/// response of the 100-byte READ carried all 100 bytes as memory held before the WRITE
/// (`f0 0f 2e 4d ..` for `33 cc ed 8e ..`), and at the slowest the full READ's LAST
/// response too (904 bytes at MTU 1024, 136 at 256; `00 1f 3e ..` for `c3 dc fd ..`).
#[test]
fn a_read_behind_a_write_held_at_the_host_returns_the_writes_bytes() {
    let Some(sims) = sims() else { return };
    // a WRITE and a READ of its bytes, then a WRITE to fresh bytes and a READ of its tail
    let msgs = [
        (3, 0, 5000),
        (5, 0, 5000),
        (3, 5100, 5000),
        (5, 10_000, 100),
    ]
    .map(|(op, off, len)| qp0_msg(op, 1, off, len));
    let mut failed = Vec::new();
    for s in &sims {
        let mut sim = s.borrow_mut();
        for mtu in [Mtu::Mtu256, Mtu::Mtu1024] {
            let mut tx = line_rate_qp();
            tx.mtu = mtu;
            let qp = reads_qp(tx, 78);
            for every in [1, 16, 40, 150] {
                sim.set_dma_wr_every(every);
                let r = rx_case(
                    &mut sim,
                    std::slice::from_ref(&qp),
                    &msgs,
                    &[Fault::None],
                    false,
                );
                sim.set_dma_wr_every(1);
                let x = match r {
                    Ok(x) => x,
                    Err(e) => {
                        failed.push(format!("{} {mtu:?} writes 1 in {every}: {e}", sim.width()));
                        continue;
                    }
                };
                let reads = x
                    .events
                    .iter()
                    .filter(|e| matches!(e, Event::Read { .. }))
                    .count();
                assert_eq!(reads, 2, "READ events");
                assert!(x.fw.is_empty(), "nothing for the firmware");
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A datapath that takes `budget` frames, then has no room (the model's `run` then
/// sends no more).
#[derive(Default)]
struct Budget {
    wire: Wire,
    budget: Option<usize>,
}

impl Datapath for Budget {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.can_transmit() && self.wire.transmit(frame)
    }
    fn can_transmit(&self) -> bool {
        self.budget.is_none_or(|b| self.wire.sent.len() < b)
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.wire.receive(buf)
    }
}

/// What the RTL and the model are held to in the READ receive rule's tests.
#[derive(Debug, PartialEq)]
struct RuleOut {
    frames: Vec<Vec<u8>>,
    events: Vec<Event>,
    exc: Vec<Vec<u8>>,
    mem: Vec<u8>,
    rctx: Vec<u8>,
}

/// The READ receive rule's case: one QP with `reads` at MTU 256, the frames of a READ
/// of 44 responses, a second READ of 4, four one-packet WRITEs to bytes no READ reads,
/// and a duplicate of the first READ from its response `dup_at` on.
#[derive(Clone)]
struct RuleCase {
    port: PortAddr,
    mrs: Vec<MrEntry>,
    rctx: RecvCtx,
    sctx: SendCtx,
    mem0: HostMem,
    /// READ A, READ B, WRITEs W1..W4.
    f: Vec<Vec<u8>>,
    dup: Vec<u8>,
    /// After batch `k` (with no frame in flight) the firmware loads QP 0's receive buffer
    /// (`FastPath::load_recv`, as `FpPort` does it on the RTL: read, `load_rctx`, write).
    load_after: Option<usize>,
    /// That load carries the WQE's wr_id for the CQE writer (docs/fastpath.md §3.7,
    /// "Receive CQEs"), whose CQ [`RULE_CQ`] (4 entries at [`RULE_RING`]) has this
    /// producer and consumer index.
    cqe: Option<RuleCqe>,
}

#[derive(Clone, Copy)]
struct RuleCqe {
    wr_id: u64,
    pi: u32,
    ci: u32,
}

/// The CQ of [`RuleCase::cqe`] and its ring (QP 2's receive region, unused here).
const RULE_CQ: u16 = 3;
const RULE_RING: u64 = RECV_BASE + 2 * RECV_SPAN as u64;

/// The receive buffer [`RuleCase::load_after`] loads.
const RULE_RECV: (u64, u32) = (RECV_BASE, RECV_SPAN);

fn rule_case(dup_at: u32) -> RuleCase {
    let msg = qp0_msg;
    let a_len = 44 * 256;
    let msgs = [
        msg(5, 1, 0, a_len),
        msg(5, 1, 0, 1024),
        msg(3, 0, 0, 100),
        msg(3, 0, 200, 100),
        msg(3, 0, 400, 100),
        msg(3, 0, 600, 100),
    ];
    let (mut c, qp, keys) = rule_qp(&msgs);
    assert_eq!(c.f.len(), 6, "one packet each but the READs' requests");
    let mut again = qp.clone();
    again.tx.psn = qp.tx.psn + dup_at;
    let dup = peer_frames(
        0,
        &again,
        &[msg(5, 1, dup_at * 256, a_len - dup_at * 256)],
        &keys,
    );
    c.dup = dup[0].clone();
    c
}

/// The QP of the READ receive rule's cases and the peer's frames of `msgs` (no
/// duplicate yet), with the QP and the keys of its MRs.
fn rule_qp(msgs: &[RxMsg]) -> (RuleCase, RxQp, Vec<u32>) {
    let mut tx = line_rate_qp();
    tx.mtu = Mtu::Mtu256;
    tx.path.host = RX_HOST;
    tx.pkey = 0xFFFF;
    let qp = reads_qp(tx, 500);
    // the receiver's regions as rx_case registers them (MR 1 with REMOTE_READ)
    let mut table = MemoryTable::<4, 16>::new();
    let pd = table.alloc_pd().unwrap();
    let mut mrs = Vec::new();
    for r in 0..3u64 {
        let access = match r {
            1 => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            _ => AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        };
        let k = table
            .reg_mr(pd, RX_BASE + r * MR_SPAN, MR_SPAN, access)
            .unwrap();
        mrs.push(MrEntry::of(table.get(k.rkey.0).unwrap()));
    }
    let keys: Vec<u32> = mrs.iter().map(|e| e.key).collect();
    let keys = [keys.clone(), keys].concat();
    let f = peer_frames(0, &qp, msgs, &keys);
    let c = RuleCase {
        port: rx_port(false),
        mrs,
        rctx: RecvCtx {
            on: true,
            reads: true,
            access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            epsn: Psn::new(qp.tx.psn),
            msn: Msn::new(qp.msn),
            peer_gid: gid(false, 1),
            ..RecvCtx::idle(qpn_of(0), pd, qp.tx.mtu)
        },
        sctx: send_ctx(&qp.tx),
        mem0: HostMem::new(RX_BASE, RX_LEN, 0x6B),
        f,
        dup: Vec::new(),
        load_after: None,
        cqe: None,
    };
    (c, qp, keys)
}

impl RuleCase {
    /// The model given `batches` of frames, one `run` each, sending at most the
    /// batch's budget of frames in it.
    fn model(&self, batches: &[(&[Vec<u8>], Option<usize>)]) -> RuleOut {
        let mut mem = self.mem0.clone();
        let mut fp = FastPathPort::<Budget, 64>::new(Budget::default());
        fp.set_port(self.port.mac, self.port.gid);
        for e in &self.mrs {
            fp.write_mr(MrTable::<64>::index(e.key), &layout::encode_mr(e));
        }
        fp.write_sctx(qpn_of(0), 0, &layout::encode_sctx(&self.sctx));
        fp.write_rctx(qpn_of(0), &layout::encode_rctx(&self.rctx));
        if let Some(c) = self.cqe {
            let ring = roce_firmware::fastpath::CqRing {
                ring: RULE_RING,
                log_depth: 2,
                pi: c.pi,
                ci: c.ci,
            };
            assert!(fp.set_cq_ring(RULE_CQ, Some(ring)), "model: the CQ");
        }
        let cqe = self.cqe.map(|c| RecvCqe {
            wr_id: c.wr_id,
            cq: RULE_CQ,
        });
        for (k, (frames, budget)) in batches.iter().enumerate() {
            fp.inner.wire.rx.extend(frames.iter().cloned());
            fp.inner.budget = budget.map(|b| fp.inner.wire.sent.len() + b);
            fp.run(&mut mem);
            if self.load_after == Some(k) {
                assert!(fp.load_recv(qpn_of(0), Some(RULE_RECV), cqe), "model: load");
            }
        }
        fp.inner.budget = None;
        fp.run(&mut mem);
        let (mut events, mut exc) = (Vec::new(), Vec::new());
        let (mut ev, mut buf) = ([0; layout::EVENT_WORDS], vec![0; 9000]);
        let mut slot = 0u16;
        while fp.poll_event(&mut ev, &mut buf) {
            let e = layout::decode_event_words(&ev).expect("the model's event");
            if let Event::Exception { frame_len, .. } = e {
                exc.push(buf[..usize::from(frame_len)].to_vec());
            }
            events.push(numbered(e, &mut slot));
        }
        RuleOut {
            frames: core::mem::take(&mut fp.inner.wire.sent),
            events,
            exc,
            mem: mem.bytes.clone(),
            rctx: fp.read_rctx(qpn_of(0)).to_vec(),
        }
    }

    /// The RTL given `batches` of frames back to back with its transmit output held,
    /// each batch clocked 20,000 cycles, then let go until idle.
    fn rtl(&self, sim: &mut FpSim, batches: &[&[Vec<u8>]], shaped: bool) -> RuleOut {
        sim.reset();
        if shaped {
            sim.set_shaping(Shaping::random(0.2, 0.3, 11));
        }
        let mut mem = self.mem0.clone();
        write_port(sim, &self.port);
        for e in &self.mrs {
            sim.write_record(Table::Mr, e.key >> 8, &layout::encode_mr(e));
        }
        let q = qpn_of(0).value();
        sim.write_record(Table::SendCtx, q, &layout::encode_sctx(&self.sctx));
        sim.write_record(Table::RecvCtx, q, &layout::encode_rctx(&self.rctx));
        if let Some(c) = self.cqe {
            let cq = u32::from(RULE_CQ);
            let words = [
                RULE_RING as u32,
                (RULE_RING >> 32) as u32,
                0x100 | 2,
                c.pi,
                c.ci,
            ];
            for (i, v) in words.into_iter().enumerate() {
                sim.write_word(Table::Port, cq, CQW_RING_WORD + i as u8, v);
            }
        }
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        sim.set_tx_hold(true);
        for (k, frames) in batches.iter().enumerate() {
            for f in *frames {
                sim.push_rx_frame(f);
            }
            for _ in 0..20_000 {
                sim.tick(&mut mem);
            }
            if self.load_after == Some(k) {
                let b = sim
                    .read_record(Table::RecvCtx, q, layout::RCTX_LEN, &mut mem)
                    .unwrap();
                let mut b: [u8; layout::RCTX_LEN] = b.try_into().unwrap();
                // (refused as `FpPort` refuses it: a held QP, say; the results differ)
                if layout::load_rctx(&mut b, qpn_of(0), Some(RULE_RECV)) {
                    // the wr_id and the receive CQ, then the context that says so
                    if let Some(c) = self.cqe {
                        for (w, v) in [
                            (CQW_RECV_WRID_LO_WORD, c.wr_id as u32),
                            (CQW_RECV_WRID_HI_WORD, (c.wr_id >> 32) as u32),
                            (CQW_SEND_CQ_WORD, CQW_RECV_CQ | 0x100 | u32::from(RULE_CQ)),
                        ] {
                            sim.write_word(Table::Port, q, w, v);
                        }
                        layout::cqe_rctx(&mut b);
                    }
                    sim.write_record(Table::RecvCtx, q, &b);
                }
            }
        }
        sim.set_tx_hold(false);
        // (the quiet cycles `run_until_idle` counts ran on while the output was held: a
        // frame waiting there, an ACK with nothing behind it, would stay)
        for _ in 0..1_000 {
            sim.tick(&mut mem);
        }
        sim.run_until_idle(&mut mem, 1_000_000).unwrap();
        sim.set_shaping(Shaping::LINE_RATE);
        let frames = frames(sim);
        let events = events(sim);
        let exc = std::iter::from_fn(|| sim.pop_exc_frame())
            .map(|f| f.value)
            .collect();
        let rctx = sim
            .read_record(Table::RecvCtx, q, layout::RCTX_LEN, &mut mem)
            .unwrap();
        RuleOut {
            frames,
            events,
            exc,
            mem: mem.bytes.clone(),
            rctx,
        }
    }
}

/// The kinds of a run's events, for its expectation.
fn event_kinds(out: &RuleOut) -> Vec<&'static str> {
    out.events
        .iter()
        .map(|e| match e {
            Event::Read { .. } => "read",
            Event::Exception {
                reason: Exception::Opcode,
                ..
            } => "duplicate",
            Event::Exception {
                reason: Exception::Held,
                ..
            } => "held",
            _ => "other",
        })
        .collect()
}

fn assert_rule_out(got: &RuleOut, want: &RuleOut, w: &str) {
    assert_eq!(got.frames.len(), want.frames.len(), "{w}: frames");
    for (i, (g, x)) in got.frames.iter().zip(&want.frames).enumerate() {
        assert!(g == x, "{w}: frame {i} differs");
    }
    assert_eq!(got.events, want.events, "{w}: events");
    assert!(got.exc == want.exc, "{w}: exception frames");
    assert!(got.mem == want.mem, "{w}: memory");
    assert_eq!(got.rctx, want.rctx, "{w}: receive context");
}

/// The receive path goes on taking frames while a READ's responses wait
/// (docs/fastpath.md §3.4, "The order of the responses"; the model's
/// `FastPathPort::run_rx`), as the RTL does now (§6, "The order rule the RTL follows"):
/// a READ of 44 responses (MTU 256), then back to back a second READ, two WRITEs that
/// ask for an ACK, a WRITE out of sequence (its predecessor lost), a duplicate READ
/// from the first READ's 37th response, and the lost WRITE and the one after it again.
/// The model takes all of them in one `run` before it sends: the second READ queues
/// behind the first, the two ACKs merge behind it and the NAK replaces them (the later
/// PSN), the duplicate drops the second READ (its next PSN is after the duplicate's)
/// and is held, unprocessed, until the first READ's responses are out, and the frames
/// behind it wait for it. The RTL gets the same frames with its transmit output held
/// (it plans at most its frame FIFO's worth of responses, far fewer than 37, before
/// the duplicate comes), then sends: the same frames byte for byte, events, exception
/// frames, memory and context, with and without idle cycles and back-pressure. The RTL
/// before this rule took no frame while a READ's responses waited: it sent the second
/// READ's responses and each ACK (51 frames for the model's 45).
#[test]
fn frames_behind_a_read_are_taken_as_the_model_takes_them() {
    let c = rule_case(36);
    let f = &c.f;
    // (the fifth frame, the third WRITE, is lost the first time)
    let stream: Vec<Vec<u8>> = [&f[0], &f[1], &f[2], &f[3], &f[5], &c.dup, &f[4], &f[5]]
        .into_iter()
        .cloned()
        .collect();
    let want = c.model(&[(&stream, None)]);
    // what the rule gives: the first READ's 44 responses and one NAK of the lost WRITE
    // (the ACKs merged into it), the second READ dropped, no ACK for the WRITEs
    // behind the duplicate (the exception left the QP held)
    assert_eq!(want.frames.len(), 44 + 1, "model: frames");
    assert_eq!(
        event_kinds(&want),
        ["read", "read", "duplicate", "held", "held"],
        "model: events"
    );
    let Some(sims) = sims() else { return };
    for (s, shaped) in sims.iter().flat_map(|s| [(s, false), (s, true)]) {
        let mut sim = s.borrow_mut();
        let w = format!("{} shaped {shaped}", sim.width());
        let got = c.rtl(&mut sim, &[&stream], shaped);
        assert_rule_out(&got, &want, &w);
        assert_eq!(
            sim.rx_oos_dups(),
            [1, 0],
            "{w}: out of sequence, duplicates"
        );
    }
}

/// A duplicate READ from a response before the one the planner would send next drops
/// the rest of the READ it holds (`fp_tx_plan`'s `rd_kill`) with the READs queued
/// behind it, as the model drops them at the head of its queue: the same frames as
/// above but the duplicate, from the first READ's second response, comes after the RTL
/// (its transmit output held) has planned `k` of the first READ's responses; the model
/// sends `k` responses before it gets the duplicate. Then neither sends the rest of the
/// first READ nor the second READ, and the duplicate is not held (no READ waits).
#[test]
fn a_duplicate_read_drops_the_rest_of_the_read_under_way() {
    let c = rule_case(1);
    let f = &c.f;
    let first: Vec<Vec<u8>> = [&f[0], &f[1], &f[2], &f[3], &f[5]]
        .into_iter()
        .cloned()
        .collect();
    let then: Vec<Vec<u8>> = [&c.dup, &f[4], &f[5]].into_iter().cloned().collect();
    let Some(sims) = sims() else { return };
    for (s, shaped) in sims.iter().flat_map(|s| [(s, false), (s, true)]) {
        let mut sim = s.borrow_mut();
        let w = format!("{} shaped {shaped}", sim.width());
        let got = c.rtl(&mut sim, &[&first, &then], shaped);
        // the RTL's responses before the NAK: those it had planned at the duplicate
        let k = got.frames.len() - 1;
        assert!((2..44).contains(&k), "{w}: {k} responses planned");
        let want = c.model(&[(&first, Some(k)), (&then, None)]);
        assert_eq!(want.frames.len(), k + 1, "{w}: model: frames");
        assert_eq!(
            event_kinds(&want),
            ["read", "read", "duplicate", "held", "held"],
            "{w}: model: events"
        );
        assert_rule_out(&got, &want, &w);
    }
}

/// The kinds of the events of the receiver-not-ready case.
fn rnr_kinds(out: &RuleOut) -> Vec<&'static str> {
    out.events
        .iter()
        .map(|e| match e {
            Event::Read { .. } => "read",
            Event::Rnr { ce: false, .. } => "rnr",
            Event::Rnr { ce: true, .. } => "rnr ce",
            Event::Ce { .. } => "ce",
            Event::MsgDone { .. } => "done",
            _ => "other",
        })
        .collect()
}

/// The receive CQE (docs/fastpath.md §3.7, "Receive CQEs"): the firmware loads QP 0's
/// receive buffer with its WQE's wr_id between a WRITE and a SEND of three packets (MTU
/// 256) followed by a WRITE; at the SEND's last packet `fp_cqw` writes the CQE the
/// engine's completion encodes to (`Cqe::from_wc`: wr_id, the SEND's length, opcode
/// RECV, the SE bit, the owner bit of the ring's pass) at the ring's producer index and
/// sets the `MSG_DONE`'s `cqe` bit, as the model's `CqWriter`; with the ring full by the
/// consumer index it holds, or the load without a wr_id, it writes nothing and the bit
/// is clear. Frames, events, memory (the ring among it) and the context (its
/// `recv_cqe` cleared at the SEND's end) the model's `FastPathPort`'s, 64 and 512 bits,
/// with and without idle cycles and back-pressure.
#[test]
fn the_cqe_writer_writes_the_receive_cqe_the_model_writes() {
    let msg = qp0_msg;
    let msgs = [msg(3, 0, 0, 100), msg(0, 0, 0, 600), msg(3, 0, 200, 100)];
    let (mut c, _, _) = rule_qp(&msgs);
    let f = c.f.clone();
    assert_eq!(f.len(), 5, "W1, S (3 packets), W2");
    c.load_after = Some(0);
    let (first, then) = (&f[..1], &f[1..]);
    let wr_id = 0x8123_4567_89AB_CDEF;
    let sims = sims();
    // (pi, ci): one written, room; a full ring (4 entries); the pass's second lap
    for (cqe, written) in [
        (Some((1, 0)), true),
        (Some((4, 0)), false),
        (Some((6, 3)), true),
        (None, false),
    ] {
        c.cqe = cqe.map(|(pi, ci)| RuleCqe { wr_id, pi, ci });
        let want = c.model(&[(first, None), (then, None)]);
        let what = format!("{cqe:?}");
        let done: Vec<&Event> = want
            .events
            .iter()
            .filter(|e| matches!(e, Event::MsgDone { .. }))
            .collect();
        let [Event::MsgDone {
            cqe: got,
            byte_len,
            solicited,
            ..
        }] = done[..]
        else {
            panic!("{what}: model: one MSG_DONE: {:?}", want.events);
        };
        assert_eq!((*got, *byte_len), (written, 600), "{what}: model: MSG_DONE");
        if let (Some((pi, _)), true) = (cqe, written) {
            // the engine's completion of the WQE (`complete_recv`), as the ABI encodes it
            let mut wc = WorkCompletion::new(wr_id, qpn_of(0), WcOpcode::Recv, WcStatus::Success);
            wc.byte_len = 600;
            wc.solicited = *solicited;
            let at = (RULE_RING + 32 * u64::from(pi % 4) - RX_BASE) as usize;
            assert_eq!(
                &want.mem[at..at + 32],
                Cqe::from_wc(&wc, pi, 2).as_bytes(),
                "{what}: model: the CQE"
            );
        }
        let Some(sims) = &sims else { continue };
        let batches: [&[Vec<u8>]; 2] = [first, then];
        for (s, shaped) in sims.iter().flat_map(|s| [(s, false), (s, true)]) {
            let mut sim = s.borrow_mut();
            let w = format!("{what} {} shaped {shaped}", sim.width());
            let got = c.rtl(&mut sim, &batches, shaped);
            assert_rule_out(&got, &want, &w);
        }
    }
}

/// A SEND's first packet to a QP whose receive queue the firmware found empty
/// (`rq_empty`, its `min_rnr_timer` in byte 32; docs/fastpath.md §3.4, "Receiver not
/// ready") is answered by `fp_rx_check` as the model answers it (`not_ready`): an RNR
/// NAK for its PSN with the current MSN, `nak_sent` set, the expected PSN and MSN left,
/// an `RNR` event. At MTU 256 the peer sends a WRITE W1, a SEND S of three packets and
/// a WRITE W2 back to back, then a duplicate of W1 and S's first packet again, CE-marked
/// (as is S's last): S's first is RNR NAKed, its middle, last and W2 are out of sequence
/// behind the NAK (dropped without another; the marked one a `CE` event), the duplicate
/// ACKed again, the retry RNR NAKed again (its event with the CE mark). Then the
/// firmware loads a receive buffer (`load_rctx` clears `rq_empty`) and S and W2 come
/// again: placed, S's MSG_DONE. Three ways: without a READ before (every ACK and NAK on
/// the wire); behind a READ of 44 responses that wait (the RTL's transmit output held),
/// where the RNR NAK replaces W1's ACK behind the READ and neither the duplicate's ACK
/// nor the second RNR NAK replaces it (fp_resp_q's merge: the model's `push_ack`); and
/// so with the buffer loaded and S and W2 placed behind the READ too (W2's ACK replaces
/// the NAK). The same frames byte for byte, events, memory and context as the model's
/// `FastPathPort`, 64 and 512 bits, with and without idle cycles and back-pressure.
/// (Main's RTL raised reason 9 for S's first packet and held the QP.)
#[test]
fn an_empty_receive_queue_is_rnr_naked_as_the_model_naks_it() {
    let msg = qp0_msg;
    let msgs = [
        msg(5, 1, 0, 44 * 256),
        msg(3, 0, 0, 100),
        msg(0, 0, 0, 600),
        msg(3, 0, 200, 100),
    ];
    let (mut c, qp, _) = rule_qp(&msgs);
    let f = c.f.clone();
    assert_eq!(f.len(), 6, "READ, W1, S (3 packets), W2");
    c.rctx.rnr = Some(RnrTimer::new(14));
    c.load_after = Some(0);
    let ce = |g: &Vec<u8>| {
        let mut g = g.clone();
        set_ce(&mut g);
        g
    };
    let then: Vec<Vec<u8>> = f[2..6].to_vec();
    let sims = sims();
    for read in [false, true] {
        let mut c = c.clone();
        if !read {
            // (the READ's PSNs and MSN passed already)
            c.rctx.epsn = Psn::new(qp.tx.psn + 44);
            c.rctx.msn = c.rctx.msn.add(1);
        }
        let first: Vec<Vec<u8>> = f[usize::from(!read)..2]
            .iter()
            .cloned()
            .chain([f[2].clone(), f[3].clone(), ce(&f[4]), f[5].clone()])
            .chain([f[1].clone(), ce(&f[2])])
            .collect();
        for loaded in [false, true] {
            if !read && !loaded {
                continue;
            }
            c.load_after = loaded.then_some(0);
            let batches: Vec<&[Vec<u8>]> = if loaded {
                vec![&first, &then]
            } else {
                vec![&first]
            };
            // (behind the READ the model sends nothing until the end, as the RTL, whose
            // transmit output is held)
            let budget = read.then_some(0);
            let want = c.model(&batches.iter().map(|b| (*b, budget)).collect::<Vec<_>>());
            let what = format!("READ {read} loaded {loaded}");
            let mut kinds = vec!["rnr", "ce", "rnr ce"];
            if read {
                kinds.insert(0, "read");
            }
            if loaded {
                kinds.push("done");
            }
            assert_eq!(rnr_kinds(&want), kinds, "{what}: model: events");
            let rnr_naks = want
                .frames
                .iter()
                .filter(|g| {
                    wire::parse(g).is_ok_and(|p| {
                        p.aeth()
                            .is_some_and(|a| a.syndrome == Syndrome::RnrNak(RnrTimer::new(14)))
                    })
                })
                .count();
            let (n, naks) = match (read, loaded) {
                // W1's ACK, the RNR NAK, the duplicate's ACK, the RNR NAK; S's, W2's ACKs
                (false, _) => (6, 2),
                // the READ's responses and what its merges left behind it
                (true, false) => (44 + 1, 1),
                (true, true) => (44 + 1, 0),
            };
            assert_eq!(
                (want.frames.len(), rnr_naks),
                (n, naks),
                "{what}: model: frames, RNR NAKs"
            );
            let Some(sims) = &sims else { return };
            for (s, shaped) in sims.iter().flat_map(|s| [(s, false), (s, true)]) {
                let mut sim = s.borrow_mut();
                let w = format!("{what} {} shaped {shaped}", sim.width());
                let got = c.rtl(&mut sim, &batches, shaped);
                assert_rule_out(&got, &want, &w);
                // (S's middle and last, W2)
                assert_eq!(
                    sim.rx_oos_dups(),
                    [3, 1],
                    "{w}: out of sequence, duplicates"
                );
            }
        }
    }
}

// ------------------------------------------------------------------ atomics

/// The atomic responder's case (docs/fastpath.md §3.4, "Atomic requests"): the READ
/// rule's QP (`reads`, MTU 256) with REMOTE_ATOMIC unless `qp_atomic` is false; MR 0
/// with REMOTE_ATOMIC, 4 bytes short of `MR_SPAN` (an aligned VA can cross its end),
/// MR 1 with REMOTE_READ and no REMOTE_ATOMIC, MR 2 with REMOTE_ATOMIC past the end of
/// host memory (its DMA fails). With the QP and its MRs' keys.
fn atomic_case(qp_atomic: bool) -> (RuleCase, RxQp, Vec<u32>) {
    let (mut c, qp, _) = rule_qp(&[]);
    let mut table = MemoryTable::<4, 16>::new();
    let pd = table.alloc_pd().unwrap();
    let rw = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let regions = [
        (MR_SPAN - 4, rw | AccessFlags::REMOTE_ATOMIC),
        (MR_SPAN, rw | AccessFlags::REMOTE_READ),
        (MR_SPAN, rw | AccessFlags::REMOTE_ATOMIC),
    ];
    c.mrs = regions
        .iter()
        .zip(0u64..)
        .map(|(&(len, access), r)| {
            let k = table
                .reg_mr(pd, RX_BASE + r * MR_SPAN, len, access)
                .unwrap();
            MrEntry::of(table.get(k.rkey.0).unwrap())
        })
        .collect();
    let keys: Vec<u32> = c.mrs.iter().map(|e| e.key).collect();
    c.mem0 = HostMem::new(RX_BASE, 2 * MR_SPAN as usize, 0x6B);
    c.rctx.pd = pd;
    c.rctx.access = rw | AccessFlags::REMOTE_READ;
    if qp_atomic {
        c.rctx.access = c.rctx.access | AccessFlags::REMOTE_ATOMIC;
    }
    (c, qp, keys)
}

/// An atomic request of QP 0 to MR `mr` at `off` (`op` its operands).
fn atomic_op(op: MsgOp, mr: usize, off: u32) -> (MsgOp, RxMsg) {
    (op, qp0_msg(6, mr, off, 8))
}

/// The original values of a run's `ATOMIC` events, and its exceptions' reasons.
fn atomic_events(out: &RuleOut) -> (Vec<u64>, Vec<Exception>) {
    let (mut origs, mut reasons) = (Vec::new(), Vec::new());
    for e in &out.events {
        match e {
            Event::Atomic { orig, .. } => origs.push(*orig),
            Event::Exception { reason, .. } => reasons.push(*reason),
            _ => {}
        }
    }
    (origs, reasons)
}

/// In-sequence CMP_SWAP and FETCH_ADD requests of a context with `reads` are executed
/// by `fp_rx_check` as the model's `take_atomic` executes them (docs/fastpath.md §3.4,
/// "Atomic requests"; §6, "Atomic requests in RTL"): the 8 bytes read by DMA, compared
/// and swapped or added to, written back; the ATOMIC ACKNOWLEDGE (the original value)
/// sent in order with the READ responses and ACKs, an `ATOMIC` event. A READ of 44
/// responses first (they wait: the RTL's transmit output is held, the model sends
/// nothing until the end), then back to back a CMP_SWAP that hits, one that misses, a
/// FETCH_ADD that wraps, all on the same 8 bytes, a WRITE to those bytes right behind
/// them, a FETCH_ADD on what it wrote, a CMP_SWAP on the next 8 bytes, a FETCH_ADD at
/// the MR's last aligned word, a WRITE over all of them and a CMP_SWAP that misses:
/// no exception, the original values the arithmetic says, and the frames, events,
/// memory and context the model's. Then each failing rule, in a run of its own (the
/// exception holds the QP): a bad R_Key, a misaligned VA, an MR without REMOTE_ATOMIC,
/// 8 bytes past the MR's end, a DMA that fails, a QP without REMOTE_ATOMIC, a duplicate
/// (a PSN before the expected one): an exception of the model's reason behind a
/// CMP_SWAP that hits, nothing written for it, the WRITE behind it held; with and
/// without the READ before. 64 and 512 bits, with and without idle cycles and
/// back-pressure, and the in-sequence run with the host taking DMA writes one cycle
/// in 37. (Main's RTL left every atomic to the firmware, reason 2.) The QP's
/// `max_dest_rd_atomic` is 4, so the run is cut after the third atomic behind the READ;
/// whole, its fourth is dropped as the engine drops it (§3.4, "The responder's
/// resources"), the RTL as the model (before rdlimit both took it).
#[test]
fn atomic_requests_are_executed_as_the_model_executes_them() {
    let (c, qp, keys) = atomic_case(true);
    let word = |off: usize| u64::from_le_bytes(c.mem0.bytes[off..off + 8].try_into().unwrap());
    let (v64, v72) = (word(64), word(72));
    let (s1, add) = (0x1111_2222_3333_4444u64, 0xFFFF_FFFF_FFFF_FFF0u64);
    let read = (MsgOp::Read, qp0_msg(5, 1, 0, 44 * 256));
    let write = |off, len| (MsgOp::Write, qp0_msg(3, 0, off, len));
    let ops = [
        read.clone(),
        atomic_op(
            MsgOp::CmpSwap {
                compare: v64,
                swap: s1,
            },
            0,
            64,
        ),
        atomic_op(
            MsgOp::CmpSwap {
                compare: v64,
                swap: 5,
            },
            0,
            64,
        ),
        atomic_op(MsgOp::FetchAdd { add }, 0, 64),
        write(64, 8),
        atomic_op(MsgOp::FetchAdd { add: 3 }, 0, 64),
        atomic_op(
            MsgOp::CmpSwap {
                compare: v72,
                swap: 9,
            },
            0,
            72,
        ),
        atomic_op(MsgOp::FetchAdd { add: 1 }, 0, (MR_SPAN - 16) as u32),
        write(20, 100),
        atomic_op(
            MsgOp::CmpSwap {
                compare: v64,
                swap: 1,
            },
            0,
            64,
        ),
    ];
    let f = peer_op_frames(0, &qp, &ops, &keys);
    assert_eq!(f.len(), ops.len(), "one frame each");
    // The QP's `max_dest_rd_atomic` (`rd_max`) is 4: behind the READ, whose responses
    // wait, three atomics fit; the rest run as a second case, from the context after
    // the first four (§3.4, "The responder's resources").
    assert_eq!(c.rctx.rd_max, fastpath::RD_MAX);
    let mut c2 = c.clone();
    c2.rctx.epsn = wire::parse(&f[4]).unwrap().psn();
    c2.rctx.msn = c.rctx.msn.add(4);
    let sims = sims();
    let check = |c: &RuleCase, frames: &[Vec<u8>], what: &str| -> RuleOut {
        // (a frame held behind the responses is taken in the model's `run` after the
        // one that sent them)
        let want = c.model(&[(frames, Some(0)), (&[], None)]);
        if let Some(sims) = &sims {
            for (s, shaped) in sims.iter().flat_map(|s| [(s, false), (s, true)]) {
                let mut sim = s.borrow_mut();
                let w = format!("{what} {} shaped {shaped}", sim.width());
                let got = c.rtl(&mut sim, &[frames], shaped);
                assert_rule_out(&got, &want, &w);
            }
        }
        want
    };
    let want = check(&c, &f[..4], "in sequence");
    let want2 = check(&c2, &f[4..], "in sequence, then");
    // the host slow to take DMA writes (ready one cycle in 37) while its reads are
    // quick: the FETCH_ADD behind the first WRITE must read what that WRITE wrote, so
    // it waits until the WRITE's data has left (`S_AW`)
    if let Some(sims) = &sims {
        for s in sims {
            let mut sim = s.borrow_mut();
            sim.set_dma_wr_every(37);
            let got = c2.rtl(&mut sim, &[&f[4..]], false);
            sim.set_dma_wr_every(1);
            assert_rule_out(&got, &want2, &format!("slow writes {}", sim.width()));
        }
    }
    let (origs, reasons) = atomic_events(&want);
    assert_eq!(reasons, [], "model: exceptions");
    assert_eq!(
        origs,
        [v64, s1, s1],
        "model: the first three's original values"
    );
    // the READ's 44 responses and the 3 ATOMIC ACKNOWLEDGEs
    assert_eq!(want.frames.len(), 44 + 3, "model: frames");
    let (origs, reasons) = atomic_events(&want2);
    assert_eq!(reasons, [], "model: exceptions after");
    assert_eq!(origs.len(), 4, "model: ATOMIC events after");
    // the 4 ATOMIC ACKNOWLEDGEs and the WRITEs' two ACKs
    assert_eq!(want2.frames.len(), 4 + 2, "model: frames after");
    // All of them in one run: the fourth atomic behind the READ finds the QP's four
    // resources taken and is dropped (`RD_DROP`, `nak_sent` cleared, `epsn` and `msn`
    // kept), as the engine's `check_op` drops it; the requests after it are out of
    // sequence: the gap's one NAK, then dropped; the RTL as the model.
    let beyond = check(&c, &f, "beyond max_dest_rd_atomic");
    let (origs, reasons) = atomic_events(&beyond);
    assert_eq!((origs.len(), reasons), (3, vec![]), "model: beyond");
    let drops = beyond
        .events
        .iter()
        .filter(|e| matches!(e, Event::RdDropped { .. }))
        .count();
    assert_eq!(drops, 1, "model: the atomics dropped");
    // the READ's 44 responses, 3 ATOMIC ACKNOWLEDGEs and the NAK, which replaced the
    // first WRITE's ACK queued behind them (a later PSN)
    assert_eq!(beyond.frames.len(), 44 + 3 + 1, "model: frames beyond");

    let ok = atomic_op(
        MsgOp::CmpSwap {
            compare: v64,
            swap: s1,
        },
        0,
        64,
    );
    let fails: [(&str, bool, (MsgOp, RxMsg), Exception); 7] = [
        (
            "bad R_Key",
            true,
            {
                let mut a = ok.clone();
                a.1.bad_key = true;
                a
            },
            Exception::Key,
        ),
        (
            "misaligned",
            true,
            atomic_op(MsgOp::FetchAdd { add: 1 }, 0, 68),
            Exception::Key,
        ),
        (
            "no REMOTE_ATOMIC on the MR",
            true,
            atomic_op(MsgOp::FetchAdd { add: 1 }, 1, 64),
            Exception::Key,
        ),
        (
            "past the MR's end",
            true,
            atomic_op(MsgOp::FetchAdd { add: 1 }, 0, (MR_SPAN - 8) as u32),
            Exception::Key,
        ),
        (
            "DMA fails",
            true,
            atomic_op(MsgOp::FetchAdd { add: 1 }, 2, 64),
            Exception::Key,
        ),
        (
            "no REMOTE_ATOMIC on the QP",
            false,
            ok.clone(),
            Exception::Key,
        ),
        ("duplicate", true, ok.clone(), Exception::Opcode),
    ];
    for (name, qp_atomic, bad, reason) in fails {
        let (c, _, _) = atomic_case(qp_atomic);
        for with_read in [false, true] {
            let mut ops = vec![read.clone(), ok.clone(), bad.clone(), write(64, 8)];
            if !with_read {
                ops.remove(0);
            }
            let mut f = peer_op_frames(0, &qp, &ops, &keys);
            if name == "duplicate" {
                // the CMP_SWAP again, for the one after it
                let n = f.len();
                f[n - 2] = f[n - 3].clone();
            }
            let want = check(&c, &f, &format!("{name} READ {with_read}"));
            let (origs, reasons) = atomic_events(&want);
            let (n_ok, want_reasons) = if qp_atomic {
                (1, vec![reason, Exception::Held])
            } else {
                (0, vec![reason, Exception::Held, Exception::Held])
            };
            assert_eq!(origs.len(), n_ok, "{name}: model: ATOMIC events");
            assert_eq!(
                reasons, want_reasons,
                "{name} READ {with_read}: model: exceptions"
            );
        }
    }
}

// ------------------------------------------------------------------ line rate

/// The QP of the line-rate tests: IPv4, no VLAN, MTU 4096.
fn line_rate_qp() -> QpCfg {
    QpCfg {
        path: Path {
            vlan: None,
            ipv6: false,
            tos: 0,
            sport: 50000,
            host: RX_HOST,
        },
        mtu: Mtu::Mtu4096,
        sr: false,
        window: 128,
        max_pkts_per_ack: 64,
        psn: 100,
        dest_qpn: 0x123,
        pkey: 0xFFFF,
    }
}

/// A new RDMA WRITE of `len` bytes from one SGE at `src` to `remote` through `rkey`.
fn write_msg(qpn: Qpn, src: u64, len: u32, remote: u64, rkey: Rkey, psn: Psn) -> TxMsg {
    let mut sges = heapless::Vec::new();
    let _ = sges.push(Sge {
        addr: src,
        length: len,
        lkey: Lkey(0),
    });
    TxMsg {
        qpn,
        op: MsgOp::Write,
        solicited: false,
        sges,
        length: len,
        remote_addr: remote,
        rkey,
        first_psn: psn,
        replay: false,
        wqe_index: 0,
        start_pkt: 0,
        end_pkt: 0,
    }
}

/// Cycles between consecutive entries that are not one apart (bubbles).
fn gaps(cycles: impl Iterator<Item = u64>) -> u64 {
    let v: Vec<u64> = cycles.collect();
    v.windows(2).map(|w| w[1] - w[0] - 1).sum()
}

/// A 64 KiB RDMA WRITE at MTU 4096 leaves the segmenter as 16 frames with no idle cycle
/// on the wire between the first beat and the last, at both widths; the frames are
/// the model's.
#[test]
fn line_rate_segmenter() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.reset();
        let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x77);
        let mut ctx = send_ctx(&line_rate_qp());
        let qpn = qpn_of(0);
        sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ctx));
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        let desc = write_msg(
            qpn,
            MEM_BASE + 3,
            65536,
            0x4000_0000,
            Rkey(0x1234),
            ctx.next_psn,
        );
        let mut want = Vec::new();
        let mut buf = vec![0u8; 9000];
        for k in 0..desc.packets(ctx.mtu) {
            let n = fastpath::segment(&mut ctx, &desc, k, &mut mem, &mut buf).unwrap();
            want.push(buf[..n].to_vec());
        }
        sim.record_timeline();
        sim.push_txd(&layout::encode_txd(&desc));
        sim.run_until_idle(&mut mem, 1_000_000).unwrap();
        let t = sim.take_timeline();
        assert_eq!(frames(&mut sim), want, "{}", sim.width());
        let beats: usize = want.iter().map(|f| sim.width().beats(f.len())).sum();
        assert_eq!(t.tx_out.len(), beats);
        assert_eq!(
            gaps(t.tx_out.iter().map(|b| b.0)),
            0,
            "{}: idle cycles on the wire",
            sim.width()
        );
        let first = t.tx_out[0].0 - t.txd[0];
        let last = t.tx_out.last().unwrap().0;
        eprintln!(
            "{}: descriptor to first wire beat {first} cycles; {} frames, {beats} beats in {} cycles",
            sim.width(),
            want.len(),
            last - t.tx_out[0].0 + 1
        );
    }
}

/// A train of 64 KiB WRITEs at MTU 4096 (64 frames back to back) goes through the
/// placement path without stalling the wire input once, each packet's payload leaves
/// for the DMA with no idle cycle inside it, and memory ends as the model's.
#[test]
fn line_rate_placement() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.reset();
        let width = sim.width();
        let cfg = line_rate_qp();
        let mut table = MemoryTable::<4, 16>::new();
        let pd = table.alloc_pd().unwrap();
        let base = 0x100_0000u64;
        let keys = table
            .reg_mr(
                pd,
                base,
                65536,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            )
            .unwrap();
        let mr = MrEntry::of(table.get(keys.rkey.0).unwrap());
        let mut mrt = MrTable::<256>::default();
        mrt.entries[MrTable::<256>::index(mr.key)] = mr;
        sim.write_record(Table::Mr, keys.rkey.0 >> 8, &layout::encode_mr(&mr));
        let port = rx_port(false);
        write_port(&mut sim, &port);
        let qpn = qpn_of(0);
        let mut ctx = RecvCtx {
            access: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
            epsn: Psn::new(cfg.psn),
            peer_gid: gid(false, 1),
            ..RecvCtx::idle(qpn, pd, cfg.mtu)
        };
        sim.write_record(Table::RecvCtx, qpn.value(), &layout::encode_rctx(&ctx));
        let ack_ctx = send_ctx(&cfg);
        sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ack_ctx));
        // the peer: four 64 KiB WRITEs
        let mut src = HostMem::new(MEM_BASE, MEM_LEN, 0x31);
        let mut peer = send_ctx(&cfg);
        peer.dest_qpn = qpn;
        let mut train = Vec::new();
        let mut buf = vec![0u8; 9000];
        for _ in 0..4 {
            let desc = write_msg(qpn, MEM_BASE, 65536, base, keys.rkey, peer.next_psn);
            peer.una_psn = peer.next_psn;
            for k in 0..desc.packets(peer.mtu) {
                let n = fastpath::segment(&mut peer, &desc, k, &mut src, &mut buf).unwrap();
                train.push(buf[..n].to_vec());
            }
        }
        let mut model_mem = HostMem::new(base, 65536, 0);
        let mut rtl_mem = model_mem.clone();
        sim.run_until_idle(&mut rtl_mem, 100_000).unwrap();
        let mut acks = [ack_ctx];
        let x = model_rx(
            &port,
            &train,
            std::slice::from_mut(&mut ctx),
            &mut acks,
            &mrt,
            &mut model_mem,
        );
        assert!(x.events.is_empty() && x.writes.len() == train.len());
        sim.record_timeline();
        for f in &train {
            sim.push_rx_frame(f);
        }
        sim.run_until_idle(&mut rtl_mem, 10_000_000).unwrap();
        let t = sim.take_timeline();
        assert_eq!(
            t.rx_in_stalls,
            Vec::<u64>::new(),
            "{width}: the wire input stalled (first beat {})",
            t.rx_in[0].0
        );
        assert_eq!(gaps(t.rx_in.iter().map(|b| b.0)), 0);
        assert!(rtl_mem.bytes == model_mem.bytes, "{width}: memory differs");
        assert_eq!(frames(&mut sim), x.acks, "{width}: ACKs");
        // per packet: no idle cycle inside its payload
        let mut start = 0;
        let mut firsts = Vec::new();
        for (i, b) in t.dma_wr.iter().enumerate() {
            if b.1 {
                assert_eq!(
                    gaps(t.dma_wr[start..=i].iter().map(|b| b.0)),
                    0,
                    "{width}: bubble in packet payload"
                );
                firsts.push(t.dma_wr[start].0);
                start = i + 1;
            }
        }
        assert_eq!(firsts.len(), train.len());
        let in_ends: Vec<u64> = t.rx_in.iter().filter(|b| b.1).map(|b| b.0).collect();
        let lat: Vec<u64> = in_ends.iter().zip(&firsts).map(|(i, o)| o - i).collect();
        let (min, max) = (lat.iter().min().unwrap(), lat.iter().max().unwrap());
        let cycles = t.dma_wr.last().unwrap().0 - t.rx_in[0].0 + 1;
        let payload_beats = width.beats(65536 / 16);
        eprintln!(
            "{width}: {} frames, {} input beats in {cycles} cycles; frame's last beat to its payload's first beat at the DMA {min}..{max} cycles",
            train.len(),
            t.rx_in.len()
        );
        // the ACKs (one per message, on its last packet's AckReq)
        let ack_starts: Vec<u64> = t
            .tx_out
            .iter()
            .enumerate()
            .filter(|(i, _)| *i == 0 || t.tx_out[i - 1].1)
            .map(|(_, b)| b.0)
            .collect();
        let acked: Vec<u64> = (15..train.len()).step_by(16).map(|i| in_ends[i]).collect();
        assert_eq!(ack_starts.len(), acked.len());
        let ack_lat: Vec<u64> = acked.iter().zip(&ack_starts).map(|(i, o)| o - i).collect();
        eprintln!("{width}: AckReq frame's last beat to its ACK's first beat on the wire {ack_lat:?} cycles");
        // the train takes its input beats plus one packet's latency and payload
        assert!(cycles <= t.rx_in.len() as u64 + max + payload_beats as u64);
    }
}

/// A 64 KiB READ at MTU 4096 answered in hardware: its 16 responses are the model's and
/// leave the segmenter back to back, with no idle cycle on the wire between the first
/// response's first beat and the last one's last (each response's payload read by DMA
/// as it is planned); prints the cycles from the request's last beat in to the first
/// response's first beat out (`BENCHMARKS.md`).
#[test]
fn line_rate_read_responses_sent_in_hardware() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.reset();
        let width = sim.width();
        let cfg = line_rate_qp();
        let mut table = MemoryTable::<4, 16>::new();
        let pd = table.alloc_pd().unwrap();
        let base = 0x100_0000u64;
        let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ;
        let keys = table.reg_mr(pd, base, 65536, access).unwrap();
        let mr = MrEntry::of(table.get(keys.rkey.0).unwrap());
        let mut mrt = MrTable::<256>::default();
        mrt.entries[MrTable::<256>::index(mr.key)] = mr;
        sim.write_record(Table::Mr, keys.rkey.0 >> 8, &layout::encode_mr(&mr));
        let port = rx_port(false);
        write_port(&mut sim, &port);
        let qpn = qpn_of(0);
        let mut ctx = RecvCtx {
            access,
            reads: true,
            epsn: Psn::new(cfg.psn),
            peer_gid: gid(false, 1),
            ..RecvCtx::idle(qpn, pd, cfg.mtu)
        };
        sim.write_record(Table::RecvCtx, qpn.value(), &layout::encode_rctx(&ctx));
        let resp_ctx = send_ctx(&cfg);
        sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&resp_ctx));
        // the peer's READ request
        let mut src = HostMem::new(MEM_BASE, MEM_LEN, 0x31);
        let mut peer = send_ctx(&cfg);
        peer.dest_qpn = qpn;
        let mut buf = vec![0u8; 9000];
        let desc = TxMsg {
            op: MsgOp::Read,
            ..write_msg(qpn, MEM_BASE, 65536, base, keys.rkey, peer.next_psn)
        };
        let n = fastpath::segment(&mut peer, &desc, 0, &mut src, &mut buf).unwrap();
        let request = buf[..n].to_vec();
        let mut model_mem = HostMem::new(base, 65536, 0x77);
        let mut rtl_mem = model_mem.clone();
        sim.run_until_idle(&mut rtl_mem, 100_000).unwrap();
        let mut resp = [resp_ctx];
        let x = model_rx(
            &port,
            std::slice::from_ref(&request),
            std::slice::from_mut(&mut ctx),
            &mut resp,
            &mrt,
            &mut model_mem,
        );
        assert_eq!(x.acks.len(), 16, "the model's responses");
        sim.record_timeline();
        sim.push_rx_frame(&request);
        sim.run_until_idle(&mut rtl_mem, 10_000_000).unwrap();
        let t = sim.take_timeline();
        assert!(frames(&mut sim) == x.acks, "{width}: responses differ");
        assert_eq!(events(&mut sim), x.events, "{width}: events");
        let out: Vec<u64> = t.tx_out.iter().map(|b| b.0).collect();
        let in_end = t.rx_in.iter().find(|b| b.1).unwrap().0;
        eprintln!(
            "{width}: READ request's last beat to its first response's first beat {} cycles; {} response beats in {} cycles",
            out[0] - in_end,
            out.len(),
            out[out.len() - 1] - out[0] + 1
        );
        assert_eq!(
            gaps(out.iter().copied()),
            0,
            "{width}: idle cycles on the wire"
        );
    }
}

/// The model's frames of packets `ks` of `d`.
fn model_frames(
    ctx: &mut SendCtx,
    d: &TxMsg,
    ks: std::ops::Range<u32>,
    mem: &HostMem,
) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 9000];
    ks.map(|k| {
        let n = fastpath::segment(ctx, d, k, &mut mem.clone(), &mut buf).unwrap();
        buf[..n].to_vec()
    })
    .collect()
}

/// QP 0 as the peer sends to it (a line-rate QP from `RX_HOST`) and the one frame of a
/// 64-byte SEND_ONLY on it: an opcode the check leaves to the firmware, so the frame
/// goes through the check as an exception.
fn peer_send_only() -> (RxQp, Vec<Vec<u8>>) {
    let mut tx = line_rate_qp();
    (tx.path.host, tx.pkey) = (RX_HOST, 0xFFFF);
    let qp = RxQp {
        tx,
        remote_write: true,
        ack_every: 0,
        msn: 0,
        on: true,
        reads: false,
    };
    let send = RxMsg {
        qp: 0,
        op: 0,
        len: 64,
        mr: 0,
        off: 0,
        bad_key: false,
    };
    let frames = peer_frames(0, &qp, std::slice::from_ref(&send), &[0; 6]);
    (qp, frames)
}

/// The firmware's write of a held QP's receive context is never undone by a frame the
/// check takes meanwhile (the QP's next packet, an exception: `held`). The check reads
/// the context, and cycles later writes back what it decided: after an exception the
/// context as it read it, `held` set. A firmware word landing between the two was
/// overwritten by the old one (on the SoC: the engine's SEND context written back after
/// its first packet lost its `length` to the WRITE's before it, and the SEND's last
/// packet, handled by the engine, counted 3,477 bytes for 1,501). Here the firmware
/// writes the context (a new `epsn`, `msn`, `length` and `resid`, still held) at each
/// cycle of a SEND_ONLY's way through the check: every word it wrote stays.
#[test]
fn a_context_write_while_a_frame_is_checked_is_kept() {
    let Some(sims) = sims() else { return };
    let (qp, frames) = peer_send_only();
    let mut table = MemoryTable::<4, 16>::new();
    let pd = table.alloc_pd().unwrap();
    let held = RecvCtx {
        on: true,
        held: true,
        epsn: Psn::new(qp.tx.psn),
        peer_gid: gid(false, 1),
        ..RecvCtx::idle(qpn_of(0), pd, qp.tx.mtu)
    };
    // what the firmware writes back: the state after packets it handled
    let written = RecvCtx {
        epsn: Psn::new(qp.tx.psn).add(3),
        msn: Msn::new(2),
        length: 1024,
        resid: 4096,
        ..held
    };
    let mut mem = HostMem::new(RX_BASE, RX_LEN, 0);
    for s in &sims {
        let mut sim = s.borrow_mut();
        let w = sim.width();
        for k in 0..120 {
            sim.reset();
            write_port(&mut sim, &rx_port(false));
            sim.write_record(
                Table::RecvCtx,
                qpn_of(0).value(),
                &layout::encode_rctx(&held),
            );
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            sim.push_rx_frame(&frames[0]);
            for _ in 0..k {
                sim.tick(&mut mem);
            }
            sim.write_record(
                Table::RecvCtx,
                qpn_of(0).value(),
                &layout::encode_rctx(&written),
            );
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            let b = sim
                .read_record(
                    Table::RecvCtx,
                    qpn_of(0).value(),
                    layout::RCTX_LEN,
                    &mut mem,
                )
                .unwrap();
            let got = layout::decode_rctx(&b.try_into().unwrap()).unwrap();
            assert_eq!(
                got, written,
                "{w}: the context written {k} cycles after the frame came in"
            );
            match sim.pop_event().map(|e| layout::decode_event(&e.value)) {
                Some(Ok(Event::Exception { qpn, .. })) => assert_eq!(qpn, qpn_of(0), "{w}"),
                other => panic!("{w}: {other:?}"),
            }
        }
    }
}

/// A message waiting for its window is dropped at a FLUSH of its QP (§2.2: "FLUSH drops
/// ... the one in progress") and at a send context written with `valid` clear: the
/// segmenter goes idle, sends none of the rest when the window opens, and takes the
/// replay that follows, whose frames are the model's.
/// `held` stays set through a firmware write that clears it while an exception of the
/// QP's entry is in flight (docs/fastpath.md §3.2): the firmware's last look at its
/// events and its write landing are cycles apart, and a frame checked between them
/// waits as an exception. Here a SEND_ONLY (the firmware's opcode) is that frame and
/// the event port is held, as while the firmware has not popped it: the write
/// releasing the QP leaves it held, one releasing another entry's QP does not, and
/// once the firmware took the event the same write releases it.
#[test]
fn a_release_while_an_exception_is_in_flight_leaves_the_qp_held() {
    let Some(sims) = sims() else { return };
    let (qp, frames) = peer_send_only();
    assert_eq!(frames.len(), 1, "one SEND_ONLY");
    let mut table = MemoryTable::<4, 16>::new();
    let pd = table.alloc_pd().unwrap();
    let ctx = |q: usize| RecvCtx {
        on: true,
        epsn: Psn::new(qp.tx.psn),
        peer_gid: gid(false, 1),
        ..RecvCtx::idle(qpn_of(q), pd, qp.tx.mtu)
    };
    let mut mem = HostMem::new(RX_BASE, RX_LEN, 0);
    for s in &sims {
        let mut sim = s.borrow_mut();
        let w = sim.width();
        sim.reset();
        let port = rx_port(false);
        write_port(&mut sim, &port);
        for q in 0..2 {
            sim.write_record(
                Table::RecvCtx,
                qpn_of(q).value(),
                &layout::encode_rctx(&ctx(q)),
            );
        }
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        let held = |sim: &mut FpSim, mem: &mut HostMem, q: usize| {
            let b = sim
                .read_record(Table::RecvCtx, qpn_of(q).value(), layout::RCTX_LEN, mem)
                .unwrap();
            layout::decode_rctx(&b.try_into().unwrap()).unwrap().held
        };

        sim.set_event_hold(true);
        sim.push_rx_frame(&frames[0]);
        for _ in 0..2_000 {
            sim.tick(&mut mem);
        }
        assert!(sim.pop_event().is_none(), "{w}: the event is held");
        assert!(held(&mut sim, &mut mem, 0), "{w}: the exception holds QP 0");
        // both QPs released, the first while its exception is in flight
        for q in 0..2 {
            sim.write_record(
                Table::RecvCtx,
                qpn_of(q).value(),
                &layout::encode_rctx(&ctx(q)),
            );
        }
        assert!(
            held(&mut sim, &mut mem, 0),
            "{w}: released with its exception in flight"
        );
        assert!(
            !held(&mut sim, &mut mem, 1),
            "{w}: another entry's QP is released"
        );

        sim.set_event_hold(false);
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        match sim.pop_event().map(|e| layout::decode_event(&e.value)) {
            // (a SEND_ONLY with no receive buffer loaded ahead: reason 9)
            Some(Ok(Event::Exception { qpn, reason, .. })) => {
                assert_eq!((qpn, reason), (qpn_of(0), Exception::NoRecvBuffer), "{w}")
            }
            other => panic!("{w}: {other:?}"),
        }
        sim.write_record(
            Table::RecvCtx,
            qpn_of(0).value(),
            &layout::encode_rctx(&ctx(0)),
        );
        assert!(
            !held(&mut sim, &mut mem, 0),
            "{w}: released once the firmware took the event"
        );
    }

    // The model, the RTL's reference, alike (its events wait until polled).
    let mut fp = FastPathPort::<Loopback<4>, 64>::new(Loopback::default());
    let port = rx_port(false);
    fp.set_port(port.mac, port.gid);
    for q in 0..2 {
        // (a context pair whose send side decodes: the model takes no QP without one)
        fp.write_sctx(qpn_of(q), 0, &layout::encode_sctx(&send_ctx(&qp.tx)));
        fp.write_rctx(qpn_of(q), &layout::encode_rctx(&ctx(q)));
    }
    assert!(
        fp.inner.transmit(&frames[0]),
        "the loopback takes the frame"
    );
    fp.run(&mut mem);
    assert!(fp.events_waiting(), "model: the exception waits");
    assert!(layout::rctx_held(&fp.read_rctx(qpn_of(0))));
    for q in 0..2 {
        fp.write_rctx(qpn_of(q), &layout::encode_rctx(&ctx(q)));
    }
    assert!(
        layout::rctx_held(&fp.read_rctx(qpn_of(0))),
        "model: released in flight"
    );
    assert!(
        !layout::rctx_held(&fp.read_rctx(qpn_of(1))),
        "model: another entry"
    );
    let (mut ev, mut frame) = ([0; layout::EVENT_WORDS], vec![0; 9000]);
    assert!(fp.poll_event(&mut ev, &mut frame));
    match layout::decode_event_words(&ev) {
        Ok(Event::Exception { qpn, reason, .. }) => {
            assert_eq!((qpn, reason), (qpn_of(0), Exception::NoRecvBuffer))
        }
        other => panic!("model: {other:?}"),
    }
    fp.write_rctx(qpn_of(0), &layout::encode_rctx(&ctx(0)));
    assert!(
        !layout::rctx_held(&fp.read_rctx(qpn_of(0))),
        "model: released"
    );
}

#[test]
fn a_held_message_is_dropped_at_flush_and_invalidation() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        for invalidate in [false, true] {
            sim.reset();
            let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x3C);
            let cfg = QpCfg {
                mtu: Mtu::Mtu256,
                window: 4,
                ..line_rate_qp()
            };
            let mut ctx = send_ctx(&cfg);
            let qpn = qpn_of(1);
            sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ctx));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            // 10 packets; the window lets 4 go
            let desc = write_msg(qpn, MEM_BASE, 2560, 0x4000_0000, Rkey(0x77), ctx.next_psn);
            let want = model_frames(&mut ctx, &desc, 0..4, &mem);
            sim.push_txd(&layout::encode_txd(&desc));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert_eq!(
                frames(&mut sim),
                want,
                "{}: the window's packets",
                sim.width()
            );
            assert!(!sim.tx_idle(), "{}: the message waits", sim.width());
            if invalidate {
                let mut off = ctx;
                off.valid = false;
                let w0 = layout::encode_sctx(&off);
                sim.write_word(
                    Table::SendCtx,
                    qpn.value(),
                    0,
                    u32::from_le_bytes([w0[0], w0[1], w0[2], w0[3]]),
                );
            } else {
                let mut flush = desc.clone();
                flush.op = MsgOp::Flush { una: ctx.una_psn };
                sim.push_txd(&layout::encode_txd(&flush));
            }
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert!(sim.tx_idle(), "{}: dropped", sim.width());
            // the window opens: nothing of the dropped message goes
            ctx.una_psn = desc.psn_of(2);
            sim.write_word(Table::SendCtx, qpn.value(), 4, ctx.una_psn.value());
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert_eq!(frames(&mut sim), Vec::<Vec<u8>>::new(), "{}", sim.width());
            if invalidate {
                // back on: the firmware writes the whole context again (before the
                // descriptor: the table port and the descriptor input are not ordered)
                sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ctx));
                sim.run_until_idle(&mut mem, 100_000).unwrap();
            } else {
                ctx.noack = 0;
            }
            // Go-Back-N from packet 2
            let replay = TxMsg {
                replay: true,
                start_pkt: 2,
                ..desc.clone()
            };
            let want = model_frames(&mut ctx, &replay, 2..6, &mem);
            sim.push_txd(&layout::encode_txd(&replay));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert_eq!(frames(&mut sim), want, "{}: the replay", sim.width());
            assert_eq!(sim.bad_desc(), 0);
        }
    }
}

/// A FLUSH moves the context's `una_psn` forward to the one it carries as it drops the
/// QP's message (§2.2, §3.2): a Go-Back-N's rewind and its `una` reach the hardware as
/// one step, so the window the new `una` opens sends nothing of the dropped message (a
/// `una_psn` written before the FLUSH was taken sent its next packets: three stale
/// frames in `device/tests/fastpath_diff.rs`). A FLUSH carrying an older `una` (a
/// response taken since moved it on) leaves it; the replay after then has the window
/// from the new `una`. The RTL at both widths and the model (`FastPathPort`) alike.
#[test]
fn a_flush_moves_una_forward_with_the_drop() {
    let cfg = QpCfg {
        mtu: Mtu::Mtu256,
        window: 4,
        ..line_rate_qp()
    };
    let qpn = qpn_of(1);
    let ctx0 = send_ctx(&cfg);
    // 10 packets; the window lets 4 go, then a NAK at packet 2: una 2, a rewind to it
    let desc = write_msg(qpn, MEM_BASE, 2560, 0x4000_0000, Rkey(0x77), ctx0.next_psn);
    let una = desc.psn_of(2);
    let flush = |una| TxMsg {
        op: MsgOp::Flush { una },
        ..desc.clone()
    };
    let replay = TxMsg {
        replay: true,
        start_pkt: 2,
        ..desc.clone()
    };
    let mem = HostMem::new(MEM_BASE, MEM_LEN, 0x3D);
    let mut ctx = ctx0;
    let first = model_frames(&mut ctx, &desc, 0..4, &mem);
    (ctx.una_psn, ctx.noack) = (una, 0);
    // the window from packet 2: packets 2 to 5
    let resent = model_frames(&mut ctx, &replay, 2..6, &mem);
    let una_of = |sctx: &[u8]| {
        let b = sctx.try_into().expect("a whole send context");
        layout::decode_sctx(b).expect("a send context").una_psn
    };

    if let Some(sims) = sims() {
        for s in &sims {
            let mut sim = s.borrow_mut();
            let w = sim.width();
            sim.reset();
            let mut mem = mem.clone();
            sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ctx0));
            // (the table port and the descriptor input are not ordered)
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            sim.push_txd(&layout::encode_txd(&desc));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert_eq!(frames(&mut sim), first, "{w}: the window's packets");
            sim.push_txd(&layout::encode_txd(&flush(una)));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert!(sim.tx_idle(), "{w}: dropped");
            assert_eq!(
                frames(&mut sim),
                Vec::<Vec<u8>>::new(),
                "{w}: nothing stale"
            );
            let sctx = sim.read_record(Table::SendCtx, qpn.value(), layout::SCTX_LEN, &mut mem);
            assert_eq!(una_of(&sctx.unwrap()), una, "{w}: una with the FLUSH");
            sim.push_txd(&layout::encode_txd(&flush(desc.psn_of(1))));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            let sctx = sim.read_record(Table::SendCtx, qpn.value(), layout::SCTX_LEN, &mut mem);
            assert_eq!(una_of(&sctx.unwrap()), una, "{w}: never back");
            sim.push_txd(&layout::encode_txd(&replay));
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            assert_eq!(frames(&mut sim), resent, "{w}: the replay");
            assert_eq!(sim.bad_desc(), 0);
        }
    }

    let mut mem = mem.clone();
    let mut fp = FastPathPort::<Wire, 64>::new(Wire::default());
    fp.write_sctx(qpn, 0, &layout::encode_sctx(&ctx0));
    assert!(fp.post_tx(&layout::encode_txd(&desc)));
    fp.run(&mut mem);
    assert_eq!(
        core::mem::take(&mut fp.inner.sent),
        first,
        "model: the window's"
    );
    assert!(fp.post_tx(&layout::encode_txd(&flush(una))));
    fp.run(&mut mem);
    assert_eq!(fp.inner.sent, Vec::<Vec<u8>>::new(), "model: nothing stale");
    assert_eq!(una_of(&fp.read_sctx(qpn)), una, "model: una with the FLUSH");
    assert!(fp.post_tx(&layout::encode_txd(&flush(desc.psn_of(1)))));
    assert_eq!(una_of(&fp.read_sctx(qpn)), una, "model: never back");
    assert!(fp.post_tx(&layout::encode_txd(&replay)));
    fp.run(&mut mem);
    assert_eq!(fp.inner.sent, resent, "model: the replay");
}

/// The destination QPN in a frame's BTH.
fn dest_of(frame: &[u8]) -> u32 {
    wire::parse(frame)
        .expect("a frame the model accepts")
        .dest_qp()
        .value()
}

/// Three QPs' messages posted together are served one packet per QP in turn (§2.2), and
/// a QP whose window is full holds none of the others back: QP 1 (window 2) sends two
/// packets and waits while QPs 0 and 2 finish, then two more once the firmware writes its
/// `una_psn`. Every QP's frames are the model's. Prints the cycles per packet, against
/// one QP sending the same packets alone in the same run.
#[test]
fn round_robin_serves_each_qp_in_turn_and_a_full_window_holds_none_back() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5E);
        let cfgs: Vec<QpCfg> = (0..3u32)
            .map(|i| QpCfg {
                mtu: Mtu::Mtu256,
                window: if i == 1 { 2 } else { 128 },
                dest_qpn: 0x100 + i,
                ..line_rate_qp()
            })
            .collect();
        // (QP, packets), posted in this order
        let posts = [(1usize, 6u32), (0, 4), (2, 4)];
        let mut pace = |sim: &mut FpSim, alone: bool| {
            sim.reset();
            let mut ctxs: Vec<SendCtx> = cfgs.iter().map(send_ctx).collect();
            for (i, c) in ctxs.iter().enumerate() {
                sim.write_record(Table::SendCtx, qpn_of(i).value(), &layout::encode_sctx(c));
            }
            sim.run_until_idle(&mut mem, 100_000).unwrap();
            let descs: Vec<(usize, TxMsg)> = if alone {
                // the baseline: QP 0 alone, one message of the same 10 packets
                let d = write_msg(
                    qpn_of(0),
                    MEM_BASE,
                    2560,
                    0x4000_0000,
                    Rkey(9),
                    ctxs[0].next_psn,
                );
                vec![(0, d)]
            } else {
                posts
                    .iter()
                    .map(|&(q, n)| {
                        let src = MEM_BASE + 4096 * q as u64;
                        let d = write_msg(
                            qpn_of(q),
                            src,
                            n * 256,
                            0x4000_0000,
                            Rkey(9),
                            ctxs[q].next_psn,
                        );
                        (q, d)
                    })
                    .collect()
            };
            let mut want: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 3];
            for (q, d) in &descs {
                let allowed = if *q == 1 {
                    0..2
                } else {
                    0..d.packets(ctxs[*q].mtu)
                };
                want[*q] = model_frames(&mut ctxs[*q], d, allowed, &mem);
            }
            sim.record_timeline();
            for (_, d) in &descs {
                sim.push_txd(&layout::encode_txd(d));
            }
            sim.run_until_idle(&mut mem, 400_000).unwrap();
            let t = sim.take_timeline();
            let got = frames(sim);
            let order: Vec<u32> = got.iter().map(|f| dest_of(f) - 0x100).collect();
            for (q, want) in want.iter().enumerate() {
                let mine: Vec<Vec<u8>> = got
                    .iter()
                    .filter(|f| dest_of(f) == 0x100 + q as u32)
                    .cloned()
                    .collect();
                assert_eq!(
                    mine,
                    *want,
                    "{}: QP {q}'s frames (order {order:?})",
                    sim.width()
                );
            }
            if !alone {
                // in turn: a QP sends twice in a row only when no other sends after it
                for (i, w) in order.windows(2).enumerate() {
                    assert!(
                        w[0] != w[1] || order[i..].iter().all(|&q| q == w[0]),
                        "{}: QP {} twice in a row with others waiting: {order:?}",
                        sim.width(),
                        w[0]
                    );
                }
                assert_eq!(order.len(), 10, "{}: {order:?}", sim.width());
                // the window opens: QP 1's next 2 packets
                let (_, d1) = &descs[0];
                ctxs[1].una_psn = d1.psn_of(2);
                sim.write_word(
                    Table::SendCtx,
                    qpn_of(1).value(),
                    4,
                    ctxs[1].una_psn.value(),
                );
                sim.run_until_idle(&mut mem, 100_000).unwrap();
                let rest = model_frames(&mut ctxs[1], d1, 2..4, &mem);
                assert_eq!(
                    frames(sim),
                    rest,
                    "{}: QP 1 after its window opened",
                    sim.width()
                );
            }
            assert_eq!(sim.bad_desc(), 0);
            t.tx_out.last().unwrap().0 - t.tx_out[0].0 + 1
        };
        let alone = pace(&mut sim, true);
        let shared = pace(&mut sim, false);
        eprintln!(
            "{}: 10 packets of 256 B, first to last wire beat: one QP {alone} cycles, \
             three QPs in turn {shared} cycles",
            sim.width()
        );
    }
}

/// A payload the host cannot read (its DMA read answers with the error flag on some
/// beats) aborts that packet's frame on the wire, as the model's `segment` drops it
/// (`TxError::Dma`): the other packets are the model's frames, the context advances as
/// the model's does (the aborted packet spends its PSN and its place in the AckReq
/// count), `tx_dma_errors` counts it, and the frames after it are unaffected.
#[test]
fn a_payload_the_host_cannot_read_aborts_its_frame() {
    let Some(sims) = sims() else { return };
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.reset();
        let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x4D);
        let cfg = QpCfg {
            mtu: Mtu::Mtu256,
            max_pkts_per_ack: 2,
            ..line_rate_qp()
        };
        let mut ctx = send_ctx(&cfg);
        let qpn = qpn_of(2);
        sim.write_record(Table::SendCtx, qpn.value(), &layout::encode_sctx(&ctx));
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        // bytes 300..500 of the message lie outside host memory: packet 1 (256..512)
        // has an error in its middle beats, not in its last
        let outside = MEM_BASE + MEM_LEN as u64 + 0x1000;
        let mut bad = write_msg(qpn, MEM_BASE, 1024, 0x4000_0000, Rkey(5), ctx.next_psn);
        bad.sges.clear();
        for (addr, length) in [(MEM_BASE, 300), (outside, 200), (MEM_BASE + 1000, 524)] {
            let _ = bad.sges.push(Sge {
                addr,
                length,
                lkey: Lkey(0),
            });
        }
        let mut buf = vec![0u8; 9000];
        let mut want = Vec::new();
        let mut failed = Vec::new();
        for k in 0..bad.packets(ctx.mtu) {
            match fastpath::segment(&mut ctx, &bad, k, &mut mem, &mut buf) {
                Ok(n) => want.push(buf[..n].to_vec()),
                Err(TxError::Dma) => failed.push(k),
                Err(e) => panic!("model: {e:?}"),
            }
        }
        assert_eq!(failed, [1], "the model drops packet 1 only");
        // then a good message of the same QP
        let good = write_msg(qpn, MEM_BASE, 600, 0x5000_0000, Rkey(5), ctx.next_psn);
        want.extend(model_frames(&mut ctx, &good, 0..3, &mem));
        sim.push_txd(&layout::encode_txd(&bad));
        sim.push_txd(&layout::encode_txd(&good));
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        assert_eq!(frames(&mut sim), want, "{}", sim.width());
        assert_eq!(
            (sim.tx_dma_errors(), sim.tx_aborted()),
            (1, 1),
            "{}",
            sim.width()
        );
        assert_eq!(sim.take_fault(), None, "{}", sim.width());
        let b = sim
            .read_record(Table::SendCtx, qpn.value(), layout::SCTX_LEN, &mut mem)
            .unwrap();
        let got = layout::decode_sctx(b.as_slice().try_into().unwrap()).unwrap();
        assert_eq!(
            (got.next_psn, got.noack),
            (ctx.next_psn, ctx.noack),
            "{}: the context after both messages",
            sim.width()
        );
        assert_eq!(sim.bad_desc(), 0);
    }
}

// ------------------------------------------------------------------- responses

/// One thing that happens to a requester after its messages went out: a response
/// arrives from the peer, or the firmware moves `una_psn` itself.
#[derive(Clone, Debug)]
enum Resp {
    /// An ACKNOWLEDGE for QP `qp`: its PSN `una - 2 + at` (so before, inside and past
    /// what was sent), its AETH syndrome.
    Ack { qp: usize, at: u32, syndrome: u8 },
    /// An ATOMIC ACKNOWLEDGE at `una + at` with AETH `syndrome`, carrying `orig`.
    AtomicAck {
        qp: usize,
        at: u32,
        syndrome: u8,
        orig: u64,
    },
    /// The firmware handled responses itself: `una_psn` moves on by `by`.
    Una { qp: usize, by: u32 },
    /// RDMA READ responses at `una + at`: the packet the READ holding that PSN wants
    /// there (its opcode and length; ONLY of 8 bytes when no READ holds it), or with
    /// `op` (0x0D..=0x10) and a length off by `adj` instead; AETH `syndrome`. With
    /// `run`, every packet from there to the READ's last, as the responder sends them.
    Read {
        qp: usize,
        at: u32,
        op: Option<u8>,
        adj: i32,
        syndrome: u8,
        run: bool,
    },
    /// The ACK `Ack { qp, at, 0x1F }` would be, for the QP that shares QP `qp`'s context
    /// entry (its QPN + `FP_CTX_ENTRIES`) while `qp` holds it: a cache miss (reason 14)
    /// that touches nothing of `qp`'s, however well its PSN fits `qp`'s messages.
    Alias { qp: usize, at: u32 },
}

fn resp(nqp: usize) -> impl Strategy<Value = Resp> {
    prop_oneof![
        6 => (0..nqp, prop_oneof![0u32..8, 0u32..40], prop_oneof![
            6 => Just(0x1Fu8), 1 => 0u8..0x20, 1 => 0x20u8..0x40, 1 => 0x60u8..0x65
        ])
            .prop_map(|(qp, at, syndrome)| Resp::Ack { qp, at, syndrome }),
        2 => (
            0..nqp,
            prop_oneof![4 => Just(0u32), 1 => 0u32..4],
            prop_oneof![6 => Just(0x1Fu8), 1 => 0u8..0x20, 1 => 0x60u8..0x65],
            any::<u64>(),
        )
            .prop_map(|(qp, at, syndrome, orig)| Resp::AtomicAck {
                qp,
                at,
                syndrome,
                orig
            }),
        1 => (0..nqp, 1u32..12).prop_map(|(qp, by)| Resp::Una { qp, by }),
        1 => (0..nqp, 0u32..8).prop_map(|(qp, at)| Resp::Alias { qp, at }),
        4 => (
            0..nqp,
            prop_oneof![4 => Just(0u32), 1 => 0u32..4],
            proptest::option::weighted(0.15, 0x0Du8..=0x10),
            prop_oneof![8 => Just(0i32), 1 => -8i32..8],
            prop_oneof![8 => Just(0x1Fu8), 1 => 0x60u8..0x65],
            any::<bool>(),
        )
            .prop_map(|(qp, at, op, adj, syndrome, run)| Resp::Read {
                qp,
                at,
                op,
                adj,
                syndrome,
                run,
            }),
    ]
}

/// The READ response frames of `Resp::Read` for a QP whose send context is `sctx`
/// (the model's), in-flight list `list` and peer `peer`.
fn read_responses(
    sctx: &SendCtx,
    list: &heapless::Deque<Inflight, 8>,
    peer: &SendCtx,
    r: &Resp,
) -> Vec<Vec<u8>> {
    let Resp::Read {
        at,
        op,
        adj,
        syndrome,
        run,
        ..
    } = *r
    else {
        return Vec::new();
    };
    let first = sctx.una_psn.add(at);
    let read = list.iter().find(|m| {
        m.kind == fastpath::InflightKind::Read
            && !first.before(m.first_psn)
            && !first.after(m.last_psn)
    });
    let mtu = sctx.mtu.bytes();
    // (PSN, opcode, length) of each packet
    let mut pkts = Vec::new();
    match read {
        Some(m) => {
            let n = m.last_psn.diff(m.first_psn) as u32 + 1;
            let k0 = first.diff(m.first_psn) as u32;
            for k in k0..if run { n } else { k0 + 1 } {
                let opcode = match (n, k) {
                    (1, _) => 0x10,
                    (_, 0) => 0x0D,
                    _ if k == n - 1 => 0x0F,
                    _ => 0x0E,
                };
                let len = (m.length - k * mtu).min(mtu);
                pkts.push((m.first_psn.add(k), opcode, len));
            }
        }
        None => pkts.push((first, 0x10, 8)),
    }
    if let Some(p) = pkts.first_mut() {
        p.1 = op.unwrap_or(p.1);
        p.2 = (p.2 as i64 + i64::from(adj)).clamp(0, 4200) as u32;
    }
    let mut buf = vec![0u8; 9000];
    pkts.iter()
        .map(|&(psn, opcode, len)| {
            let mut bth = BthRepr::new(Opcode(opcode), peer.dest_qpn, psn);
            bth.pkey = peer.pkey;
            bth.pad_count = (len.wrapping_neg() & 3) as u8;
            let ext = ExtHeaders {
                aeth: (opcode != 0x0E).then(|| AethRepr {
                    syndrome: Syndrome::from_byte(syndrome),
                    msn: Msn::new(psn.value() & 0xFFF),
                }),
                ..ExtHeaders::default()
            };
            let body = len as usize + usize::from(bth.pad_count);
            let n = peer
                .template
                .emit_with(&bth, &ext, body, &mut buf, |b| {
                    for (i, x) in b.iter_mut().enumerate() {
                        *x = (i as u8).wrapping_mul(7) ^ psn.value() as u8;
                    }
                    let l = b.len();
                    b[len as usize..l].fill(0);
                })
                .expect("READ response")
                .end;
            buf[..n].to_vec()
        })
        .collect()
}

/// The QP that shares QP `qpn`'s context entry (`qpn mod FP_CTX_ENTRIES`).
fn alias_of(qpn: Qpn) -> Qpn {
    Qpn::new(qpn.value() + FP_CTX_ENTRIES as u32)
}

/// An ACKNOWLEDGE from `peer` to QP `to`: its PSN `una - 2 + at`, its MSN `at`.
fn peer_ack(peer: &SendCtx, to: Qpn, una: Psn, at: u32, syndrome: u8) -> Vec<u8> {
    let from = SendCtx {
        dest_qpn: to,
        ..*peer
    };
    let ack = AckDesc {
        qpn: to,
        syndrome: Syndrome::from_byte(syndrome),
        psn: Psn::new(una.value().wrapping_add(at).wrapping_sub(2)),
        msn: Msn::new(at),
    };
    let mut buf = [0u8; 256];
    let n = fastpath::ack_frame(&from, &ack, &mut buf).expect("ACK frame");
    buf[..n].to_vec()
}

/// What `resp_setup` made: the port, each QP's send and receive contexts (as the
/// model holds them) and its peer's send context (the frames the peer answers with).
struct RespQps {
    port: PortAddr,
    sctx: Vec<SendCtx>,
    rctx: Vec<RecvCtx>,
    peer: Vec<SendCtx>,
}

/// Resets `sim` and writes the port and, for each of `qps`, a valid send context (no
/// window limit) and a receive context that is on (the peer is host 1, IPv4).
fn resp_setup(sim: &mut FpSim, qps: &[QpCfg], mem: &mut HostMem) -> Result<RespQps, TestCaseError> {
    sim.reset();
    let port = rx_port(false);
    write_port(sim, &port);
    let pd = MemoryTable::<4, 16>::new().alloc_pd().expect("a PD");
    let mut out = RespQps {
        port,
        sctx: Vec::new(),
        rctx: Vec::new(),
        peer: Vec::new(),
    };
    for (i, q) in qps.iter().enumerate() {
        let mut c = send_ctx(q);
        c.sr = false;
        c.window = 1 << 20;
        sim.write_record(Table::SendCtx, qpn_of(i).value(), &layout::encode_sctx(&c));
        out.sctx.push(c);
        let r = RecvCtx {
            access: AccessFlags::LOCAL_WRITE,
            peer_gid: gid(false, 1),
            ..RecvCtx::idle(qpn_of(i), pd, q.mtu)
        };
        sim.write_record(Table::RecvCtx, qpn_of(i).value(), &layout::encode_rctx(&r));
        out.rctx.push(r);
        let mut p = q.clone();
        p.path.host = RX_HOST;
        p.path.ipv6 = false;
        // no CE marks (§3.4's ECN rule is the placement tests'): the responses reach §3.6
        p.path.tos &= !3;
        p.pkey = 0xFFFF;
        let mut pc = send_ctx(&p);
        pc.dest_qpn = qpn_of(i);
        out.peer.push(pc);
    }
    sim.run_until_idle(mem, 100_000).map_err(fail)?;
    Ok(out)
}

/// Posts a new message descriptor to the model (into the QP's in-flight list, as
/// `FastPathPort::accept` does; its packets segmented) and to the RTL, which sends it
/// whole.
fn post_sent(
    sim: &mut FpSim,
    mem: &mut HostMem,
    sctx: &mut SendCtx,
    list: &mut heapless::Deque<Inflight, 8>,
    desc: &TxMsg,
) -> Result<(), TestCaseError> {
    post_sent_cqe(sim, mem, sctx, list, desc, None)
}

/// [`post_sent`] of a descriptor that asks for a CQE with `wr_id` when `cqe` is some
/// (`docs/fastpath.md` §3.7: flags bit 2, `wr_id` in bytes 88..96).
fn post_sent_cqe(
    sim: &mut FpSim,
    mem: &mut HostMem,
    sctx: &mut SendCtx,
    list: &mut heapless::Deque<Inflight, 8>,
    desc: &TxMsg,
    cqe: Option<u64>,
) -> Result<(), TestCaseError> {
    let kind = match desc.op {
        MsgOp::Read => fastpath::InflightKind::Read,
        MsgOp::CmpSwap { .. } | MsgOp::FetchAdd { .. } => fastpath::InflightKind::Atomic,
        _ => fastpath::InflightKind::Msg,
    };
    let _ = list.push_back(Inflight {
        wqe_index: desc.wqe_index,
        kind,
        first_psn: desc.first_psn,
        last_psn: desc.last_psn(sctx.mtu),
        length: desc.length,
        sges: desc.sges.clone(),
        cqe: cqe.map(|w| (w, desc.op)),
    });
    let mut buf = vec![0u8; 9000];
    let (from, to) = desc.range(sctx.mtu);
    for k in from..to {
        fastpath::segment(sctx, desc, k, mem, &mut buf)
            .map_err(|e| fail(format!("model: {e:?}")))?;
    }
    let mut d = layout::encode_txd(desc);
    if let Some(wr_id) = cqe {
        d[4] |= layout::TXD_CQE;
        d[88..96].copy_from_slice(&wr_id.to_le_bytes());
    }
    sim.push_txd(&d);
    sim.run_until_idle(mem, 400_000).map_err(fail)
}

/// The requester's side of §3.6 on one sim: messages of every kind posted on each QP (at
/// most the RTL's 8 in-flight entries each), sent whole, then a stream of ACKs (ACK,
/// NAK and RNR NAK syndromes; PSNs before, inside and past what was sent) and ATOMIC
/// ACKNOWLEDGEs, and `una_psn` writes of the firmware, through the model
/// (`fastpath::dispatch` with the QP's in-flight list, retired at `una_psn` writes as
/// `FastPathPort` does) and the RTL: the same events (EXCEPTION reasons, ACKED with the
/// messages retired), the same send and receive contexts.
fn resp_case(
    sim: &mut FpSim,
    qps: &[QpCfg],
    msgs: &[Msg],
    resps: &[Resp],
) -> Result<(), TestCaseError> {
    let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
    let RespQps {
        port,
        mut sctx,
        mut rctx,
        peer,
    } = resp_setup(sim, qps, &mut mem)?;
    let mrt = MrTable::<256>::default();
    // the messages, at most 8 a QP: into the in-flight lists, sent whole
    let mut lists: Vec<heapless::Deque<Inflight, 8>> = vec![heapless::Deque::new(); qps.len()];
    let mut buf = vec![0u8; 9000];
    for (mi, m) in msgs.iter().enumerate() {
        let q = m.qp;
        if lists[q].is_full() {
            continue;
        }
        let desc = tx_msg(m, qpn_of(q), sctx[q].next_psn, mi as u16);
        post_sent(sim, &mut mem, &mut sctx[q], &mut lists[q], &desc)?;
    }
    prop_assert!(!frames(sim).is_empty(), "the messages went out");
    let mut want = Vec::new();
    let mut slot = 0u16;
    // the model's memory (READ responses are placed in it)
    let mut mmem = mem.clone();
    for r in resps {
        let (q, frames) = match *r {
            Resp::Una { qp, by } => {
                // as FastPathPort::write_sctx: what ends before it retires
                let c = &mut sctx[qp];
                let span = c.next_psn.diff(c.una_psn).max(0) as u32;
                c.una_psn = c.una_psn.add(by.min(span));
                while lists[qp]
                    .front()
                    .is_some_and(|m| m.last_psn.before(c.una_psn))
                {
                    lists[qp].pop_front();
                }
                sim.write_word(Table::SendCtx, qpn_of(qp).value(), 4, c.una_psn.value());
                continue;
            }
            Resp::Ack { qp, at, syndrome } => (
                qp,
                vec![peer_ack(
                    &peer[qp],
                    qpn_of(qp),
                    sctx[qp].una_psn,
                    at,
                    syndrome,
                )],
            ),
            Resp::Alias { qp, at } => {
                let alias = alias_of(qpn_of(qp));
                (
                    qp,
                    vec![peer_ack(&peer[qp], alias, sctx[qp].una_psn, at, 0x1F)],
                )
            }
            Resp::AtomicAck {
                qp,
                at,
                syndrome,
                orig,
            } => {
                let c = &peer[qp];
                let mut bth = BthRepr::new(
                    Opcode::RC_ATOMIC_ACKNOWLEDGE,
                    c.dest_qpn,
                    sctx[qp].una_psn.add(at),
                );
                bth.pkey = c.pkey;
                let ext = ExtHeaders {
                    aeth: Some(AethRepr {
                        syndrome: Syndrome::from_byte(syndrome),
                        msn: Msn::new(1),
                    }),
                    atomic_ack_eth: Some(AtomicAckEthRepr {
                        orig_rem_data: orig,
                    }),
                    ..ExtHeaders::default()
                };
                let n = c
                    .template
                    .emit_with(&bth, &ext, 0, &mut buf, |_| {})
                    .expect("ATOMIC ACKNOWLEDGE")
                    .end;
                (qp, vec![buf[..n].to_vec()])
            }
            Resp::Read { qp, .. } => (qp, read_responses(&sctx[qp], &lists[qp], &peer[qp], r)),
        };
        for frame in frames {
            let pkt = wire::parse(&frame).map_err(|e| fail(format!("{e:?}")))?;
            let mut dma = Logged {
                mem: &mut mmem,
                writes: Vec::new(),
            };
            let out = fastpath::dispatch(
                &port,
                &mut rctx[q],
                &mut sctx[q],
                &mut lists[q],
                &pkt,
                &mrt,
                &mut dma,
                0,
            );
            let writes = dma.writes;
            prop_assert!(out.ack.is_none());
            sim.push_rx_frame(&frame);
            sim.run_until_idle(&mut mem, 100_000).map_err(fail)?;
            // a READ response's payload: one DMA write per SGE piece
            prop_assert_eq!(sim.take_dma_writes(), writes, "DMA writes");
            if let Some(e) = out.event {
                let e = numbered(e, &mut slot);
                // the firmware handles an exception and lets the QP's packets
                // through again; after a miss it writes nothing (the entry's QP is
                // not held), so a `held` the RTL set there would show in the next
                // response to it
                if matches!(e, Event::Exception { reason, .. } if reason != Exception::Miss) {
                    rctx[q].held = false;
                    sim.write_record(
                        Table::RecvCtx,
                        qpn_of(q).value(),
                        &layout::encode_rctx(&rctx[q]),
                    );
                    sim.run_until_idle(&mut mem, 100_000).map_err(fail)?;
                }
                want.push(e);
            }
        }
    }
    prop_assert!(mem.bytes == mmem.bytes, "memory differs");
    let got = events(sim);
    prop_assert_eq!(&got, &want, "events");
    RESP_SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        for e in &want {
            if let Event::Acked {
                read: true, last, ..
            } = e
            {
                seen[17 + usize::from(*last)] += 1;
            }
            match e {
                Event::Acked { atomic: true, .. } => seen[19] += 1,
                Event::Exception { opcode, reason, .. }
                    if *opcode == Opcode::RC_ATOMIC_ACKNOWLEDGE =>
                {
                    seen[20 + *reason as usize] += 1
                }
                _ => {}
            }
            let k = match e {
                Event::Acked { done, .. } => usize::from(*done > 0),
                Event::Exception { reason, .. } => 2 + *reason as usize,
                _ => continue,
            };
            if let Some(n) = seen.get_mut(k) {
                *n += 1;
            }
        }
    });
    for (i, c) in sctx.iter().enumerate() {
        let b = sim
            .read_record(
                Table::SendCtx,
                qpn_of(i).value(),
                layout::SCTX_LEN,
                &mut mem,
            )
            .map_err(fail)?;
        let g = layout::decode_sctx(b.as_slice().try_into().unwrap())
            .map_err(|e| fail(format!("{e:?}")))?;
        prop_assert_eq!(g.una_psn, c.una_psn, "una_psn of QP {}", i);
        prop_assert_eq!(g.next_psn, c.next_psn, "next_psn of QP {}", i);
    }
    Ok(())
}

thread_local! {
    /// What `resp_case` saw, for the test's own coverage check: ACKED retiring nothing,
    /// ACKED retiring messages, then EXCEPTIONs by reason (index 2 + reason), then READ
    /// responses placed: not the READ's last (17), its last (18); ATOMIC ACKNOWLEDGEs
    /// taken (19); ATOMIC ACKNOWLEDGEs the firmware's, by reason (20 + reason).
    static RESP_SEEN: RefCell<[u32; 35]> = const { RefCell::new([0; 35]) };
}

/// A QP of the fixed response cases: MTU 1024, its PSNs about to wrap.
fn fixed_qp(dest_qpn: u32) -> QpCfg {
    QpCfg {
        mtu: Mtu::Mtu1024,
        psn: 0xFF_FFFE,
        dest_qpn,
        ..line_rate_qp()
    }
}

/// A WRITE of `len` bytes on QP `qp` (three packets of 1 KiB for 3000).
fn fixed_write(qp: usize, len: u32) -> Msg {
    Msg {
        qp,
        op: 3,
        len,
        cuts: vec![],
        src_off: 0,
        solicited: false,
        flush: false,
        replay: None,
        ack: None,
    }
}

/// The context cache's tag on responses, fixed cases: QP 0 (and 1) hold their entries
/// with WRITEs of three packets outstanding, and ACKs for the QP that shares the entry
/// (`Resp::Alias`) come at PSNs that would acknowledge them (the end of the first WRITE,
/// inside the second, before una_psn), between QP 0's own ACKs and the firmware's
/// una_psn writes. Each must be a miss: no ACKED event, no una_psn write, nothing
/// retired, no `held`; without the tag test on responses the RTL takes them.
fn alias_cases() -> Vec<(Vec<QpCfg>, Vec<Msg>, Vec<Resp>)> {
    use Resp::{Ack, Alias, Una};
    let ack = |qp, at| Ack {
        qp,
        at,
        syndrome: 0x1F,
    };
    vec![
        (
            vec![fixed_qp(0x55)],
            vec![fixed_write(0, 3000), fixed_write(0, 3000)],
            vec![
                Alias { qp: 0, at: 4 },
                ack(0, 4),
                Alias { qp: 0, at: 4 },
                Alias { qp: 0, at: 2 },
                ack(0, 3),
                Alias { qp: 0, at: 0 },
                Alias { qp: 0, at: 3 },
                ack(0, 3),
            ],
        ),
        (
            vec![fixed_qp(0x55), fixed_qp(0x66)],
            vec![
                fixed_write(0, 3000),
                fixed_write(1, 3000),
                fixed_write(0, 3000),
                fixed_write(1, 1000),
            ],
            vec![
                Alias { qp: 1, at: 5 },
                Alias { qp: 0, at: 7 },
                Una { qp: 0, by: 3 },
                Alias { qp: 0, at: 4 },
                ack(1, 3),
                Alias { qp: 1, at: 4 },
                ack(0, 4),
                ack(1, 5),
            ],
        ),
    ]
}

#[test]
fn responses_equal_the_models() {
    let Some(sims) = sims() else { return };
    for (k, (qps, msgs, resps)) in alias_cases().iter().enumerate() {
        for s in &sims {
            let mut sim = s.borrow_mut();
            sim.set_shaping(Shaping::LINE_RATE);
            if let Err(e) = resp_case(&mut sim, qps, msgs, resps) {
                panic!("fixed case {k} ({}): {e}", sim.width());
            }
        }
    }
    let mut runner = runner(48);
    let strategy = proptest::collection::vec(qp_cfg(), 1..4).prop_flat_map(|qps| {
        let n = qps.len();
        (
            Just(qps),
            proptest::collection::vec(msg(n), 1..12),
            proptest::collection::vec(resp(n), 1..24),
        )
    });
    runner
        .run(&strategy, |(qps, msgs, resps)| {
            for s in &sims {
                let mut sim = s.borrow_mut();
                sim.set_shaping(Shaping::LINE_RATE);
                resp_case(&mut sim, &qps, &msgs, &resps)
                    .map_err(|e| TestCaseError::fail(format!("{}: {e}", sim.width())))?;
            }
            Ok(())
        })
        .unwrap();
    // the cases took ACKs, placed READ responses and ATOMIC ACKNOWLEDGEs in hardware,
    // and met every rule that hands a response to the firmware: a NAK (11), a PSN
    // outside what is outstanding (3), a READ or atomic in the way (12), a READ
    // response of the wrong length (6), a QP not in its entry (14); and each that
    // hands an ATOMIC ACKNOWLEDGE to it: not at una_psn (3), a NAK syndrome (11), its
    // PSN not an atomic's or past a READ or atomic (12), an SGE short of 8 bytes (7)
    let seen = RESP_SEEN.with(|s| *s.borrow());
    eprintln!(
        "responses: ACKED {} (retiring {}; READ responses placed {}, {} of them a READ's last; ATOMIC ACKNOWLEDGEs {}), exceptions by reason {:?} (ATOMIC ACKNOWLEDGEs {:?})",
        seen[0] + seen[1],
        seen[1],
        seen[17] + seen[18],
        seen[18],
        seen[19],
        &seen[2..17],
        &seen[20..35]
    );
    for (k, what) in [
        (1, "ACKED retiring messages"),
        (17, "READ response placed (not its READ's last)"),
        (18, "READ's last response placed"),
        (2 + 6, "length"),
        (2 + 11, "NAK"),
        (2 + 3, "PSN"),
        (2 + 12, "order"),
        (2 + 14, "cache miss"),
        (19, "ATOMIC ACKNOWLEDGE taken"),
        (20 + 3, "ATOMIC ACKNOWLEDGE not at una_psn"),
        (20 + 11, "ATOMIC ACKNOWLEDGE with a NAK"),
        (20 + 12, "ATOMIC ACKNOWLEDGE not for an atomic"),
        (20 + 7, "ATOMIC ACKNOWLEDGE into a short SGE"),
    ] {
        assert!(seen[k] > 0, "no {what} among the cases");
    }
}

/// The response path's latency (`BENCHMARKS.md`, "RC fast path in RTL"): one WRITE of
/// three packets sent, then its ACK: the RTL takes it (an `ACKED` event that retires the
/// WRITE, as the model's `dispatch` says) and moves `una_psn`; an ATOMIC ACKNOWLEDGE of
/// the WRITE's PSN, the firmware's (reason 12: no atomic holds it), is the baseline in
/// the same run. Cycles from the frame's last beat in to its event.
#[test]
fn line_rate_an_ack_taken_in_hardware() {
    let Some(sims) = sims() else { return };
    let qp = fixed_qp(0x55);
    let write = fixed_write(0, 3000);
    // a CMP_SWAP (its 8-byte buffer at the start of the memory), for its ATOMIC
    // ACKNOWLEDGE taken
    let cmp_swap = Msg {
        op: 6,
        len: 8,
        ..fixed_write(0, 8)
    };
    let atomic_ack = Resp::AtomicAck {
        qp: 0,
        at: 0,
        syndrome: 0x1F,
        orig: 0x0123_4567_89AB_CDEF,
    };
    for s in &sims {
        let mut sim = s.borrow_mut();
        let width = sim.width();
        let mut lat = Vec::new();
        for (m, r) in [
            (
                &write,
                Resp::Ack {
                    qp: 0,
                    at: 2 + 2,
                    syndrome: 0x1F,
                },
            ),
            (&write, atomic_ack.clone()),
            (&cmp_swap, atomic_ack.clone()),
        ] {
            sim.record_timeline();
            // resp_case holds the RTL to the model's verdict: the ACK taken, the
            // ATOMIC ACKNOWLEDGE of the WRITE's PSN the firmware's (reason 12), the
            // CMP_SWAP's taken (its value written before its event)
            resp_case(
                &mut sim,
                std::slice::from_ref(&qp),
                std::slice::from_ref(m),
                &[r],
            )
            .unwrap_or_else(|e| panic!("{width}: {e}"));
            let t = sim.take_timeline();
            let last_in = t.rx_in.iter().rev().find(|b| b.1).expect("a frame in").0;
            lat.push(t.events.last().expect("an event") - last_in);
        }
        eprintln!(
            "{width}: response frame's last beat to its event: ACK taken {} cycles, ATOMIC ACKNOWLEDGE to the firmware {} cycles, ATOMIC ACKNOWLEDGE taken {} cycles",
            lat[0], lat[1], lat[2]
        );
        // the ACK's extra cycles (the list's compare and retirement) stay a handful;
        // the ATOMIC ACKNOWLEDGE's R1..R3 and its 8-byte write a handful more
        assert!(lat[0] <= lat[1] + 4, "{width}: {lat:?}");
        assert!(lat[2] <= lat[0] + 12, "{width}: {lat:?}");
    }
}

/// The firmware clears a send context's `valid` (its QP leaves RTS) while an ACK of
/// that QP is inside the response check (docs/fastpath.md §6): at every cycle offset
/// from the ACK's arrival to well past its event, on a fresh sim each. Whichever the
/// RTL served first, the ACK or the clear (the event says: ACKED, or EXCEPTION 1), the
/// model runs the two in that order, and must agree with the RTL then and after the
/// firmware revalidates the context and sends a new WRITE: its ACK retires exactly
/// that WRITE (a retirement applied to the row the clear emptied wrapped its count:
/// that ACK then found no entry).
#[test]
fn valid_cleared_under_a_response_in_the_check() {
    let Some(sims) = sims() else { return };
    let qp = QpCfg {
        psn: 0xFF_FFFE,
        dest_qpn: 0x55,
        ..line_rate_qp()
    };
    let q = qpn_of(0);
    let mrt = MrTable::<256>::default();
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.set_shaping(Shaping::LINE_RATE);
        let width = sim.width();
        // offsets at which the clear landed after the ACK's check had read the row
        // and before its event left (the race's window)
        let mut inside = 0;
        for offset in 0..80u64 {
            let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
            let mut r = resp_setup(&mut sim, std::slice::from_ref(&qp), &mut mem)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let mut list: heapless::Deque<Inflight, 8> = heapless::Deque::new();
            let post = |sim: &mut FpSim, mem: &mut HostMem, r: &mut RespQps, list: &mut _, wqe| {
                let psn = r.sctx[0].next_psn;
                let mut d = write_msg(q, MEM_BASE, 100, 0x7000, Rkey(0x4200), psn);
                d.wqe_index = wqe;
                post_sent(sim, mem, &mut r.sctx[0], list, &d)
                    .unwrap_or_else(|e| panic!("{width}: {e}"));
                psn
            };
            let ack_of = |r: &RespQps, psn: Psn| {
                let mut buf = [0u8; 256];
                let ack = AckDesc {
                    qpn: q,
                    syndrome: Syndrome::ACK,
                    psn,
                    msn: Msn::new(1),
                };
                let n = fastpath::ack_frame(&r.peer[0], &ack, &mut buf).expect("ACK frame");
                buf[..n].to_vec()
            };
            let word0 = |c: &SendCtx| {
                let b = layout::encode_sctx(c);
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            };
            let psn = post(&mut sim, &mut mem, &mut r, &mut list, 7);
            let _ = frames(&mut sim);
            // the ACK of the WRITE, and `offset` cycles later the clear
            let frame = ack_of(&r, psn);
            sim.push_rx_frame(&frame);
            for _ in 0..offset {
                sim.tick(&mut mem);
            }
            let mut off = r.sctx[0];
            off.valid = false;
            sim.write_word(Table::SendCtx, q.value(), 0, word0(&off));
            while sim.cfg_queued() {
                sim.tick(&mut mem);
            }
            let cleared_at = sim.cycle();
            sim.run_until_idle(&mut mem, 100_000)
                .unwrap_or_else(|e| panic!("{width} offset {offset}: {e}"));
            let got: Vec<_> = std::iter::from_fn(|| sim.pop_event()).collect();
            assert_eq!(got.len(), 1, "{width} offset {offset}: {got:?}");
            let ev = layout::decode_event(&got[0].value).expect("an event");
            // the model, in the order the RTL served them
            let pkt = wire::parse(&frame).expect("ACK");
            let mut dma = HostMem::new(MEM_BASE, 16, 0);
            let ack_first = matches!(ev, Event::Acked { .. });
            if !ack_first {
                r.sctx[0].valid = false;
                list.clear();
            }
            let out = fastpath::dispatch(
                &r.port,
                &mut r.rctx[0],
                &mut r.sctx[0],
                &mut list,
                &pkt,
                &mrt,
                &mut dma,
                0,
            );
            // (an exception's frame slot is 0 in both: the first since the reset)
            assert_eq!(Some(ev), out.event, "{width} offset {offset}: the ACK");
            if ack_first {
                r.sctx[0].valid = false;
                list.clear();
                if cleared_at <= got[0].cycle {
                    inside += 1;
                }
            }
            // the firmware revalidates (and lets the QP's packets through again)
            r.sctx[0].valid = true;
            sim.write_word(Table::SendCtx, q.value(), 0, word0(&r.sctx[0]));
            r.rctx[0].held = false;
            sim.write_record(Table::RecvCtx, q.value(), &layout::encode_rctx(&r.rctx[0]));
            sim.run_until_idle(&mut mem, 100_000)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let _ = sim.pop_exc_frame();
            let psn2 = post(&mut sim, &mut mem, &mut r, &mut list, 9);
            let frame = ack_of(&r, psn2);
            let pkt = wire::parse(&frame).expect("ACK");
            let out = fastpath::dispatch(
                &r.port,
                &mut r.rctx[0],
                &mut r.sctx[0],
                &mut list,
                &pkt,
                &mrt,
                &mut dma,
                0,
            );
            assert!(
                matches!(
                    out.event,
                    Some(Event::Acked {
                        done: 1,
                        wqe_index: 9,
                        ..
                    })
                ),
                "{:?}",
                out.event
            );
            sim.push_rx_frame(&frame);
            sim.run_until_idle(&mut mem, 100_000)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let got = events(&mut sim);
            assert_eq!(
                got,
                vec![out.event.unwrap()],
                "{width} offset {offset}: the next WRITE's ACK"
            );
            let b = sim
                .read_record(Table::SendCtx, q.value(), layout::SCTX_LEN, &mut mem)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let g = layout::decode_sctx(b.as_slice().try_into().unwrap()).expect("sctx");
            assert_eq!(
                (g.una_psn, g.next_psn),
                (r.sctx[0].una_psn, r.sctx[0].next_psn),
                "{width} offset {offset}"
            );
        }
        eprintln!("{width}: the clear landed inside the ACK's check at {inside} offsets");
        assert!(inside > 0, "{width}: no offset met the race");
    }
}

/// RDMA READ responses placed in hardware at line rate (`BENCHMARKS.md`, "RC fast path
/// in RTL"): a 12,288-byte READ at MTU 4096 into three SGEs that cut its packets at
/// unaligned offsets (5,000 / 3,001 / 4,287 bytes at odd addresses), its three
/// responses back to back. The RTL must agree with the model (`fastpath::dispatch`: the
/// ACKED events, one DMA write per SGE piece, memory), take every input beat in the
/// cycle it is offered, and write each packet's payload at one beat per cycle plus at
/// most one cycle per SGE boundary; an ACK of a WRITE posted after the READ follows
/// them. Latencies: a response's last beat in to its first DMA beat (as a WRITE's in
/// `line_rate_placement`) and to its ACKED event (raised once the payload is written).
#[test]
fn line_rate_read_responses_placed_in_hardware() {
    let Some(sims) = sims() else { return };
    let qp = line_rate_qp();
    let q = qpn_of(0);
    let mrt = MrTable::<256>::default();
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.set_shaping(Shaping::LINE_RATE);
        let width = sim.width();
        let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
        let mut r = resp_setup(&mut sim, std::slice::from_ref(&qp), &mut mem)
            .unwrap_or_else(|e| panic!("{width}: {e}"));
        let mut list: heapless::Deque<Inflight, 8> = heapless::Deque::new();
        let mut read = write_msg(q, 0, 0, 0x7000, Rkey(0x4200), r.sctx[0].next_psn);
        read.op = MsgOp::Read;
        read.length = 12288;
        read.wqe_index = 5;
        read.sges.clear();
        for (off, len) in [(3u64, 5000u32), (5011, 3001), (8101, 4287)] {
            let _ = read.sges.push(Sge {
                addr: MEM_BASE + off,
                length: len,
                lkey: Lkey(0),
            });
        }
        // and a WRITE after it, whose ACK is the baseline
        let write = write_msg(q, MEM_BASE, 100, 0x9000, Rkey(0x4200), Psn::new(0));
        post_sent(&mut sim, &mut mem, &mut r.sctx[0], &mut list, &read)
            .unwrap_or_else(|e| panic!("{width}: {e}"));
        let write = TxMsg {
            first_psn: r.sctx[0].next_psn,
            wqe_index: 6,
            ..write
        };
        post_sent(&mut sim, &mut mem, &mut r.sctx[0], &mut list, &write)
            .unwrap_or_else(|e| panic!("{width}: {e}"));
        let _ = frames(&mut sim);
        let run = Resp::Read {
            qp: 0,
            at: 0,
            op: None,
            adj: 0,
            syndrome: 0x1F,
            run: true,
        };
        let mut train = read_responses(&r.sctx[0], &list, &r.peer[0], &run);
        assert_eq!(train.len(), 3);
        let mut buf = [0u8; 256];
        let ack = AckDesc {
            qpn: q,
            syndrome: Syndrome::ACK,
            psn: write.first_psn,
            msn: Msn::new(2),
        };
        let n = fastpath::ack_frame(&r.peer[0], &ack, &mut buf).expect("ACK frame");
        train.push(buf[..n].to_vec());
        // the model
        let mut mmem = mem.clone();
        let mut dma = Logged {
            mem: &mut mmem,
            writes: Vec::new(),
        };
        let mut want = Vec::new();
        for f in &train {
            let pkt = wire::parse(f).expect("a response");
            let out = fastpath::dispatch(
                &r.port,
                &mut r.rctx[0],
                &mut r.sctx[0],
                &mut list,
                &pkt,
                &mrt,
                &mut dma,
                0,
            );
            want.extend(out.event);
        }
        let writes = dma.writes;
        assert_eq!(writes.len(), 5, "the model's pieces");
        assert!(matches!(
            want[2],
            Event::Acked {
                read: true,
                last: true,
                done: 1,
                wqe_index: 5,
                ..
            }
        ));
        // the RTL
        sim.record_timeline();
        for f in &train {
            sim.push_rx_frame(f);
        }
        sim.run_until_idle(&mut mem, 1_000_000)
            .unwrap_or_else(|e| panic!("{width}: {e}"));
        let t = sim.take_timeline();
        assert_eq!(events(&mut sim), want, "{width}: events");
        assert_eq!(sim.take_dma_writes(), writes, "{width}: DMA writes");
        assert!(mem.bytes == mmem.bytes, "{width}: memory differs");
        assert_eq!(
            t.rx_in_stalls,
            Vec::<u64>::new(),
            "{width}: the input stalled"
        );
        assert_eq!(gaps(t.rx_in.iter().map(|b| b.0)), 0, "{width}: input gaps");
        // each packet's payload: its beats (per piece) at one a cycle, plus at most
        // one cycle per piece after the first
        let in_ends: Vec<u64> = t.rx_in.iter().filter(|b| b.1).map(|b| b.0).collect();
        let mut pieces = writes.iter().map(|w| w.1.len());
        let mut at = 0;
        let mut firsts = Vec::new();
        for (k, per) in [1usize, 3, 1].iter().enumerate() {
            let lens: Vec<usize> = pieces.by_ref().take(*per).collect();
            let beats: usize = lens.iter().map(|&l| width.beats(l)).sum();
            let span = &t.dma_wr[at..at + beats];
            assert!(span.last().unwrap().1);
            let cycles = span.last().unwrap().0 - span[0].0 + 1;
            assert!(
                cycles <= width.beats(4096) as u64 + *per as u64,
                "{width}: response {k}'s payload took {cycles} cycles for {beats} beats"
            );
            firsts.push(span[0].0);
            at += beats;
        }
        assert_eq!(at, t.dma_wr.len());
        let to_dma: Vec<u64> = (0..3).map(|k| firsts[k] - in_ends[k]).collect();
        let to_event: Vec<u64> = (0..4).map(|k| t.events[k] - in_ends[k]).collect();
        eprintln!(
            "{width}: READ responses: last beat in to first DMA beat {to_dma:?} cycles, to the ACKED event {:?} cycles; the ACK behind them to its event {} cycles; {} input beats in {} cycles",
            &to_event[..3],
            to_event[3],
            t.rx_in.len(),
            t.events[3] - t.rx_in[0].0 + 1
        );
    }
}

/// The CQE writer (`fp_cqw`, `docs/fastpath.md` §3.7) at both widths: a response that
/// retires messages whose descriptors asked for CQEs writes them into the QP's send CQ,
/// each as the engine's completion encoded by the ABI (`Cqe::from_wc`, the model's
/// `CqWriter`), at the ring's producer index (wrapping, with the pass's owner bit), all
/// of them or none (no room by the consumer index last written, or no send CQ), and
/// says so in the ACKED event (byte 31 bit 2), which leaves after the CQEs are written.
/// The events are otherwise the model's (`fastpath::dispatch`). Prints the cycles from
/// the ACK's last beat to its event with and without CQEs to write.
#[test]
fn the_cqe_writer_writes_what_the_model_writes() {
    let Some(sims) = sims() else { return };
    let qp = QpCfg {
        dest_qpn: 0x55,
        ..line_rate_qp()
    };
    let q = qpn_of(0);
    let mrt = MrTable::<256>::default();
    const CQ: u32 = 5;
    const RING: u64 = MEM_BASE + 64 * 1024;
    let set_cq = |sim: &mut FpSim, pi: u32, ci: u32| {
        for (i, v) in [RING as u32, (RING >> 32) as u32, 0x100 | 2, pi, ci]
            .into_iter()
            .enumerate()
        {
            sim.write_word(Table::Port, CQ, CQW_RING_WORD + i as u8, v);
        }
    };
    // the completion the engine makes of a send-queue message (fastpath.rs send_wc)
    let wc_of = |wr_id: u64, op: MsgOp, len: u32| {
        let opcode = match op {
            MsgOp::Write | MsgOp::WriteWithImm(_) => WcOpcode::RdmaWrite,
            MsgOp::Read => WcOpcode::RdmaRead,
            _ => WcOpcode::Send,
        };
        let mut wc = WorkCompletion::new(wr_id, q, opcode, WcStatus::Success);
        wc.byte_len = len;
        if let MsgOp::SendWithImm(imm) | MsgOp::WriteWithImm(imm) = op {
            wc.imm_data = imm;
            wc.wc_flags = WcFlags::WITH_IMM;
        }
        wc
    };
    for s in &sims {
        let mut sim = s.borrow_mut();
        sim.set_shaping(Shaping::LINE_RATE);
        let width = sim.width();
        let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
        let mut r = resp_setup(&mut sim, std::slice::from_ref(&qp), &mut mem)
            .unwrap_or_else(|e| panic!("{width}: {e}"));
        let mut list: heapless::Deque<Inflight, 8> = heapless::Deque::new();
        // the ring: 4 entries, 3 written before (pi 3), the host took 1 (ci 1): room
        // for 2
        set_cq(&mut sim, 3, 1);
        sim.write_word(Table::Port, q.value(), CQW_SEND_CQ_WORD, 0x100 | CQ);
        let step = |sim: &mut FpSim,
                    mem: &mut HostMem,
                    r: &mut RespQps,
                    list: &mut heapless::Deque<Inflight, 8>,
                    msgs: &[(MsgOp, u32, Option<u64>)],
                    want_cqe: bool|
         -> (Vec<(u64, Vec<u8>)>, u64) {
            let mut psn = r.sctx[0].next_psn;
            for (i, &(op, len, cqe)) in msgs.iter().enumerate() {
                psn = r.sctx[0].next_psn;
                let mut d = write_msg(q, MEM_BASE, len, 0x7000, Rkey(0x4200), psn);
                d.op = op;
                d.wqe_index = 20 + i as u16;
                post_sent_cqe(sim, mem, &mut r.sctx[0], list, &d, cqe)
                    .unwrap_or_else(|e| panic!("{width}: {e}"));
            }
            let _ = frames(sim);
            let _ = sim.take_dma_writes();
            // one ACK of the last message's last PSN retires them all
            let last = list.back().map(|m| m.last_psn).unwrap_or(psn);
            let ack = AckDesc {
                qpn: q,
                syndrome: Syndrome::ACK,
                psn: last,
                msn: Msn::new(1),
            };
            let mut buf = [0u8; 256];
            let n = fastpath::ack_frame(&r.peer[0], &ack, &mut buf).expect("ACK frame");
            let frame = buf[..n].to_vec();
            sim.record_timeline();
            sim.push_rx_frame(&frame);
            sim.run_until_idle(mem, 100_000)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let t = sim.take_timeline();
            let got = events(sim);
            let mut dma = HostMem::new(MEM_BASE, 16, 0);
            let pkt = wire::parse(&frame).expect("ACK");
            let mut out = fastpath::dispatch(
                &r.port,
                &mut r.rctx[0],
                &mut r.sctx[0],
                list,
                &pkt,
                &mrt,
                &mut dma,
                0,
            );
            if let Some(Event::Acked { cqe, .. }) = &mut out.event {
                *cqe = want_cqe;
            }
            assert_eq!(got, vec![out.event.expect("ACKED")], "{width}: the event");
            let writes = sim.take_dma_writes();
            let last_in = t.rx_in.iter().rev().find(|b| b.1).expect("the ACK in").0;
            let ev_at = *t.events.last().expect("an event");
            // every CQE is in memory before its event leaves
            if let Some(&(w, _)) = t.dma_wr.iter().rev().find(|b| b.1) {
                assert!(
                    w < ev_at,
                    "{width}: a CQE written at {w}, its event at {ev_at}"
                );
            }
            (writes, ev_at - last_in)
        };
        let read_pi = |sim: &mut FpSim, mem: &mut HostMem| {
            let b = sim
                .read_record(Table::Port, CQ, 4 * usize::from(CQW_PI_WORD + 1), mem)
                .unwrap_or_else(|e| panic!("{width}: {e}"));
            let at = 4 * usize::from(CQW_PI_WORD);
            u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
        };
        let slot = |i: u64| RING + 32 * (i % 4);

        // 1. a WRITE (CQE), a SEND with immediate (unsignaled), a WRITE with immediate
        // (CQE): two CQEs, at ring indexes 3 and 4 (slot 0, the next pass's owner bit)
        let msgs = [
            (MsgOp::Write, 300, Some(0x1111_2222_3333_4444)),
            (MsgOp::SendWithImm(0x0BAD_F00D), 40, None),
            (
                MsgOp::WriteWithImm(0xDEAD_BEEF),
                5000,
                Some(0x0102_0304_0506_0708),
            ),
        ];
        let (writes, lat_cqe) = step(&mut sim, &mut mem, &mut r, &mut list, &msgs, true);
        let want: Vec<(u64, Vec<u8>)> = [(0u32, 0usize), (1, 2)]
            .iter()
            .map(|&(k, m): &(u32, usize)| {
                let (op, len, w) = msgs[m];
                let pi = 3 + k;
                let cqe = Cqe::from_wc(&wc_of(w.unwrap(), op, len), pi, 2);
                (slot(u64::from(pi)), cqe.as_bytes().to_vec())
            })
            .collect();
        assert_eq!(writes, want, "{width}: the CQEs");
        assert_eq!(
            read_pi(&mut sim, &mut mem),
            5,
            "{width}: the producer index"
        );

        // 2. no room: pi 5, ci 1 (the ring full): two CQEs owed, none written
        let msgs2 = [(MsgOp::Send, 64, Some(7)), (MsgOp::Write, 64, Some(8))];
        let (writes, _) = step(&mut sim, &mut mem, &mut r, &mut list, &msgs2, false);
        assert_eq!(writes, vec![], "{width}: no room, no CQE");
        assert_eq!(
            read_pi(&mut sim, &mut mem),
            5,
            "{width}: the producer index"
        );

        // 3. the host took one more (ci 2): room for one, two owed: none written
        set_cq(&mut sim, 5, 2);
        let (writes, _) = step(&mut sim, &mut mem, &mut r, &mut list, &msgs2, false);
        assert_eq!(writes, vec![], "{width}: room for one of two, no CQE");

        // 4. no CQE owed (unsignaled), the CQ has room: the event says written (none
        // owed), nothing is written; the baseline of the latency
        let msgs4 = [(MsgOp::Write, 64, None)];
        let (writes, lat_none) = step(&mut sim, &mut mem, &mut r, &mut list, &msgs4, true);
        assert_eq!(writes, vec![], "{width}: none owed");

        // 5. a QP without a send CQ: CQEs owed, none written
        sim.write_word(Table::Port, q.value(), CQW_SEND_CQ_WORD, 0);
        set_cq(&mut sim, 5, 5);
        let (writes, _) = step(&mut sim, &mut mem, &mut r, &mut list, &msgs2, false);
        assert_eq!(writes, vec![], "{width}: no send CQ");

        // 6. its send CQ again, the ring empty (pi = ci = 5): a SEND's CQE at index 5
        sim.write_word(Table::Port, q.value(), CQW_SEND_CQ_WORD, 0x100 | CQ);
        let one = [(MsgOp::Send, 1, Some(0xABCD))];
        let (writes, _) = step(&mut sim, &mut mem, &mut r, &mut list, &one, true);
        let cqe = Cqe::from_wc(&wc_of(0xABCD, MsgOp::Send, 1), 5, 2);
        assert_eq!(
            writes,
            vec![(slot(5), cqe.as_bytes().to_vec())],
            "{width}: a SEND's CQE"
        );
        assert_eq!(
            read_pi(&mut sim, &mut mem),
            6,
            "{width}: the producer index"
        );

        eprintln!(
            "{width}: ACK's last beat to its ACKED event: 2 CQEs written {lat_cqe} cycles, none owed {lat_none} cycles"
        );
        // per CQE: its record's read (1 cycle) and its write (a descriptor and
        // 32 bytes of beats); a handful of cycles for the lookups and the port
        let beats = 32u64.div_ceil(width.bytes() as u64);
        assert!(
            lat_cqe <= lat_none + 2 * (beats + 3) + 8,
            "{width}: {lat_cqe} vs {lat_none}"
        );
    }
}

/// `fp_rx`'s receive-load command (table 1 words 20..23, `docs/fastpath.md` §6 "In the
/// SoC"): on every combination of a context's state, `cur`, tag and flags (`nak_sent`,
/// `recv_loaded`, `held`, `reads`, `rq_empty`), each of its four commands leaves the
/// context exactly as `layout::load_rctx` / `layout::rnr_rctx` (the model's rule) leave
/// it and answers as they do. Then its guard: a load while a `MSG_DONE` of the QP is
/// raised and not yet taken by the firmware fails (the engine has not completed the
/// WQE it names), and once the event is taken it loads.
#[test]
fn the_receive_load_command_applies_the_models_rule() {
    let Some(sims) = sims() else { return };
    let (qp, frames) = peer_send_only();
    let mut table = MemoryTable::<4, 16>::new();
    let pd = table.alloc_pd().unwrap();
    let qpn = qpn_of(0);
    let base = layout::encode_rctx(&RecvCtx {
        on: true,
        epsn: Psn::new(qp.tx.psn),
        peer_gid: gid(false, 1),
        ..RecvCtx::idle(qpn, pd, qp.tx.mtu)
    });
    let mut mem = HostMem::new(RX_BASE, RX_LEN, 0);
    // the command's words: the staged buffer (if any), then the command
    let command = |sim: &mut FpSim, cmd: u32, buf: Option<(u64, u32)>| -> bool {
        if let Some((addr, len)) = buf {
            sim.write_word(Table::RecvCtx, 0, 20, addr as u32);
            sim.write_word(Table::RecvCtx, 0, 21, (addr >> 32) as u32);
            sim.write_word(Table::RecvCtx, 0, 22, len);
        }
        sim.write_word(Table::RecvCtx, qpn.value(), 23, cmd);
        sim.read_word_dma_held(Table::RecvCtx, qpn.value(), 23)
            .unwrap()
            & 1
            != 0
    };
    for s in &sims {
        let mut sim = s.borrow_mut();
        let w = sim.width();
        sim.reset();
        write_port(&mut sim, &rx_port(false));
        let mut n = 0u32;
        for state in [0u8, 1] {
            for cur in [0u8, 1] {
                for tag in [qpn, qpn_of(1)] {
                    for flags in 0..32u8 {
                        for op in 0..4u32 {
                            n += 1;
                            let mut b = base;
                            b[0] = state;
                            b[1] = cur;
                            b[44] = flags;
                            b[45..48].copy_from_slice(&tag.value().to_le_bytes()[..3]);
                            b[32] = 0x40 + (n % 7) as u8;
                            let buf = (0x1_2345_6000 + u64::from(n) * 8, 100 + n);
                            let t = RnrTimer::new((n % 31) as u8 + 1);
                            let mut want = b;
                            let changed = match op {
                                0 => layout::load_rctx(&mut want, qpn, Some(buf)),
                                1 => layout::load_rctx(&mut want, qpn, None),
                                2 => layout::rnr_rctx(&mut want, qpn, Some(t)),
                                _ => layout::rnr_rctx(&mut want, qpn, None),
                            };
                            sim.write_record(Table::RecvCtx, qpn.value(), &b);
                            let cmd = op | u32::from(t.code()) << 8;
                            let got = command(&mut sim, cmd, (op == 0).then_some(buf));
                            let after = sim
                                .read_record_dma_held(Table::RecvCtx, qpn.value(), layout::RCTX_LEN)
                                .unwrap();
                            let case = format!(
                                "{w}: op {op} state {state} cur {cur} tag {tag:?} flags {flags:#x}"
                            );
                            assert_eq!(got, changed, "{case}: the answer");
                            assert!(
                                after == want,
                                "{case}: the context\n{after:02x?}\n{want:02x?}"
                            );
                        }
                    }
                }
            }
        }

        // A SEND_ONLY placed into a loaded buffer: its MSG_DONE held from the firmware.
        let mut b = base;
        assert!(layout::load_rctx(&mut b, qpn, Some((RX_BASE, 4096))));
        sim.write_record(Table::RecvCtx, qpn.value(), &b);
        sim.set_event_hold(true);
        sim.push_rx_frame(&frames[0]);
        for _ in 0..2_000 {
            sim.tick(&mut mem);
        }
        assert!(sim.pop_event().is_none(), "{w}: the event is held");
        let loaded = |sim: &mut FpSim| {
            let r = sim
                .read_record_dma_held(Table::RecvCtx, qpn.value(), layout::RCTX_LEN)
                .unwrap();
            r[44] & 2 != 0
        };
        assert!(!loaded(&mut sim), "{w}: the SEND used the buffer");
        assert!(
            !command(&mut sim, 0, Some((RX_BASE + 4096, 4096))),
            "{w}: a load while the MSG_DONE is in flight"
        );
        assert!(!loaded(&mut sim), "{w}: nothing loaded");
        sim.set_event_hold(false);
        sim.run_until_idle(&mut mem, 100_000).unwrap();
        match sim.pop_event().map(|e| layout::decode_event(&e.value)) {
            Some(Ok(Event::MsgDone { .. })) => {}
            other => panic!("{w}: {other:?}"),
        }
        assert!(
            command(&mut sim, 0, Some((RX_BASE + 4096, 4096))),
            "{w}: the load once the MSG_DONE was taken"
        );
        assert!(loaded(&mut sim), "{w}: loaded");
    }
}
