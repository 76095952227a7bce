//! `roce analyze` on captures whose history is known: `roce perf` runs on the simulated
//! fabric under loss, captured as tcpdump on the requester's host would (everything it
//! sends, lost or not, and what reaches it), where the analysis must count exactly the
//! resends, NAKs, Go-Back-N retries and timeouts the requester's engine counted; the same
//! runs seen from the responder, where every NAK must report a gap the capture shows;
//! and a lossless latency test whose ACK latency the wire model gives to the nanosecond.

use roce_capture::analyze::{
    self,
    report::{Report, Requests},
    stream::Cause,
};
use roce_cli::perf::{self, Params, Test};
use roce_cli::progress::ProgressBar;
use roce_core::transport::{Counters, Mtu, QpType};
use roce_host::PortCounters;
use roce_sim::{Faults, LinkConfig, MemoryCapture};
use roce_testbed::nic::Datapath;
use roce_testbed::{Sim, World};

const G100: u64 = 100_000_000_000;

fn params(test: Test, size: usize, iters: usize) -> Params {
    Params {
        test,
        size,
        iters,
        qps: 1,
        mtu: Mtu::Mtu1024,
        tx_depth: 16,
        selective_repeat: None,
        timeout: 14,
    }
}

/// Runs `p` with `loss` on the link (both ways), captured at link end `end` (0 is the
/// client, the requester); returns the analysis and each NIC's engine counters.
fn run(p: &Params, loss: f64, seed: u64, end: usize) -> (Report, [Counters; 2]) {
    let (r, c) = run_on(p, false, loss, seed, end);
    (r, c.map(|c| c.engine))
}

/// [`run`] with the RC fast path (`roce perf`'s default) or without; every port counter.
fn run_on(
    p: &Params,
    fastpath: bool,
    loss: f64,
    seed: u64,
    end: usize,
) -> (Report, [PortCounters; 2]) {
    let (r, c, _) = run_captured(p, fastpath, loss, seed, end);
    (r, c)
}

/// [`run_on`], also returning the capture's pcap bytes.
fn run_captured(
    p: &Params,
    fastpath: bool,
    loss: f64,
    seed: u64,
    end: usize,
) -> (Report, [PortCounters; 2], Vec<u8>) {
    let link = LinkConfig::new(G100, 2_000).with_faults(Faults {
        loss,
        ..Faults::default()
    });
    let nics = perf::nics(p, Datapath::Software, fastpath).unwrap();
    let mut sim = Sim::back_to_back(nics, link, seed).unwrap();
    let capture = MemoryCapture::new();
    let tap = sim.fabric.tap_end(sim.link, end, capture.clone()).unwrap();
    perf::run(&mut sim, p, &ProgressBar::hidden()).unwrap();
    sim.fabric.close_tap(tap).unwrap();
    let counters = sim.contexts().map(|c| c.query_counters().unwrap());
    let pcap = capture.bytes();
    (analyse(&pcap), counters, pcap)
}

/// Each record's time stamp in nanoseconds, read straight from the pcap bytes
/// (little-endian, nanosecond resolution: a 24-byte file header, then a 16-byte header
/// per record: seconds, nanoseconds, captured length, original length). Not through
/// `roce_capture`'s reader: the times check that crate's analysis.
fn pcap_times_ns(pcap: &[u8]) -> Vec<u64> {
    let word = |at: usize| u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap()) as u64;
    assert_eq!(word(0), 0xa1b2_3c4d, "a nanosecond pcap");
    let (mut at, mut times) = (24, Vec::new());
    while at < pcap.len() {
        times.push(word(at) * 1_000_000_000 + word(at + 4));
        at += 16 + word(at + 8) as usize;
    }
    times
}

