//! Fat-tree experiments (issue 16): a k-ary fat-tree of NICs (firmware runtime and
//! engine, as `roce perf` runs them) with ECMP, a workload of flows, and each flow's
//! completion time against its completion time alone on an idle fabric (the slowdown),
//! by flow size, as the DCQCN, IRN and HPCC papers plot it.
//!
//! Each flow is one RC QP pair; its sender posts RDMA WRITEs of at most [`CHUNK`] bytes,
//! keeping [`DEPTH`] outstanding, from the flow's start; the flow completes when the
//! last WRITE's completion reaches the sender's CQ. The applications run inside the
//! fabric's hosts ([`FlowHost`]), so the model splits into one partition per pod and
//! runs on the parallel engine ([`roce_sim::parallel`]): the same seed gives the same
//! result whatever the number of threads.

use super::fabric::{switch_config, CcSpec, LinkSpec, SwitchSpec};
use super::nanos;
use crate::progress::ProgressBar;
use anyhow::{bail, Context as _, Result};
use roce_core::cc::CcConfig;
use roce_core::memory::AccessFlags;
use roce_core::transport::{Mtu, QpType, WcStatus, WorkCompletion, WrOp};
use roce_core::wire::ethernet::MacAddr;
use roce_device::{Capacities, NicModel};
use roce_host::{
    CompletionQueue, ConnectOptions, Context, MemoryRegion, ProtectionDomain, QpEndpoint, QueuePair,
};
use roce_sim::parallel::partition_seed;
use roce_sim::rng::Rng;
use roce_sim::stats::{slowdown_by_size, Completion, Interval, SizeBin};
use roce_sim::topology::FatTree;
use roce_sim::workload::{self, Flow, FlowSizeCdf};
use roce_sim::{
    Fabric, HostId, LinkConfig, Nanos, Node, Parallel, Partition, Priorities, MIN_FRAME_LEN,
    WIRE_OVERHEAD,
};
use roce_testbed::counters::{nic_totals, FabricTotals};
use roce_testbed::nic::{self, Datapath};
use roce_testbed::traffic::{psn, signaled, top_up};
use roce_testbed::NicNode;
use serde::Deserialize;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Bytes per RDMA WRITE: a flow is a train of WRITEs of this size (the last shorter).
pub const CHUNK: u64 = 1 << 20;
/// WRITEs a flow keeps outstanding (two are enough to keep a 100 Gb/s path busy).
pub const DEPTH: usize = 4;

/// `[fct]` of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FctScenario {
    /// The fat-tree's arity: 4 (16 hosts) or 8 (128 hosts).
    pub k: usize,
    /// Every link (hosts and switches).
    pub link: LinkSpec,
    pub switch: SwitchSpec,
    #[serde(default)]
    pub cc: CcSpec,
    #[serde(default = "super::fabric::default_mtu")]
    pub mtu: u32,
    /// DSCP of the flows' packets (26: priority 3).
    #[serde(default = "super::fabric::default_dscp")]
    pub dscp: u8,
    /// Local ACK timeout exponent of the QPs.
    #[serde(default = "super::fabric::default_timeout")]
    pub timeout: u8,
    pub workload: WorkloadSpec,
    /// Independent runs, with seeds `seed`, `seed + 1`, ...: the figures carry 95 %
    /// confidence intervals over them.
    #[serde(default = "super::one")]
    pub runs: u64,
    /// Simulated time after which a run stops even if flows are unfinished (they are
    /// reported).
    #[serde(default = "default_limit")]
    pub limit: String,
}

fn default_limit() -> String {
    "1s".into()
}

/// Who sends what to whom.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkloadSpec {
    /// Poisson arrivals at every host for `duration`, sizes from `cdf` (`websearch`,
    /// `hadoop`), to uniformly drawn hosts, offering `load` of each host link.
    Poisson {
        cdf: String,
        load: f64,
        duration: String,
    },
    /// Every host sends `size` bytes to one other (a random derangement).
    Permutation { size: u64 },
    /// `senders` hosts (1, 2, ...) send `size` bytes each to host 0.
    Incast { senders: usize, size: u64 },
    /// Every host sends `size` bytes to every other.
    AllToAll { size: u64 },
    /// The flows listed.
    List { flows: Vec<FlowSpec> },
}

/// One flow of a `list` workload.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: usize,
    pub dst: usize,
    pub size: u64,
    /// When it starts (`0`, `1ms`).
    #[serde(default = "zero")]
    pub start: String,
}

fn zero() -> String {
    "0".into()
}

