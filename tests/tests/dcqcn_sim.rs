//! DCQCN end to end on the simulated fabric (issue 7): a 100 Gb/s sender into a 25 Gb/s
//! bottleneck through a RED/ECN switch. With DCQCN the switch marks, the receiver NIC
//! sends CNPs, the sender NIC cuts its rate and the bottleneck queue stays far below
//! what the same run builds without congestion control. (With the paper's parameters a
//! single flow that starts at line rate overshoots: the CNPs that arrive while the first
//! burst drains cut the rate far below the bottleneck, and the 55 us / 40 Mb/s recovery
//! is slow, so throughput is well under 25 Gb/s; the test checks the mechanism, not
//! tuning.)

use roce_cli::perf::{self, Params};
use roce_cli::progress::ProgressBar;
use roce_core::cc::CcConfig;
use roce_core::engine::QPN_BASE;
use roce_core::num::Qpn;
use roce_host::Context;
use roce_sim::{LinkConfig, RedConfig, SwitchConfig};
use roce_testbed::nic::Datapath;
use roce_testbed::{NicNode, Sim, World};
use roce_tests::{check_with_tshark, scratch};
use std::path::Path;

const G: u64 = 1_000_000_000;
/// Sampling period of the time series.
const TICK: u64 = 10_000;

fn params() -> Params {
    roce_tests::write_bw(300, 16)
}

/// The simulated world, sampling the sender QP's DCQCN rate every `TICK`: what a
/// scenario's time series reads.
struct Sampled {
    sim: Sim,
    next: u64,
    rates: Vec<(u64, u64)>,
}

impl World for Sampled {
    fn now(&self) -> u64 {
        self.sim.now()
    }
    fn advance(&mut self) -> bool {
        while self.sim.now() >= self.next {
            // Through the ABI, as a monitor on the host would; no QP yet: no sample.
            let qpn = Qpn::new(QPN_BASE);
            if let Ok(i) = self.sim.contexts()[0].query_qp_cc(qpn) {
                self.rates.push((self.next, i.rate));
            }
            self.next += TICK;
        }
        self.sim.advance()
    }
    fn kick(&mut self, side: usize) {
        self.sim.kick(side)
    }
    fn contexts(&self) -> [&Context; 2] {
        self.sim.contexts()
    }
    fn drops(&self) -> u64 {
        self.sim.drops()
    }
    fn simulated(&self) -> bool {
        true
    }
}

struct Run {
    w: Sampled,
    gbps: f64,
    /// Mean bottleneck queue (bytes) over the run.
    mean_queue: u64,
    marked: u64,
}

fn run(cc: CcConfig, pcap: Option<&Path>) -> Run {
    let p = params();
    let nodes = perf::nics(&p, Datapath::Software, false)
        .unwrap()
        .map(NicNode::new);
    let sw = SwitchConfig {
        // Kmin 20 KB, Kmax 200 KB, Pmax 1 %: the DCQCN paper's shape (roce-facts §7.4).
        red: Some(RedConfig::new(20_000, 200_000, 0.01)),
        // Enough buffer that nothing drops: the comparison is about queueing.
        shared_buffer: 16 << 20,
        ..SwitchConfig::default()
    };
    let links = [
        LinkConfig::new(100 * G, 1_000),
        LinkConfig::new(25 * G, 1_000),
    ];
    let mut sim = Sim::through_switch(nodes, links, sw, 1).unwrap();
    for ctx in sim.contexts() {
        ctx.set_cc(&cc).unwrap();
    }
    let sampler = sim.fabric.sample_queues(sim.switch.unwrap(), TICK);
    let tap = pcap.map(|p| {
        let f = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
        sim.fabric.tap(sim.link, f).unwrap()
    });
    let mut w = Sampled {
        sim,
        next: 0,
        rates: Vec::new(),
    };
    let m = perf::run(&mut w, &p, &ProgressBar::hidden()).unwrap();
    assert_eq!((m.drops, m.retransmits), (0, 0));
    if let Some(t) = tap {
        w.sim.fabric.close_tap(t).unwrap();
    }
    let series = w.sim.fabric.queue_series(sampler);
    let depths: Vec<u64> = series
        .samples
        .iter()
        .filter(|s| s.port == 1)
        .map(|s| s.depth[0])
        .collect();
    let q = w.sim.fabric.counters().switches[0].ports[1].queues[0];
    let bytes = (p.size * p.iters) as f64;
    Run {
        gbps: bytes * 8.0 / m.elapsed_ns as f64,
        mean_queue: depths.iter().sum::<u64>() / depths.len().max(1) as u64,
        marked: q.ecn_marked,
        w,
    }
}

