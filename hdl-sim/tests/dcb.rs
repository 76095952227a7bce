//! The DCB block in RTL (`rtl/roce_dcb_top.sv`) against its software model,
//! `roce_core::dcb`: pause timers against hand-computed durations, a paused priority
//! stopping only its own queue, and a cycle-by-cycle differential run (random
//! configurations, frames of every priority both ways, PFC frames in, back-pressure on
//! the wire and a slow drain of the receive buffer) in which the pause state, the XOFF
//! and XON state, every PFC frame sent and every scheduling decision must be the
//! model's. Both bus widths.

use std::collections::VecDeque;

use roce_core::dcb::{EtsConfig, PauseTimers, PfcThresholds, Priorities, PriorityMap};
use roce_core::wire::ethernet::MacAddr;
use roce_core::wire::pfc::{quanta_to_nanos, PfcRepr};
use roce_hdl_sim::{rtl_available, DataWidth, DcbLockstep, DcbRegs, DcbSim};

const WIDTHS: [DataWidth; 2] = [DataWidth::W64, DataWidth::W512];
const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x42];
const G100: u64 = 100_000_000_000;
/// The clock of these runs: 250 MHz, 4 ns; at 100 Gb/s, 400 bit times per clock.
const PERIOD_NS: u64 = 4;

fn sim(width: DataWidth) -> Option<DcbSim> {
    if !rtl_available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but roce-hdl-sim was built without Verilator");
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return None;
    }
    Some(DcbSim::new(width).expect("model"))
}

fn regs(pfc: Priorities, ets: EtsConfig, map: PriorityMap, t: PfcThresholds) -> DcbRegs {
    DcbRegs {
        pfc_enable: pfc,
        ets,
        map,
        thresholds: t,
        mac: MAC,
        bits_per_cycle_q8: DcbRegs::bits_per_cycle(G100, 1_000_000_000 / PERIOD_NS),
    }
}

fn thresholds() -> PfcThresholds {
    PfcThresholds {
        xoff: 16_000,
        xon: 8_000,
        quanta: 0xFFFF,
    }
}

/// A frame the block classifies as `kind` says, `len` bytes, numbered `id` (bytes 16..)
/// so that it can be told from the others.
#[derive(Clone, Copy, Debug)]
enum Kind {
    V4(u8),
    V6(u8),
    Tagged(u8),
    Other,
}

fn frame(kind: Kind, len: usize, id: u32) -> Vec<u8> {
    let mut f = vec![0u8; len.max(20)];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    match kind {
        Kind::V4(dscp) => {
            f[12..16].copy_from_slice(&[0x08, 0x00, 0x45, dscp << 2 | 2]);
        }
        Kind::V6(dscp) => {
            let tc = dscp << 2 | 1;
            f[12..16].copy_from_slice(&[0x86, 0xDD, 0x60 | tc >> 4, tc << 4]);
        }
        Kind::Tagged(pcp) => {
            f[12..16].copy_from_slice(&[0x81, 0x00, pcp << 5, 0]);
        }
        Kind::Other => f[12..14].copy_from_slice(&[0x08, 0x06]),
    }
    f[16..20].copy_from_slice(&id.to_be_bytes());
    f
}

fn pfc_frame(req: &PfcRepr) -> Vec<u8> {
    let mut buf = [0u8; 60];
    let n = req
        .emit_frame(MacAddr([0x02, 0, 0, 0, 0, 9]), &mut buf)
        .unwrap();
    buf[..n].to_vec()
}

fn pause(enable: u8, quanta: [u16; 8]) -> PfcRepr {
    PfcRepr { enable, quanta }
}

/// Clocks until the configuration writes and queued inputs are in.
fn settle(s: &mut DcbSim) {
    while s.inputs_pending() {
        s.tick();
    }
}

/// Clocks until a PFC request comes through; its cycle.
fn until_request(s: &mut DcbSim, want: &PfcRepr) -> u64 {
    for _ in 0..1000 {
        let c = s.tick();
        if let Some(req) = c.pause_req {
            assert_eq!(&req, want);
            return c.cycle;
        }
    }
    panic!("no PFC request came through");
}

