//! Where a benchmark runs: two NICs and whatever connects them. The test logic only
//! asks for the time, lets the world make progress, and tells it which NIC has new work.

use roce_host::LocalNic;
use std::rc::Rc;
use std::time::Instant;

/// Counters a run reports besides its timings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Packets the requesters sent again (Go-Back-N resends, rxe's counters summed).
    pub retransmits: u64,
    /// Frames lost on links or dropped by switches.
    pub drops: u64,
}

/// Two NICs and the fabric between them.
pub trait World {
    /// Current time in nanoseconds: simulated, or wall clock.
    fn now(&self) -> u64;
    /// Lets the NICs and the fabric run a little; false when nothing at all is left to
    /// happen (every queue empty, no timer armed): the test is then stuck.
    fn advance(&mut self) -> bool;
    /// NIC `side` has new work from its host (a doorbell rang).
    fn kick(&mut self, side: usize);
    /// The NICs, client first.
    fn nics(&self) -> [&Rc<LocalNic>; 2];
    /// Loss and retransmission counters.
    fn counters(&self) -> NetCounters;
    /// Whether times are simulated.
    fn simulated(&self) -> bool;
}

/// The two NICs connected in memory with no timing model: frames move as soon as they
/// are sent, and time is the wall clock. This measures the software RNIC itself.
pub struct Direct {
    nics: [Rc<LocalNic>; 2],
    start: Instant,
}

impl Direct {
    pub fn new(nics: [Rc<LocalNic>; 2]) -> Self {
        Self {
            nics,
            start: Instant::now(),
        }
    }
}

impl World for Direct {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn advance(&mut self) -> bool {
        let now = self.now();
        let mut busy = false;
        for nic in &self.nics {
            nic.set_time(now);
            busy |= nic.poll();
        }
        for (from, to) in [(0, 1), (1, 0)] {
            let mut tx = self.nics[from].port().borrow_mut();
            if !tx.tx.is_empty() {
                busy = true;
                self.nics[to].port().borrow_mut().rx.extend(tx.tx.drain(..));
            }
        }
        // Timers run on wall time: a pending one keeps the world alive.
        busy || self.nics.iter().any(|n| n.poll_timeout().is_some())
    }

    fn kick(&mut self, _side: usize) {}

    fn nics(&self) -> [&Rc<LocalNic>; 2] {
        [&self.nics[0], &self.nics[1]]
    }

    fn counters(&self) -> NetCounters {
        NetCounters {
            retransmits: retransmits(&self.nics),
            drops: 0,
        }
    }

    fn simulated(&self) -> bool {
        false
    }
}

/// Retry episodes (timeouts and sequence-error NAKs) of both NICs. requesters.
pub fn retransmits(nics: &[Rc<LocalNic>]) -> u64 {
    nics.iter().map(|n| n.counters().completer_retry_err).sum()
}