impl WorkloadSpec {
    /// The flows of the run seeded with `seed`.
    fn flows(&self, hosts: usize, rate: u64, seed: u64) -> Result<Vec<Flow>> {
        let mut rng = Rng::new(roce_sim::rng::derive_seed(seed, 0x776f_726b));
        Ok(match self {
            Self::Poisson {
                cdf,
                load,
                duration,
            } => {
                let cdf = FlowSizeCdf::named(cdf)
                    .with_context(|| format!("no flow-size distribution {cdf:?}"))?;
                if !(*load > 0.0 && *load <= 1.0) {
                    bail!("load must be in (0, 1]");
                }
                let d = nanos("workload.duration", duration)?;
                workload::poisson(hosts, rate, *load, &cdf, d, &mut rng)
            }
            Self::Permutation { size } => workload::permutation(hosts, *size, &mut rng),
            Self::Incast { senders, size } => {
                if *senders == 0 || *senders >= hosts {
                    bail!("an incast needs 1 to {} senders", hosts - 1);
                }
                let s: Vec<usize> = (1..=*senders).collect();
                workload::incast(&s, 0, *size)
            }
            Self::AllToAll { size } => workload::all_to_all(hosts, *size),
            Self::List { flows } => {
                let mut out = Vec::new();
                for (id, f) in flows.iter().enumerate() {
                    if f.src >= hosts || f.dst >= hosts || f.src == f.dst || f.size == 0 {
                        bail!("flow {id}: two different hosts below {hosts} and a size");
                    }
                    let start = nanos("start", &f.start)?;
                    out.push(Flow {
                        id,
                        src: f.src,
                        dst: f.dst,
                        size: f.size,
                        start,
                    });
                }
                if out.windows(2).any(|w| w[1].start < w[0].start) {
                    bail!("list the flows in the order they start");
                }
                out
            }
        })
    }

    /// Size-bin edges of the figure: the distribution's points, or one bin.
    fn bins(&self) -> Vec<u64> {
        match self {
            Self::Poisson { cdf, .. } => FlowSizeCdf::named(cdf)
                .map(|c| c.points().iter().map(|p| p.0).collect())
                .unwrap_or_default(),
            Self::Permutation { size } | Self::Incast { size, .. } | Self::AllToAll { size } => {
                vec![0, *size]
            }
            Self::List { flows } => vec![0, flows.iter().map(|f| f.size).max().unwrap_or(1)],
        }
    }
}

/// One flow's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowRecord {
    pub flow: Flow,
    /// Completion time; `None` if the run ended first.
    pub fct_ns: Option<Nanos>,
    /// Completion time alone on the idle fabric.
    pub ideal_ns: Nanos,
}

impl FlowRecord {
    pub fn slowdown(&self) -> Option<f64> {
        self.fct_ns.map(|f| f as f64 / self.ideal_ns as f64)
    }
}

/// One run (seed).
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub seed: u64,
    pub flows: Vec<FlowRecord>,
    /// Simulated time run.
    pub end_ns: Nanos,
    pub drops: u64,
    pub pause_frames: u64,
    pub ecn_marked: u64,
    pub cnps: u64,
    pub retransmits: u64,
    /// Events the engine ran (a function of the model, like everything above).
    pub events: u64,
    /// Events per partition per window (how much of the run could overlap).
    pub profile: roce_sim::Profile,
    /// How often the engine's threads waited for each other: NOT a function of the
    /// model (it depends on the machine and the scheduler), only for speed reports.
    pub waits: roce_sim::Waits,
}

/// Slowdown of one size bin over the runs: each run's median and 99th percentile, and
/// the mean of each with its 95 % interval.
#[derive(Debug, Clone, PartialEq)]
pub struct BinSummary {
    pub low: u64,
    pub high: u64,
    /// Flows in the bin over all runs.
    pub flows: usize,
    pub median: Interval,
    pub p99: Interval,
}

#[derive(Debug, Clone)]
pub struct FctResult {
    pub scenario: FctScenario,
    pub runs: Vec<RunResult>,
    pub bins: Vec<BinSummary>,
    /// Wall time and threads of the runs (not part of the written results: they are
    /// the same whatever the threads).
    pub wall: std::time::Duration,
    pub threads: usize,
}

/// A host of the fat-tree: its NIC on the fabric and the application that starts this
/// host's flows (one QP each) and records their completions, run by the fabric's calls.
pub struct FlowHost {
    nic: NicNode,
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    /// The source of every WRITE, and the target of every WRITE to this host.
    src: MemoryRegion,
    dst: MemoryRegion,
    /// QPs of the flows this host takes part in, by flow id (kept alive here).
    qps: Vec<(usize, QueuePair)>,
    /// The flows this host sends, by start time.
    sends: Vec<Sending>,
    next: usize,
    /// (flow id, completion time) in completion order.
    done: Vec<(usize, Nanos)>,
    /// The first failure (a completion in error, a post that failed).
    error: Option<String>,
    wcs: Vec<WorkCompletion>,
}

