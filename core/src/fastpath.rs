//! A software model of the RC fast path's data path (`docs/fastpath.md`): the contexts
//! and descriptors the firmware writes, the segmenter that turns one message descriptor
//! into frames, and the receive placement that checks and places in-sequence WRITE and
//! SEND packets and acknowledges them. Everything the rule does not cover becomes an
//! [`Event`] for the firmware. The RTL is to be tested against this model; the model is
//! tested against the engine (`core/tests/fastpath.rs`), which stays the reference.
//!
//! No state lives here beyond the contexts the caller owns, as in hardware where they
//! sit in block RAM indexed by QPN.

use crate::memory::{AccessFlags, Dma, Pd, Protection};
use crate::num::{Msn, Psn, Qpn, Rkey};
use crate::transport::{Mtu, Sge, MAX_SGE};
use crate::wire::aeth::{AethRepr, Syndrome};
use crate::wire::bth::BthRepr;
use crate::wire::imm::{IethRepr, ImmDtRepr};
use crate::wire::opcode::{Operation, Position};
use crate::wire::reth::RethRepr;
use crate::wire::{EmitError, ExtHeaders, HeaderTemplate, Opcode, Packet};

// ---------------------------------------------------------------------------------------
// TX (docs/fastpath.md §2)

/// The per-QP send context (§2.1).
#[derive(Clone, Copy, Debug)]
pub struct SendCtx {
    /// Ethernet, 802.1Q, IP and UDP headers with lengths and checksum to patch.
    pub template: HeaderTemplate,
    pub pkey: u16,
    pub dest_qpn: Qpn,
    pub mtu: Mtu,
    /// Selective repeat: plain WRITE packets go out as self-describing WRITE_ONLY.
    pub sr: bool,
    /// AckReq at least every this many packets.
    pub max_pkts_per_ack: u32,
    /// PSN of the next new packet.
    pub next_psn: Psn,
    /// Packets since the last AckReq.
    pub noack: u32,
    /// Oldest unacknowledged PSN (the firmware writes it as ACKs arrive).
    pub una_psn: Psn,
    /// Most PSNs outstanding.
    pub window: u32,
}

/// What a message descriptor sends (§2.2 `op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgOp {
    Send,
    /// Immediate data as the ImmDt field carries it.
    SendWithImm(u32),
    SendWithInv(Rkey),
    Write,
    WriteWithImm(u32),
}

/// A TX message descriptor (§2.2): one per send WQE.
#[derive(Clone, Debug)]
pub struct TxMsg {
    pub qpn: Qpn,
    pub op: MsgOp,
    /// SE on the last packet.
    pub solicited: bool,
    /// Local buffers, checked by the firmware when it posted the descriptor.
    pub sges: heapless::Vec<Sge, MAX_SGE>,
    /// Message length (the SGEs' sum).
    pub length: u32,
    pub remote_addr: u64,
    pub rkey: Rkey,
    /// PSN of the message's first packet.
    pub first_psn: Psn,
}

impl TxMsg {
    /// Packets of the message at `mtu` (a zero-length message is one packet).
    pub fn packets(&self, mtu: Mtu) -> u32 {
        self.length.div_ceil(mtu.bytes()).max(1)
    }
}

/// Why the segmenter wrote no frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxError {
    /// The window is full: the QP waits for `una_psn` to move.
    WindowFull,
    /// `k` is not a packet of the message.
    NoSuchPacket,
    /// The DMA faulted reading the payload.
    Dma,
    /// The frame could not be written (buffer too small, empty template).
    Emit(EmitError),
}

/// The window lets `psn` go out.
pub fn window_open(ctx: &SendCtx, psn: Psn) -> bool {
    let out = psn.diff(ctx.una_psn);
    out >= 0 && (out as u32) < ctx.window
}

