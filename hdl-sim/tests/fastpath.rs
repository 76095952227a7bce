//! The RC fast path in RTL (`rtl/roce_fp_top.sv`) against its software model,
//! `roce_core::fastpath` (which `core/tests/fastpath.rs` holds to the engine): random
//! contexts, descriptors and packet streams on several QPs must give the same frames
//! byte for byte, the same DMA writes, the same events and the same contexts, at 64
//! and 512 bits.

mod common;

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use roce_core::fastpath::layout::{self, kind, RawEvent, TxDescOpts};
use roce_core::fastpath::{self, AckDesc, MsgOp, SendCtx, TxError, TxMsg};
use roce_core::memory::{Dma, DmaError};
use roce_core::num::{Lkey, Msn, Psn, Qpn, Rkey};
use roce_core::transport::{Mtu, Sge};
use roce_core::wire::aeth::Syndrome;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::ipv6::Ipv6Repr;
use roce_core::wire::udp::{UdpRepr, ROCEV2_PORT};
use roce_core::wire::{HeaderTemplate, L3Repr};
use roce_hdl_sim::{rtl_available, DataWidth, FpSim, Shaping, Table};

/// Host memory: one flat range.
#[derive(Clone)]
struct HostMem {
    base: u64,
    bytes: Vec<u8>,
}

impl HostMem {
    fn new(base: u64, len: usize, seed: u8) -> Self {
        let bytes = (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect();
        Self { base, bytes }
    }
    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, DmaError> {
        let err = DmaError { addr, len };
        let off = usize::try_from(addr.checked_sub(self.base).ok_or(err)?).map_err(|_| err)?;
        let end = off.checked_add(len).ok_or(err)?;
        (end <= self.bytes.len()).then_some(off..end).ok_or(err)
    }
}

impl Dma for HostMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.bytes[r]);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

const MEM_BASE: u64 = 0x10_0000;
const MEM_LEN: usize = 64 * 1024;

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
    completion: bool,
    /// Re-post this message from packet `start` (to `end`, 0 = to the end) after it.
    replay: Option<(u32, u32)>,
    /// An ACK descriptor to post before it: (syndrome, psn, msn).
    ack: Option<(u8, u32, u32)>,
}

