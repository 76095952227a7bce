//! `roce decode`, `roce analyze` and `roce encode` against Wireshark's tools on the same
//! input, in one run (issues 12 and 20).
//!
//! The captures:
//! * the corpus: scapy's vectors (`tests/data/vectors/valid.pcap`, 366 frames of every
//!   opcode, IPv4 and IPv6, VLAN or not, payloads up to 4 KiB) repeated 300 times:
//!   109,800 frames, 46 MB;
//! * a lossy run: `roce perf write_bw` (64 KiB WRITEs, 1 % loss each way, seed 2) as
//!   tcpdump on the requester sees it: one connection full of Go-Back-N episodes, the
//!   case `roce analyze` exists for.
//!
//! Pairs, each doing the same job: `roce decode --json` / `tshark -T json`; `roce decode`
//! / tshark's one-line summaries; `roce analyze` / `tshark -q -z conv,ip` (tshark's
//! nearest: a table per conversation, nothing about transport); `roce encode` of decode's
//! JSON lines / `text2pcap` of a hex dump of the same frames (a pcap from text; Wireshark
//! has no JSON-to-pcap tool). Each command runs as a process with its output to
//! /dev/null, interleaved, five rounds; the table gives the least wall time and the least
//! CPU time (user + system, from `getrusage`) of each, and the ratios. CPU time is the
//! steadier figure on a shared machine. Wireshark's tools are skipped (with a note) when
//! they are not installed.
//!
//! Run: `cargo bench -p roce-cli --bench decode_speed` (`--rounds N` to change five).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// CPU seconds (user + system) of every child process waited for so far.
fn children_cpu() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr());
        u.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Runs `program args` with its output to /dev/null: (wall seconds, CPU seconds).
