//! `roce decode` and `roce encode` against independent truth: the scapy-made vectors and
//! real captures (compared by `compare_decode.py`), and Wireshark's dissector with an
//! independent ICRC (`check_with_tshark.py`).

use roce_tests::{
    decode_json, decode_json_with, frames_of, have, python, scratch, tally, tool, vectors,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn captures() -> Vec<(PathBuf, PathBuf)> {
    let v = vectors();
    let mut list = vec![
        (v.join("valid.pcap"), v.join("valid.jsonl")),
        (v.join("invalid.pcap"), v.join("invalid.jsonl")),
    ];
    for name in [
        "oferby_proxy_roce",
        "pcapplusplus_fork_InfiniBandPacket_dat",
        "scapy_roce_uts_connectx4lx_cnp",
        "scapy_roce_uts_uc_send_only_reconstructed",
    ] {
        let real = v.join("real");
        list.push((
            real.join(format!("{name}.pcap")),
            real.join(format!("{name}.expected.jsonl")),
        ));
    }
    list
}

/// `roce encode IN -o OUT`; the number of frames written.
fn encode(input: &Path, output: &Path) -> u64 {
    let mut writer = roce_capture::Writer::create(output).unwrap();
    let text = std::fs::read(input).unwrap();
    let done = roce_capture::encode(&text[..], "input", &mut writer).unwrap();
    writer.finish().unwrap();
    done.frames
}

#[test]
fn every_vector_and_real_capture_decodes_as_expected() {
    check_decoder(&mut roce_capture::Software, "decode");
}

/// The same comparison with the Verilated RTL RX datapath as the decoder
/// (`roce decode --datapath rtl --json`): it must pass exactly as the software does.
#[test]
fn the_rtl_datapath_decodes_every_vector_and_capture_as_expected() {
    if !roce_hdl_sim::rtl_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the RTL model is required under CI"
        );
        eprintln!("skipped: the Verilated model was not built (no Verilator)");
        return;
    }
    check_decoder(
        &mut roce_capture::rtl::Rtl::new(None).expect("the RTL datapath"),
        "decode-rtl",
    );
}

fn check_decoder(decoder: &mut impl roce_capture::Decoder, name: &str) {
    let dir = scratch(name);
    for (pcap, expected) in captures() {
        let decoded = dir.join("decoded.jsonl");
        std::fs::write(&decoded, decode_json_with(&pcap, decoder)).unwrap();
        let (ok, out) = python(&tool("compare_decode.py"), &[&decoded, &expected]);
        let lines = std::fs::read_to_string(&expected)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count();
        assert_eq!(tally(&out), Some((lines, 0)), "{}:\n{out}", pcap.display());
        assert!(ok);
    }
}

#[test]
fn decode_then_encode_reproduces_every_roce_frame() {
    let dir = scratch("roundtrip");
    for (pcap, _) in captures() {
        let decoded = dir.join("decoded.jsonl");
        let encoded = dir.join("encoded.pcap");
        std::fs::write(&decoded, decode_json(&pcap)).unwrap();
        encode(&decoded, &encoded);
        let lines: Vec<Value> = std::fs::read_to_string(&decoded)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let originals: Vec<_> = frames_of(&pcap)
            .into_iter()
            .zip(&lines)
            .filter(|(_, l)| l["ok"] == true)
            .map(|(f, _)| f)
            .collect();
        assert_eq!(frames_of(&encoded), originals, "{}", pcap.display());
    }
}

/// Leaves out every field `packet-json.md` calls derived (keeping `pad_hex` only where
/// the pad bytes are not zeros, which no rule can derive).
fn strip_derived(packet: &mut Value) {
    let p = packet.as_object_mut().unwrap();
    let pad_is_zero = p["pad_hex"].as_str().unwrap().chars().all(|c| c == '0');
    for key in ["payload_len", "icrc", "icrc_wire_hex"] {
        p.remove(key);
    }
    if pad_is_zero {
        p.remove("pad_hex");
    }
    let bth = p["bth"].as_object_mut().unwrap();
    bth.remove("opcode_name");
    bth.remove("padcnt");
    for key in ["total_length", "header_checksum", "payload_length"] {
        p.get_mut("ip")
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
    }
    p.get_mut("udp")
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("length");
}

#[test]
fn frames_encoded_from_bare_packet_objects_pass_tshark() {
    if !have("tshark") {
        return;
    }
    let dir = scratch("tshark");
    let expected = vectors().join("valid.jsonl");
    let mut bare = String::new();
    for line in std::fs::read_to_string(&expected).unwrap().lines() {
        let mut row: Value = serde_json::from_str(line).unwrap();
        let mut packet = row["expected"].take();
        strip_derived(&mut packet);
        bare.push_str(&packet.to_string());
        bare.push('\n');
    }
    let input = dir.join("bare.jsonl");
    let pcap = dir.join("bare.pcap");
    std::fs::write(&input, bare).unwrap();
    assert_eq!(encode(&input, &pcap), 366);
    let (ok, out) = python(
        &tool("check_with_tshark.py"),
        &[&pcap, Path::new("--expected"), &expected],
    );
    assert_eq!(tally(&out), Some((366, 0)), "{out}");
    assert!(ok, "{out}");
}

/// The JSON is written directly (for speed), but its bytes are those of `serde_json`:
/// compact, keys in sorted order. The interface of `packet-json.md` is byte for byte what
/// it was when `roce decode` built a `serde_json::Value` per frame.
#[test]
fn json_lines_are_serde_json_bytes() {
    for (pcap, _) in captures() {
        let out = String::from_utf8(decode_json(&pcap)).unwrap();
        let mut lines = 0;
        for line in out.lines() {
            let v: Value = serde_json::from_str(line).expect("each line is JSON");
            assert_eq!(line, v.to_string(), "{}", pcap.display());
            lines += 1;
        }
        assert_eq!(lines, frames_of(&pcap).len(), "{}", pcap.display());
    }
}
