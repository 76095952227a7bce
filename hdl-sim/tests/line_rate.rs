//! Line rate: frames back to back with no idle cycle and outputs always
//! ready. The input must never stall, payload packets come out without a
//! bubble, and every frame's metadata record leaves a fixed number of
//! cycles after the frame's last beat:
//!
//!   metadata latency = min(beats, HDR_BEATS) + 12 + ICRC_LAT cycles after the
//!   last beat (HDR_BEATS = 128 bytes / bus bytes: 16 at 64 bits, 2 at 512
//!   bits; ICRC_LAT = 3 + log2(bus bytes), the ICRC pipeline: 6 and 9)
//!
//! so a train of N frames of B beats takes N * B + latency cycles.
//! The frames and their expected contents come from tests/data/valid.jsonl.

mod common;

use common::{icrc_latency, load_jsonl, unhex};
use roce_hdl_sim::{DataWidth, Shaping, Timeline};

/// The documented metadata latency (README.md, rtl/rx_parser.sv).
fn meta_latency(width: DataWidth, beats: usize) -> u64 {
    let hdr_beats = 128 / width.bytes();
    beats.min(hdr_beats) as u64 + 12 + icrc_latency(width)
}

fn vector(id: &str) -> (Vec<u8>, usize) {
    let v = load_jsonl("valid.jsonl")
        .into_iter()
        .find(|v| v["id"] == id)
        .expect("vector id");
    (
        unhex(v["hex"].as_str().unwrap()),
        v["expected"]["payload_len"].as_u64().unwrap() as usize,
    )
}

/// Streams `n` copies of `frame`; returns the timeline after checking the
/// verdicts against the vector.
fn train(width: DataWidth, frame: &[u8], payload_len: usize, n: usize) -> Option<Timeline> {
    let mut dp = common::datapath(width)?;
    dp.set_shaping(Shaping::LINE_RATE);
    dp.sim().record_timeline();
    let frames: Vec<&[u8]> = (0..n).map(|_| frame).collect();
    let verdicts = dp.rx_batch(&frames).expect("rx");
    for v in &verdicts {
        assert!(v.is_ok(), "{:?}", v.error());
        assert_eq!(v.payload.len(), payload_len);
        assert_eq!(
            v.payload[..],
            frame[v.meta.payload_offset as usize..][..payload_len]
        );
    }
    // let the last payload/metadata drain into the timeline
    dp.sim().run(50);
    Some(dp.sim().take_timeline())
}

fn check_train(width: DataWidth, id: &str, n: usize) {
    let (frame, payload_len) = vector(id);
    let Some(t) = train(width, &frame, payload_len, n) else {
        return;
    };
    let beats = width.beats(frame.len());
    let lat = meta_latency(width, beats);

    // input: one beat every cycle, never stalled
    assert_eq!(t.rx_in_stalls, 0, "{id} at {width}: input stalled");
    assert_eq!(t.rx_in.len(), n * beats);
    let c0 = t.rx_in[0].0;
    for (i, &(c, _)) in t.rx_in.iter().enumerate() {
        assert_eq!(
            c,
            c0 + i as u64,
            "{id} at {width}: input beat {i} not back to back"
        );
    }

    // metadata: fixed latency after each frame's last beat
    let lasts: Vec<u64> = t.rx_in.iter().filter(|b| b.1).map(|b| b.0).collect();
    assert_eq!(t.rx_meta.len(), n);
    for (f, (&m, &l)) in t.rx_meta.iter().zip(&lasts).enumerate() {
        assert_eq!(m - l, lat, "{id} at {width}: frame {f} metadata latency");
    }
    let total = t.rx_meta[n - 1] - c0 + 1;
    assert_eq!(
        total,
        (n * beats) as u64 + lat,
        "{id} at {width}: cycles for {n} frames"
    );

    // payload: each packet on consecutive cycles, ceil(len / bus bytes) beats
    let pkt_beats = payload_len.div_ceil(width.bytes());
    assert_eq!(t.rx_payload.len(), n * pkt_beats);
    for p in t.rx_payload.chunks(pkt_beats.max(1)) {
        assert!(p.last().unwrap().1 && p[..p.len() - 1].iter().all(|b| !b.1));
        for w in p.windows(2) {
            assert_eq!(
                w[1].0,
                w[0].0 + 1,
                "{id} at {width}: bubble inside a payload packet"
            );
        }
    }
    if pkt_beats > 0 {
        // and the payload stream keeps pace with the input: a fixed lag per frame
        let first_in: Vec<u64> = t.rx_in.chunks(beats).map(|c| c[0].0).collect();
        let lags: Vec<u64> = t
            .rx_payload
            .chunks(pkt_beats)
            .zip(&first_in)
            .map(|(p, &f)| p[0].0 - f)
            .collect();
        assert!(
            lags.windows(2).all(|w| w[0] == w[1]),
            "{id} at {width}: payload lag drifts: {lags:?}"
        );
    }
    eprintln!(
        "{id} at {width}: {n} frames x {beats} beats back to back, {total} cycles, metadata {lat} cycles after the last beat"
    );
}

#[test]
fn minimum_frames_back_to_back_64() {
    check_train(DataWidth::W64, "eth_min_frame_padded_send_only_len0", 200);
}

#[test]
fn minimum_frames_back_to_back_512() {
    check_train(DataWidth::W512, "eth_min_frame_padded_send_only_len0", 200);
}

#[test]
fn small_payload_frames_back_to_back_64() {
    check_train(DataWidth::W64, "rc_send_last_v4vlan_len3", 100);
}

#[test]
fn small_payload_frames_back_to_back_512() {
    check_train(DataWidth::W512, "rc_send_last_v4vlan_len3", 100);
}

#[test]
fn four_kib_frames_back_to_back_64() {
    check_train(DataWidth::W64, "rc_rdma_write_first_v6_len4096", 16);
}

#[test]
fn four_kib_frames_back_to_back_512() {
    check_train(DataWidth::W512, "rc_rdma_write_first_v6_len4096", 32);
}

/// The whole valid corpus (60 to 4190 bytes, every opcode, VLAN, IPv6,
/// trailers) back to back: the input never stalls.
#[test]
fn mixed_corpus_never_stalls_the_input() {
    let vecs = load_jsonl("valid.jsonl");
    let frames: Vec<Vec<u8>> = vecs
        .iter()
        .map(|v| unhex(v["hex"].as_str().unwrap()))
        .collect();
    for width in DataWidth::ALL {
        let Some(mut dp) = common::datapath(width) else {
            return;
        };
        dp.sim().record_timeline();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let verdicts = dp.rx_batch(&refs).expect("rx");
        assert!(verdicts.iter().all(|v| v.is_ok()));
        let t = dp.sim().take_timeline();
        let beats: usize = frames.iter().map(|f| width.beats(f.len())).sum();
        assert_eq!(t.rx_in.len(), beats);
        assert_eq!(t.rx_in_stalls, 0, "input stalled at {width}");
        assert_eq!(t.rx_in.last().unwrap().0 - t.rx_in[0].0 + 1, beats as u64);
    }
}
