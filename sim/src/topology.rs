//! Topology builders. Hosts are added to the fabric first (any [`Node`](crate::Node)
//! types), then wired here by their node id and the MAC their frames carry; every host
//! uses its port 0. Switch forwarding is static (a route per host MAC), so no frame is
//! flooded while tables would still be learning.

use crate::fabric::{Fabric, LinkId, NodeId, SwitchId};
use crate::link::LinkConfig;
use crate::switch::SwitchConfig;
use roce_core::wire::ethernet::MacAddr;

/// A host as the topology sees it: its node, attached by port 0, and its MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attach {
    pub node: NodeId,
    pub mac: MacAddr,
}

impl Attach {
    pub fn new(node: impl Into<NodeId>, mac: MacAddr) -> Self {
        Self {
            node: node.into(),
            mac,
        }
    }
}

/// Two hosts on one cable.
pub fn back_to_back(
    f: &mut Fabric,
    a: impl Into<NodeId>,
    b: impl Into<NodeId>,
    link: LinkConfig,
) -> LinkId {
    f.connect(a, 0, b, 0, link)
}

/// Hosts around one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Star {
    pub switch: SwitchId,
    /// `links[i]` joins `hosts[i]` (endpoint a) to switch port i (endpoint b).
    pub links: Vec<LinkId>,
}

/// Host i on switch port i, with a route to each host.
pub fn star(f: &mut Fabric, hosts: &[Attach], link: LinkConfig, sw: SwitchConfig) -> Star {
    let switch = f.add_switch(sw, hosts.len());
    let links = hosts
        .iter()
        .enumerate()
        .map(|(port, h)| {
            f.switch_mut(switch).add_route(h.mac, port);
            f.connect(h.node, 0, switch, port, link)
        })
        .collect();
    Star { switch, links }
}

/// Two hosts through one switch: `a` on port 0, `b` on port 1.
pub fn two_hosts_one_switch(
    f: &mut Fabric,
    a: Attach,
    b: Attach,
    link: LinkConfig,
    sw: SwitchConfig,
) -> Star {
    star(f, &[a, b], link, sw)
}

/// N:1 incast through one switch: the receiver on port 0, sender i on port i + 1.
pub fn incast(
    f: &mut Fabric,
    senders: &[Attach],
    receiver: Attach,
    link: LinkConfig,
    sw: SwitchConfig,
) -> Star {
    let hosts: Vec<Attach> = std::iter::once(receiver)
        .chain(senders.iter().copied())
        .collect();
    star(f, &hosts, link, sw)
}

/// A line of switches between two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub switches: Vec<SwitchId>,
    /// From `a` to `b`: host a - s0, s0 - s1, ..., s(n-1) - host b.
    pub links: Vec<LinkId>,
}

/// `a` - s0 - ... - s(n-1) - `b`, one link config per hop (`links.len()` = switches + 1).
/// Each switch has port 0 towards `a` and port 1 towards `b`.
pub fn chain(
    f: &mut Fabric,
    a: Attach,
    b: Attach,
    links: &[LinkConfig],
    sw: SwitchConfig,
) -> Chain {
    assert!(links.len() >= 2, "a chain needs at least one switch");
    let switches: Vec<SwitchId> = (1..links.len())
        .map(|_| {
            let s = f.add_switch(sw.clone(), 2);
            f.switch_mut(s).add_route(a.mac, 0);
            f.switch_mut(s).add_route(b.mac, 1);
            s
        })
        .collect();
    let mut out = Vec::with_capacity(links.len());
    let (mut prev, mut prev_port) = (a.node, 0);
    for (i, cfg) in links.iter().enumerate() {
        let (next, next_port) = match switches.get(i) {
            Some(&s) => (s.id(), 0),
            None => (b.node, 0),
        };
        out.push(f.connect(prev, prev_port, next, next_port, *cfg));
        (prev, prev_port) = (next, 1);
    }
    Chain {
        switches,
        links: out,
    }
}

/// A two-tier leaf-spine (folded Clos).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSpine {
    pub leaves: Vec<SwitchId>,
    pub spines: Vec<SwitchId>,
    /// `host_links[h]` joins host h (endpoint a) to its leaf.
    pub host_links: Vec<LinkId>,
    /// `uplinks[l][s]` joins leaf l's port `hosts_per_leaf + s` (endpoint a) to spine s's
    /// port l.
    pub uplinks: Vec<Vec<LinkId>>,
}

/// Host h on leaf `h / hosts_per_leaf`, port `h % hosts_per_leaf`; every leaf linked to
/// every spine. Leaves reach remote hosts by ECMP over all spines (hash of the UDP
/// source port and addresses); spines route to the host's leaf. Learning and flooding
/// are turned off: the fabric has loops.
pub fn leaf_spine(
    f: &mut Fabric,
    hosts: &[Attach],
    hosts_per_leaf: usize,
    spines: usize,
    host_link: LinkConfig,
    fabric_link: LinkConfig,
    sw: SwitchConfig,
) -> LeafSpine {
    assert!(
        hosts_per_leaf > 0 && spines > 0,
        "leaf-spine needs hosts and spines"
    );
    let leaves_n = hosts.len().div_ceil(hosts_per_leaf);
    let sw = SwitchConfig {
        learning: false,
        flood_unknown: false,
        ..sw
    };
    let leaves: Vec<SwitchId> = (0..leaves_n)
        .map(|_| f.add_switch(sw.clone(), hosts_per_leaf + spines))
        .collect();
    let spine_ids: Vec<SwitchId> = (0..spines)
        .map(|_| f.add_switch(sw.clone(), leaves_n))
        .collect();
    let uplink_ports: Vec<usize> = (hosts_per_leaf..hosts_per_leaf + spines).collect();
    let mut host_links = Vec::with_capacity(hosts.len());
    for (h, host) in hosts.iter().enumerate() {
        let (leaf, port) = (h / hosts_per_leaf, h % hosts_per_leaf);
        host_links.push(f.connect(host.node, 0, leaves[leaf], port, host_link));
        for (l, &leaf_id) in leaves.iter().enumerate() {
            let s = f.switch_mut(leaf_id);
            if l == leaf {
                s.add_route(host.mac, port);
            } else {
                s.add_ecmp_route(host.mac, &uplink_ports);
            }
        }
        for &spine in &spine_ids {
            f.switch_mut(spine).add_route(host.mac, leaf);
        }
    }
    let uplinks = leaves
        .iter()
        .enumerate()
        .map(|(l, &leaf)| {
            spine_ids
                .iter()
                .enumerate()
                .map(|(s, &spine)| f.connect(leaf, hosts_per_leaf + s, spine, l, fabric_link))
                .collect()
        })
        .collect();
    LeafSpine {
        leaves,
        spines: spine_ids,
        host_links,
        uplinks,
    }
}
