//! A NIC model's Ethernet port as frame queues, and the port as a (raw) `Datapath` that a
//! datapath model (the RTL, say) stands in front of.

use roce_core::dcb::{Priorities, PriorityMap, SharedBuffer, PRIORITIES};
use roce_firmware::hal::Datapath;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Frames the NIC sent and frames waiting for it to receive.
///
/// The transmit side is the datapath's FIFO in front of the DCB MAC, with room kept per
/// 802.1p priority ([`SharedBuffer`], in frames): a reserve of `TX_RESERVE` frames
/// each and the rest shared. Its reader takes the oldest frame of a priority the MAC
/// has room for ([`PortQueues::pop_tx_except`]), so the frames of a paused priority,
/// however many, hold back no other priority's frames, and the runtime builds no
/// frame for a priority that has no room left ([`Datapath::tx_blocked`]).
#[derive(Debug)]
pub struct PortQueues {
    /// Frames the NIC transmitted with their priority, oldest first.
    tx: VecDeque<(u8, Vec<u8>)>,
    tx_room: SharedBuffer,
    /// The port's map, which classifies the frames (the firmware writes it to the
    /// datapath after a MODIFY_DCB).
    map: PriorityMap,
    /// Frames waiting to be received, oldest first.
    pub rx: VecDeque<Vec<u8>>,
}

/// Frames of the transmit queue kept for each priority.
pub const TX_RESERVE: usize = 4;

impl PortQueues {
    /// Queues whose transmit side holds `tx_frames` frames (at least a reserve per
    /// priority).
    pub fn new(tx_frames: usize) -> Self {
        let reserved = PRIORITIES * TX_RESERVE;
        Self::with_room(TX_RESERVE, tx_frames.saturating_sub(reserved))
    }

    /// Queues whose transmit side holds `frames` frames of each priority and nothing
    /// shared: the MAC's room in front of a segmenter that builds a frame only when the
    /// port can take it (the RC fast path: a frame queued here is beyond a FLUSH's reach,
    /// `docs/fastpath.md` §2.2).
    pub fn per_priority(frames: usize) -> Self {
        Self::with_room(frames, 0)
    }

    fn with_room(reserve: usize, shared: usize) -> Self {
        Self {
            tx: VecDeque::new(),
            tx_room: SharedBuffer::new(reserve as u32, shared as u32),
            map: PriorityMap::new(),
            rx: VecDeque::new(),
        }
    }

    /// The port's priority map, for the frames queued from now on.
    pub fn set_map(&mut self, map: PriorityMap) {
        self.map = map;
    }

    /// Queues `frame` for the wire; false (not taken) when its priority has no room.
    pub fn push_tx(&mut self, frame: &[u8]) -> bool {
        let prio = self.map.of_frame(frame);
        if !self.tx_room.add(prio, 1) {
            return false;
        }
        self.tx.push_back((prio, frame.to_vec()));
        true
    }

    /// The priorities whose frames `push_tx` would not take.
    pub fn tx_blocked(&self) -> Priorities {
        self.tx_room.blocked(1)
    }

    /// The oldest queued frame whose priority is not in `blocked`.
    pub fn pop_tx_except(&mut self, blocked: Priorities) -> Option<Vec<u8>> {
        let i = self.tx.iter().position(|(p, _)| !blocked.contains(*p))?;
        let (prio, frame) = self.tx.remove(i)?;
        self.tx_room.remove(prio, 1);
        Some(frame)
    }

    /// Frames queued for the wire.
    pub fn tx_len(&self) -> usize {
        self.tx.len()
    }
}

/// The queues as a datapath that checks nothing: whole frames in and out. A datapath
/// model wraps it (`roce_hdl_sim::RtlPort<QueuePort>`).
#[derive(Clone, Debug)]
pub struct QueuePort(pub Rc<RefCell<PortQueues>>);

impl Datapath for QueuePort {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        self.0.borrow_mut().push_tx(frame)
    }

    fn can_transmit(&self) -> bool {
        self.0.borrow().tx_blocked() != Priorities::ALL
    }

    fn tx_blocked(&self) -> Priorities {
        self.0.borrow().tx_blocked()
    }

    fn receive(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut q = self.0.borrow_mut();
        while let Some(frame) = q.rx.pop_front() {
            // A frame longer than the runtime's buffer cannot be a RoCE frame it takes.
            if let Some(dst) = buf.get_mut(..frame.len()) {
                dst.copy_from_slice(&frame);
                return Some(frame.len());
            }
        }
        None
    }
}
