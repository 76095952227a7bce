//! The `roce` binary as a user meets it in a shell: pipes that close early, standard
//! input, captures cut short or still being written, files that are not captures.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn roce() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_roce"));
    // A backtrace would be printed with any error: there must be none.
    c.env("RUST_BACKTRACE", "1");
    c
}

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vectors")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("roce-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `roce ARGS`, reads `lines` lines of its output (none: the pipe is closed before
/// it writes), closes the pipe, and returns the exit status and standard error.
fn closed_early(args: &[&str], lines: usize) -> (std::process::ExitStatus, String) {
    let mut child = roce()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut r = BufReader::new(stdout);
    for _ in 0..lines {
        let mut l = String::new();
        assert!(
            r.read_line(&mut l).unwrap() > 0,
            "{args:?} printed too little"
        );
    }
    drop(r);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap(), err)
}

/// `roce ... | head`: every subcommand that prints ends quietly with status 0.
#[test]
fn a_closed_pipe_ends_every_subcommand_quietly() {
    let big = scratch("pipe").join("big.pcap");
    // Enough frames that the output cannot all fit in the pipe.
    let one = std::fs::read(vectors().join("valid.pcap")).unwrap();
    let mut bytes = one.clone();
    for _ in 0..20 {
        bytes.extend_from_slice(&one[24..]);
    }
    std::fs::write(&big, bytes).unwrap();
    let big = big.to_str().unwrap();
    let cases: [(&[&str], usize); 6] = [
        (&["decode", big], 3),
        (&["decode", "--json", big], 1),
        (&["decode", "--json", big], 0),
        (&["analyze", big], 0),
        (&["perf", "write_bw", "-s", "4096", "-n", "50"], 0),
        (&["--help"], 1),
    ];
    for (args, lines) in cases {
        let (status, err) = closed_early(args, lines);
        assert!(status.success(), "{args:?}: {status}; {err}");
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert!(!err.contains("backtrace"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn decode_reads_standard_input() {
    let file = vectors().join("valid.pcap");
    let from_file = roce()
        .args(["decode", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(from_file.status.success());
    let from_stdin = roce()
        .args(["decode", "--json", "-"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(from_stdin.status.success());
    assert_eq!(from_stdin.stdout, from_file.stdout);
    assert_eq!(from_file.stdout.split(|&b| b == b'\n').count(), 367);
}

#[test]
fn encode_reads_standard_input() {
    let dir = scratch("encode");
    let json = std::fs::read(vectors().join("valid.jsonl")).unwrap();
    // valid.jsonl rows carry the packet under "expected": make decode lines of them.
    let lines: String = String::from_utf8(json)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!("{}\n", serde_json::json!({"packet": v["expected"]}))
        })
        .collect();
    let out = dir.join("out.pcap");
    let mut child = roce()
        .args(["encode", "-", "-o"])
        .arg(&out)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(String::from_utf8_lossy(&done.stderr).contains("wrote 366 frames"));
    // The frames are those of valid.pcap (decode then encode reproduces them).
    let a = roce()
        .args(["decode", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    let b = roce()
        .args(["decode", "--json"])
        .arg(vectors().join("valid.pcap"))
        .output()
        .unwrap();
    assert_eq!(a.stdout, b.stdout);
}

/// `tcpdump -U -w - | roce decode -`: each frame is printed when it arrives, not when
/// the input ends.
#[test]
fn decode_streams_frames_as_they_arrive() {
    let whole = std::fs::read(vectors().join("valid.pcap")).unwrap();
    let first_three = 24
        + (0..3).fold(0, |at, _| {
            let caplen = u32::from_le_bytes(whole[24 + at + 8..24 + at + 12].try_into().unwrap());
            at + 16 + caplen as usize
        });
    let mut child = roce()
        .args(["decode", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&whole[..first_three]).unwrap();
    stdin.flush().unwrap();
    // Three lines come while the input is still open; a watchdog fails the test rather
    // than letting it hang.
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        for _ in 0..3 {
            let mut l = String::new();
            r.read_line(&mut l).unwrap();
            tx.send(l).unwrap();
        }
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        rest
    });
    for i in 1..=3 {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a frame's line before the input ended");
        assert!(line.trim_start().starts_with(&i.to_string()), "{line}");
    }
    stdin.write_all(&whole[first_three..]).unwrap();
    drop(stdin);
    let rest = reader.join().unwrap();
    assert_eq!(rest.lines().count(), 363);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_truncated_capture_prints_every_complete_frame_warns_and_succeeds() {
    let whole = std::fs::read(vectors().join("valid.pcap")).unwrap();
    let path = scratch("truncated").join("cut.pcap");
    std::fs::write(&path, &whole[..whole.len() - 100]).unwrap();
    let out = roce().arg("decode").arg(&path).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 365);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning:") && err.contains("cut short in the middle of frame 366"),
        "{err}"
    );
}

/// `roce analyze -` on a capture cut mid-frame: every complete frame analysed, a warning,
/// status 0; the JSON and the figure written.
#[test]
fn analyze_reads_a_cut_capture_from_standard_input() {
    // rxe's READs under loss, headers only: one connection.
    let rxe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/captures/rxe-loss/loss-server-read_bw-4096.pcap");
    let frames = roce().arg("decode").arg(&rxe).output().unwrap().stdout;
    let frames = frames
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let whole = std::fs::read(&rxe).unwrap();
    let png = scratch("analyze").join("timeline.png");
    let mut child = roce()
        .args(["analyze", "-", "--json", "--plot"])
        .arg(&png)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The last record is a 16-byte header and 74 bytes of frame: cut inside the frame.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&whole[..whole.len() - 40]).unwrap();
    drop(stdin);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("cut short"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(report["frames"].as_u64(), Some(frames as u64 - 1));
    assert_eq!(report["connections"].as_array().map(Vec::len), Some(1));
    let image = std::fs::read(&png).unwrap();
    assert!(image.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}

/// Whether tshark runs here (it must under CI).
fn tshark_found() -> bool {
    let found = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var("CI").as_deref() != Ok("true"),
        "tshark is required under CI"
    );
    found
}

/// A pcapng whose last block is damaged (its trailing length is wrong): `roce decode`
/// prints the frames Wireshark reads before the damage, then fails on it; `roce
/// analyze` prints the analysis of those frames, then fails.
#[test]
fn a_corrupt_record_comes_after_every_frame_before_it() {
    if !tshark_found() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let mixed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/captures/mixed.pcapng");
    let mut bytes = std::fs::read(mixed).unwrap();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&16u32.to_le_bytes());
    let path = scratch("corrupt").join("damaged.pcapng");
    std::fs::write(&path, &bytes).unwrap();
    // tshark too prints the frames before the damage and fails (status 2).
    let tshark = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tshark.stderr).contains("damaged or corrupt"));
    let theirs = numbers(&tshark.stdout);
    assert_eq!(theirs, (1..=25).collect::<Vec<u64>>());
    let out = roce()
        .args(["decode", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(indices(&out.stdout), theirs);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("damaged.pcapng: corrupt capture at byte"),
        "{err}"
    );
    let out = roce()
        .args(["analyze", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["frames"], 25);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("covers the 25 frames before it"), "{err}");
}

#[test]
fn a_file_that_is_not_a_capture_is_refused_with_its_first_bytes() {
    let out = roce()
        .arg("decode")
        .arg(vectors().join("valid.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("valid.jsonl: not a pcap or pcapng capture: it starts with 7b 22"),
        "{err}"
    );
    assert!(!err.contains("backtrace"), "{err}");
}

/// The frame numbers `roce decode --json FILTER PCAP` writes.
fn roce_keeps(pcap: &Path, filter: &[&str]) -> Vec<u64> {
    let out = roce()
        .args(["decode", "--json"])
        .args(filter)
        .arg(pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{filter:?}: {out:?}");
    indices(&out.stdout)
}

/// The frame numbers of `roce decode --json` lines.
fn indices(json_lines: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(json_lines)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// The numbers of `tshark -T fields -e frame.number` lines.
fn numbers(lines: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(lines)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// The frame numbers Wireshark's display filter `filter` keeps. (One vector's ACK comes
/// from UDP port 69, which tshark would take for TFTP: it is told that port is RoCE.)
fn tshark_keeps(pcap: &Path, filter: &str) -> Vec<u64> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-d", "udp.port==69,infiniband"])
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{filter}: {out:?}");
    numbers(&out.stdout)
}

/// Opcodes of the RC and UC transports (IBTA table 38: the transport in the top three
/// bits) whose low five bits are in `low`, and `extra`, as a tshark set. (XRC is not
/// decoded: its frames are `unknown_opcode`.)
fn opcodes(low: std::ops::RangeInclusive<u8>, extra: &[u8]) -> String {
    let all: Vec<String> = [0x00u8, 0x20]
        .iter()
        .flat_map(|t| low.clone().map(move |l| t | l))
        .chain(extra.iter().copied())
        .map(|o| o.to_string())
        .collect();
    format!("infiniband.bth.opcode in {{{}}}", all.join(", "))
}

/// `roce decode`'s filters keep the frames Wireshark's display filters keep: by QPN, IP
/// address or prefix, time, opcode class (also in a headers-only capture, whose frames do
/// not decode but whose headers are there), and combinations.
#[test]
fn decode_filters_keep_what_wiresharks_display_filters_keep() {
    if !tshark_found() {
        eprintln!("skipped: tshark is not installed");
        return;
    }
    let valid = vectors().join("valid.pcap");
    // Linux rxe's READs under 1 % loss, cut to the headers (tests/data/captures/rxe-loss).
    let rxe = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/captures/rxe-loss/loss-server-read_bw-4096.pcap");
    // And RC's SEND LAST/ONLY with invalidate, UD's SEND ONLY (with immediate).
    let send = opcodes(0..=5, &[0x16, 0x17, 0x64, 0x65]);
    let cases: Vec<(&Path, Vec<&str>, String)> = vec![
        (
            &valid,
            vec!["--qpn", "0xabcd,0x101"],
            "infiniband.bth.destqp in {0xabcd, 0x101} || infiniband.deth.srcqp in {0xabcd, 0x101}"
                .into(),
        ),
        (
            &valid,
            vec!["--ip", "192.168.0.0/16", "--ip", "10.11.67.81"],
            "ip.addr == 192.168.0.0/16 && ip.addr == 10.11.67.81".into(),
        ),
        (&valid, vec!["--ip", "fd00::/16"], "ipv6.addr == fd00::/16".into()),
        (
            &valid,
            vec!["--from", "10", "--to", "20.5"],
            "frame.time_relative >= 10 && frame.time_relative <= 20.5".into(),
        ),
        (&valid, vec!["--opcode", "write"], opcodes(6..=11, &[])),
        // ACKNOWLEDGE and ATOMIC ACKNOWLEDGE; the atomics and their ACKs (RC only).
        (&valid, vec!["--opcode", "ack"], "infiniband.bth.opcode in {0x11, 0x12}".into()),
        (&valid, vec!["--opcode", "atomic"], "infiniband.bth.opcode in {0x12, 0x13, 0x14}".into()),
        // An opcode by name and one by number.
        (
            &valid,
            vec!["--opcode", "RC_RDMA_WRITE_ONLY,0x81"],
            "infiniband.bth.opcode in {0x0a, 0x81}".into(),
        ),
        (
            &valid,
            vec!["--opcode", "send,cnp", "--ip", "10.0.0.0/8", "--to", "200ms"],
            format!("({send} || infiniband.bth.opcode == 0x81) && ip.addr == 10.0.0.0/8 && frame.time_relative <= 0.2"),
        ),
        (&valid, vec!["--opcode", "send,cnp", "--ip", "10.0.0.0/8"], format!("({send} || infiniband.bth.opcode == 0x81) && ip.addr == 10.0.0.0/8")),
        (&rxe, vec!["--opcode", "read"], opcodes(12..=16, &[])),
        (&rxe, vec!["--opcode", "nak"], "infiniband.aeth.syndrome & 0x60".into()),
        (
            &rxe,
            vec!["--opcode", "read", "--qpn", "0x12", "--from", "0.3s"],
            format!("{} && infiniband.bth.destqp == 0x12 && frame.time_relative >= 0.3", opcodes(12..=16, &[])),
        ),
    ];
    // --error with another filter: the frames scapy's vectors say fail the ICRC check,
    // of those Wireshark finds between 10.0.0.0/8 and anything.
    let invalid = vectors().join("invalid.pcap");
    let icrc: Vec<u64> = std::fs::read_to_string(vectors().join("invalid.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["valid"] == false && r["expected_error"] == "icrc_mismatch")
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    let in_ten = tshark_keeps(&invalid, "ip.addr == 10.0.0.0/8");
    let both: Vec<u64> = icrc.into_iter().filter(|i| in_ten.contains(i)).collect();
    assert!(!both.is_empty() && both.len() < in_ten.len());
    assert_eq!(
        roce_keeps(&invalid, &["--error", "icrc", "--ip", "10.0.0.0/8"]),
        both
    );
    for (pcap, filter, display) in cases {
        let theirs = tshark_keeps(pcap, &display);
        assert!(
            !theirs.is_empty(),
            "{display}: a case that keeps nothing tests little"
        );
        assert_eq!(
            roce_keeps(pcap, &filter),
            theirs,
            "{filter:?} against {display}"
        );
    }
}

/// A time range that holds no time is a mistake to say, not an empty output.
#[test]
fn an_empty_time_range_is_refused() {
    let out = roce()
        .args(["decode", "--from", "30", "--to", "10"])
        .arg(vectors().join("valid.pcap"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--from 30s is after --to 10s"), "{err}");
}

/// `--error`: the frames scapy's vectors say must fail, by the error they name.
#[test]
fn decode_error_filters_keep_the_frames_the_vectors_say_fail() {
    let invalid = vectors().join("invalid.pcap");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(vectors().join("invalid.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failing = |keep: &dyn Fn(&str) -> bool| -> Vec<u64> {
        rows.iter()
            .filter(|r| r["valid"] == false && keep(r["expected_error"].as_str().unwrap()))
            .map(|r| r["index"].as_u64().unwrap())
            .collect()
    };
    for (option, keep) in [
        (
            "icrc",
            &(|e: &str| e == "icrc_mismatch") as &dyn Fn(&str) -> bool,
        ),
        ("parse", &|e: &str| e != "icrc_mismatch"),
        ("truncated_frame", &|e: &str| e == "truncated_frame"),
        ("any", &|_: &str| true),
    ] {
        let expected = failing(keep);
        assert!(!expected.is_empty(), "{option}");
        assert_eq!(
            roce_keeps(&invalid, &["--error", option]),
            expected,
            "--error {option}"
        );
    }
}

/// `roce perf`'s DCB options reach the NICs through the ABI (1.5) and the DCB RTL's
/// registers: with the server draining its receive buffer at 40 Gb/s, the PFC frames it
/// sends are, as Wireshark reads them, for priority 0 only, with the 8,000 quanta asked
/// for (XOFF) or 0 (XON), as many as the footer counts. Settings the NIC cannot run are
/// refused with the rule that broke.
#[test]
fn perf_dcb_options_set_the_pfc_thresholds_wireshark_sees() {
    let found = Command::new("tshark").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tshark is required under CI"
        );
        eprintln!("SKIPPED: no tshark");
        return;
    }
    let pcap = scratch("dcb").join("server.pcap");
    let dcb = [
        "--pfc",
        "0",
        "--pfc-xoff",
        "24k",
        "--pfc-xon",
        "16k",
        "--pfc-quanta",
        "8000",
    ];
    let out = roce()
        .args(["perf", "write_bw", "-s", "65536", "-n", "100"])
        .args(dcb)
        .args([
            "--rtl-dcb",
            "--drain",
            "40g",
            "--pcap-at",
            "server",
            "--pcap",
        ])
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if String::from_utf8_lossy(&out.stderr).contains("without Verilator") {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{out:?}");
        eprintln!("SKIPPED: roce-hdl-sim was built without Verilator");
        return;
    }
    assert!(out.status.success(), "{out:?}");
    let sent: usize = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: PFC frames sent "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no server PFC count in {text}"));
    let t = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-Y", "macc.cbfc.enbv", "-T", "fields"])
        .args(["-e", "eth.src", "-e", "macc.cbfc.enbv"])
        .args(["-e", "macc.cbfc.pause_time.c0"])
        .output()
        .unwrap();
    assert!(t.status.success(), "{t:?}");
    let rows: Vec<Vec<String>> = String::from_utf8(t.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect();
    assert!(
        sent > 0 && rows.len() == sent,
        "{} in the capture, {text}",
        rows.len()
    );
    let quanta: std::collections::BTreeSet<&str> = rows.iter().map(|r| r[2].as_str()).collect();
    assert!(rows.iter().all(|r| r[1] == "0x0001"), "{rows:?}");
    assert_eq!(quanta, ["0", "8000"].into(), "{rows:?}");
    std::fs::remove_dir_all(pcap.parent().unwrap()).unwrap();

    let out = roce()
        .args([
            "perf",
            "write_bw",
            "-n",
            "10",
            "--pfc-xoff",
            "16k",
            "--pfc-xon",
            "24k",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("refused the DCB settings") && err.contains("XON < XOFF"),
        "{err}"
    );
}
