//! TX (`docs/fastpath.md` §2): the send context, the message descriptor, the segmenter
//! that turns a descriptor into request frames, and ACK frames from ACK descriptors.

use crate::memory::{AccessFlags, Dma, Pd, Protection};
use crate::num::{Msn, Psn, Qpn, Rkey};
use crate::transport::{Mtu, Sge, WrOp, MAX_SGE};
use crate::wire::aeth::{AethRepr, Syndrome};
use crate::wire::atomic::{AtomicAckEthRepr, AtomicEthRepr};
use crate::wire::bth::BthRepr;
use crate::wire::icrc::Icrc;
use crate::wire::imm::{IethRepr, ImmDtRepr};
use crate::wire::opcode::Position;
use crate::wire::reth::RethRepr;
use crate::wire::{EmitError, ExtHeaders, HeaderTemplate, Opcode};

/// The per-QP send context (§2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendCtx {
    /// The segmenter and the response path may use this context.
    pub valid: bool,
    /// Ethernet, 802.1Q, IP and UDP headers with lengths and checksum to patch.
    pub template: HeaderTemplate,
    pub pkey: u16,
    pub dest_qpn: Qpn,
    pub mtu: Mtu,
    /// Selective repeat: plain WRITE packets go out as self-describing WRITE_ONLY.
    pub sr: bool,
    /// AckReq at least every this many packets.
    pub max_pkts_per_ack: u32,
    /// One past the highest PSN sent.
    pub next_psn: Psn,
    /// Packets since the last AckReq.
    pub noack: u32,
    /// Oldest unacknowledged PSN: the response path advances it, the firmware writes
    /// it when it handled a response itself.
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
    /// One READ request for all (or, replayed, the rest) of the message's PSNs.
    Read,
    CmpSwap {
        compare: u64,
        swap: u64,
    },
    FetchAdd {
        add: u64,
    },
    /// No packet: drops the QP's queued descriptors and the one in progress, and
    /// restarts the AckReq count (the firmware rewound the requester). `una`: the
    /// oldest unacknowledged PSN the rewind starts from, which the context's `una_psn`
    /// moves forward to in the same step (never back), so the window the new `una`
    /// opens admits no packet of what the FLUSH drops (§2.2).
    Flush {
        una: Psn,
    },
}

impl MsgOp {
    /// What a work request of operation `op` sends; None for the local operations and
    /// others no message descriptor carries. Inlined: out of line, its `Option` came
    /// back through memory and the `MsgOp` in it was copied twice more (~50
    /// instructions a descriptor on the soft core).
    #[inline(always)]
    pub fn of(op: &WrOp) -> Option<Self> {
        Some(match *op {
            WrOp::Send => Self::Send,
            WrOp::SendWithImm { imm } => Self::SendWithImm(imm),
            WrOp::SendWithInv { rkey } => Self::SendWithInv(rkey),
            WrOp::RdmaWrite { .. } => Self::Write,
            WrOp::RdmaWriteWithImm { imm, .. } => Self::WriteWithImm(imm),
            WrOp::RdmaRead { .. } => Self::Read,
            WrOp::AtomicCmpAndSwp { compare, swap, .. } => Self::CmpSwap { compare, swap },
            WrOp::AtomicFetchAndAdd { add, .. } => Self::FetchAdd { add },
            _ => return None,
        })
    }

    /// The §2.2 `op` code.
    pub const fn code(self) -> u8 {
        match self {
            Self::Send => 0,
            Self::SendWithImm(_) => 1,
            Self::SendWithInv(_) => 2,
            Self::Write => 3,
            Self::WriteWithImm(_) => 4,
            Self::Read => 5,
            Self::CmpSwap { .. } => 6,
            Self::FetchAdd { .. } => 7,
            Self::Flush { .. } => super::layout::TXD_OP_FLUSH,
        }
    }

    /// A READ or atomic: one request packet, whose response carries data back.
    pub const fn is_read_or_atomic(self) -> bool {
        matches!(
            self,
            Self::Read | Self::CmpSwap { .. } | Self::FetchAdd { .. }
        )
    }
}

/// A TX message descriptor (§2.2): one per send WQE, or a replay of part of one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxMsg {
    pub qpn: Qpn,
    pub op: MsgOp,
    /// SE on the last packet.
    pub solicited: bool,
    /// A resend of packets sent before (Go-Back-N or selective repeat): the message is
    /// already in the QP's in-flight list.
    pub replay: bool,
    /// The firmware's send-queue slot, echoed in events.
    pub wqe_index: u16,
    /// Local buffers, checked by the firmware when it posted the descriptor (READ: where
    /// the responses go).
    pub sges: heapless::Vec<Sge, MAX_SGE>,
    /// Message length (the SGEs' sum; atomics: 8).
    pub length: u32,
    pub remote_addr: u64,
    pub rkey: Rkey,
    /// PSN of the message's first packet.
    pub first_psn: Psn,
    /// First packet to send (REPLAY; 0 for a new message).
    pub start_pkt: u32,
    /// One past the last packet to send (0: to the end).
    pub end_pkt: u32,
}