#[test]
fn the_requesters_capture_counts_what_its_engine_counted() {
    // WRITE, READ (multi-packet responses, and single ones), SEND and ATOMIC; one to
    // four QP pairs, whose flows the analysis must pair up from the traffic alone (the
    // initial PSNs of `roce perf`'s QPs differ by one, so PSN ranges overlap); 1 % to 5 %
    // loss each way.
    let tests = [
        (Test::WriteBw, 10_000),
        (Test::ReadBw, 10_000),
        (Test::ReadBw, 100),
        (Test::SendBw, 3000),
        (Test::AtomicBw, 8),
    ];
    let (mut episodes, mut timeouts, mut naks) = (0, 0, 0);
    for (test, size) in tests {
        for seed in 1..=24u64 {
            let mut p = params(test, size, 100);
            p.qps = 1 + seed as usize % 4;
            let loss = [0.01, 0.03, 0.05][seed as usize % 3];
            let (r, [client, server]) = run(&p, loss, seed, 0);
            let what = format!("{} {size} B, {} QPs, seed {seed}", test.name(), p.qps);
            assert_eq!(r.connections.len(), p.qps, "{what}");
            for c in &r.connections {
                // perf connects QP n of one NIC to QP n of the other.
                assert_eq!(c.a.qpn, c.b.qpn, "{what}: paired wrongly");
                let back = c.b_to_a.as_ref().expect("responses");
                assert_eq!(back.unmatched_responses, 0, "{what}");
                assert!(
                    back.requests.is_none(),
                    "{what}: the server requests nothing"
                );
            }
            let sum = |f: fn(&Requests) -> u64| -> u64 {
                r.connections
                    .iter()
                    .map(|c| f(c.a_to_b.requests.as_ref().expect("requests")))
                    .sum()
            };
            assert_eq!(
                sum(|q| q.resent),
                client.retransmitted_pkts,
                "{what}: resent"
            );
            assert_eq!(
                sum(|q| q.naks.psn_sequence_error),
                client.rcvd_seq_err,
                "{what}: NAKs"
            );
            assert_eq!(
                sum(|q| q.go_back_n.episodes),
                client.completer_retry_err,
                "{what}: Go-Back-N retries"
            );
            assert_eq!(
                sum(|q| q.timeouts),
                client.local_ack_timeout_err,
                "{what}: timeouts"
            );
            assert_eq!(sum(|q| q.rnr_naks), client.rcvd_rnr_err, "{what}: RNR NAKs");
            assert_eq!(server.retransmitted_pkts, 0);
            episodes += sum(|q| q.go_back_n.episodes);
            timeouts += sum(|q| q.timeouts);
            naks += sum(|q| q.naks.psn_sequence_error);
        }
    }
    // The runs exercise what they are meant to.
    assert!(
        episodes > 500 && timeouts > 50 && naks > 200,
        "{episodes} episodes, {timeouts} timeouts, {naks} NAKs"
    );
}

/// `roce perf`'s default: the RC fast path sends the requests. Its NAKs, Go-Back-N
/// retries and timeouts are still the engine's to count, and equal the analysis's. The
/// resends are the wire's: every request packet the NIC transmitted (the fast path's
/// frames and the firmware's) beyond the PSNs the run needed once; the port's
/// `retransmitted_pkts` (the segmenter's resends plus the firmware's) counts the same.
#[test]
fn with_the_fast_path_the_resends_are_those_the_nic_transmitted() {
    let (mut episodes, mut resent) = (0, 0);
    for (test, size) in [(Test::WriteBw, 10_000), (Test::SendBw, 3000)] {
        for seed in 1..=6u64 {
            let mut p = params(test, size, 100);
            p.qps = 1 + seed as usize % 2;
            let loss = [0.01, 0.03][seed as usize % 2];
            let (r, [client, server]) = run_on(&p, true, loss, seed, 0);
            let what = format!("{} {size} B, {} QPs, seed {seed}", test.name(), p.qps);
            assert!(
                client.runtime.fastpath.tx_frames > 0,
                "{what}: no fast path"
            );
            assert_eq!(r.connections.len(), p.qps, "{what}");
            let sum = |f: fn(&Requests) -> u64| -> u64 {
                r.connections
                    .iter()
                    .map(|c| f(c.a_to_b.requests.as_ref().expect("requests")))
                    .sum()
            };
            // One PSN per packet (WRITE and SEND): the run needs iters x packets per
            // message of them, each sent once at least.
            let psns = (p.iters * p.qps * size.div_ceil(p.mtu.bytes() as usize)) as u64;
            let sent = client.runtime.frames_tx + client.runtime.fastpath.tx_frames;
            assert_eq!(sum(|q| q.resent), sent - psns, "{what}: resent");
            let e = client.engine;
            assert_eq!(sum(|q| q.resent), e.retransmitted_pkts, "{what}: counter");
            assert_eq!(sum(|q| q.naks.psn_sequence_error), e.rcvd_seq_err, "{what}");
            assert_eq!(
                sum(|q| q.go_back_n.episodes),
                e.completer_retry_err,
                "{what}"
            );
            assert_eq!(sum(|q| q.timeouts), e.local_ack_timeout_err, "{what}");
            assert_eq!(server.engine.retransmitted_pkts, 0);
            episodes += sum(|q| q.go_back_n.episodes);
            resent += sum(|q| q.resent);
        }
    }
    assert!(
        episodes > 20 && resent > 500,
        "{episodes} episodes, {resent} resent"
    );
}

