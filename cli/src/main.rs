//! `roce`: decode and encode RoCE captures (and, as the project grows, run the
//! simulator and perftest-style benchmarks).

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

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
    /// Decode every frame of a pcap or pcapng capture (Ethernet link type).
    Decode {
        /// The capture to read.
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
    },
    /// perftest's benchmarks between two NICs (simulated fabric by default).
    Perf(roce_cli::perf_cmd::PerfArgs),
    /// rdma-core's ibv_rc/uc/ud_pingpong, either end, with the NIC on a raw link.
    Pingpong(roce_cli::interop::pingpong::PingpongArgs),
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
        /// JSON Lines input: bare packet objects or `roce decode --json` lines.
        input: PathBuf,
        /// The pcap to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum DatapathArg {
    Software,
    Rtl,
}

fn main() -> Result<()> {
    // A host-sized NIC is built on the stack before it is boxed: in a debug build that
    // takes more than the main thread's 8 MiB.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(run)?
        .join()
        .map_err(|_| anyhow::anyhow!("the command panicked"))?
}

fn run() -> Result<()> {
    match Cli::parse().command {
        Command::Decode {
            file,
            json,
            datapath,
            waves,
        } => {
            let decoder = match datapath {
                DatapathArg::Software => {
                    if waves.is_some() {
                        anyhow::bail!("--waves needs --datapath rtl");
                    }
                    roce_cli::Decoder::Software
                }
                DatapathArg::Rtl => roce_cli::Decoder::Rtl { waves },
            };
            let mut out = BufWriter::new(std::io::stdout().lock());
            roce_cli::decode_with(&file, json, &decoder, &mut out)?;
            out.flush()?;
        }
        Command::Perf(args) => {
            let mut out = std::io::stdout().lock();
            roce_cli::perf_cmd::run(&args, &mut out)?;
        }
        Command::Pingpong(args) => {
            let mut out = std::io::stdout().lock();
            roce_cli::interop::pingpong::run(&args, &mut out)?;
        }
        Command::Sim {
            scenario,
            output,
            threads,
        } => {
            let mut s = roce_cli::scenario::Scenario::load(&scenario)?;
            s.threads = threads;
            let outcome =
                roce_cli::scenario::run(&s, &mut roce_cli::progress::Progress::new(&s.name))?;
            print!("{}", outcome.table());
            for path in roce_cli::scenario::write(&s, &outcome, &output)? {
                eprintln!("wrote {}", path.display());
            }
        }
        Command::Encode { input, output } => {
            let n = roce_cli::encode(&input, &output)?;
            eprintln!("wrote {n} frames to {}", output.display());
        }
    }
    Ok(())
}
