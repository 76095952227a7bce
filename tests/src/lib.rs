//! Helpers shared by the integration tests in `tests/tests/`: where the vectors and the
//! oracle scripts are, scratch files, running an external tool, the `roce perf` load
//! the fabric tests put on a link, and a pump between two in-process NICs.

pub mod chaos;

use roce_cli::perf::{Params, Test};
use roce_core::engine::PortConfig;
use roce_core::transport::ipv4_gid;
use roce_core::transport::Mtu;
use roce_device::{Capacities, LocalNic, NicModel};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

/// Moves frames both ways between two NICs joined back to back until both are idle,
/// recording each frame in `log`.
pub fn pump_pair(nics: [&Rc<LocalNic>; 2], log: &mut Vec<Vec<u8>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let mut busy = nics[0].poll() | nics[1].poll();
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = nics[from].transmit_frame(&mut buf) {
                log.push(buf[..n].to_vec());
                nics[to].receive_frame(&buf[..n]);
                busy = true;
            }
        }
        if !busy {
            return;
        }
    }
}

/// `tests/data/vectors`: the shared corpus, copied into the project.
pub fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/vectors")
}

/// `tests/tools`: the oracle scripts, copied unchanged from `shared/tools`.
pub fn tool(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools")
        .join(name)
}

/// A fresh scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roce-tests-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Whether `program` can be run. When it cannot, a test that needs it is skipped with a
/// message, except under CI (`CI=true`), where a missing oracle is a failure: `cargo xtask
/// ci` installs it.
pub fn have(program: &str) -> bool {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is required under CI"
        );
        eprintln!("skipped: {program} is not installed (cargo xtask ci installs it)");
    }
    found
}

/// Runs `python3 SCRIPT ARGS...`; returns (success, stdout + stderr).
pub fn python(script: &Path, args: &[&Path]) -> (bool, String) {
    let out = Command::new("python3")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Checks `pcap` with `check_with_tshark.py --quiet`: Wireshark dissects every frame and
/// every ICRC verifies (the script computes it independently). Returns whether the check
/// ran: false, skipped as `have` says, when tshark is not installed.
pub fn check_with_tshark(pcap: &Path) -> bool {
    if !have("tshark") {
        return false;
    }
    let (ok, out) = python(&tool("check_with_tshark.py"), &[pcap, Path::new("--quiet")]);
    assert!(ok, "{out}");
    assert!(out.contains("\"icrc_bad\": 0"), "{out}");
    true
}

/// Runs `tshark -n -r PCAP [-Y FILTER] -T fields -E occurrence=f -e F...` and returns
/// one row per frame (that passes the filter), one string per field, in `fields`' order.
/// Empty strings where a frame has no such field, as tshark prints them.
pub fn tshark_rows(pcap: &Path, filter: Option<&str>, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(pcap);
    if let Some(f) = filter {
        cmd.args(["-Y", f]);
    }
    cmd.args(["-T", "fields", "-E", "occurrence=f"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Two firmware-sized NICs, 10.0.0.1 and 10.0.0.2 (MACs 02:00:00:00:00:01 and :02), not
/// yet joined: what the two-NIC wire tests start from.
pub fn nic_pair() -> [Rc<LocalNic>; 2] {
    let nic = |i: u8| {
        let cfg = PortConfig::new([2, 0, 0, 0, 0, i], ipv4_gid([10, 0, 0, i]));
        LocalNic::new(cfg, Capacities::Firmware)
    };
    [nic(1), nic(2)]
}

/// One QP's `write_bw` of 64 KiB messages at MTU 4096, over Go-Back-N with the 67 ms ACK
/// timeout (code 14): what the fabric tests send, `iters` messages, `tx_depth` in flight.
pub fn write_bw(iters: usize, tx_depth: usize) -> Params {
    Params {
        test: Test::WriteBw,
        size: 65536,
        iters,
        qps: 1,
        mtu: Mtu::Mtu4096,
        tx_depth,
        timeout: 14,
        selective_repeat: None,
    }
}

/// `roce decode --json` of a capture file, with the decoder given.
pub fn decode_json_with(pcap: &Path, decoder: &mut impl roce_capture::Decoder) -> Vec<u8> {
    let mut reader = roce_capture::open(pcap).expect("open the capture");
    let mut out = Vec::new();
    let outcome = roce_capture::decode(
        &mut reader,
        decoder,
        roce_capture::Format::Json,
        &roce_capture::Filter::default(),
        &mut out,
    )
    .expect("decode");
    assert_eq!(outcome.truncated, None, "{}", pcap.display());
    out
}

/// `roce decode --json` of a capture file.
pub fn decode_json(pcap: &Path) -> Vec<u8> {
    decode_json_with(pcap, &mut roce_capture::Software)
}

/// The bytes of every frame of a capture file.
pub fn frames_of(pcap: &Path) -> Vec<Vec<u8>> {
    let mut reader = roce_capture::open(pcap).expect("open the capture");
    let mut frames = Vec::new();
    while let Some(f) = reader.next_frame().expect("read a frame") {
        frames.push(f.data.to_vec());
    }
    frames
}

/// The last `N passed, N failed` line of an oracle's output, as (passed, failed).
pub fn tally(output: &str) -> Option<(usize, usize)> {
    output.lines().rev().find_map(|l| {
        let (p, f) = l.trim().split_once(" passed, ")?;
        let f = f.strip_suffix(" failed")?;
        Some((p.parse().ok()?, f.parse().ok()?))
    })
}
