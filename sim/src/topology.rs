//! Topology builders (the fat-tree also for a fabric split into partitions). Hosts are added to the fabric first (any [`Node`](crate::Node)
//! types), then wired here by their node id and the MAC their frames carry; every host
//! uses its port 0. Switch forwarding is static (a route per host MAC), so no frame is
//! flooded while tables would still be learning.

use crate::fabric::{Fabric, LinkId, NodeId, RemoteEnd, SwitchId};
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

/// A k-ary fat-tree (Al-Fares, Loukissas and Vahdat, SIGCOMM 2008), as the DCQCN, IRN
/// and HPCC evaluations use: `k` pods, each of `k/2` edge (top-of-rack) and `k/2`
/// aggregation switches; `(k/2)^2` core switches; `k^3/4` hosts; every switch has `k`
/// ports, so the tree has full bisection bandwidth. k = 4: 16 hosts and 20 switches;
/// k = 8: 128 hosts and 80 switches.
///
/// Numbering. Host `h` is in pod `h / (k^2/4)`, on edge switch `(h / (k/2))` (global
/// edge index `pod * k/2 + i`) at its port `h % (k/2)`. Edge switch (pod, i): ports
/// `0..k/2` to its hosts, port `k/2 + j` to aggregation switch (pod, j). Aggregation
/// switch (pod, j): port `i` to edge (pod, i), port `k/2 + m` to core switch
/// `j * k/2 + m`. Core switch c: port `pod` to aggregation switch (pod, c / (k/2)).
///
/// Routing. Static routes per host MAC; upward by ECMP over all uplinks (a salted hash
/// of addresses and UDP ports, so a flow keeps its path), downward on the one path.
/// Learning and flooding are off (the tree has loops).
///
/// Partitions ([`crate::parallel`]). Pod `p` is in partition `p % parts`, core switch
/// `c` in partition `c % parts`; links between an aggregation and a core switch of
/// different partitions join them (`RemoteEnd::link` = `pod * (k/2)^2 + c`), so the
/// lookahead is the fabric link's delay.
#[derive(Debug, Clone, PartialEq)]
pub struct FatTree {
    pub k: usize,
    /// Host to edge switch.
    pub host_link: LinkConfig,
    /// Between switches.
    pub fabric_link: LinkConfig,
    pub switch: SwitchConfig,
}

/// The elements of a fat-tree one partition built (`None` for what lives elsewhere),
/// by their global indices.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FatTreePart {
    pub edges: Vec<Option<SwitchId>>,
    pub aggs: Vec<Option<SwitchId>>,
    pub cores: Vec<Option<SwitchId>>,
    /// `host_links[h]` joins host h (endpoint a) to its edge switch.
    pub host_links: Vec<Option<LinkId>>,
}

impl FatTree {
    /// A k-ary fat-tree (k even, at least 2) with these links and switches.
    pub fn new(k: usize, host_link: LinkConfig, fabric_link: LinkConfig, sw: SwitchConfig) -> Self {
        assert!(k >= 2 && k % 2 == 0, "a fat-tree needs an even k >= 2");
        Self {
            k,
            host_link,
            fabric_link,
            switch: SwitchConfig {
                learning: false,
                flood_unknown: false,
                ..sw
            },
        }
    }

    /// `k^3 / 4`.
    pub fn hosts(&self) -> usize {
        self.k * self.k * self.k / 4
    }

    /// Hosts per pod, `k^2 / 4`.
    pub fn hosts_per_pod(&self) -> usize {
        self.k * self.k / 4
    }

    /// The pod of host `h`.
    pub fn pod_of(&self, h: usize) -> usize {
        h / self.hosts_per_pod()
    }

    /// The global index of the edge switch of host `h`.
    pub fn edge_of(&self, h: usize) -> usize {
        h / (self.k / 2)
    }

    /// The partition of host `h` when the tree is split into `parts`.
    pub fn partition_of(&self, h: usize, parts: usize) -> usize {
        self.pod_of(h) % parts
    }

    /// Switches a frame from host `a` to host `b` crosses: 1 under one edge switch, 3 in
    /// one pod, 5 across pods.
    pub fn switch_hops(&self, a: usize, b: usize) -> usize {
        if self.edge_of(a) == self.edge_of(b) {
            1
        } else if self.pod_of(a) == self.pod_of(b) {
            3
        } else {
            5
        }
    }

