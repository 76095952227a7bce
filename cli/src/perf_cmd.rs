//! The command line of `roce perf`: perftest's options where they fit, plus the fabric.

use crate::dcb_args::DcbArgs;
use crate::perf::{self, report, Params, Test};
use crate::progress;
use anyhow::{bail, Context, Result};
use roce_core::transport::{AckTimeout, Mtu, SrAttr, SR_WINDOW};
use roce_device::soc::{self, SocNic};
use roce_device::NicModel;
use roce_sim::{Faults, LinkConfig};
use roce_testbed::nic::Datapath;
use roce_testbed::rtl_dcb::RtlDcbConfig;
use roce_testbed::{Direct, HostPath, NicNode, Sim, World};
use std::io::Write;
use std::rc::Rc;

/// `roce perf` options.
#[derive(clap::Args, Debug, Clone)]
pub struct PerfArgs {
    /// The benchmark.
    #[arg(value_enum)]
    pub test: Test,
    /// Message size in bytes [default: 65536 for bandwidth, 2 for latency tests].
    #[arg(short = 's', long)]
    pub size: Option<usize>,
    /// Iterations per QP [default: 5000 for bandwidth, 1000 for latency tests].
    #[arg(short = 'n', long)]
    pub iters: Option<usize>,
    /// Number of QP pairs.
    #[arg(short = 'q', long, default_value_t = 1)]
    pub qps: usize,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long, default_value_t = 4096)]
    pub mtu: u32,
    /// Outstanding work requests per QP.
    #[arg(long, default_value_t = 128)]
    pub tx_depth: usize,
    /// perftest's `-I`: SENDs and WRITEs of at most this many bytes carry their payload
    /// inline (`IBV_SEND_INLINE`; the QP asks for this `max_inline_data`). With
    /// --server/--client only.
    #[arg(short = 'I', long, default_value_t = 0)]
    pub inline_size: u32,
    /// QP local ACK timeout exponent: 4.096 us x 2^timeout (perftest's `-u`).
    #[arg(short = 'u', long, default_value_t = 14)]
    pub qp_timeout: u8,
    /// Run every size from 2 bytes to 8 MiB, doubling.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Report bandwidth in Gb/s rather than MB/s.
    #[arg(long)]
    pub report_gbits: bool,
    /// Link rate, e.g. 100g, 25g, 400g.
    #[arg(long, default_value = "100g")]
    pub link: String,
    /// One-way propagation delay of each link, e.g. 2us, 500ns.
    #[arg(long, default_value = "2us")]
    pub delay: String,
    /// Probability that a link loses a frame.
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    /// Selective repeat (IRN style) instead of Go-Back-N, on both ends of every QP.
    #[arg(long)]
    pub selective_repeat: bool,
    /// With --selective-repeat: most PSNs in flight per QP (IRN's BDP cap; 0 = the
    /// port's window of 128).
    #[arg(long, default_value_t = 0)]
    pub max_inflight: u16,
    /// With --selective-repeat: IRN's RTO_low, used while at most 3 packets are in
    /// flight (rounded up to 4.096 us * 2^n; 0 = off).
    #[arg(long, default_value = "64us")]
    pub rto_low: String,
    /// Seed of the simulation's randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The NIC: the firmware runtime over the software model or the Verilated RTL
    /// datapath, or the firmware image on the Verilated SoC (`soc`: needs
    /// `firmware/image/make-images.sh` run first).
    #[arg(long, value_enum, default_value_t = Backend::Model)]
    pub backend: Backend,
    /// The RC fast path (`docs/fastpath.md`) as the NIC's hardware (`on`: its software
    /// model, or with `--backend rtl` the RTL fast path), or the firmware handling every
    /// packet (`off`). With `--backend soc`: the SoC's own fast path (the RTL in the SoC,
    /// driven by the firmware image over MMIO), or its firmware alone.
    #[arg(long, value_enum, default_value_t = crate::interop::OnOff::On)]
    pub fastpath: crate::interop::OnOff,
    /// With `--backend soc`: an FST waveform of the whole client SoC to this file (the
    /// server's beside it, `NAME.server.fst`). Slow: every signal, every cycle.
    #[arg(long)]
    pub waves: Option<std::path::PathBuf>,
    /// Where the NICs meet: the simulated fabric, or directly in memory (wall clock).
    #[arg(long, value_enum, default_value_t = Fabric::Sim)]
    pub fabric: Fabric,
    /// What a QP context cache miss or write-back costs the simulated NIC: PCIe Gen3 x16
    /// (1 us read round trip, 14 GB/s), or nothing (`docs/scale.md`).
    #[arg(long, value_enum, default_value_t = HostPathArg::Pcie3)]
    pub host_path: HostPathArg,
    /// Write every frame on the wire to this pcap.
    #[arg(long)]
    pub pcap: Option<std::path::PathBuf>,
    /// Where --pcap listens: `link`, what the link delivers both ways (lost frames are
    /// not in it); `client` or `server`, as tcpdump on that host would: every frame it
    /// sends, lost or not, and those that reach it.
    #[arg(long, value_enum, default_value_t = PcapAt::Link, requires = "pcap")]
    pub pcap_at: PcapAt,
    /// One JSON object per line and size instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Against perftest on another machine: wait for its client (`ib_write_bw HOST`)
    /// on the TCP port, with the NIC on a raw link (`--iface`, `--ip`).
    #[arg(long, conflicts_with = "client")]
    pub server: bool,
    /// Against perftest on another machine: connect to its server (`ib_write_bw -x 1`).
    #[arg(long)]
    pub client: Option<String>,
    /// perftest's `-R`: connect the QP through RDMA CM and exchange over a CM
    /// connection instead of TCP (`--client` is then the peer's RDMA address, `--port`
    /// its RDMA CM port). Every test but atomic_bw.
    #[arg(short = 'R', long = "rdma-cm")]
    pub rdma_cm: bool,
    /// atomic_bw's operation, as `ib_atomic_bw -A`.
    #[arg(short = 'A', long, value_enum, default_value = "FETCH_AND_ADD")]
    pub atomic: crate::interop::perftest::Atomic,
    #[command(flatten)]
    pub raw: crate::interop::LinkArgs,
    #[command(flatten)]
    pub dcb: crate::dcb_args::DcbArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Model,
    Rtl,
    Soc,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPathArg {
    Pcie3,
    Free,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcapAt {
    Link,
    Client,
    Server,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fabric {
    Sim,
    Direct,
}

/// Parses `100g`, `25G`, `400g`, `10m` into bits per second.
pub fn parse_rate(s: &str) -> Result<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mult) = match s.strip_suffix('g') {
        Some(n) => (n, 1e9),
        None => match s.strip_suffix('m') {
            Some(n) => (n, 1e6),
            None => (s.as_str(), 1.0),
        },
    };
    let v: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("bad rate {s:?} (try 100g)"))?;
    if v <= 0.0 {
        bail!("rate must be positive");
    }
    Ok((v * mult) as u64)
}

