//! roce-testbed: simulated worlds for the NIC models of `roce-device`, for `roce perf`,
//! `roce sim` and the tests.
//!
//! * [`nic`]: the NICs' addresses, table sizes and datapaths.
//! * [`NicNode`]: a NIC model as a node of the `roce-sim` fabric, optionally with a
//!   finite receive buffer that sends PFC ([`rx_buffer`]), or with its DCB MAC in RTL
//!   ([`rtl_dcb`]: the Verilated `roce_dcb_top` between the NIC and its link).
//! * [`World`]: two NICs and their hosts, in memory ([`Direct`]) or on the fabric
//!   ([`Sim`]).
//! * [`dcbx`]: the host's DCBX agent, announcing and adopting DCB settings over LLDP.
//! * [`Topology`]: switches, hosts and trunks with static routes.
//! * [`counters`]: totals over the fabric and the NICs; [`traffic`]: connecting QP pairs
//!   and keeping send queues full.
//!
//! The worlds reach each NIC the way an application does, through its host's
//! [`roce_host::Context`] (the ABI), and drive the model's clock and frames through
//! [`roce_device::NicModel`].

pub mod counters;
pub mod dcbx;
pub mod nic;
mod node;
pub mod rtl_dcb;
pub mod rx_buffer;
pub mod topology;
pub mod traffic;
mod world;

pub use node::{HostPath, NicNode};
pub use topology::{HostSpec, Topology, TopologyError};
pub use world::{Direct, NetCounters, Sim, World};