/// Cycles from `from` on during which `prio` stays paused.
fn paused_cycles(s: &mut DcbSim, prio: u8, limit: u64) -> u64 {
    let mut n = 0;
    while n < limit {
        if !s.tick().paused.contains(prio) {
            return n;
        }
        n += 1;
    }
    n
}

#[test]
fn pause_timers_count_the_hand_computed_quanta() {
    for width in WIDTHS {
        let Some(mut s) = sim(width) else { return };
        let on = Priorities(0b1000_1000);
        s.configure(&regs(
            on,
            EtsConfig::STRICT,
            PriorityMap::new(),
            thresholds(),
        ));
        settle(&mut s);
        // 100 Gb/s at 250 MHz: 400 bit times a clock. 1000 quanta = 512,000 bit times
        // = 5120 ns = 1280 clocks; 65535 quanta = 33,553,920 bit times = 335,539.2 ns,
        // 83,884.8 clocks: 83,885. Priority 1 has no PFC: its request is ignored.
        let mut q = [0u16; 8];
        (q[1], q[3], q[7]) = (50, 1000, 0xFFFF);
        let req = pause(0b1000_1010, q);
        s.push_rx_frame(&pfc_frame(&req));
        let t = until_request(&mut s, &req);
        // Paused from the cycle after the request.
        let c = s.tick();
        assert_eq!((c.cycle, c.paused), (t + 1, Priorities(0b1000_1000)));
        assert_eq!(1 + paused_cycles(&mut s, 3, 2000), 1280, "{width}");
        assert_eq!(quanta_to_nanos(1000, G100), 1280 * PERIOD_NS);
        // The model agrees to the clock: its pause, rounded up to the clock.
        let mut timers = PauseTimers::default();
        timers.apply((t + 1) * PERIOD_NS, &req, G100, on);
        assert!(timers.paused((t + 1280) * PERIOD_NS).contains(3));
        assert!(!timers.paused((t + 1281) * PERIOD_NS).contains(3));
        assert!(s.last().paused.contains(7));
        let run = 1281 + paused_cycles(&mut s, 7, 100_000);
        assert_eq!(run, 83_885, "{width}");
        assert_eq!(quanta_to_nanos(0xFFFF, G100).div_ceil(PERIOD_NS), 83_885);
        assert_eq!(s.counters().rx_pfc_frames, 1);

        // XON (0 quanta) ends a pause at once.
        q = [0; 8];
        q[3] = 0xFFFF;
        let req = pause(0b1000, q);
        s.push_rx_frame(&pfc_frame(&req));
        until_request(&mut s, &req);
        assert!(s.tick().paused.contains(3));
        let xon = pause(0b1000, [0; 8]);
        s.push_rx_frame(&pfc_frame(&xon));
        let t = until_request(&mut s, &xon);
        assert_eq!(s.last().cycle, t);
        assert!(!s.tick().paused.contains(3));

        // 25 Gb/s (100 bit times a clock): 100 quanta = 51,200 bit times = 2048 ns =
        // 512 clocks.
        s.write_reg(roce_hdl_sim::dcb::reg::BPC, 100 << 8);
        settle(&mut s);
        q[3] = 100;
        let req = pause(0b1000, q);
        s.push_rx_frame(&pfc_frame(&req));
        until_request(&mut s, &req);
        assert_eq!(paused_cycles(&mut s, 3, 2000), 512, "{width}");

        // 100 Gb/s on a 322.265625 MHz clock (a 100G MAC's): 310.303 bit times a clock,
        // 79437.58 in Q16.8, rounded down to 79437 (310.30078: never a shorter pause
        // than asked); 1000 quanta = 512,000 / 310.30078 = 1650.007 clocks: 1651, one
        // more than the exact 5120 ns / 3.10303 ns = 1649.99 would give.
        let bpc = DcbRegs::bits_per_cycle(G100, 322_265_625);
        assert_eq!(bpc, 79_437);
        s.write_reg(roce_hdl_sim::dcb::reg::BPC, bpc);
        settle(&mut s);
        q[3] = 1000;
        let req = pause(0b1000, q);
        s.push_rx_frame(&pfc_frame(&req));
        until_request(&mut s, &req);
        assert_eq!(paused_cycles(&mut s, 3, 4000), 1651, "{width}");

        // A classic 802.3x PAUSE (opcode 0x0001) is bad MAC Control: counted, dropped,
        // and it pauses nothing.
        let mut classic = pfc_frame(&req);
        classic[15] = 0x01;
        classic[14] = 0x00;
        s.push_rx_frame(&classic);
        for _ in 0..100 {
            assert!(s.tick().paused.is_empty());
        }
        assert_eq!(s.counters().rx_bad_mac_ctl, 1);
        assert!(
            s.pop_rx_frame().is_none(),
            "MAC Control reached the datapath"
        );
    }
}