/// Writes packet `k` of `msg` into `buf` (§2.2) and advances the context; returns the
/// frame length.
pub fn segment(
    ctx: &mut SendCtx,
    msg: &TxMsg,
    k: u32,
    dma: &mut dyn Dma,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    let mtu = ctx.mtu.bytes();
    let n = msg.packets(ctx.mtu);
    if k >= n {
        return Err(TxError::NoSuchPacket);
    }
    let psn = msg.first_psn.add(k);
    if !window_open(ctx, psn) {
        return Err(TxError::WindowFull);
    }
    let offset = k * mtu;
    let payload_len = (msg.length - offset).min(mtu);
    let pos = match (k == 0, k + 1 == n) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, false) => Position::Middle,
        (false, true) => Position::Last,
    };
    let mut bth = BthRepr::new(opcode(msg.op, pos), ctx.dest_qpn, psn);
    bth.pkey = ctx.pkey;
    let mut ext = ExtHeaders::default();
    let write = matches!(msg.op, MsgOp::Write | MsgOp::WriteWithImm(_));
    if write && pos.starts() {
        ext.reth = Some(RethRepr {
            va: msg.remote_addr,
            rkey: msg.rkey,
            dma_len: msg.length,
        });
    }
    if pos.ends() {
        match msg.op {
            MsgOp::SendWithImm(imm) | MsgOp::WriteWithImm(imm) => {
                ext.immdt = Some(ImmDtRepr { imm })
            }
            MsgOp::SendWithInv(rkey) => ext.ieth = Some(IethRepr { rkey }),
            MsgOp::Send | MsgOp::Write => {}
        }
        bth.se = msg.solicited;
    }
    if ctx.sr && msg.op == MsgOp::Write {
        bth.opcode = Opcode::RC_RDMA_WRITE_ONLY;
        ext.reth = Some(RethRepr {
            va: msg.remote_addr.wrapping_add(u64::from(offset)),
            rkey: msg.rkey,
            dma_len: payload_len,
        });
    }
    let outstanding = psn.diff(ctx.una_psn) as u32;
    bth.ack_req = pos.ends()
        || ctx.noack.saturating_add(1) >= ctx.max_pkts_per_ack
        || outstanding + 1 >= ctx.window;
    bth.pad_count = (payload_len.wrapping_neg() & 3) as u8;
    let body_len = payload_len as usize + usize::from(bth.pad_count);
    let mut gathered = true;
    let layout = ctx
        .template
        .emit_with(&bth, &ext, body_len, buf, |body| {
            let (data, pad) = body.split_at_mut(payload_len as usize);
            pad.fill(0);
            gathered = gather(dma, &msg.sges, offset, data);
        })
        .map_err(TxError::Emit)?;
    if !gathered {
        return Err(TxError::Dma);
    }
    ctx.noack = if bth.ack_req { 0 } else { ctx.noack + 1 };
    if psn.next().after(ctx.next_psn) {
        ctx.next_psn = psn.next();
    }
    Ok(layout.end)
}

/// The RC opcode of a packet at `pos` of a message.
fn opcode(op: MsgOp, pos: Position) -> Opcode {
    use Position::{First, Last, Middle, Only};
    match (op, pos) {
        (MsgOp::Write | MsgOp::WriteWithImm(_), First) => Opcode::RC_RDMA_WRITE_FIRST,
        (MsgOp::Write | MsgOp::WriteWithImm(_), Middle) => Opcode::RC_RDMA_WRITE_MIDDLE,
        (MsgOp::Write, Last) => Opcode::RC_RDMA_WRITE_LAST,
        (MsgOp::Write, Only) => Opcode::RC_RDMA_WRITE_ONLY,
        (MsgOp::WriteWithImm(_), Last) => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (MsgOp::WriteWithImm(_), Only) => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (_, First) => Opcode::RC_SEND_FIRST,
        (_, Middle) => Opcode::RC_SEND_MIDDLE,
        (MsgOp::SendWithImm(_), Last) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
        (MsgOp::SendWithImm(_), Only) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
        (MsgOp::SendWithInv(_), Last) => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
        (MsgOp::SendWithInv(_), Only) => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
        (_, Last) => Opcode::RC_SEND_LAST,
        (_, Only) => Opcode::RC_SEND_ONLY,
    }
}

/// Reads message bytes `offset..offset + out.len()` across `sges` by DMA.
fn gather(dma: &mut dyn Dma, sges: &[Sge], mut offset: u32, mut out: &mut [u8]) -> bool {
    for s in sges {
        if out.is_empty() {
            break;
        }
        if offset >= s.length {
            offset -= s.length;
            continue;
        }
        let n = ((s.length - offset) as usize).min(out.len());
        let (now, rest) = out.split_at_mut(n);
        if dma
            .read(s.addr.wrapping_add(u64::from(offset)), now)
            .is_err()
        {
            return false;
        }
        out = rest;
        offset = 0;
    }
    out.is_empty()
}

/// An ACK descriptor (§2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckDesc {
    pub qpn: Qpn,
    pub syndrome: Syndrome,
    pub psn: Psn,
    pub msn: Msn,
}

