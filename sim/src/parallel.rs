//! The parallel engine: a conservative parallel discrete-event simulation of a fabric
//! split into partitions, each an ordinary [`Fabric`] joined to the others by links
//! ([`Fabric::connect_remote`]).
//!
//! # Lookahead and horizons
//!
//! A frame sent on a link arrives at least the link's propagation delay after it
//! starts (store-and-forward: the last bit leaves, then travels). With `L` the shortest
//! delay of any link between partitions (the lookahead), what a partition does at `t`
//! reaches another no sooner than `t + L`.
//!
//! Each partition publishes a horizon (an atomic): every frame it has not handed over
//! yet arrives after that instant. A partition may run every event up to the smallest
//! horizon of the partitions linked to it (its input bound `B`): nothing it has not
//! seen can arrive by then. Having run to `B` and handed over what it sent, its own
//! next action is at `min(next event, B + 1)` at the earliest (an input may arrive at
//! `B + 1`), so it publishes the horizon `min(next event, B + 1) + L - 1`, and its
//! neighbours move on. There is no global step: a partition waits only when it has run
//! a lookahead ahead of a neighbour, and partitions without a link between them never
//! wait for each other (Chandy-Misra-Bryant's null messages, with the horizons as the
//! messages). The run goes in epochs of at most 256 lookaheads: at the start of each,
//! all threads meet (a barrier) and every horizon restarts from the earliest pending
//! event of the whole model, so a stretch where nobody has anything to do costs nothing
//! (inside an epoch, idle partitions still step a lookahead at a time).
//!
//! # Same result whatever the thread count
//!
//! Partitions are the unit of the model; threads only carry them. Partition `p` lives on
//! thread `p % threads` for the whole run: it is built there (so its nodes need not be
//! `Send`: a NIC model full of `Rc`s is fine) and never moves. Everything a partition
//! does is a function of its own state, its own random streams and the frames it
//! receives. A frame from another partition goes into the receiving partition's event
//! queue keyed by (arrival time, sending partition, sending order), ahead of the
//! partition's own events at that nanosecond ([`crate::queue::EventQueue::push_ordered`]),
//! and it is there before the partition runs past its arrival (the horizons): so each
//! partition runs the same events in the same order however the threads interleave,
//! and a run gives the same result, bit for bit, on 1 thread or on 16. (It does depend
//! on how the model is split into partitions: that is part of the model, like its
//! seed.)
//!
//! # Threads
//!
//! The calling thread is thread 0 and carries its share of partitions; the others are
//! spawned at construction and stopped when the engine is dropped. A thread with no
//! partition that may advance spins briefly, then yields (the machine may be shared).
//! Between runs a thread waits for its next command the same way for a while before it
//! sleeps: a driver that runs in short steps and looks at the partitions between them
//! would otherwise pay a wake-up (tens of microseconds on a virtual machine) twice a
//! step.

use crate::fabric::Fabric;
use crate::queue::Nanos;
use crate::rng::derive_seed;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

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

/// A frame between partitions, waiting in the receiving partition's inbox.
struct Mail {
    at: Nanos,
    /// Sending partition and its sending order: where the frame goes among the frames
    /// from other partitions due at the same nanosecond.
    order: u64,
    link: u32,
    buffer: Box<[u8]>,
    len: usize,
}

/// Bits of a mail's order that hold the sending order (the rest: the sending partition).
const ORDER_SEQ_BITS: u32 = 40;

/// Stack of each spawned thread (address space; only what is touched is committed).
const WORKER_STACK: usize = 256 << 20;

/// Lookaheads per epoch: the threads meet (and skip what nobody has to do) at least this
/// often. Within an epoch a partition with nothing to do still steps a lookahead at a
/// time behind its neighbours' horizons; this bounds that cost in a quiet model.
const EPOCH: Nanos = 256;

/// Spins of a waiting thread before it starts yielding its core.
const SPINS: u32 = 2_000;

/// What a thread reports for the profile: its partitions' per-window events, its waits.
type ThreadProfile = (Vec<(usize, Vec<(u64, u32)>)>, Waits);