fn time(program: &Path, args: &[String]) -> (f64, f64) {
    let cpu = children_cpu();
    let t = Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the command");
    let wall = t.elapsed().as_secs_f64();
    assert!(status.success(), "{} {args:?}: {status}", program.display());
    (wall, children_cpu() - cpu)
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The corpus repeated `times` times, as one pcap, and its frames.
fn corpus(dir: &Path, times: usize) -> (PathBuf, Vec<Vec<u8>>) {
    let valid = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/vectors/valid.pcap");
    let bytes = std::fs::read(&valid).expect("the vectors");
    let (header, records) = bytes.split_at(24);
    let path = dir.join("corpus.pcap");
    let mut out = header.to_vec();
    for _ in 0..times {
        out.extend_from_slice(records);
    }
    std::fs::write(&path, out).expect("write the capture");
    (path.clone(), frames(&path))
}

fn frames(pcap: &Path) -> Vec<Vec<u8>> {
    let mut reader = roce_capture::open(pcap).expect("open the capture");
    let mut all = Vec::new();
    while let Some(f) = reader.next_frame().expect("read the capture") {
        all.push(f.data.to_vec());
    }
    all
}

/// The frames as the hex dump `text2pcap` reads (`od -Ax -tx1` style, offsets from 0
/// at each frame).
fn hex_dump(frames: &[Vec<u8>], path: &Path) {
    use std::fmt::Write;
    let mut s = String::new();
    for f in frames {
        for (i, line) in f.chunks(16).enumerate() {
            let _ = write!(s, "{:06x}", i * 16);
            for b in line {
                let _ = write!(s, " {b:02x}");
            }
            s.push('\n');
        }
    }
    std::fs::write(path, s).expect("write the hex dump");
}

/// One command to time, over `frames` frames.
struct Row {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    frames: usize,
    /// The row this one is compared with (ours against theirs).
    baseline: Option<usize>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benchmarks; there are none to list here
    }
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5usize);
    let dir = std::env::temp_dir().join(format!("roce-decode-speed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let roce = PathBuf::from(env!("CARGO_BIN_EXE_roce"));
    let (corpus, corpus_frames) = corpus(&dir, 300);
    let lossy = dir.join("lossy.pcap");
    let perf = Command::new(&roce)
        .args([
            "perf", "write_bw", "-s", "65536", "-n", "1000", "-m", "4096",
        ])
        .args([
            "--tx-depth",
            "8",
            "--loss",
            "0.01",
            "--seed",
            "2",
            "--pcap-at",
            "client",
        ])
        .arg("--pcap")
        .arg(&lossy)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run roce perf");
    assert!(perf.success(), "roce perf: {perf}");
    let lossy_frames = frames(&lossy).len();
    // encode's input: decode's own JSON lines; text2pcap's: the same frames in hex.
    let jsonl = dir.join("corpus.jsonl");
    let json = Command::new(&roce)
        .args(["decode", "--json", &s(&corpus)])
        .output()
        .expect("roce decode --json");
    std::fs::write(&jsonl, json.stdout).expect("write the JSON lines");
    let hex = dir.join("corpus.hex");
    hex_dump(&corpus_frames, &hex);
    let encoded = s(&dir.join("encoded.pcap"));

    let tshark = have("tshark");
    let text2pcap = have("text2pcap");
    for (tool, there) in [("tshark", tshark), ("text2pcap", text2pcap)] {
        if !there {
            println!("{tool} is not installed: its rows are left out");
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut pair =
        |ours: (&str, Vec<String>), theirs: Option<(&str, &str, Vec<String>)>, frames| {
            let base = theirs.map(|(name, program, args)| {
                rows.push(Row {
                    name: name.into(),
                    program: program.into(),
                    args,
                    frames,
                    baseline: None,
                });
                rows.len() - 1
            });
            rows.push(Row {
                name: ours.0.into(),
                program: roce.clone(),
                args: ours.1,
                frames,
                baseline: base,
            });
        };
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let n = corpus_frames.len();
    for (cap, frames, label) in [
        (s(&corpus), n, "corpus"),
        (s(&lossy), lossy_frames, "lossy"),
    ] {
        let c = cap.as_str();
        let t = |name: &'static str, a: &[&str]| tshark.then(|| (name, "tshark", v(a)));
        pair(
            (
                &format!("{label}: roce decode --json"),
                v(&["decode", "--json", c]),
            ),
            t("tshark -T json", &["-r", c, "-T", "json"]),
            frames,
        );
        pair(
            (&format!("{label}: roce decode (text)"), v(&["decode", c])),
            t("tshark (summary)", &["-r", c]),
            frames,
        );
        pair(
            (&format!("{label}: roce analyze"), v(&["analyze", c])),
            t("tshark -q -z conv,ip", &["-r", c, "-q", "-z", "conv,ip"]),
            frames,
        );
        pair(
            (
                &format!("{label}: roce analyze --json"),
                v(&["analyze", "--json", c]),
            ),
            None,
            frames,
        );
    }
    pair(
        (
            "corpus: roce encode",
            v(&["encode", &s(&jsonl), "-o", &encoded]),
        ),
        text2pcap.then(|| ("text2pcap", "text2pcap", v(&[&s(&hex), &encoded]))),
        n,
    );

    let mut best = vec![(f64::MAX, f64::MAX); rows.len()];
    for _ in 0..rounds {
        for (i, r) in rows.iter().enumerate() {
            let (wall, cpu) = time(&r.program, &r.args);
            best[i] = (best[i].0.min(wall), best[i].1.min(cpu));
        }
    }
    println!(
        "corpus: {n} frames, {} MB; lossy: {lossy_frames} frames, {} MB; best of {rounds} rounds",
        std::fs::metadata(&corpus).unwrap().len() / 1_000_000,
        std::fs::metadata(&lossy).unwrap().len() / 1_000_000,
    );
    println!(
        "{:<34} {:>8} {:>8} {:>14} {:>16}",
        "command", "wall s", "CPU s", "frames/s (CPU)", "x baseline (CPU)"
    );
    for (r, (wall, cpu)) in rows.iter().zip(&best) {
        let ratio = r.baseline.map_or(String::new(), |b| {
            format!("{:.1}x ({:.1}x wall)", best[b].1 / cpu, best[b].0 / wall)
        });
        println!(
            "{:<34} {wall:>8.3} {cpu:>8.3} {:>14.0} {ratio:>16}",
            r.name,
            r.frames as f64 / cpu
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