/// Writes the RC ACKNOWLEDGE of `ack` with the QP's headers; returns the frame length.
pub fn ack_frame(ctx: &SendCtx, ack: &AckDesc, buf: &mut [u8]) -> Result<usize, TxError> {
    let mut bth = BthRepr::new(Opcode::RC_ACKNOWLEDGE, ctx.dest_qpn, ack.psn);
    bth.pkey = ctx.pkey;
    let ext = ExtHeaders {
        aeth: Some(AethRepr {
            syndrome: ack.syndrome,
            msn: ack.msn,
        }),
        ..ExtHeaders::default()
    };
    ctx.template
        .emit_with(&bth, &ext, 0, buf, |_| {})
        .map(|l| l.end)
        .map_err(TxError::Emit)
}

// ---------------------------------------------------------------------------------------
// RX (docs/fastpath.md §3)

/// The message a receive context is in the middle of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxCur {
    #[default]
    None,
    Send,
    Write,
}

/// The per-QP receive context (§3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCtx {
    /// The fast path handles this QP's packets (RC in RTR or RTS).
    pub on: bool,
    pub qpn: Qpn,
    pub cur: RxCur,
    /// The QP's access flags.
    pub access: AccessFlags,
    pub mtu: Mtu,
    pub epsn: Psn,
    pub msn: Msn,
    /// An ACK after at most this many placed packets without AckReq (0: on AckReq only).
    pub ack_every: u8,
    /// Placed packets since the last ACK.
    pub unacked: u8,
    pub pd: Pd,
    /// WRITE: next address, key, bytes left, RETH length.
    pub va: u64,
    pub rkey: Rkey,
    pub resid: u32,
    pub length: u32,
    /// SEND: next address in the receive buffer the firmware loaded (`resid` bytes
    /// left in it, `length` placed); `recv_loaded` says there is one.
    pub recv_addr: u64,
    pub recv_loaded: bool,
    /// A NAK is outstanding for the current gap: everything goes to the firmware.
    pub nak_sent: bool,
}

/// Why a packet went to the firmware (§3.5 `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    Off = 1,
    Opcode = 2,
    Psn = 3,
    Sequence = 4,
    Ecn = 5,
    Length = 6,
    Key = 7,
    NakOutstanding = 8,
    NoRecvBuffer = 9,
}

/// An event-queue entry (§3.5), as far as the model produces them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The frame goes to the firmware unchanged; nothing in the context changed.
    Exception {
        qpn: Qpn,
        psn: Psn,
        reason: Exception,
    },
    /// A SEND was placed whole: complete the receive WQE with `byte_len`.
    MsgDone { qpn: Qpn, msn: Msn, byte_len: u32 },
}

/// What the placement stage did with one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// Placed in host memory (false: see `event`, an exception).
    pub placed: bool,
    /// An ACK the hardware sends now.
    pub ack: Option<AckDesc>,
    pub event: Option<Event>,
}

impl RxOutcome {
    fn exception(ctx: &RecvCtx, pkt: &Packet<'_>, reason: Exception) -> Self {
        Self {
            placed: false,
            ack: None,
            event: Some(Event::Exception {
                qpn: ctx.qpn,
                psn: pkt.psn(),
                reason,
            }),
        }
    }
}

/// The placement rule (§3.4) for one packet addressed to `ctx`'s QP (the caller looked
/// the context up by the BTH DestQP, and the parser accepted the frame).
pub fn receive(
    ctx: &mut RecvCtx,
    pkt: &Packet<'_>,
    mem: &dyn Protection,
    dma: &mut dyn Dma,
) -> RxOutcome {
    match check(ctx, pkt, mem) {
        Err(reason) => RxOutcome::exception(ctx, pkt, reason),
        Ok(op) => place(ctx, pkt, op, dma),
    }
}

