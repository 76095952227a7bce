//! `cargo xtask interop`: our stack against Linux Soft-RoCE (rdma_rxe) and rdma-core's
//! tools in a QEMU VM (`tools/rxe-vm/`), both roles, two MTUs, every run captured on the
//! bridge and every frame checked by `roce decode` and by tshark with an independent
//! ICRC. Needs root (network namespace, raw sockets) and about ten minutes.

use crate::cmd::{cmd, run, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS: &str = "rxens";
/// VM 1's address (the rxe peer); VM 2 is 10.77.0.3 (the rxe-to-rxe comparison).
const VM1: &str = "10.77.0.2";
/// The host's address on the bridge (the TCP exchange reaches our process there).
const HOST: &str = "10.77.0.1";
/// Our NIC's own address on the bridge (`roce`'s default `--ip`).
const OUR_IP: &str = "10.77.0.10";
/// Each case gets its own TCP port, so a failed case cannot pair with the next one.
const BASE_PORT: u16 = 18600;

#[derive(Clone, Debug)]
enum Kind {
    /// perftest: our `roce perf TEST`, their `ib_TEST`; the atomic for atomic_bw.
    Perf(&'static str, Option<&'static str>),
    /// `ibv_{rc,uc,ud}_pingpong` and our `roce pingpong`.
    Pingpong(&'static str),
    /// perftest with `-I N` on both sides: SENDs / WRITEs of at most N bytes inline.
    PerfInline(&'static str, usize),
    /// perftest with `-R` on both sides: connected, and its messages exchanged, through
    /// RDMA CM (no TCP).
    PerfCm(&'static str),
    /// librdmacm's `rping -v -V` and our `roce rping`, connected through RDMA CM.
    Rping,
    /// `ibv_srq_pingpong` (16 RC QPs on one SRQ) and our `roce srq-pingpong`.
    SrqPingpong,
    /// librdmacm's `udaddy` and our `roce udaddy`: UD QPs found through RDMA CM (SIDR).
    Udaddy,
}

#[derive(Clone, Debug)]
struct Case {
    kind: Kind,
    size: usize,
    iters: usize,
}

impl Case {
    fn name(&self) -> String {
        match &self.kind {
            Kind::Perf(t, Some(a)) => format!("{t}-{a}"),
            Kind::Perf(t, None) => format!("{t}-{}", self.size),
            Kind::Pingpong(t) => format!("{t}_pingpong-{}", self.size),
            Kind::PerfInline(t, n) => format!("{t}-{}-I{n}", self.size),
            Kind::PerfCm(t) => format!("{t}-{}-R", self.size),
            Kind::Rping => format!("rping-{}", self.size),
            Kind::SrqPingpong => format!("srq_pingpong-{}", self.size),
            Kind::Udaddy => format!("udaddy-{}", self.size),
        }
    }

    /// RDMA CM tools connect to our NIC's own address, not to the host's TCP.
    fn peer_of_vm(&self) -> &'static str {
        match self.kind {
            Kind::Rping | Kind::PerfCm(_) | Kind::Udaddy => OUR_IP,
            _ => HOST,
        }
    }

    /// The rdma-core / perftest command in the VM; `server` is the address to connect
    /// to when it is the client.
    fn vm_cmd(&self, mtu: u32, port: u16, server: Option<&str>) -> String {
        let peer = server.unwrap_or_default();
        match &self.kind {
            Kind::Perf(t, atomic) => {
                let op = atomic.map_or(format!("-s {}", self.size), |a| format!("-A {a}"));
                format!(
                    "ib_{t} -d rxe0 -x 1 -F -p {port} -n {} {op} {peer}",
                    self.iters
                )
            }
            Kind::PerfInline(t, n) => format!(
                "ib_{t} -d rxe0 -x 1 -F -p {port} -n {} -s {} -I {n} {peer}",
                self.iters, self.size
            ),
            Kind::PerfCm(t) => format!(
                "ib_{t} -d rxe0 -x 1 -F -R -p {port} -n {} -s {} {peer}",
                self.iters, self.size
            ),
            Kind::Pingpong(t) => {
                let m = if *t == "ud" {
                    String::new()
                } else {
                    format!("-m {mtu}")
                };
                format!(
                    "ibv_{t}_pingpong -g 1 -c -p {port} -n {} -s {} {m} {peer}",
                    self.iters, self.size
                )
            }
            Kind::SrqPingpong => format!(
                "ibv_srq_pingpong -g 1 -q 16 -p {port} -n {} -s {} -m {mtu} {peer}",
                self.iters, self.size
            ),
            // udaddy has no port option: always 7174.
            Kind::Udaddy => {
                let role = server.map_or(String::new(), |a| format!("-s {a} "));
                format!("udaddy {role}-C {} -S {}", self.iters, self.size)
            }
            // -V: the client compares what the server wrote back with what it sent.
            Kind::Rping => {
                let role = server.map_or("-s".to_string(), |a| format!("-c -a {a}"));
                format!(
                    "rping {role} -v -V -C {} -S {} -p {port}",
                    self.iters, self.size
                )
            }
        }
    }

    /// Our command's arguments.
    fn our_args(&self, mtu: u32, port: u16, client_of: Option<&str>) -> Vec<String> {
        if let Kind::Udaddy = self.kind {
            let mut a: Vec<String> = vec![
                "udaddy".into(),
                "-C".into(),
                self.iters.to_string(),
                "-S".into(),
                self.size.to_string(),
            ];
            match client_of {
                Some(h) => a.extend(["--client".into(), h.into()]),
                None => a.push("--server".into()),
            }
            return a;
        }
        if let Kind::Rping = self.kind {
            let mut a: Vec<String> = ["rping", "-v", "-C", &self.iters.to_string()]
                .map(String::from)
                .into();
            a.extend(["-S".into(), self.size.to_string()]);
            a.extend(["--port".into(), port.to_string()]);
            match client_of {
                Some(h) => a.extend(["--client".into(), h.into()]),
                None => a.push("--server".into()),
            }
            return a;
        }
        let mut a: Vec<String> = match &self.kind {
            Kind::Perf(t, atomic) => {
                let mut a = vec![
                    "perf".into(),
                    t.to_string(),
                    "-s".into(),
                    self.size.to_string(),
                ];
                if let Some(op) = atomic {
                    a.extend(["-A".into(), op.to_string()]);
                }
                a
            }
            Kind::PerfInline(t, n) => vec![
                "perf".into(),
                t.to_string(),
                "-s".into(),
                self.size.to_string(),
                "-I".into(),
                n.to_string(),
            ],
            Kind::PerfCm(t) => vec![
                "perf".into(),
                t.to_string(),
                "-s".into(),
                self.size.to_string(),
                "-R".into(),
            ],
            Kind::Pingpong(t) => vec![
                "pingpong".into(),
                t.to_string(),
                "-s".into(),
                self.size.to_string(),
            ],
            Kind::SrqPingpong => vec![
                "srq-pingpong".into(),
                "-q".into(),
                "16".into(),
                "-s".into(),
                self.size.to_string(),
            ],
            Kind::Rping | Kind::Udaddy => unreachable!("handled above"),
        };
        a.extend([
            "-n".into(),
            self.iters.to_string(),
            "-m".into(),
            mtu.to_string(),
            "--port".into(),
            port.to_string(),
        ]);
        match client_of {
            Some(h) => a.extend(["--client".into(), h.into()]),
            None => a.push("--server".into()),
        }
        a
    }
}

/// The matrix: every perftest test at 1 B, 4 KiB and 64 KiB, both atomics, inline
/// (`-I 64`) SEND and WRITE bandwidth, the bandwidth (64 KiB) and latency (4 KiB) tests
/// over RDMA CM (`-R`), the three pingpongs, the SRQ pingpong, and rping
/// (RDMA CM) at its default and largest sizes, and udaddy (RDMA CM's SIDR, UD).
fn matrix(mtu: u32) -> Vec<Case> {
    let mut v = Vec::new();
    for t in ["write_bw", "read_bw", "send_bw"] {
        for size in [1, 4096, 65536] {
            v.push(Case {
                kind: Kind::Perf(t, None),
                size,
                iters: if size > 4096 { 50 } else { 200 },
            });
        }
    }
    for a in ["FETCH_AND_ADD", "CMP_AND_SWAP"] {
        v.push(Case {
            kind: Kind::Perf("atomic_bw", Some(a)),
            size: 8,
            iters: 200,
        });
    }
    // Inline SENDs and WRITEs (perftest -I), at the NIC's max_inline_data.
    for t in ["write_bw", "send_bw"] {
        v.push(Case {
            kind: Kind::PerfInline(t, 64),
            size: 64,
            iters: 200,
        });
    }
    // perftest -R: the QP connected and the messages exchanged through RDMA CM.
    for t in ["write_bw", "read_bw", "send_bw"] {
        v.push(Case {
            kind: Kind::PerfCm(t),
            size: 65536,
            iters: 50,
        });
    }
    for t in ["write_lat", "read_lat", "send_lat"] {
        for size in [1, 4096, 65536] {
            v.push(Case {
                kind: Kind::Perf(t, None),
                size,
                iters: if size > 4096 { 20 } else { 100 },
            });
        }
    }
    // The latency tests over RDMA CM too, at one size.
    for t in ["write_lat", "read_lat", "send_lat"] {
        v.push(Case {
            kind: Kind::PerfCm(t),
            size: 4096,
            iters: 100,
        });
    }
    for t in ["rc", "uc"] {
        for size in [1, 4096, 65536] {
            v.push(Case {
                kind: Kind::Pingpong(t),
                size,
                iters: 50,
            });
        }
    }
    // UD messages fit one packet.
    for size in [1, mtu as usize] {
        v.push(Case {
            kind: Kind::Pingpong("ud"),
            size,
            iters: 50,
        });
    }
    for size in [1, 4096] {
        v.push(Case {
            kind: Kind::SrqPingpong,
            size,
            iters: 200,
        });
    }
    for size in [64, 65535] {
        v.push(Case {
            kind: Kind::Rping,
            size,
            iters: 10,
        });
    }
    // udaddy's default size and a full 1024-byte datagram.
    for size in [100, 1024] {
        v.push(Case {
            kind: Kind::Udaddy,
            size,
            iters: 10,
        });
    }
    v
}

/// One cell of the table.
#[derive(Clone, Debug, Default)]
struct Cell {
    ok: bool,
    /// Bandwidth (MB/s) or latency (us), with its unit.
    figure: String,
    detail: String,
    pcap: Option<PathBuf>,
    retransmits: Option<u64>,
    /// Our engine's recovery counters (rxe's names), from the interop-result line.
    recovery: String,
    /// rxe's, from its hardware counters in the VM.
    rxe_recovery: String,
    data: String,
    /// Frames the RC fast path carried, of all our NIC sent and received.
    path: String,
}

struct Env {
    root: PathBuf,
    script: PathBuf,
    roce: PathBuf,
    out: PathBuf,
    checker: PathBuf,
    /// `--fastpath` for every command of ours (`INTEROP_FASTPATH`, default on).
    fastpath: String,
}

/// How long a VM may take from QEMU's start to rxe0 with its GID. Idle, about 10 s; at
/// a load of 16 on the two cores a boot took about 60 s to reach the kernel's APIC
/// set-up alone, so allow ten times that before calling the boot failed.
const BOOT_LIMIT: Duration = Duration::from_secs(600);

impl Env {
    /// Boots VM `id` to run `script` and waits until rxe is ready in it (the guest's
    /// `=== RXE-READY` line: rxe0 exists and has its IPv4 GID), so no case starts
    /// against a VM that is still booting however slowly it boots. A VM that stops or
    /// reports `RXE-NOT-READY` first is an error naming the console's last lines.
    fn vm(&self, id: u32, link_mtu: u32, script: &str, log: &Path) -> Result<Child> {
        let f = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let f2 = f.try_clone().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let mut vm = Command::new(&self.script)
            .args(["boot", &id.to_string(), script])
            .env("MTU", link_mtu.to_string())
            .env("TIMEOUT", "1800")
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(f2)
            .spawn()
            .map_err(|e| format!("boot VM {id}: {e}"))?;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if text.contains("=== RXE-READY") {
                println!("  VM {id} ready in {:.0} s", t0.elapsed().as_secs_f64());
                return Ok(vm);
            }
            let why = if text.contains("=== RXE-NOT-READY") {
                Some("rxe0 has no IPv4 GID".to_string())
            } else if let Ok(Some(st)) = vm.try_wait() {
                Some(format!("it stopped ({st})"))
            } else if t0.elapsed() > BOOT_LIMIT {
                Some(format!("not ready after {} s", BOOT_LIMIT.as_secs()))
            } else {
                None
            };
            if let Some(why) = why {
                let _ = vm.kill();
                let _ = vm.wait();
                let tail: Vec<&str> = text.lines().rev().take(8).collect();
                return Err(format!(
                    "VM {id} did not boot to rxe ({why}); {}: ...{}",
                    log.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn capture(&self, name: &str) -> Result<(Child, PathBuf)> {
        let pcap = self.out.join(format!("{name}.pcap"));
        let _ = std::fs::remove_file(&pcap);
        let child = cmd(
            "ip",
            &[
                "netns",
                "exec",
                NS,
                "dumpcap",
                "-q",
                "-P",
                "-i",
                "br0",
                "-f",
                "udp port 4791",
                "-w",
            ],
        )
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("dumpcap: {e}"))?;
        let t0 = Instant::now();
        while std::fs::metadata(&pcap).map_or(true, |m| m.len() < 24) {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err("dumpcap did not start".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
        Ok((child, pcap))
    }

    fn stop_capture(&self, mut child: Child) {
        std::thread::sleep(Duration::from_millis(300));
        let _ = cmd("kill", &["-INT", &child.id().to_string()]).status();
        let _ = child.wait();
    }

    /// Our side of one case, inside the namespace: (exit ok, stdout + stderr).
    fn ours(&self, args: &[String], extra_env: &[(&str, &str)]) -> (bool, String) {
        let mut c = Command::new("timeout");
        c.args(["180", "ip", "netns", "exec", NS])
            .arg(&self.roce)
            .args(args)
            .args(["--fastpath", &self.fastpath])
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null());
        for (k, v) in extra_env {
            c.env(k, v);
        }
        match c.output() {
            Ok(o) => (
                o.status.success(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                ),
            ),
            Err(e) => (false, e.to_string()),
        }
    }

    fn set_link_mtu(&self, mtu: u32) -> Result {
        for dev in ["tap1", "tap2", "br0"] {
            run(&mut cmd(
                "ip",
                &["-n", NS, "link", "set", "dev", dev, "mtu", &mtu.to_string()],
            ))?;
        }
        Ok(())
    }
}

/// `=== CASE name` ... `=== RC name n` sections of a VM's console log.
fn sections(log: &str) -> HashMap<String, (bool, String)> {
    let mut out = HashMap::new();
    let mut cur: Option<(String, String)> = None;
    for line in log.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(n) = line.strip_prefix("=== CASE ") {
            cur = Some((n.trim().to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix("=== RC ") {
            let mut it = rest.split_whitespace();
            let (name, rc) = (it.next().unwrap_or_default(), it.next().unwrap_or("1"));
            let text = cur.take().map(|c| c.1).unwrap_or_default();
            out.insert(name.to_string(), (rc == "0", text));
        } else if let Some((_, t)) = cur.as_mut() {
            t.push_str(line);
            t.push('\n');
        }
    }
    out
}

/// The figure a tool printed: perftest's BW average (MB/s) or t_typical (us), or the
/// pingpongs' usec/iter.
fn tool_figure(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let (col, unit) = if l.contains("BW average") {
            (3, "MB/s")
        } else if l.contains("t_typical") {
            (4, "us")
        } else if l.contains("usec/iter") {
            let v = l.split('=').nth(1).unwrap_or_default().trim();
            return format!("{} us/iter", v.trim_end_matches(" usec/iter"));
        } else {
            continue;
        };
        if let Some(v) = lines.get(i + 1).and_then(|n| n.split_whitespace().nth(col)) {
            return format!("{v} {unit}");
        }
    }
    "-".into()
}

/// Our `interop-result key=value ...` line, or the pingpong's usec/iter.
fn our_figure(text: &str) -> (String, Option<u64>, String, String) {
    let mut kv = HashMap::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("interop-result ") {
            for f in rest.split_whitespace() {
                if let Some((k, v)) = f.split_once('=') {
                    kv.insert(k.to_string(), v.to_string());
                }
            }
        }
        if let Some(r) = l.split("retransmitted packets ").nth(1) {
            kv.insert("retransmits".into(), r.trim().to_string());
            kv.insert("data".into(), "checked".into());
        }
    }
    let fig = match (kv.get("bw_mb_s"), kv.get("lat_us")) {
        (Some(b), _) if b != "-" => format!("{b} MB/s"),
        (_, Some(l)) if l != "-" => format!("{l} us"),
        _ => tool_figure(text),
    };
    let recovery = [
        "rcvd_seq_err",
        "duplicate_request",
        "out_of_seq_request",
        "rx_dropped",
    ]
    .iter()
    .filter_map(|k| kv.get(*k).map(|v| format!("{k} {v}")))
    .collect::<Vec<_>>()
    .join(", ");
    (
        fig,
        kv.get("retransmits").and_then(|r| r.parse().ok()),
        kv.get("data").cloned().unwrap_or_else(|| "n/a".into()),
        recovery,
    )
}

/// From our `interop-path` line: the frames the RC fast path carried of all our NIC
/// sent and received ("tx 830/836, rx 412/420"); the rest went through the firmware.
fn path_figure(text: &str) -> String {
    let Some(line) = text.lines().find_map(|l| l.strip_prefix("interop-path ")) else {
        return "-".into();
    };
    let kv: HashMap<&str, u64> = line
        .split_whitespace()
        .filter_map(|f| f.split_once('='))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect();
    let get = |k: &str| kv.get(k).copied().unwrap_or(0);
    format!(
        "tx {}/{}, rx {}/{}",
        get("fp_tx_frames"),
        get("fp_tx_frames") + get("frames_tx"),
        get("fp_rx_handled"),
        get("fp_rx_handled") + get("frames_rx")
    )
}

/// Runs the matrix with our stack as `role` ("client": the VM serves) at one MTU.
fn phase(
    env: &Env,
    mtu: u32,
    link_mtu: u32,
    role: &str,
    cases: &[Case],
    tag: &str,
    prelude: &str,
) -> Result<Vec<Cell>> {
    if cases.is_empty() {
        return Ok(Vec::new());
    }
    let mut vm_script = format!("{prelude}{RXE_COUNTERS}");
    for (i, c) in cases.iter().enumerate() {
        let port = BASE_PORT + i as u16;
        let name = c.name();
        let line = if role == "client" {
            format!(
                "echo '=== CASE {name}'; rxec before; timeout 150 {}; rc=$?; rxec after; echo \"=== RC {name} $rc\"\n",
                c.vm_cmd(mtu, port, None)
            )
        } else {
            format!(
                "echo '=== CASE {name}'; rxec before; ok=1; for i in $(seq 60); do timeout 150 {} && {{ ok=0; break; }}; sleep 0.5; done; rxec after; echo \"=== RC {name} $ok\"\n",
                c.vm_cmd(mtu, port, Some(c.peer_of_vm()))
            )
        };
        vm_script.push_str(&line);
    }
    let log = env.out.join(format!("{tag}-vm.log"));
    let mut vm = env.vm(1, link_mtu, &vm_script, &log)?;
    let mut cells = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let port = BASE_PORT + i as u16;
        let name = format!("{tag}-{}", c.name());
        let (cap, pcap) = env.capture(&name)?;
        let args = c.our_args(mtu, port, (role == "client").then_some(VM1));
        let (ok, text) = env.ours(&args, &[]);
        env.stop_capture(cap);
        std::fs::write(env.out.join(format!("{name}.log")), &text).map_err(|e| e.to_string())?;
        let (fig, retransmits, mut data, recovery) = our_figure(&text);
        if let (
            Kind::Perf("write_bw", None)
            | Kind::PerfInline("write_bw", _)
            | Kind::PerfCm("write_bw"),
            "client",
            true,
        ) = (&c.kind, role, ok)
        {
            data = write_payload_check(env, &pcap, c.size, mtu);
        }
        println!("  {name}: {} {fig}", if ok { "ok" } else { "FAILED" });
        if !ok {
            println!("    {}", text.lines().last().unwrap_or_default());
        }
        cells.push(Cell {
            ok,
            figure: fig,
            detail: text.lines().last().unwrap_or_default().to_string(),
            pcap: Some(pcap),
            retransmits,
            recovery,
            rxe_recovery: String::new(),
            data,
            path: path_figure(&text),
        });
    }
    let _ = vm.wait();
    let vm_log = std::fs::read_to_string(&log).unwrap_or_default();
    let secs = sections(&vm_log);
    for (c, cell) in cases.iter().zip(cells.iter_mut()) {
        let (vm_ok, text) = secs.get(&c.name()).cloned().unwrap_or_default();
        cell.rxe_recovery = rxe_counters(&text);
        if !vm_ok {
            cell.ok = false;
            cell.detail = format!("the VM's {} failed", c.vm_cmd(mtu, 0, None));
        }
        // Our server's own figures are rough (it is passive): show what rxe measured.
        if role == "server" {
            cell.figure = tool_figure(&text);
        }
    }
    Ok(cells)
}

/// A shell function for the VM: `rxec before|after` prints rxe's hardware counters
/// (`rxe-after completer_retry_err 3`), so each case's log holds what rxe counted.
const RXE_COUNTERS: &str = "rxec() { for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo \"rxe-$1 $(basename $f) $(cat $f)\"; done; }\n";

/// rxe's recovery counters over one case: after minus before, from `rxec`'s lines.
fn rxe_counters(text: &str) -> String {
    let read = |when: &str, name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(&format!("rxe-{when} {name} "))?;
            rest.trim().parse().ok()
        })
    };
    [
        "completer_retry_err",
        "rcvd_seq_err",
        "duplicate_request",
        "out_of_seq_request",
    ]
    .iter()
    .filter_map(|n| {
        Some(format!(
            "{n} {}",
            read("after", n)?.checked_sub(read("before", n)?)?
        ))
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// rxe against rxe: VM 1 serves, VM 2 runs the clients.
fn rxe_pair(env: &Env, mtu: u32, link_mtu: u32, cases: &[Case]) -> Result<Vec<String>> {
    if cases.is_empty() {
        return Ok(Vec::new());
    }
    let mut srv = String::new();
    let mut cli = String::new();
    for (i, c) in cases.iter().enumerate() {
        let port = BASE_PORT + i as u16;
        let name = c.name();
        // perftest -R between two perftests can fail on its own: the client's REQ for
        // the test QP may come before the server listens again, the server rejects it
        // and the client gives up, leaving the server waiting for a client that is gone
        // (docs/interop.md). So a failed server run is started once more, which the
        // table says, and the client keeps trying for longer than one server run.
        writeln!(
            srv,
            "echo '=== CASE {name}'; ok=1; for a in 1 2; do timeout 150 {} && {{ ok=0; break; }}; echo '=== SERVER-FAILED {name}'; done; echo \"=== RC {name} $ok\"",
            c.vm_cmd(mtu, port, None)
        )
        .ok();
        writeln!(cli, "echo '=== CASE {name}'; ok=1; end=$(($(date +%s) + 400)); while [ $(date +%s) -lt $end ]; do timeout 150 {} && {{ ok=0; break; }}; sleep 1; done; echo \"=== RC {name} $ok\"", c.vm_cmd(mtu, port, Some(VM1))).ok();
    }
    let l1 = env.out.join(format!("rxe-rxe-{mtu}-vm1.log"));
    let l2 = env.out.join(format!("rxe-rxe-{mtu}-vm2.log"));
    // VM 2's clients start once VM 1's rxe is ready (each retries while its server is
    // not listening yet).
    let mut a = env.vm(1, link_mtu, &srv, &l1)?;
    let mut b = match env.vm(2, link_mtu, &cli, &l2) {
        Ok(b) => b,
        Err(e) => {
            let _ = a.kill();
            let _ = a.wait();
            return Err(e);
        }
    };
    let _ = a.wait();
    let _ = b.wait();
    let secs = sections(&std::fs::read_to_string(&l2).unwrap_or_default());
    let servers = sections(&std::fs::read_to_string(&l1).unwrap_or_default());
    Ok(cases
        .iter()
        .map(|c| {
            let again = servers
                .get(&c.name())
                .is_some_and(|(_, t)| t.contains("=== SERVER-FAILED"));
            match (secs.get(&c.name()), again) {
                (Some((true, t)), false) => tool_figure(t),
                (Some((true, t)), true) => format!("{} (server's 2nd run)", tool_figure(t)),
                _ => "failed".into(),
            }
        })
        .collect())
}

/// write_bw as client: every WRITE packet we sent carries the source bytes at its offset.
fn write_payload_check(env: &Env, pcap: &Path, size: usize, mtu: u32) -> String {
    let ok = cmd("python3", &[])
        .arg(env.root.join("tools/rxe-vm/check_write_payload.py"))
        .arg(pcap)
        .args([OUR_IP, &size.to_string(), &mtu.to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        "checked on the wire"
    } else {
        "WRONG on the wire"
    }
    .into()
}

/// Checks one capture: (frames, frames `roce decode` rejected, tshark/ICRC verdict).
fn verify(env: &Env, pcap: &Path) -> (usize, usize, bool) {
    let out = cmd(env.roce.to_str().unwrap_or("roce"), &["decode", "--json"])
        .arg(pcap)
        .output();
    let (frames, bad) = match out {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout);
            (
                s.lines().count(),
                s.lines().filter(|l| l.contains("\"ok\":false")).count(),
            )
        }
        Err(_) => (0, usize::MAX),
    };
    let tshark_ok = cmd("python3", &[])
        .arg(&env.checker)
        .arg(pcap)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (frames, bad, tshark_ok)
}

pub fn interop(root: &Path) -> Result {
    let fastpath = std::env::var("INTEROP_FASTPATH").unwrap_or_else(|_| "on".into());
    if !["on", "off"].contains(&fastpath.as_str()) {
        return Err(format!("INTEROP_FASTPATH={fastpath}: on or off"));
    }
    let out = root.join("target/interop");
    let env = Env {
        root: root.to_path_buf(),
        script: root.join("tools/rxe-vm/run-rxe-vm.sh"),
        // A copy: a build in this tree during the run cannot change what runs.
        roce: out.join("roce"),
        out,
        checker: root.join("../shared/tools/check_with_tshark.py"),
        fastpath,
    };
    // Without it every capture's tshark column would read FAILED: say so at once.
    if !env.checker.is_file() {
        return Err(format!(
            "{}: not found (the shared tools beside this checkout check every capture)",
            env.checker.display()
        ));
    }
    let t0 = Instant::now();
    std::fs::create_dir_all(&env.out).map_err(|e| e.to_string())?;
    run(cmd("cargo", &["build", "-p", "roce-cli"]).current_dir(&env.root))?;
    std::fs::copy(root.join("target/debug/roce"), &env.roce)
        .map_err(|e| format!("copy roce: {e}"))?;
    let started = run_stamp(root, &env.fastpath);
    run(&mut cmd(
        env.script.to_str().unwrap_or_default(),
        &["build"],
    ))?;
    let _ = cmd(env.script.to_str().unwrap_or_default(), &["net-down"]).status();
    run(&mut cmd(
        env.script.to_str().unwrap_or_default(),
        &["net-up", "2"],
    ))?;
    let result = matrix_and_loss(&env);
    let _ = cmd(env.script.to_str().unwrap_or_default(), &["net-down"]).status();
    let report = format!(
        "{started}, {:.0} s.\n\n{}",
        t0.elapsed().as_secs_f64(),
        result?
    );
    let path = env.out.join("results.md");
    std::fs::write(&path, &report).map_err(|e| e.to_string())?;
    println!(
        "\n{report}\nwritten to {} in {:.0} s",
        path.display(),
        t0.elapsed().as_secs_f64()
    );
    if report.contains("| FAIL") {
        return Err("some interop runs failed (see the table)".into());
    }
    Ok(())
}

/// When, on what, and how: the start time (UTC), the commit (and whether the tree had
/// changes), the fast path setting, the load.
fn run_stamp(root: &Path, fastpath: &str) -> String {
    let out = |c: &mut Command| {
        c.output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let date = out(cmd("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).current_dir(root));
    let commit = out(cmd("git", &["rev-parse", "--short=10", "HEAD"]).current_dir(root));
    let dirty =
        !out(cmd("git", &["status", "--porcelain", "--untracked-files=no"]).current_dir(root))
            .is_empty();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "Run of {date} on commit {commit}{}, fast path {fastpath}, load {} at the start",
        if dirty {
            " (with uncommitted changes)"
        } else {
            ""
        },
        load.split_whitespace().next().unwrap_or("?")
    )
}

fn matrix_and_loss(env: &Env) -> Result<String> {
    // INTEROP_ONLY=a,b: only the cases whose names contain one of these; INTEROP_QUICK=1:
    // MTU 1024 only, without the rxe-to-rxe runs and the loss runs (for debugging).
    let only = std::env::var("INTEROP_ONLY").unwrap_or_default();
    let only: Vec<&str> = only.split(',').filter(|s| !s.is_empty()).collect();
    let quick = std::env::var_os("INTEROP_QUICK").is_some();
    let mut report = String::from(
        "| MTU | test | ours as | result | ours vs rxe | rxe vs rxe | data | our fast path | frames | roce decode | tshark+ICRC |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (mtu, link_mtu) in [(1024u32, 1500u32), (4096, 4200)] {
        env.set_link_mtu(link_mtu)?;
        let cases: Vec<Case> = matrix(mtu)
            .into_iter()
            .filter(|c| only.is_empty() || only.iter().any(|o| c.name().contains(o)))
            .collect();
        if quick && mtu != 1024 {
            continue;
        }
        println!("== MTU {mtu}: rxe vs rxe");
        let pair = if quick {
            vec!["-".to_string(); cases.len()]
        } else {
            rxe_pair(env, mtu, link_mtu, &cases)?
        };
        for role in ["client", "server"] {
            println!("== MTU {mtu}: ours as {role}");
            let cells = phase(
                env,
                mtu,
                link_mtu,
                role,
                &cases,
                &format!("{mtu}-{role}"),
                "",
            )?;
            for ((c, cell), rr) in cases.iter().zip(&cells).zip(&pair) {
                let (frames, bad, tshark) =
                    cell.pcap.as_ref().map_or((0, 0, false), |p| verify(env, p));
                let pass =
                    cell.ok && bad == 0 && tshark && frames > 0 && !cell.data.contains("WRONG");
                writeln!(
                    report,
                    "| {mtu} | {} | {role} | {} | {} | {rr} | {} | {} | {frames} | {} | {} |",
                    c.name(),
                    if pass { "pass" } else { "FAIL" },
                    cell.figure,
                    cell.data,
                    cell.path,
                    if bad == 0 {
                        "all ok".to_string()
                    } else {
                        format!("{bad} rejected")
                    },
                    if tshark { "ok" } else { "FAILED" },
                )
                .ok();
                if !pass {
                    writeln!(
                        report,
                        "|  | ({}) | | | | | | | | | |",
                        cell.detail.replace('|', "/")
                    )
                    .ok();
                }
            }
        }
    }
    if quick {
        return Ok(report);
    }
    // Loss: 1% of the frames our side sends are lost. This host's kernel has no netem,
    // so the VM's does it, on the ingress of its link (an ifb device): the frames from
    // our side are dropped before rxe sees them, as netem on our egress would.
    env.set_link_mtu(1500)?;
    let prelude =
        "T=/usr/bin/tc; ip link set ifb0 up; $T qdisc add dev eth0 handle ffff: ingress && \
        $T filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 && \
        $T qdisc add dev ifb0 root netem loss 1% && echo LOSS-ON\n";
    // READ requests are one small packet each: more of them, so some are lost.
    let lossy = [("write_bw", 65536, 100), ("read_bw", 4096, 1000)].map(|(t, size, iters)| Case {
        kind: Kind::Perf(t, None),
        size,
        iters,
    });
    writeln!(report, "\nWith `tc qdisc add dev ifb0 root netem loss 1%` on the VM's ingress (what our side sends), MTU 1024:\n\n| test | ours as | result | ours vs rxe | data | our retransmitted packets | our other counters | rxe's counters | frames | roce decode | tshark+ICRC |\n|---|---|---|---|---|---|---|---|---|---|---|").ok();
    for role in ["client", "server"] {
        let cells = phase(
            env,
            1024,
            1500,
            role,
            &lossy,
            &format!("loss-{role}"),
            prelude,
        )?;
        for (c, cell) in lossy.iter().zip(&cells) {
            let (frames, bad, tshark) =
                cell.pcap.as_ref().map_or((0, 0, false), |p| verify(env, p));
            let pass = cell.ok && bad == 0 && tshark && !cell.data.contains("WRONG");
            writeln!(
                report,
                "| {} | {role} | {} | {} | {} | {} | {} | {} | {frames} | {} | {} |",
                c.name(),
                if pass { "pass" } else { "FAIL" },
                cell.figure,
                cell.data,
                cell.retransmits.map_or("-".into(), |r| r.to_string()),
                cell.recovery,
                cell.rxe_recovery,
                if bad == 0 {
                    "all ok".to_string()
                } else {
                    format!("{bad} rejected")
                },
                if tshark { "ok" } else { "FAILED" },
            )
            .ok();
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_perftest_and_pingpong_figures() {
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 4096       100              3.75               3.75   \t\t   0.000960\n";
        assert_eq!(tool_figure(bw), "3.75 MB/s");
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n 4096    20          831.14         4028.81      1440.49  \t       1994.49\n";
        assert_eq!(tool_figure(lat), "1440.49 us");
        let pp = "409600 bytes in 0.27 seconds = 11.96 Mbit/sec\n50 iters in 0.27 seconds = 5478.80 usec/iter\n";
        assert_eq!(tool_figure(pp), "5478.80 us/iter");
    }

    #[test]
    fn reads_rxes_counters_around_a_case() {
        let text = "rxe-before completer_retry_err 2\nrxe-before rcvd_seq_err 5\nx\nrxe-after completer_retry_err 9\nrxe-after rcvd_seq_err 5\n";
        assert_eq!(rxe_counters(text), "completer_retry_err 7, rcvd_seq_err 0");
    }

    #[test]
    fn splits_the_vm_log_into_cases() {
        let log = "boot\n=== CASE a\nx\n=== RC a 0\n=== CASE b\ny\n=== RC b 1\n";
        let s = sections(log);
        assert_eq!(s["a"], (true, "x\n".to_string()));
        assert!(!s["b"].0);
    }
}
