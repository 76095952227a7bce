//! Fabric scenarios: NICs (firmware runtime and engine, as `roce perf` runs them) around
//! switches, each flow an RC QP pair streaming RDMA WRITEs, sampled over time.
//!
//! Topology. Switches are named; each host hangs off one switch (host links are endpoint
//! a, the switch endpoint b); trunks join switches. A switch's ports are its hosts in file
//! order, then its trunks in file order. Routes are static shortest paths over the trunks
//! (the file describes a tree; there is no ECMP here).
//!
//! Traffic. A flow keeps `depth` WRITEs of `message` bytes outstanding from its `start`
//! until its `stop` (or the end), the way `ib_write_bw` does. The application side (posting,
//! polling completions) runs every microsecond of simulated time.
//!
//! Measures. Every `sample`: each flow's rate (wire bytes its receiving QP got, frame plus
//! FCS, preamble and gap, so the flows of a saturated link add up to its rate), the bytes
//! queued at the switch port facing the `bottleneck` host, and running totals of PFC
//! frames sent by switches, CNPs, retransmitted packets and drops.

use super::nanos;
use crate::progress::ProgressBar;
use anyhow::{bail, Context as _, Result};
use roce_core::cc::CcConfig;
use roce_core::dcb::EtsConfig;
use roce_core::memory::AccessFlags;
use roce_core::transport::{Mtu, QpType, WcStatus, WorkCompletion, WrOp};
use roce_host::{CompletionQueue, ConnectOptions, MemoryRegion, ProtectionDomain, QueuePair};
use roce_sim::stats::Interval;
use roce_sim::{
    LinkConfig, MemoryCapture, Nanos, PfcConfig, Priorities, RedConfig, SwitchConfig, TapId,
    WIRE_OVERHEAD,
};
use roce_testbed::counters::{nic_totals, FabricTotals};
use roce_testbed::nic::{self, Datapath};
use roce_testbed::rtl_dcb::RtlDcbConfig;
use roce_testbed::topology::Neighbour;
use roce_testbed::traffic::{connect_pair, signaled, top_up};
use roce_testbed::{topology, NicNode, Topology};
use serde::Deserialize;
use std::io::Write;

/// `[fabric]` of a scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricScenario {
    /// Simulated time to run (`10ms`).
    pub duration: String,
    /// Sampling period of the time series (`20us`); a whole number of microseconds.
    #[serde(default = "default_sample")]
    pub sample: String,
    /// Averages (rates, Jain's index, utilisation, queue band) are taken from here on.
    #[serde(default = "default_zero")]
    pub measure_from: String,
    /// Every link: host links and trunks.
    pub link: LinkSpec,
    /// The host whose switch port is the congestion point (queue and utilisation).
    pub bottleneck: String,
    /// Bytes per WRITE.
    pub message: usize,
    /// WRITEs each flow keeps outstanding.
    #[serde(default = "default_depth")]
    pub depth: usize,
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// DSCP of the flows' packets (26: priority 3 with the default DSCP >> 3 map).
    #[serde(default = "default_dscp")]
    pub dscp: u8,
    /// Local ACK timeout exponent of the QPs.
    #[serde(default = "default_timeout")]
    pub timeout: u8,
    pub switch: SwitchSpec,
    #[serde(default)]
    pub cc: CcSpec,
    /// Each NIC has one transmit FIFO for all priorities instead of a queue per
    /// priority: a paused frame at its head holds back every frame behind it.
    #[serde(default)]
    pub single_tx_queue: bool,
    /// Transmission selection among every NIC's transmit queues, set through the ABI
    /// (MODIFY_DCB) as a host would: these priorities are ETS classes with these
    /// bandwidth shares (802.1Qaz, summing to 100), the others strict. Without it the
    /// NICs keep their default (ETS, equal shares).
    #[serde(default)]
    pub nic_ets: Vec<EtsClass>,
    /// Every NIC's DCB MAC is the RTL (`roce_dcb_top`, Verilated: its priority queues,
    /// ETS, pause timers and receive buffer; `roce_testbed::rtl_dcb`), with the core's
    /// model beside it checking every cycle: the run fails if the two ever differ.
    #[serde(default)]
    pub rtl_dcb: bool,
    pub switches: Vec<String>,
    pub hosts: Vec<HostSpec>,
    #[serde(default)]
    pub trunks: Vec<TrunkSpec>,
    pub flows: Vec<FlowSpec>,
    /// Runs with seeds `seed`, `seed + 1`, ...: the first is drawn and tabled, the summary
    /// gets the mean and 95 % interval of each measure over all of them (ECN marks are
    /// random draws).
    #[serde(default = "super::one")]
    pub runs: u64,
    /// Hosts whose link is captured as tcpdump on the host would see it (every frame it
    /// sends, every frame that reaches it, PFC pauses included): `NAME-HOST.pcap` beside
    /// the CSV, for `roce decode` and `roce analyze`. The first run only.
    #[serde(default)]
    pub pcap: Vec<String>,
}

