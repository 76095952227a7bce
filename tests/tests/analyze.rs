//! `roce analyze` on captures whose history is known: `roce perf` runs on the simulated
//! fabric under loss, captured as tcpdump on the requester's host would (everything it
//! sends, lost or not, and what reaches it), where the analysis must count exactly the
//! resends, NAKs, Go-Back-N retries and timeouts the requester's engine counted; the same
//! runs seen from the responder, where every NAK must report a gap the capture shows;
//! and a lossless latency test whose ACK latency the wire model gives to the nanosecond.

use roce_capture::analyze::{
    self,
    report::{Report, Requests},
};
use roce_cli::perf::{self, world, Params, Test};
use roce_cli::progress::Progress;
use roce_core::transport::{Counters, Mtu};
use roce_sim::{Faults, LinkConfig, MemoryCapture};

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
    let link = LinkConfig::new(G100, 2_000).with_faults(Faults {
        loss,
        ..Faults::default()
    });
    let mut sim = world::Sim::back_to_back(perf::nics(p, false), link, seed);
    let capture = MemoryCapture::new();
    let tap = sim.fabric.tap_end(sim.link, end, capture.clone()).unwrap();
    perf::run(&mut sim, p, &mut Progress::silent()).unwrap();
    sim.fabric.close_tap(tap).unwrap();
    let counters = world::World::nics(&sim).map(|n| n.counters());
    let bytes = capture.bytes();
    let mut reader = roce_capture::Reader::new(&bytes[..]).unwrap();
    let mut a = analyze::run(&mut reader, analyze::Options::default()).unwrap();
    (a.finish(), counters)
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
