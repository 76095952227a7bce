//! A NIC model's Ethernet port as frame queues, and the port as a (raw) `Datapath` that a
//! datapath model (the RTL, say) stands in front of.

use roce_firmware::hal::Datapath;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Frames the NIC sent and frames waiting for it to receive.
#[derive(Debug, Default)]
pub struct PortQueues {
    /// Frames the NIC transmitted, oldest first.
    pub tx: VecDeque<Vec<u8>>,
    /// Frames waiting to be received, oldest first.
    pub rx: VecDeque<Vec<u8>>,
    /// The transmit queue takes no more than this many frames (back-pressure).
    pub tx_limit: usize,
}

/// The queues as a datapath that checks nothing: whole frames in and out. A datapath
/// model wraps it (`roce_hdl_sim::RtlPort<QueuePort>`).
#[derive(Clone, Debug)]
pub struct QueuePort(pub Rc<RefCell<PortQueues>>);

impl Datapath for QueuePort {
    fn transmit(&mut self, frame: &[u8]) -> bool {
        let mut q = self.0.borrow_mut();
        if q.tx.len() >= q.tx_limit {
            return false;
        }
        q.tx.push_back(frame.to_vec());
        true
    }

    fn can_transmit(&self) -> bool {
        let q = self.0.borrow();
        q.tx.len() < q.tx_limit
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
