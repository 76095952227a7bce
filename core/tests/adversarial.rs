//! An adversary: a third engine talking to a QP that is not its peer, and forged
//! frames (valid ICRC, any opcode, PSNs near the expected ones, real or guessed keys)
//! injected while two engines work. Nothing may panic; frames from a foreign address
//! change nothing; fully spoofed frames may break the connection (RoCE has no
//! authentication) but never touch memory outside the regions opened to the peer, and
//! the engines still go idle.

mod common;

use common::*;
use core::net::Ipv4Addr;
use roce_core::memory::AccessFlags;
use roce_core::num::{Msn, Psn, Qkey, Qpn, Rkey};
use roce_core::transport::{Instant, QpType, RecvWr, SendFlags, SendWr, WcStatus, WrOp};
use roce_core::wire::aeth::{AethRepr, Syndrome};
use roce_core::wire::atomic::{AtomicAckEthRepr, AtomicEthRepr};
use roce_core::wire::bth::BthRepr;
use roce_core::wire::deth::DethRepr;
use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
use roce_core::wire::imm::{IethRepr, ImmDtRepr};
use roce_core::wire::ipv4::Ipv4Repr;
use roce_core::wire::opcode::OPCODES;
use roce_core::wire::reth::RethRepr;
use roce_core::wire::udp::UdpRepr;
use roce_core::wire::{emit, ExtHeaders, Headers, L3Repr};

/// What the forger knows about its victim.
struct Target {
    mac: [u8; 6],
    ip: [u8; 4],
    qpn: Qpn,
    psn_hint: Psn,
    rkeys: Vec<(u64, Rkey)>,
}

fn forge(rng: &mut Rng, src_mac: [u8; 6], src_ip: [u8; 4], t: &Target) -> Vec<u8> {
    let info = &OPCODES[rng.below(OPCODES.len() as u64) as usize];
    let psn = t.psn_hint.add(rng.below(8) as u32).sub(4);
    let mut bth = BthRepr::new(info.opcode, t.qpn, psn);
    bth.ack_req = rng.chance(0.5);
    bth.se = rng.chance(0.1);
    if rng.chance(0.05) {
        bth.dest_qp = Qpn::new(rng.next_u64() as u32);
    }
    let (va, rkey) = if !t.rkeys.is_empty() && rng.chance(0.7) {
        let (a, k) = t.rkeys[rng.below(t.rkeys.len() as u64) as usize];
        (a.wrapping_add(rng.below(9000)).wrapping_sub(100), k)
    } else {
        (rng.next_u64(), Rkey(rng.next_u64() as u32))
    };
    let len = if rng.chance(0.1) {
        rng.next_u64() as u32
    } else {
        rng.below(9000) as u32
    };
    let syn = [
        0x1F, 0x00, 0x21, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x7F, 0x40, 0xFF,
    ][rng.below(12) as usize];
    let ext = ExtHeaders {
        reth: Some(RethRepr {
            va,
            rkey,
            dma_len: len,
        }),
        aeth: Some(AethRepr {
            syndrome: Syndrome::from_byte(syn),
            msn: Msn::new(rng.next_u64() as u32),
        }),
        atomic_eth: Some(AtomicEthRepr {
            va: va & !if rng.chance(0.8) { 7 } else { 0 },
            rkey,
            swap_add: rng.next_u64(),
            compare: rng.below(3),
        }),
        atomic_ack_eth: Some(AtomicAckEthRepr {
            orig_rem_data: rng.next_u64(),
        }),
        immdt: Some(ImmDtRepr {
            imm: rng.next_u64() as u32,
        }),
        ieth: Some(IethRepr { rkey }),
        deth: Some(DethRepr {
            qkey: Qkey(if rng.chance(0.5) {
                0x2222
            } else {
                rng.next_u64() as u32
            }),
            src_qp: Qpn::new(rng.next_u64() as u32),
        }),
        cnp: None,
    };
    let h = Headers {
        eth: EthernetRepr {
            dst: MacAddr(t.mac),
            src: MacAddr(src_mac),
            ethertype: 0,
        },
        vlan: None,
        l3: L3Repr::Ipv4(Ipv4Repr {
            src: Ipv4Addr::from(src_ip),
            dst: Ipv4Addr::from(t.ip),
            ..Ipv4Repr::default()
        }),
        udp: Some(UdpRepr {
            src_port: 0xC000,
            dst_port: 4791,
            checksum: 0,
        }),
        bth,
        ext,
    };
    let n = if info.payload {
        rng.below(4200) as usize
    } else {
        0
    };
    let payload: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
    let mut buf = vec![0u8; 9000];
    match emit(&h, &payload, &mut buf) {
        Ok(len) => buf[..len].to_vec(),
        Err(_) => Vec::new(),
    }
}