/// Parses `2us`, `500ns`, `1ms`, `0` into nanoseconds.
pub fn parse_duration(s: &str) -> Result<u64> {
    let s = s.trim().to_ascii_lowercase();
    for (suffix, mult) in [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)] {
        if let Some(n) = s.strip_suffix(suffix) {
            let v: f64 = n
                .parse()
                .map_err(|_| anyhow::anyhow!("bad duration {s:?} (try 2us)"))?;
            return Ok((v * mult).round() as u64);
        }
    }
    if s == "0" {
        return Ok(0);
    }
    bail!("bad duration {s:?}: give a unit (ns, us, ms, s)")
}

/// The shortest ACK-timeout code (4.096 us * 2^n) of at least `ns`; 0 (no timer) for 0.
pub fn ack_timeout_at_least(ns: u64) -> Result<AckTimeout> {
    if ns == 0 {
        return Ok(AckTimeout::INFINITE);
    }
    (1..=31u8)
        .find(|&n| 4096u64 << n >= ns)
        .and_then(AckTimeout::new)
        .ok_or_else(|| anyhow::anyhow!("timeout of {ns} ns is beyond 4.096 us * 2^31"))
}

/// An IB MTU given in bytes: 256, 512, 1024, 2048 or 4096.
pub fn parse_mtu(bytes: u32) -> Result<Mtu> {
    Mtu::from_bytes_floor(bytes)
        .filter(|m| m.bytes() == bytes)
        .ok_or_else(|| anyhow::anyhow!("MTU {bytes}: use 256, 512, 1024, 2048 or 4096"))
}