type EachFn<P> = Arc<dyn Fn(usize, &mut P) -> Box<dyn Any + Send> + Send + Sync>;

enum Command<P> {
    /// Run every partition up to this instant.
    Run(Nanos),
    /// Call the function on every partition of the thread; answer with the results.
    Each(EachFn<P>),
    /// Answer with the events per partition per window, and the thread's waits.
    Profile,
    Exit,
}

/// A horizon on a cache line of its own: partitions on different threads publish theirs
/// all the time.
#[repr(align(128))]
struct Horizon(AtomicU64);

/// What all threads share.
struct Shared {
    threads: usize,
    lookahead: Nanos,
    /// Frames for partition p: `inbox[p]`.
    inbox: Vec<Mutex<Vec<Mail>>>,
    /// Frame buffers given back to partition p by those it sent frames to.
    spares: Vec<Mutex<Vec<Box<[u8]>>>>,
    /// Partition p's horizon: every frame it has not put in an inbox yet arrives after it.
    horizon: Vec<Horizon>,
    /// The earliest pending event of the whole model at the start of a run (by the run's
    /// parity: one is reset while the other is used).
    next: [AtomicU64; 2],
    barrier: SpinBarrier,
    /// A thread panicked: the others must not wait for it.
    poisoned: AtomicBool,
}

/// How often a thread waited for its neighbours (depends on the machine and the
/// scheduler, unlike the [`Profile`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    /// Steps: a partition ran its events up to its input bound and published its horizon.
    pub steps: u64,
    /// Times a thread found none of its partitions able to move and began waiting.
    pub waits: u64,
    /// Passes over its partitions a waiting thread made before one could move.
    pub spins: u64,
    /// Wall-clock nanoseconds the threads spent waiting (for a neighbour's horizon, or
    /// at the barrier that starts an epoch), summed over the threads.
    pub wait_ns: u64,
}

impl std::ops::AddAssign for Waits {
    fn add_assign(&mut self, o: Self) {
        self.steps += o.steps;
        self.waits += o.waits;
        self.spins += o.spins;
        self.wait_ns += o.wait_ns;
    }
}

/// One of a thread's partitions.
struct Part<P> {
    index: usize,
    part: P,
    /// Every event before this instant has run.
    reached: Nanos,
    /// The horizon it published last.
    horizon: Nanos,
    /// The partitions linked to this one (its inputs).
    inputs: Vec<usize>,
    /// Frames sent so far (the sending order of the next).
    sent: u64,
    /// Events per window of the lookahead: (window, events), ascending, no zeros.
    profile: Vec<(u64, u32)>,
}

impl<P> Part<P> {
    /// The smallest horizon of the partition's inputs: it may run every event up to
    /// that instant.
    fn input(&self, sh: &Shared) -> Nanos {
        self.inputs
            .iter()
            .map(|&q| sh.horizon[q].0.load(Ordering::Acquire))
            .min()
            .unwrap_or(Nanos::MAX)
    }
}

/// The partitions carried by one thread.
struct Carrier<P> {
    thread: usize,
    parts: Vec<Part<P>>,
    /// Epochs so far (the same on every thread).
    runs: u64,
    waits: Waits,
    /// An emptied inbox, swapped with a full one (no allocation per hand-over).
    scratch: Vec<Mail>,
    /// The same for given-back buffers.
    spare_scratch: Vec<Box<[u8]>>,
}

impl<P: Partition> Carrier<P> {
    fn new(thread: usize, partitions: usize, threads: usize, build: &dyn Fn(usize) -> P) -> Self {
        let parts = (thread..partitions)
            .step_by(threads)
            .map(|p| Part {
                index: p,
                part: build(p),
                reached: 0,
                horizon: 0,
                inputs: Vec::new(),
                sent: 0,
                profile: Vec::new(),
            })
            .collect();
        Self {
            thread,
            parts,
            runs: 0,
            waits: Waits::default(),
            scratch: Vec::new(),
            spare_scratch: Vec::new(),
        }
    }

