//! Shared test helpers: vector files, pcap reading, the packet-json view of
//! an RTL verdict, and "waveform on failure".
#![allow(dead_code)]

pub mod diff;
pub mod host_mem;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use roce_firmware::hal::Datapath;
use roce_hdl_sim::{rtl_available, DataWidth, L3Kind, RtlDatapath, RxVerdict, Shaping};
use serde_json::{json, Map, Value};

/// Cycles of the ICRC pipeline, `icrc_latency` in rtl/roce_rx_pkg.sv: mask stage,
/// data fold, CRC register, one stage per bit of log2(bytes per beat).
pub fn icrc_latency(width: DataWidth) -> u64 {
    3 + u64::from(width.bytes().trailing_zeros())
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
}

pub fn load_jsonl(name: &str) -> Vec<Value> {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Frames of a classic pcap file (either byte order, micro or nanosecond).
pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => true,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => false,
        m => panic!("{}: not a pcap file (magic {m:#x})", path.display()),
    };
    let u32_at = |o: usize| {
        let a: [u8; 4] = b[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        }
    };
    assert_eq!(u32_at(20), 1, "link type must be Ethernet");
    let mut frames = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let incl = u32_at(o + 8) as usize;
        frames.push(b[o + 16..o + 16 + incl].to_vec());
        o += 16 + incl;
    }
    frames
}

/// Returns a datapath, or None (with a message) when the crate was built
/// without Verilator. Under CI=true a missing model is a failure.
pub fn datapath(width: DataWidth) -> Option<RtlDatapath> {
    if !rtl_available() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but roce-hdl-sim was built without Verilator: RTL tests cannot be skipped in CI");
        // straight to stderr: libtest does not capture it, so the skip shows
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: roce-hdl-sim was built without Verilator (see the build warning)"
        );
        return None;
    }
    Some(RtlDatapath::new(width).expect("model"))
}

/// Where failing tests leave their waveforms.
pub fn wave_path(test: &str, width: DataWidth) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("hdl-sim-waves");
    std::fs::create_dir_all(&dir).expect("waves dir");
    dir.join(format!("{test}-{}.fst", width.bits()))
}