/// Runs `roce perf` and prints its report.
pub fn run(args: &PerfArgs, out: &mut impl Write) -> Result<()> {
    let latency = args.test.is_latency();
    let sizes: Vec<usize> = if args.all {
        (1..=23).map(|k| 1usize << k).collect()
    } else {
        vec![args.size.unwrap_or(if latency { 2 } else { 65536 })]
    };
    let iters = args.iters.unwrap_or(if latency { 1000 } else { 5000 });
    if args.server || args.client.is_some() {
        return run_wire(args, sizes, iters, out);
    }
    let link_bps = parse_rate(&args.link)?;
    let delay = parse_duration(&args.delay)?;
    let setting = match args.fabric {
        Fabric::Sim => format!(
            "Simulated fabric: {} links, {} propagation delay, loss {}, seed {}",
            args.link, args.delay, args.loss, args.seed
        ),
        Fabric::Direct => "Direct: two NICs connected in memory, wall-clock timing".to_string(),
    };
    let selective_repeat = if args.selective_repeat {
        if u32::from(args.max_inflight) > SR_WINDOW {
            bail!("--max-inflight: at most {SR_WINDOW}");
        }
        Some(SrAttr {
            enabled: true,
            max_inflight: args.max_inflight,
            rto_low: ack_timeout_at_least(parse_duration(&args.rto_low)?)?,
        })
    } else {
        None
    };
    let mut printed_header = false;
    for size in sizes {
        let mut dcb_footer = None;
        let p = Params {
            test: args.test,
            size,
            iters,
            qps: args.qps,
            mtu: parse_mtu(args.mtu)?,
            tx_depth: args.tx_depth,
            selective_repeat,
            timeout: args.qp_timeout,
        };
        let (nics, socs) = boot(args, &p)?;
        let soc_run = socs.as_ref().map(SocRun::start);
        let bar = progress::bar(p.test.name());
        let m = match args.fabric {
            Fabric::Direct => {
                if args.pcap.is_some() {
                    bail!("--pcap needs the simulated fabric (frames have no wire time in --fabric direct)");
                }
                if args.dcb.rtl_dcb {
                    bail!(
                        "--rtl-dcb needs the simulated fabric (the block is clocked with its time)"
                    );
                }
                let mut direct = Direct::new(nics)?;
                set_dcb(&direct, &args.dcb)?;
                perf::run(&mut direct, &p, &bar)?
            }
            Fabric::Sim => {
                let faults = Faults {
                    loss: args.loss,
                    ..Faults::default()
                };
                let link = LinkConfig::new(link_bps, delay).with_faults(faults);
                let path = match args.host_path {
                    HostPathArg::Pcie3 => HostPath::PCIE_GEN3_X16,
                    HostPathArg::Free => HostPath::FREE,
                };
                let nodes = dcb_nodes(
                    nics.map(|n| NicNode::new(n).with_host_path(path)),
                    &args.dcb,
                )?;
                let mut sim = Sim::connect(nodes, link, args.seed)?;
                set_dcb(&sim, &args.dcb)?;
                let tap = match &args.pcap {
                    Some(path) => {
                        let file = std::fs::File::create(path)
                            .with_context(|| format!("cannot create {}", path.display()))?;
                        let out = std::io::BufWriter::new(file);
                        Some(match args.pcap_at {
                            PcapAt::Link => sim.fabric.tap(sim.link, out)?,
                            PcapAt::Client => sim.fabric.tap_end(sim.link, 0, out)?,
                            PcapAt::Server => sim.fabric.tap_end(sim.link, 1, out)?,
                        })
                    }
                    None => None,
                };
                let m = perf::run(&mut sim, &p, &bar)?;
                if let Some(t) = tap {
                    sim.fabric.close_tap(t)?;
                }
                if args.dcb.rtl_dcb {
                    dcb_footer = Some(rtl_dcb_footer(&sim)?);
                }
                m
            }
        };
        bar.finish_and_clear();
        let f = report::figures(&p, &m);
        if args.json {
            writeln!(out, "{}", report::json(&p, &m, &f, link_bps as f64 / 1e9))?;
        } else {
            if !printed_header {
                write!(out, "{}", report::header(&p, &setting, args.report_gbits))?;
                printed_header = true;
            }
            writeln!(out, "{}", report::row(&p, &f, args.report_gbits))?;
            if !args.all {
                writeln!(out, "{}", report::footer(&m))?;
            }
            if let Some(r) = &soc_run {
                writeln!(out, "{}", r.footer())?;
            }
            if let Some(f) = &dcb_footer {
                writeln!(out, "{f}")?;
            }
        }
    }
    Ok(())
}

