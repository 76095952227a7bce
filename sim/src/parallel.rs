//! The parallel engine: a conservative, synchronous parallel discrete-event simulation
//! of a fabric split into partitions, each an ordinary [`Fabric`] joined to the others
//! by links ([`Fabric::connect_remote`]).
//!
//! # Time windows and lookahead
//!
//! A frame sent on a link arrives at least the link's propagation delay after it
//! starts (store-and-forward: the last bit leaves, then travels). With `L` the shortest
//! delay of any link between partitions (the lookahead), no partition can affect another
//! sooner than `L` after its present. So with `T` the earliest pending event anywhere
//! (frames in flight between partitions included), every partition can run all its
//! events in `[T, T + L)` at the same time as the others, without seeing anything from
//! them: what they send in that window arrives at `T + L` or later. After each window the
//! partitions swap the frames they sent, and the next window starts at the new earliest
//! event, so idle stretches cost nothing.
//!
//! # Same result whatever the thread count
//!
//! Partitions are the unit of the model; threads only carry them. Partition `p` lives on
//! thread `p % threads` for the whole run: it is built there (so its nodes need not be
//! `Send`: a NIC model full of `Rc`s is fine) and never moves. Everything a partition
//! does is a function of its own state, its own random streams and the frames it
//! receives; those frames are handed over at window boundaries, sorted by (arrival
//! time, sending partition, sending order), and the window boundaries are computed from
//! the whole model's state. None of this depends on which thread ran what or when, so a
//! run gives the same result, bit for bit, on 1 thread or on 16. (It does depend on how
//! the model is split into partitions: that is part of the model, like its seed.)
//!
//! # Threads
//!
//! The calling thread is thread 0 and carries its share of partitions; the others are
//! spawned at construction and stopped when the engine is dropped. Between windows all
//! threads meet at a barrier that spins briefly, then yields (the machine may be shared).

use crate::fabric::Fabric;
use crate::queue::Nanos;
use crate::rng::derive_seed;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A part of the model: a [`Fabric`] and whatever its builder keeps beside it (host
/// handles, applications). Built on, and only ever touched from, its own thread.
pub trait Partition: 'static {
    fn fabric(&self) -> &Fabric;
    fn fabric_mut(&mut self) -> &mut Fabric;
}

impl Partition for Fabric {
    fn fabric(&self) -> &Fabric {
        self
    }
    fn fabric_mut(&mut self) -> &mut Fabric {
        self
    }
}

/// The seed of partition `p`'s fabric in a model seeded with `seed`: every partition gets
/// its own random streams (switch salts, RED draws, link faults).
pub fn partition_seed(seed: u64, p: usize) -> u64 {
    derive_seed(seed, (4 << 40) + p as u64)
}

/// A frame between partitions, as the receiving partition sorts them.
struct Mail {
    at: Nanos,
    from: usize,
    seq: u64,
    link: u32,
    frame: Vec<u8>,
}

/// Stack of each spawned thread (address space; only what is touched is committed).
const WORKER_STACK: usize = 256 << 20;

type EachFn<P> = Arc<dyn Fn(usize, &mut P) -> Box<dyn Any + Send> + Send + Sync>;

enum Command<P> {
    /// Run every window up to this instant.
    Run(Nanos),
    /// Call the function on every partition of the thread; answer with the results.
    Each(EachFn<P>),
    /// Answer with the events per partition per window.
    Profile,
    Exit,
}

/// What all threads share.
struct Shared {
    threads: usize,
    lookahead: Nanos,
    /// Frames for partition p sent in windows of parity w: `inbox[p][w]`.
    inbox: Vec<[Mutex<Vec<Mail>>; 2]>,
    /// The earliest pending event, gathered during the previous window; three slots so
    /// that one can be reset while one is read and one is filled.
    next: [AtomicU64; 3],
    barrier: SpinBarrier,
    /// A thread panicked: the others must not wait for it.
    poisoned: AtomicBool,
}

/// The partitions carried by one thread, and its window counter (the same on every
/// thread: they all run every window).
struct Carrier<P> {
    thread: usize,
    parts: Vec<(usize, P)>,
    window: u64,
    /// Frames sent so far, per partition of this thread (the sending order of a frame).
    sent: Vec<u64>,
    /// Events each partition of this thread ran in each window.
    profile: Vec<Vec<u32>>,
}

