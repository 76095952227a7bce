//! The byte layouts of `docs/fastpath.md`: the records the firmware writes into the fast
//! path's tables and queues, and the events it reads back. Every multi-byte field is
//! little-endian; the header template keeps wire order. The RTL (`hdl-sim/rtl/fp_pkg.sv`)
//! decodes the same offsets, and its differential tests hold the two together.

use super::{AckDesc, Event, Exception, MsgOp, RecvCtx, RxCur, SendCtx, TxMsg};
use crate::memory::{AccessFlags, MemoryRegion, Pd};
use crate::num::{Msn, Psn, Qpn, Rkey};
use crate::transport::Mtu;
use crate::wire::icrc::IcrcKind;
use crate::wire::HeaderTemplate;

/// Send context (§2.1).
pub const SCTX_LEN: usize = 96;
/// TX message descriptor (§2.2).
pub const TXD_LEN: usize = 96;
/// ACK descriptor (§2.3).
pub const ACKD_LEN: usize = 16;
/// Receive context (§3.2).
pub const RCTX_LEN: usize = 64;
/// MR table entry (§3.3).
pub const MR_LEN: usize = 32;
/// Event queue entry (§3.5).
pub const EV_LEN: usize = 64;

/// A context or descriptor the layout cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// RoCEv1 or an empty template: such QPs stay on the firmware path.
    Template,
    /// The window does not fit 16 bits.
    Window(u32),
    /// `max_pkts_per_ack` or `noack` does not fit 8 bits.
    AckCount(u32),
    /// More SGEs than the descriptor's four.
    Sges(usize),
}

fn put(buf: &mut [u8], at: usize, v: u64, n: usize) {
    for (i, b) in buf[at..at + n].iter_mut().enumerate() {
        *b = (v >> (8 * i)) as u8;
    }
}

fn get(buf: &[u8], at: usize, n: usize) -> u64 {
    buf[at..at + n]
        .iter()
        .rev()
        .fold(0, |v, &b| (v << 8) | u64::from(b))
}

/// log2 of the path MTU's payload bytes (8 = 256 ... 12 = 4096).
pub fn mtu_log2(mtu: Mtu) -> u8 {
    mtu.bytes().trailing_zeros() as u8
}

fn mtu_from_log2(v: u8) -> Option<Mtu> {
    Mtu::from_u8(v.checked_sub(7)?)
}

/// Encodes a send context. `valid` marks it usable by the segmenter.
pub fn encode_send_ctx(ctx: &SendCtx) -> Result<[u8; SCTX_LEN], LayoutError> {
    let t = &ctx.template;
    let l3_kind = match t.icrc_kind() {
        IcrcKind::Ipv4 => 0u8,
        IcrcKind::Ipv6 => 1,
        IcrcKind::RoceV1 => return Err(LayoutError::Template),
    };
    if t.bth_offset() == 0 {
        return Err(LayoutError::Template);
    }
    let window = u16::try_from(ctx.window).map_err(|_| LayoutError::Window(ctx.window))?;
    let max_pkts = u8::try_from(ctx.max_pkts_per_ack)
        .map_err(|_| LayoutError::AckCount(ctx.max_pkts_per_ack))?;
    let noack = u8::try_from(ctx.noack).map_err(|_| LayoutError::AckCount(ctx.noack))?;
    let mut b = [0u8; SCTX_LEN];
    b[0] = t.bth_offset() as u8;
    b[1] = t.l3_offset() as u8;
    b[2] = l3_kind | 1 << 2 | u8::from(ctx.sr) << 3 | mtu_log2(ctx.mtu) << 4;
    put(&mut b, 4, u64::from(t.ip_sum()), 2);
    put(&mut b, 6, u64::from(ctx.pkey), 2);
    put(&mut b, 8, u64::from(ctx.dest_qpn.value()), 3);
    b[11] = max_pkts;
    put(&mut b, 12, u64::from(ctx.next_psn.value()), 3);
    b[15] = noack;
    put(&mut b, 16, u64::from(ctx.una_psn.value()), 3);
    put(&mut b, 20, u64::from(window), 2);
    b[24..24 + HeaderTemplate::MAX_LEN].copy_from_slice(t.bytes());
    Ok(b)
}

/// The 32-bit word of a send context the hardware writes back.
pub const SCTX_PROGRESS_WORD: usize = 3;

/// That word's fields: the next PSN and the packets since the last AckReq.
pub fn decode_send_progress(word: u32) -> (Psn, u32) {
    (Psn::new(word & 0xFF_FFFF), word >> 24)
}

/// What a TX descriptor asks beyond the message itself (§2.2 `flags`, `wqe_index`,
/// `start_pkt`, `end_pkt`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxDescOpts {
    /// REPLAY: send packets `start..end` (`end` 0: to the message's end).
    pub replay: Option<(u32, u32)>,
    /// Raise TX_DONE when the last packet left.
    pub completion: bool,
    /// The firmware's send-queue slot, echoed in events.
    pub wqe_index: u16,
}