fn default_sample() -> String {
    "20us".into()
}
fn default_zero() -> String {
    "0".into()
}
fn default_depth() -> usize {
    2
}
pub(crate) fn default_mtu() -> u32 {
    4096
}
pub(crate) fn default_dscp() -> u8 {
    26
}
pub(crate) fn default_timeout() -> u8 {
    14
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// `100g`.
    pub rate: String,
    /// One-way propagation delay, `1us`.
    pub delay: String,
}

/// Every switch's buffers, PFC and ECN.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Dedicated bytes per egress port.
    pub port_buffer: u64,
    /// Bytes shared by all ports.
    pub shared_buffer: u64,
    /// PFC on the flows' priorities.
    pub pfc: Option<PfcSpec>,
    /// RED/ECN marking on the flows' priorities (instantaneous queue).
    pub ecn: Option<EcnSpec>,
    /// Transmission selection of every egress port: these priorities are ETS classes
    /// with these bandwidth shares (802.1Qaz, summing to 100), the others strict.
    /// Without it every priority is strict.
    #[serde(default)]
    pub ets: Vec<EtsClass>,
}

/// One ETS class of [`SwitchSpec::ets`] or [`FabricScenario::nic_ets`].
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtsClass {
    pub priority: u8,
    /// Percent of the port's bandwidth left by the strict classes.
    pub share: u8,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PfcSpec {
    /// XOFF above this many bytes per (ingress port, priority).
    pub xoff: u64,
    /// XON at or below this many.
    pub xon: u64,
    /// Headroom per (ingress port, priority).
    pub headroom: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EcnSpec {
    pub kmin: u64,
    pub kmax: u64,
    pub pmax: f64,
    /// The priorities marked (default: every flow's).
    pub priorities: Option<Vec<u8>>,
}

/// Congestion control at the NICs.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CcSpec {
    /// DCQCN: receivers send CNPs for CE-marked packets, senders cut their rate on CNPs.
    #[serde(default)]
    pub dcqcn: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    pub switch: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrunkSpec {
    pub a: String,
    pub b: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub name: String,
    pub src: String,
    pub dst: String,
    /// When it starts posting (`0`, `5ms`).
    pub start: Option<String>,
    /// When it stops posting (what is outstanding still completes).
    pub stop: Option<String>,
    /// Its DSCP, if not the scenario's.
    pub dscp: Option<u8>,
}

/// The state of the fabric at one sampling instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub time_ns: Nanos,
    /// Each flow's rate over the last period, Gb/s of wire bytes.
    pub rates_gbps: Vec<f64>,
    /// Each flow's DCQCN current rate Rc at the sender (Gb/s); empty without DCQCN.
    pub rc_gbps: Vec<f64>,
    /// Bytes queued at the bottleneck port (all priorities).
    pub queue_bytes: u64,
    /// Running totals.
    pub pause_frames: u64,
    pub cnps: u64,
    pub retransmits: u64,
    pub drops: u64,
}

/// Totals and averages of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// Simulated nanoseconds run.
    pub duration_ns: Nanos,
    /// Start of the averaging window.
    pub measure_from_ns: Nanos,
    /// Frames dropped by switches (buffer or headroom) or lost on links.
    pub drops: u64,
    /// PFC frames sent by all switches.
    pub pause_frames: u64,
    /// PFC frames sent per switch port, labelled `switch->neighbour`, busiest first;
    /// ports that sent none are left out.
    pub pause_frames_by_port: Vec<(String, u64)>,
    /// Nanoseconds each host's transmitter spent paused (data priority), by host.
    pub host_paused_ns: Vec<(String, u64)>,
    /// CNPs the NICs sent (notification points).
    pub cnps: u64,
    pub ecn_marked: u64,
    pub retransmits: u64,
    /// Wire bits the bottleneck link carried towards its host over the window, as a
    /// fraction of its capacity.
    pub bottleneck_utilisation: f64,
    /// Each flow's mean rate over the part of the window it was active (Gb/s).
    pub mean_rates_gbps: Vec<f64>,
    /// Jain's fairness index of the mean rates of the flows active in the whole window.
    pub jain: f64,
    /// From when on Jain's index over every trailing 1 ms (flows active throughout it)
    /// stays at or above 0.95; `None` if it never settles there.
    pub fair_from_ns: Option<Nanos>,
    /// Bottleneck queue over the window's samples: minimum, mean, maximum bytes, and the
    /// fraction of samples within [Kmin, Kmax] (1 without ECN).
    pub queue_min: u64,
    pub queue_mean: f64,
    pub queue_max: u64,
    pub queue_in_band: f64,
    /// Bytes of completed WRITEs per flow.
    pub completed_bytes: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct FabricResult {
    pub flows: Vec<String>,
    pub samples: Vec<Sample>,
    pub summary: Summary,
    /// The ECN band, for the plot.
    pub ecn: Option<(u64, u64)>,
    /// With several runs: the seeds, and each run's summary (the first is `summary`).
    pub seeds: Vec<u64>,
    pub runs: Vec<Summary>,
    /// The captures `pcap` asked for, with the host port's counters at the end.
    pub captures: Vec<HostCapture>,
}

/// A host's link as the host saw it.
#[derive(Debug, Clone)]
pub struct HostCapture {
    pub host: String,
    /// A pcap file's bytes.
    pub pcap: Vec<u8>,
    /// The host port's MAC counters (pause frames received, time paused) at the end.
    pub port: roce_sim::PortCounters,
}

/// Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one
/// takes everything.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

const POLL_NS: Nanos = 1_000;
const ECT0: u8 = 0b10;

/// The scenario's numbers, parsed and checked.
struct Plan {
    duration: Nanos,
    sample: Nanos,
    measure_from: Nanos,
    /// Every link's rate, bit/s.
    rate: u64,
    link: LinkConfig,
    mtu: Mtu,
    /// The scenario's 802.1p priority (its DSCP through the default map).
    priority: u8,
    /// Every flow's priority: PFC and ECN apply to these.
    priorities: Priorities,
}

impl Plan {
    fn of(f: &FabricScenario) -> Result<Self> {
        let duration = nanos("duration", &f.duration)?;
        let sample = nanos("sample", &f.sample)?;
        let measure_from = nanos("measure_from", &f.measure_from)?;
        if sample == 0 || sample % POLL_NS != 0 {
            bail!("sample must be a positive whole number of microseconds");
        }
        if measure_from >= duration {
            bail!("measure_from must be before the end");
        }
        let rate = crate::perf_cmd::parse_rate(&f.link.rate)?;
        let delay = nanos("link.delay", &f.link.delay)?;
        let mtu = crate::perf_cmd::parse_mtu(f.mtu)?;
        Ok(Self {
            duration,
            sample,
            measure_from,
            rate,
            link: LinkConfig::new(rate, delay),
            mtu,
            priority: f.dscp >> 3,
            priorities: f
                .flows
                .iter()
                .fold(Priorities::only(f.dscp >> 3), |set, fl| {
                    set.with(fl.dscp.unwrap_or(f.dscp) >> 3)
                }),
        })
    }
}

/// A host's verbs objects (its context is the topology's).
struct Host {
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

/// The fabric with its hosts, and where the bottleneck is.
struct Net {
    topo: Topology,
    hosts: Vec<Host>,
    /// The bottleneck host.
    bottleneck: usize,
    /// The captures the scenario asked for: host, tap on its link, bytes.
    taps: Vec<(usize, TapId, MemoryCapture)>,
}

impl Net {
    /// Wire bits the bottleneck link has carried towards its host so far. Switch to
    /// host is direction b -> a of a host link. A link counts a frame when it starts
    /// serialising, so a window's edges can be off by a frame (a reading a hair above
    /// 100 % on short windows).
    fn bottleneck_wire_bytes(&self) -> u64 {
        let c = self
            .topo
            .fabric
            .link_counters(self.topo.hosts[self.bottleneck].link)[1];
        c.bytes + c.frames * WIRE_OVERHEAD as u64
    }

    /// Bytes queued at the bottleneck's switch port, all priorities.
    fn bottleneck_queue(&self) -> u64 {
        let h = &self.topo.hosts[self.bottleneck];
        let sw = self.topo.fabric.switch(self.topo.switches[h.switch]);
        (0..8).map(|p| sw.queue_depth(h.port, p)).sum()
    }

    /// Running totals of the fabric and the NICs.
    fn totals(&self) -> Result<Totals> {
        let fabric = FabricTotals::of(&self.topo.fabric);
        let nics = nic_totals(self.topo.hosts.iter().map(|h| &h.ctx))?;
        Ok(Totals {
            pause_frames: fabric.pause_frames,
            ecn_marked: fabric.ecn_marked,
            cnps: nics.engine.np_cnp_sent,
            retransmits: nics.engine.retransmitted_pkts,
            drops: fabric.lost + fabric.dropped,
        })
    }
}

struct Flow {
    src: usize,
    dst: usize,
    qp: QueuePair,
    /// The receiving QP: dropping it would destroy it.
    _dst_qp: QueuePair,
    /// Receiving QP number (the meter's key at `dst`).
    dst_qpn: u32,
    local: MemoryRegion,
    remote: MemoryRegion,
    start: Nanos,
    stop: Nanos,
    outstanding: usize,
    completed: u64,
}

/// Builds the fabric of `f`, runs it for its duration and measures it.
pub fn run(f: &FabricScenario, seed: u64, progress: &ProgressBar) -> Result<FabricResult> {
    let plan = Plan::of(f)?;
    let net = build(f, &plan, seed)?;
    let mut flows = f
        .flows
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            connect_flow(f, spec, i, &net, plan.mtu).with_context(|| format!("flow {}", spec.name))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut net = net;
    let run = simulate(f, &plan, &mut net, &mut flows, progress)?;
    for (h, spec) in f.hosts.iter().enumerate() {
        if let Some(e) = net.topo.node(h).rtl_dcb().and_then(|r| r.lockstep_error()) {
            bail!("host {}: the DCB RTL and its model differ: {e}", spec.name);
        }
    }
    let mut result = summarise(f, &plan, &net, &flows, run, seed)?;
    result.captures = captures(&mut net)?;
    Ok(result)
}

/// Closes the scenario's captures: each host's pcap bytes and its port's counters.
fn captures(net: &mut Net) -> Result<Vec<HostCapture>> {
    let mut out = Vec::new();
    for (h, tap, capture) in std::mem::take(&mut net.taps) {
        let fabric = &mut net.topo.fabric;
        fabric.close_tap(tap)?;
        let host = &net.topo.hosts[h];
        out.push(HostCapture {
            host: host.name.clone(),
            pcap: capture.bytes(),
            port: fabric.port_counters(host.node, 0),
        });
    }
    Ok(out)
}

/// The switches, and one NIC per host (10.0.0.(i + 1)) with DCQCN and PFC as the
/// scenario sets them, configured through the ABI as a host would.
fn build(f: &FabricScenario, plan: &Plan, seed: u64) -> Result<Net> {
    if f.hosts.len() > nic::MAX_NICS {
        bail!("at most {} hosts", nic::MAX_NICS);
    }
    let sw_index = |name: &str| {
        f.switches
            .iter()
            .position(|s| s == name)
            .with_context(|| format!("no switch named {name:?}"))
    };
    let flows_of = |h: usize| {
        f.flows
            .iter()
            .filter(|fl| {
                host_named(f, &fl.src).ok() == Some(h) || host_named(f, &fl.dst).ok() == Some(h)
            })
            .count()
    };
    let mut hosts = Vec::new();
    for (h, spec) in f.hosts.iter().enumerate() {
        let caps = nic::capacities(flows_of(h), f.depth);
        let model = nic::boot(Datapath::Software, false, nic::port_config(h), caps)?;
        let mut node = NicNode::new(model).metered();
        if f.single_tx_queue {
            node = node.single_queue();
        }
        if f.rtl_dcb {
            node = node
                .with_rtl_dcb(RtlDcbConfig::default())
                .context("the DCB RTL")?;
        }
        hosts.push(topology::HostSpec::new(
            &spec.name,
            sw_index(&spec.switch)?,
            node,
        ));
    }
    let trunks = f
        .trunks
        .iter()
        .map(|t| Ok((sw_index(&t.a)?, sw_index(&t.b)?)))
        .collect::<Result<Vec<_>>>()?;
    let switches = vec![switch_config(&f.switch, plan.priorities)?; f.switches.len()];
    let mut topo = Topology::build(seed, &switches, hosts, &trunks, plan.link)?;
    let mut verbs = Vec::new();
    for (h, host) in topo.hosts.iter().enumerate() {
        if f.cc.dcqcn {
            host.ctx.set_cc(&CcConfig::dcqcn(plan.rate))?;
        }
        if f.switch.pfc.is_some() {
            // The hosts honour the switches' pauses on the flows' priorities.
            host.ctx.set_pfc(plan.priorities.0)?;
        }
        if !f.nic_ets.is_empty() {
            let mut dcb = host.ctx.query_dcb()?;
            dcb.ets = ets_config(&f.nic_ets).context("nic_ets")?;
            host.ctx.set_dcb(&dcb)?;
        }
        let cq = host.ctx.create_cq((f.depth * flows_of(h)).max(16))?;
        let pd = host.ctx.alloc_pd()?;
        verbs.push(Host { pd, cq });
    }
    let mut taps = Vec::new();
    for name in &f.pcap {
        let h = host_named(f, name)?;
        let capture = roce_sim::MemoryCapture::new();
        // The host is end 0 of its link.
        let tap = topo
            .fabric
            .tap_end(topo.hosts[h].link, 0, capture.clone())?;
        taps.push((h, tap, capture));
    }
    Ok(Net {
        bottleneck: host_named(f, &f.bottleneck)?,
        topo,
        hosts: verbs,
        taps,
    })
}

/// What [`simulate`] recorded.
struct Recording {
    samples: Vec<Sample>,
    /// [`Net::bottleneck_wire_bytes`] when the averaging window opened.
    window_start_bytes: u64,
}

/// Runs the fabric for the scenario's duration: every microsecond the applications top
/// up their flows and reap completions; every `sample` the state is recorded.
fn simulate(
    f: &FabricScenario,
    plan: &Plan,
    net: &mut Net,
    flows: &mut [Flow],
    progress: &ProgressBar,
) -> Result<Recording> {
    let mut samples = Vec::new();
    let mut window_start_bytes = 0;
    let mut last_rx: Vec<u64> = vec![0; flows.len()];
    let mut wcs = vec![WorkCompletion::default(); 64];
    progress.set_length(plan.duration);
    let mut t = 0;
    while t < plan.duration {
        post_writes(f, net, flows, t)?;
        reap(f, net, flows, &mut wcs)?;
        t += POLL_NS;
        net.topo.fabric.run_until(t);
        if t == plan.measure_from {
            window_start_bytes = net.bottleneck_wire_bytes();
        }
        if t % plan.sample == 0 {
            samples.push(take_sample(plan, net, flows, &mut last_rx, t)?);
        }
        progress.set_position(t);
    }
    Ok(Recording {
        samples,
        window_start_bytes,
    })
}

/// The applications: keep each active flow's WRITEs outstanding.
fn post_writes(f: &FabricScenario, net: &mut Net, flows: &mut [Flow], t: Nanos) -> Result<()> {
    for (i, fl) in flows.iter_mut().enumerate() {
        if t < fl.start || t >= fl.stop {
            continue;
        }
        let write = WrOp::RdmaWrite {
            remote_addr: fl.remote.addr(),
            rkey: fl.remote.rkey(),
        };
        let n = top_up(&fl.qp, (0, fl.outstanding), f.depth, usize::MAX, |_| {
            signaled(i as u64, write, &fl.local, 0, f.message as u32)
        })?;
        if n > 0 {
            fl.outstanding += n;
            net.topo.fabric.wake(net.topo.hosts[fl.src].node);
        }
    }
    Ok(())
}

/// Every host's completions: each is one flow's WRITE done.
fn reap(
    f: &FabricScenario,
    net: &Net,
    flows: &mut [Flow],
    wcs: &mut [WorkCompletion],
) -> Result<()> {
    for (h, host) in net.hosts.iter().enumerate() {
        loop {
            let got = host.cq.poll(wcs)?;
            for wc in got.iter() {
                if wc.status != WcStatus::Success {
                    bail!(
                        "{}: a WRITE completed with {}",
                        net.topo.hosts[h].name,
                        wc.status.name()
                    );
                }
                let fl = flows
                    .get_mut(wc.wr_id as usize)
                    .context("a completion for no flow")?;
                fl.outstanding -= 1;
                fl.completed += f.message as u64;
            }
            if got.len() < wcs.len() {
                break;
            }
        }
    }
    Ok(())
}

/// The state at `t`: each flow's rate since the last sample (bytes its receiving QP
/// got), DCQCN's current rates, the bottleneck queue and the running totals.
fn take_sample(
    plan: &Plan,
    net: &Net,
    flows: &[Flow],
    last_rx: &mut [u64],
    t: Nanos,
) -> Result<Sample> {
    let rates = flows
        .iter()
        .zip(last_rx.iter_mut())
        .map(|(fl, last)| {
            let now = net.topo.node(fl.dst).rx_bytes(fl.dst_qpn);
            let r = (now - *last) as f64 * 8.0 / plan.sample as f64;
            *last = now;
            r
        })
        .collect();
    let mut rc = Vec::new();
    for fl in flows {
        let cc = fl.qp.query_cc()?;
        if cc.rp_enabled {
            rc.push(cc.rate as f64 / 1e9);
        }
    }
    let totals = net.totals()?;
    Ok(Sample {
        time_ns: t,
        rates_gbps: rates,
        rc_gbps: rc,
        queue_bytes: net.bottleneck_queue(),
        pause_frames: totals.pause_frames,
        cnps: totals.cnps,
        retransmits: totals.retransmits,
        drops: totals.drops,
    })
}

/// The averages over the window and the totals at the end.
fn summarise(
    f: &FabricScenario,
    plan: &Plan,
    net: &Net,
    flows: &[Flow],
    run: Recording,
    seed: u64,
) -> Result<FabricResult> {
    let Recording {
        samples,
        window_start_bytes,
    } = run;
    let window_ns = plan.duration - plan.measure_from;
    let carried = net.bottleneck_wire_bytes() - window_start_bytes;
    let in_window: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.time_ns > plan.measure_from)
        .collect();
    let mean_rates: Vec<f64> = flows
        .iter()
        .enumerate()
        .map(|(i, fl)| {
            let active: Vec<f64> = in_window
                .iter()
                .filter(|s| s.time_ns > fl.start && s.time_ns <= fl.stop)
                .map(|s| s.rates_gbps[i])
                .collect();
            active.iter().sum::<f64>() / active.len().max(1) as f64
        })
        .collect();
    let whole: Vec<f64> = flows
        .iter()
        .zip(&mean_rates)
        .filter(|(fl, _)| fl.start <= plan.measure_from && fl.stop >= plan.duration)
        .map(|(_, &r)| r)
        .collect();
    let queues: Vec<u64> = in_window.iter().map(|s| s.queue_bytes).collect();
    let ecn = f.switch.ecn.as_ref().map(|e| (e.kmin, e.kmax));
    let in_band = match ecn {
        Some((lo, hi)) => queues.iter().filter(|&&q| q >= lo && q <= hi).count() as f64,
        None => queues.len() as f64,
    } / queues.len().max(1) as f64;
    let totals = net.totals()?;
    let fabric = &net.topo.fabric;
    let host_paused_ns = net
        .topo
        .hosts
        .iter()
        .map(|h| {
            let c = fabric.port_counters(h.node, 0);
            (h.name.clone(), c.paused_ns[usize::from(plan.priority)])
        })
        .collect();
    let summary = Summary {
        duration_ns: plan.duration,
        measure_from_ns: plan.measure_from,
        drops: totals.drops,
        pause_frames: totals.pause_frames,
        pause_frames_by_port: pause_frames_by_port(f, net),
        host_paused_ns,
        cnps: totals.cnps,
        ecn_marked: totals.ecn_marked,
        retransmits: totals.retransmits,
        bottleneck_utilisation: carried as f64 * 8.0 / (plan.rate as f64 * window_ns as f64 / 1e9),
        jain: jain(&whole),
        fair_from_ns: fair_from(&samples, flows),
        mean_rates_gbps: mean_rates,
        queue_min: queues.iter().copied().min().unwrap_or(0),
        queue_mean: queues.iter().sum::<u64>() as f64 / queues.len().max(1) as f64,
        queue_max: queues.iter().copied().max().unwrap_or(0),
        queue_in_band: in_band,
        completed_bytes: flows.iter().map(|fl| fl.completed).collect(),
    };
    Ok(FabricResult {
        flows: f.flows.iter().map(|fl| fl.name.clone()).collect(),
        samples,
        runs: vec![summary.clone()],
        summary,
        ecn,
        seeds: vec![seed],
        captures: Vec::new(),
    })
}

/// PFC frames sent per switch port, labelled `switch->neighbour`, busiest first.
fn pause_frames_by_port(f: &FabricScenario, net: &Net) -> Vec<(String, u64)> {
    let t = &net.topo;
    let mut by_port = Vec::new();
    for (s, sw) in t.switches.iter().enumerate() {
        for (p, c) in t.fabric.switch(*sw).counters().ports.iter().enumerate() {
            if c.pause_frames_sent > 0 {
                let to = match t.ports[s][p] {
                    Neighbour::Host(h) => t.hosts[h].name.clone(),
                    Neighbour::Switch(u, _) => f.switches[u].clone(),
                };
                by_port.push((format!("{}->{to}", f.switches[s]), c.pause_frames_sent));
            }
        }
    }
    by_port.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_port
}

/// Runs the scenario with each of its seeds (`f.runs` from `seed`) on `threads`
/// threads: the first run whole, the others' summaries beside it.
pub fn run_seeds(
    f: &FabricScenario,
    seed: u64,
    threads: usize,
    progress: &ProgressBar,
) -> Result<FabricResult> {
    if f.runs == 0 {
        bail!("runs must be at least 1");
    }
    let seeds: Vec<u64> = (seed..seed + f.runs).collect();
    let mut results = super::in_parallel(
        &seeds,
        threads,
        |&s| run(f, s, &ProgressBar::hidden()),
        progress,
    )?;
    let mut first = results.remove(0);
    first.runs.extend(results.into_iter().map(|r| r.summary));
    first.seeds = seeds;
    Ok(first)
}

/// Fairness window of [`Summary::fair_from_ns`].
const FAIR_WINDOW_NS: Nanos = 1_000_000;

/// The first sample time from which Jain's index of the flows' mean rates over each
/// trailing [`FAIR_WINDOW_NS`] stays at or above 0.95. Only flows active over the whole
/// trailing window count; a window with fewer than two of them says nothing.
fn fair_from(samples: &[Sample], flows: &[Flow]) -> Option<Nanos> {
    let mut from = None;
    for (i, s) in samples.iter().enumerate() {
        let lo = s.time_ns.saturating_sub(FAIR_WINDOW_NS);
        if s.time_ns < FAIR_WINDOW_NS {
            continue;
        }
        let window: Vec<&Sample> = samples[..=i].iter().filter(|x| x.time_ns > lo).collect();
        let means: Vec<f64> = flows
            .iter()
            .enumerate()
            .filter(|(_, fl)| fl.start <= lo && fl.stop >= s.time_ns)
            .map(|(k, _)| window.iter().map(|x| x.rates_gbps[k]).sum::<f64>() / window.len() as f64)
            .collect();
        if means.len() < 2 {
            continue;
        }
        if jain(&means) >= 0.95 {
            from.get_or_insert(s.time_ns);
        } else {
            from = None;
        }
    }
    from
}

fn host_named(f: &FabricScenario, name: &str) -> Result<usize> {
    f.hosts
        .iter()
        .position(|h| h.name == name)
        .with_context(|| format!("no host named {name:?}"))
}

/// ETS with these classes and shares, the other priorities strict (every priority strict
/// without any).
fn ets_config(classes: &[EtsClass]) -> Result<EtsConfig> {
    let mut ets = EtsConfig::STRICT;
    for c in classes {
        if c.priority > 7 || !ets.strict.contains(c.priority) {
            bail!("priority {} twice or not 0..7", c.priority);
        }
        ets.strict = ets.strict.without(Priorities::only(c.priority));
        ets.bw[usize::from(c.priority)] = c.share;
    }
    ets.validate().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(ets)
}

/// The switches' configuration, PFC and ECN on the flows' `priorities`.
pub(crate) fn switch_config(s: &SwitchSpec, priorities: Priorities) -> Result<SwitchConfig> {
    let ets = ets_config(&s.ets).context("switch.ets")?;
    Ok(SwitchConfig {
        port_buffer: s.port_buffer,
        shared_buffer: s.shared_buffer,
        pfc: s
            .pfc
            .map(|p| PfcConfig::new(priorities, p.xoff, p.xon, p.headroom)),
        red: s.ecn.as_ref().map(|e| RedConfig {
            priorities: e.priorities.as_ref().map_or(priorities.0, |list| {
                list.iter().fold(0, |set, &p| set | 1 << (p & 7))
            }),
            ..RedConfig::new(e.kmin, e.kmax, e.pmax)
        }),
        ets,
        // Routes are static; learning would only add table churn.
        learning: false,
        flood_unknown: false,
        ..SwitchConfig::default()
    })
}

/// Connects one flow's QP pair and registers its buffers.
fn connect_flow(
    f: &FabricScenario,
    spec: &FlowSpec,
    index: usize,
    net: &Net,
    mtu: Mtu,
) -> Result<Flow> {
    let (src, dst) = (host_named(f, &spec.src)?, host_named(f, &spec.dst)?);
    if src == dst {
        bail!("a flow needs two hosts");
    }
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE;
    let make = |h: &Host| -> Result<(QueuePair, MemoryRegion)> {
        let qp =
            h.pd.create_qp(QpType::Rc, &h.cq, &h.cq)
                .max_send_wr(f.depth)
                .max_recv_wr(1)
                .build()?;
        Ok((qp, h.pd.reg_mr(f.message, access)?))
    };
    let (sqp, local) = make(&net.hosts[src])?;
    let (dqp, remote) = make(&net.hosts[dst])?;
    // ECT(0) on every data packet: switches with ECN mark it, others ignore it.
    let opts = ConnectOptions {
        mtu,
        timeout: f.timeout,
        traffic_class: spec.dscp.unwrap_or(f.dscp) << 2 | ECT0,
        ..ConnectOptions::default()
    };
    connect_pair(&sqp, &dqp, index, &opts)?;
    let time = |what, s: &Option<String>, default| match s {
        Some(s) => nanos(what, s),
        None => Ok(default),
    };
    Ok(Flow {
        src,
        dst,
        dst_qpn: dqp.qpn().value(),
        _dst_qp: dqp,
        qp: sqp,
        local,
        remote,
        start: time("start", &spec.start, 0)?,
        stop: time("stop", &spec.stop, Nanos::MAX)?,
        outstanding: 0,
        completed: 0,
    })
}

/// Running totals of a fabric run.
struct Totals {
    pause_frames: u64,
    ecn_marked: u64,
    cnps: u64,
    retransmits: u64,
    drops: u64,
}

impl FabricResult {
    /// Index of the flow named `name`.
    pub fn flow(&self, name: &str) -> Option<usize> {
        self.flows.iter().position(|f| f == name)
    }

    /// `time_us,<flow>_gbps...,[<flow>_rc_gbps...,]queue_bytes,pause_frames,cnps,
    /// retransmits,drops`: measured rates, then DCQCN's current rates when it is on.
    pub fn write_csv(&self, mut w: impl Write) -> std::io::Result<()> {
        write!(w, "time_us")?;
        for f in &self.flows {
            write!(w, ",{f}_gbps")?;
        }
        let dcqcn = self.samples.first().is_some_and(|s| !s.rc_gbps.is_empty());
        if dcqcn {
            for f in &self.flows {
                write!(w, ",{f}_rc_gbps")?;
            }
        }
        writeln!(w, ",queue_bytes,pause_frames,cnps,retransmits,drops")?;
        for s in &self.samples {
            write!(w, "{}", s.time_ns as f64 / 1e3)?;
            for r in s.rates_gbps.iter().chain(&s.rc_gbps) {
                write!(w, ",{r:.3}")?;
            }
            writeln!(
                w,
                ",{},{},{},{},{}",
                s.queue_bytes, s.pause_frames, s.cnps, s.retransmits, s.drops
            )?;
        }
        Ok(())
    }

    /// The summary as a two-column Markdown table.
    pub fn table(&self) -> String {
        let s = &self.summary;
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut rows: Vec<(String, String)> = vec![
            (
                "simulated".into(),
                format!(
                    "{} ms, averages over {}..{} ms",
                    ms(s.duration_ns),
                    ms(s.measure_from_ns),
                    ms(s.duration_ns)
                ),
            ),
            ("drops".into(), s.drops.to_string()),
            (
                "PFC frames sent by switches".into(),
                s.pause_frames.to_string(),
            ),
        ];
        if !s.pause_frames_by_port.is_empty() {
            let list: Vec<String> = s
                .pause_frames_by_port
                .iter()
                .map(|(p, n)| format!("{p} {n}"))
                .collect();
            rows.push(("... per port".into(), list.join(", ")));
        }
        let paused: Vec<String> = s
            .host_paused_ns
            .iter()
            .filter(|(_, ns)| *ns > 0)
            .map(|(h, ns)| format!("{h} {:.1}%", 100.0 * *ns as f64 / s.duration_ns as f64))
            .collect();
        if !paused.is_empty() {
            rows.push(("hosts' time paused".into(), paused.join(", ")));
        }
        rows.extend([
            ("ECN marks".into(), s.ecn_marked.to_string()),
            ("CNPs sent".into(), s.cnps.to_string()),
            ("retransmitted packets".into(), s.retransmits.to_string()),
            (
                "bottleneck utilisation".into(),
                format!("{:.2}%", 100.0 * s.bottleneck_utilisation),
            ),
            (
                "bottleneck queue (min / mean / max)".into(),
                format!(
                    "{:.1} / {:.1} / {:.1} KB",
                    s.queue_min as f64 / 1e3,
                    s.queue_mean / 1e3,
                    s.queue_max as f64 / 1e3
                ),
            ),
        ]);
        if let Some((lo, hi)) = self.ecn {
            rows.push((
                format!(
                    "samples with Kmin {} KB <= queue <= Kmax {} KB",
                    lo as f64 / 1e3,
                    hi as f64 / 1e3
                ),
                format!("{:.1}%", 100.0 * s.queue_in_band),
            ));
        }
        let rates: Vec<String> = self
            .flows
            .iter()
            .zip(&s.mean_rates_gbps)
            .map(|(f, r)| format!("{f} {r:.2}"))
            .collect();
        rows.push(("mean rate per flow (Gb/s)".into(), rates.join(", ")));
        rows.push(("Jain's index".into(), format!("{:.4}", s.jain)));
        rows.push((
            "Jain >= 0.95 over every trailing 1 ms from".into(),
            s.fair_from_ns
                .map_or("never".into(), |t| format!("{} ms", ms(t))),
        ));
        let mut out = String::from("| measure | value |\n| --- | --- |\n");
        for (k, v) in rows {
            out += &format!("| {k} | {v} |\n");
        }
        if self.runs.len() > 1 {
            out += &self.seeds_table();
        }
        out
    }

    /// The measures that rest on random draws, over every run: mean and 95 % interval.
    fn seeds_table(&self) -> String {
        let (first, last) = (self.seeds[0], self.seeds[self.seeds.len() - 1]);
        let mut out = format!(
            "\nOver {} runs (seeds {first} to {last}), mean and 95 % interval:\n\n| measure | seed {first} | mean ± 95 % |\n| --- | ---: | ---: |\n",
            self.runs.len()
        );
        type Get = fn(&Summary) -> f64;
        let measures: [(&str, Get, usize); 8] = [
            (
                "bottleneck utilisation (%)",
                |s| 100.0 * s.bottleneck_utilisation,
                2,
            ),
            ("bottleneck queue mean (KB)", |s| s.queue_mean / 1e3, 1),
            (
                "samples in the ECN band (%)",
                |s| 100.0 * s.queue_in_band,
                1,
            ),
            ("Jain's index", |s| s.jain, 4),
            ("PFC frames sent by switches", |s| s.pause_frames as f64, 0),
            ("ECN marks", |s| s.ecn_marked as f64, 0),
            ("CNPs sent", |s| s.cnps as f64, 0),
            ("drops", |s| s.drops as f64, 0),
        ];
        for (name, get, digits) in measures {
            let xs: Vec<f64> = self.runs.iter().map(get).collect();
            let i = Interval::of(&xs);
            out += &format!("| {name} | {:.digits$} | {} |\n", xs[0], i.show(digits));
        }
        for (k, flow) in self.flows.iter().enumerate() {
            let xs: Vec<f64> = self.runs.iter().map(|s| s.mean_rates_gbps[k]).collect();
            let i = Interval::of(&xs);
            out += &format!(
                "| {flow} mean rate (Gb/s) | {:.2} | {} |\n",
                xs[0],
                i.show(2)
            );
        }
        out
    }
}