/// The port's `retransmitted_pkts` with the fast path on, against the resends the
/// requester's capture shows, on `roce perf write_bw`'s own settings (64 KiB messages
/// at MTU 4096, 128 in flight) at 1 % loss: deep queues of descriptors, so a NAK's
/// FLUSH drops many packets the segmenter had not sent yet. The engine, which hands
/// out whole messages, cannot tell those from packets that went out; counted there,
/// the counter read 2.3 times the wire's resends (here seed 1: 6,467 against 2,827).
///
/// The same runs hold Go-Back-N's rewind: a NAK's first resend leaves the requester
/// within two 4 KiB frames' time on the wire (the capture stamps a received NAK at its
/// last bit and a sent frame at its first): the rest of the frame on the wire when the
/// NAK arrived, and the one frame the port queue in front of the fast path held. A NAK
/// episode resends about a round trip's packets. Before the
/// fast path stood in front of a one-frame port queue (BENCHMARKS.md, "Go-Back-N's
/// rewind with the fast path"), the stale frames queued ahead of the resend took
/// 12.04 us and an episode resent 50 packets; the firmware alone takes 0 us and 15.
#[test]
fn with_the_fast_path_the_resend_counter_is_the_wires() {
    let mut resent = 0;
    // The longest 4 KiB WRITE frame (4,096 B of payload; Ethernet, IPv4, UDP, BTH and
    // RETH headers, 78 B; ICRC; FCS, preamble and IFG) takes 336 ns at 100 Gb/s.
    let one_frame_ns = ((4096 + 78 + 4 + 4 + 20) * 8u64).div_ceil(100);
    for seed in 1..=3u64 {
        let p = Params {
            mtu: Mtu::Mtu4096,
            tx_depth: 128,
            ..params(Test::WriteBw, 65536, 300)
        };
        let (r, [client, server], pcap) = run_captured(&p, true, 0.01, seed, 0);
        let times = pcap_times_ns(&pcap);
        let (mut naks, mut nak_resent) = (0u64, 0u64);
        for c in &r.connections {
            let req = c.a_to_b.requests.as_ref().expect("requests");
            for e in &req.events.go_back_n {
                let Cause::Nak { cause_frame } = e.cause else {
                    continue;
                };
                let rewind = times[e.frame as usize - 1] - times[cause_frame as usize - 1];
                assert!(
                    rewind <= 2 * one_frame_ns,
                    "seed {seed}: NAK frame {cause_frame} to its first resend (frame {}): {rewind} ns",
                    e.frame
                );
                naks += 1;
                nak_resent += e.resent;
            }
        }
        assert!(naks > 20, "seed {seed}: {naks} NAK episodes");
        assert!(
            nak_resent <= 20 * naks,
            "seed {seed}: {nak_resent} resent in {naks} NAK episodes"
        );
        let what = format!("seed {seed}");
        let fp = client.runtime.fastpath;
        assert!(fp.tx_frames > 0 && fp.tx_resent > 0, "{what}: {fp:?}");
        let wire: u64 = r
            .connections
            .iter()
            .map(|c| c.a_to_b.requests.as_ref().expect("requests").resent)
            .sum();
        assert_eq!(client.engine.retransmitted_pkts, wire, "{what}");
        assert_eq!(server.engine.retransmitted_pkts, 0, "{what}");
        resent += wire;
    }
    assert!(resent > 100, "{resent} resent: the runs lost too little");
}

