//! roce-host: the host driver, with a verbs-shaped API (libibverbs' objects and names).
//! It reaches the NIC only through the ABI of `roce_firmware::abi`: registers, doorbells
//! and rings in host memory.
//!
//! ```
//! use roce_core::engine::PortConfig;
//! use roce_host::{Capacities, Context, LocalNic};
//!
//! let nic = LocalNic::new(PortConfig::new([2, 0, 0, 0, 0, 1], roce_core::transport::ipv4_gid([10, 0, 0, 1])), Capacities::Firmware);
//! let ctx = Context::open(nic).unwrap();
//! let pd = ctx.alloc_pd().unwrap();
//! let cq = ctx.create_cq(16).unwrap();
//! let qp = pd.create_qp(roce_core::transport::QpType::Rc, &cq, &cq).build().unwrap();
//! assert_eq!(qp.state(), roce_core::transport::QpState::Reset);
//! ```

pub mod device;
pub mod error;
pub mod memory;
#[cfg(target_os = "linux")]
pub mod raw;
pub mod verbs;

pub use device::{Capacities, Device, DynDatapath, LocalNic, PortDatapath, PortQueues};
pub use error::Error;
pub use memory::HostMemory;
#[cfg(target_os = "linux")]
pub use raw::{RawCounters, RawNic};
pub use verbs::{
    AsyncEvents, CompletionQueue, ConnectOptions, Context, MemoryRegion, ProtectionDomain,
    QpBuilder, QpEndpoint, QueuePair,
};
