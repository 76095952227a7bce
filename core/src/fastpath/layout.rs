//! The byte layouts of `docs/fastpath.md`: every context, descriptor and event as the
//! firmware writes it into (or reads it from) the hardware's memories and rings. This is
//! the contract: the RTL decodes these bytes, its tests take them from here, and the
//! firmware writes nothing else. Multi-byte fields are little-endian; 24-bit fields
//! (QPNs, PSNs, MSNs) take three bytes.
//!
//! Decoding never panics: a field that names nothing (an unknown opcode, MTU or network
//! header kind, more SGEs than fit) fails the whole decode with [`Invalid`].

use super::rx::{Event, Exception, MrEntry, RecvCtx, RecvState, RxCur};
use super::tx::{AckDesc, MsgOp, SendCtx, TxMsg};
use crate::memory::{AccessFlags, Pd};
use crate::num::{Msn, Psn, Qpn, Rkey};
use crate::transport::{Mtu, Sge, MAX_SGE};
use crate::wire::aeth::{RnrTimer, Syndrome};
use crate::wire::icrc::IcrcKind;
use crate::wire::{HeaderTemplate, Opcode, RxMeta};

/// Bytes of a send context (§2.1).
pub const SCTX_LEN: usize = 96;
/// Bytes of a TX message descriptor (§2.2).
pub const TXD_LEN: usize = 96;
/// Bytes of an ACK descriptor (§2.3).
pub const ACKD_LEN: usize = 16;
/// Bytes of a receive context (§3.2).
pub const RCTX_LEN: usize = 68;
/// Bytes of an MR table entry (§3.3).
pub const MR_LEN: usize = 32;
/// Bytes of an event-queue entry (§3.5).
pub const EVENT_LEN: usize = 64;
/// The bytes of an event entry that carry fields: every kind's lie in the first 32
/// (§3.5), the rest is reserved (zero), and [`decode_event`] reads only these. A
/// firmware that copies events out of registers a word at a time (the SoC's) copies
/// only these.
pub const EVENT_USED: usize = 32;
/// Where the header template starts in a send context.
pub const SCTX_TEMPLATE: usize = 30;
/// Where `una_psn` sits in a send context (the firmware writes these 3 bytes alone).
pub const SCTX_UNA: usize = 16;
/// Offset of the receive context's `qpn`, the tag of the context cache's entry (§3.2).
pub const RCTX_QPN: usize = 45;
/// The receive context's flags byte: bit 0 `nak_sent`, 1 `recv_loaded`, 2 `held`, 3
/// `reads`, 4 `rq_empty` (`rnr`: its timer in byte 32, `recv_addr`'s first, which holds
/// no address while nothing is loaded), 5 `recv_cqe` ([`RCTX_CQE`]).
const RCTX_FLAGS: usize = 44;
const RCTX_LOADED: u8 = 2;
const RCTX_HELD: u8 = 4;
const RCTX_READS: u8 = 8;
const RCTX_RQ_EMPTY: u8 = 16;
/// Bit 5 `recv_cqe`: the buffer loaded ahead came with its receive WQE's `wr_id` for the
/// CQE writer (§3.7, "Receive CQEs"): set by a load that carries one ([`cqe_rctx`]),
/// cleared by every other load or unload, at the SEND's last packet (its `MSG_DONE`
/// carries it) and by every context the firmware writes whole ([`encode_rctx`] never
/// sets it: an exception's write-back leaves the next receive CQE to the firmware).
pub const RCTX_CQE: u8 = 32;
const RCTX_RNR_TIMER: usize = 32;
/// Byte 3: bits 0..3 the path MTU's log2, 4..6 `rd_max` (the QP's `max_dest_rd_atomic`,
/// at most `RD_MAX`; only the firmware writes it, so it sits in a word the receive
/// load does not write).
const RCTX_MTU: usize = 3;
const RCTX_RD_MAX_SHIFT: u8 = 4;
/// The receive context's `recv_addr` and `recv_resid`: the loaded receive buffer.
const RCTX_RECV_ADDR: usize = 32;
const RCTX_RECV_RESID: usize = 64;

/// A field of the bytes names nothing: the offset of the first such field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub offset: usize,
}

fn put<const N: usize>(b: &mut [u8], at: usize, v: [u8; N]) {
    if let Some(d) = b.get_mut(at..at + N) {
        d.copy_from_slice(&v);
    }
}

fn put24(b: &mut [u8], at: usize, v: u32) {
    let [x, y, z, _] = v.to_le_bytes();
    put(b, at, [x, y, z]);
}

fn get<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    b.get(at..at + N)
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(get(b, at))
}

fn u24_at(b: &[u8], at: usize) -> u32 {
    let [x, y, z] = get(b, at);
    u32::from_le_bytes([x, y, z, 0])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(get(b, at))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(get(b, at))
}

/// The path MTU as log2 (8 = 256 ... 12 = 4096).
const fn mtu_log2(m: Mtu) -> u8 {
    m as u8 + 7
}