/// A workload between a and b; b's memory also holds a region with no remote rights
/// and an unregistered guard, a's sources are registered read-only.
struct Setup {
    p: Pair,
    qa: Qpn,
    qb: Qpn,
    /// Regions that must never change: (node is a, address, length).
    frozen: Vec<(bool, u64, usize)>,
    targets: (Target, Target),
}

fn setup(seed: u64) -> Setup {
    let mut p = Pair::new(seed);
    let (qa, qb) = p.connect(QpType::Rc, &QpOpts::default());
    let (src, ka) = p.a.buffer_with(8192, AccessFlags::NONE);
    p.a.mem.fill_pattern(src, 8192, 1);
    let (dst, kb) = p.b.buffer(8192);
    let (priv_b, kpb) = p.b.buffer_with(4096, AccessFlags::LOCAL_WRITE);
    p.b.mem.fill_pattern(priv_b, 4096, 2);
    let guard_b = p.b.mem.alloc(4096);
    let (rd, kar) = p.a.buffer_with(8192, AccessFlags::LOCAL_WRITE);
    let (rb, kbr) = p.b.buffer_with(8192, AccessFlags::LOCAL_WRITE);
    for i in 0..20u64 {
        p.b.post_recv(qb, &RecvWr::new(i).sge(rb, 8192, kbr.lkey));
        let wr = match i % 3 {
            0 => SendWr::new(i, WrOp::rdma_write(dst, kb.rkey)).sge(src, 8192, ka.lkey),
            1 => SendWr::new(i, WrOp::Send).sge(src, 3000, ka.lkey),
            _ => SendWr::new(i, WrOp::rdma_read(dst, kb.rkey)).sge(rd, 8192, kar.lkey),
        };
        p.a.post_send(qa, &wr.flags(SendFlags::SIGNALED));
    }
    let ta = Target {
        mac: p.a.mac,
        ip: [10, 0, 0, 1],
        qpn: qa,
        psn_hint: Psn::new(0x100),
        rkeys: vec![(rd, roce_core::num::Rkey(kar.lkey.0))],
    };
    let tb = Target {
        mac: p.b.mac,
        ip: [10, 0, 0, 2],
        qpn: qb,
        psn_hint: Psn::new(0x100),
        rkeys: vec![(dst, kb.rkey), (priv_b, Rkey(kpb.lkey.0))],
    };
    Setup {
        p,
        qa,
        qb,
        frozen: vec![
            (true, src, 8192),
            (false, priv_b, 4096),
            (false, guard_b, 4096),
        ],
        targets: (ta, tb),
    }
}

fn snapshot(p: &Pair, frozen: &[(bool, u64, usize)]) -> Vec<Vec<u8>> {
    frozen
        .iter()
        .map(|&(a, addr, len)| {
            if a {
                p.a.mem.read(addr, len)
            } else {
                p.b.mem.read(addr, len)
            }
        })
        .collect()
}

#[test]
fn a_third_engine_cannot_reach_a_qp_that_is_not_its_peer() {
    let Setup {
        mut p, qa: _, qb, ..
    } = setup(1);
    let mut c = Node::new(3);
    let qc = c.create_qp(QpType::Rc);
    let av = c.av_to(&p.b);
    bring_up(
        &mut c,
        qc,
        QpType::Rc,
        av,
        qb,
        &QpOpts::default(),
        0x100,
        0x100,
    );
    let (src, kc) = c.buffer(4096);
    c.mem.fill_pattern(src, 4096, 0xAA);
    let tb = &setup(1).targets.1;
    let (dst, rkey) = tb.rkeys[0];
    c.post_send(
        qc,
        &SendWr::new(1, WrOp::rdma_write(dst, rkey))
            .sge(src, 4096, kc.lkey)
            .flags(SendFlags::SIGNALED),
    );
    let before = p.b.mem.snapshot();
    let mut buf = vec![0u8; 9000];
    for _ in 0..10 {
        while let Some(n) = c
            .eng
            .poll_transmit(Instant::from_nanos(p.now), &mut buf, &mut c.mem)
        {
            p.b.eng
                .handle_packet(Instant::from_nanos(p.now), &buf[..n], &mut p.b.mem);
        }
        p.now += 2_000_000;
        c.eng.handle_timeout(Instant::from_nanos(p.now));
    }
    assert_eq!(p.b.mem.snapshot(), before);
    assert!(p.b.eng.counters().rcvd_addr_err >= 1);
    // The honest pair still works afterwards.
    p.settle();
    assert_eq!(p.a.wcs.len(), 20);
    assert!(p.a.wcs.iter().all(|w| w.status == WcStatus::Success));
    c.poll();
    assert_eq!(c.wcs[0].status, WcStatus::RetryExcErr);
}