/// Encodes a TX message descriptor.
pub fn encode_tx_msg(msg: &TxMsg, opts: &TxDescOpts) -> Result<[u8; TXD_LEN], LayoutError> {
    if msg.sges.len() > 4 {
        return Err(LayoutError::Sges(msg.sges.len()));
    }
    let (op, imm) = match msg.op {
        MsgOp::Send => (0u8, 0),
        MsgOp::SendWithImm(imm) => (1, imm),
        MsgOp::SendWithInv(k) => (2, k.0),
        MsgOp::Write => (3, 0),
        MsgOp::WriteWithImm(imm) => (4, imm),
    };
    let mut b = [0u8; TXD_LEN];
    put(&mut b, 0, u64::from(msg.qpn.value()), 3);
    b[3] = op;
    b[4] = u8::from(msg.solicited)
        | u8::from(opts.replay.is_some()) << 1
        | u8::from(opts.completion) << 2;
    b[5] = msg.sges.len() as u8;
    put(&mut b, 6, u64::from(opts.wqe_index), 2);
    put(&mut b, 8, u64::from(msg.length), 4);
    put(&mut b, 12, u64::from(imm), 4);
    put(&mut b, 16, msg.remote_addr, 8);
    put(&mut b, 24, u64::from(msg.rkey.0), 4);
    put(&mut b, 28, u64::from(msg.first_psn.value()), 3);
    for (i, s) in msg.sges.iter().enumerate() {
        put(&mut b, 32 + 12 * i, s.addr, 8);
        put(&mut b, 40 + 12 * i, u64::from(s.length), 4);
    }
    let (start, end) = opts.replay.unwrap_or((0, 0));
    put(&mut b, 80, u64::from(start), 4);
    put(&mut b, 84, u64::from(end), 4);
    Ok(b)
}

/// Encodes an ACK descriptor.
pub fn encode_ack(ack: &AckDesc) -> [u8; ACKD_LEN] {
    let mut b = [0u8; ACKD_LEN];
    put(&mut b, 0, u64::from(ack.qpn.value()), 3);
    b[3] = ack.syndrome.to_byte();
    put(&mut b, 4, u64::from(ack.psn.value()), 3);
    put(&mut b, 8, u64::from(ack.msn.value()), 3);
    b
}

/// Encodes a receive context. Byte 0: bit 0 `on`, bit 1 `recv_loaded`.
pub fn encode_recv_ctx(ctx: &RecvCtx) -> [u8; RCTX_LEN] {
    let mut b = [0u8; RCTX_LEN];
    b[0] = u8::from(ctx.on) | u8::from(ctx.recv_loaded) << 1;
    b[1] = match ctx.cur {
        RxCur::None => 0,
        RxCur::Send => 1,
        RxCur::Write => 2,
    };
    b[2] = ctx.access.bits() as u8;
    b[3] = mtu_log2(ctx.mtu);
    put(&mut b, 4, u64::from(ctx.epsn.value()), 3);
    b[7] = ctx.ack_every;
    put(&mut b, 8, u64::from(ctx.msn.value()), 3);
    b[11] = ctx.unacked;
    put(&mut b, 12, u64::from(ctx.pd.index()), 4);
    put(&mut b, 16, ctx.va, 8);
    put(&mut b, 24, u64::from(ctx.rkey.0), 4);
    put(&mut b, 28, u64::from(ctx.resid), 4);
    put(&mut b, 32, ctx.recv_addr, 8);
    put(&mut b, 40, u64::from(ctx.length), 4);
    b[44] = u8::from(ctx.nak_sent);
    b
}

/// Decodes a receive context read back from the table (`qpn` is its index). None when
/// a field holds a value no context can have (the hardware never writes one).
pub fn decode_recv_ctx(b: &[u8; RCTX_LEN], qpn: Qpn) -> Option<RecvCtx> {
    Some(RecvCtx {
        on: b[0] & 1 != 0,
        qpn,
        cur: match b[1] {
            0 => RxCur::None,
            1 => RxCur::Send,
            2 => RxCur::Write,
            _ => return None,
        },
        access: AccessFlags::from_bits(u32::from(b[2]))?,
        mtu: mtu_from_log2(b[3])?,
        epsn: Psn::new(get(b, 4, 3) as u32),
        ack_every: b[7],
        msn: Msn::new(get(b, 8, 3) as u32),
        unacked: b[11],
        pd: Pd::from_index(u16::try_from(get(b, 12, 4)).ok()?),
        va: get(b, 16, 8),
        rkey: Rkey(get(b, 24, 4) as u32),
        resid: get(b, 28, 4) as u32,
        recv_addr: get(b, 32, 8),
        length: get(b, 40, 4) as u32,
        recv_loaded: b[0] & 2 != 0,
        nak_sent: b[44] != 0,
    })
}