/// Every condition of §3.4; the operation when the packet is the fast path's.
fn check(ctx: &RecvCtx, pkt: &Packet<'_>, mem: &dyn Protection) -> Result<Operation, Exception> {
    if !ctx.on {
        return Err(Exception::Off);
    }
    let op = pkt.opcode();
    let info = pkt.info();
    let (operation, pos) = (info.operation, info.position);
    let write = matches!(
        op,
        Opcode::RC_RDMA_WRITE_FIRST
            | Opcode::RC_RDMA_WRITE_MIDDLE
            | Opcode::RC_RDMA_WRITE_LAST
            | Opcode::RC_RDMA_WRITE_ONLY
    );
    let send = matches!(op, Opcode::RC_SEND_MIDDLE | Opcode::RC_SEND_LAST);
    if !(write || send) {
        return Err(Exception::Opcode);
    }
    if ctx.nak_sent {
        return Err(Exception::NakOutstanding);
    }
    if pkt.psn() != ctx.epsn {
        return Err(Exception::Psn);
    }
    let seq_ok = match ctx.cur {
        RxCur::None => pos.starts(),
        RxCur::Write => write && !pos.starts(),
        RxCur::Send => send,
    };
    if !seq_ok {
        return Err(Exception::Sequence);
    }
    if pkt.ecn() == 3 {
        return Err(Exception::Ecn);
    }
    let n = pkt.payload().len() as u32;
    let mtu = ctx.mtu.bytes();
    let len_ok = match pos {
        Position::Only => n <= mtu,
        Position::First | Position::Middle => n == mtu,
        Position::Last => n >= 1 && n <= mtu,
    };
    if !len_ok {
        return Err(Exception::Length);
    }
    if send {
        if !ctx.recv_loaded {
            return Err(Exception::NoRecvBuffer);
        }
        return if n <= ctx.resid {
            Ok(operation)
        } else {
            Err(Exception::Length)
        };
    }
    let (va, rkey, resid) = match pkt.reth() {
        Some(r) => (r.va, r.rkey, r.dma_len),
        None => (ctx.va, ctx.rkey, ctx.resid),
    };
    if resid == 0 {
        // A zero-length WRITE touches no memory: the firmware's (it checks nothing).
        return Err(Exception::Length);
    }
    let pad = u32::from(pkt.pad_count());
    let fits = if resid > mtu {
        n == mtu && pad == 0 && !pos.ends()
    } else {
        n == resid && pad == (resid.wrapping_neg() & 3) && pos.ends()
    };
    if !fits {
        return Err(Exception::Length);
    }
    if !ctx.access.contains(AccessFlags::REMOTE_WRITE)
        || mem
            .check_remote(
                ctx.pd,
                rkey,
                va,
                u64::from(resid),
                AccessFlags::REMOTE_WRITE,
            )
            .is_err()
    {
        return Err(Exception::Key);
    }
    Ok(operation)
}

/// Places a packet that passed [`check`], advances the context and acknowledges.
fn place(ctx: &mut RecvCtx, pkt: &Packet<'_>, op: Operation, dma: &mut dyn Dma) -> RxOutcome {
    let payload = pkt.payload();
    let n = payload.len() as u32;
    let ends = pkt.info().position.ends();
    let mut event = None;
    if op == Operation::RdmaWrite {
        if let Some(r) = pkt.reth() {
            (ctx.va, ctx.rkey, ctx.resid, ctx.length) = (r.va, r.rkey, r.dma_len, r.dma_len);
        }
        if dma.write(ctx.va, payload).is_err() {
            return RxOutcome::exception(ctx, pkt, Exception::Key);
        }
        ctx.va = ctx.va.wrapping_add(u64::from(n));
        ctx.resid -= n;
        ctx.cur = if ends { RxCur::None } else { RxCur::Write };
    } else {
        if dma.write(ctx.recv_addr, payload).is_err() {
            return RxOutcome::exception(ctx, pkt, Exception::Key);
        }
        ctx.recv_addr = ctx.recv_addr.wrapping_add(u64::from(n));
        ctx.resid -= n;
        ctx.length += n;
        ctx.cur = if ends { RxCur::None } else { RxCur::Send };
    }
    if ends {
        ctx.msn = ctx.msn.add(1);
        if op == Operation::Send {
            ctx.recv_loaded = false;
            event = Some(Event::MsgDone {
                qpn: ctx.qpn,
                msn: ctx.msn,
                byte_len: ctx.length,
            });
        }
    }
    let psn = ctx.epsn;
    ctx.epsn = psn.next();
    let due = pkt.ack_req() || (ctx.ack_every != 0 && ctx.unacked + 1 >= ctx.ack_every);
    let ack = if due {
        ctx.unacked = 0;
        Some(AckDesc {
            qpn: ctx.qpn,
            syndrome: Syndrome::ACK,
            psn,
            msn: ctx.msn,
        })
    } else {
        ctx.unacked = ctx.unacked.saturating_add(1);
        None
    };
    RxOutcome {
        placed: true,
        ack,
        event,
    }
}
