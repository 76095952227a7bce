//! Differential tests: the RTL against roce-core, the software datapath.
//!
//! Frames are built by `roce_core::wire::emit` from random headers (every
//! opcode of the table, IPv4 with and without options, IPv6, RoCEv1, VLAN
//! tags, payload 0..=4096 bytes, Ethernet trailers), then, for about half of
//! them, corrupted (bit flips, byte writes, truncation, length / port /
//! version / opcode / TVer / PadCnt edits, with or without a recomputed IPv4
//! checksum and ICRC) or replaced by garbage. For each frame:
//! * RX: `roce_core::wire::parse` and the RTL must agree: the same error
//!   name, or for a good frame every header field, the payload, the pad,
//!   the ICRC and the trailer length;
//! * TX: the uncorrupted frame without its ICRC, through tx_icrc_insert,
//!   must come out as `emit` made it.
//!
//! `ROCE_HDL_DIFF_CASES` (default 10000) sets the frames per bus width.

mod common;

use common::diff::{add16_by, compare, fix_icrc, fix_ipv4_checksum, Rng};

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use roce_core::num::{Msn, Psn, Qkey, Qpn, Rkey};
use roce_core::wire::aeth::{AethRepr, Syndrome};
use roce_core::wire::atomic::{AtomicAckEthRepr, AtomicEthRepr};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::cnp::CnpRepr;
use roce_core::wire::deth::DethRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr, VlanRepr};
use roce_core::wire::icrc::IcrcKind;
use roce_core::wire::imm::{IethRepr, ImmDtRepr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::ipv6::Ipv6Repr;
use roce_core::wire::opcode::OPCODES;
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{self, ExtHeader, ExtHeaders, Headers, L3Repr};
use roce_hdl_sim::{DataWidth, RtlDatapath, Shaping};

fn cases() -> u32 {
    std::env::var("ROCE_HDL_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// How a frame is damaged after `emit`.
#[derive(Clone, Debug)]
enum Corruption {
    None,
    /// flip bit `bit` of byte `at` (at is taken modulo the frame length)
    BitFlip {
        at: usize,
        bit: u8,
    },
    /// write `val` at byte `at` (modulo the frame length)
    Write {
        at: usize,
        val: u8,
    },
    /// keep only `keep` bytes (modulo the frame length + 1)
    Truncate {
        keep: usize,
    },
    /// edit a header field; `fix` recomputes the IPv4 checksum and the ICRC
    Field {
        which: u8,
        delta: i32,
        fix: bool,
    },
    /// replace the frame by `len` random bytes, keeping an EtherType sometimes
    Garbage {
        len: usize,
        keep_prefix: bool,
    },
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        10 => Just(Corruption::None),
        2 => (0..4200usize, 0..8u8).prop_map(|(at, bit)| Corruption::BitFlip { at, bit }),
        2 => (0..120usize, 0..8u8).prop_map(|(at, bit)| Corruption::BitFlip { at, bit }),
        1 => (0..120usize, any::<u8>()).prop_map(|(at, val)| Corruption::Write { at, val }),
        2 => (0..4300usize).prop_map(|keep| Corruption::Truncate { keep }),
        1 => (0..140usize).prop_map(|keep| Corruption::Truncate { keep }),
        3 => (0..13u8, -20..20i32, any::<bool>()).prop_map(|(which, delta, fix)| Corruption::Field { which, delta, fix }),
        1 => (0..200usize, any::<bool>()).prop_map(|(len, keep_prefix)| Corruption::Garbage { len, keep_prefix }),
    ]
}

fn payload_len() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0..=64usize, 3 => 0..=1024usize, 2 => 0..=4096usize, 1 => Just(4096usize)]
}

/// One generated case: the clean frame, its layout facts, and the frame to
/// feed the RX path.
struct Case {
    clean: Vec<u8>,
    /// ICRC offset of the clean frame (the TX input is clean[..icrc_at])
    icrc_at: usize,
    /// emit made this frame (no IPv4 options / trailer added after it)
    tx_ok: bool,
    rx: Vec<u8>,
}