    /// Runs every partition of the thread up to `until`, in step with the other threads
    /// (see the module's description): in epochs of at most [`EPOCH`] lookaheads.
    fn run(&mut self, sh: &Shared, until: Nanos) {
        let lookahead = sh.lookahead;
        if sh.threads == 1 && self.parts.len() == 1 {
            // Alone: no frame crosses a partition.
            let p = &mut self.parts[0];
            advance(p.part.fabric_mut(), until, lookahead, &mut p.profile);
            return;
        }
        loop {
            let earliest = self.start_epoch(sh);
            let end = earliest
                .saturating_add(EPOCH.saturating_mul(lookahead))
                .min(until);
            self.run_epoch(sh, end);
            if end == until {
                return;
            }
        }
    }

    /// Starts an epoch, with every thread: every frame handed over goes into its
    /// partition's queue, and every horizon restarts from the earliest event anywhere
    /// (returned). (Work given to the partitions since the last run, a woken host, may
    /// be earlier than any horizon published then; and a model with nothing to do for a
    /// while skips that stretch at once.)
    fn start_epoch(&mut self, sh: &Shared) -> Nanos {
        let lookahead = sh.lookahead;
        let slot = (self.runs % 2) as usize;
        self.runs += 1;
        for i in 0..self.parts.len() {
            self.take_mail(sh, i);
            let p = &mut self.parts[i];
            let fabric = p.part.fabric();
            p.inputs = fabric.remote_partitions();
            p.reached = fabric.now();
            if let Some(t) = fabric.next_event() {
                sh.next[slot].fetch_min(t, Ordering::AcqRel);
            }
        }
        self.meet(sh);
        let earliest = sh.next[slot].load(Ordering::Acquire);
        if self.thread == 0 {
            sh.next[1 - slot].store(Nanos::MAX, Ordering::Release);
        }
        for p in &mut self.parts {
            p.horizon = earliest.saturating_add(lookahead - 1);
            sh.horizon[p.index].0.store(p.horizon, Ordering::Release);
        }
        self.meet(sh);
        earliest
    }

    /// Runs every partition of the thread up to `until`, each as far as its inputs'
    /// horizons let it, publishing its own after every step.
    fn run_epoch(&mut self, sh: &Shared, until: Nanos) {
        let lookahead = sh.lookahead;
        loop {
            let mut unfinished = false;
            let mut moved = false;
            for i in 0..self.parts.len() {
                if self.parts[i].reached > until {
                    continue;
                }
                unfinished = true;
                // The bound first, then the mail: a neighbour hands its frames over
                // before it publishes the horizon they are below.
                let input = self.parts[i].input(sh);
                let bound = input.min(until);
                if bound < self.parts[i].reached {
                    continue;
                }
                self.take_mail(sh, i);
                let p = &mut self.parts[i];
                let fabric = p.part.fabric_mut();
                advance(fabric, bound, lookahead, &mut p.profile);
                p.reached = bound + 1;
                for out in fabric.take_outgoing() {
                    assert!(
                        out.at > p.horizon,
                        "a frame between partitions arrives before the horizon its partition \
                         published: a link between partitions is shorter than the lookahead \
                         ({lookahead} ns)"
                    );
                    let order = (p.index as u64) << ORDER_SEQ_BITS | p.sent;
                    p.sent += 1;
                    lock(&sh.inbox[out.to.partition]).push(Mail {
                        at: out.at,
                        order,
                        link: out.to.link,
                        buffer: out.buffer,
                        len: out.len,
                    });
                }
                for (q, buffer) in fabric.take_returned() {
                    lock(&sh.spares[q]).push(buffer);
                }
                let next = fabric.next_event().unwrap_or(Nanos::MAX);
                let horizon = next
                    .min(input.saturating_add(1))
                    .saturating_add(lookahead - 1);
                p.horizon = horizon;
                sh.horizon[p.index].0.store(horizon, Ordering::Release);
                self.waits.steps += 1;
                moved = true;
            }
            if !unfinished {
                break;
            }
            if !moved {
                self.wait(sh, until);
            }
        }
    }

    /// Waits at the barrier for every thread.
    fn meet(&mut self, sh: &Shared) {
        let start = Instant::now();
        sh.barrier.wait(sh);
        self.waits.wait_ns += start.elapsed().as_nanos() as u64;
    }

