//! Lossless Ethernet at the NIC (issue 7): a receiver NIC slower than the link fills its
//! receive buffer, sends PFC pause frames, the sender's NIC honours them, and nothing is
//! dropped; without PFC the same receiver drops and Go-Back-N has to repair.

use roce_cli::perf::{self, Params};
use roce_cli::progress::ProgressBar;
use roce_sim::{LinkConfig, Priorities};
use roce_testbed::nic::Datapath;
use roce_testbed::rx_buffer::RxBufferConfig;
use roce_testbed::{NicNode, Sim, World};

const LINK: u64 = 100_000_000_000;
/// The receiver NIC takes frames in at 40 Gb/s.
const DRAIN: u64 = 40_000_000_000;

fn params() -> Params {
    roce_tests::write_bw(100, 64)
}

/// write_bw from side 0 into a receiver whose buffer PFC-protects `pfc`: both hosts
/// turn PFC on for those priorities through the ABI, as DCBX would agree on.
fn run(pfc: Priorities) -> (Sim, perf::Measurement) {
    let p = params();
    // 2 us of link delay: 25 KB in flight each way. XOFF at 64 KiB leaves 192 KiB of
    // headroom, far above 2 x 25 KB + 2 frames.
    let rx = RxBufferConfig::new(256 * 1024, DRAIN, 64 * 1024, 32 * 1024);
    let [a, b] = perf::nics(&p, Datapath::Software, false).unwrap();
    let nodes = [NicNode::new(a), NicNode::new(b).with_rx_buffer(rx)];
    let mut sim = Sim::connect(nodes, LinkConfig::new(LINK, 2_000), 1).unwrap();
    for ctx in sim.contexts() {
        ctx.set_pfc(pfc.0).unwrap();
    }
    let m = perf::run(&mut sim, &p, &ProgressBar::hidden()).unwrap();
    (sim, m)
}

#[test]
fn slow_receiver_pauses_the_sender_and_drops_nothing() {
    // RoCE data carries DSCP 0 (priority 0 through the default map).
    let (sim, m) = run(Priorities::only(0));
    let rx = sim.node(1).rx_buffer_counters();
    assert!(rx.pause_frames_sent > 0 && rx.xoff_sent[0] > 0 && rx.xon_sent[0] > 0);
    assert_eq!(rx.dropped, 0);
    assert!(rx.max_bytes <= 256 * 1024);
    let sender = sim.fabric.port_counters(sim.host(0), 0);
    assert_eq!(sender.pause_frames_rx, rx.pause_frames_sent);
    assert!(sender.paused_ns[0] > 0);
    assert_eq!((m.drops, m.retransmits), (0, 0));
    // The receiver is the bottleneck: goodput just under 40 Gb/s of frames.
    let bytes = (params().size * params().iters) as f64;
    let gbps = bytes * 8.0 / m.elapsed_ns as f64;
    eprintln!(
        "{gbps:.2} Gb/s, {} pause frames, sender paused {} ns, buffer peak {} B",
        rx.pause_frames_sent, sender.paused_ns[0], rx.max_bytes
    );
    assert!(gbps < 40.0 && gbps > 36.0, "{gbps:.2} Gb/s");
    assert_eq!(sim.counters().drops, 0);
}

#[test]
fn without_pfc_the_slow_receiver_drops() {
    let (sim, m) = run(Priorities::NONE);
    let rx = sim.node(1).rx_buffer_counters();
    assert_eq!(rx.pause_frames_sent, 0);
    assert!(rx.dropped > 0);
    assert_eq!(m.drops, rx.dropped);
    assert!(m.retransmits > 0);
    eprintln!("{} drops, {} retransmits", rx.dropped, m.retransmits);
}
