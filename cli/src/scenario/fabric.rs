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
use crate::perf::world::NicNode;
use crate::progress::Progress;
use anyhow::{bail, Context as _, Result};
use roce_core::cc::CcConfig;
use roce_core::dcb::EtsConfig;
use roce_core::engine::PortConfig;
use roce_core::memory::AccessFlags;
use roce_core::num::Psn;
use roce_core::transport::{
    ipv4_gid, Mtu, QpType, SendFlags, SendWr, WcOpcode, WcStatus, WorkCompletion, WrOp,
};
use roce_device::{Capacities, LocalNic};
use roce_host::{
    CompletionQueue, ConnectOptions, Context, MemoryRegion, ProtectionDomain, QpEndpoint, QueuePair,
};
use roce_sim::stats::Interval;
use roce_sim::{
    Fabric, HostId, LinkConfig, LinkId, Nanos, PfcConfig, Priorities, RedConfig, SwitchConfig,
    SwitchId, WIRE_OVERHEAD,
};
use serde::Deserialize;
use std::io::Write;
use std::rc::Rc;

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

/// One ETS class of [`SwitchSpec::ets`].
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

struct Host {
    name: String,
    node: HostId<NicNode>,
    nic: Rc<LocalNic>,
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
    /// The switch and its port this host is on.
    switch: usize,
    port: usize,
    link: LinkId,
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
pub fn run(f: &FabricScenario, seed: u64, progress: &mut Progress) -> Result<FabricResult> {
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
    let link = LinkConfig::new(rate, delay);
    let mtu = Mtu::from_bytes_floor(f.mtu)
        .filter(|m| m.bytes() == f.mtu)
        .with_context(|| format!("MTU {}: use 256, 512, 1024, 2048 or 4096", f.mtu))?;
    let priority = f.dscp >> 3;

    // Switches and their ports: hosts first, then trunks.
    let sw_index = |name: &str| {
        f.switches
            .iter()
            .position(|s| s == name)
            .with_context(|| format!("no switch named {name:?}"))
    };
    let mut ports: Vec<Vec<Neighbour>> = vec![Vec::new(); f.switches.len()];
    for (h, host) in f.hosts.iter().enumerate() {
        ports[sw_index(&host.switch)?].push(Neighbour::Host(h));
    }
    for t in &f.trunks {
        let (a, b) = (sw_index(&t.a)?, sw_index(&t.b)?);
        let (pa, pb) = (ports[a].len(), ports[b].len());
        ports[a].push(Neighbour::Switch(b, pb));
        ports[b].push(Neighbour::Switch(a, pa));
    }

    let mut fabric = Fabric::new(seed);
    let flow_prios = f.flows.iter().fold(Priorities::only(priority), |set, fl| {
        set.with(fl.dscp.unwrap_or(f.dscp) >> 3)
    });
    let cfg = switch_config(&f.switch, flow_prios)?;
    let switches: Vec<SwitchId> = ports
        .iter()
        .map(|p| fabric.add_switch(cfg.clone(), p.len()))
        .collect();

    // Hosts: one NIC each, 10.0.0.(i + 1).
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
        if h >= 250 {
            bail!("at most 250 hosts");
        }
        let last = h as u8 + 1;
        let mut port_cfg = PortConfig::new([0x02, 0, 0, 0, 0, last], ipv4_gid([10, 0, 0, last]));
        if f.cc.dcqcn {
            port_cfg.cc = CcConfig::dcqcn(rate);
        }
        let caps =
            if flows_of(h) <= roce_firmware::config::QPS && f.depth <= roce_firmware::config::SQ {
                Capacities::Firmware
            } else {
                Capacities::Host
            };
        let nic = LocalNic::new(port_cfg, caps);
        let mut node = NicNode::new(nic.clone()).metered();
        if f.single_tx_queue {
            node = node.single_queue();
        }
        let node = fabric.add_host(node);
        let s = sw_index(&spec.switch)?;
        let port = ports[s]
            .iter()
            .position(|n| *n == Neighbour::Host(h))
            .expect("every host has a port");
        let link = fabric.connect(node, 0, switches[s], port, link);
        let ctx = Context::open(nic.clone()).context("open a NIC")?;
        let cq = ctx.create_cq((f.depth * flows_of(h)).max(16))?;
        let pd = ctx.alloc_pd()?;
        hosts.push(Host {
            name: spec.name.clone(),
            node,
            nic,
            ctx,
            pd,
            cq,
            switch: s,
            port,
            link,
        });
    }
    for (s, list) in ports.iter().enumerate() {
        for (p, n) in list.iter().enumerate() {
            if let Neighbour::Switch(t, tp) = *n {
                if s < t {
                    fabric.connect(switches[s], p, switches[t], tp, link);
                }
            }
        }
    }
    add_routes(&mut fabric, &switches, &ports, &hosts);
    let mut taps = Vec::new();
    for name in &f.pcap {
        let h = host_named(f, name)?;
        let capture = roce_sim::MemoryCapture::new();
        // The host is end 0 of its link.
        let tap = fabric.tap_end(hosts[h].link, 0, capture.clone())?;
        taps.push((h, tap, capture));
    }