    /// Waits until a neighbour's horizon lets one of the thread's partitions move. (A
    /// function of its own so that a profile tells waiting from working.)
    #[inline(never)]
    fn wait(&mut self, sh: &Shared, until: Nanos) {
        self.waits.waits += 1;
        let start = Instant::now();
        let mut spins = 0;
        loop {
            spins += 1;
            sh.pause(spins);
            if self
                .parts
                .iter()
                .any(|p| p.reached <= until && p.input(sh).min(until) >= p.reached)
            {
                break;
            }
        }
        self.waits.spins += spins;
        self.waits.wait_ns += start.elapsed().as_nanos() as u64;
    }

    /// Moves the frames waiting for partition `i` into its event queue, and the
    /// buffers given back to it into its fabric.
    fn take_mail(&mut self, sh: &Shared, i: usize) {
        let p = &mut self.parts[i];
        std::mem::swap(&mut *lock(&sh.inbox[p.index]), &mut self.scratch);
        let fabric = p.part.fabric_mut();
        for m in self.scratch.drain(..) {
            fabric.deliver_remote(m.at, m.link, m.buffer, m.len, m.order);
        }
        std::mem::swap(&mut *lock(&sh.spares[p.index]), &mut self.spare_scratch);
        fabric.give_buffers(self.spare_scratch.drain(..));
    }

    fn take_profile(&mut self) -> ThreadProfile {
        let profiles = self
            .parts
            .iter()
            .map(|p| (p.index, p.profile.clone()))
            .collect();
        (profiles, self.waits)
    }

    fn each(&mut self, f: &EachFn<P>) -> Vec<(usize, Box<dyn Any + Send>)> {
        self.parts
            .iter_mut()
            .map(|p| (p.index, f(p.index, &mut p.part)))
            .collect()
    }
}

/// Runs the fabric's events up to `until`, counting them per window of the lookahead
/// (the profile is a function of the model, whatever the steps were).
fn advance(fabric: &mut Fabric, until: Nanos, lookahead: Nanos, profile: &mut Vec<(u64, u32)>) {
    while let Some(t) = fabric.next_event().filter(|&t| t <= until) {
        let window = t / lookahead;
        let end = (window + 1)
            .saturating_mul(lookahead)
            .saturating_sub(1)
            .min(until);
        let before = fabric.events_run();
        fabric.run_until(end);
        let ran = u32::try_from(fabric.events_run() - before).unwrap_or(u32::MAX);
        match profile.last_mut() {
            Some((w, n)) if *w == window => *n = n.saturating_add(ran),
            _ => profile.push((window, ran)),
        }
    }
    fabric.run_until(until);
}

/// How long a thread waiting for a command or an answer spins before it sleeps.
const RECV_SPIN: std::time::Duration = std::time::Duration::from_millis(2);