fn mtu_of(log2: u8, offset: usize) -> Result<Mtu, Invalid> {
    Mtu::from_u8(log2.wrapping_sub(7)).ok_or(Invalid { offset })
}

const fn kind_code(k: IcrcKind) -> u8 {
    match k {
        IcrcKind::Ipv4 => 0,
        IcrcKind::Ipv6 => 1,
        IcrcKind::RoceV1 => 2,
    }
}

fn kind_of(code: u8, offset: usize) -> Result<IcrcKind, Invalid> {
    match code {
        0 => Ok(IcrcKind::Ipv4),
        1 => Ok(IcrcKind::Ipv6),
        2 => Ok(IcrcKind::RoceV1),
        _ => Err(Invalid { offset }),
    }
}

fn access_of(bits: u8, offset: usize) -> Result<AccessFlags, Invalid> {
    AccessFlags::from_bits(u32::from(bits)).ok_or(Invalid { offset })
}

// ---------------------------------------------------------------------------------------
// §2.1 send context

/// Encodes a send context (§2.1).
pub fn encode_sctx(c: &SendCtx) -> [u8; SCTX_LEN] {
    let mut b = [0u8; SCTX_LEN];
    let (bytes, len, l3, kind, ip_sum) = c.template.raw();
    b[0] = len;
    b[1] = l3;
    b[2] = kind_code(kind) | u8::from(c.valid) << 2 | u8::from(c.sr) << 3 | mtu_log2(c.mtu) << 4;
    put(&mut b, 4, ip_sum.to_le_bytes());
    put(&mut b, 6, c.pkey.to_le_bytes());
    put24(&mut b, 8, c.dest_qpn.value());
    put24(&mut b, 12, c.next_psn.value());
    put24(&mut b, SCTX_UNA, c.una_psn.value());
    put24(&mut b, 20, c.window.min(0xFF_FFFF));
    put(
        &mut b,
        24,
        (c.max_pkts_per_ack.min(0xFFFF) as u16).to_le_bytes(),
    );
    put(&mut b, 26, (c.noack.min(0xFFFF) as u16).to_le_bytes());
    put(&mut b, SCTX_TEMPLATE, *bytes);
    b
}

/// Decodes a send context (§2.1).
pub fn decode_sctx(b: &[u8; SCTX_LEN]) -> Result<SendCtx, Invalid> {
    let kind = kind_of(b[2] & 3, 2)?;
    let template = HeaderTemplate::from_raw(&get(b, SCTX_TEMPLATE), b[0], b[1], kind, u16_at(b, 4))
        .ok_or(Invalid { offset: 0 })?;
    Ok(SendCtx {
        valid: b[2] & 4 != 0,
        template,
        pkey: u16_at(b, 6),
        dest_qpn: Qpn::new(u24_at(b, 8)),
        mtu: mtu_of(b[2] >> 4, 2)?,
        sr: b[2] & 8 != 0,
        max_pkts_per_ack: u32::from(u16_at(b, 24)),
        next_psn: Psn::new(u24_at(b, 12)),
        noack: u32::from(u16_at(b, 26)),
        una_psn: Psn::new(u24_at(b, SCTX_UNA)),
        window: u24_at(b, 20),
    })
}

// ---------------------------------------------------------------------------------------
// §2.2 TX message descriptor

/// `op` of a FLUSH (byte 3): the one descriptor that takes no ring slot.
pub const TXD_OP_FLUSH: u8 = 15;
/// `flags` bit: SE on the last packet.
pub const TXD_SE: u8 = 1;
/// `flags` bit: a replay of packets sent before.
pub const TXD_REPLAY: u8 = 2;
/// `flags` bit: the hardware writes the message's CQE when a response retires it
/// (§3.7); `wr_id` in bytes 88..96.
pub const TXD_CQE: u8 = 4;

/// Marks a descriptor written by [`write_txd_words`] as one whose CQE the hardware
/// writes, with the WQE's `wr_id` (§3.7).
pub fn set_txd_cqe(w: &mut TxdWords, wr_id: u64) {
    if let Some(f) = w.get_mut(1) {
        *f |= u32::from(TXD_CQE).to_le();
    }
    if let Some([lo, hi]) = w
        .get_mut(22..24)
        .and_then(|s| <&mut [u32; 2]>::try_from(s).ok())
    {
        (*lo, *hi) = ((wr_id as u32).to_le(), ((wr_id >> 32) as u32).to_le());
    }
}

/// The `wr_id` of a descriptor whose CQE the hardware writes (§3.7), else `None`.
pub fn txd_cqe(b: &[u8; TXD_LEN]) -> Option<u64> {
    (b[4] & TXD_CQE != 0).then(|| u64_at(b, 88))
}

/// Encodes a TX message descriptor (§2.2).
pub fn encode_txd(m: &TxMsg) -> [u8; TXD_LEN] {
    let mut b = [0u8; TXD_LEN];
    write_txd(m, &mut b);
    b
}

