//! `roce perf`: perftest's benchmarks (`ib_write_bw`, `ib_read_lat`, ...) between two
//! NICs, written against the verbs API exactly as an application would be.

pub mod report;

use crate::progress::ProgressBar;
use anyhow::{bail, Context as _, Result};
use roce_core::memory::AccessFlags;
use roce_core::transport::{Mtu, QpType, RecvWr, SendWr, SrAttr, WcStatus, WorkCompletion, WrOp};
use roce_device::soc::{self, SocNic};
use roce_device::NicModel;
use roce_host::{CompletionQueue, ConnectOptions, Context, MemoryRegion, QueuePair};
use roce_testbed::nic::{self, Datapath};
use roce_testbed::traffic::{connect_pair, signaled, top_up};
use roce_testbed::World;
use std::collections::VecDeque;
use std::rc::Rc;

/// The benchmarks, named as perftest's binaries without the `ib_` prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[clap(rename_all = "snake_case")]
pub enum Test {
    WriteBw,
    ReadBw,
    SendBw,
    AtomicBw,
    WriteLat,
    ReadLat,
    SendLat,
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Self::WriteBw => "write_bw",
            Self::ReadBw => "read_bw",
            Self::SendBw => "send_bw",
            Self::AtomicBw => "atomic_bw",
            Self::WriteLat => "write_lat",
            Self::ReadLat => "read_lat",
            Self::SendLat => "send_lat",
        }
    }
    pub fn is_latency(self) -> bool {
        matches!(self, Self::WriteLat | Self::ReadLat | Self::SendLat)
    }
}

/// One benchmark's parameters (perftest's where they exist).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub test: Test,
    /// Message size in bytes (`-s`).
    pub size: usize,
    /// Iterations per QP (`-n`).
    pub iters: usize,
    /// QP pairs (`-q`).
    pub qps: usize,
    /// Path MTU (`-m`).
    pub mtu: Mtu,
    /// Outstanding WRs per QP (`--tx-depth`).
    pub tx_depth: usize,
    /// Selective repeat on both ends of every QP (`--selective-repeat`), or Go-Back-N.
    pub selective_repeat: Option<SrAttr>,
    /// Local ACK timeout exponent: 4.096 us x 2^timeout (`-u`, `--qp-timeout`).
    pub timeout: u8,
}

/// What one run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measurement {
    /// (post time, completion time) per message, in ns.
    pub samples: Vec<(u64, u64)>,
    /// First post to last completion, ns.
    pub elapsed_ns: u64,
    pub retransmits: u64,
    pub drops: u64,
    /// Both NICs: QP contexts brought in from host memory, and the context DMA bytes
    /// (both ways; `docs/scale.md`).
    pub qp_cache_misses: u64,
    pub qp_ctx_dma_bytes: u64,
    /// Both NICs: frames their firmware handled (with a fast path, its exceptions).
    pub fw_rx_frames: u64,
    /// Both NICs' fast paths: frames they took themselves, frames whose context entry
    /// held another QP (misses), and entries the firmware emptied (`docs/scale.md`).
    pub fp_rx_frames: u64,
    pub fp_ctx_cache_misses: u64,
    pub fp_ctx_cache_evictions: u64,
    pub simulated: bool,
}

/// Boots the two NICs for `p` on `datapath` (10.0.0.1 and 10.0.0.2; host-sized tables
/// when the firmware's are too small for its QPs), with the RC fast path's model as
/// their hardware (`fastpath`) or the firmware alone.
pub fn nics(p: &Params, datapath: Datapath, fastpath: bool) -> Result<[Rc<dyn NicModel>; 2]> {
    let caps = nic::capacities(p.qps, p.tx_depth);
    let boot = |side| {
        nic::boot(datapath, fastpath, nic::port_config(side), caps)
            .map_err(|e| anyhow::anyhow!("the RTL datapath: {e}"))
    };
    Ok([boot(0)?, boot(1)?])
}

/// The two NICs as SoCs (`--backend soc`): the firmware image of `make-images.sh` on
/// the Verilated SoC, 10.0.0.1 and 10.0.0.2. Their tables are the firmware's, so `p`
/// must fit them. With `waves`, the client dumps an FST waveform of the whole SoC there
/// and the server beside it (`NAME.server.fst`). `fastpath` sets the strap of the SoCs'
/// RC fast path (`docs/fastpath.md` §6, "In the SoC").
pub fn soc_nics(
    p: &Params,
    waves: Option<&std::path::Path>,
    fastpath: bool,
) -> Result<[Rc<SocNic>; 2]> {
    use roce_firmware::config::{QPS, SQ};
    if p.qps > QPS || p.tx_depth > SQ {
        bail!(
            "the SoC's firmware holds {QPS} QPs of {SQ} send WRs each: lower --qps or --tx-depth"
        );
    }
    let image = soc::default_image();
    let boot = |side: usize| {
        let cfg = nic::port_config(side);
        let trace = waves.map(|w| match side {
            0 => w.to_path_buf(),
            _ => w.with_extension("server.fst"),
        });
        SocNic::new(&image, cfg.mac, cfg.gid(), trace.as_deref(), fastpath)
            .map_err(|e| anyhow::anyhow!("the SoC: {e}"))
    };
    Ok([boot(0)?, boot(1)?])
}