/// Receives from `rx`, spinning (then yielding) for up to [`RECV_SPIN`] before it sleeps.
/// A driver alternates short runs (`run_until`) with looks at the partitions (`each`),
/// each a command to every thread: a thread that slept between them must be woken
/// (a futex wake, and on a virtual machine an idle virtual CPU woken by the host),
/// which cost tens of microseconds each, more than a short run itself.
fn recv_soon<T>(rx: &Receiver<T>) -> Result<T, RecvError> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        match rx.try_recv() {
            Ok(v) => return Ok(v),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) => {}
        }
        spins += 1;
        if spins < SPINS {
            std::hint::spin_loop();
        } else if start.elapsed() < RECV_SPIN {
            std::thread::yield_now();
        } else {
            return rx.recv();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere is reported through `poisoned`; the data is plain.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// A waiting thread's pause: a spin at first, later the core to another thread (the
    /// machine may have more threads than cores). Stops waiting if another thread died.
    fn pause(&self, spins: u64) {
        if self.poisoned.load(Ordering::Acquire) {
            panic!("another simulation thread panicked");
        }
        if spins < u64::from(SPINS) {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A reusable barrier for a fixed number of threads: spins a little, then yields the
/// core (the machine may have more threads than cores).
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
        let mut spins = 0u64;
        while self.generation.load(Ordering::Acquire) == gen {
            spins += 1;
            sh.pause(spins);
        }
    }
}

struct Worker<P> {
    commands: Sender<Command<P>>,
    results: Receiver<Vec<(usize, Box<dyn Any + Send>)>>,
    profiles: Receiver<ThreadProfile>,
    handle: Option<JoinHandle<()>>,
}

/// A model of `partitions` fabrics run by `threads` threads, each partition as far ahead
/// as its neighbours' horizons let it.
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
            spares: (0..partitions).map(|_| Default::default()).collect(),
            horizon: (0..partitions)
                .map(|_| Horizon(AtomicU64::new(0)))
                .collect(),
            next: [AtomicU64::new(Nanos::MAX), AtomicU64::new(Nanos::MAX)],
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
                        while let Ok(cmd) = recv_soon(&rx) {
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
            put(recv_soon(&w.results).expect("a simulation thread died"));
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
        self.gather().0
    }

    /// How often the threads waited for each other so far.
    pub fn waits(&mut self) -> Waits {
        self.gather().1
    }

    fn gather(&mut self) -> (Profile, Waits) {
        let mut per_partition = vec![Vec::new(); self.partitions];
        let mut waits = Waits::default();
        let mut put = |(list, w): ThreadProfile| {
            for (p, v) in list {
                per_partition[p] = v;
            }
            waits += w;
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
        (Profile { per_partition }, waits)
    }
}

/// Events per partition per window of the lookahead (simulated time cut into lookahead-
/// long windows from 0): how much of a run could overlap. A function of the model, like
/// the run itself (not of the threads, their steps or the machine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `per_partition[p]`: (window, events partition p ran in it), ascending by window;
    /// windows where it ran nothing are left out.
    pub per_partition: Vec<Vec<(u64, u32)>>,
}

impl Profile {
    /// Windows in which any partition ran an event.
    pub fn windows(&self) -> usize {
        self.by_window(1).len()
    }

    /// Events run.
    pub fn events(&self) -> u64 {
        self.per_partition
            .iter()
            .flatten()
            .map(|&(_, e)| u64::from(e))
            .sum()
    }

    /// Events per window per thread, with partition p on thread `p % threads`.
    fn by_window(&self, threads: usize) -> BTreeMap<u64, Vec<u64>> {
        let mut m: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (p, list) in self.per_partition.iter().enumerate() {
            for &(w, e) in list {
                m.entry(w).or_insert_with(|| vec![0; threads])[p % threads] += u64::from(e);
            }
        }
        m
    }

    /// The events on the critical path with `threads` threads (partition p on thread
    /// `p % threads`) if all had to meet at the end of every window (a synchronous
    /// engine): the sum over windows of the busiest thread's events. The engine's
    /// horizons let a thread run up to a lookahead ahead of its neighbours instead, so
    /// this is a floor on what it can overlap, not a ceiling.
    pub fn critical_path(&self, threads: usize) -> u64 {
        let threads = threads.max(1);
        self.by_window(threads)
            .values()
            .map(|v| v.iter().copied().max().unwrap_or(0))
            .sum()
    }

    /// The most events any thread runs: with partition p on thread `p % threads`, a run
    /// cannot be faster than that thread's share, however little the threads wait.
    pub fn busiest_thread(&self, threads: usize) -> u64 {
        let threads = threads.max(1);
        (0..threads)
            .map(|t| {
                self.per_partition
                    .iter()
                    .skip(t)
                    .step_by(threads)
                    .flatten()
                    .map(|&(_, e)| u64::from(e))
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0)
    }

    /// The speed-up `threads` threads can give if every event cost the same and the
    /// threads met at the end of every window: events over the critical path.
    pub fn speedup_bound(&self, threads: usize) -> f64 {
        self.events() as f64 / self.critical_path(threads).max(1) as f64
    }

    /// The speed-up `threads` threads can give at most, however they overlap: events
    /// over the busiest thread's.
    pub fn balance_bound(&self, threads: usize) -> f64 {
        self.events() as f64 / self.busiest_thread(threads).max(1) as f64
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