    let mut flows = Vec::new();
    for (i, spec) in f.flows.iter().enumerate() {
        flows.push(
            connect_flow(f, spec, i, &hosts, mtu).with_context(|| format!("flow {}", spec.name))?,
        );
    }

    let bottleneck = host_named(f, &f.bottleneck)?;
    let (bsw, bport) = (hosts[bottleneck].switch, hosts[bottleneck].port);
    let blink = hosts[bottleneck].link;
    let wire_bytes = |fab: &Fabric| {
        // Switch to host is direction b -> a of a host link. A link counts a frame when
        // it starts serialising, so a window's edges can be off by a frame (a reading a
        // hair above 100 % on short windows).
        let c = fab.link_counters(blink)[1];
        c.bytes + c.frames * WIRE_OVERHEAD as u64
    };

    let mut samples = Vec::new();
    let mut last_rx: Vec<u64> = vec![0; flows.len()];
    let mut window_start_bytes = None;
    let mut wcs = vec![
        WorkCompletion::new(
            0,
            roce_core::num::Qpn::new(0),
            WcOpcode::Send,
            WcStatus::Success
        );
        64
    ];
    let mut t = 0;
    while t < duration {
        // The applications: keep each active flow's WRITEs outstanding.
        for (i, fl) in flows.iter_mut().enumerate() {
            if t < fl.start || t >= fl.stop {
                continue;
            }
            let mut batch = Vec::new();
            while fl.outstanding + batch.len() < f.depth {
                batch.push(
                    SendWr::new(
                        i as u64,
                        WrOp::RdmaWrite {
                            remote_addr: fl.remote.addr(),
                            rkey: fl.remote.rkey(),
                        },
                    )
                    .sge(fl.local.addr(), f.message as u32, fl.local.lkey())
                    .flags(SendFlags::SIGNALED),
                );
            }
            if !batch.is_empty() {
                fl.outstanding += batch.len();
                fl.qp.post_send_list(&batch)?;
                fabric.wake(hosts[fl.src].node);
            }
        }
        for h in &hosts {
            loop {
                let n = h.cq.poll(&mut wcs)?;
                for wc in &wcs[..n] {
                    if wc.status != WcStatus::Success {
                        bail!("{}: a WRITE completed with {}", h.name, wc.status.name());
                    }
                    let fl = flows
                        .get_mut(wc.wr_id as usize)
                        .context("a completion for no flow")?;
                    fl.outstanding -= 1;
                    fl.completed += f.message as u64;
                }
                if n < wcs.len() {
                    break;
                }
            }
        }
        t += POLL_NS;
        fabric.run_until(t);
        if t == measure_from {
            window_start_bytes = Some(wire_bytes(&fabric));
        }
        if t % sample == 0 {
            let rates = flows
                .iter()
                .zip(last_rx.iter_mut())
                .map(|(fl, last)| {
                    let now = fabric.host(hosts[fl.dst].node).rx_bytes(fl.dst_qpn);
                    let r = (now - *last) as f64 * 8.0 / sample as f64;
                    *last = now;
                    r
                })
                .collect();
            let rc = flows
                .iter()
                .filter_map(|fl| hosts[fl.src].nic.qp_cc(fl.qp.qpn()))
                .filter(|cc| cc.rp_enabled)
                .map(|cc| cc.rate as f64 / 1e9)
                .collect();
            let totals = totals(&fabric, &hosts);
            samples.push(Sample {
                time_ns: t,
                rates_gbps: rates,
                rc_gbps: rc,
                queue_bytes: (0..8)
                    .map(|p| fabric.switch(switches[bsw]).queue_depth(bport, p))
                    .sum(),
                pause_frames: totals.pause_frames,
                cnps: totals.cnps,
                retransmits: totals.retransmits,
                drops: totals.drops,
            });
        }
        progress.update(t as usize, duration as usize);
    }
    progress.finish();

