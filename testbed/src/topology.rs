//! Fabrics of switches and NICs with static routes: hosts hang off switches, trunks join
//! switches, and every switch gets a route to every host along the shortest path over
//! the trunks (a tree; no ECMP here).

use crate::node::NicNode;
use roce_core::wire::ethernet::MacAddr;
use roce_host::Context;
use roce_sim::{Fabric, HostId, LinkConfig, LinkId, SwitchConfig, SwitchId};
use std::collections::VecDeque;
use std::fmt;

/// A host to place: its NIC node, the switch (index) it hangs off, and its link.
pub struct HostSpec {
    pub name: String,
    pub switch: usize,
    pub node: NicNode,
    /// The host's link; the topology's link when `None`.
    pub link: Option<LinkConfig>,
}

impl HostSpec {
    /// Host `name` on switch `switch`, over the topology's link.
    pub fn new(name: &str, switch: usize, node: NicNode) -> Self {
        Self {
            name: name.to_string(),
            switch,
            node,
            link: None,
        }
    }

    /// A link of its own.
    pub fn with_link(mut self, link: LinkConfig) -> Self {
        self.link = Some(link);
        self
    }
}

/// A placed host: its fabric node, its host context, where it is plugged in.
pub struct Host {
    pub name: String,
    pub node: HostId<NicNode>,
    pub ctx: Context,
    /// The switch (index) and its port this host is on.
    pub switch: usize,
    pub port: usize,
    /// Host to switch is direction a -> b of this link.
    pub link: LinkId,
}

/// What is on the other end of a switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neighbour {
    /// Host (index).
    Host(usize),
    /// Switch (index) and its port.
    Switch(usize, usize),
}

/// Switches, hosts and the routes between them, on a fabric.
pub struct Topology {
    pub fabric: Fabric,
    pub switches: Vec<SwitchId>,
    pub hosts: Vec<Host>,
    /// Per switch, what each of its ports leads to: its hosts in the order given, then
    /// its trunks in the order given.
    pub ports: Vec<Vec<Neighbour>>,
}

/// Why a topology cannot be built.
#[derive(Debug)]
pub enum TopologyError {
    /// A host or trunk names a switch that is not there.
    NoSuchSwitch(usize),
    /// A NIC would not open (its ABI failed).
    Open(roce_host::Error),
    /// A builder needed a different number of hosts.
    Hosts,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchSwitch(s) => write!(f, "no switch {s}"),
            Self::Open(e) => write!(f, "cannot open a NIC: {e}"),
            Self::Hosts => f.write_str("wrong number of hosts"),
        }
    }
}

impl std::error::Error for TopologyError {}

impl Topology {
    /// Builds the fabric (seeded with `seed`): one switch per config, the hosts on their
    /// switches, `trunks` between switches, every link `link` unless a host has its
    /// own, and a route to every host on every switch.
    pub fn build(
        seed: u64,
        switches: &[SwitchConfig],
        hosts: Vec<HostSpec>,
        trunks: &[(usize, usize)],
        link: LinkConfig,
    ) -> Result<Self, TopologyError> {
        let mut ports: Vec<Vec<Neighbour>> = vec![Vec::new(); switches.len()];
        for (h, host) in hosts.iter().enumerate() {
            ports
                .get_mut(host.switch)
                .ok_or(TopologyError::NoSuchSwitch(host.switch))?
                .push(Neighbour::Host(h));
        }
        for &(a, b) in trunks {
            for s in [a, b] {
                if s >= switches.len() {
                    return Err(TopologyError::NoSuchSwitch(s));
                }
            }
            let (pa, pb) = (ports[a].len(), ports[b].len());
            ports[a].push(Neighbour::Switch(b, pb));
            ports[b].push(Neighbour::Switch(a, pa));
        }

        let mut fabric = Fabric::new(seed);
        let switch_ids: Vec<SwitchId> = switches
            .iter()
            .zip(&ports)
            .map(|(cfg, p)| fabric.add_switch(cfg.clone(), p.len()))
            .collect();
        let mut placed = Vec::with_capacity(hosts.len());
        for (h, spec) in hosts.into_iter().enumerate() {
            let ctx = Context::open(spec.node.nic().clone()).map_err(TopologyError::Open)?;
            let node = fabric.add_host(spec.node);
            let s = spec.switch;
            let port = ports[s]
                .iter()
                .position(|n| *n == Neighbour::Host(h))
                .ok_or(TopologyError::Hosts)?;
            let link = fabric.connect(node, 0, switch_ids[s], port, spec.link.unwrap_or(link));
            placed.push(Host {
                name: spec.name,
                node,
                ctx,
                switch: s,
                port,
                link,
            });
        }
        for (s, list) in ports.iter().enumerate() {
            for (p, n) in list.iter().enumerate() {
                if let Neighbour::Switch(t, tp) = *n {
                    if s < t {
                        fabric.connect(switch_ids[s], p, switch_ids[t], tp, link);
                    }
                }
            }
        }
        let mut t = Self {
            fabric,
            switches: switch_ids,
            hosts: placed,
            ports,
        };
        t.add_routes();
        Ok(t)
    }

    /// A route to every host on every switch: breadth-first from the host's switch over
    /// the trunks, each switch pointing at the trunk it was reached by.
    fn add_routes(&mut self) {
        for h in &self.hosts {
            let mac = MacAddr(h.ctx.port_addr().1);
            let mut seen = vec![false; self.switches.len()];
            seen[h.switch] = true;
            self.fabric
                .switch_mut(self.switches[h.switch])
                .add_route(mac, h.port);
            let mut queue = VecDeque::from([h.switch]);
            while let Some(s) = queue.pop_front() {
                for n in &self.ports[s] {
                    if let Neighbour::Switch(t, tp) = *n {
                        if !seen[t] {
                            seen[t] = true;
                            self.fabric.switch_mut(self.switches[t]).add_route(mac, tp);
                            queue.push_back(t);
                        }
                    }
                }
            }
        }
    }

    /// The fabric node of host `h`.
    pub fn node(&self, h: usize) -> &NicNode {
        self.fabric.host(self.hosts[h].node)
    }
}