/// Encodes a TX message descriptor (§2.2) into `b` (every byte written).
pub fn write_txd(m: &TxMsg, b: &mut [u8; TXD_LEN]) {
    let mut w = [0; TXD_WORDS];
    write_txd_words(m, &m.sges, &mut w);
    for (d, v) in b.chunks_exact_mut(4).zip(w) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// 32-bit words in a TX message descriptor.
pub const TXD_WORDS: usize = TXD_LEN / 4;

/// A TX message descriptor as the 32-bit words a core writes into the ring: word `i`
/// holds bytes `4i..4i+4`, little-endian (so in memory they are §2.2's bytes on any
/// core). A 32-bit core without misaligned access writes a word with one store and a
/// byte field with a store per byte.
pub type TxdWords = [u32; TXD_WORDS];

/// [`write_txd`] as words, with the SGEs taken from `sges` instead of `m.sges` (the
/// firmware writes a descriptor straight from its WQE). Every word is written (one
/// store each: no clearing first).
pub fn write_txd_words(m: &TxMsg, sges: &[Sge], w: &mut TxdWords) {
    let n = sges.len().min(MAX_SGE);
    let extra = match m.op {
        MsgOp::SendWithImm(imm) | MsgOp::WriteWithImm(imm) => imm,
        MsgOp::SendWithInv(rkey) => rkey.0,
        MsgOp::Flush { una } => una.value() & 0xFF_FFFF,
        _ => 0,
    };
    let flags = (u32::from(m.solicited) * u32::from(TXD_SE))
        | (u32::from(m.replay) * u32::from(TXD_REPLAY));
    let set = |w: &mut TxdWords, i: usize, v: u32| {
        if let Some(d) = w.get_mut(i) {
            *d = v.to_le();
        }
    };
    let set64 = |w: &mut TxdWords, i: usize, v: u64| {
        set(w, i, v as u32);
        set(w, i + 1, (v >> 32) as u32);
    };
    let (op, index) = (u32::from(m.op.code()), u32::from(m.wqe_index));
    set(w, 0, (m.qpn.value() & 0xFF_FFFF) | (op << 24));
    set(w, 1, flags | ((n as u32) << 8) | (index << 16));
    set(w, 2, m.length);
    set(w, 3, extra);
    set64(w, 4, m.remote_addr);
    set(w, 6, m.rkey.0);
    set(w, 7, m.first_psn.value() & 0xFF_FFFF);
    for i in 0..MAX_SGE {
        let (addr, len) = sges
            .get(i)
            .filter(|_| i < n)
            .map_or((0, 0), |s| (s.addr, s.length));
        set64(w, 8 + 3 * i, addr);
        set(w, 10 + 3 * i, len);
    }
    // An atomic has one SGE: its operands take the place of SGEs 2 and 3 (bytes 56..72).
    match m.op {
        MsgOp::CmpSwap { compare, swap } => {
            set64(w, 14, compare);
            set64(w, 16, swap);
        }
        MsgOp::FetchAdd { add } => set64(w, 16, add),
        _ => {}
    }
    set(w, 20, m.start_pkt);
    set(w, 21, m.end_pkt);
    set64(w, 22, 0);
}

/// Decodes a TX message descriptor (§2.2). The SGEs carry no L_Key (the firmware
/// checked them): they decode with L_Key 0.
pub fn decode_txd(b: &[u8; TXD_LEN]) -> Result<TxMsg, Invalid> {
    let extra = u32_at(b, 12);
    let op = match b[3] {
        0 => MsgOp::Send,
        1 => MsgOp::SendWithImm(extra),
        2 => MsgOp::SendWithInv(Rkey(extra)),
        3 => MsgOp::Write,
        4 => MsgOp::WriteWithImm(extra),
        5 => MsgOp::Read,
        6 => MsgOp::CmpSwap {
            compare: u64_at(b, 56),
            swap: u64_at(b, 64),
        },
        7 => MsgOp::FetchAdd { add: u64_at(b, 64) },
        TXD_OP_FLUSH => MsgOp::Flush {
            una: Psn::new(extra & 0xFF_FFFF),
        },
        _ => return Err(Invalid { offset: 3 }),
    };
    let num_sge = usize::from(b[5]);
    let max = if op.is_read_or_atomic() && op != MsgOp::Read {
        1
    } else {
        MAX_SGE
    };
    if num_sge > max {
        return Err(Invalid { offset: 5 });
    }
    let mut sges = heapless::Vec::new();
    for i in 0..num_sge {
        let s = Sge {
            addr: u64_at(b, 32 + 12 * i),
            length: u32_at(b, 40 + 12 * i),
            lkey: crate::num::Lkey(0),
        };
        sges.push(s).map_err(|_| Invalid { offset: 5 })?;
    }
    Ok(TxMsg {
        qpn: Qpn::new(u24_at(b, 0)),
        op,
        solicited: b[4] & TXD_SE != 0,
        replay: b[4] & TXD_REPLAY != 0,
        wqe_index: u16_at(b, 6),
        sges,
        length: u32_at(b, 8),
        remote_addr: u64_at(b, 16),
        rkey: Rkey(u32_at(b, 24)),
        first_psn: Psn::new(u24_at(b, 28)),
        start_pkt: u32_at(b, 80),
        end_pkt: u32_at(b, 84),
    })
}

// ---------------------------------------------------------------------------------------
// §2.3 ACK descriptor

/// Encodes an ACK descriptor (§2.3).
pub fn encode_ackd(a: &AckDesc) -> [u8; ACKD_LEN] {
    let mut b = [0u8; ACKD_LEN];
    put24(&mut b, 0, a.qpn.value());
    b[3] = a.syndrome.to_byte();
    put24(&mut b, 4, a.psn.value());
    put24(&mut b, 8, a.msn.value());
    b
}

/// Decodes an ACK descriptor (§2.3).
pub fn decode_ackd(b: &[u8; ACKD_LEN]) -> AckDesc {
    AckDesc {
        qpn: Qpn::new(u24_at(b, 0)),
        syndrome: Syndrome::from_byte(b[3]),
        psn: Psn::new(u24_at(b, 4)),
        msn: Msn::new(u24_at(b, 8)),
    }
}

// ---------------------------------------------------------------------------------------
// §3.2 receive context

/// Encodes a receive context (§3.2).
pub fn encode_rctx(c: &RecvCtx) -> [u8; RCTX_LEN] {
    let mut b = [0u8; RCTX_LEN];
    b[0] = u8::from(c.on);
    b[1] = match c.cur {
        RxCur::None => 0,
        RxCur::Send => 1,
        RxCur::Write => 2,
    };
    b[2] = c.access.bits() as u8;
    b[RCTX_MTU] = mtu_log2(c.mtu) | (c.rd_max & 7) << RCTX_RD_MAX_SHIFT;
    put24(&mut b, 4, c.epsn.value());
    b[7] = c.ack_every;
    put24(&mut b, 8, c.msn.value());
    b[11] = c.unacked;
    put(&mut b, 12, c.pd.index().to_le_bytes());
    put(&mut b, 14, c.pkey.to_le_bytes());
    put(&mut b, 16, c.va.to_le_bytes());
    put(&mut b, 24, c.rkey.0.to_le_bytes());
    put(&mut b, 28, c.resid.to_le_bytes());
    put(&mut b, RCTX_RECV_ADDR, c.recv_addr.to_le_bytes());
    put(&mut b, 40, c.length.to_le_bytes());
    b[RCTX_FLAGS] = u8::from(c.nak_sent)
        | u8::from(c.recv_loaded) << 1
        | if c.held { RCTX_HELD } else { 0 }
        | if c.reads { RCTX_READS } else { 0 };
    if let (Some(t), false) = (c.rnr, c.recv_loaded) {
        b[RCTX_FLAGS] |= RCTX_RQ_EMPTY;
        b[RCTX_RNR_TIMER] = t.code();
    }
    put24(&mut b, RCTX_QPN, c.qpn.value());
    put(&mut b, 48, c.peer_gid);
    put(&mut b, RCTX_RECV_RESID, c.recv_resid.to_le_bytes());
    b
}

/// The QP whose receive context `b` is: the context cache's tag (`docs/scale.md`). An
/// entry never written reads as QPN 0, which no RC QP has.
pub fn rctx_tag(b: &[u8; RCTX_LEN]) -> Qpn {
    Qpn::new(u24_at(b, RCTX_QPN))
}

/// Clears `held` in receive context `b`, nothing else: the firmware releases a QP whose
/// receive state is already the hardware's (it wrote the engine's back with `held` set,
/// or the exceptions were responses: the engine's requester handled them) without
/// decoding the context and encoding it again.
pub fn release_rctx(b: &mut [u8; RCTX_LEN]) {
    b[RCTX_FLAGS] &= !RCTX_HELD;
}

/// Sets `reads` in receive context `b`, nothing else: a QP released once the engine
/// sent the responses that kept it clear (§3.4, "`reads`").
pub fn reads_rctx(b: &mut [u8; RCTX_LEN]) {
    b[RCTX_FLAGS] |= RCTX_READS;
}

/// Whether receive context `b` is `held` (§3.2).
pub fn rctx_held(b: &[u8; RCTX_LEN]) -> bool {
    b[RCTX_FLAGS] & RCTX_HELD != 0
}

/// Sets `held` in receive context `b`, nothing else: what the fast path keeps of a
/// write that would clear it while an exception of the QP's entry is in flight (§3.2).
pub fn hold_rctx(b: &mut [u8; RCTX_LEN]) {
    b[RCTX_FLAGS] |= RCTX_HELD;
}

/// Loads receive buffer `buf` (address, length) into receive context `b` of QP `qpn`
/// (§3.2 `recv_addr`, `recv_resid`, `recv_loaded`) when it has none, or unloads the one
/// it has (`buf` None), nothing else, while the context is that QP's, on and between
/// messages (`cur` none: no SEND is placing into it; a WRITE's fields are apart), and
/// for a load not `held` (an exception of the QP waits: its write-back loads what the
/// engine's state says): the firmware's
/// preload of the next SEND's receive WQE (§3.4), and its take-back when the WQE's MR
/// changed (a held QP's too: its release would keep the stale buffer). False when it
/// changed nothing.
pub fn load_rctx(b: &mut [u8; RCTX_LEN], qpn: Qpn, buf: Option<(u64, u32)>) -> bool {
    let loaded = b[RCTX_FLAGS] & RCTX_LOADED != 0;
    let held = buf.is_some() && b[RCTX_FLAGS] & RCTX_HELD != 0;
    let between = b[0] == 1 && b[1] == 0 && !held;
    if !between || rctx_tag(b) != qpn || loaded == buf.is_some() {
        return false;
    }
    if let Some((addr, len)) = buf {
        put(b, RCTX_RECV_ADDR, addr.to_le_bytes());
        put(b, RCTX_RECV_RESID, len.to_le_bytes());
        b[RCTX_FLAGS] &= !RCTX_RQ_EMPTY;
    }
    b[RCTX_FLAGS] = (b[RCTX_FLAGS] ^ RCTX_LOADED) & !RCTX_CQE;
    true
}

/// Sets `recv_cqe` (bit 5 of the flags) in receive context `b`, nothing else: the buffer
/// [`load_rctx`] just loaded came with its WQE's `wr_id` (§3.7, "Receive CQEs").
pub fn cqe_rctx(b: &mut [u8; RCTX_LEN]) {
    b[RCTX_FLAGS] |= RCTX_CQE;
}

/// Whether receive context `b` has `recv_cqe` set ([`cqe_rctx`]).
pub fn rctx_cqe(b: &[u8; RCTX_LEN]) -> bool {
    b[RCTX_FLAGS] & RCTX_CQE != 0
}

/// Sets `rq_empty` in receive context `b` of QP `qpn` with timer `t` (`Some`: the
/// firmware's receive load found the QP's receive queue empty; §3.4 "Receiver not
/// ready") while the context is that QP's, on, between messages, with nothing loaded
/// and not `held` (an exception of the QP waits: its write-back says what the engine's
/// queue holds); or clears it (`None`: a receive post), whatever the context's state,
/// since a clear flag only leaves a SEND to the firmware. Nothing else changes. False
/// when it changed nothing.
pub fn rnr_rctx(b: &mut [u8; RCTX_LEN], qpn: Qpn, t: Option<RnrTimer>) -> bool {
    if rctx_tag(b) != qpn {
        return false;
    }
    let Some(t) = t else {
        let was = b[RCTX_FLAGS] & RCTX_RQ_EMPTY != 0;
        b[RCTX_FLAGS] &= !RCTX_RQ_EMPTY;
        return was;
    };
    if b[0] != 1 || b[1] != 0 || b[RCTX_FLAGS] & (RCTX_LOADED | RCTX_HELD) != 0 {
        return false;
    }
    b[RCTX_FLAGS] |= RCTX_RQ_EMPTY;
    b[RCTX_RNR_TIMER] = t.code();
    true
}

/// Decodes a receive context (§3.2).
pub fn decode_rctx(b: &[u8; RCTX_LEN]) -> Result<RecvCtx, Invalid> {
    let s = decode_rctx_state(b)?;
    Ok(RecvCtx {
        // (`decode_rctx_state` checked the bytes these four come from)
        on: b[0] == 1,
        qpn: Qpn::new(u24_at(b, RCTX_QPN)),
        cur: s.cur,
        access: access_of(b[2], 2)?,
        mtu: mtu_of(b[RCTX_MTU] & 15, RCTX_MTU)?,
        epsn: s.epsn,
        msn: s.msn,
        ack_every: b[7],
        unacked: b[11],
        pd: Pd::from_index(u16_at(b, 12)),
        va: s.va,
        rkey: s.rkey,
        resid: s.resid,
        length: s.length,
        recv_addr: u64_at(b, RCTX_RECV_ADDR),
        recv_resid: u32_at(b, RCTX_RECV_RESID),
        recv_loaded: s.recv_loaded,
        nak_sent: s.nak_sent,
        held: rctx_held(b),
        reads: b[RCTX_FLAGS] & RCTX_READS != 0,
        rd_max: b[RCTX_MTU] >> RCTX_RD_MAX_SHIFT & 7,
        rnr: (b[RCTX_FLAGS] & (RCTX_RQ_EMPTY | RCTX_LOADED) == RCTX_RQ_EMPTY)
            .then(|| RnrTimer::new(b[RCTX_RNR_TIMER])),
        pkey: u16_at(b, 14),
        peer_gid: get(b, 48),
    })
}

/// Decodes the [`RecvState`] of a receive context (§3.2), what the engine takes back
/// before it handles an exception, without the fields it does not take (the peer's
/// GID, the addresses, the QP's keys): a context [`decode_rctx`] rejects, this rejects
/// too (the same fields are checked, in the same order).
#[inline(never)] // `decode_rctx` and the firmware's exceptions: one copy
pub fn decode_rctx_state(b: &[u8; RCTX_LEN]) -> Result<RecvState, Invalid> {
    if b[0] > 1 {
        return Err(Invalid { offset: 0 });
    }
    let cur = match b[1] {
        0 => RxCur::None,
        1 => RxCur::Send,
        2 => RxCur::Write,
        _ => return Err(Invalid { offset: 1 }),
    };
    access_of(b[2], 2)?;
    mtu_of(b[RCTX_MTU] & 15, RCTX_MTU)?;
    Ok(RecvState {
        cur,
        epsn: Psn::new(u24_at(b, 4)),
        msn: Msn::new(u24_at(b, 8)),
        va: u64_at(b, 16),
        rkey: Rkey(u32_at(b, 24)),
        resid: u32_at(b, 28),
        length: u32_at(b, 40),
        recv_loaded: b[RCTX_FLAGS] & 2 != 0,
        nak_sent: b[RCTX_FLAGS] & 1 != 0,
    })
}

// ---------------------------------------------------------------------------------------
// §3.3 MR table entry

/// Encodes an MR table entry (§3.3).
pub fn encode_mr(e: &MrEntry) -> [u8; MR_LEN] {
    let mut b = [0u8; MR_LEN];
    put(&mut b, 0, e.key.to_le_bytes());
    put(&mut b, 4, u32::from(e.pd.index()).to_le_bytes());
    put(&mut b, 8, e.base.to_le_bytes());
    put(&mut b, 16, e.length.to_le_bytes());
    b[24] = e.access.bits() as u8;
    b[25] = u8::from(e.valid);
    b
}

/// Decodes an MR table entry (§3.3).
pub fn decode_mr(b: &[u8; MR_LEN]) -> Result<MrEntry, Invalid> {
    let pd = u16::try_from(u32_at(b, 4)).map_err(|_| Invalid { offset: 4 })?;
    Ok(MrEntry {
        key: u32_at(b, 0),
        pd: Pd::from_index(pd),
        base: u64_at(b, 8),
        length: u64_at(b, 16),
        access: access_of(b[24], 24)?,
        valid: b[25] != 0,
    })
}

// ---------------------------------------------------------------------------------------
// §3.5 event-queue entry

/// Event kinds (§3.5 `kind`).
pub const EV_EXCEPTION: u8 = 1;
pub const EV_MSG_DONE: u8 = 2;
pub const EV_ACKED: u8 = 3;
pub const EV_READ: u8 = 4;
pub const EV_CE: u8 = 5;
pub const EV_ATOMIC: u8 = 6;
pub const EV_RNR: u8 = 7;
/// An in-sequence READ or atomic request dropped: its QP's READ resources were taken
/// (§3.4, "The responder's resources").
pub const EV_RD_DROP: u8 = 10;
/// A CNP for a paced QP (§2.5; model only).
pub const EV_CNP: u8 = 8;
/// A pacing entry's byte counter at its threshold (§2.5; model only).
pub const EV_BYTES: u8 = 9;
/// Byte 11 bit 7 of a `MSG_DONE`, `READ`, `ATOMIC`, `RNR` or `RD_DROP` event: its request was marked ECN CE
/// (`Event::Ce`).
pub const EV_FLAG_CE: u8 = 1 << 7;
/// Byte 11 bit 2 of a `MSG_DONE` event: the CQE writer wrote the receive WQE's CQE
/// (`Event::MsgDone::cqe`, §3.7).
pub const EV_FLAG_CQE: u8 = 1 << 2;
/// An `ACKED` event's byte 31 bit 3: a NAK "PSN sequence error" the WQE fetch takes as
/// its Go-Back-N to the event's PSN (`docs/fastpath.md` §3.8): an ACK of PSN - 1 only.
pub const EV_ACKED_GBN: u8 = 1 << 3;
/// An `ACKED` event's byte 31 bit 6: the response was the ATOMIC ACKNOWLEDGE of the
/// atomic at the event's PSN, its original value written into the atomic's buffer.
pub const EV_ACKED_ATOMIC: u8 = 1 << 6;

/// Words of an event-queue entry.
pub const EVENT_WORDS: usize = EVENT_LEN / 4;

/// Messages in flight the RTL's response path knows per QP (`fp_pkg`'s `IF_ENTRIES`,
/// the length of `fp_inflight`'s row): what the RTL's and the SoC's
/// `FastPath::msgs_in_flight` say, and how many WQEs their fetch holds (§3.8).
pub const IF_ENTRIES: u32 = 8;

/// An event as little-endian words (word `i` holds bytes `4 i .. 4 i + 4`, byte
/// `4 i` in bits 7..0): how the firmware keeps one. Every field of §3.5 lies inside
/// one word, so a field is a shift and a mask of its word, where the bytes cost a
/// load and a shift per byte; and a SoC's firmware, reading the event register a word
/// at a time, stores each word whole (a byte array took four byte stores a word:
/// ~120 instructions for the 32 bytes `EVENT_USED`, the fields' decode ~70 more for
/// a `READ`).
pub type EventWords = [u32; EVENT_WORDS];

/// An event's bytes as words ([`EventWords`]).
pub fn event_words(b: &[u8; EVENT_LEN]) -> EventWords {
    let mut w = [0u32; EVENT_WORDS];
    for (d, s) in w.iter_mut().zip(b.chunks_exact(4)) {
        *d = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
    w
}

/// An event's words ([`EventWords`]) as its bytes.
pub fn event_bytes(w: &EventWords) -> [u8; EVENT_LEN] {
    let mut b = [0u8; EVENT_LEN];
    for (d, s) in b.chunks_exact_mut(4).zip(w) {
        d.copy_from_slice(&s.to_le_bytes());
    }
    b
}

/// Encodes an event (§3.5).
pub fn encode_event(e: &Event) -> [u8; EVENT_LEN] {
    event_bytes(&encode_event_words(e))
}

/// ORs the field `v` into the event's bytes from `at` on (a field inside one word, as
/// every field of §3.5 is; `v` no wider than the field).
#[inline(always)]
fn ev_put(w: &mut EventWords, at: usize, v: u32) {
    if let Some(d) = w.get_mut(at / 4) {
        *d |= v << (8 * (at % 4));
    }
}

#[inline(always)]
fn ev_put64(w: &mut EventWords, at: usize, v: u64) {
    ev_put(w, at, v as u32);
    ev_put(w, at + 4, (v >> 32) as u32);
}

/// Encodes an event (§3.5) as words (the model's fast path hands the firmware these).
pub fn encode_event_words(e: &Event) -> EventWords {
    let mut w = [0u32; EVENT_WORDS];
    ev_put(&mut w, 4, e.qpn().value() & 0xFF_FFFF);
    let psn = |w: &mut EventWords, psn: Psn| ev_put(w, 8, psn.value() & 0xFF_FFFF);
    let ce = |w: &mut EventWords, ce: bool| ev_put(w, 11, u32::from(ce) << 7);
    match *e {
        Event::Exception {
            psn: p,
            reason,
            opcode,
            slot,
            frame_len,
            meta,
            ..
        } => {
            ev_put(&mut w, 0, u32::from(EV_EXCEPTION));
            ev_put(&mut w, 1, reason as u32);
            ev_put(&mut w, 2, u32::from(slot));
            ev_put(&mut w, 7, u32::from(opcode.0));
            psn(&mut w, p);
            ev_put(&mut w, 11, u32::from(meta.pad & 3) << 5);
            ev_put(&mut w, 12, u32::from(meta.payload_off));
            ev_put(&mut w, 14, u32::from(meta.payload_len));
            ev_put(&mut w, 16, u32::from(meta.bth.wrapping_add(12)));
            ev_put(&mut w, 18, u32::from(frame_len));
            ev_put(
                &mut w,
                23,
                u32::from(kind_code(meta.l3_kind) | u8::from(meta.vlan) << 2),
            );
        }
        Event::MsgDone {
            msn,
            byte_len,
            solicited,
            ce: c,
            cqe,
            ..
        } => {
            ev_put(&mut w, 0, u32::from(EV_MSG_DONE));
            ev_put(&mut w, 11, u32::from(solicited) << 1 | u32::from(cqe) << 2);
            ce(&mut w, c);
            ev_put(&mut w, 20, msn.value() & 0xFF_FFFF);
            ev_put(&mut w, 24, byte_len);
        }
        Event::Acked {
            psn: p,
            una,
            read,
            last,
            done,
            wqe_index,
            cqe,
            gbn,
            atomic,
            ..
        } => {
            ev_put(&mut w, 0, u32::from(EV_ACKED));
            psn(&mut w, p);
            ev_put(&mut w, 28, una.value() & 0xFF_FFFF);
            let mut flags = u8::from(read) | u8::from(last) << 1 | u8::from(cqe) << 2;
            if gbn {
                flags |= EV_ACKED_GBN;
            }
            if atomic {
                flags |= EV_ACKED_ATOMIC;
            }
            ev_put(&mut w, 31, u32::from(flags));
            ev_put(&mut w, 1, u32::from(done));
            ev_put(&mut w, 2, u32::from(wqe_index));
        }
        Event::Read {
            psn: p,
            va,
            rkey,
            len,
            ce: c,
            ..
        } => {
            ev_put(&mut w, 0, u32::from(EV_READ));
            psn(&mut w, p);
            ce(&mut w, c);
            ev_put(&mut w, 12, rkey.0);
            ev_put64(&mut w, 16, va);
            ev_put(&mut w, 24, len);
        }
        Event::Atomic {
            psn: p,
            orig,
            ce: c,
            ..
        } => {
            ev_put(&mut w, 0, u32::from(EV_ATOMIC));
            psn(&mut w, p);
            ce(&mut w, c);
            ev_put64(&mut w, 16, orig);
        }
        Event::Rnr { ce: c, .. } => {
            ev_put(&mut w, 0, u32::from(EV_RNR));
            ce(&mut w, c);
        }
        Event::RdDropped { ce: c, .. } => {
            ev_put(&mut w, 0, u32::from(EV_RD_DROP));
            ce(&mut w, c);
        }
        Event::Ce { .. } => ev_put(&mut w, 0, u32::from(EV_CE)),
        Event::Cnp { .. } => ev_put(&mut w, 0, u32::from(EV_CNP)),
        Event::ByteCounter { bytes, .. } => {
            ev_put(&mut w, 0, u32::from(EV_BYTES));
            ev_put64(&mut w, 16, bytes);
        }
    }
    w
}

/// The field of `bits` bits (at most 32) at byte `at` of an event, 0 past its end: a
/// shift and a mask of its word (every field of §3.5 lies inside one word; the
/// offsets are constants, so this folds into them).
#[inline(always)]
fn ev_field(w: &EventWords, at: usize, bits: u32) -> u32 {
    let v = w.get(at / 4).copied().unwrap_or(0) >> (8 * (at % 4));
    if bits >= 32 {
        v
    } else {
        v & ((1 << bits) - 1)
    }
}

#[inline(always)]
fn ev_u8(w: &EventWords, at: usize) -> u8 {
    ev_field(w, at, 8) as u8
}

#[inline(always)]
fn ev_u16(w: &EventWords, at: usize) -> u16 {
    ev_field(w, at, 16) as u16
}

#[inline(always)]
fn ev_u24(w: &EventWords, at: usize) -> u32 {
    ev_field(w, at, 24)
}

#[inline(always)]
fn ev_u32(w: &EventWords, at: usize) -> u32 {
    ev_field(w, at, 32)
}

#[inline(always)]
fn ev_u64(w: &EventWords, at: usize) -> u64 {
    u64::from(ev_u32(w, at)) | u64::from(ev_u32(w, at + 4)) << 32
}

/// Decodes an event (§3.5).
pub fn decode_event(b: &[u8; EVENT_LEN]) -> Result<Event, Invalid> {
    decode_event_words(&event_words(b))
}

/// Decodes an event (§3.5) kept as words.
#[inline(always)] // the firmware's `fp_event`: it reads only the fields its arm uses
pub fn decode_event_words(w: &EventWords) -> Result<Event, Invalid> {
    let qpn = Qpn::new(ev_u24(w, 4));
    let psn = Psn::new(ev_u24(w, 8));
    let b11 = ev_u8(w, 11);
    let ce = b11 & EV_FLAG_CE != 0;
    Ok(match ev_u8(w, 0) {
        EV_EXCEPTION => {
            let ext_off = ev_u16(w, 16);
            let b23 = ev_u8(w, 23);
            Event::Exception {
                qpn,
                psn,
                reason: Exception::from_u8(ev_u8(w, 1)).ok_or(Invalid { offset: 1 })?,
                opcode: Opcode(ev_u8(w, 7)),
                slot: ev_u16(w, 2),
                frame_len: ev_u16(w, 18),
                meta: RxMeta {
                    l3_kind: kind_of(b23 & 3, 23)?,
                    vlan: b23 & 4 != 0,
                    bth: ext_off.checked_sub(12).ok_or(Invalid { offset: 16 })?,
                    payload_off: ev_u16(w, 12),
                    payload_len: ev_u16(w, 14),
                    pad: (b11 >> 5) & 3,
                },
            }
        }
        EV_MSG_DONE => Event::MsgDone {
            qpn,
            msn: Msn::new(ev_u24(w, 20)),
            byte_len: ev_u32(w, 24),
            solicited: b11 & 2 != 0,
            ce,
            cqe: b11 & EV_FLAG_CQE != 0,
        },
        EV_ACKED => {
            let b31 = ev_u8(w, 31);
            Event::Acked {
                qpn,
                psn,
                una: Psn::new(ev_u24(w, 28)),
                read: b31 & 1 != 0,
                last: b31 & 2 != 0,
                cqe: b31 & 4 != 0,
                gbn: b31 & EV_ACKED_GBN != 0,
                atomic: b31 & EV_ACKED_ATOMIC != 0,
                done: ev_u8(w, 1),
                wqe_index: ev_u16(w, 2),
            }
        }
        EV_READ => Event::Read {
            qpn,
            psn,
            rkey: Rkey(ev_u32(w, 12)),
            va: ev_u64(w, 16),
            len: ev_u32(w, 24),
            ce,
        },
        EV_ATOMIC => Event::Atomic {
            qpn,
            psn,
            orig: ev_u64(w, 16),
            ce,
        },
        EV_CE => Event::Ce { qpn },
        EV_CNP => Event::Cnp { qpn },
        EV_BYTES => Event::ByteCounter {
            qpn,
            bytes: ev_u64(w, 16),
        },
        EV_RNR => Event::Rnr { qpn, ce },
        EV_RD_DROP => Event::RdDropped { qpn, ce },
        _ => return Err(Invalid { offset: 0 }),
    })
}