    /// Builds partition `part` of `parts` (1 builds it all): its switches, its hosts (made
    /// by `host(h, fabric)`, in host order, attached by their port 0), its links and
    /// routes. `macs[h]` is the address host h's frames carry, for every host.
    pub fn build(
        &self,
        f: &mut Fabric,
        part: usize,
        parts: usize,
        macs: &[MacAddr],
        mut host: impl FnMut(usize, &mut Fabric) -> NodeId,
    ) -> FatTreePart {
        let k = self.k;
        let half = k / 2;
        assert!(parts >= 1 && part < parts, "partition {part} of {parts}");
        assert_eq!(macs.len(), self.hosts(), "one MAC per host");
        let pod_here = |pod: usize| pod % parts == part;
        let core_here = |c: usize| c % parts == part;
        let add = |f: &mut Fabric, here: bool| here.then(|| f.add_switch(self.switch.clone(), k));
        let edges: Vec<Option<SwitchId>> =
            (0..k * half).map(|e| add(f, pod_here(e / half))).collect();
        let aggs: Vec<Option<SwitchId>> =
            (0..k * half).map(|a| add(f, pod_here(a / half))).collect();
        let cores: Vec<Option<SwitchId>> = (0..half * half).map(|c| add(f, core_here(c))).collect();
        let nodes: Vec<Option<NodeId>> = (0..self.hosts())
            .map(|h| pod_here(self.pod_of(h)).then(|| host(h, f)))
            .collect();

        let uplinks: Vec<usize> = (half..k).collect();
        for (h, &mac) in macs.iter().enumerate() {
            let (pod, edge) = (self.pod_of(h), self.edge_of(h));
            for (e, sw) in edges.iter().enumerate() {
                let Some(sw) = *sw else { continue };
                if e == edge {
                    f.switch_mut(sw).add_route(mac, h % half);
                } else {
                    f.switch_mut(sw).add_ecmp_route(mac, &uplinks);
                }
            }
            for (a, sw) in aggs.iter().enumerate() {
                let Some(sw) = *sw else { continue };
                if a / half == pod {
                    f.switch_mut(sw).add_route(mac, edge % half);
                } else {
                    f.switch_mut(sw).add_ecmp_route(mac, &uplinks);
                }
            }
            for sw in cores.iter().flatten() {
                f.switch_mut(*sw).add_route(mac, pod);
            }
        }

        let host_links = nodes
            .iter()
            .enumerate()
            .map(|(h, n)| {
                let sw = edges[self.edge_of(h)]?;
                Some(f.connect((*n)?, 0, sw, h % half, self.host_link))
            })
            .collect();
        for pod in (0..k).filter(|&p| pod_here(p)) {
            for i in 0..half {
                for j in 0..half {
                    let (e, a) = (edges[pod * half + i], aggs[pod * half + j]);
                    if let (Some(e), Some(a)) = (e, a) {
                        f.connect(e, half + j, a, i, self.fabric_link);
                    }
                }
            }
        }
        // Aggregation to core, from either side; a link both of whose ends are here is
        // connected once, from the aggregation side.
        for pod in 0..k {
            for j in 0..half {
                for m in 0..half {
                    let c = j * half + m;
                    let link = u32::try_from(pod * half * half + c).expect("k fits");
                    match (aggs[pod * half + j], cores[c]) {
                        (Some(a), Some(s)) => {
                            f.connect(a, half + m, s, pod, self.fabric_link);
                        }
                        (Some(a), None) => {
                            let to = RemoteEnd {
                                partition: c % parts,
                                link,
                            };
                            f.connect_remote(a, half + m, to, self.fabric_link);
                        }
                        (None, Some(s)) => {
                            let to = RemoteEnd {
                                partition: pod % parts,
                                link,
                            };
                            f.connect_remote(s, pod, to, self.fabric_link.reversed());
                        }
                        (None, None) => {}
                    }
                }
            }
        }
        FatTreePart {
            edges,
            aggs,
            cores,
            host_links,
        }
    }
}