#[test]
fn the_responders_capture_shows_the_gap_behind_every_nak() {
    for seed in 1..=3 {
        let p = params(Test::WriteBw, 10_000, 150);
        let (r, _) = run(&p, 0.02, seed, 1);
        let req = r.connections[0].a_to_b.requests.as_ref().unwrap();
        let g = &req.psn_gaps;
        // The server's capture holds the requests that reached it: each NAK it sent
        // names the first PSN of a gap there.
        assert_eq!(g.nak_only, 0, "seed {seed}: {g:?}");
        let naks = req.naks.psn_sequence_error + req.naks.psn_sequence_error_ignored;
        assert_eq!(g.reported_by_nak, naks, "seed {seed}");
        assert!(g.in_capture >= g.reported_by_nak && g.missing_psns >= g.in_capture);
        // Each episode names its first resend and the NAK before it.
        for e in &req.events.go_back_n {
            let v = serde_json::to_value(e).unwrap();
            if v["cause"] == "nak" {
                assert!(v["frame"].as_u64() > v["cause_frame"].as_u64(), "{v}");
            }
        }
    }
}

#[test]
fn ack_latency_of_a_lossless_ping_pong_is_the_wire_round_trip() {
    // write_lat, 2-byte WRITEs, 2 us links at 100 Gb/s, seen at the client: a WRITE takes
    // 9 ns to send (78 bytes + 24 of preamble, IFG and FCS, rounded up), 2 us to
    // propagate; its ACK 7 ns (62 + 24 bytes) and 2 us back. The server sends the ACK
    // the moment the WRITE has arrived.
    let mut p = params(Test::WriteLat, 2, 100);
    p.mtu = Mtu::Mtu4096;
    let (r, _) = run(&p, 0.0, 1, 0);
    let c = &r.connections[0];
    let lat = c.a_to_b.requests.as_ref().unwrap().ack_latency.unwrap();
    assert_eq!(lat.samples, 100);
    assert_eq!((lat.min_us, lat.p50_us, lat.max_us), (4.016, 4.016, 4.016));
    let zero = |d: &analyze::report::Direction| d.requests.as_ref().unwrap().resent;
    assert_eq!((zero(&c.a_to_b), zero(c.b_to_a.as_ref().unwrap())), (0, 0));
}

/// A shipped `roce sim` incast, its flows posting for 1 ms in a 3 ms run (so everything
/// has settled by the end), captured at `host`.
fn incast(name: &str, host: &str) -> roce_cli::scenario::fabric::FabricResult {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../scenarios/{name}.toml"));
    let mut s = roce_cli::scenario::Scenario::load(&path).unwrap();
    let f = s.fabric.as_mut().unwrap();
    f.duration = "3ms".into();
    f.measure_from = "0".into();
    f.runs = 1;
    f.pcap = vec![host.into()];
    for flow in &mut f.flows {
        flow.stop = Some("1ms".into());
    }
    match roce_cli::scenario::run(&s, &ProgressBar::hidden()).unwrap() {
        roce_cli::scenario::Outcome::Fabric(r) => r,
        _ => unreachable!("a fabric scenario"),
    }
}

fn analyse(pcap: &[u8]) -> Report {
    let mut reader = roce_capture::Reader::new(pcap).unwrap();
    let (mut a, end) = analyze::run(&mut reader, analyze::Options::default());
    end.expect("no corrupt record");
    a.finish()
}