    // The averages over the window.
    let window_ns = duration - measure_from;
    let carried = wire_bytes(&fabric) - window_start_bytes.unwrap_or(0);
    let in_window: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.time_ns > measure_from)
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
        .filter(|(fl, _)| fl.start <= measure_from && fl.stop >= duration)
        .map(|(_, &r)| r)
        .collect();
    let queues: Vec<u64> = in_window.iter().map(|s| s.queue_bytes).collect();
    let ecn = f.switch.ecn.as_ref().map(|e| (e.kmin, e.kmax));
    let in_band = match ecn {
        Some((lo, hi)) => queues.iter().filter(|&&q| q >= lo && q <= hi).count() as f64,
        None => queues.len() as f64,
    } / queues.len().max(1) as f64;
    let totals = totals(&fabric, &hosts);
    let counters = fabric.counters();
    let mut by_port = Vec::new();
    for (s, sw) in switches.iter().enumerate() {
        for (p, c) in fabric.switch(*sw).counters().ports.iter().enumerate() {
            if c.pause_frames_sent > 0 {
                let to = match ports[s][p] {
                    Neighbour::Host(h) => hosts[h].name.clone(),
                    Neighbour::Switch(t, _) => f.switches[t].clone(),
                };
                by_port.push((format!("{}->{to}", f.switches[s]), c.pause_frames_sent));
            }
        }
    }
    by_port.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let host_paused_ns = hosts
        .iter()
        .map(|h| {
            let c = fabric.port_counters(h.node, 0);
            (h.name.clone(), c.paused_ns[usize::from(priority)])
        })
        .collect();
    let ecn_marked = counters
        .switches
        .iter()
        .flat_map(|s| &s.ports)
        .flat_map(|p| &p.queues)
        .map(|q| q.ecn_marked)
        .sum();
    let summary = Summary {
        duration_ns: duration,
        measure_from_ns: measure_from,
        drops: totals.drops,
        pause_frames: totals.pause_frames,
        pause_frames_by_port: by_port,
        host_paused_ns,
        cnps: totals.cnps,
        ecn_marked,
        retransmits: totals.retransmits,
        bottleneck_utilisation: carried as f64 * 8.0 / (rate as f64 * window_ns as f64 / 1e9),
        jain: jain(&whole),
        fair_from_ns: fair_from(&samples, &flows),
        mean_rates_gbps: mean_rates,
        queue_min: queues.iter().copied().min().unwrap_or(0),
        queue_mean: queues.iter().sum::<u64>() as f64 / queues.len().max(1) as f64,
        queue_max: queues.iter().copied().max().unwrap_or(0),
        queue_in_band: in_band,
        completed_bytes: flows.iter().map(|fl| fl.completed).collect(),
    };
    let mut captures = Vec::new();
    for (h, tap, capture) in taps {
        fabric.close_tap(tap)?;
        captures.push(HostCapture {
            host: hosts[h].name.clone(),
            pcap: capture.bytes(),
            port: fabric.port_counters(hosts[h].node, 0),
        });
    }
    Ok(FabricResult {
        flows: f.flows.iter().map(|fl| fl.name.clone()).collect(),
        samples,
        runs: vec![summary.clone()],
        summary,
        ecn,
        seeds: vec![seed],
        captures,
    })
}

