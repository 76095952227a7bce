//! Arbitrary JSON into `roce encode` (issue 17): one input is one line of its input, read
//! by `roce_capture::json::read::frame_from_line` (what `roce encode` runs per line).
//! Seeds are packet objects of the shared vectors, with and without their derived
//! fields; `dicts/encode.dict` gives libFuzzer the field names.
//!
//! Invariant (`packet-json.md`), for a line that is a JSON object:
//! * either encode refuses it with an error that names the field (its dotted path, as
//!   `bth.opcode` or `missing field ip.version`);
//! * or it builds a frame that `roce decode` reads back as the same object: every field
//!   the input gave has the same value in the decoded packet (MAC and IP addresses and
//!   hex compared as values, so `AA:..` and `aa:..` agree; keys the decoded object
//!   has no place for are ignored, as encode ignores them), and encoding the decoded
//!   line gives the same bytes again. When decode refuses the frame, the error must be
//!   one the input asked for: a derived field given on purpose (lengths, checksums,
//!   ICRC, pad) or a field whose value the decoder refuses (TVer, UDP port, ...).

#![no_main]

use libfuzzer_sys::fuzz_target;
use roce_capture::decode::{Decoded, Failure};
use roce_capture::json::read::frame_from_line;
use roce_capture::json::write::line;
use roce_core::wire;
use serde_json::Value;
use std::net::IpAddr;

/// Every field of a packet object (`packet-json.md`), as the last part of its path.
#[rustfmt::skip]
const FIELDS: &[&str] = &[
    "packet", "eth", "dst", "src", "ethertype", "vlan", "pcp", "dei", "vid", "ip", "grh",
    "version", "dscp", "ecn", "total_length", "id", "df", "mf", "frag_offset", "ttl",
    "protocol", "header_checksum", "flow_label", "payload_length", "next_header",
    "hop_limit", "udp", "sport", "dport", "length", "checksum", "bth", "opcode",
    "opcode_name", "se", "migreq", "padcnt", "tver", "pkey", "fecn", "becn", "resv6",
    "destqp", "ackreq", "resv7", "psn", "reth", "va", "rkey", "dmalen", "aeth",
    "syndrome", "msn", "atomiceth", "swap_add", "compare", "atomicacketh",
    "orig_rem_data", "immdt", "imm", "ieth", "deth", "qkey", "srcqp", "cnp",
    "reserved_hex", "payload_len", "payload_hex", "pad_hex", "icrc", "icrc_wire_hex",
    "eth_trailer_hex",
];

/// Whether an error message names a field: a dotted path of known fields, standing
/// alone (not inside another word).
fn names_a_field(msg: &str) -> bool {
    msg.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .any(|word| !word.is_empty() && word.split('.').all(|part| FIELDS.contains(&part)))
}

/// The decode line of `frame`, as `roce decode --json` writes it.
fn decode(frame: &[u8]) -> Value {
    let mut out = Vec::new();
    let result = wire::parse(frame)
        .map(|p| Decoded::from_packet(&p))
        .map_err(Failure::from);
    line(&mut out, 1, &result);
    serde_json::from_slice(&out).expect("decode writes JSON")
}

/// The input fields whose presence can explain decode refusing the frame, per error.
fn excuses(error: &str) -> &'static [&'static str] {
    match error {
        "bad_ipv4_checksum" => &["ip.header_checksum"],
        "length_mismatch" | "truncated_frame" | "truncated_bth" | "truncated_ext_header" => &[
            "ip.total_length",
            "ip.payload_length",
            "grh.payload_length",
            "udp.length",
            "pad_hex",
        ],
        // A length that disagrees with the bytes given (a pad longer than `padcnt`
        // under a given `total_length`, say) moves where decode looks for the ICRC.
        "icrc_mismatch" => &[
            "icrc",
            "icrc_wire_hex",
            "ip.total_length",
            "ip.payload_length",
            "grh.payload_length",
            "udp.length",
            "pad_hex",
        ],
        "pad_exceeds_payload" | "unaligned_length" => &["bth.padcnt", "pad_hex"],
        "unsupported_ethertype" | "bad_ip_version" => &["eth.ethertype"],
        "unsupported_tver" => &["bth.tver"],
        "not_roce_udp_port" => &["udp.dport"],
        "not_udp" => &["ip.protocol", "ip.next_header", "grh.next_header"],
        "ip_fragment" => &["ip.mf", "ip.frag_offset"],
        "unknown_opcode" => &["bth.opcode"],
        _ => &[],
    }
}

/// The value at a dotted path, if given (null counts as not given).
fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .filter(|v| !v.is_null())
}