#[test]
fn pfc_pauses_of_a_sim_incast_are_those_the_hosts_mac_took() {
    // scenarios/incast_pfc.toml (8:1 through one switch with PFC on priority 3),
    // captured at sender s1: the switch's pause frames reach it, and its MAC counts each
    // XOFF and XON and the time its priority 3 stood paused. The analysis works the same
    // out of the capture alone.
    let r = incast("incast_pfc", "s1");
    let c = &r.captures[0];
    assert_eq!(c.host, "s1");
    let report = analyse(&c.pcap);
    assert_eq!(report.pfc.len(), 1, "{:?}", report.pfc);
    let p = &report.pfc[0];
    assert_eq!(p.priority, 3);
    assert!(p.xoff > 10, "{p:?}");
    assert_eq!((p.xoff, p.xon), (c.port.xoff_rx[3], c.port.xon_rx[3]));
    assert_eq!(report.pfc_frames, c.port.pause_frames_rx);
    // To the nanosecond, but for rounding of quanta to nanoseconds per pause.
    let paused_ns = (p.paused_us * 1e3).round() as u64;
    let want = c.port.paused_ns[3];
    assert!(
        paused_ns.abs_diff(want) <= p.xoff,
        "{paused_ns} ns vs the MAC's {want}"
    );
    // Nothing was lost: no resends, and s1's one connection is paired.
    assert_eq!(report.connections.len(), 1);
    let req = report.connections[0].a_to_b.requests.as_ref().unwrap();
    assert_eq!((req.resent, req.go_back_n.episodes), (0, 0));
}

#[test]
fn ecn_marks_and_cnps_of_a_dcqcn_incast_are_those_the_fabric_counted() {
    // scenarios/incast_dcqcn.toml captured at the receiver r: every packet the switch
    // marked CE reaches r (nothing is dropped), and every CNP is r's.
    let r = incast("incast_dcqcn", "r");
    let report = analyse(&r.captures[0].pcap);
    assert_eq!(report.connections.len(), 8);
    let (mut ce, mut cnps) = (0, 0);
    for c in &report.connections {
        // The senders are the A ends: their WRITEs reach r marked, r's CNPs go back.
        assert!(c.a.ip != "10.0.0.1" && c.b.ip == "10.0.0.1", "{c:?}");
        ce += c.a_to_b.ecn_ce;
        cnps += c.b_to_a.as_ref().unwrap().cnps;
        assert!(c.b_to_a.as_ref().unwrap().cnp_peak_per_s > 0.0);
    }
    assert!(ce > 100 && cnps > 10, "{ce} marks, {cnps} CNPs");
    assert_eq!(ce, r.summary.ecn_marked);
    assert_eq!(cnps, r.summary.cnps);
}

/// `pcap` with every record cut to `snap` bytes, as `tcpdump -s SNAP` writes it.
fn snapped(pcap: &[u8], snap: usize) -> Vec<u8> {
    let mut out = pcap[..24].to_vec();
    let mut at = 24;
    while at < pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let keep = caplen.min(snap);
        out.extend_from_slice(&pcap[at..at + 8]);
        out.extend_from_slice(&(keep as u32).to_le_bytes());
        out.extend_from_slice(&pcap[at + 12..at + 16]);
        out.extend_from_slice(&pcap[at + 16..at + 16 + keep]);
        at += 16 + caplen;
    }
    out
}

#[test]
fn a_headers_only_capture_gives_the_same_analysis() {
    let p = params(Test::WriteBw, 10_000, 100);
    let link = LinkConfig::new(G100, 2_000).with_faults(Faults {
        loss: 0.02,
        ..Faults::default()
    });
    let nics = perf::nics(&p, Datapath::Software, false).unwrap();
    let mut sim = Sim::back_to_back(nics, link, 7).unwrap();
    let capture = MemoryCapture::new();
    let tap = sim.fabric.tap_end(sim.link, 0, capture.clone()).unwrap();
    perf::run(&mut sim, &p, &ProgressBar::hidden()).unwrap();
    sim.fabric.close_tap(tap).unwrap();
    let whole = analyse(&capture.bytes());
    // Ethernet, IPv4, UDP, BTH and RETH: 74 bytes.
    let heads = analyse(&snapped(&capture.bytes(), 74));
    // Every frame but the ACKs (62 bytes) lost its payload.
    let acks: u64 = whole.connections[0].b_to_a.as_ref().unwrap().packets;
    assert_eq!(heads.snapped_frames + acks, heads.roce_frames);
    assert!(heads.snapped_frames > 1000);
    assert_eq!(whole.snapped_frames, 0);
    let json = |r: &Report| serde_json::to_value(&r.connections).unwrap();
    assert_eq!(json(&heads), json(&whole));
    assert!(
        whole.connections[0]
            .a_to_b
            .requests
            .as_ref()
            .unwrap()
            .resent
            > 0
    );
}

