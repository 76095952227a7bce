//! roce-sim: a deterministic discrete-event Ethernet fabric for RoCE.
//!
//! * [`Fabric`]: hosts, switches and links driven by one event queue in nanoseconds;
//!   same seed, same result, bit for bit.
//! * [`Node`]: the sans-IO interface of an end host (a NIC engine, or the test nodes of
//!   [`nodes`]), with its call-order contract.
//! * [`LinkConfig`]: rate, propagation delay and seeded faults (loss, corruption,
//!   duplication, reordering) per direction; exact serialization timing.
//! * [`Switch`]: output-queued, eight strict-priority queues per port, finite buffers,
//!   RED/ECN marking ([`RedConfig`]), PFC ([`PfcConfig`]), learning, static and ECMP
//!   forwarding.
//! * Every port's MAC honours received PFC frames (pause timers per priority).
//! * pcap taps on links, counters everywhere, queue-depth time series.
//! * [`topology`]: back to back, star (two hosts through a switch, N:1 incast), chain,
//!   two-tier leaf-spine.
//!
//! ```
//! use roce_core::wire::ethernet::MacAddr;
//! use roce_sim::nodes::{Generator, GeneratorConfig, Sink};
//! use roce_sim::topology::{self, Attach};
//! use roce_sim::{Fabric, LinkConfig, SwitchConfig};
//! use std::net::{IpAddr, Ipv4Addr};
//!
//! let (a, b) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
//! let ip = |n| IpAddr::V4(Ipv4Addr::new(10, 0, 0, n));
//! let mut fabric = Fabric::new(42); // the seed of every random draw
//! let sender = fabric.add_host(Generator::new(GeneratorConfig {
//!     count: Some(100),
//!     ..GeneratorConfig::new(a, b, ip(1), ip(2), 4096)
//! }));
//! let sink = fabric.add_host(Sink::new());
//! topology::two_hosts_one_switch(
//!     &mut fabric,
//!     Attach::new(sender, a),
//!     Attach::new(sink, b),
//!     LinkConfig::new(100_000_000_000, 1_000), // 100 Gb/s, 1 us
//!     SwitchConfig::default(),
//! );
//! fabric.run();
//! assert_eq!(fabric.host(sink).total().frames, 100);
//! ```

pub mod classify;
mod fabric;
pub mod link;
mod mac;
pub mod node;
pub mod nodes;
pub mod parallel;
mod pcap;
mod pool;
pub mod queue;
pub mod red;
pub mod rng;
pub mod stats;
pub mod switch;
pub mod topology;
pub mod workload;

pub use fabric::{
    Counters, Fabric, HostId, LinkId, NodeId, Outgoing, QueueSample, QueueSeries, RemoteEnd,
    SamplerId, SwitchId, TapId,
};
pub use link::{Faults, LinkConfig, LinkCounters, MIN_FRAME_LEN, WIRE_OVERHEAD};
pub use mac::PortCounters;
pub use node::{Node, Priorities};
pub use parallel::{Parallel, Partition, Profile, Waits};
pub use pcap::MemoryCapture;
pub use pool::MAX_FRAME_LEN;
pub use queue::Nanos;
pub use red::{QueueMeasure, RedConfig};
pub use switch::{
    PfcConfig, PfcCounters, QueueCounters, Switch, SwitchConfig, SwitchCounters, SwitchPortCounters,
};

/// Serialization time in nanoseconds (rounded up) of one frame of `len` bytes (without
/// FCS) on an idle link of `rate_bps`: `(max(len, 60) + 24) * 8 / rate`.
pub fn serialization_ns(len: usize, rate_bps: u64) -> Nanos {
    let bits = (len.max(MIN_FRAME_LEN) + WIRE_OVERHEAD) as u64 * 8;
    (bits * 1_000_000_000).div_ceil(rate_bps)
}