impl TxMsg {
    /// PSNs the message occupies at `mtu` (a READ one per response packet, an atomic
    /// one, a SEND or WRITE one per packet and at least one).
    pub fn psns(&self, mtu: Mtu) -> u32 {
        match self.op {
            MsgOp::CmpSwap { .. } | MsgOp::FetchAdd { .. } | MsgOp::Flush { .. } => 1,
            _ => self.length.div_ceil(mtu.bytes()).max(1),
        }
    }

    /// Request packets of the message at `mtu` (a zero-length message is one packet; a
    /// READ or atomic is one).
    pub fn packets(&self, mtu: Mtu) -> u32 {
        if self.op.is_read_or_atomic() {
            1
        } else {
            self.psns(mtu)
        }
    }

    /// The packet indices this descriptor sends: `start_pkt` up to `end_pkt` (or the
    /// end). A READ replayed from response `k` is one request, index `k`.
    pub fn range(&self, mtu: Mtu) -> (u32, u32) {
        let n = self.psns(mtu);
        let start = self.start_pkt.min(n);
        if self.op.is_read_or_atomic() {
            return (start, (start + 1).min(n));
        }
        let end = if self.end_pkt == 0 {
            n
        } else {
            self.end_pkt.min(n)
        };
        (start, end.max(start))
    }

    /// PSN of packet `k`.
    pub fn psn_of(&self, k: u32) -> Psn {
        self.first_psn.add(k)
    }

    /// The message's last PSN at `mtu`.
    pub fn last_psn(&self, mtu: Mtu) -> Psn {
        self.first_psn.add(self.psns(mtu) - 1)
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
    /// A READ response's region lost its rights since the request (deregistered,
    /// invalidated): nothing is sent.
    Access,
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
    let n = msg.psns(ctx.mtu);
    if k >= n || matches!(msg.op, MsgOp::Flush { .. }) {
        return Err(TxError::NoSuchPacket);
    }
    let psn = msg.psn_of(k);
    if !window_open(ctx, psn) {
        return Err(TxError::WindowFull);
    }
    let offset = k * mtu;
    let mut ext = ExtHeaders::default();
    let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, ctx.dest_qpn, psn);
    bth.pkey = ctx.pkey;
    // PSNs this packet occupies, payload bytes it carries, and whether it ends the
    // message (AckReq).
    let (psns, payload_len, ends) = match msg.op {
        MsgOp::Read => {
            bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
            ext.reth = Some(RethRepr {
                va: msg.remote_addr.wrapping_add(u64::from(offset)),
                rkey: msg.rkey,
                dma_len: msg.length.saturating_sub(offset),
            });
            (n - k, 0, true)
        }
        MsgOp::CmpSwap { compare, swap } => {
            bth.opcode = Opcode::RC_CMP_SWAP;
            ext.atomic_eth = Some(AtomicEthRepr {
                va: msg.remote_addr,
                rkey: msg.rkey,
                swap_add: swap,
                compare,
            });
            (1, 0, true)
        }
        MsgOp::FetchAdd { add } => {
            bth.opcode = Opcode::RC_FETCH_ADD;
            ext.atomic_eth = Some(AtomicEthRepr {
                va: msg.remote_addr,
                rkey: msg.rkey,
                swap_add: add,
                compare: 0,
            });
            (1, 0, true)
        }
        _ => {
            let payload_len = (msg.length - offset).min(mtu);
            let pos = match (k == 0, k + 1 == n) {
                (true, true) => Position::Only,
                (true, false) => Position::First,
                (false, false) => Position::Middle,
                (false, true) => Position::Last,
            };
            bth.opcode = opcode(msg.op, pos);
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
                    _ => {}
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
            (1, payload_len, pos.ends())
        }
    };
    let outstanding = psn.diff(ctx.una_psn) as u32;
    bth.ack_req = ends
        || ctx.noack.saturating_add(1) >= ctx.max_pkts_per_ack
        || outstanding + 1 >= ctx.window;
    bth.pad_count = (payload_len.wrapping_neg() & 3) as u8;
    let body_len = payload_len as usize + usize::from(bth.pad_count);
    let mut gathered = true;
    // As the engine's frames (`transmit_one`): asked only where the kernel exists.
    let hash_in_fill = crate::memory::copy_crc_in_one_pass() && dma.hashes_reads();
    let layout = ctx
        .template
        .emit_with_icrc(&bth, &ext, body_len, buf, hash_in_fill, |body, mut icrc| {
            let (data, pad) = body.split_at_mut(payload_len as usize);
            pad.fill(0);
            // Where the DMA can, hashed for the ICRC as it is read (one pass).
            gathered = gather(dma, &msg.sges, offset, data, icrc.as_deref_mut());
            if let Some(c) = icrc.filter(|_| !pad.is_empty()) {
                c.update(pad);
            }
        })
        .map_err(TxError::Emit)?;
    // A packet whose payload the host could not read still spends its PSN and its place
    // in the AckReq count: hardware commits the headers before the payload's read
    // completes, and then aborts the frame (docs/fastpath.md §6).
    ctx.noack = if bth.ack_req { 0 } else { ctx.noack + 1 };
    let next = psn.add(psns);
    if next.after(ctx.next_psn) {
        ctx.next_psn = next;
    }
    if !gathered {
        return Err(TxError::Dma);
    }
    Ok(layout.end)
}