impl<P: Partition> Carrier<P> {
    fn new(thread: usize, partitions: usize, threads: usize, build: &dyn Fn(usize) -> P) -> Self {
        let parts: Vec<(usize, P)> = (thread..partitions)
            .step_by(threads)
            .map(|p| (p, build(p)))
            .collect();
        let sent = vec![0; parts.len()];
        let profile = vec![Vec::new(); parts.len()];
        Self {
            thread,
            parts,
            window: 0,
            sent,
            profile,
        }
    }

    /// Runs windows until the earliest pending event is after `until`, then brings every
    /// partition's clock to `until`. Every thread runs this in step with the others.
    fn run(&mut self, sh: &Shared, until: Nanos) {
        // Work given to the partitions since the last run (a woken host) may be earlier
        // than what the slot holds; the slot may also be earlier than anything left: that
        // only costs an empty window.
        let slot = (self.window % 3) as usize;
        for (_, part) in &self.parts {
            if let Some(t) = part.fabric().next_event() {
                sh.next[slot].fetch_min(t, Ordering::AcqRel);
            }
        }
        sh.barrier.wait(sh);
        if sh.threads == 1 && self.parts.len() == 1 {
            // Alone: no frame crosses a partition, so one window can hold everything.
            return self.run_alone(until);
        }
        loop {
            let k = self.window;
            let start = sh.next[(k % 3) as usize].load(Ordering::Acquire);
            if start > until {
                break;
            }
            if self.thread == 0 {
                sh.next[((k + 2) % 3) as usize].store(Nanos::MAX, Ordering::Release);
            }
            let end = start.saturating_add(sh.lookahead - 1).min(until);
            let mut earliest = Nanos::MAX;
            for (i, (p, part)) in self.parts.iter_mut().enumerate() {
                let fabric = part.fabric_mut();
                deliver(fabric, &sh.inbox[*p][((k + 1) % 2) as usize], start);
                let before = fabric.events_run();
                fabric.run_until(end);
                let ran = fabric.events_run() - before;
                self.profile[i].push(u32::try_from(ran).unwrap_or(u32::MAX));
                for out in fabric.take_outgoing() {
                    assert!(
                        out.at > end,
                        "a frame between partitions arrives within the window that sent it: \
                         a link between partitions is shorter than the lookahead ({} ns)",
                        sh.lookahead
                    );
                    earliest = earliest.min(out.at);
                    let mail = Mail {
                        at: out.at,
                        from: *p,
                        seq: self.sent[i],
                        link: out.to.link,
                        frame: out.frame,
                    };
                    self.sent[i] += 1;
                    lock(&sh.inbox[out.to.partition][(k % 2) as usize]).push(mail);
                }
                if let Some(t) = fabric.next_event() {
                    earliest = earliest.min(t);
                }
            }
            sh.next[((k + 1) % 3) as usize].fetch_min(earliest, Ordering::AcqRel);
            self.window += 1;
            sh.barrier.wait(sh);
        }
        // Nobody may lower the slot for the next run before everyone has read it here.
        sh.barrier.wait(sh);
        for (_, part) in &mut self.parts {
            part.fabric_mut().run_until(until);
        }
    }

    /// `run` for a model of one partition: the fabric runs straight to `until`, as one
    /// window (the same events in the same order as in windows of any length).
    fn run_alone(&mut self, until: Nanos) {
        let fabric = self.parts[0].1.fabric_mut();
        let before = fabric.events_run();
        fabric.run_until(until);
        let ran = fabric.events_run() - before;
        self.profile[0].push(u32::try_from(ran).unwrap_or(u32::MAX));
        self.window += 1;
    }

    fn take_profile(&mut self) -> Vec<(usize, Vec<u32>)> {
        self.parts
            .iter()
            .map(|(p, _)| *p)
            .zip(self.profile.iter().cloned())
            .collect()
    }

    fn each(&mut self, f: &EachFn<P>) -> Vec<(usize, Box<dyn Any + Send>)> {
        self.parts
            .iter_mut()
            .map(|(p, part)| (*p, f(*p, part)))
            .collect()
    }
}