struct Side {
    cq: CompletionQueue,
    qps: Vec<QueuePair>,
    /// One region, a buffer per QP in it (`Side::buf`): thousands of QPs need no
    /// thousands of MRs.
    mr: MemoryRegion,
    /// Bytes of each QP's buffer.
    stride: usize,
}

impl Side {
    /// Offset of QP `i`'s buffer in `mr`: two halves of `size`, what this side sends
    /// from and what the peer writes into (the latency tests watch the second half).
    fn buf(&self, i: usize) -> u64 {
        (i * self.stride) as u64
    }
}

fn setup(ctxs: [&Context; 2], p: &Params) -> Result<[Side; 2]> {
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mut sides = Vec::new();
    for ctx in ctxs {
        // More QPs than the NIC's slots: their contexts go to host memory (ICM).
        if p.qps > ctx.query_device().max_qp.get() as usize {
            let n = u32::try_from(p.qps).context("QP count")?;
            ctx.set_icm(n)
                .context("hand the NIC host memory for QP contexts")?;
        }
        let pd = ctx.alloc_pd()?;
        let depth = (2 * p.tx_depth * p.qps).clamp(16, 1 << roce_firmware::runtime::MAX_LOG_DEPTH);
        let cq = ctx.create_cq(depth)?;
        let mut qps = Vec::new();
        for _ in 0..p.qps {
            let qp = pd
                .create_qp(QpType::Rc, &cq, &cq)
                .max_send_wr(p.tx_depth)
                .max_recv_wr(p.tx_depth)
                .build()?;
            qps.push(qp);
        }
        let stride = 2 * p.size.max(8);
        let mr = pd.reg_mr(stride * p.qps, access)?;
        sides.push(Side {
            cq,
            qps,
            mr,
            stride,
        });
    }
    let [a, b]: [Side; 2] = sides.try_into().map_err(|_| anyhow::anyhow!("two sides"))?;
    let opts = ConnectOptions {
        mtu: p.mtu,
        selective_repeat: p.selective_repeat,
        timeout: p.timeout,
        ..ConnectOptions::default()
    };
    for (i, (qa, qb)) in a.qps.iter().zip(&b.qps).enumerate() {
        connect_pair(qa, qb, i, &opts)?;
    }
    Ok([a, b])
}

/// Runs one benchmark in `world`, showing how far it is on `progress`.
pub fn run(world: &mut dyn World, p: &Params, progress: &ProgressBar) -> Result<Measurement> {
    if p.size == 0 && p.test != Test::AtomicBw {
        bail!("message size must be at least 1 byte");
    }
    let [a, b] = setup(world.contexts(), p)?;
    world.catch_up();
    let mut m = if p.test.is_latency() {
        latency(world, p, &a, &b, progress)?
    } else {
        // What moves, and where it lands: READ brings the server's buffers to the client.
        let moved = match p.test {
            Test::WriteBw | Test::SendBw => Some((&a, &b)),
            Test::ReadBw => Some((&b, &a)),
            _ => None,
        };
        if let Some((from, _)) = moved {
            fill(from, p)?;
        }
        let m = bandwidth(world, p, &a, &b, progress)?;
        if let Some((_, to)) = moved {
            check_data(to, p)?;
        }
        m
    };
    let c = world.counters();
    m.retransmits = c.retransmits;
    for ctx in world.contexts() {
        let r = ctx
            .query_counters()
            .context("read the NIC's counters")?
            .runtime;
        m.qp_cache_misses += r.qp_cache_misses;
        m.qp_ctx_dma_bytes += r.qp_ctx_dma_bytes;
        m.fw_rx_frames += r.frames_rx;
        m.fp_rx_frames += r.fastpath.rx_handled;
        m.fp_ctx_cache_misses += r.fp_ctx_cache_misses;
        m.fp_ctx_cache_evictions += r.fp_ctx_cache_evictions;
    }
    m.drops = c.drops;
    m.simulated = world.simulated();
    Ok(m)
}

/// Byte `k` of QP `i`'s message: differs between QPs, so data that lands in another
/// QP's buffer is caught.
fn pattern(i: usize, k: usize) -> u8 {
    ((i as u32).wrapping_mul(0x9e37_79b1) ^ (k as u32).wrapping_mul(0x85eb_ca6b)).to_be_bytes()[0]
}

