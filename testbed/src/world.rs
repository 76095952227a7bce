//! Where two NICs meet: in memory with no timing model, or on the simulated fabric. A
//! test or a benchmark works through the verbs of the worlds' host contexts, and only
//! asks the world for the time, to make progress, and which NIC has new work.

use crate::counters::{fabric_drops, retransmits};
use crate::node::NicNode;
use crate::topology::{HostSpec, Topology, TopologyError};
use roce_device::NicModel;
use roce_host::Context;
use roce_sim::{Fabric, HostId, LinkConfig, LinkId, SwitchConfig, SwitchId};
use std::rc::Rc;
use std::time::Instant;

/// Counters a run reports besides its timings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Request packets the requesters sent again (Go-Back-N resends).
    pub retransmits: u64,
    /// Frames lost on links or dropped by switches or NIC receive buffers.
    pub drops: u64,
}

/// Two NICs, their hosts' opened contexts, and the fabric between them.
pub trait World {
    /// Current time in nanoseconds: simulated, or wall clock.
    fn now(&self) -> u64;
    /// Lets the NICs and the fabric run a little; false when nothing at all is left to
    /// happen (every queue empty, no timer armed): the test is then stuck.
    fn advance(&mut self) -> bool;
    /// NIC `side` has new work from its host (a doorbell rang).
    fn kick(&mut self, side: usize);
    /// The hosts' contexts of the two NICs, client first.
    fn contexts(&self) -> [&Context; 2];
    /// Frames lost on the way (links, switches, NIC receive buffers).
    fn drops(&self) -> u64;
    /// Whether times are simulated.
    fn simulated(&self) -> bool;

    /// Brings the world's clock up to the NICs' own before a measurement starts: a NIC
    /// whose driver waited on it (`Device::progress`: a SoC running its firmware through
    /// the setup's commands) ran ahead of the fabric, and work posted at the fabric's
    /// time would wait for the fabric to catch up, counted as the measurement's.
    fn catch_up(&mut self) {}

    /// Loss and retransmission counters (retransmissions as the NICs count them, read
    /// through the ABI).
    fn counters(&self) -> NetCounters {
        NetCounters {
            retransmits: retransmits(self.contexts()).unwrap_or(0),
            drops: self.drops(),
        }
    }
}

/// Opens a host context on each NIC.
fn open(nics: &[Rc<dyn NicModel>; 2]) -> Result<[Context; 2], roce_host::Error> {
    let [a, b] = nics;
    Ok([Context::open(a.clone())?, Context::open(b.clone())?])
}

/// The two NICs connected in memory with no timing model: frames move as soon as they
/// are sent, and time is the wall clock. This measures the NIC models themselves.
pub struct Direct {
    nics: [Rc<dyn NicModel>; 2],
    ctxs: [Context; 2],
    start: Instant,
}

impl Direct {
    pub fn new(nics: [Rc<dyn NicModel>; 2]) -> Result<Self, roce_host::Error> {
        Ok(Self {
            ctxs: open(&nics)?,
            nics,
            start: Instant::now(),
        })
    }
}

/// Room for any frame a NIC sends.
const FRAME_BUF: usize = 16 * 1024;

impl World for Direct {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn advance(&mut self) -> bool {
        let now = self.now();
        let mut busy = false;
        for nic in &self.nics {
            nic.set_time(now);
            busy |= nic.poll();
        }
        let mut buf = [0u8; FRAME_BUF];
        for (from, to) in [(0, 1), (1, 0)] {
            while let Some(n) = self.nics[from].transmit_frame(&mut buf) {
                self.nics[to].receive_frame(&buf[..n]);
                busy = true;
            }
        }
        // Timers run on wall time: a pending one keeps the world alive.
        busy || self.nics.iter().any(|n| n.poll_timeout().is_some())
    }

    fn kick(&mut self, _side: usize) {}

    fn contexts(&self) -> [&Context; 2] {
        [&self.ctxs[0], &self.ctxs[1]]
    }

