//! `roce`: decode and encode RoCE captures, analyse them, run the simulator and
//! perftest-style benchmarks. This file parses arguments and prints; the work is done by
//! the library crates (`roce-capture` for captures).

use anyhow::Result;
use clap::{Parser, Subcommand};
use roce_capture::filter::{self, ErrorClass, IpNet, OpcodeClass};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "roce",
    version,
    about = "An open RoCEv2 RNIC: tools for its frames and its fabric"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode every frame of a pcap or pcapng capture, as it is read.
    Decode(DecodeArgs),
    /// What happened on each RoCE connection of a capture: resends and why, PSN gaps,
    /// NAKs, RNR waits, timeouts, congestion signals, ACK latency, PFC pauses.
    Analyze(AnalyzeArgs),
    /// perftest's benchmarks between two NICs (simulated fabric by default).
    Perf(Box<roce_cli::perf_cmd::PerfArgs>),
    /// rdma-core's ibv_rc/uc/ud_pingpong, either end, with the NIC on a raw link.
    Pingpong(roce_cli::interop::pingpong::PingpongArgs),
    /// librdmacm's rping, either end, connected through RDMA CM, with the NIC on a raw
    /// link.
    Rping(roce_cli::interop::rping::RpingArgs),
    /// rdma-core's ibv_srq_pingpong (RC QPs sharing one receive queue), either end.
    SrqPingpong(roce_cli::interop::srq_pingpong::SrqPingpongArgs),
    /// librdmacm's udaddy, either end: UD QPs found through RDMA CM (SIDR), then
    /// datagrams, with the NIC on a raw link.
    Udaddy(roce_cli::interop::udaddy::UdaddyArgs),
    /// Run a scenario file (see `scenarios/`): CSV time series, a PNG figure and a
    /// Markdown table into the output directory.
    Sim {
        /// The scenario (TOML).
        scenario: PathBuf,
        /// Where the CSV, PNG and table go.
        #[arg(short, long, default_value = "sim-out")]
        output: PathBuf,
        /// Threads for the parallel engine (`[fct]` scenarios; default: every core). The
        /// results do not depend on it.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Build a pcap from packet objects, one JSON object per line (packet-json.md).
    Encode {
        /// JSON Lines input: bare packet objects or `roce decode --json` lines; `-` reads
        /// standard input.
        input: PathBuf,
        /// The pcap to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(clap::Args)]
struct DecodeArgs {
    /// The capture to read; `-` reads standard input (`tcpdump -U -w - | roce decode -`).
    file: PathBuf,
    /// One JSON object per frame (packet-json.md) instead of one line of text.
    #[arg(long)]
    json: bool,
    /// Which decoder: roce-core in software, or the Verilated RTL RX datapath.
    #[arg(long, value_enum, default_value_t = DatapathArg::Software)]
    datapath: DatapathArg,
    /// With `--datapath rtl`: write the RTL's waveform (FST, for GTKWave) here.
    #[arg(long)]
    waves: Option<PathBuf>,
    #[command(flatten)]
    filter: FilterArgs,
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// The capture to read; `-` reads standard input.
    file: PathBuf,
    /// The whole analysis as one JSON object (docs/analyze.md), instead of the table.
    #[arg(long)]
    json: bool,
    /// Draw one connection's time line into this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The connection to draw: its number in the table [default: the one with the most
    /// frames].
    #[arg(long, requires = "plot")]
    connection: Option<usize>,
    /// The link rate, to turn PFC pause quanta into time (100g, 25g).
    #[arg(long, default_value = "100g")]
    link: String,
    /// The requesters' local ACK timeout (4.096 us x 2^code: 67ms for perftest's 14): a
    /// resend nothing explains counts as a timeout only after a silence this long
    /// [default: 8.192us, the shortest there is].
    #[arg(long, value_parser = filter::parse_time)]
    ack_timeout: Option<Duration>,
}

/// Which frames to show; every option given must hold.
#[derive(clap::Args)]
#[command(next_help_heading = "Filters (combinable; frames keep their numbers)")]
struct FilterArgs {
    /// Frames to these QPs: BTH destination QP, or UD source QP (decimal or 0x hex;
    /// repeat or separate with commas).
    #[arg(long, value_delimiter = ',', value_parser = parse_qpn)]
    qpn: Vec<u32>,
    /// Opcode classes (send, write, read, atomic, ack, nak, cnp), opcode names
    /// (RC_SEND_FIRST) or numbers.
    #[arg(long, value_delimiter = ',')]
    opcode: Vec<OpcodeClass>,
    /// Only frames that did not decode: any (the default), icrc, parse (all but the
    /// ICRC), or an error name of packet-json.md.
    #[arg(long, num_args = 0..=1, default_missing_value = "any")]
    error: Option<ErrorClass>,
    /// Frames from or to this address or prefix (10.0.0.1, fd00::/64); given twice, the
    /// conversation between the two.
    #[arg(long)]
    ip: Vec<IpNet>,
    /// Frames at or after this time since the first frame (1.5, 250ms, 20us).
    #[arg(long, value_parser = filter::parse_time)]
    from: Option<Duration>,
    /// Frames at or before this time since the first frame.
    #[arg(long, value_parser = filter::parse_time)]
    to: Option<Duration>,
}

impl FilterArgs {
    fn filter(self) -> Result<roce_capture::Filter> {
        if let (Some(from), Some(to)) = (self.from, self.to) {
            anyhow::ensure!(
                from <= to,
                "--from {from:?} is after --to {to:?}: no frame could be shown"
            );
        }
        Ok(roce_capture::Filter {
            qpns: self.qpn,
            opcodes: self.opcode,
            error: self.error,
            ips: self.ip,
            from: self.from,
            to: self.to,
        })
    }
}

fn parse_qpn(s: &str) -> Result<u32, String> {
    filter::parse_uint(s)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n < 1 << 24)
        .ok_or_else(|| format!("{s:?} is not a 24-bit QP number"))
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DatapathArg {
    Software,
    Rtl,
}

fn main() -> ExitCode {
    // A host-sized NIC is built on the stack before it is boxed: in a debug build that
    // takes more than the main thread's 8 MiB.
    let joined = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(run)
        .map_err(anyhow::Error::from)
        .and_then(|t| {
            t.join()
                .map_err(|_| anyhow::anyhow!("the command panicked"))
        });
    match joined.and_then(|r| r) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`roce decode big.pcap | head`): as command-line tools
        // do, stop quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, causes after colons; no backtrace for a user's mistake.
            let _ = writeln!(std::io::stderr(), "Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// A warning on standard error (which may itself be closed: then it is dropped).
fn warn(msg: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn run() -> Result<()> {
    let mut out = std::io::stdout().lock();
    match Cli::parse().command {
        Command::Decode(args) => decode(args, &mut out)?,
        Command::Analyze(args) => analyze(args, &mut out)?,
        Command::Perf(args) => roce_cli::perf_cmd::run(&args, &mut out)?,
        Command::Pingpong(args) => {
            roce_cli::interop::pingpong::run(&args, &mut out)?;
        }
        Command::Rping(args) => {
            roce_cli::interop::rping::run(&args, &mut out)?;
        }
        Command::SrqPingpong(args) => roce_cli::interop::srq_pingpong::run(&args, &mut out)?,
        Command::Udaddy(args) => {
            roce_cli::interop::udaddy::run(&args, &mut out)?;
        }
        Command::Sim {
            scenario,
            output,
            threads,
        } => {
            let mut s = roce_cli::scenario::Scenario::load(&scenario)?;
            s.threads = threads;
            let bar = roce_cli::progress::bar(&s.name);
            let outcome = roce_cli::scenario::run(&s, &bar)?;
            bar.finish_and_clear();
            write!(out, "{}", outcome.table())?;
            out.flush()?;
            if let roce_cli::scenario::Outcome::Fct(r) = &outcome {
                warn(format_args!("{}", r.engine_report()));
            }
            for path in roce_cli::scenario::write(&s, &outcome, &output)? {
                warn(format_args!("wrote {}", path.display()));
            }
        }
        Command::Encode { input, output } => {
            let mut writer = roce_capture::Writer::create(&output)?;
            let done = roce_capture::encode(
                roce_capture::open_text(&input)?,
                &roce_capture::name(&input),
                &mut writer,
            )?;
            writer.finish()?;
            if let Some(line) = done.first_skipped {
                warn(format_args!(
                    "skipped {} decode lines of frames that did not decode (the first is line {line})",
                    done.skipped
                ));
            }
            warn(format_args!(
                "wrote {} frames to {}",
                done.frames,
                output.display()
            ));
        }
    }
    out.flush()?;
    Ok(())
}

fn decode(args: DecodeArgs, out: &mut impl Write) -> Result<()> {
    let filter = args.filter.filter()?;
    let mut reader = roce_capture::open(&args.file)?;
    let format = if args.json {
        roce_capture::Format::Json
    } else {
        roce_capture::Format::Text
    };
    let name = roce_capture::name(&args.file);
    let outcome = match args.datapath {
        DatapathArg::Software => {
            if args.waves.is_some() {
                anyhow::bail!("--waves needs --datapath rtl");
            }
            roce_capture::decode(
                &mut reader,
                &mut roce_capture::Software,
                format,
                &filter,
                out,
            )
        }
        DatapathArg::Rtl => {
            let mut rtl = roce_capture::rtl::Rtl::new(args.waves.as_deref())?;
            roce_capture::decode(&mut reader, &mut rtl, format, &filter, out)
        }
    }
    .map_err(|e| e.context(name.clone()))?;
    if let Some(t) = outcome.truncated {
        warn(format_args!("warning: {name}: {t}"));
    }
    Ok(())
}

fn analyze(args: AnalyzeArgs, out: &mut impl Write) -> Result<()> {
    use roce_capture::analyze;
    let mut reader = roce_capture::open(&args.file)?;
    let options = analyze::Options {
        link_bps: roce_cli::perf_cmd::parse_rate(&args.link)?,
        timelines: args.plot.is_some(),
        min_ack_timeout_ns: args
            .ack_timeout
            .map_or(analyze::SHORTEST_ACK_TIMEOUT_NS, |t| t.as_nanos() as u64),
    };
    let (mut analyzer, end) = analyze::run(&mut reader, options);
    if let Some(t) = reader.truncated() {
        warn(format_args!(
            "warning: {}: {t}",
            roce_capture::name(&args.file)
        ));
    }
    let report = analyzer.finish();
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", report.table())?;
    }
    if let Some(path) = &args.plot {
        let id = match args.connection {
            Some(id) => id,
            None => report
                .connections
                .iter()
                .max_by_key(|c| c.a_to_b.packets + c.b_to_a.as_ref().map_or(0, |d| d.packets))
                .map_or(1, |c| c.id),
        };
        analyzer.plot(id, path)?;
        warn(format_args!(
            "wrote connection {id}'s time line to {}",
            path.display()
        ));
    }
    end.map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (the analysis above covers the {} frames before it)",
            roce_capture::name(&args.file),
            report.frames
        )
    })
}