/// The RC opcode of a SEND or WRITE packet at `pos` of a message.
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

/// Reads message bytes `offset..offset + out.len()` across `sges` by DMA; with `icrc`,
/// feeding them to it in order.
fn gather(
    dma: &mut dyn Dma,
    sges: &[Sge],
    offset: u32,
    out: &mut [u8],
    mut icrc: Option<&mut Icrc>,
) -> bool {
    walk(sges, offset, out.len(), |addr, range| {
        out.get_mut(range)
            .is_some_and(|o| Icrc::read_opt(icrc.as_deref_mut(), dma, addr, o).is_ok())
    })
}

/// Writes `data` at message byte `offset` across `sges` by DMA (READ responses, an
/// ATOMIC ACKNOWLEDGE's original value). SGEs that end short of it write nothing: the
/// RTL knows before its first DMA write (`fp_rx_check`'s R2, `covered`).
pub(crate) fn scatter(dma: &mut dyn Dma, sges: &[Sge], offset: u32, data: &[u8]) -> bool {
    let room: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if room < u64::from(offset) + data.len() as u64 {
        return false;
    }
    walk(sges, offset, data.len(), |addr, range| {
        data.get(range).is_some_and(|d| dma.write(addr, d).is_ok())
    })
}

/// Calls `step(address, range of the caller's bytes)` for each piece of message bytes
/// `offset..offset + len` in `sges`; false when a step fails or the SGEs end first.
fn walk(
    sges: &[Sge],
    mut offset: u32,
    len: usize,
    mut step: impl FnMut(u64, core::ops::Range<usize>) -> bool,
) -> bool {
    let mut at = 0;
    for s in sges {
        if at == len {
            break;
        }
        if offset >= s.length {
            offset -= s.length;
            continue;
        }
        let n = ((s.length - offset) as usize).min(len - at);
        if !step(s.addr.wrapping_add(u64::from(offset)), at..at + n) {
            return false;
        }
        at += n;
        offset = 0;
    }
    at == len
}

/// A READ response descriptor (§2.4): the responses of an RDMA READ request the
/// receive path took, from PSN `psn` on; the segmenter writes one per call to
/// [`read_response`], which moves it to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResp {
    pub qpn: Qpn,
    /// PSN of the next response.
    pub psn: Psn,
    /// Where its payload is read from (the READ's VA, advanced).
    pub va: u64,
    /// Bytes not sent yet (never 0 while queued: a READ of nothing is the firmware's).
    pub resid: u32,
    /// The next response is the READ's first (FIRST or ONLY).
    pub first: bool,
    /// The AETH's MSN: the responder's after the READ.
    pub msn: Msn,
    /// The QP's PD and the request's R_Key: each response checks its bytes again.
    pub pd: Pd,
    pub rkey: Rkey,
}

impl ReadResp {
    /// Every response went out.
    pub const fn done(&self) -> bool {
        self.resid == 0
    }
}

