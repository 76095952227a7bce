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

/// Head-of-line blocking in the datapath's transmit queue (issue 18). Both NICs run on
/// the RTL datapath behind the DCB RTL, with PFC on priority 0. Priority 0 is paused at
/// the sender (a PFC frame of 65,535 quanta from the wire into its DCB block, renewed)
/// while a bulk QP on priority 0 has 64 x 64 KiB WRITEs posted: its frames fill the
/// block's priority-0 queue and wait in the datapath's queue in front of it. A second
/// QP on priority 3 (DSCP 24) then posts 16 WRITEs of 4 KiB: they must all complete
/// while priority 0 is still paused, and priority 0 must send nothing meanwhile.
/// With the datapath's one 64-frame FIFO read in order (before), the priority-0 frame
/// at its head waited for the pause and every priority-3 frame behind it too.
#[test]
fn rtl_dcb_a_paused_priority_holds_back_no_other_in_the_datapath_queue() {
    use roce_core::memory::AccessFlags;
    use roce_core::transport::{QpType, WcStatus, WorkCompletion, WrOp};
    use roce_core::wire::ethernet::MacAddr;
    use roce_core::wire::pfc::PfcRepr;
    use roce_hdl_sim::DataWidth;
    use roce_host::ConnectOptions;
    use roce_sim::Node;
    use roce_testbed::rtl_dcb::RtlDcbConfig;
    use roce_testbed::traffic::{connect_pair, signaled};
    if !roce_hdl_sim::rtl_available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but roce-hdl-sim was built without Verilator");
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return;
    }
    const BULK: usize = 64;
    const BULK_LEN: u32 = 64 * 1024;
    const PROBE: usize = 16;
    const PROBE_LEN: u32 = 4096;
    let p = perf::Params {
        qps: 2,
        ..roce_tests::write_bw(BULK, BULK)
    };
    let [a, b] = perf::nics(&p, Datapath::Rtl(DataWidth::W64), false).unwrap();
    let nodes = [a, b].map(|n| {
        NicNode::new(n)
            .with_rtl_dcb(RtlDcbConfig::default())
            .unwrap()
    });
    let mut sim = Sim::connect(nodes, LinkConfig::new(LINK, 1_000), 1).unwrap();
    for ctx in sim.contexts() {
        ctx.set_pfc(Priorities::only(0).0).unwrap();
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let sides = sim.contexts().map(|ctx| {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(256).unwrap();
        let qps: Vec<_> = (0..2)
            .map(|_| {
                pd.create_qp(QpType::Rc, &cq, &cq)
                    .max_send_wr(BULK)
                    .max_recv_wr(1)
                    .build()
                    .unwrap()
            })
            .collect();
        let mr = pd.reg_mr(BULK_LEN as usize, access).unwrap();
        (cq, qps, mr)
    });
    let [(cq, sq, smr), (_, dq, dmr)] = &sides;
    for (i, dscp) in [(0, 0u8), (1, 24)] {
        let opts = ConnectOptions {
            traffic_class: dscp << 2,
            ..ConnectOptions::default()
        };
        connect_pair(&sq[i], &dq[i], i, &opts).unwrap();
    }
    let write = |id: u64, len: u32| {
        signaled(
            id,
            WrOp::RdmaWrite {
                remote_addr: dmr.addr(),
                rkey: dmr.rkey(),
            },
            smr,
            0,
            len,
        )
    };
    let run_until = |sim: &mut Sim, t: u64| {
        while sim.now() < t && sim.advance() {}
    };
    // The bulk QP's WRITEs, then priority 0 paused at the sender, as its DCB block
    // would take a PFC frame from the wire.
    for k in 0..BULK {
        sq[0].post_send(&write(k as u64, BULK_LEN)).unwrap();
    }
    sim.kick(0);
    let peer = sim.node(1).nic().port_config().mac;
    let pause = |sim: &mut Sim| {
        let mut frame = [0u8; 64];
        let pfc = PfcRepr {
            enable: 1,
            quanta: [0xFFFF, 0, 0, 0, 0, 0, 0, 0],
        };
        let n = pfc.emit_frame(MacAddr(peer), &mut frame).unwrap();
        let now = sim.now();
        sim.node_mut(0).handle_frame(now, 0, &frame[..n]);
        sim.kick(0);
    };
    let t = sim.now() + 5_000;
    run_until(&mut sim, t);
    pause(&mut sim);
    // 65,535 quanta at 100 Gb/s: 335.5 us, renewed every 100 us. A frame the block had
    // chosen before the pause leaves within 2 us.
    let t = sim.now() + 2_000;
    run_until(&mut sim, t);
    assert!(
        sim.node(0).tx_bytes()[0] > 0,
        "the bulk QP sent nothing before the pause"
    );
    let sent0 = sim.node(0).tx_bytes()[0];
    let start = sim.now();
    for k in 0..PROBE {
        sq[1].post_send(&write(1000 + k as u64, PROBE_LEN)).unwrap();
    }
    sim.kick(0);
    let mut buf = vec![WorkCompletion::default(); 64];
    let mut probes_done = 0;
    let mut probe_end = None;
    for round in 1..=4u64 {
        run_until(&mut sim, start + round * 100_000);
        for wc in cq.poll(&mut buf).unwrap() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.wr_id >= 1000 {
                probes_done += 1;
                if probes_done == PROBE {
                    probe_end = Some(sim.now());
                }
            }
        }
        pause(&mut sim);
    }
    let paused_for = sim.now() - start;
    let k = sim.node(0).rtl_dcb().unwrap().counters();
    eprintln!(
        "probe WRITEs done {probes_done}/{PROBE} (by {:?} ns), priority 0 sent {} B in {paused_for} ns of pause, {k:?}",
        probe_end.map(|t| t - start),
        sim.node(0).tx_bytes()[0] - sent0
    );
    assert_eq!(k.ever_paused, Priorities::only(0));
    assert_eq!(
        sim.node(0).tx_bytes()[0],
        sent0,
        "priority 0 sent while paused"
    );
    assert_eq!(
        probes_done, PROBE,
        "priority 3 held back behind paused data"
    );
    for (side, n) in [("sender", 0), ("receiver", 1)] {
        let r = sim.node(n).rtl_dcb().unwrap();
        assert_eq!(r.lockstep_error(), None, "{side}: RTL and model differ");
    }
    assert_eq!(sim.counters().drops, 0);
}