/// Runs the scenario with each of its seeds (`f.runs` from `seed`) on `threads`
/// threads: the first run whole, the others' summaries beside it.
pub fn run_seeds(
    f: &FabricScenario,
    seed: u64,
    threads: usize,
    progress: &mut Progress,
) -> Result<FabricResult> {
    if f.runs == 0 {
        bail!("runs must be at least 1");
    }
    let seeds: Vec<u64> = (seed..seed + f.runs).collect();
    let mut results = super::in_parallel(
        &seeds,
        threads,
        |&s| run(f, s, &mut Progress::silent()),
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

/// What is on the other end of a switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Neighbour {
    Host(usize),
    /// Switch index and its port.
    Switch(usize, usize),
}

fn host_named(f: &FabricScenario, name: &str) -> Result<usize> {
    f.hosts
        .iter()
        .position(|h| h.name == name)
        .with_context(|| format!("no host named {name:?}"))
}

/// The switches' configuration, PFC and ECN on the flows' `priorities`.
pub(crate) fn switch_config(s: &SwitchSpec, priorities: Priorities) -> Result<SwitchConfig> {
    let mut ets = EtsConfig::STRICT;
    for c in &s.ets {
        if c.priority > 7 || !ets.strict.contains(c.priority) {
            bail!("switch.ets: priority {} twice or not 0..7", c.priority);
        }
        ets.strict = ets.strict.without(Priorities::only(c.priority));
        ets.bw[usize::from(c.priority)] = c.share;
    }
    ets.validate()
        .map_err(|e| anyhow::anyhow!("switch.ets: {e:?}"))?;
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

/// A route to every host on every switch: breadth-first from the host's switch over the
/// trunks, each switch pointing at the trunk it was reached by.
fn add_routes(
    fabric: &mut Fabric,
    switches: &[SwitchId],
    ports: &[Vec<Neighbour>],
    hosts: &[Host],
) {
    for h in hosts {
        let mac = roce_core::wire::ethernet::MacAddr(h.ctx.port_addr().1);
        let mut seen = vec![false; switches.len()];
        seen[h.switch] = true;
        fabric.switch_mut(switches[h.switch]).add_route(mac, h.port);
        let mut queue = std::collections::VecDeque::from([h.switch]);
        while let Some(s) = queue.pop_front() {
            for n in &ports[s] {
                if let Neighbour::Switch(t, tp) = *n {
                    if !seen[t] {
                        seen[t] = true;
                        fabric.switch_mut(switches[t]).add_route(mac, tp);
                        queue.push_back(t);
                    }
                }
            }
        }
    }
}

/// Connects one flow's QP pair and registers its buffers.
fn connect_flow(
    f: &FabricScenario,
    spec: &FlowSpec,
    index: usize,
    hosts: &[Host],
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
    let (sqp, local) = make(&hosts[src])?;
    let (dqp, remote) = make(&hosts[dst])?;
    // ECT(0) on every data packet: switches with ECN mark it, others ignore it.
    let opts = ConnectOptions {
        mtu,
        timeout: f.timeout,
        traffic_class: spec.dscp.unwrap_or(f.dscp) << 2 | ECT0,
        ..ConnectOptions::default()
    };
    let psn = |side: u32| Psn::new(0x10_0000 * (side + 1) + index as u32);
    let ep = |h: &Host, qp: &QueuePair, side| {
        let (gid, mac) = h.ctx.port_addr();
        QpEndpoint {
            qpn: qp.qpn(),
            psn: psn(side),
            gid,
            mac,
        }
    };
    sqp.connect(&ep(&hosts[dst], &dqp, 1), psn(0), &opts)?;
    dqp.connect(&ep(&hosts[src], &sqp, 0), psn(1), &opts)?;
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

struct Totals {
    pause_frames: u64,
    cnps: u64,
    retransmits: u64,
    drops: u64,
}

fn totals(fabric: &Fabric, hosts: &[Host]) -> Totals {
    let c = fabric.counters();
    let sw_ports = || c.switches.iter().flat_map(|s| &s.ports);
    let dropped: u64 = sw_ports()
        .flat_map(|p| &p.queues)
        .map(|q| q.dropped + q.headroom_drops)
        .sum();
    let lost: u64 = c.links.iter().flatten().map(|l| l.lost).sum();
    let nic = |get: fn(&roce_core::transport::Counters) -> u64| -> u64 {
        hosts.iter().map(|h| get(&h.nic.counters())).sum()
    };
    Totals {
        pause_frames: sw_ports().map(|p| p.pause_frames_sent).sum(),
        cnps: nic(|c| c.np_cnp_sent),
        retransmits: nic(|c| c.retransmitted_pkts),
        drops: dropped + lost,
    }
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
