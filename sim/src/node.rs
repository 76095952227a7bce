//! The interface between the fabric and an end host (a NIC, or a test traffic node).
//!
//! It is sans-IO in the style of quinn-proto's `Connection` and of the NIC engine it will
//! wrap: the node never reads a clock, never sleeps and never owns a socket. The fabric
//! passes time in, hands it frames, pulls frames out of it and asks when it next wants to
//! be woken.

use crate::queue::Nanos;
use std::any::Any;

/// A set of 802.1p priorities (bit n = priority n): roce-core's, re-exported.
pub use roce_core::dcb::Priorities;

/// An end host attached to the fabric by one or more ports.
///
/// # Call-order contract
///
/// The fabric drives a node as follows (`port` is the node's own port number, the one
/// given to `Fabric::connect`):
///
/// 1. `now` never decreases from one call to the next.
/// 2. [`link_up`](Node::link_up) is called once per port when a link is connected to it,
///    before any other call concerning that port.
/// 3. [`handle_frame`](Node::handle_frame) delivers each frame whose last bit has
///    arrived on `port`. PFC pause frames are not delivered: they belong to the MAC,
///    which the fabric models for every node (see 5).
/// 4. After each `handle_frame` and each `handle_timeout`, and once when the node is
///    added, the fabric calls [`poll_transmit`](Node::poll_transmit) for every connected
///    port whose transmitter is idle; and for a single port whenever its transmitter
///    becomes idle (the previous frame's last bit is out) or one of its paused priorities
///    resumes. A transmitter takes one frame at a time, so the node is only ever asked
///    for a frame when the wire can take it: that is the back-pressure. A `None` answer
///    means "nothing sendable now": the fabric will not ask that port again until one of
///    the events above, so a node whose next frame becomes due with time alone (pacing)
///    must ask to be woken through `poll_timeout`.
/// 5. `poll_transmit` gets the set of priorities the link partner has paused with PFC
///    (802.1Qbb). The node must not return a data frame of a paused priority; MAC
///    control frames (its own PFC frames) may always be sent. The fabric consumes the
///    received pause frames and keeps the pause timers, so no node parses them; unless
///    the node has a MAC of its own ([`own_mac_control`](Node::own_mac_control)): then
///    its pause frames reach `handle_frame` like any other frame, the fabric keeps no
///    pause timers for the port and `paused` is always empty.
/// 6. After every call above, the fabric calls [`poll_timeout`](Node::poll_timeout) and
///    calls [`handle_timeout`](Node::handle_timeout) once simulated time reaches the
///    instant it returned, unless a later `poll_timeout` returned something else first.
///    A node woken at exactly its deadline should treat `now >= deadline` as due.
pub trait Node {
    /// A link of `rate_bps` bits per second was connected to `port`.
    fn link_up(&mut self, _port: usize, _rate_bps: u64) {}

    /// Whether the node's port `port` has a MAC of its own that takes the PFC frames
    /// it receives and keeps its own pause timers (a NIC whose DCB block is RTL, say).
    fn own_mac_control(&self, _port: usize) -> bool {
        false
    }

    /// A frame (Ethernet header onwards, without the FCS) arrived on `port` at `now`.
    fn handle_frame(&mut self, now: Nanos, port: usize, frame: &[u8]);

    /// The transmitter of `port` is idle: write the next frame (without FCS) into `buf`
    /// and return its length, or return `None`. `buf` holds at least
    /// [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN) bytes of unspecified content; frames
    /// shorter than 60 bytes are padded on the wire (the fabric counts them as 60).
    fn poll_transmit(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        buf: &mut [u8],
    ) -> Option<usize>;

    /// [`poll_transmit`](Node::poll_transmit) where the node may hand over a buffer of
    /// its own instead of copying its frame into `buf`: it swaps `buf` for one of
    /// exactly [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN) bytes that holds the frame (the
    /// fabric then owns it and the node keeps `buf`). A node that builds frames ahead
    /// into such buffers saves a copy of every frame. The fabric calls this one for a
    /// link within its partition (for a link to another partition, `poll_transmit`:
    /// the node's buffers stay on its core); the default writes into `buf` with
    /// `poll_transmit`.
    fn poll_transmit_buffer(
        &mut self,
        now: Nanos,
        port: usize,
        paused: Priorities,
        buf: &mut Box<[u8]>,
    ) -> Option<usize> {
        self.poll_transmit(now, port, paused, buf)
    }

    /// The instant at which the node next wants `handle_timeout`, if any.
    fn poll_timeout(&self) -> Option<Nanos>;

    /// Simulated time reached the instant last returned by `poll_timeout`.
    fn handle_timeout(&mut self, now: Nanos);
}

/// A [`Node`] the fabric can hand back as its concrete type (`Fabric::host`). Blanket
/// implemented: users implement `Node` only.
pub trait AnyNode: Node {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Node + Any> AnyNode for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