#[test]
fn a_paused_priority_stops_only_its_own_queue() {
    for width in WIDTHS {
        let Some(mut s) = sim(width) else { return };
        // PFC on priority 3 (RoCE data, DSCP 26); CNPs are DSCP 48, priority 6; the ACKs
        // of another class's QP on DSCP 8, priority 1. Every class strict.
        s.configure(&regs(
            Priorities::only(3),
            EtsConfig::STRICT,
            PriorityMap::new(),
            thresholds(),
        ));
        settle(&mut s);
        let mut q = [0u16; 8];
        q[3] = 0xFFFF;
        let xoff = pause(0b1000, q);
        s.push_rx_frame(&pfc_frame(&xoff));
        until_request(&mut s, &xoff);
        // Data of priority 3 queued first, then a CNP and two ACKs behind it.
        let data: Vec<Vec<u8>> = (0..3).map(|i| frame(Kind::V4(26), 4154, i)).collect();
        let cnp = frame(Kind::V4(48), 78, 100);
        let ack = |i: u32| frame(Kind::V4(8), 62, 200 + i);
        for d in &data {
            s.push_tx_frame(d);
        }
        s.push_tx_frame(&cnp);
        s.push_tx_frame(&ack(0));
        s.push_tx_frame(&ack(1));
        let mut out = Vec::new();
        for _ in 0..20_000 {
            let c = s.tick();
            assert!(c.paused.contains(3));
            if let Some((elig, prio)) = c.decision {
                assert!(!elig.contains(3), "a paused queue was eligible");
                assert_ne!(prio, 3);
            }
            while let Some(f) = s.pop_tx_frame() {
                out.push(f.value);
            }
        }
        // The CNP (strict priority 6) and the ACKs went; the paused data waits.
        assert_eq!(out, vec![cnp.clone(), ack(0), ack(1)], "{width}");
        // XON: the data follows, in order.
        let xon = pause(0b1000, [0; 8]);
        s.push_rx_frame(&pfc_frame(&xon));
        for _ in 0..20_000 {
            s.tick();
            while let Some(f) = s.pop_tx_frame() {
                out.push(f.value);
            }
        }
        assert_eq!(out[3..], data[..], "{width}");
    }
}

/// xorshift64*, for reproducible streams.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

fn random_kind(r: &mut Rng) -> Kind {
    match r.below(8) {
        0 => Kind::V6(r.below(64) as u8),
        1 => Kind::Tagged(r.below(8) as u8),
        2 => Kind::Other,
        _ => Kind::V4(r.below(64) as u8),
    }
}