#[test]
fn a_hardware_capture_from_a_hisilicon_nic() {
    // tests/data/vectors/real/oferby_proxy_roce.pcap: two QPs of a HiSilicon hns NIC
    // sending each other SENDs (its README, from tshark: SEND FIRST x33, SEND LAST with
    // immediate x33, SEND ONLY with immediate x2, ACK x37; QPs 0x45 and 0x48; 18 frames
    // of TCP, ARP and ICMPv6).
    let pcap = roce_tests::vectors().join("real/oferby_proxy_roce.pcap");
    let r = analyse(&std::fs::read(pcap).unwrap());
    assert_eq!((r.frames, r.roce_frames, r.other_frames), (123, 105, 18));
    assert_eq!(r.connections.len(), 1);
    let c = &r.connections[0];
    let qpns = [c.a.qpn.unwrap(), c.b.qpn.unwrap()];
    assert!(qpns == [0x45, 0x48] || qpns == [0x48, 0x45], "{qpns:x?}");
    let mut count = std::collections::BTreeMap::new();
    for d in std::iter::once(&c.a_to_b).chain(c.b_to_a.as_ref()) {
        for (name, n) in &d.opcodes {
            *count.entry(*name).or_insert(0) += n.packets;
        }
        let req = d.requests.as_ref().unwrap();
        assert_eq!((req.resent, req.naks.psn_sequence_error), (0, 0));
        assert!(req.ack_latency.unwrap().samples > 0);
        assert_eq!(d.unmatched_responses, 0);
    }
    let want = [
        ("RC_ACKNOWLEDGE", 37),
        ("RC_SEND_FIRST", 33),
        ("RC_SEND_LAST_WITH_IMMEDIATE", 33),
        ("RC_SEND_ONLY_WITH_IMMEDIATE", 2),
    ];
    assert_eq!(count, want.into_iter().collect());
}

/// A capture of `tests/data/captures/rxe-loss/`, analysed.
fn rxe_loss(name: &str) -> Report {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/captures/rxe-loss")
        .join(name);
    analyse(&std::fs::read(path).unwrap())
}

#[test]
fn rxes_resends_under_loss_are_those_rxe_and_our_responder_counted() {
    // Linux rxe as the requester against our NIC, 1 % of our frames lost past the
    // capture point (SOURCE.md has the counters of both sides). Headers only.
    let w = rxe_loss("loss-server-write_bw-65536.pcapng");
    assert_eq!((w.frames, w.snapped_frames), (6632, 6529));
    assert_eq!(w.connections.len(), 1);
    let c = &w.connections[0];
    assert_eq!(c.a.ip, "10.77.0.2", "rxe's VM requests");
    let req = c.a_to_b.requests.as_ref().unwrap();
    // rxe sent 6529 WRITE packets for 100 x 64: 129 again, each a duplicate at our
    // responder; one retry (rxe's completer_retry_err), its ACK timeout.
    assert_eq!(req.resent, 6529 - 100 * 64);
    assert_eq!(req.duplicates, 129);
    assert_eq!(req.go_back_n.episodes, 1);
    assert_eq!((req.timeouts, req.naks.psn_sequence_error), (1, 0));

    let r = rxe_loss("loss-server-read_bw-4096.pcap");
    assert_eq!(r.connections.len(), 1);
    let req = r.connections[0].a_to_b.requests.as_ref().unwrap();
    // 1809 READ requests (rxe's sent_pkts, tshark's count) for 1000 READs: 809 again,
    // in 53 retries (rxe's completer_retry_err); our responder saw 793 of them as
    // duplicates, 15 out of sequence and NAKed the one it had missed.
    assert_eq!(req.packets, 1809);
    assert_eq!(req.resent, 1809 - 1000);
    assert_eq!(req.resent, 793 + 15 + 1);
    assert_eq!(req.go_back_n.episodes, 53);
    assert_eq!(req.naks.psn_sequence_error, 1);
    let back = r.connections[0].b_to_a.as_ref().unwrap();
    assert_eq!(back.unmatched_responses, 0);
    assert!(req.ack_latency.unwrap().samples > 900);
}