/// Writes the next RDMA READ response of `r` with the QP's headers into `buf` and moves
/// `r` past it, as the engine's responder builds one (`resp_prepare`): FIRST / MIDDLE /
/// LAST / ONLY by place, at most the path MTU of payload read by DMA from `va`, PadCnt,
/// an AETH (ACK, `msn`) on FIRST, LAST and ONLY; no AckReq, no SE. Returns the frame
/// length; a payload the DMA could not read aborts the frame (`TxError::Dma`), `r`
/// moved past it all the same, as the segmenter's request packets. The region is checked
/// again against `mem` first, as the engine checks it before each response (rxe
/// `rxe_recheck_mr`): deregistered or invalidated since the request, nothing goes
/// (`TxError::Access`, `r` unchanged) and the caller drops the rest of the READ (the
/// requester's retry brings a duplicate to the firmware, whose engine answers it with
/// the NAK "remote access error").
pub fn read_response(
    ctx: &SendCtx,
    r: &mut ReadResp,
    mem: &dyn Protection,
    dma: &mut dyn Dma,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    if r.done() {
        return Err(TxError::NoSuchPacket);
    }
    let n = r.resid.min(ctx.mtu.bytes());
    mem.check_remote(
        r.pd,
        r.qpn,
        r.rkey,
        r.va,
        u64::from(n),
        AccessFlags::REMOTE_READ,
    )
    .map_err(|_| TxError::Access)?;
    let last = r.resid == n;
    let opcode = match (r.first, last) {
        (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
    };
    let mut bth = BthRepr::new(opcode, ctx.dest_qpn, r.psn);
    bth.pkey = ctx.pkey;
    bth.pad_count = (n.wrapping_neg() & 3) as u8;
    let ext = ExtHeaders {
        aeth: (r.first || last).then_some(AethRepr {
            syndrome: Syndrome::ACK,
            msn: r.msn,
        }),
        ..ExtHeaders::default()
    };
    let body_len = n as usize + usize::from(bth.pad_count);
    let va = r.va;
    let mut read = true;
    let hash_in_fill = crate::memory::copy_crc_in_one_pass() && dma.hashes_reads();
    let layout = ctx
        .template
        .emit_with_icrc(&bth, &ext, body_len, buf, hash_in_fill, |body, mut icrc| {
            let (data, pad) = body.split_at_mut(n as usize);
            pad.fill(0);
            read = Icrc::read_opt(icrc.as_deref_mut(), dma, va, data).is_ok();
            if let Some(c) = icrc.filter(|_| !pad.is_empty()) {
                c.update(pad);
            }
        })
        .map_err(TxError::Emit)?;
    r.psn = r.psn.next();
    r.va = r.va.wrapping_add(u64::from(n));
    r.resid -= n;
    r.first = false;
    if !read {
        return Err(TxError::Dma);
    }
    Ok(layout.end)
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
    aeth_frame(
        ctx,
        Opcode::RC_ACKNOWLEDGE,
        ack.syndrome,
        ack.psn,
        ack.msn,
        None,
        buf,
    )
}

/// An ATOMIC ACKNOWLEDGE descriptor (§2.4, "Atomic requests" of §3.4): the response of
/// an atomic request the receive path executed, queued as a READ's responses are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicResp {
    pub qpn: Qpn,
    /// The atomic's PSN.
    pub psn: Psn,
    /// The AETH's MSN: the responder's after the atomic.
    pub msn: Msn,
    /// The AtomicAckETH: the value the 8 bytes held before.
    pub orig: u64,
}

/// Writes the ATOMIC ACKNOWLEDGE of `a` with the QP's headers, as the engine's
/// responder builds one (`resp_prepare`): BTH (PSN = the atomic's, no AckReq), AETH
/// (ACK, `msn`), AtomicAckETH (`orig`); returns the frame length.
pub fn atomic_ack_frame(ctx: &SendCtx, a: &AtomicResp, buf: &mut [u8]) -> Result<usize, TxError> {
    let orig = Some(AtomicAckEthRepr {
        orig_rem_data: a.orig,
    });
    let op = Opcode::RC_ATOMIC_ACKNOWLEDGE;
    aeth_frame(ctx, op, Syndrome::ACK, a.psn, a.msn, orig, buf)
}

/// A response with no payload: BTH, AETH and, for an atomic's, the AtomicAckETH.
fn aeth_frame(
    ctx: &SendCtx,
    opcode: Opcode,
    syndrome: Syndrome,
    psn: Psn,
    msn: Msn,
    atomic_ack_eth: Option<AtomicAckEthRepr>,
    buf: &mut [u8],
) -> Result<usize, TxError> {
    let mut bth = BthRepr::new(opcode, ctx.dest_qpn, psn);
    bth.pkey = ctx.pkey;
    let ext = ExtHeaders {
        aeth: Some(AethRepr { syndrome, msn }),
        atomic_ack_eth,
        ..ExtHeaders::default()
    };
    ctx.template
        .emit_with(&bth, &ext, 0, buf, |_| {})
        .map(|l| l.end)
        .map_err(TxError::Emit)
}