fn build(seed: u64, plen: usize, cs: &[Corruption]) -> Case {
    let mut r = Rng(seed | 1);
    let info = &OPCODES[r.below(OPCODES.len() as u64) as usize];
    let l3_kind = match r.below(10) {
        0..=4 => 0,
        5..=8 => 1,
        _ => 2,
    };
    let vlan = r.chance(30).then(|| VlanRepr {
        pcp: r.below(8) as u8,
        dei: r.chance(50),
        vid: r.below(4096) as u16,
        ethertype: 0,
    });
    let eth = EthernetRepr {
        dst: MacAddr(r.bytes()),
        src: MacAddr(r.bytes()),
        ethertype: 0,
    };
    let dscp = r.below(64) as u8;
    let ecn = r.below(4) as u8;
    let l3 = match l3_kind {
        0 => L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::from(r.bytes::<4>()),
            dst: Ipv4Addr::from(r.bytes::<4>()),
            dscp,
            ecn,
            ident: r.next() as u16,
            dont_frag: r.chance(80),
            more_frags: false,
            frag_offset: 0,
            ttl: r.next() as u8,
            protocol: 17,
        }),
        k => {
            let ip = Ipv6Repr {
                src: Ipv6Addr::from(r.bytes::<16>()),
                dst: Ipv6Addr::from(r.bytes::<16>()),
                dscp,
                ecn,
                flow_label: r.below(1 << 20) as u32,
                next_header: if k == 1 { 17 } else { 0x1B },
                hop_limit: r.next() as u8,
            };
            if k == 1 {
                L3Repr::Ipv6(ip)
            } else {
                L3Repr::Grh(ip)
            }
        }
    };
    let udp = (l3_kind != 2).then(|| UdpRepr {
        src_port: 0xC000 | r.below(0x4000) as u16,
        dst_port: 4791,
        checksum: if r.chance(70) { 0 } else { r.next() as u16 },
    });
    let bth = BthRepr {
        opcode: info.opcode,
        se: r.chance(30),
        migreq: r.chance(30),
        pad_count: 0,
        tver: 0,
        pkey: if r.chance(70) {
            0xFFFF
        } else {
            r.next() as u16
        },
        fecn: r.chance(10),
        becn: r.chance(10),
        resv6: if r.chance(10) { r.below(64) as u8 } else { 0 },
        dest_qp: Qpn::new(r.below(1 << 24) as u32),
        ack_req: r.chance(50),
        resv7: if r.chance(10) { r.below(128) as u8 } else { 0 },
        psn: Psn::new(r.below(1 << 24) as u32),
    };
    let mut ext = ExtHeaders::default();
    for h in info.headers {
        match h {
            ExtHeader::Reth => {
                ext.reth = Some(RethRepr {
                    va: r.next(),
                    rkey: Rkey(r.next() as u32),
                    dma_len: r.next() as u32,
                })
            }
            ExtHeader::Aeth => {
                ext.aeth = Some(AethRepr {
                    syndrome: Syndrome::from_byte(r.next() as u8),
                    msn: Msn::new(r.below(1 << 24) as u32),
                })
            }
            ExtHeader::AtomicEth => {
                ext.atomic_eth = Some(AtomicEthRepr {
                    va: r.next(),
                    rkey: Rkey(r.next() as u32),
                    swap_add: r.next(),
                    compare: r.next(),
                })
            }
            ExtHeader::AtomicAckEth => {
                ext.atomic_ack_eth = Some(AtomicAckEthRepr {
                    orig_rem_data: r.next(),
                })
            }
            ExtHeader::ImmDt => {
                ext.immdt = Some(ImmDtRepr {
                    imm: r.next() as u32,
                })
            }
            ExtHeader::Ieth => {
                ext.ieth = Some(IethRepr {
                    rkey: Rkey(r.next() as u32),
                })
            }
            ExtHeader::Deth => {
                ext.deth = Some(DethRepr {
                    qkey: Qkey(r.next() as u32),
                    src_qp: Qpn::new(r.below(1 << 24) as u32),
                })
            }
            ExtHeader::Cnp => {
                ext.cnp = Some(CnpRepr {
                    reserved: if r.chance(90) { [0; 16] } else { r.bytes() },
                })
            }
        }
    }
    let headers = Headers {
        eth,
        vlan,
        l3,
        udp,
        bth,
        ext,
    };
    let payload: Vec<u8> = if info.payload {
        (0..plen).map(|_| r.next() as u8).collect()
    } else {
        Vec::new()
    };
    let mut buf = vec![0u8; 4300];
    let n = wire::emit(&headers, &payload, &mut buf).expect("emit");
    buf.truncate(n);
    let clean = buf.clone();
    let l3_at = if vlan.is_some() { 18 } else { 14 };
    let icrc_at = n - 4;

    // IPv4 options (IHL 6..15): roce-core's emit writes none, so add them here
    let mut frame = buf;
    let mut tx_ok = true;
    if l3_kind == 0 && r.chance(15) {
        let words = 1 + r.below(10) as usize;
        let opts: Vec<u8> = (0..words * 4).map(|_| r.next() as u8).collect();
        frame.splice(l3_at + 20..l3_at + 20, opts);
        frame[l3_at] = 0x40 | (5 + words as u8);
        let total = u16::from_be_bytes([frame[l3_at + 2], frame[l3_at + 3]]) + (words * 4) as u16;
        frame[l3_at + 2..l3_at + 4].copy_from_slice(&total.to_be_bytes());
        fix_ipv4_checksum(&mut frame, l3_at);
        let at = frame.len() - 4;
        fix_icrc(&mut frame, l3_at, IcrcKind::Ipv4, at);
        tx_ok = false;
    }
    let icrc_rx = frame.len() - 4;
    if r.chance(10) {
        let t = 1 + r.below(8) as usize;
        frame.extend((0..t).map(|_| r.next() as u8));
    }

    let kind = match l3_kind {
        0 => IcrcKind::Ipv4,
        1 => IcrcKind::Ipv6,
        _ => IcrcKind::RoceV1,
    };
    let udp_at = l3_at
        + if l3_kind == 0 {
            usize::from(frame[l3_at] & 0x0F) * 4
        } else {
            40
        };
    let bth_at = if l3_kind == 2 { udp_at } else { udp_at + 8 };
    for c in cs {
        if frame.is_empty() {
            break;
        }
        match *c {
            Corruption::None => {}
            Corruption::BitFlip { at, bit } => {
                let at = at % frame.len();
                frame[at] ^= 1 << bit;
            }
            Corruption::Write { at, val } => {
                let at = at % frame.len();
                frame[at] = val;
            }
            Corruption::Truncate { keep } => frame.truncate(keep % (frame.len() + 1)),
            // header edits assume the frame still has its full length
            Corruption::Field { .. } if frame.len() < icrc_rx => {}
            Corruption::Field { which, delta, fix } => {
                let add16 = |f: &mut Vec<u8>, at: usize| {
                    let v = u16::from_be_bytes([f[at], f[at + 1]]).wrapping_add(delta as u16);
                    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
                };
                match which {
                    0 if l3_kind == 0 => add16(&mut frame, l3_at + 2), // IPv4 total length
                    0 => add16(&mut frame, l3_at + 4), // IPv6 payload length / GRH PayLen
                    1 if l3_kind != 2 => add16(&mut frame, udp_at + 4), // UDP length
                    2 if l3_kind != 2 => add16(&mut frame, udp_at + 2), // UDP destination port
                    3 => frame[l3_at] = (frame[l3_at] & 0x0F) | ((delta as u8 & 0x0F) << 4), // version
                    4 => frame[bth_at] = frame[bth_at].wrapping_add(delta as u8), // opcode
                    5 => frame[bth_at + 1] = (frame[bth_at + 1] & 0xF0) | (delta as u8 & 0x0F), // TVer
                    6 => frame[bth_at + 1] = (frame[bth_at + 1] & 0xCF) | ((delta as u8 & 3) << 4), // PadCnt
                    7 => add16(&mut frame, l3_at - 2), // EtherType
                    8 if l3_kind == 0 => frame[l3_at] = 0x40 | (delta as u8 & 0x0F), // IHL
                    9 if l3_kind == 0 => frame[l3_at + 6] ^= 0x20, // MF
                    10 => frame[l3_at + if l3_kind == 0 { 9 } else { 6 }] = delta as u8, // protocol / next header
                    11 => {
                        // cut the datagram consistently to 0..=19 transport bytes
                        let k = delta.unsigned_abs() as usize;
                        if frame.len() >= bth_at + k {
                            frame.truncate(bth_at + k);
                            let tl = k as u16;
                            if l3_kind != 2 {
                                frame[udp_at + 4..udp_at + 6]
                                    .copy_from_slice(&(tl + 8).to_be_bytes());
                            }
                            let ip_payload = (bth_at - l3_at) as u16 + tl;
                            if l3_kind == 0 {
                                frame[l3_at + 2..l3_at + 4]
                                    .copy_from_slice(&ip_payload.to_be_bytes());
                            } else {
                                frame[l3_at + 4..l3_at + 6]
                                    .copy_from_slice(&(ip_payload - 40).to_be_bytes());
                            }
                        }
                    }
                    _ => {
                        // shrink the datagram consistently by 1..3 bytes
                        let k = (delta.unsigned_abs() as usize % 3) + 1;
                        if icrc_rx >= bth_at + 16 + k {
                            frame.drain(icrc_rx - k..icrc_rx);
                            if l3_kind != 2 {
                                add16_by(&mut frame, udp_at + 4, -(k as i32));
                            }
                            if l3_kind == 0 {
                                add16_by(&mut frame, l3_at + 2, -(k as i32));
                            } else {
                                add16_by(&mut frame, l3_at + 4, -(k as i32));
                            }
                        }
                    }
                }
                if fix {
                    if l3_kind == 0
                        && frame[l3_at] & 0x0F >= 5
                        && frame.len() >= l3_at + 4 * usize::from(frame[l3_at] & 0x0F)
                    {
                        fix_ipv4_checksum(&mut frame, l3_at);
                    }
                    let end = frame.len().min(icrc_rx);
                    if end >= 4 && end - 4 > bth_at + 12 {
                        let at = end - 4;
                        fix_icrc(&mut frame, l3_at, kind, at);
                    }
                }
            }
            Corruption::Garbage { len, keep_prefix } => {
                let mut g: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
                if keep_prefix {
                    let k = g.len().min(l3_at + 2).min(frame.len());
                    g[..k].copy_from_slice(&frame[..k]);
                }
                frame = g;
            }
        }
    }
    Case {
        clean,
        icrc_at,
        tx_ok,
        rx: frame,
    }
}

