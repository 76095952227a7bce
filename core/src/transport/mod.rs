//! The transport layer: verbs-level types, `modify_qp` rules, and the RC, UC and UD
//! queue pairs as sans-IO state machines (quinn-proto's model: time is passed in, the
//! QP never reads a clock, allocates, or does I/O).
//!
//! A QP is a small context ([`Qp`], 184 bytes on a 64-bit host) plus its queues
//! ([`QpQueues`]); the engine owns tables of both and lends the transport the rest of
//! the world (memory protection, DMA, completion queues, counters) for one call.
//!
//! # Behaviour
//!
//! roce-facts §6 is the specification; where it is silent the QP behaves like Linux
//! rxe, except where noted:
//!
//! * **Requester.** Messages are cut at the path MTU into FIRST/MIDDLE/LAST/ONLY; a
//!   READ takes as many PSNs as it has responses. AckReq goes on the last packet of each
//!   message, at least every `max_pkts_per_ack` packets, and on the packet that fills
//!   the `max_unacked_psns` window. READ/ATOMIC hold one of `max_rd_atomic` credits
//!   until they complete. A FENCE waits for *every* earlier WR (rxe's rule, stricter
//!   than "earlier READ/ATOMIC").
//! * **Completer.** Responses for a later PSN complete earlier SEND/WRITE WQEs
//!   implicitly; one that skips an unanswered READ/ATOMIC, and a gap inside a READ
//!   response stream, start a Go-Back-N retry at once (rxe waits for the timeout).
//!   Retries resend from the oldest unacknowledged PSN; a READ resumes after the
//!   responses already received. `retry_cnt` counts consecutive retries without
//!   progress; a sequence NAK that advances the acknowledged PSN is progress. `retry_cnt`
//!   = 7 means seven retries (rxe treats it as infinite; roce-facts §6.4 calls that a
//!   quirk); `rnr_retry` = 7 is infinite. The local ACK timer restarts on progress only.
//!   A response whose opcode does not fit the WQE it names is dropped and counted
//!   (rxe fails the QP), so a forged packet cannot kill a connection that cheaply.
//! * **Responder.** One NAK per gap; an RNR NAK counts as that NAK. Duplicate SEND /
//!   WRITE are re-ACKed (PSN = ePSN - 1), duplicate READs re-executed from the replay
//!   ring (a still-queued stream for the same READ restarts instead of doubling),
//!   duplicate ATOMICs answered from the ring, never executed twice. ACKs coalesce
//!   until `poll_transmit` and never overtake queued READ responses. READ/ATOMIC beyond
//!   `max_dest_rd_atomic` outstanding are dropped silently (the requester retries;
//!   rxe recycles its resource ring instead, `docs/fastpath.md` §3.4 "The
//!   responder's resources", whose fast path keeps this rule).
//!   A receive buffer too small gives the receiver `LOC_LEN_ERR` (rxe:
//!   `REM_INV_REQ_ERR`) and the requester `REM_INV_REQ_ERR`; SEND_WITH_INV naming a
//!   key that cannot be invalidated is NAKed "invalid request". A full receive CQ is
//!   answered with an RNR NAK (UC/UD: drop), never a CQ overrun; a full send CQ holds
//!   completions back.
//! * **UC** drops a message on a PSN gap or opcode-sequence fault and resumes at the next
//!   FIRST/ONLY; a FIRST/ONLY in the middle of a message starts the new one (rxe drops
//!   both). Packets with a past PSN are dropped without disturbing the message in
//!   progress (rxe resyncs on them, which can deliver an old message after a newer
//!   one). **UD** checks the Q_Key, needs a receive WQE with room for the 40-byte GRH
//!   area plus the payload (else drops silently), and completes an oversized send
//!   without sending it (C10-93.1.1, as rxe).
//! * **Memory.** Atomics treat target memory as a little-endian `u64`. Any region may be
//!   invalidated (rxe: only fast-registration MRs and MWs); it stays unusable until it
//!   is deregistered, or, for a fast-registration MR, registered again by REG_MR. Every
//!   packet re-checks the key it uses, so deregistration or invalidation mid-message
//!   stops the transfer.
//! * **Memory windows and fast registration** (`crate::memory`'s `window.rs`):
//!   BIND_MW, REG_MR and LOCAL_INV are done by the requester when it reaches them in
//!   the send queue, with rxe's checks (`rxe_do_local_ops`): a failed bind completes
//!   `MW_BIND_ERR`, a failed REG_MR or LOCAL_INV `LOC_QP_OP_ERR`, and either moves the
//!   QP to ERR. A remote access through a window must lie inside the window (rxe checks
//!   only the MR's range) and, for type 2, come through the QP that bound it.
//! * **Errors.** Class A/C responder errors NAK and move the QP to ERR; local errors and
//!   fatal NAKs move the requester to ERR. In ERR the QP sends only a final NAK, and
//!   every WQE completes in order: failed ones with their status, the rest with
//!   `WR_FLUSH_ERR` (unsignaled ones too). rxe's rule that an RC QP never enters SQE is
//!   followed for UC and UD as well.
//!
//! * **Selective repeat** (IRN style; `sack.rs`, `docs/selective-repeat.md`) replaces
//!   Go-Back-N on an RC QP whose both ends set `QpAttr::selective_repeat` at INIT→RTR:
//!   WRITEs go out as self-describing WRITE_ONLY pieces, the responder places pieces
//!   out of order and answers with SACKs (a sequence NAK flagged in BTH resv7, the
//!   trigger PSN in the MSN field), the requester resends only unSACKed PSNs.
//!
//! * **SRQ** (`srq.rs`): a QP created with an SRQ takes a receive WQE from it only when
//!   a message needs one and holds it until the message completes (rxe); posting to
//!   such a QP's own receive queue is refused. The limit event fires once per arming.
//!
//! * **GSI** (`Engine::create_gsi_qp`): QP1 is a UD QP with number 1 and the GSI Q_Key;
//!   the CM's MADs travel on it as UD SENDs (`crate::cm`).
//!
//! Not implemented: APM, RD, SMI (QP0, not used on RoCE), and zero-based addressing
//! (`IBV_ACCESS_ZERO_BASED`, access bit 5: the remote address counts from the window's
//! or region's start). The IBTA makes it optional (a type 1 window may never be zero
//! based, o10-36.2.2; type 2 windows and fast-registered regions may); Linux rxe offers
//! it for type 2 windows only (its responder adds the window's start to the RETH's
//! address) and refuses to bind a window to a zero-based region. Bit 5 is refused
//! wherever access flags are taken (`AccessFlags::from_bits`: REG_MR and BIND_MW WQEs,
//! the REG_MR command, MODIFY_QP), never ignored, so a peer cannot be handed an address
//! that means something else here.

mod attr;
mod completer;
mod counters;
mod entry;
mod error;
mod qp;
mod requester;
mod responder;
mod sack;
mod sgl;
mod sr_state;
mod srq;
mod time;
mod verbs;

pub use attr::{check_transition, AttrMask, QpAttr, SrAttr, TransitionError, SR_WINDOW};
pub use counters::Counters;
pub use error::Error;
pub use qp::{CompletionSink, Qp, QpInfo, QpInitAttr, QpQueues, TransportConfig};
pub use responder::{ack_supersedes, GRH_LEN};
pub use sack::{sack_trigger, SACK_FLAG};
pub use sr_state::SrState;
pub(crate) use srq::SrqTable;
pub use srq::{SrqHandle, SrqInfo, MAX_SRQ};
pub use time::Instant;
pub use verbs::*;

pub(crate) use entry::{AckOut, CurOp, RdRes};
pub(crate) use qp::{udp_sport, Completer, Env, PortLimits, QpRef, Requester, Responder};
pub(crate) use sack::send_window;