/// Hands the frames of the previous window to the partition, in an order that depends on
/// the model only.
fn deliver(fabric: &mut Fabric, inbox: &Mutex<Vec<Mail>>, start: Nanos) {
    let mut mail = std::mem::take(&mut *lock(inbox));
    if mail.is_empty() {
        return;
    }
    mail.sort_unstable_by_key(|m| (m.at, m.from, m.seq));
    for m in &mail {
        debug_assert!(m.at >= start);
        fabric.deliver_remote(m.at, m.link, &m.frame);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere is reported through `poisoned`; the data is plain.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A reusable barrier for a fixed number of threads: spins a little (the windows are
/// short), then yields the core (the machine may have more threads than cores).
struct SpinBarrier {
    count: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self, sh: &Shared) {
        if sh.threads == 1 {
            return;
        }
        let gen = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == sh.threads {
            self.count.store(0, Ordering::Release);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            if sh.poisoned.load(Ordering::Acquire) {
                panic!("another simulation thread panicked");
            }
            spins += 1;
            if spins < 2_000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

struct Worker<P> {
    commands: Sender<Command<P>>,
    results: Receiver<Vec<(usize, Box<dyn Any + Send>)>>,
    profiles: Receiver<Vec<(usize, Vec<u32>)>>,
    handle: Option<JoinHandle<()>>,
}

/// A model of `partitions` fabrics run by `threads` threads in conservative time windows.
pub struct Parallel<P: Partition> {
    shared: Arc<Shared>,
    local: Carrier<P>,
    workers: Vec<Worker<P>>,
    partitions: usize,
    now: Nanos,
}

impl<P: Partition> Parallel<P> {
    /// Builds partition `p` with `build(p)` on the thread that will carry it (`p %
    /// threads`; thread 0 is the caller's). `lookahead` must not exceed the delay of any
    /// link between partitions (checked as frames cross). `threads` is capped at the
    /// number of partitions.
    pub fn new(
        partitions: usize,
        threads: usize,
        lookahead: Nanos,
        build: impl Fn(usize) -> P + Send + Sync + 'static,
    ) -> Self {
        assert!(partitions > 0, "a model needs a partition");
        assert!(lookahead > 0, "the lookahead must be positive");
        let threads = threads.clamp(1, partitions);
        let shared = Arc::new(Shared {
            threads,
            lookahead,
            inbox: (0..partitions).map(|_| Default::default()).collect(),
            next: [
                AtomicU64::new(Nanos::MAX),
                AtomicU64::new(Nanos::MAX),
                AtomicU64::new(Nanos::MAX),
            ],
            barrier: SpinBarrier::new(),
            poisoned: AtomicBool::new(false),
        });
        let build: Arc<dyn Fn(usize) -> P + Send + Sync> = Arc::new(build);
        let workers = (1..threads)
            .map(|t| {
                let (commands, rx) = channel::<Command<P>>();
                let (tx, results) = channel();
                let (ptx, profiles) = channel();
                let (sh, build) = (shared.clone(), build.clone());
                let handle = std::thread::Builder::new()
                    .name(format!("sim-{t}"))
                    // As the caller's: nodes may be built on the stack before they are
                    // boxed (a host-sized NIC model takes more than 8 MiB unoptimised).
                    .stack_size(WORKER_STACK)
                    .spawn(move || {
                        let guard = PoisonOnPanic(&sh);
                        let mut carrier = Carrier::new(t, partitions, threads, &*build);
                        drop(build);
                        tx.send(Vec::new()).ok();
                        while let Ok(cmd) = rx.recv() {
                            match cmd {
                                Command::Run(until) => carrier.run(&sh, until),
                                Command::Each(f) => {
                                    if tx.send(carrier.each(&f)).is_err() {
                                        break;
                                    }
                                }
                                Command::Profile => {
                                    if ptx.send(carrier.take_profile()).is_err() {
                                        break;
                                    }
                                }
                                Command::Exit => break,
                            }
                        }
                        std::mem::forget(guard);
                    })
                    .expect("spawn a simulation thread");
                Worker {
                    commands,
                    results,
                    profiles,
                    handle: Some(handle),
                }
            })
            .collect::<Vec<_>>();
        let local = Carrier::new(0, partitions, threads, &*build);
        // Every partition is built before anything runs.
        for w in &workers {
            w.results
                .recv()
                .expect("a simulation thread died while building");
        }
        Self {
            shared,
            local,
            workers,
            partitions,
            now: 0,
        }
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// Number of threads carrying them.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// The simulated time every partition has reached.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Runs every partition up to and including `until` (as [`Fabric::run_until`]).
    pub fn run_until(&mut self, until: Nanos) {
        for w in &self.workers {
            w.commands
                .send(Command::Run(until))
                .expect("a simulation thread died");
        }
        self.local.run(&self.shared, until);
        self.now = self.now.max(until);
    }

    /// Runs for `duration` ns of simulated time.
    pub fn run_for(&mut self, duration: Nanos) {
        self.run_until(self.now + duration);
    }

    /// Calls `f(p, partition)` on every partition, on its own thread, and returns the
    /// results in partition order: to inspect partitions, or to give their hosts work
    /// (then wake them: [`Fabric::wake`]).
    pub fn each<R: Send + 'static>(
        &mut self,
        f: impl Fn(usize, &mut P) -> R + Send + Sync + 'static,
    ) -> Vec<R> {
        let f: EachFn<P> = Arc::new(move |p, part| Box::new(f(p, part)));
        for w in &self.workers {
            w.commands
                .send(Command::Each(f.clone()))
                .expect("a simulation thread died");
        }
        let mut out: Vec<Option<Box<dyn Any + Send>>> =
            (0..self.partitions).map(|_| None).collect();
        let mut put = |list: Vec<(usize, Box<dyn Any + Send>)>| {
            for (p, r) in list {
                out[p] = Some(r);
            }
        };
        put(self.local.each(&f));
        for w in &self.workers {
            put(w.results.recv().expect("a simulation thread died"));
        }
        out.into_iter()
            .map(|r| {
                *r.expect("every partition answers")
                    .downcast::<R>()
                    .expect("R")
            })
            .collect()
    }

    /// Events run so far by all partitions.
    pub fn events_run(&mut self) -> u64 {
        self.each(|_, p| p.fabric().events_run()).iter().sum()
    }

    /// How the work was spread over partitions and windows so far.
    pub fn profile(&mut self) -> Profile {
        let mut per_partition = vec![Vec::new(); self.partitions];
        let mut put = |list: Vec<(usize, Vec<u32>)>| {
            for (p, v) in list {
                per_partition[p] = v;
            }
        };
        put(self.local.take_profile());
        for w in &self.workers {
            w.commands
                .send(Command::Profile)
                .expect("a simulation thread died");
        }
        for w in &self.workers {
            put(w.profiles.recv().expect("a simulation thread died"));
        }
        Profile { per_partition }
    }
}

/// Events per partition per window: how much of a run could overlap. A function of the
/// model, like the run itself (not of the threads or the machine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `per_partition[p][w]`: events partition p ran in window w.
    pub per_partition: Vec<Vec<u32>>,
}

impl Profile {
    /// Windows run.
    pub fn windows(&self) -> usize {
        self.per_partition.first().map_or(0, Vec::len)
    }

    /// Events run.
    pub fn events(&self) -> u64 {
        self.per_partition
            .iter()
            .flatten()
            .map(|&e| u64::from(e))
            .sum()
    }

    /// The events on the critical path with `threads` threads (partition p on thread
    /// `p % threads`): the sum over windows of the busiest thread's events, since every
    /// thread waits for the last at the end of each window.
    pub fn critical_path(&self, threads: usize) -> u64 {
        let threads = threads.max(1);
        (0..self.windows())
            .map(|w| {
                (0..threads)
                    .map(|t| {
                        self.per_partition
                            .iter()
                            .skip(t)
                            .step_by(threads)
                            .map(|v| u64::from(v[w]))
                            .sum::<u64>()
                    })
                    .max()
                    .unwrap_or(0)
            })
            .sum()
    }

    /// The speed-up `threads` threads can give at best if every event cost the same and
    /// the barriers nothing: events over the critical path.
    pub fn speedup_bound(&self, threads: usize) -> f64 {
        self.events() as f64 / self.critical_path(threads).max(1) as f64
    }
}

impl<P: Partition> Drop for Parallel<P> {
    fn drop(&mut self) {
        // Threads caught in a barrier by a panic on this thread stop waiting.
        self.shared.poisoned.store(true, Ordering::Release);
        for w in &mut self.workers {
            w.commands.send(Command::Exit).ok();
            if let Some(h) = w.handle.take() {
                h.join().ok();
            }
        }
    }
}

/// Marks the engine poisoned if its thread unwinds, so the others stop waiting.
struct PoisonOnPanic<'a>(&'a Shared);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        self.0.poisoned.store(true, Ordering::Release);
    }
}
