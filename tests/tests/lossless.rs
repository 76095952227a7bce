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

/// The same slow receiver, with both NICs on the RTL datapath and their DCB MAC in RTL
/// (`roce_dcb_top` between each NIC and its link, issue 18): the receiver's RTL sends
/// the XOFFs from its own receive buffer's thresholds, the sender's RTL pause timers
/// stop priority 0's queue, nothing is dropped. The core's model runs beside both
/// blocks and checks every cycle (pause state, XOFF/XON, every PFC frame and every
/// scheduling decision, every frame on the wire).
#[test]
fn rtl_dcb_mac_pauses_the_sender_and_drops_nothing() {
    use roce_core::dcb::PfcThresholds;
    use roce_hdl_sim::DataWidth;
    use roce_testbed::rtl_dcb::RtlDcbConfig;
    if !roce_hdl_sim::rtl_available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but roce-hdl-sim was built without Verilator");
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return;
    }
    let p = params();
    let slow = RtlDcbConfig {
        drain_bps: Some(DRAIN),
        ..RtlDcbConfig::default()
    };
    let [a, b] = perf::nics(&p, Datapath::Rtl(DataWidth::W64), false).unwrap();
    let nodes = [
        NicNode::new(a)
            .with_rtl_dcb(RtlDcbConfig::default())
            .unwrap(),
        NicNode::new(b).with_rtl_dcb(slow).unwrap(),
    ];
    let mut sim = Sim::connect(nodes, LinkConfig::new(LINK, 1_000), 1).unwrap();
    // PFC on priority 0 and the receive buffer's thresholds through the ABI (1.5,
    // MODIFY_DCB), which reach the RTL's registers: XOFF at 24 KiB leaves 40 KiB of the
    // block's 64 KiB for 2 x 12.5 KB in flight (1 us of link) and two frames; XON at
    // 16 KiB is more than the 40 Gb/s drain empties in a round trip (2 us: 10 KB), so
    // the buffer does not run dry before the sender's data is back. The pause asks for
    // 8,000 quanta (40.96 us at 100 Gb/s), refreshed every half of it.
    for ctx in sim.contexts() {
        let mut dcb = ctx.query_dcb().unwrap();
        dcb.pfc_enable = Priorities::only(0).0;
        dcb.pfc_thresholds = PfcThresholds {
            xoff: 24 * 1024,
            xon: 16 * 1024,
            quanta: 8_000,
        };
        ctx.set_dcb(&dcb).unwrap();
        assert_eq!(ctx.query_dcb().unwrap(), dcb);
    }
    let m = perf::run(&mut sim, &p, &ProgressBar::hidden()).unwrap();
    let (ra, rb) = (
        sim.node(0).rtl_dcb().unwrap(),
        sim.node(1).rtl_dcb().unwrap(),
    );
    for (side, r) in [("sender", ra), ("receiver", rb)] {
        let t = r.regs().unwrap().thresholds;
        assert_eq!(
            (t.xoff, t.xon, t.quanta),
            (24 * 1024, 16 * 1024, 8_000),
            "{side}"
        );
        assert_eq!(r.lockstep_error(), None, "{side}: RTL and model differ");
        assert!(r.lockstep_running(), "{side}");
    }
    let (ka, kb) = (ra.counters(), rb.counters());
    eprintln!("sender {ka:?}\nreceiver {kb:?}");
    assert!(kb.pfc_frames_sent > 0 && kb.ever_xoff == Priorities::only(0));
    assert_eq!(u64::from(ka.pfc_frames_received), kb.pfc_frames_sent);
    assert_eq!(ka.ever_paused, Priorities::only(0));
    assert!(ka.decisions_checked > 1000, "{}", ka.decisions_checked);
    assert_eq!((ka.rx_drops, kb.rx_drops), (0, 0));
    assert_eq!((m.drops, m.retransmits), (0, 0));
    // The fabric keeps no pause timers for these ports: the RTL does.
    let sender = sim.fabric.port_counters(sim.host(0), 0);
    assert_eq!(sender.paused_ns, [0; 8]);
    let bytes = (p.size * p.iters) as f64;
    let gbps = bytes * 8.0 / m.elapsed_ns as f64;
    eprintln!("{gbps:.2} Gb/s");
    assert!(gbps < 40.0 && gbps > 36.0, "{gbps:.2} Gb/s");
}
