//! roce-host: the host driver, with a verbs-shaped API (libibverbs' objects and names).
//! It reaches the NIC only through the device boundary ([`Device`]: the BAR's 32-bit
//! registers, host memory the NIC reaches by DMA, and a way to let the NIC make
//! progress), speaking the ABI of `roce_abi` (registers, doorbells, rings and commands
//! in host memory). The NIC models behind the boundary live in `roce-device`.
//!
//! ```
//! use roce_core::engine::PortConfig;
//! use roce_core::transport::{ipv4_gid, QpState, QpType};
//! use roce_device::{Capacities, LocalNic};
//! use roce_host::Context;
//!
//! let nic = LocalNic::new(PortConfig::new([2, 0, 0, 0, 0, 1], ipv4_gid([10, 0, 0, 1])), Capacities::Firmware);
//! let ctx = Context::open(nic).unwrap();
//! let pd = ctx.alloc_pd().unwrap();
//! let cq = ctx.create_cq(16).unwrap();
//! let qp = pd.create_qp(QpType::Rc, &cq, &cq).build().unwrap();
//! assert_eq!(qp.state(), QpState::Reset);
//! ```

pub mod device;
pub mod error;
pub mod memory;
pub mod port;
pub mod rdma_cm;
pub mod verbs;

pub use device::Device;
pub use error::Error;
pub use memory::HostMemory;
pub use port::{PortAttr, PortCounters};
pub use verbs::{
    inc_rkey, AsyncEvents, CompletionQueue, ConnectOptions, Context, MemoryRegion, MemoryWindow,
    MwBindInfo, ProtectionDomain, QpBuilder, QpEndpoint, QueuePair, SharedReceiveQueue, SrqAttr,
};
