//! The firmware's capacities: one place, all static. The soft-core image and the QEMU
//! self-test use these; the host harness may pick larger ones for the same runtime.

/// Queue pairs.
pub const QPS: usize = 8;
/// Completion queues.
pub const CQS: usize = 8;
/// Protection domains.
pub const PDS: usize = 4;
/// Memory regions.
pub const MRS: usize = 16;
/// Send WQEs the engine holds per QP.
pub const SQ: usize = 32;
/// Receive WQEs the engine holds per QP.
pub const RQ: usize = 32;
/// Completions the engine buffers per CQ before the runtime writes them to the host.
pub const CQE: usize = 32;
/// Responder READ/ATOMIC resources per QP (max_dest_rd_atomic).
pub const RD: usize = 4;

/// The NIC with these capacities over the HAL `H`.
pub type FirmwareNic<H> = crate::runtime::Nic<H, QPS, CQS, PDS, MRS, SQ, RQ, CQE, RD>;