/// The two fabric nodes, behind the DCB block's RTL with `--rtl-dcb` (the server's
/// receive buffer drained at `--drain`).
fn dcb_nodes(nodes: [NicNode; 2], dcb: &DcbArgs) -> Result<[NicNode; 2]> {
    if !dcb.rtl_dcb {
        return Ok(nodes);
    }
    let drain_bps = dcb.drain.as_deref().map(parse_rate).transpose()?;
    let [a, b] = nodes;
    let rtl = |n: NicNode, drain_bps| {
        n.with_rtl_dcb(RtlDcbConfig {
            drain_bps,
            ..RtlDcbConfig::default()
        })
        .map_err(|e| anyhow::anyhow!("--rtl-dcb: the DCB RTL: {e}"))
    };
    Ok([rtl(a, None)?, rtl(b, drain_bps)?])
}

/// Writes the DCB options to both NICs (MODIFY_DCB over what QUERY_DCB returns); the
/// NIC's refusal is the error.
fn set_dcb(world: &impl World, dcb: &DcbArgs) -> Result<()> {
    if !dcb.sets_port() {
        return Ok(());
    }
    for (side, ctx) in ["client", "server"].iter().zip(world.contexts()) {
        let cfg = dcb.apply(ctx.query_dcb()?)?;
        // The NIC's BadParam does not say which rule broke; the core's does (against
        // the NIC's own receive buffer).
        let why = cfg.validate(ctx.dcb_rx_buffer()?).err().unwrap_or("");
        ctx.set_dcb(&cfg)
            .with_context(|| format!("the {side} NIC refused the DCB settings: {why}"))?;
    }
    Ok(())
}

/// What each NIC's DCB RTL did over the run (`--rtl-dcb`); an error if the block and
/// the core's model beside it ever differed.
fn rtl_dcb_footer(sim: &Sim) -> Result<String> {
    let mut out = String::from(" DCB RTL (checked against the core's model every cycle):");
    for (side, name) in [(0, "client"), (1, "server")] {
        let Some(r) = sim.node(side).rtl_dcb() else {
            bail!("the {name} NIC has no DCB RTL");
        };
        if let Some(e) = r.lockstep_error() {
            bail!("the {name} NIC's DCB RTL and the core's model differ: {e}");
        }
        let k = r.counters();
        out += &format!(
            "\n  {name}: PFC frames sent {} (XOFF on priorities {:#04x}), received {} (paused {:#04x}), receive drops {}, {} decisions checked",
            k.pfc_frames_sent, k.ever_xoff.0, k.pfc_frames_received, k.ever_paused.0, k.rx_drops, k.decisions_checked
        );
    }
    Ok(out)
}