/// Runs `frames` through the RX parser with `shaping`, hands the verdicts
/// to `check` (which returns one message per mismatch), and on any mismatch
/// runs the same stimulus again with an FST trace, then panics naming it.
pub fn rx_checked(
    test: &str,
    width: DataWidth,
    shaping: Shaping,
    frames: &[Vec<u8>],
    check: impl Fn(&[RxVerdict]) -> Vec<String>,
) -> Option<usize> {
    let mut dp = datapath(width)?;
    dp.set_shaping(shaping);
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let verdicts = dp.rx_batch(&refs).expect("rx");
    let problems = check(&verdicts);
    if problems.is_empty() {
        return Some(verdicts.len());
    }
    let wave = wave_path(test, width);
    let mut traced = RtlDatapath::with_trace(width, &wave).expect("traced model");
    traced.set_shaping(shaping);
    let _ = traced.rx_batch(&refs);
    traced.sim().close_trace();
    panic!(
        "{test} at {width}: {} mismatches (waveform: {}):\n{}",
        problems.len(),
        wave.display(),
        problems
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

pub fn opcode_name(op: u8) -> String {
    let base = match op >> 5 {
        0 => "RC_",
        1 => "UC_",
        3 => "UD_",
        _ => "",
    };
    let name = match op {
        0x81 => return "CNP".into(),
        _ => match op & 0x1f {
            0x00 => "SEND_FIRST",
            0x01 => "SEND_MIDDLE",
            0x02 => "SEND_LAST",
            0x03 => "SEND_LAST_WITH_IMMEDIATE",
            0x04 => "SEND_ONLY",
            0x05 => "SEND_ONLY_WITH_IMMEDIATE",
            0x06 => "RDMA_WRITE_FIRST",
            0x07 => "RDMA_WRITE_MIDDLE",
            0x08 => "RDMA_WRITE_LAST",
            0x09 => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            0x0a => "RDMA_WRITE_ONLY",
            0x0b => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            0x0c => "RDMA_READ_REQUEST",
            0x0d => "RDMA_READ_RESPONSE_FIRST",
            0x0e => "RDMA_READ_RESPONSE_MIDDLE",
            0x0f => "RDMA_READ_RESPONSE_LAST",
            0x10 => "RDMA_READ_RESPONSE_ONLY",
            0x11 => "ACKNOWLEDGE",
            0x12 => "ATOMIC_ACKNOWLEDGE",
            0x13 => "CMP_SWAP",
            0x14 => "FETCH_ADD",
            0x16 => "SEND_LAST_WITH_INVALIDATE",
            0x17 => "SEND_ONLY_WITH_INVALIDATE",
            _ => "UNKNOWN",
        },
    };
    format!("{base}{name}")
}

fn mac(b: &[u8; 6]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The packet-json.md object for a good verdict, built from the RTL's
/// metadata and payload stream (plus the frame, for the trailer bytes).
pub fn packet_json(v: &RxVerdict, frame: &[u8]) -> Value {
    let m = &v.meta;
    let mut o = Map::new();
    o.insert(
        "eth".into(),
        json!({
            "dst": mac(&m.eth_dst), "src": mac(&m.eth_src), "ethertype": m.ethertype,
            "vlan": m.vlan.map(|t| json!({"pcp": t.pcp, "dei": u8::from(t.dei), "vid": t.vid})),
        }),
    );
    let ip = &m.ip;
    match m.l3_kind {
        L3Kind::Ipv4 => {
            o.insert(
                "ip".into(),
                json!({
                    "version": ip.version, "dscp": ip.dscp, "ecn": ip.ecn, "total_length": ip.length,
                    "id": ip.id, "df": (ip.flags >> 1) & 1, "ttl": ip.ttl, "protocol": ip.protocol,
                    "header_checksum": ip.checksum,
                    "src": ip.src_v4().to_string(), "dst": ip.dst_v4().to_string(),
                }),
            );
        }
        L3Kind::Ipv6 | L3Kind::Grh => {
            let key = if m.l3_kind == L3Kind::Grh {
                "grh"
            } else {
                "ip"
            };
            o.insert(
                key.into(),
                json!({
                    "version": ip.version, "dscp": ip.dscp, "ecn": ip.ecn, "flow_label": ip.flow_label,
                    "payload_length": ip.length, "next_header": ip.protocol, "hop_limit": ip.ttl,
                    "src": ip.src_v6().to_string(), "dst": ip.dst_v6().to_string(),
                }),
            );
        }
        L3Kind::None => {}
    }
    if let Some(u) = m.udp {
        o.insert(
            "udp".into(),
            json!({"sport": u.sport, "dport": u.dport, "length": u.length, "checksum": u.checksum}),
        );
    }
    let b = &m.bth;
    o.insert(
        "bth".into(),
        json!({
            "opcode": b.opcode, "opcode_name": opcode_name(b.opcode), "se": u8::from(b.se),
            "migreq": u8::from(b.migreq), "padcnt": b.padcnt, "tver": b.tver, "pkey": b.pkey,
            "fecn": u8::from(b.fecn), "becn": u8::from(b.becn), "destqp": b.destqp,
            "ackreq": u8::from(b.ackreq), "psn": b.psn,
        }),
    );
    let e = &m.ext;
    if let Some(r) = e.reth {
        o.insert(
            "reth".into(),
            json!({"va": r.va, "rkey": r.rkey, "dmalen": r.dmalen}),
        );
    }
    if let Some(a) = e.aeth {
        o.insert("aeth".into(), json!({"syndrome": a.syndrome, "msn": a.msn}));
    }
    if let Some(a) = e.atomiceth {
        o.insert(
            "atomiceth".into(),
            json!({"va": a.va, "rkey": a.rkey, "swap_add": a.swap_add, "compare": a.compare}),
        );
    }
    if let Some(x) = e.atomicacketh {
        o.insert("atomicacketh".into(), json!({"orig_rem_data": x}));
    }
    if let Some(x) = e.immdt {
        o.insert("immdt".into(), json!({"imm": x}));
    }
    if let Some(x) = e.ieth {
        o.insert("ieth".into(), json!({"rkey": x}));
    }
    if let Some(d) = e.deth {
        o.insert("deth".into(), json!({"qkey": d.qkey, "srcqp": d.srcqp}));
    }
    if let Some(c) = e.cnp {
        o.insert("cnp".into(), json!({"reserved_hex": hex(&c)}));
    }
    o.insert("payload_len".into(), json!(m.payload_len));
    o.insert("payload_hex".into(), json!(hex(&v.payload)));
    o.insert("pad_hex".into(), json!(hex(m.pad_bytes())));
    o.insert("icrc".into(), json!(format!("0x{:08x}", m.icrc)));
    o.insert("icrc_wire_hex".into(), json!(hex(&m.icrc.to_le_bytes())));
    let trailer = frame.len().saturating_sub(m.trailer_len as usize);
    o.insert("eth_trailer_hex".into(), json!(hex(&frame[trailer..])));
    Value::Object(o)
}

/// Every key of `expected` must be in `actual` with the same value
/// (recursively); returns the differences as `path: expected != actual`.
pub fn subset_diff(expected: &Value, actual: &Value, path: &str, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                match a.get(k) {
                    Some(av) => subset_diff(ev, av, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}: expected {ev}, RTL has no such field")),
                }
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!("{path}: expected {expected}, RTL {actual}")),
    }
}

/// The wire of a fast path (the model's or the RTL's port) alone: what it sent, and
/// the frames it is to receive.
#[derive(Default)]
pub struct Wire {
    pub sent: Vec<Vec<u8>>,
    pub rx: VecDeque<Vec<u8>>,
}

impl Datapath for Wire {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.sent.push(frame.to_vec());
        true
    }
    fn can_transmit(&self) -> bool {
        true
    }
    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let f = self.rx.pop_front()?;
        buf.get_mut(..f.len())?.copy_from_slice(&f);
        Some(f.len())
    }
}