struct Sending {
    flow: Flow,
    /// Index into `qps`.
    qp: usize,
    /// The peer's buffer.
    remote: (u64, roce_core::num::Rkey),
    posted: u64,
    completed: u64,
    outstanding: usize,
}

impl FlowHost {
    /// A host on `nic` with DCQCN as `cc` sets it and PFC on the priorities of the mask
    /// `pfc`, set through the ABI as the host's administrator would.
    fn new(nic: Rc<dyn NicModel>, node: NicNode, cc: Option<CcConfig>, pfc: u8) -> Result<Self> {
        let ctx = Context::open(nic).context("open a NIC")?;
        if let Some(cc) = cc {
            ctx.set_cc(&cc)?;
        }
        if pfc != 0 {
            ctx.set_pfc(pfc)?;
        }
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(128)?;
        let src = pd.reg_mr(CHUNK as usize, AccessFlags::LOCAL_WRITE)?;
        let dst = pd.reg_mr(
            CHUNK as usize,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
        )?;
        Ok(Self {
            nic: node,
            ctx,
            pd,
            cq,
            src,
            dst,
            qps: Vec::new(),
            sends: Vec::new(),
            next: 0,
            done: Vec::new(),
            error: None,
            wcs: vec![WorkCompletion::default(); 64],
        })
    }

    /// A QP for `flow` on this host; its endpoint for the peer.
    fn add_qp(&mut self, flow: usize, side: usize) -> Result<QpEndpoint> {
        let qp = self
            .pd
            .create_qp(QpType::Rc, &self.cq, &self.cq)
            .max_send_wr(DEPTH)
            .max_recv_wr(1)
            .build()?;
        let ep = qp.endpoint(psn(side, flow));
        self.qps.push((flow, qp));
        Ok(ep)
    }

    fn fail(&mut self, what: String) {
        self.error.get_or_insert(what);
    }

    /// Starts the flows due by `now`, reaps completions, tops up send queues.
    fn run_app(&mut self, now: Nanos) {
        while let Some(s) = self.sends.get(self.next) {
            if s.flow.start > now {
                break;
            }
            self.next += 1;
        }
        // The CQ holds completions of the flows' WRITEs only (no receive is ever
        // posted), so with none outstanding there is nothing to reap: a host that only
        // receives skips the poll (a read of the ring's next entry) at every frame.
        // Debug builds poll anyway and check that it finds nothing.
        if !self.sends.iter().any(|s| s.outstanding > 0) {
            debug_assert!(
                self.cq.poll(&mut self.wcs).is_ok_and(|got| got.is_empty()),
                "a completion without a WRITE outstanding"
            );
        } else {
            self.reap(now);
        }
        for i in 0..self.next {
            if let Err(e) = self.top_up(i) {
                self.fail(format!("post: {e}"));
            }
        }
    }

    /// Takes the completions in the CQ: a flow whose last WRITE completed is done.
    fn reap(&mut self, now: Nanos) {
        loop {
            let n = match self.cq.poll(&mut self.wcs) {
                Ok(got) => got.len(),
                Err(e) => return self.fail(format!("poll: {e}")),
            };
            for i in 0..n {
                let wc = self.wcs[i];
                if wc.status != WcStatus::Success {
                    let msg = format!("flow {} completed with {}", wc.wr_id, wc.status.name());
                    self.fail(msg);
                    continue;
                }
                let Some(s) = self.sends.iter_mut().find(|s| s.flow.id as u64 == wc.wr_id) else {
                    continue;
                };
                s.outstanding -= 1;
                s.completed += 1;
                if s.completed == s.flow.size.div_ceil(CHUNK).max(1) {
                    self.done.push((s.flow.id, now));
                }
            }
            if n < self.wcs.len() {
                break;
            }
        }
    }

    /// Posts WRITEs for sending flow `i` until [`DEPTH`] are outstanding or all are out.
    fn top_up(&mut self, i: usize) -> Result<()> {
        let s = &mut self.sends[i];
        let chunks = s.flow.size.div_ceil(CHUNK).max(1) as usize;
        let op = WrOp::RdmaWrite {
            remote_addr: s.remote.0,
            rkey: s.remote.1,
        };
        let (size, id, src) = (s.flow.size, s.flow.id as u64, &self.src);
        let n = top_up(
            &self.qps[s.qp].1,
            (s.posted as usize, s.outstanding),
            DEPTH,
            chunks,
            |k| signaled(id, op, src, 0, (size - k as u64 * CHUNK).min(CHUNK) as u32),
        )?;
        s.outstanding += n;
        s.posted += n as u64;
        Ok(())
    }

