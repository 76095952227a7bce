//! TX: frames built without the ICRC go through tx_icrc_insert; what comes
//! out must be the vector frame byte for byte (ICRC made by scapy), at 64
//! and 512 bits, back to back and with idle cycles and back-pressure.

mod common;

use common::{load_jsonl, read_pcap, unhex};
use roce_hdl_sim::{DataWidth, Shaping};

/// (id, frame without ICRC, expected frame with ICRC); Ethernet trailers
/// are not part of what the firmware builds, so they are cut.
fn cases() -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for v in load_jsonl("valid.jsonl") {
        let frame = unhex(v["hex"].as_str().unwrap());
        let trailer = v["expected"]["eth_trailer_hex"].as_str().unwrap().len() / 2;
        let end = frame.len() - trailer;
        out.push((
            v["id"].as_str().unwrap().to_string(),
            frame[..end - 4].to_vec(),
            frame[..end].to_vec(),
        ));
    }
    // the real ConnectX-4 Lx CNP and scapy's UC SEND_ONLY
    for stem in [
        "scapy_roce_uts_connectx4lx_cnp",
        "scapy_roce_uts_uc_send_only_reconstructed",
    ] {
        for f in read_pcap(&common::data_dir().join("real").join(format!("{stem}.pcap"))) {
            out.push((stem.to_string(), f[..f.len() - 4].to_vec(), f));
        }
    }
    out
}

fn run(width: DataWidth, shaping: Shaping) {
    let cases = cases();
    let Some(mut dp) = common::datapath(width) else {
        return;
    };
    dp.set_shaping(shaping);
    dp.sim().record_timeline();
    let inputs: Vec<&[u8]> = cases.iter().map(|c| c.1.as_slice()).collect();
    let outputs = dp.tx_batch(&inputs).expect("tx");
    let mut bad = Vec::new();
    for ((id, _, want), got) in cases.iter().zip(&outputs) {
        if got != want {
            let n = want.len();
            bad.push(format!(
                "{id}: ICRC {} expected {}",
                common::hex(&got[got.len().saturating_sub(4)..]),
                common::hex(&want[n - 4..])
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} TX frames differ at {width}:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );

    let t = dp.sim().take_timeline();
    if shaping == Shaping::LINE_RATE {
        // the output runs one beat per cycle: the inserter only holds the
        // input for the one extra beat a frame may need
        let out_beats: usize = cases.iter().map(|c| width.beats(c.2.len())).sum();
        assert_eq!(t.tx_out.len(), out_beats);
        let span = t.tx_out.last().unwrap().0 - t.tx_out[0].0 + 1;
        assert_eq!(
            span, out_beats as u64,
            "bubbles in the TX output at {width}"
        );
        // input register, layout register, the ICRC pipeline, output slice
        assert_eq!(
            t.tx_out[0].0 - t.tx_in[0].0,
            3 + common::icrc_latency(width),
            "TX latency"
        );
    }
    eprintln!("{} TX frames match the vectors at {width}", cases.len());
}

#[test]
fn tx_icrc_matches_vectors_64() {
    run(DataWidth::W64, Shaping::LINE_RATE);
}

#[test]
fn tx_icrc_matches_vectors_512() {
    run(DataWidth::W512, Shaping::LINE_RATE);
}

#[test]
fn tx_icrc_matches_vectors_64_idle_and_backpressure() {
    run(DataWidth::W64, Shaping::random(0.3, 0.3, 77));
}

#[test]
fn tx_icrc_matches_vectors_512_idle_and_backpressure() {
    run(DataWidth::W512, Shaping::random(0.3, 0.3, 78));
}