fn run_proptest(width: DataWidth) {
    let Some(dp) = common::datapath(width) else {
        return;
    };
    let dp = RefCell::new(dp);
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let stats = RefCell::new([0usize; 3]); // good, rejected, tx
    let seen = RefCell::new(std::collections::BTreeMap::<&'static str, usize>::new());
    let faults = prop_oneof![
        3 => Just(Vec::new()),
        4 => prop::collection::vec(corruption(), 1..=1),
        3 => prop::collection::vec(corruption(), 2..=3),
    ];
    let result = runner.run(
        &(any::<u64>(), payload_len(), faults),
        |(seed, plen, cs)| {
            let case = build(seed, plen, &cs);
            let mut dp = dp.borrow_mut();
            let v = dp
                .rx(&case.rx)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            compare(&case.rx, &v).map_err(|e| {
                TestCaseError::fail(format!(
                    "RX {e}\nframe ({} bytes): {}",
                    case.rx.len(),
                    common::hex(&case.rx)
                ))
            })?;
            stats.borrow_mut()[usize::from(!v.is_ok())] += 1;
            *seen
                .borrow_mut()
                .entry(v.error().map_or("ok", |e| e.name()))
                .or_default() += 1;
            if case.tx_ok {
                let out = dp
                    .tx(&case.clean[..case.icrc_at])
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(
                    common::hex(&out),
                    common::hex(&case.clean),
                    "TX differs from emit"
                );
                stats.borrow_mut()[2] += 1;
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        // replay the minimal case with a waveform
        panic!(
            "{width}: {e}\n(set {} to a directory to get waveforms)",
            roce_hdl_sim::TRACE_DIR_ENV
        );
    }
    let s = stats.borrow();
    assert!(
        s[0] > 100 && s[1] > 100,
        "the generator should make both good and bad frames: {s:?}"
    );
    let seen = seen.borrow();
    eprintln!(
        "{width}: {} frames agree with roce-core ({} good, {} rejected), {} TX frames match emit; verdicts: {seen:?}",
        s[0] + s[1],
        s[0],
        s[1],
        s[2]
    );
    // every error kind the generator can reach was reached
    for name in roce_core::wire::Error::ALL_NAMES {
        assert!(
            seen.contains_key(name) || cases() < 2000,
            "{width}: no frame produced {name}"
        );
    }
}

#[test]
fn rtl_matches_roce_core_64() {
    run_proptest(DataWidth::W64);
}

#[test]
fn rtl_matches_roce_core_512() {
    run_proptest(DataWidth::W512);
}

/// The same generator streamed back to back with idle cycles and
/// back-pressure, in one batch per width (the streaming logic sees frames
/// of every kind follow each other).
#[test]
fn rtl_matches_roce_core_streaming() {
    let n = (cases() / 4).max(100) as u64;
    for width in DataWidth::ALL {
        let Some(mut dp): Option<RtlDatapath> = common::datapath(width) else {
            return;
        };
        dp.set_shaping(Shaping::random(0.2, 0.2, 0xd1ff));
        let mut r = Rng(0xfeed_f00d);
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let plen =
                    [r.below(65), r.below(1025), r.below(4097)][r.below(3) as usize] as usize;
                let c = match r.below(6) {
                    0 => Corruption::BitFlip {
                        at: r.below(120) as usize,
                        bit: r.below(8) as u8,
                    },
                    1 => Corruption::Truncate {
                        keep: r.below(4300) as usize,
                    },
                    2 => Corruption::Field {
                        which: r.below(13) as u8,
                        delta: r.below(40) as i32 - 20,
                        fix: r.chance(50),
                    },
                    _ => Corruption::None,
                };
                let c2 = Corruption::Field {
                    which: r.below(13) as u8,
                    delta: r.below(40) as i32 - 20,
                    fix: r.chance(50),
                };
                if r.chance(20) {
                    build(r.next(), plen, &[c, c2]).rx
                } else {
                    build(r.next(), plen, &[c]).rx
                }
            })
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let verdicts = dp.rx_batch(&refs).expect("rx");
        let bad: Vec<String> = frames
            .iter()
            .zip(&verdicts)
            .enumerate()
            .filter_map(|(i, (f, v))| compare(f, v).err().map(|e| format!("frame {i}: {e}")))
            .collect();
        assert!(
            bad.is_empty(),
            "{width}: {} of {n} differ:\n{}",
            bad.len(),
            bad[..bad.len().min(10)].join("\n")
        );
        eprintln!("{width}: {n} streamed frames agree with roce-core");
    }
}