    fn next_start(&self) -> Option<Nanos> {
        self.sends.get(self.next).map(|s| s.flow.start)
    }
}

impl Node for FlowHost {
    fn link_up(&mut self, port: usize, rate_bps: u64) {
        self.nic.link_up(port, rate_bps);
    }

    fn handle_frame(&mut self, now: Nanos, port: usize, frame: &[u8]) {
        self.nic.handle_frame(now, port, frame);
        self.run_app(now);
    }

    fn poll_transmit(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize> {
        self.nic.poll_transmit(now, port, paused, buf)
    }

    fn poll_transmit_buffer(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        buf: &mut Box<[u8]>,
    ) -> Option<usize> {
        self.nic.poll_transmit_buffer(now, port, paused, buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        match (self.nic.poll_timeout(), self.next_start()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.nic.handle_timeout(now);
        self.run_app(now);
    }
}

/// One pod (and its share of core switches) of the tree, with its hosts.
pub struct Pod {
    fabric: Fabric,
    hosts: Vec<(usize, HostId<FlowHost>)>,
    /// QP endpoints of this partition's side of each flow: (flow, side, endpoint).
    endpoints: Vec<(usize, usize, QpEndpoint)>,
}

impl Partition for Pod {
    fn fabric(&self) -> &Fabric {
        &self.fabric
    }
    fn fabric_mut(&mut self) -> &mut Fabric {
        &mut self.fabric
    }
}

/// The network the hosts are on.
#[derive(Debug, Clone)]
pub enum Net {
    /// A k-ary fat-tree, one partition per pod.
    FatTree(Box<FatTree>),
    /// Two hosts on one link, host i in partition i (when there are two): the stream
    /// benchmark's.
    BackToBack(LinkConfig),
}

impl Net {
    pub fn hosts(&self) -> usize {
        match self {
            Self::FatTree(t) => t.hosts(),
            Self::BackToBack(_) => 2,
        }
    }

    /// The hosts' link (the ideal FCT's rate and delay: every link is alike).
    pub fn link(&self) -> LinkConfig {
        match self {
            Self::FatTree(t) => t.host_link,
            Self::BackToBack(l) => *l,
        }
    }

    /// The natural number of partitions.
    pub fn partitions(&self) -> usize {
        match self {
            Self::FatTree(t) => t.k,
            Self::BackToBack(_) => 2,
        }
    }

    /// Switches between hosts `a` and `b`.
    pub fn switch_hops(&self, a: usize, b: usize) -> usize {
        match self {
            Self::FatTree(t) => t.switch_hops(a, b),
            Self::BackToBack(_) => 0,
        }
    }

    fn build(
        &self,
        f: &mut Fabric,
        part: usize,
        parts: usize,
        macs: &[MacAddr],
        mut host: impl FnMut(usize, &mut Fabric) -> roce_sim::NodeId,
    ) {
        match self {
            Self::FatTree(t) => {
                t.build(f, part, parts, macs, host);
            }
            Self::BackToBack(link) if parts == 1 => {
                let (a, b) = (host(0, f), host(1, f));
                f.connect(a, 0, b, 0, *link);
            }
            Self::BackToBack(link) => {
                let me = host(part, f);
                let to = roce_sim::RemoteEnd {
                    partition: 1 - part,
                    link: 0,
                };
                let cfg = if part == 0 { *link } else { link.reversed() };
                f.connect_remote(me, 0, to, cfg);
            }
        }
    }
}

/// How a set of flows is run: the network, the NICs, the connections, the engine.
#[derive(Debug, Clone)]
pub struct Setup {
    pub net: Net,
    /// Partitions of the model (1, or the net's natural number).
    pub partitions: usize,
    pub seed: u64,
    /// DCQCN in every NIC.
    pub dcqcn: bool,
    /// PFC on the flows' priority (`dscp >> 3`) in every NIC: set where the switches
    /// send pauses, so that the NICs honour them.
    pub pfc: bool,
    pub mtu: Mtu,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    pub dscp: u8,
    /// Simulated time after which the run stops.
    pub limit: Nanos,
    /// NICs with the RC fast path's model as their hardware (`roce perf`'s default),
    /// instead of the firmware handling every packet.
    pub fastpath: bool,
}

/// What every partition needs to build itself.
struct Plan {
    setup: Setup,
    flows: Vec<Flow>,
}

impl Plan {
    fn build(&self, part: usize) -> Pod {
        let s = &self.setup;
        let mut fabric = Fabric::new(partition_seed(s.seed, part));
        let macs: Vec<MacAddr> = (0..s.net.hosts())
            .map(|h| MacAddr(nic::port_config(h).mac))
            .collect();
        let rate = s.net.link().rate_bps;
        let mut hosts = Vec::new();
        let mut endpoints = Vec::new();
        s.net.build(&mut fabric, part, s.partitions, &macs, |h, f| {
            let nic = nic::boot(
                Datapath::Software,
                s.fastpath,
                nic::port_config(h),
                Capacities::Host,
            )
            .unwrap_or_else(|e| panic!("host {h}: {e}"));
            let cc = s.dcqcn.then(|| CcConfig::dcqcn(rate));
            let pfc = if s.pfc { 1 << (s.dscp >> 3) } else { 0 };
            let mut host = FlowHost::new(nic.clone(), NicNode::new(nic), cc, pfc)
                .unwrap_or_else(|e| panic!("host {h}: {e:#}"));
            for fl in self.flows.iter().filter(|fl| fl.src == h || fl.dst == h) {
                let side = usize::from(fl.dst == h);
                let ep = host
                    .add_qp(fl.id, side)
                    .unwrap_or_else(|e| panic!("host {h}, flow {}: {e:#}", fl.id));
                endpoints.push((fl.id, side, ep));
            }
            let id = f.add_host(host);
            hosts.push((h, id));
            id.id()
        });
        Pod {
            fabric,
            hosts,
            endpoints,
        }
    }
}

/// What each side of each flow needs from the other: endpoint and buffer.
#[derive(Clone, Copy)]
struct Peer {
    ep: QpEndpoint,
    buffer: (u64, roce_core::num::Rkey),
}

/// Connects every flow's QPs, and hands each sender its flows.
fn connect(
    pod: &mut Pod,
    peers: &[[Option<Peer>; 2]],
    flows: &[Flow],
    opts: &ConnectOptions,
) -> Result<()> {
    for &(h, id) in &pod.hosts {
        let host = pod.fabric.host_mut(id);
        for i in 0..host.qps.len() {
            let fl = flows[host.qps[i].0];
            let side = usize::from(fl.dst == h);
            let [mine, theirs] = [side, 1 - side].map(|s| peers[fl.id][s]);
            let (Some(mine), Some(theirs)) = (mine, theirs) else {
                bail!("flow {} has no peer", fl.id);
            };
            host.qps[i].1.connect(&theirs.ep, mine.ep.psn, opts)?;
            if side == 0 {
                host.sends.push(Sending {
                    flow: fl,
                    qp: i,
                    remote: theirs.buffer,
                    posted: 0,
                    completed: 0,
                    outstanding: 0,
                });
            }
        }
        host.sends.sort_by_key(|s| (s.flow.start, s.flow.id));
        pod.fabric.wake(id);
    }
    Ok(())
}

/// Completion time of `flow` alone on the idle tree: its packets leave the sender back
/// to back at line rate; each switch on the path forwards each one store-and-forward as
/// soon as it is in and the egress is free (so the biggest packet paces the pipeline);
/// then the ACK of the last WRITE comes back. NICs take no time in the model.
pub fn ideal_fct(flow: &Flow, net: &Net, mtu: u64) -> Nanos {
    let rate = net.link().rate_bps as f64;
    let delay = net.link().delay_ns as f64;
    let wire =
        |len: u64| ((len as usize).max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as f64 * 8.0 / rate * 1e9;
    // Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4; the first packet of a WRITE adds its
    // RETH (16); payloads are padded to 4 bytes; an ACK carries an AETH (4).
    const HEADERS: u64 = 14 + 20 + 8 + 12 + 4;
    const RETH: u64 = 16;
    const ACK: u64 = HEADERS + 4;
    let links = net.switch_hops(flow.src, flow.dst) + 1;
    // When the last bit of the previous packet left each link's transmitter.
    let mut free = vec![0f64; links];
    for c in 0..flow.size.div_ceil(CHUNK).max(1) {
        let len = (flow.size - c * CHUNK).min(CHUNK);
        for p in 0..len.div_ceil(mtu).max(1) {
            let payload = (len - p * mtu).min(mtu).next_multiple_of(4);
            let ser = wire(HEADERS + payload + if p == 0 { RETH } else { 0 });
            let mut ready = 0.0;
            for end in free.iter_mut() {
                *end = end.max(ready) + ser;
                ready = *end + delay;
            }
        }
    }
    let arrived = free[links - 1] + delay;
    (arrived + links as f64 * (wire(ACK) + delay)).ceil() as Nanos
}

/// Runs every seed of the scenario on `threads` threads.
pub fn run(
    f: &FctScenario,
    seed: u64,
    threads: usize,
    progress: &ProgressBar,
) -> Result<FctResult> {
    if f.runs == 0 {
        bail!("runs must be at least 1");
    }
    let wall = Instant::now();
    let runs = (0..f.runs)
        .map(|r| {
            progress.set_message(format!("run {} of {}", r + 1, f.runs));
            run_one(f, seed + r, threads, progress)
        })
        .collect::<Result<Vec<_>>>()?;
    let edges = f.workload.bins();
    let per_run: Vec<Vec<SizeBin>> = runs
        .iter()
        .map(|r| {
            let done: Vec<Completion> = r
                .flows
                .iter()
                .filter_map(|x| {
                    Some(Completion {
                        size: x.flow.size,
                        slowdown: x.slowdown()?,
                    })
                })
                .collect();
            slowdown_by_size(&done, &edges)
        })
        .collect();
    let bins = edges
        .windows(2)
        .filter_map(|w| {
            let of_run: Vec<&SizeBin> = per_run
                .iter()
                .filter_map(|bins| bins.iter().find(|b| b.low == w[0]))
                .collect();
            if of_run.is_empty() {
                return None;
            }
            let med: Vec<f64> = of_run.iter().map(|b| b.median).collect();
            let p99: Vec<f64> = of_run.iter().map(|b| b.p99).collect();
            Some(BinSummary {
                low: w[0],
                high: w[1],
                flows: of_run.iter().map(|b| b.flows).sum(),
                median: Interval::of(&med),
                p99: Interval::of(&p99),
            })
        })
        .collect();
    Ok(FctResult {
        scenario: f.clone(),
        runs,
        bins,
        wall: wall.elapsed(),
        threads,
    })
}

fn run_one(
    f: &FctScenario,
    seed: u64,
    threads: usize,
    progress: &ProgressBar,
) -> Result<RunResult> {
    if !(f.k >= 2 && f.k % 2 == 0 && f.k <= 16) {
        bail!("k must be even, 2 to 16");
    }
    let rate = crate::perf_cmd::parse_rate(&f.link.rate)?;
    let delay = nanos("link.delay", &f.link.delay)?;
    let mtu = crate::perf_cmd::parse_mtu(f.mtu)?;
    let link = LinkConfig::new(rate, delay);
    let tree = FatTree::new(
        f.k,
        link,
        link,
        switch_config(&f.switch, Priorities::only(f.dscp >> 3))?,
    );
    let flows = f.workload.flows(tree.hosts(), rate, seed)?;
    let setup = Setup {
        partitions: f.k,
        net: Net::FatTree(Box::new(tree)),
        seed,
        dcqcn: f.cc.dcqcn,
        pfc: f.switch.pfc.is_some(),
        mtu,
        timeout: f.timeout,
        dscp: f.dscp,
        limit: nanos("limit", &f.limit)?,
        fastpath: false,
    };
    run_flows(&setup, flows, threads, progress)
}

/// Runs `flows` (numbered in order) on `setup`'s network until all are done or the
/// limit is reached.
pub fn run_flows(
    setup: &Setup,
    flows: Vec<Flow>,
    threads: usize,
    progress: &ProgressBar,
) -> Result<RunResult> {
    check(setup, &flows)?;
    let plan = Arc::new(Plan {
        setup: setup.clone(),
        flows: flows.clone(),
    });
    let delay = setup.net.link().delay_ns;
    let mut par = Parallel::new(setup.partitions, threads, delay, move |p| plan.build(p));
    connect_flows(&mut par, setup, &flows)?;
    let end_ns = run_until_done(&mut par, flows.len(), setup.limit, progress);
    first_error(&mut par)?;
    let flow_records = records(&mut par, setup, &flows);
    let [drops, pause_frames, ecn_marked, cnps, retransmits] = sum_totals(&mut par)?;
    Ok(RunResult {
        seed: setup.seed,
        flows: flow_records,
        end_ns,
        drops,
        pause_frames,
        ecn_marked,
        cnps,
        retransmits,
        events: par.events_run(),
        profile: par.profile(),
        waits: par.waits(),
    })
}

/// Refuses a setup the engine cannot run: links without delay (the parallel engine's
/// lookahead), a partition count other than 1 or the net's own, or a host in more flows
/// than its NIC has QPs (one QP per flow at each end, on NICs of 64 QPs).
fn check(setup: &Setup, flows: &[Flow]) -> Result<()> {
    if setup.net.link().delay_ns == 0 {
        bail!("links need a delay: it is the parallel engine's lookahead");
    }
    if ![1, setup.net.partitions()].contains(&setup.partitions) {
        bail!(
            "{} partitions: use 1 or {}",
            setup.partitions,
            setup.net.partitions()
        );
    }
    let mut qps = vec![0usize; setup.net.hosts()];
    for fl in flows {
        qps[fl.src] += 1;
        qps[fl.dst] += 1;
    }
    if let Some((h, n)) = qps
        .iter()
        .enumerate()
        .max_by_key(|x| x.1)
        .filter(|x| *x.1 > 64)
    {
        bail!(
            "host {h} takes part in {n} flows, one QP each, and the NIC model has 64: \
             shorten the workload"
        );
    }
    Ok(())
}

/// Exchanges every flow's endpoints (QP numbers, addresses, buffers) as applications
/// would out of band, then connects each flow's QPs and hands each sender its flows.
fn connect_flows(par: &mut Parallel<Pod>, setup: &Setup, flows: &[Flow]) -> Result<()> {
    let peers = Arc::new(peers(par, setup.net.hosts(), flows));
    let opts = ConnectOptions {
        mtu: setup.mtu,
        timeout: setup.timeout,
        // ECT(0) on every data packet: switches with ECN mark it, others ignore it.
        traffic_class: setup.dscp << 2 | 0b10,
        ..ConnectOptions::default()
    };
    let all = Arc::new(flows.to_vec());
    let connected =
        par.each(move |_, pod| connect(pod, &peers, &all, &opts).map_err(|e| format!("{e:#}")));
    for c in connected {
        c.map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// What each side of each flow learns of the other: by flow, [sender, receiver].
fn peers(par: &mut Parallel<Pod>, hosts: usize, flows: &[Flow]) -> Vec<[Option<Peer>; 2]> {
    let found = par.each(|_, pod| pod.endpoints.clone());
    let buffers = par.each(|_, pod| {
        pod.hosts
            .iter()
            .map(|&(h, id)| {
                let host = pod.fabric.host(id);
                (h, (host.dst.addr(), host.dst.rkey()))
            })
            .collect::<Vec<_>>()
    });
    let mut buffer_of = vec![(0, roce_core::num::Rkey(0)); hosts];
    for (h, b) in buffers.into_iter().flatten() {
        buffer_of[h] = b;
    }
    let mut peers = vec![[None; 2]; flows.len()];
    for (fl, side, ep) in found.into_iter().flatten() {
        let h = if side == 0 {
            flows[fl].src
        } else {
            flows[fl].dst
        };
        peers[fl][side] = Some(Peer {
            ep,
            buffer: buffer_of[h],
        });
    }
    peers
}

/// Runs the model until all `total` flows are done or `limit` is passed, in steps that
/// let the progress bar move; returns the simulated time it stopped at.
fn run_until_done(
    par: &mut Parallel<Pod>,
    total: usize,
    limit: Nanos,
    progress: &ProgressBar,
) -> Nanos {
    const STEP: Nanos = 50_000;
    progress.set_length(total as u64);
    let mut t = 0;
    loop {
        t += STEP;
        par.run_until(t);
        let done: usize = par
            .each(|_, pod| {
                pod.hosts
                    .iter()
                    .map(|&(_, id)| pod.fabric.host(id).done.len())
                    .sum::<usize>()
            })
            .iter()
            .sum();
        progress.set_position(done as u64);
        if done == total || t >= limit {
            return t;
        }
    }
}

/// The first host's failure (a completion in error, a post that failed), if any.
fn first_error(par: &mut Parallel<Pod>) -> Result<()> {
    let errors = par.each(|_, pod| {
        pod.hosts
            .iter()
            .filter_map(|&(h, id)| {
                Some(format!("host {h}: {}", pod.fabric.host(id).error.clone()?))
            })
            .collect::<Vec<_>>()
    });
    match errors.into_iter().flatten().next() {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// Each flow's completion time (none if unfinished) beside its ideal.
fn records(par: &mut Parallel<Pod>, setup: &Setup, flows: &[Flow]) -> Vec<FlowRecord> {
    let done = par.each(|_, pod| {
        pod.hosts
            .iter()
            .flat_map(|&(_, id)| pod.fabric.host(id).done.clone())
            .collect::<Vec<_>>()
    });
    let mut fct = vec![None; flows.len()];
    for (fl, at) in done.into_iter().flatten() {
        fct[fl] = Some(at - flows[fl].start);
    }
    let mtu = u64::from(setup.mtu.bytes());
    flows
        .iter()
        .map(|fl| FlowRecord {
            flow: *fl,
            fct_ns: fct[fl.id],
            ideal_ns: ideal_fct(fl, &setup.net, mtu),
        })
        .collect()
}

/// [`totals`] summed over the partitions.
fn sum_totals(par: &mut Parallel<Pod>) -> Result<[u64; 5]> {
    let mut sum = [0; 5];
    for part in par.each(|_, pod| totals(pod).map_err(|e| format!("{e:#}"))) {
        let part = part.map_err(anyhow::Error::msg)?;
        for (s, x) in sum.iter_mut().zip(part) {
            *s += x;
        }
    }
    Ok(sum)
}

/// Drops (switch buffers and links), PFC frames sent by switches, ECN marks, CNPs sent
/// and packets retransmitted, in one partition (the NICs' through their hosts).
fn totals(pod: &Pod) -> Result<[u64; 5]> {
    let fabric = FabricTotals::of(&pod.fabric);
    let nics = nic_totals(pod.hosts.iter().map(|&(_, id)| &pod.fabric.host(id).ctx))?;
    Ok([
        fabric.dropped + fabric.lost,
        fabric.pause_frames,
        fabric.ecn_marked,
        nics.engine.np_cnp_sent,
        nics.engine.retransmitted_pkts,
    ])
}

impl FctResult {
    /// One row per flow of every run: `seed,flow,src,dst,size,start_ns,fct_ns,ideal_ns,
    /// slowdown` (empty FCT and slowdown for a flow the run did not finish).
    pub fn write_csv(&self, mut w: impl Write) -> std::io::Result<()> {
        writeln!(
            w,
            "seed,flow,src,dst,size,start_ns,fct_ns,ideal_ns,slowdown"
        )?;
        for r in &self.runs {
            for x in &r.flows {
                let f = &x.flow;
                let (fct, slow) = match (x.fct_ns, x.slowdown()) {
                    (Some(t), Some(s)) => (t.to_string(), format!("{s:.4}")),
                    _ => (String::new(), String::new()),
                };
                writeln!(
                    w,
                    "{},{},{},{},{},{},{fct},{},{slow}",
                    r.seed, f.id, f.src, f.dst, f.size, f.start, x.ideal_ns
                )?;
            }
        }
        Ok(())
    }

    /// How the engine did (not part of the results: wall time depends on the machine):
    /// events, windows of the lookahead, what two and eight threads could overlap (at
    /// least, meeting after every window; at most, by the partitions' shares), the
    /// threads' waits, and speed.
    pub fn engine_report(&self) -> String {
        let events: u64 = self.runs.iter().map(|r| r.events).sum();
        let sim: u64 = self.runs.iter().map(|r| r.end_ns).sum();
        let windows: usize = self.runs.iter().map(|r| r.profile.windows()).sum();
        let critical = |t| -> u64 { self.runs.iter().map(|r| r.profile.critical_path(t)).sum() };
        let busiest = |t| -> u64 { self.runs.iter().map(|r| r.profile.busiest_thread(t)).sum() };
        let mut waits = roce_sim::Waits::default();
        for r in &self.runs {
            waits += r.waits;
        }
        let wall = self.wall.as_secs_f64();
        let bound = |t| {
            format!(
                "{:.2}x-{:.2}x",
                events as f64 / critical(t).max(1) as f64,
                events as f64 / busiest(t).max(1) as f64
            )
        };
        format!(
            "engine: {} partitions on {} threads; {events} events in {windows} windows; \
             overlap {} on 2 threads, {} on 8; {} steps, {} waits; {:.2} s wall: \
             {:.0} events/s, {:.3} ms simulated per wall second",
            self.runs
                .first()
                .map_or(0, |r| r.profile.per_partition.len()),
            self.threads,
            bound(2),
            bound(8),
            waits.steps,
            waits.waits,
            wall,
            events as f64 / wall,
            sim as f64 / 1e6 / wall
        )
    }

    /// The slowdown by size (means over runs with 95 % intervals), then the runs.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| flow size | flows | median slowdown | 99th percentile slowdown |\n| --- | ---: | ---: | ---: |\n",
        );
        for b in &self.bins {
            out += &format!(
                "| {} - {} | {} | {} | {} |\n",
                bytes(b.low),
                bytes(b.high),
                b.flows,
                show(&b.median),
                show(&b.p99)
            );
        }
        out += "\n| seed | flows | unfinished | simulated | drops | PFC frames | ECN marks | CNPs | retransmitted | events |\n";
        out += "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
        for r in &self.runs {
            let unfinished = r.flows.iter().filter(|x| x.fct_ns.is_none()).count();
            out += &format!(
                "| {} | {} | {} | {:.2} ms | {} | {} | {} | {} | {} | {} |\n",
                r.seed,
                r.flows.len(),
                unfinished,
                r.end_ns as f64 / 1e6,
                r.drops,
                r.pause_frames,
                r.ecn_marked,
                r.cnps,
                r.retransmits,
                r.events
            );
        }
        out
    }
}

/// `x ± h` (a single run has no interval).
fn show(i: &Interval) -> String {
    if i.n < 2 {
        format!("{:.2}", i.mean)
    } else {
        i.show(2)
    }
}

/// 1.5 KB, 30 MB, ...
pub fn bytes(b: u64) -> String {
    match b {
        0 => "0".into(),
        b if b >= 1_000_000 => format!("{} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{} KB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}
