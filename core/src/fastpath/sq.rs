//! The hardware's WQE fetch (`docs/fastpath.md` §3.8): at a doorbell the fast path reads
//! the send WQEs of a QP the firmware handed over from the host ring itself, checks
//! their local keys in the MR table and queues the descriptor the engine would have
//! written. It takes only what it can finish alone; anything else (a local operation,
//! inline data, a fence, a key that fails, a misshapen atomic) hands the send queue back
//! to the firmware, which then posts the WQEs the hardware still holds to the engine
//! (`Engine::fastpath_adopt_begin` / `fastpath_adopt_end`) and fetches the rest itself.

use crate::memory::{AccessFlags, Pd, Protection};
use crate::num::{Psn, Qpn, Rkey};
use crate::transport::{sgl_len, SendFlags, SendWr};

use super::tx::{MsgOp, TxMsg};

/// What the engine tells the hardware when it hands a QP's send queue over
/// (`Engine::fastpath_sq_idle`): nothing of it is outstanding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqIdle {
    /// The next message's first PSN (every earlier one is acknowledged).
    pub psn: Psn,
    /// The local ACK timeout (None: the QP waits for ever).
    pub rto: Option<u64>,
    /// Every WQE is signaled (`sq_sig_all`).
    pub sig_all: bool,
    /// The QP's protection domain, for the local key checks.
    pub pd: Pd,
    /// The most WQEs the hardware may hold unfinished: the engine's send-queue depth,
    /// so that the engine can take them all back, and at most the messages the engine
    /// itself keeps in flight (`TransportConfig::max_msgs_in_flight`), so that the
    /// fetch starts a message when the engine alone would.
    pub depth: u32,
    /// The QP's `retry_cnt`: the Go-Back-N retries it may make without progress (the
    /// hardware's at a NAK spend them as the engine's do; the budget is whole at the
    /// hand-over, since the last response acknowledged everything).
    pub retry_cnt: u8,
    /// The QP's `rnr_retry`: the RNR NAKs it may wait out without progress (7: for
    /// ever). The hardware's at an RNR NAK spend them as the engine's completer does
    /// (`on_rnr_nak`); whole at the hand-over, as `retry_cnt`.
    pub rnr_retry: u8,
    /// The QP's `max_rd_atomic`: the READs and atomics it may have in flight (the
    /// requester's initiator credits). The fetch waits at one while that many are in
    /// flight, as `req_select` does; none are at the hand-over (nothing outstanding).
    pub max_rd_atomic: u8,
}

/// What the hardware's Go-Back-N (§3.8) leaves of a send queue it gives back, for the
/// engine's completer (`Engine::fastpath_adopt_end`): the retries it made at NAK
/// sequence errors and timeouts since its last progress (`retry_cnt`'s), the RNR NAKs
/// it waited out since then (`rnr_retry`'s), and the end of the RNR wait under way
/// (its replay from the acknowledged PSN starts then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqSpent {
    pub retries: u8,
    pub rnr: u8,
    pub rnr_at: Option<u64>,
}

/// The descriptor of send WQE `wr` of QP `qpn` (host ring index `index`) starting at
/// PSN `psn`, and its `wr_id` when the hardware writes its CQE (§3.7: signaled, and
/// every earlier WQE the hardware holds is a message in flight); None when the
/// hardware does not take it and the firmware must.
///
/// The checks are the engine's for these operations (`post_send`, and `req_select`'s
/// protection check when the WQE starts), made stricter where the MR table knows less
/// than the engine's memory table: a key the table does not hold (a memory window, an
/// entry taken by another key) hands the WQE back rather than failing it.
pub fn wqe_msg(
    qpn: Qpn,
    index: u32,
    wr: &SendWr,
    psn: Psn,
    idle: &SqIdle,
    mrt: &dyn Protection,
) -> Option<(TxMsg, Option<u64>)> {
    // SEND_WITH_INV and the local operations change the memory table: the firmware's.
    // READ and atomics are taken (their credits are the caller's, `SqIdle::max_rd_atomic`).
    let op = MsgOp::of(&wr.op).filter(|op| !matches!(op, MsgOp::SendWithInv(_)))?;
    if wr.ud.is_some()
        || wr.send_flags.contains(SendFlags::INLINE)
        || wr.send_flags.contains(SendFlags::FENCE)
    {
        return None;
    }
    let atomic = matches!(op, MsgOp::CmpSwap { .. } | MsgOp::FetchAdd { .. });
    // An atomic exactly as the responder takes it: one 8-byte local buffer, an
    // 8-byte-aligned remote address. The engine sends others as they are (its
    // `post_send` takes any list of 8 bytes or more and sends 8; the responder NAKs a
    // misaligned address): the firmware's, so that their frames stay the engine's.
    if atomic
        && (wr.sg_list.len() != 1
            || wr.sg_list.first().is_none_or(|s| s.length != 8)
            || wr.op.remote().is_none_or(|(va, _)| va & 7 != 0))
    {
        return None;
    }
    // READ and atomics write their local buffers (`req_select`'s check).
    let need = if op.is_read_or_atomic() {
        AccessFlags::LOCAL_WRITE
    } else {
        AccessFlags::NONE
    };
    let length = sgl_len(&wr.sg_list)?;
    for s in wr.sg_list.iter().filter(|s| s.length != 0) {
        mrt.check_local(idle.pd, s.lkey, s.addr, u64::from(s.length), need)
            .ok()?;
    }
    let (remote_addr, rkey) = wr.op.remote().unwrap_or((0, Rkey(0)));
    let mut sges = heapless::Vec::new();
    for s in &wr.sg_list {
        sges.push(*s).ok()?;
    }
    let m = TxMsg {
        qpn,
        op,
        solicited: wr.send_flags.contains(SendFlags::SOLICITED),
        replay: false,
        // The host ring's index: the ACKED event echoes it.
        wqe_index: index as u16,
        sges,
        length,
        remote_addr,
        rkey,
        first_psn: psn,
        start_pkt: 0,
        end_pkt: 0,
    };
    let signaled = idle.sig_all || wr.send_flags.contains(SendFlags::SIGNALED);
    Some((m, signaled.then_some(wr.wr_id)))
}