/// Fills every QP's message buffer on `side` with [`pattern`].
fn fill(side: &Side, p: &Params) -> Result<()> {
    for i in 0..p.qps {
        let bytes: Vec<u8> = (0..p.size).map(|k| pattern(i, k)).collect();
        side.mr.write(side.buf(i) as usize, &bytes)?;
    }
    Ok(())
}

/// Checks that every QP's buffer on `side` holds the message its peer sent.
fn check_data(side: &Side, p: &Params) -> Result<()> {
    let mut got = vec![0u8; p.size];
    for i in 0..p.qps {
        side.mr.read(side.buf(i) as usize, &mut got)?;
        if let Some(k) = (0..p.size).find(|&k| got[k] != pattern(i, k)) {
            bail!(
                "{}: QP {i}'s data is wrong: byte {k} is {:#04x}, was sent as {:#04x}",
                p.test.name(),
                got[k],
                pattern(i, k)
            );
        }
    }
    Ok(())
}

/// How long the run may stall (no progress at all) before it is declared stuck.
const STUCK: usize = 1_000_000;

fn wr(p: &Params, a: &Side, b: &Side, i: usize, id: u64) -> SendWr {
    let (local, remote) = (&a.mr, &b.mr);
    let ra = remote.addr() + b.buf(i);
    let op = match p.test {
        Test::WriteBw => WrOp::RdmaWrite {
            remote_addr: ra,
            rkey: remote.rkey(),
        },
        // Into the second half, which the peer watches.
        Test::WriteLat => WrOp::RdmaWrite {
            remote_addr: ra + p.size as u64,
            rkey: remote.rkey(),
        },
        Test::ReadBw | Test::ReadLat => WrOp::RdmaRead {
            remote_addr: ra,
            rkey: remote.rkey(),
        },
        Test::SendBw | Test::SendLat => WrOp::Send,
        Test::AtomicBw => WrOp::AtomicFetchAndAdd {
            remote_addr: ra,
            rkey: remote.rkey(),
            add: 1,
        },
    };
    let len = if p.test == Test::AtomicBw {
        8
    } else {
        p.size as u32
    };
    signaled(id, op, local, a.buf(i), len)
}

fn recv(side: &Side, i: usize, p: &Params) -> RecvWr {
    let mr = &side.mr;
    RecvWr::new(i as u64).sge(mr.addr() + side.buf(i), p.size as u32, mr.lkey())
}

/// An error naming the WR and its `ibv_wc_status` unless `wc` succeeded.
pub(crate) fn check(wc: &WorkCompletion) -> Result<()> {
    if wc.status != WcStatus::Success {
        bail!(
            "work request {} completed with {}",
            wc.wr_id,
            wc.status.name()
        );
    }
    Ok(())
}

/// perftest's BW loop: keep `tx_depth` WRs outstanding on every QP until each has
/// completed `iters`; the server keeps receives posted for SEND.
fn bandwidth(
    world: &mut dyn World,
    p: &Params,
    a: &Side,
    b: &Side,
    bar: &ProgressBar,
) -> Result<Measurement> {
    let total = p.iters * p.qps;
    let mut posted = vec![0usize; p.qps];
    let mut done = vec![0usize; p.qps];
    let mut post_time = vec![0u64; total];
    let mut samples = Vec::with_capacity(total);
    let mut buf = vec![WorkCompletion::default(); 64];
    bar.set_length(total as u64);
    if p.test == Test::SendBw {
        for (i, qp) in b.qps.iter().enumerate() {
            for _ in 0..p.tx_depth {
                qp.post_recv(&recv(b, i, p))?;
            }
        }
        world.kick(1);
    }
    let start = world.now();
    let mut stalled = 0;
    // The QPs with room for more WRs, so a pass costs the QPs that completed something,
    // not every QP (thousands with `-q`); `queued[i]`: QP i is in it.
    let mut ready: VecDeque<usize> = (0..p.qps).collect();
    let mut queued = vec![true; p.qps];
    while samples.len() < total {
        let mut progress = false;
        while let Some(i) = ready.pop_front() {
            queued[i] = false;
            let now = world.now();
            let n = top_up(
                &a.qps[i],
                (posted[i], posted[i] - done[i]),
                p.tx_depth,
                p.iters,
                |k| {
                    let id = i * p.iters + k;
                    post_time[id] = now;
                    wr(p, a, b, i, id as u64)
                },
            )?;
            posted[i] += n;
            progress |= n > 0;
        }
        if progress {
            world.kick(0);
        }
        let wcs = a.cq.poll(&mut buf)?;
        for wc in wcs.iter() {
            check(wc)?;
            let id = wc.wr_id as usize;
            let i = id / p.iters;
            done[i] += 1;
            if !queued[i] && posted[i] < p.iters {
                queued[i] = true;
                ready.push_back(i);
            }
            samples.push((post_time[id], world.now()));
        }
        if !wcs.is_empty() {
            bar.set_position(samples.len() as u64);
            progress = true;
        }
        if p.test == Test::SendBw {
            let got = b.cq.poll(&mut buf)?;
            for wc in got.iter() {
                check(wc)?;
                let i = wc.wr_id as usize;
                b.qps[i].post_recv(&recv(b, i, p))?;
            }
            if !got.is_empty() {
                world.kick(1);
                progress = true;
            }
        }
        if !progress && !world.advance() {
            stalled += 1;
            if stalled > STUCK {
                bail!(
                    "{}: stuck after {} of {total} completions",
                    p.test.name(),
                    samples.len()
                );
            }
        } else {
            stalled = 0;
        }
    }
    let end = samples.iter().map(|s| s.1).max().unwrap_or(start);
    Ok(Measurement {
        samples,
        elapsed_ns: end - start,
        ..Measurement::default()
    })
}