/// Encodes an MR table entry (the table is indexed by `key >> 8`).
pub fn encode_mr(mr: &MemoryRegion) -> [u8; MR_LEN] {
    let mut b = [0u8; MR_LEN];
    put(&mut b, 0, u64::from(mr.key), 4);
    put(&mut b, 4, u64::from(mr.pd.index()), 4);
    put(&mut b, 8, mr.addr, 8);
    put(&mut b, 16, mr.length, 8);
    b[24] = mr.access.bits() as u8;
    b[25] = u8::from(mr.valid);
    b
}

/// Event kinds (§3.5 `kind`).
pub mod kind {
    pub const EXCEPTION: u8 = 1;
    pub const MSG_DONE: u8 = 2;
    pub const ACK_SENT: u8 = 3;
    pub const TX_DONE: u8 = 4;
    pub const TX_STALL: u8 = 5;
}

/// An event entry, field by field (§3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawEvent {
    pub kind: u8,
    pub reason: u8,
    pub frame_slot: u16,
    pub qpn: Qpn,
    pub opcode: u8,
    pub psn: Psn,
    /// bit 0 AckReq, 1 SE, 2 BECN, 3..4 ECN, 5..6 PadCnt
    pub flags: u8,
    pub payload_off: u16,
    pub payload_len: u16,
    pub ext_off: u16,
    pub frame_len: u16,
    pub msn: Msn,
    pub byte_len: u32,
    pub wqe_index: u32,
    /// RETH (va, rkey, length) as decoded, zero when absent.
    pub reth: (u64, u32, u32),
    /// AETH as syndrome << 24 | MSN, zero when absent.
    pub aeth: u32,
    /// ImmDt or IETH, zero when absent.
    pub imm: u32,
}

impl RawEvent {
    pub fn decode(b: &[u8; EV_LEN]) -> Self {
        Self {
            kind: b[0],
            reason: b[1],
            frame_slot: get(b, 2, 2) as u16,
            qpn: Qpn::new(get(b, 4, 3) as u32),
            opcode: b[7],
            psn: Psn::new(get(b, 8, 3) as u32),
            flags: b[11],
            payload_off: get(b, 12, 2) as u16,
            payload_len: get(b, 14, 2) as u16,
            ext_off: get(b, 16, 2) as u16,
            frame_len: get(b, 18, 2) as u16,
            msn: Msn::new(get(b, 20, 3) as u32),
            byte_len: get(b, 24, 4) as u32,
            wqe_index: get(b, 28, 4) as u32,
            reth: (get(b, 32, 8), get(b, 40, 4) as u32, get(b, 44, 4) as u32),
            aeth: get(b, 48, 4) as u32,
            imm: get(b, 52, 4) as u32,
        }
    }

    /// The model's view of a receive-side event; None for TX events and unknown kinds.
    pub fn to_event(&self) -> Option<Event> {
        match self.kind {
            kind::EXCEPTION => Some(Event::Exception {
                qpn: self.qpn,
                psn: self.psn,
                reason: exception(self.reason)?,
            }),
            kind::MSG_DONE => Some(Event::MsgDone {
                qpn: self.qpn,
                msn: self.msn,
                byte_len: self.byte_len,
            }),
            _ => None,
        }
    }
}

fn exception(reason: u8) -> Option<Exception> {
    use Exception::*;
    Some(match reason {
        1 => Off,
        2 => Opcode,
        3 => Psn,
        4 => Sequence,
        5 => Ecn,
        6 => Length,
        7 => Key,
        8 => NakOutstanding,
        9 => NoRecvBuffer,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_ctx_round_trips() {
        let ctx = RecvCtx {
            on: true,
            qpn: Qpn::new(17),
            cur: RxCur::Write,
            access: AccessFlags::REMOTE_WRITE | AccessFlags::LOCAL_WRITE,
            mtu: Mtu::Mtu1024,
            epsn: Psn::new(0xABCDEF),
            msn: Msn::new(0x123456),
            ack_every: 8,
            unacked: 3,
            pd: Pd::from_index(5),
            va: 0x1122_3344_5566_7788,
            rkey: Rkey(0x0102_0304),
            resid: 77,
            length: 99,
            recv_addr: 0xFFEE_DDCC_BBAA_0099,
            recv_loaded: true,
            nak_sent: false,
        };
        let b = encode_recv_ctx(&ctx);
        assert_eq!(b[3], 10);
        assert_eq!(&b[4..7], &[0xEF, 0xCD, 0xAB]);
        assert_eq!(decode_recv_ctx(&b, Qpn::new(17)), Some(ctx));
    }

    #[test]
    fn mtu_log2_is_the_payload_size() {
        assert_eq!(mtu_log2(Mtu::Mtu256), 8);
        assert_eq!(mtu_log2(Mtu::Mtu4096), 12);
        assert_eq!(mtu_from_log2(12), Some(Mtu::Mtu4096));
        assert_eq!(mtu_from_log2(7), None);
    }
}
