//! The verbs-level chores every workload shares: connecting QP pairs, and keeping a send
//! queue topped up with signaled work requests.

use roce_core::num::Psn;
use roce_core::transport::{SendFlags, SendWr, WrOp};
use roce_host::{ConnectOptions, MemoryRegion, QueuePair};

/// The first PSN side `side` (0 or 1) of QP pair `index` sends: distinct per pair and
/// side, so a frame of one pair can never pass for another's.
pub fn psn(side: usize, index: usize) -> Psn {
    Psn::new(0x10_0000 * (side as u32 + 1) + index as u32)
}

/// Connects QP pair `index`: `a` (side 0) and `b` (side 1), each towards the other's
/// endpoint, each sending from its [`psn`].
pub fn connect_pair(
    a: &QueuePair,
    b: &QueuePair,
    index: usize,
    opts: &ConnectOptions,
) -> Result<(), roce_host::Error> {
    let (pa, pb) = (psn(0, index), psn(1, index));
    a.connect(&b.endpoint(pb), pa, opts)?;
    b.connect(&a.endpoint(pa), pb, opts)
}

/// A signaled work request `op` with the `len` bytes at `offset` in `local`.
pub fn signaled(id: u64, op: WrOp, local: &MemoryRegion, offset: u64, len: u32) -> SendWr {
    SendWr::new(id, op)
        .sge(local.addr() + offset, len, local.lkey())
        .flags(SendFlags::SIGNALED)
}

/// Tops up `qp`'s send queue, as `ib_write_bw` does: posts work requests, `wr(k)` for
/// the `k`-th since the start, behind one doorbell, until `depth` are outstanding or
/// `total` have been posted (`posted` and `outstanding` say where things stand).
/// Returns how many it posted.
pub fn top_up(
    qp: &QueuePair,
    (posted, outstanding): (usize, usize),
    depth: usize,
    total: usize,
    wr: impl FnMut(usize) -> SendWr,
) -> Result<usize, roce_host::Error> {
    let n = depth
        .saturating_sub(outstanding)
        .min(total.saturating_sub(posted));
    if n > 0 {
        let batch: Vec<SendWr> = (posted..posted + n).map(wr).collect();
        qp.post_send_list(&batch)?;
    }
    Ok(n)
}