fn msg(nqp: usize) -> impl Strategy<Value = Msg> {
    (
        0..nqp,
        0u8..5,
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
            |(qp, op, len, cuts, src_off, (solicited, completion), replay, ack)| Msg {
                qp,
                op,
                len,
                cuts,
                src_off,
                solicited,
                completion,
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

fn tx_msg(m: &Msg, qpn: Qpn, psn: Psn) -> TxMsg {
    let op = match m.op {
        0 => MsgOp::Send,
        1 => MsgOp::SendWithImm(0xA5A5_0000 | m.len),
        2 => MsgOp::SendWithInv(Rkey(0x1234_5600 | (m.len & 0xFF))),
        3 => MsgOp::Write,
        _ => MsgOp::WriteWithImm(m.len ^ 0xDEAD_BEEF),
    };
    TxMsg {
        qpn,
        op,
        solicited: m.solicited,
        sges: sges(m),
        length: m.len,
        remote_addr: 0x7000_0000_0000 + u64::from(m.len) * 3,
        rkey: Rkey(0x0000_4200 | (m.len & 0xFF)),
        first_psn: psn,
    }
}

// ------------------------------------------------------------------------- TX

fn events(sim: &mut FpSim) -> Vec<RawEvent> {
    std::iter::from_fn(|| sim.pop_event())
        .map(|e| RawEvent::decode(&e.value))
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
/// and the RTL, comparing frames, events and the contexts' progress.
fn tx_case(sim: &mut FpSim, qps: &[QpCfg], msgs: &[Msg]) -> Result<(), TestCaseError> {
    sim.reset();
    let mut mem = HostMem::new(MEM_BASE, MEM_LEN, 0x5A);
    let mut ctxs: Vec<SendCtx> = qps.iter().map(send_ctx).collect();
    for (i, c) in ctxs.iter().enumerate() {
        let b = layout::encode_send_ctx(c).expect("encodes");
        sim.write_record(Table::SendCtx, qpn_of(i).value(), &b);
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
            sim.push_ackd(&layout::encode_ack(&ack));
            sim.run_until_idle(&mut mem, 100_000).map_err(fail)?;
            let n = fastpath::ack_frame(&ctxs[q], &ack, &mut buf).expect("ack frame");
            prop_assert_eq!(frames(sim), vec![buf[..n].to_vec()], "ACK {:?}", ack);
        }
        // the firmware has seen every packet acknowledged before a new message
        ctxs[q].una_psn = ctxs[q].next_psn;
        sim.write_word(Table::SendCtx, qpn.value(), 4, ctxs[q].una_psn.value());
        let desc = tx_msg(m, qpn, ctxs[q].next_psn);
        let mut posts = vec![(
            TxDescOpts {
                replay: None,
                completion: m.completion,
                wqe_index: mi as u16,
            },
            0,
            desc.packets(ctxs[q].mtu),
        )];
        if let Some((start, end)) = m.replay {
            let n = desc.packets(ctxs[q].mtu);
            let to = if end == 0 || end > n { n } else { end };
            posts.push((
                TxDescOpts {
                    replay: Some((start, end)),
                    completion: true,
                    wqe_index: 0xFFFF,
                },
                start,
                to,
            ));
        }
        for (opts, from, to) in posts {
            if opts.replay.is_some() {
                // Go-Back-N from `from`: the window starts there again
                let at = desc.first_psn.add(from);
                ctxs[q].una_psn = at;
                sim.write_word(Table::SendCtx, qpn.value(), 4, at.value());
            }
            sim.push_txd(&layout::encode_tx_msg(&desc, &opts).expect("descriptor"));
            let mut k = from;
            loop {
                // the model's frames until the window stops it, the RTL's alike
                let mut want = Vec::new();
                let mut stalled = false;
                while k < to {
                    match fastpath::segment(&mut ctxs[q], &desc, k, &mut mem, &mut buf) {
                        Ok(n) => want.push(buf[..n].to_vec()),
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
                let ev = events(sim);
                if stalled {
                    prop_assert!(
                        ev.iter()
                            .any(|e| e.kind == kind::TX_STALL && e.psn == desc.first_psn.add(k)),
                        "no TX_STALL at packet {}: {:?}",
                        k,
                        ev
                    );
                    // the firmware learns of ACKs up to packet k
                    ctxs[q].una_psn = desc.first_psn.add(k);
                    sim.write_word(Table::SendCtx, qpn.value(), 4, ctxs[q].una_psn.value());
                    continue;
                }
                let done: Vec<_> = ev.iter().filter(|e| e.kind == kind::TX_DONE).collect();
                if opts.completion && from < to {
                    prop_assert_eq!(done.len(), 1, "TX_DONE of message {}: {:?}", mi, ev);
                    prop_assert_eq!(done[0].wqe_index, u32::from(opts.wqe_index));
                    prop_assert_eq!(done[0].qpn, qpn);
                } else if !opts.completion {
                    prop_assert!(done.is_empty(), "unasked TX_DONE: {:?}", ev);
                }
                break;
            }
        }
        let word = sim
            .read_record(Table::SendCtx, qpn.value(), 16, &mut mem)
            .map_err(fail)?;
        let w3 = u32::from_le_bytes(word[12..16].try_into().unwrap());
        let (next_psn, noack) = layout::decode_send_progress(w3);
        prop_assert_eq!(next_psn, ctxs[q].next_psn, "next_psn after message {}", mi);
        prop_assert_eq!(noack, ctxs[q].noack, "noack after message {}", mi);
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

#[test]
fn segmenter_frames_equal_the_models() {
    let Some(sims) = sims() else { return };
    let mut runner = TestRunner::new(Config {
        cases: cases(48),
        ..Config::default()
    });
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
    let mut runner = TestRunner::new(Config {
        cases: cases(16),
        ..Config::default()
    });
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
