//! Simulation speed of the Verilated datapath: clock cycles per wall-clock
//! second at 64 and 512 bits, driven cycle by cycle from Rust (one FFI call
//! per cycle), with the RX input busy every cycle; plus the pipeline
//! latencies measured on the same runs.
//!
//! `cargo bench -p roce-hdl-sim --bench rtl_speed [-- SECONDS]`

use std::time::{Duration, Instant};

use roce_hdl_sim::{rtl_available, DataWidth, RtlSim, Shaping};

/// A valid RoCEv2 frame: RC RDMA WRITE ONLY over IPv4 with `payload` bytes.
fn frame(payload: usize) -> Vec<u8> {
    use roce_core::num::{Psn, Qpn, Rkey};
    use roce_core::wire::bth::BthRepr;
    use roce_core::wire::ethernet::{EthernetRepr, MacAddr};
    use roce_core::wire::ipv4::Ipv4Repr;
    use roce_core::wire::reth::RethRepr;
    use roce_core::wire::udp::UdpRepr;
    use roce_core::wire::{self, ExtHeaders, Headers, L3Repr, Opcode};
    let h = Headers {
        eth: EthernetRepr {
            dst: MacAddr([2, 0, 0, 0, 0, 1]),
            src: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: 0,
        },
        vlan: None,
        l3: L3Repr::Ipv4(Ipv4Repr {
            src: [10, 0, 0, 1].into(),
            dst: [10, 0, 0, 2].into(),
            dscp: 26,
            ecn: 2,
            ident: 1,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            ttl: 64,
            protocol: 17,
        }),
        udp: Some(UdpRepr {
            src_port: 0xC000,
            dst_port: 4791,
            checksum: 0,
        }),
        bth: BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, Qpn::new(17), Psn::new(1)),
        ext: ExtHeaders {
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: Rkey(7),
                dma_len: payload as u32,
            }),
            ..ExtHeaders::default()
        },
    };
    let data: Vec<u8> = (0..payload).map(|i| i as u8).collect();
    let mut buf = vec![0u8; payload + 128];
    let n = wire::emit(&h, &data, &mut buf).expect("emit");
    buf.truncate(n);
    buf
}

/// CPU time of this thread (Linux: utime + stime from /proc), if readable.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // fields after the ")" of the command name: state is field 3, utime 14, stime 15
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10)) // USER_HZ = 100 on Linux
}

struct Run {
    cycles: u64,
    frames: u64,
    wall: Duration,
    cpu: Option<Duration>,
    meta_latency: u64,
    /// cycles from the last input beat to the last payload beat (None: no payload)
    payload_latency: Option<u64>,
}

/// Keeps the RX input full of copies of `f` for about `secs` seconds.
fn run(width: DataWidth, f: &[u8], secs: f64, trace: bool) -> Run {
    let mut sim = if trace {
        let p = std::env::temp_dir().join(format!("rtl_speed_{}.fst", width.bits()));
        RtlSim::with_trace(width, &p).expect("model")
    } else {
        RtlSim::new(width).expect("model")
    };
    sim.set_shaping(Shaping::LINE_RATE);
    let beats = width.beats(f.len()) as u64;
    // latency: one frame alone, timeline on
    sim.record_timeline();
    sim.push_rx_frame(f);
    sim.run(60 + beats);
    let t = sim.take_timeline();
    let last_in = t.rx_in.iter().find(|b| b.1).expect("last beat").0;
    let meta_latency = t.rx_meta[0] - last_in;
    let payload_latency = t.rx_payload.last().map(|p| p.0 - last_in);
    while sim.pop_rx_meta().expect("meta").is_some() {}
    while sim.pop_rx_payload().is_some() {}

    let start = Instant::now();
    let cpu0 = thread_cpu();
    let c0 = sim.cycle();
    let mut frames = 0u64;
    let budget = Duration::from_secs_f64(secs);
    while start.elapsed() < budget {
        for _ in 0..64 {
            sim.push_rx_frame(f);
        }
        // drain: keep the input queue from emptying until the time is up
        while sim.pending_input() as u64 > beats * 8 {
            sim.tick();
        }
        while let Some(m) = sim.pop_rx_meta().expect("meta") {
            assert!(m.value.error.is_none());
            frames += 1;
        }
        while sim.pop_rx_payload().is_some() {}
    }
    let wall = start.elapsed();
    let cpu = thread_cpu().zip(cpu0).map(|(b, a)| b - a);
    Run {
        cycles: sim.cycle() - c0,
        frames,
        wall,
        cpu,
        meta_latency,
        payload_latency,
    }
}

fn main() {
    let secs: f64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2.0);
    if !rtl_available() {
        println!("rtl_speed: SKIPPED (roce-hdl-sim built without Verilator)");
        return;
    }
    println!("width    frame   beats  trace  cycles/s(wall)  cycles/s(cpu)  frames/s(cpu)  meta lat  last-payload lat");
    for width in DataWidth::ALL {
        for (payload, trace) in [(4096usize, false), (0, false), (4096, true)] {
            let f = frame(payload);
            let r = run(width, &f, secs, trace);
            let cps = r.cycles as f64 / r.wall.as_secs_f64();
            let cpu = r.cpu.unwrap_or(r.wall).as_secs_f64();
            println!(
                "{:>3}-bit  {:>5} B  {:>5}  {:>5}  {:>14.0}  {:>13.0}  {:>13.0}  {:>8}  {:>16}",
                width.bits(),
                f.len(),
                width.beats(f.len()),
                if trace { "fst" } else { "no" },
                cps,
                r.cycles as f64 / cpu,
                r.frames as f64 / cpu,
                r.meta_latency,
                r.payload_latency.map_or("-".to_string(), |l| l.to_string())
            );
        }
    }
}