#[test]
fn dcqcn_keeps_the_bottleneck_queue_short() {
    let dir = scratch("dcqcn-sim");
    let pcap = dir.join("bottleneck.pcap");
    let off = run(CcConfig::default(), None);
    let on = run(CcConfig::dcqcn(100 * G), Some(&pcap));
    let [a, b] = on.w.contexts();
    let (ca, cb) = (
        a.query_counters().unwrap().engine,
        b.query_counters().unwrap().engine,
    );
    let min_rate = on.w.rates.iter().map(|r| r.1).min().unwrap();
    eprintln!(
        "off: {:.2} Gb/s, mean queue {} B, {} marked; on: {:.2} Gb/s, mean queue {} B, \
         {} marked, {} CNPs sent, {} handled, lowest rate {:.2} Gb/s",
        off.gbps,
        off.mean_queue,
        off.marked,
        on.gbps,
        on.mean_queue,
        on.marked,
        cb.np_cnp_sent,
        ca.rp_cnp_handled,
        min_rate as f64 / G as f64
    );
    // Without CC the frames are Not-ECT: nothing is marked, the rate is never cut, and
    // the queue holds most of the sender's window.
    assert_eq!(off.marked, 0);
    assert!(off.w.rates.iter().all(|r| r.1 == 100 * G));
    assert!(off.mean_queue > 200_000, "{}", off.mean_queue);
    // With DCQCN: marks, at most one CNP per 50 us, every CNP handled, the rate cut
    // below the bottleneck's 25 Gb/s, and the queue far shorter.
    assert!(on.marked > 0);
    assert!(on.w.rates.iter().all(|r| r.1 <= 100 * G));
    let elapsed = on.w.now();
    assert!(cb.np_cnp_sent > 0 && cb.np_cnp_sent <= elapsed / 50_000 + 1);
    assert_eq!(ca.rp_cnp_handled, cb.np_cnp_sent);
    assert_eq!(cb.np_ecn_marked_roce_packets, on.marked);
    assert!(min_rate < 25 * G);
    assert!(
        on.mean_queue * 4 < off.mean_queue,
        "{} vs {}",
        on.mean_queue,
        off.mean_queue
    );
    assert!(off.gbps > 24.0 && off.gbps < 25.0, "{:.2} Gb/s", off.gbps);
    // Recovery: the rate climbs again after its lowest point (the timer's fast recovery).
    let lowest = on.w.rates.iter().position(|r| r.1 == min_rate).unwrap();
    assert!(on.w.rates[lowest..].iter().any(|r| r.1 > 2 * min_rate));

    // On the wire of the bottleneck link: Wireshark finds every CNP (opcode 129) and
    // every ICRC verifies (the checker computes it independently), CE marks included.
    if check_with_tshark(&pcap) {
        let t = std::process::Command::new("tshark")
            .args([
                "-r",
                pcap.to_str().unwrap(),
                "-Y",
                "infiniband.bth.opcode == 129",
            ])
            .args([
                "-T",
                "fields",
                "-e",
                "infiniband.bth.destqp",
                "-e",
                "ip.dsfield",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&t.stdout);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len() as u64, cb.np_cnp_sent);
        let want = format!("0x{:06x}\t0xc2", QPN_BASE);
        assert!(rows.iter().all(|r| *r == want), "{rows:?} vs {want}");
    }
}