/// Whether two values of field `key` are the same value.
fn same(key: &str, a: &Value, b: &Value) -> bool {
    match (key, a, b) {
        (_, Value::Bool(x), Value::Number(n)) | (_, Value::Number(n), Value::Bool(x)) => {
            n.as_u64() == Some(u64::from(*x))
        }
        ("dst" | "src", Value::String(x), Value::String(y)) => {
            // Six bytes of one or two hex digits, `:` or `-` between them.
            let mac = |s: &str| -> Option<Vec<u8>> {
                let bytes: Vec<u8> = s
                    .split([':', '-'])
                    .map(|p| {
                        (p.len() <= 2)
                            .then(|| u8::from_str_radix(p, 16).ok())
                            .flatten()
                    })
                    .collect::<Option<_>>()?;
                (bytes.len() == 6).then_some(bytes)
            };
            let ip = |s: &str| s.parse::<IpAddr>().ok();
            (mac(x).is_some() && mac(x) == mac(y)) || (ip(x).is_some() && ip(x) == ip(y))
        }
        (_, Value::String(x), Value::String(y)) => {
            let hex = |s: &str| s.trim_start_matches("0x").to_ascii_lowercase();
            x == y || hex(x) == hex(y)
        }
        _ => a == b,
    }
}

/// Paths of `input`'s fields whose values `output` does not have. A key the decoded
/// object has no place for (unknown, or a field of another header kind, such as
/// `ip.flow_label` on IPv4) is skipped: encode ignores such keys rather than refusing
/// them (see `docs/reliability.md`); a null counts as not given.
fn differences(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    let Value::Object(map) = input else { return };
    for (k, v) in map {
        let p = if path.is_empty() {
            k.clone()
        } else {
            format!("{path}.{k}")
        };
        match (v, output.get(k)) {
            // A field given as null is one left out (encode's reader takes it so), and
            // a field left out is not compared.
            (_, None) | (Value::Null, _) => {}
            (Value::Object(_), Some(o)) if o.is_object() => differences(v, o, &p, out),
            (v, Some(o)) if same(k, v, o) => {}
            _ => out.push(p),
        }
    }
}

/// The derived fields (`packet-json.md`): encode computes them when left out and writes
/// them as given otherwise, so that deliberately broken frames can be made.
const DERIVED: &[&str] = &[
    "eth.ethertype",
    "ip.total_length",
    "ip.payload_length",
    "ip.header_checksum",
    "udp.length",
    "bth.opcode_name",
    "bth.padcnt",
    "pad_hex",
    "payload_len",
    "icrc",
    "icrc_wire_hex",
];

/// Whether every derived field `input` gives has the value encode derives without it: if
/// not, the object describes a frame broken on purpose (a pad count that disagrees with
/// the pad, say), which decode reads its own way, and only decode-then-encode is checked.
fn derived_as_encode_derives(input: &Value) -> bool {
    let mut bare = input.clone();
    for path in DERIVED {
        let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
        let obj = if parent.is_empty() {
            Some(&mut bare)
        } else {
            bare.get_mut(parent)
        };
        if let Some(Value::Object(o)) = obj {
            o.remove(key);
        }
    }
    let Ok(Some(frame)) = frame_from_line(&bare.to_string()) else {
        return false;
    };
    let canonical = decode(&frame);
    DERIVED.iter().all(|path| match at(input, path) {
        None => true,
        Some(v) => at(&canonical["packet"], path)
            .is_some_and(|d| same(path.rsplit('.').next().unwrap_or(path), v, d)),
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains('\n') {
        return;
    }
    let Ok(json) = serde_json::from_str::<Value>(text) else {
        // Not JSON: an error is all encode can say.
        let _ = frame_from_line(text);
        return;
    };
    let result = frame_from_line(text);
    let input = json.get("packet").unwrap_or(&json);
    match result {
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(
                !input.is_object() || names_a_field(&msg),
                "the error does not name the field: {msg}"
            );
        }
        Ok(None) => {}
        Ok(Some(frame)) => {
            let decoded = decode(&frame);
            if decoded["ok"] == Value::Bool(false) {
                let error = decoded["error"].as_str().unwrap_or("");
                assert!(
                    excuses(error).iter().any(|p| at(input, p).is_some()),
                    "encode built a frame that decode refuses ({error}: {}), from an \
                     object that asked for nothing of the kind",
                    decoded["detail"]
                );
                return;
            }
            if derived_as_encode_derives(input) {
                let mut diff = Vec::new();
                differences(input, &decoded["packet"], "", &mut diff);
                assert!(
                    diff.is_empty(),
                    "decode reads back other values for {diff:?}: {}",
                    decoded["packet"]
                );
            }
            let again = frame_from_line(&decoded.to_string())
                .expect("a decode line encodes")
                .expect("a frame");
            assert_eq!(again, frame, "decode, then encode, changed the frame");
        }
    }
});