/// A random valid ETS configuration: some classes strict (never all), shares of the
/// others adding up to 100.
fn random_ets(r: &mut Rng) -> EtsConfig {
    let mut strict = Priorities(r.below(256) as u8 & r.below(256) as u8);
    if strict == Priorities::ALL {
        strict = Priorities(0x7F);
    }
    let ets: Vec<u8> = (0..8u8).filter(|&p| !strict.contains(p)).collect();
    let mut bw = [0u8; 8];
    let mut left = 100u32;
    for (i, &p) in ets.iter().enumerate() {
        let share = if i + 1 == ets.len() {
            left
        } else {
            1 + r.below(u64::from(left) - (ets.len() - i - 1) as u64) as u32
        };
        let share = share.min(left - (ets.len() - i - 1) as u32);
        bw[usize::from(p)] = share as u8;
        left -= share;
    }
    let c = EtsConfig {
        strict,
        bw,
        ..EtsConfig::STRICT
    };
    c.validate().unwrap();
    c
}

#[test]
fn the_rtl_is_the_model_cycle_for_cycle() {
    let cycles: u64 = std::env::var("ROCE_DCB_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60_000);
    for width in WIDTHS {
        for seed in 1..=4u64 {
            let Some(mut s) = sim(width) else { return };
            let mut r = Rng(seed * 0x9E37_79B9 + 7);
            let mut map = PriorityMap::new();
            if seed % 2 == 0 {
                for d in map.dscp.iter_mut() {
                    *d = r.below(8) as u8;
                }
                for p in map.pcp.iter_mut() {
                    *p = r.below(8) as u8;
                }
            }
            let xoff = 2_000 + r.below(6_000) as u32;
            let t = PfcThresholds {
                xoff,
                xon: xoff / 2,
                quanta: 200 + r.below(3000) as u16,
            };
            // Most priorities lossless, a few not (their requests ignored, no XOFF).
            let pfc = Priorities(!(r.below(256) as u8 & r.below(256) as u8));
            let cfg = regs(pfc, random_ets(&mut r), map, t);
            s.configure(&cfg);
            settle(&mut s);
            let mut m = DcbLockstep::new(cfg, PERIOD_NS, G100);
            // Frames to send, per priority, waiting for their queue's room.
            let mut backlog: [VecDeque<Vec<u8>>; 8] = Default::default();
            let mut id = 0u32;
            let (mut rx_frames, mut rx_delivered) = (0u64, 0u64);
            // The data frames fed from the wire, in order: what the buffer must deliver
            // byte for byte (its beats keep a byte count, not tkeep).
            let mut rx_fed: VecDeque<Vec<u8>> = VecDeque::new();
            // The drain starts stopped, so the buffer fills and XOFF comes early.
            let (mut wire_ready, mut drain_ready) = (true, false);
            let mut last_room = Priorities::NONE;
            for _ in 0..cycles {
                // The datapath's side: new frames now and then; a frame goes in when its
                // queue has room (as the firmware does) and nothing else is going in.
                if r.chance(0.02) {
                    let f = frame(random_kind(&mut r), 60 + r.below(2000) as usize, id);
                    id += 1;
                    backlog[usize::from(cfg.map.of_frame(&f))].push_back(f);
                }
                if s.tx_pending() == 0 {
                    let start = r.below(8) as usize;
                    if let Some(p) = (0..8)
                        .map(|k| (start + k) % 8)
                        .find(|&p| last_room.contains(p as u8) && !backlog[p].is_empty())
                    {
                        let f = backlog[p].pop_front().unwrap();
                        s.push_tx_frame(&f);
                        m.tx_pushed(&f);
                    }
                }
                // The wire's side: data frames (no more than the buffer holds: it never
                // overflows), PFC frames.
                if !s.inputs_pending() || r.chance(0.5) {
                    if r.chance(0.05) && m.rx_bytes() < 48_000 {
                        let f = frame(random_kind(&mut r), 60 + r.below(1500) as usize, id);
                        id += 1;
                        rx_frames += 1;
                        s.push_rx_frame(&f);
                        m.rx_pushed(&f);
                        rx_fed.push_back(f);
                    } else if r.chance(0.0015) {
                        let mut q = [0u16; 8];
                        for x in q.iter_mut() {
                            *x = if r.chance(0.3) {
                                0
                            } else {
                                r.below(4000) as u16
                            };
                        }
                        let f = pfc_frame(&pause(r.below(256) as u8, q));
                        s.push_rx_frame(&f);
                        m.rx_pushed(&f);
                    }
                }
                if r.chance(0.01) {
                    wire_ready = !wire_ready || r.chance(0.5);
                }
                if r.chance(0.002) {
                    drain_ready = !drain_ready;
                }
                s.set_ready(wire_ready, drain_ready);
                let c = s.tick();
                last_room = c.tx_room;
                if let Err(e) = m.check(&c, &s.counters()) {
                    panic!("{e} (width {width}, seed {seed})");
                }
                while let Some(f) = s.pop_tx_frame() {
                    if let Err(e) = m.wire_frame(&f.value, f.cycle) {
                        panic!("{e} (width {width}, seed {seed})");
                    }
                }
                // The receive side delivers in order what the buffer took in (the
                // accounting above checks each frame's priority and length; nothing
                // is dropped, checked below), byte for byte.
                while let Some(f) = s.pop_rx_frame() {
                    rx_delivered += 1;
                    if rx_fed.pop_front().as_ref() != Some(&f.value) {
                        panic!(
                            "received frame {rx_delivered} at cycle {} is not the one fed (width {width}, seed {seed})",
                            f.cycle
                        );
                    }
                }
            }
            assert_eq!(s.counters().rx_drops, 0);
            assert!(rx_delivered <= rx_frames);
            assert!(m.decisions > 100, "{} decisions", m.decisions);
            assert!(
                m.takes > 0 && !m.max_xoff.is_empty(),
                "no XOFF in seed {seed}"
            );
            eprintln!(
                "{width} seed {seed}: {} decisions, {rx_frames} frames received, {} PFC frames sent ({} refreshes), XOFF on {:?}",
                m.decisions, m.takes, m.fires, m.max_xoff
            );
        }
    }
}

#[test]
fn ets_shares_in_rtl_are_within_two_percent_over_10_ms() {
    for (w, share1) in [(DataWidth::W512, 80u8), (DataWidth::W64, 50)] {
        let Some(mut s) = sim(w) else { return };
        let mut bw = [0u8; 8];
        bw[1] = share1;
        bw[3] = 100 - share1;
        let ets = EtsConfig {
            strict: Priorities(0b1111_0101),
            bw,
            ..EtsConfig::STRICT
        };
        s.configure(&regs(
            Priorities::NONE,
            ets,
            PriorityMap::new(),
            thresholds(),
        ));
        settle(&mut s);
        // Both queues always have frames (1 KiB on priority 1, 4 KiB on 3): the wire
        // takes a beat every other clock, half what the datapath can put in, so the
        // queues stay full. 10 ms at 250 MHz.
        let mut sent = [0u64; 8];
        let mut id = 0;
        let mut room = Priorities::NONE;
        let classes = [(1u8, 8u8, 1024usize), (3, 26, 4154)];
        for cycle in 0..2_500_000u64 {
            // Whichever queue has room gets the next frame (the two take turns first).
            if s.tx_pending() == 0 {
                let first = (cycle % 2) as usize;
                for k in 0..2 {
                    let (p, dscp, len) = classes[(first + k) % 2];
                    if room.contains(p) && s.tx_pending() == 0 {
                        s.push_tx_frame(&frame(Kind::V4(dscp), len, id));
                        id += 1;
                    }
                }
            }
            s.set_ready(cycle % 2 == 0, true);
            room = s.tick().tx_room;
            while let Some(f) = s.pop_tx_frame() {
                sent[usize::from(PriorityMap::new().of_frame(&f.value))] += f.value.len() as u64;
            }
        }
        let got = sent[1] as f64 / (sent[1] + sent[3]) as f64;
        let want = f64::from(share1) / 100.0;
        assert!(
            (got - want).abs() <= 0.02 * want,
            "{w}: priority 1 got {:.3} % of the bytes, configured {share1} %",
            100.0 * got
        );
        eprintln!("{w}: ETS {share1}/{}: {:.3} %", 100 - share1, 100.0 * got);
    }
}
