//! Totals over a whole world: what the fabric lost, dropped, paused and marked, and what
//! the NICs counted (read through their hosts' contexts, as `rdma statistic` would).

use crate::node::NicNode;
use roce_host::{Context, PortCounters};
use roce_sim::{Fabric, HostId};

/// What the fabric's links and switches did, summed over all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricTotals {
    /// Frames the links lost.
    pub lost: u64,
    /// Frames the switches dropped: no buffer, or lossless frames past the headroom.
    pub dropped: u64,
    /// PFC frames the switches sent.
    pub pause_frames: u64,
    /// Frames the switches marked CE.
    pub ecn_marked: u64,
}

impl FabricTotals {
    /// The totals as they stand.
    pub fn of(fabric: &Fabric) -> Self {
        let c = fabric.counters();
        let ports = || c.switches.iter().flat_map(|s| &s.ports);
        let queues = || ports().flat_map(|p| &p.queues);
        Self {
            lost: c.links.iter().flatten().map(|l| l.lost).sum(),
            dropped: queues().map(|q| q.dropped + q.headroom_drops).sum(),
            pause_frames: ports().map(|p| p.pause_frames_sent).sum(),
            ecn_marked: queues().map(|q| q.ecn_marked).sum(),
        }
    }
}

/// Frames lost on the way: on links, in switches, and in the receive buffers of the NIC
/// nodes `hosts`.
pub fn fabric_drops(fabric: &Fabric, hosts: &[HostId<NicNode>]) -> u64 {
    let t = FabricTotals::of(fabric);
    let nics: u64 = hosts
        .iter()
        .map(|&h| fabric.host(h).rx_buffer_counters().dropped)
        .sum();
    t.lost + t.dropped + nics
}

/// The NICs' counters, summed.
pub fn nic_totals<'a>(
    ctxs: impl IntoIterator<Item = &'a Context>,
) -> Result<PortCounters, roce_host::Error> {
    let mut sum = PortCounters::default();
    for c in ctxs {
        sum += c.query_counters()?;
    }
    Ok(sum)
}

/// Request packets the NICs sent again (Go-Back-N or selective repeat).
pub fn retransmits<'a>(
    ctxs: impl IntoIterator<Item = &'a Context>,
) -> Result<u64, roce_host::Error> {
    Ok(nic_totals(ctxs)?.engine.retransmitted_pkts)
}