/// The two NICs `args` asks for, and the SoCs among them (`--backend soc`), whose
/// firmware counts what the footer reports.
#[allow(clippy::type_complexity)]
fn boot(args: &PerfArgs, p: &Params) -> Result<([Rc<dyn NicModel>; 2], Option<[Rc<SocNic>; 2]>)> {
    if args.waves.is_some() && args.backend != Backend::Soc {
        bail!("--waves needs --backend soc");
    }
    let fastpath = args.fastpath == crate::interop::OnOff::On;
    Ok(match args.backend {
        Backend::Model => (perf::nics(p, Datapath::Software, fastpath)?, None),
        Backend::Rtl => {
            let rtl = Datapath::Rtl(roce_hdl_sim::DataWidth::W512);
            (perf::nics(p, rtl, fastpath)?, None)
        }
        Backend::Soc => {
            let socs = perf::soc_nics(p, args.waves.as_deref(), fastpath)?;
            (socs.clone().map(|s| s as Rc<dyn NicModel>), Some(socs))
        }
    })
}

/// The SoCs' firmware counters, simulated cycles and CPU time when a run started.
struct SocRun {
    socs: [Rc<SocNic>; 2],
    stats: [roce_hdl_sim::FirmwareStats; 2],
    cycles: u64,
    cpu_ns: u64,
}

impl SocRun {
    fn start(socs: &[Rc<SocNic>; 2]) -> Self {
        Self {
            socs: socs.clone(),
            stats: socs.each_ref().map(|n| n.firmware_stats()),
            cycles: socs.iter().map(|n| n.cycles()).sum(),
            cpu_ns: soc::thread_cpu_ns(),
        }
    }

    /// What the SoCs did since [`SocRun::start`] ([`report::soc_footer`]).
    fn footer(&self) -> String {
        let deltas = [0, 1].map(|i| self.socs[i].firmware_stats().since(&self.stats[i]));
        let cycles = self.socs.iter().map(|n| n.cycles()).sum::<u64>() - self.cycles;
        let cpu_ns = soc::thread_cpu_ns() - self.cpu_ns;
        report::soc_footer(&deltas, cycles, cpu_ns, soc::CLOCK_HZ)
    }
}

/// `roce perf TEST --server | --client HOST`: one run per size against perftest.
fn run_wire(args: &PerfArgs, sizes: Vec<usize>, iters: usize, out: &mut impl Write) -> Result<()> {
    use crate::interop::{perftest, Role};
    let role = match &args.client {
        Some(h) => Role::Client(h.clone()),
        None => Role::Server,
    };
    for size in sizes {
        let p = perftest::WireParams {
            test: args.test,
            atomic: args.atomic,
            size,
            iters,
            mtu: parse_mtu(args.mtu)?,
            tx_depth: args.tx_depth,
            role: role.clone(),
            link: args.raw.clone(),
            fastpath: args.fastpath,
            inline: args.inline_size,
            rdma_cm: args.rdma_cm,
        };
        perftest::run(&p, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_low_rounds_up_to_an_ack_timeout_code() {
        // 4.096 us * 2^n (roce-facts §6.4): 8.192 us is code 1, 65.536 us code 4.
        let code = |ns| ack_timeout_at_least(ns).unwrap().code();
        assert_eq!(code(0), 0);
        assert_eq!(code(1), 1);
        assert_eq!(code(8_192), 1);
        assert_eq!(code(8_193), 2);
        assert_eq!(code(64_000), 4);
        assert_eq!(code(65_537), 5);
        assert!(ack_timeout_at_least(4096 << 32).is_err());
    }
}