/// perftest's latency loops on QP 0: ping-pong of WRITEs (the receiver watches the last
/// byte of its buffer) or SENDs, or one READ at a time.
fn latency(
    world: &mut dyn World,
    p: &Params,
    a: &Side,
    b: &Side,
    bar: &ProgressBar,
) -> Result<Measurement> {
    let mut samples = Vec::with_capacity(p.iters);
    let mut buf = vec![WorkCompletion::default(); 16];
    bar.set_length(p.iters as u64);
    let start = world.now();
    let sides = [a, b];
    if p.test == Test::SendLat {
        for (s, side) in sides.iter().enumerate() {
            side.qps[0].post_recv(&recv(side, 0, p))?;
            world.kick(s);
        }
    }
    for it in 0..p.iters {
        let t0 = world.now();
        match p.test {
            Test::ReadLat => {
                a.qps[0].post_send(&wr(p, a, b, 0, it as u64))?;
                world.kick(0);
                wait_cq(world, &a.cq, &mut buf)?;
            }
            Test::WriteLat | Test::SendLat => {
                // One round trip: a -> b, then b -> a.
                let mark = (it % 255) as u8 + 1;
                for (from, to) in [(0, 1), (1, 0)] {
                    let (s, d) = (sides[from], sides[to]);
                    if p.test == Test::WriteLat {
                        s.mr.write(p.size - 1, &[mark])?;
                    }
                    s.qps[0].post_send(&wr(p, s, d, 0, it as u64))?;
                    world.kick(from);
                    if p.test == Test::WriteLat {
                        wait_byte(world, &d.mr, 2 * p.size - 1, mark)?;
                    } else {
                        wait_cq_for_recv(world, &d.cq, &mut buf)?;
                        d.qps[0].post_recv(&recv(d, 0, p))?;
                        world.kick(to);
                    }
                }
                // The sender's own completions: reap them so the queues never fill.
                for side in sides {
                    side.cq.poll(&mut buf)?.iter().try_for_each(check)?;
                }
            }
            _ => unreachable!("not a latency test"),
        }
        let t1 = world.now();
        // Round trips count half, as perftest reports one-way latency for them.
        let dt = if p.test == Test::ReadLat {
            t1 - t0
        } else {
            (t1 - t0) / 2
        };
        samples.push((0, dt));
        bar.set_position(it as u64 + 1);
    }
    let elapsed = world.now() - start;
    Ok(Measurement {
        samples,
        elapsed_ns: elapsed,
        ..Measurement::default()
    })
}

fn wait_until(
    world: &mut dyn World,
    what: &str,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let mut stalled = 0;
    while !done()? {
        if world.advance() {
            stalled = 0;
        } else {
            stalled += 1;
            if stalled > STUCK {
                bail!("stuck waiting for {what}");
            }
        }
    }
    Ok(())
}

fn wait_cq(world: &mut dyn World, cq: &CompletionQueue, buf: &mut [WorkCompletion]) -> Result<()> {
    wait_until(world, "a completion", || {
        let got = cq.poll(buf)?;
        got.iter().try_for_each(check)?;
        Ok(!got.is_empty())
    })
}

fn wait_cq_for_recv(
    world: &mut dyn World,
    cq: &CompletionQueue,
    buf: &mut [WorkCompletion],
) -> Result<()> {
    let mut seen = false;
    wait_until(world, "a receive completion", || {
        for wc in cq.poll(buf)?.iter() {
            check(wc)?;
            seen |= (wc.opcode as u8) >= 128;
        }
        Ok(seen)
    })
}

fn wait_byte(world: &mut dyn World, mr: &MemoryRegion, at: usize, want: u8) -> Result<()> {
    wait_until(world, "the written byte", || {
        let mut b = [0u8];
        mr.read(at, &mut b)?;
        Ok(b[0] == want)
    })
}