/// RNR: the client SENDs before the server has posted a receive. The server answers each
/// try with an RNR NAK that asks for its minimum RNR timer (code 3, 0.03 ms: roce-facts
/// §4.2's table), the client waits that long and tries again, until receives are posted
/// at 0.2 ms. Captured at the client: the RNR NAKs are those both engines counted, and
/// each wait, from the NAK to the resend, is the 30 us the NAK asked for.
#[test]
fn rnr_naks_and_the_waits_they_caused() {
    use roce_core::transport::{RecvWr, SendFlags, SendWr, WrOp};
    use roce_host::ConnectOptions;
    let p = params(Test::SendBw, 64, 1);
    let nics = perf::nics(&p, Datapath::Software, false).unwrap();
    let mut sim = Sim::back_to_back(nics, LinkConfig::new(G100, 2_000), 1).unwrap();
    let capture = MemoryCapture::new();
    let tap = sim.fabric.tap_end(sim.link, 0, capture.clone()).unwrap();
    let side = |ctx: &roce_host::Context| {
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16).unwrap();
        let mr = pd
            .reg_mr(4096, roce_core::memory::AccessFlags::LOCAL_WRITE)
            .unwrap();
        (pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap(), cq, mr)
    };
    let [ca, cb] = sim.contexts();
    let ((qa, cqa, mra), (qb, _cqb, mrb)) = (side(ca), side(cb));
    let opts = ConnectOptions {
        min_rnr_timer: 3,
        rnr_retry: 7,
        ..ConnectOptions::default()
    };
    roce_testbed::traffic::connect_pair(&qa, &qb, 0, &opts).unwrap();
    for id in 0..2 {
        let wr = SendWr::new(id, WrOp::Send)
            .sge(mra.addr() + 64 * id, 64, mra.lkey())
            .flags(SendFlags::SIGNALED);
        qa.post_send(&wr).unwrap();
    }
    sim.kick(0);
    while sim.now() < 200_000 {
        assert!(sim.advance());
    }
    for id in 0..2 {
        qb.post_recv(&RecvWr::new(id).sge(mrb.addr() + 64 * id, 64, mrb.lkey()))
            .unwrap();
    }
    sim.kick(1);
    let mut done = 0;
    let mut wcs = [roce_core::transport::WorkCompletion::default(); 4];
    while done < 2 {
        assert!(
            sim.advance() && sim.now() < 1_000_000,
            "the SENDs never completed"
        );
        done += cqa.poll(&mut wcs).unwrap().len();
    }
    sim.fabric.close_tap(tap).unwrap();
    let [client, server] = sim.contexts().map(|c| c.query_counters().unwrap().engine);
    let r = analyse(&capture.bytes());
    let q = r.connections[0].a_to_b.requests.as_ref().unwrap();
    // Six or seven tries in 0.2 ms, each answered by an RNR NAK.
    assert!(client.rcvd_rnr_err >= 5, "{}", client.rcvd_rnr_err);
    assert_eq!(q.rnr_naks, client.rcvd_rnr_err);
    assert_eq!(q.rnr_naks, server.send_rnr_err);
    assert_eq!(q.go_back_n.after_rnr_nak, client.rcvd_rnr_err);
    assert_eq!(q.events.rnr_waits.len() as u64, client.rcvd_rnr_err);
    for w in &q.events.rnr_waits {
        assert_eq!(w.timer_us, 30.0, "{w:?}");
        assert!((30.0..30.1).contains(&w.waited_us), "{w:?}");
    }
}