#[test]
fn forged_frames_from_a_foreign_address_change_nothing() {
    for seed in 0..10 {
        let Setup {
            mut p,
            frozen,
            targets,
            ..
        } = setup(seed);
        let before = snapshot(&p, &frozen);
        let mut rng = Rng::new(seed);
        let evil_mac = [2, 0, 0, 0, 0, 66];
        let evil_ip = [10, 0, 0, 66];
        for _ in 0..2000 {
            for _ in 0..3 {
                let f = forge(&mut rng, evil_mac, evil_ip, &targets.0);
                p.a.eng
                    .handle_packet(Instant::from_nanos(p.now), &f, &mut p.a.mem);
                let f = forge(&mut rng, evil_mac, evil_ip, &targets.1);
                p.b.eng
                    .handle_packet(Instant::from_nanos(p.now), &f, &mut p.b.mem);
            }
            if !p.step() {
                break;
            }
            p.a.poll();
            p.b.poll();
        }
        p.settle();
        assert_eq!(snapshot(&p, &frozen), before);
        let ids: Vec<_> = p.a.wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(
            ids,
            (0..20).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(),
            "seed {seed}"
        );
        assert!(p.a.eng.counters().rcvd_addr_err + p.b.eng.counters().rcvd_addr_err > 0);
    }
}

#[test]
fn spoofed_frames_never_touch_memory_outside_the_open_regions() {
    for seed in 0..30 {
        let Setup {
            mut p,
            qa,
            qb,
            frozen,
            targets,
        } = setup(seed);
        let before = snapshot(&p, &frozen);
        let mut rng = Rng::new(seed + 1000);
        let (amac, bmac) = (p.a.mac, p.b.mac);
        for _ in 0..500 {
            if rng.chance(0.5) {
                let f = forge(&mut rng, bmac, [10, 0, 0, 2], &targets.0);
                p.a.eng
                    .handle_packet(Instant::from_nanos(p.now), &f, &mut p.a.mem);
            } else {
                let f = forge(&mut rng, amac, [10, 0, 0, 1], &targets.1);
                p.b.eng
                    .handle_packet(Instant::from_nanos(p.now), &f, &mut p.b.mem);
            }
            if !p.step() {
                break;
            }
            p.a.poll();
            p.b.poll();
        }
        // Whatever happened, the pair quiesces, every WR completes exactly once, and
        // the frozen regions are as they were.
        p.settle();
        assert_eq!(snapshot(&p, &frozen), before, "seed {seed}");
        let ids: Vec<_> = p.a.wcs.iter().map(|w| w.wr_id).collect();
        assert_eq!(ids, (0..20).collect::<Vec<_>>(), "seed {seed}");
        let _ = (p.a.state(qa), p.b.state(qb));
    }
}

#[test]
fn random_bytes_and_truncations_never_panic() {
    let Setup { mut p, .. } = setup(5);
    let mut rng = Rng::new(99);
    p.keep_trace = true;
    p.run(50_000);
    let frames: Vec<Vec<u8>> = p.trace.iter().map(|t| t.2.clone()).collect();
    for i in 0..20_000 {
        let mut f = if frames.is_empty() || rng.chance(0.2) {
            (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect()
        } else {
            frames[rng.below(frames.len() as u64) as usize].clone()
        };
        if !f.is_empty() {
            match i % 3 {
                0 => f.truncate(rng.below(f.len() as u64) as usize),
                1 => {
                    let j = rng.below(f.len() as u64) as usize;
                    f[j] = rng.next_u64() as u8;
                }
                _ => {}
            }
        }
        let now = Instant::from_nanos(p.now);
        p.a.eng.handle_packet(now, &f, &mut p.a.mem);
        p.b.eng.handle_packet(now, &f, &mut p.b.mem);
    }
    p.settle();
}
