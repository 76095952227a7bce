//! Directed tests: the scapy-made vectors (tests/data/valid.jsonl,
//! invalid.jsonl, copied from shared/vectors) and real captures
//! (tests/data/real), at 64 and 512 bits, back to back and with random idle
//! cycles and back-pressure. Expected values come from the vector files only.

mod common;

use common::{load_jsonl, packet_json, read_pcap, rx_checked, subset_diff, unhex};
use roce_hdl_sim::{DataWidth, RxVerdict, Shaping};
use serde_json::Value;

const SHAPED: Shaping = Shaping {
    idle: 0.3,
    backpressure: 0.3,
    seed: 0x5eed,
};

fn valid(test: &str, width: DataWidth, shaping: Shaping) {
    let vecs = load_jsonl("valid.jsonl");
    let frames: Vec<Vec<u8>> = vecs
        .iter()
        .map(|v| unhex(v["hex"].as_str().unwrap()))
        .collect();
    let n = rx_checked(test, width, shaping, &frames, |verdicts: &[RxVerdict]| {
        let mut problems = Vec::new();
        for ((v, frame), verdict) in vecs.iter().zip(&frames).zip(verdicts) {
            let id = v["id"].as_str().unwrap();
            if let Some(e) = verdict.error() {
                problems.push(format!("{id}: RTL says {e}, expected a good frame"));
                continue;
            }
            let mut d = Vec::new();
            subset_diff(&v["expected"], &packet_json(verdict, frame), "", &mut d);
            if verdict.payload.len() != verdict.meta.payload_len as usize {
                d.push(format!(
                    "payload stream carried {} bytes, metadata says {}",
                    verdict.payload.len(),
                    verdict.meta.payload_len
                ));
            }
            problems.extend(d.into_iter().map(|p| format!("{id}: {p}")));
        }
        problems
    });
    if let Some(n) = n {
        assert_eq!(n, 366);
        eprintln!("{test}: {n} valid vectors match at {width}");
    }
}

fn invalid(test: &str, width: DataWidth, shaping: Shaping) {
    let vecs = load_jsonl("invalid.jsonl");
    let frames: Vec<Vec<u8>> = vecs
        .iter()
        .map(|v| unhex(v["hex"].as_str().unwrap()))
        .collect();
    let n = rx_checked(test, width, shaping, &frames, |verdicts: &[RxVerdict]| {
        let mut problems = Vec::new();
        for (v, verdict) in vecs.iter().zip(verdicts) {
            let id = v["id"].as_str().unwrap();
            let want = v["expected_error"].as_str().unwrap();
            let alt: Vec<&str> = v
                .get("alt_errors")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let got = verdict.error().map(|e| e.name()).unwrap_or("ok");
            if got != want && !alt.contains(&got) {
                problems.push(format!(
                    "{id}: expected {want} (or {alt:?}), RTL says {got}"
                ));
            }
        }
        problems
    });
    if let Some(n) = n {
        assert_eq!(n, 82);
        eprintln!("{test}: {n} invalid vectors give the expected error at {width}");
    }
}

#[test]
fn valid_vectors_64_back_to_back() {
    valid(
        "valid_vectors_64_back_to_back",
        DataWidth::W64,
        Shaping::LINE_RATE,
    );
}

#[test]
fn valid_vectors_512_back_to_back() {
    valid(
        "valid_vectors_512_back_to_back",
        DataWidth::W512,
        Shaping::LINE_RATE,
    );
}

#[test]
fn valid_vectors_64_idle_and_backpressure() {
    valid(
        "valid_vectors_64_idle_and_backpressure",
        DataWidth::W64,
        SHAPED,
    );
}

#[test]
fn valid_vectors_512_idle_and_backpressure() {
    valid(
        "valid_vectors_512_idle_and_backpressure",
        DataWidth::W512,
        SHAPED,
    );
}

#[test]
fn invalid_vectors_64_back_to_back() {
    invalid(
        "invalid_vectors_64_back_to_back",
        DataWidth::W64,
        Shaping::LINE_RATE,
    );
}

#[test]
fn invalid_vectors_512_back_to_back() {
    invalid(
        "invalid_vectors_512_back_to_back",
        DataWidth::W512,
        Shaping::LINE_RATE,
    );
}

#[test]
fn invalid_vectors_64_idle_and_backpressure() {
    invalid(
        "invalid_vectors_64_idle_and_backpressure",
        DataWidth::W64,
        SHAPED,
    );
}

#[test]
fn invalid_vectors_512_idle_and_backpressure() {
    invalid(
        "invalid_vectors_512_idle_and_backpressure",
        DataWidth::W512,
        SHAPED,
    );
}

/// Real captures (a HiSilicon-looking hns NIC, a ConnectX-4 Lx CNP, a
/// PcapPlusPlus READ request, scapy's UC vector): every RoCE frame decodes
/// to the fields tshark/scapy saw; every non-RoCE frame is rejected.
fn real(test: &str, width: DataWidth, shaping: Shaping) {
    let mut total = 0;
    for stem in [
        "oferby_proxy_roce",
        "pcapplusplus_fork_InfiniBandPacket_dat",
        "scapy_roce_uts_connectx4lx_cnp",
        "scapy_roce_uts_uc_send_only_reconstructed",
    ] {
        let frames = read_pcap(&common::data_dir().join("real").join(format!("{stem}.pcap")));
        let exp = load_jsonl(&format!("real/{stem}.expected.jsonl"));
        assert_eq!(frames.len(), exp.len(), "{stem}: frame count");
        let n = rx_checked(
            &format!("{test}-{stem}"),
            width,
            shaping,
            &frames,
            |verdicts: &[RxVerdict]| {
                let mut problems = Vec::new();
                for ((e, frame), verdict) in exp.iter().zip(&frames).zip(verdicts) {
                    let id = e["id"].as_str().unwrap();
                    if e["valid"].as_bool().unwrap() {
                        if let Some(err) = verdict.error() {
                            problems.push(format!("{stem} {id}: RTL says {err}"));
                            continue;
                        }
                        let mut d = Vec::new();
                        subset_diff(&e["expected"], &packet_json(verdict, frame), "", &mut d);
                        problems.extend(d.into_iter().map(|p| format!("{stem} {id}: {p}")));
                    } else if verdict.is_ok() {
                        problems.push(format!("{stem} {id}: not RoCE, RTL accepted it"));
                    }
                }
                problems
            },
        );
        total += n.unwrap_or(0);
    }
    if total > 0 {
        assert_eq!(total, 126);
        eprintln!("{test}: {total} captured frames as expected at {width}");
    }
}

#[test]
fn real_captures_64() {
    real("real_captures_64", DataWidth::W64, SHAPED);
}

#[test]
fn real_captures_512() {
    real("real_captures_512", DataWidth::W512, Shaping::LINE_RATE);
}