    fn drops(&self) -> u64 {
        0
    }

    fn simulated(&self) -> bool {
        false
    }
}

/// Two NICs on the simulated fabric: back to back on one link, or through a switch.
pub struct Sim {
    pub fabric: Fabric,
    hosts: [HostId<NicNode>; 2],
    ctxs: [Context; 2],
    /// The link NIC 1 receives on (the only link back to back; the switch's link to
    /// NIC 1 through a switch).
    pub link: LinkId,
    /// The switch between the NICs, if any ([`Sim::through_switch`]).
    pub switch: Option<SwitchId>,
}

impl Sim {
    /// Two NICs joined by `link`.
    pub fn back_to_back(
        nics: [Rc<dyn NicModel>; 2],
        link: LinkConfig,
        seed: u64,
    ) -> Result<Self, roce_host::Error> {
        Self::connect(nics.map(NicNode::new), link, seed)
    }

    /// Two NIC nodes as built (with receive buffers, say) joined by `link`.
    pub fn connect(
        nodes: [NicNode; 2],
        link: LinkConfig,
        seed: u64,
    ) -> Result<Self, roce_host::Error> {
        let ctxs = open(&[nodes[0].nic().clone(), nodes[1].nic().clone()])?;
        let mut fabric = Fabric::new(seed);
        let hosts = nodes.map(|n| fabric.add_host(n));
        let link = roce_sim::topology::back_to_back(&mut fabric, hosts[0], hosts[1], link);
        Ok(Self {
            fabric,
            hosts,
            ctxs,
            link,
            switch: None,
        })
    }

    /// The two NIC nodes on ports 0 and 1 of a switch, NIC i joined by `links[i]` (a
    /// slower second link makes the switch a bottleneck), with a route to each. `link`
    /// is then the switch-to-NIC-1 link.
    pub fn through_switch(
        nodes: [NicNode; 2],
        links: [LinkConfig; 2],
        sw: SwitchConfig,
        seed: u64,
    ) -> Result<Self, TopologyError> {
        let [a, b] = nodes;
        let hosts = vec![
            HostSpec::new("a", 0, a).with_link(links[0]),
            HostSpec::new("b", 0, b).with_link(links[1]),
        ];
        let t = Topology::build(seed, &[sw], hosts, &[], links[1])?;
        let [ha, hb]: [_; 2] = t.hosts.try_into().map_err(|_| TopologyError::Hosts)?;
        Ok(Self {
            fabric: t.fabric,
            hosts: [ha.node, hb.node],
            link: hb.link,
            ctxs: [ha.ctx, hb.ctx],
            switch: t.switches.first().copied(),
        })
    }

    /// The fabric node of NIC `side` (its receive-buffer counters, say).
    pub fn node(&self, side: usize) -> &NicNode {
        self.fabric.host(self.hosts[side])
    }

    /// The fabric node of NIC `side`, to change (to run a DCBX agent on it, say).
    pub fn node_mut(&mut self, side: usize) -> &mut NicNode {
        self.fabric.host_mut(self.hosts[side])
    }

    /// The fabric's host handle of NIC `side` (for `Fabric::port_counters`).
    pub fn host(&self, side: usize) -> HostId<NicNode> {
        self.hosts[side]
    }
}

impl World for Sim {
    fn now(&self) -> u64 {
        self.fabric.now()
    }

    fn advance(&mut self) -> bool {
        self.fabric.step()
    }

    fn kick(&mut self, side: usize) {
        self.fabric.wake(self.hosts[side]);
    }

    fn catch_up(&mut self) {
        let ahead = self.hosts.map(|h| self.fabric.host(h).nic().now());
        if let Some(&t) = ahead.iter().max() {
            self.fabric.run_until(t);
        }
    }

    fn contexts(&self) -> [&Context; 2] {
        [&self.ctxs[0], &self.ctxs[1]]
    }

    fn drops(&self) -> u64 {
        fabric_drops(&self.fabric, &self.hosts)
    }

    fn simulated(&self) -> bool {
        true
    }
}
