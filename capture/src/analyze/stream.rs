//! One requester's request stream, as seen on the wire: its requests one way, the
//! responder's ACKs, NAKs and responses the other. From these alone it works out what the
//! requester's completer and the responder did (roce-facts §6, rxe `rxe_comp.c`,
//! `rxe_resp.c`): which requests were sent again and why (a NAK, an RNR NAK, a missing
//! response, or a retransmission timeout), where PSNs were missing, which requests the
//! responder had already acknowledged, and how long ACKs took.
//!
//! Definitions (docs/analyze.md):
//! * a request is *resent* when its PSN is below the highest PSN the stream had sent
//!   (what the engine counts as `retransmitted_pkts`);
//! * a *Go-Back-N episode* starts at a resend that goes back (its PSN is below the end of
//!   the previous resend) and lasts until new PSNs are sent; its *cause* is the NAK, RNR NAK
//!   or missing READ/ATOMIC response seen since the last episode, else a *timeout* if
//!   it follows a silence at least as long as the local ACK timeout (given, or the
//!   shortest there is), else it is *unexplained* (a loss past the capture point);
//! * a NAK or missing response seen while an episode is running and the responder has
//!   acknowledged nothing new starts nothing (the completer retries once per progress);
//! * a *PSN gap* is a range of request PSNs missing from the capture, or one a PSN
//!   sequence error NAK reports (the NAK's PSN is the first missing one);
//! * a *duplicate* is a request whose PSN the responder had already acknowledged;
//! * *ACK latency* runs from a request that asks for an answer (AckReq, READ, ATOMIC)
//!   to the first ACK or response covering its PSN; a request sent twice gives no sample
//!   (Karn's rule).

use super::hist::Histogram;
use roce_core::num::Psn;
use serde::Serialize;
use std::collections::VecDeque;

/// Events of each kind kept per stream (the counts are exact beyond it).
pub const MAX_EVENTS: usize = 1000;
/// Requests awaiting an answer that are remembered; older ones give no latency sample.
const MAX_OUTSTANDING: usize = 4096;

/// A request on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    pub psn: Psn,
    pub t: u64,
    pub frame: u64,
    pub kind: RequestKind,
    pub ack_req: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// SEND or RDMA WRITE: one PSN per packet.
    Data,
    /// RDMA READ request for this many bytes: as many PSNs as response packets.
    Read { len: u32 },
    /// COMPARE_SWAP or FETCH_ADD.
    Atomic,
}

/// A response on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    pub psn: Psn,
    pub t: u64,
    pub frame: u64,
    pub kind: ResponseKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    Ack,
    /// A NAK with its code (0 PSN sequence error, 1 invalid request, 2 remote access,
    /// 3 remote operational error).
    Nak(u8),
    /// An RNR NAK: the requester is to wait this long.
    RnrNak {
        wait_ns: u64,
    },
    /// A READ response; `starts` for FIRST and ONLY, `ends` for LAST and ONLY.
    ReadResponse {
        starts: bool,
        ends: bool,
    },
    AtomicAck,
}

/// What a request was, for the time line.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Its PSN as an offset from the stream's first, counting wraps.
    pub offset: i64,
    pub resent: bool,
    /// It started a Go-Back-N episode, for this reason.
    pub episode: Option<Cause>,
}

/// How well a request explains a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Evidence {
    None,
    /// The request could have this response: an ACK or NAK of its PSN, a response
    /// within a READ's PSNs.
    Sent,
    /// The request awaits exactly this response: an ACK of an AckReq packet, the first
    /// response to a READ or ATOMIC.
    Answers,
}

impl Evidence {
    /// How well request `q` explains response `r`.
    pub fn of(q: &Request, r: &Response) -> Self {
        let x = r.psn;
        match (r.kind, q.kind) {
            (ResponseKind::Ack, _) if q.psn == x && q.ack_req => Self::Answers,
            (ResponseKind::ReadResponse { starts: true, .. }, RequestKind::Read { .. })
            | (ResponseKind::AtomicAck, RequestKind::Atomic)
                if q.psn == x =>
            {
                Self::Answers
            }
            (ResponseKind::ReadResponse { .. }, RequestKind::Read { len })
                if !x.before(q.psn) && x.before(q.psn.add(most_psns(len, None))) =>
            {
                Self::Sent
            }
            (ResponseKind::Ack | ResponseKind::Nak(_) | ResponseKind::RnrNak { .. }, _)
                if q.psn == x =>
            {
                Self::Sent
            }
            _ => Self::None,
        }
    }
}

/// The most PSNs a READ of `len` bytes can take: at the path MTU if known, else at the
/// smallest (256).
fn most_psns(len: u32, mtu: Option<u32>) -> u32 {
    len.div_ceil(mtu.unwrap_or(256).max(1)).max(1)
}

/// Why a Go-Back-N episode started.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "cause")]
pub enum Cause {
    /// A PSN sequence error NAK (frame number).
    Nak { cause_frame: u64 },
    /// An RNR NAK (frame number), after its wait.
    RnrNak { cause_frame: u64 },
    /// A READ or ATOMIC response did not come: a later response did.
    MissingResponse { cause_frame: u64 },
    /// Nothing in the capture explains it, and it came after a silence at least as long
    /// as the local ACK timeout: the timer expired.
    Timeout { silence_us: f64 },
    /// Nothing in the capture explains it, after a silence too short for the ACK timer:
    /// a NAK or a response was lost past the capture point (or the requester saw what
    /// the capture did not).
    Unexplained { silence_us: f64 },
}

/// A Go-Back-N episode.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Episode {
    /// The first resend: its frame, time and PSN.
    pub frame: u64,
    pub at_s: f64,
    pub from_psn: u32,
    /// Requests resent in the episode.
    pub resent: u64,
    #[serde(flatten)]
    pub cause: Cause,
}

/// A PSN gap.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Gap {
    /// The first missing PSN.
    pub psn: u32,
    /// PSNs missing from the capture (0: the capture has them all, only a NAK tells).
    pub missing: u32,
    /// Where the capture shows it: the first request after the gap.
    pub frame: Option<u64>,
    /// The PSN sequence error NAK that reported it, if one did.
    pub nak_frame: Option<u64>,
    pub at_s: f64,
}

/// An RNR NAK and the wait it caused.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RnrWait {
    pub nak_frame: u64,
    pub at_s: f64,
    /// The wait the NAK asked for.
    pub timer_us: f64,
    /// From the NAK to the request sent again.
    pub waited_us: f64,
}

/// What a stream counted.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub requests: u64,
    pub resent: u64,
    pub episodes: u64,
    pub episodes_nak: u64,
    pub episodes_rnr: u64,
    pub episodes_missing_response: u64,
    pub episodes_unexplained: u64,
    pub timeouts: u64,
    pub silence_max_ns: u64,
    /// PSN sequence error NAKs the completer acts on (rxe `rcvd_seq_err`).
    pub naks_sequence: u64,
    /// Those it cannot: for a PSN already acknowledged, or behind a READ or ATOMIC
    /// whose response is missing (which the completer retries for instead).
    pub naks_ignored: u64,
    /// NAKs with codes 1 to 3, and reserved ones, by code.
    pub naks_other: [u64; 4],
    pub rnr_naks: u64,
    pub rnr_wait_ns: u64,
    pub gaps_in_capture: u64,
    pub missing_psns: u64,
    pub gaps_reported: u64,
    /// Sequence error NAKs for a gap the capture does not show (lost past the capture
    /// point).
    pub gaps_nak_only: u64,
    pub duplicates: u64,
    pub missing_responses: u64,
    pub latency: Histogram,
    pub episode_list: Vec<Episode>,
    pub gap_list: Vec<Gap>,
    pub rnr_list: Vec<RnrWait>,
}

/// A READ or ATOMIC request whose responses are awaited.
#[derive(Debug, Clone, Copy)]
struct Awaited {
    /// The next response PSN expected for it.
    next: Psn,
    /// One past the last PSN its responses can have.
    end: Psn,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    /// The PSN after the latest resend.
    next: Psn,
    /// Index into `episode_list`, if it was kept.
    kept: Option<usize>,
    resent: u64,
    cause: Cause,
}

/// The request stream of one requester QP.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// The shortest silence a local ACK timeout can explain.
    min_timeout_ns: u64,
    /// One past the highest request PSN sent.
    next: Option<Psn>,
    /// The first request PSN seen.
    first: Option<Psn>,
    /// The latest request's PSN and its offset from the first.
    anchor: Option<(Psn, i64)>,
    /// While a READ's PSN span is unknown (no path MTU seen yet): the furthest it could
    /// reach at the smallest MTU.
    read_slack: Option<Psn>,
    /// The highest PSN the responder has acknowledged, explicitly or not.
    acked: Option<Psn>,
    /// An episode started and the responder has acknowledged nothing new since.
    started_retry: bool,
    cause: Option<Cause>,
    pending_rnr: Option<(u64, u64, u64)>,
    episode: Option<Running>,
    last_activity: Option<u64>,
    awaited: VecDeque<Awaited>,
    /// Requests that asked for an answer: PSN, time sent, sent more than once.
    samples: VecDeque<(Psn, u64, bool)>,
    pub stats: Stats,
}

fn secs(t: u64) -> f64 {
    t as f64 / 1e9
}

fn push<T>(list: &mut Vec<T>, v: T) -> Option<usize> {
    (list.len() < MAX_EVENTS).then(|| {
        list.push(v);
        list.len() - 1
    })
}

impl Stream {
    /// A stream whose requester's local ACK timeout is at least `min_timeout_ns`.
    pub fn new(min_timeout_ns: u64) -> Self {
        Self {
            min_timeout_ns,
            ..Self::default()
        }
    }

    /// Whether the stream has sent `psn` (to pair a response with it).
    pub fn has_sent(&self, psn: Psn) -> bool {
        match (self.first, self.next) {
            (Some(f), Some(n)) => !psn.before(f) && psn.before(n),
            _ => false,
        }
    }

    /// How well the stream's requests explain response `r` (to pair flows).
    pub fn evidence(&self, r: &Response) -> Evidence {
        let x = r.psn;
        match r.kind {
            ResponseKind::Ack if self.samples.iter().any(|s| s.0 == x) => Evidence::Answers,
            ResponseKind::ReadResponse { .. } | ResponseKind::AtomicAck
                if self.awaited.iter().any(|a| a.next == x) =>
            {
                Evidence::Answers
            }
            ResponseKind::ReadResponse { .. }
                if self
                    .awaited
                    .iter()
                    .any(|a| !x.before(a.next) && x.before(a.end)) =>
            {
                Evidence::Sent
            }
            ResponseKind::Ack | ResponseKind::Nak(_) | ResponseKind::RnrNak { .. }
                if self.has_sent(x) =>
            {
                Evidence::Sent
            }
            _ => Evidence::None,
        }
    }

    /// A PSN as an offset from the stream's first request PSN.
    pub fn offset_of(&self, psn: Psn) -> i64 {
        self.anchor.map_or(0, |(a, o)| o + i64::from(psn.diff(a)))
    }

    /// A request of this stream. `mtu` is the path MTU if known (READ spans).
    pub fn request(&mut self, r: Request, mtu: Option<u32>) -> Sent {
        self.stats.requests += 1;
        let p = r.psn;
        self.first.get_or_insert(p);
        let offset = self.offset_of(p);
        self.anchor = Some((p, offset));
        let episodes = self.stats.episodes;
        let resend = self.next.is_some_and(|n| p.before(n));
        // PSNs the request takes: a READ as many as its responses (1 while the MTU is
        // unknown; `read_slack` then allows for more).
        let span = match (r.kind, mtu) {
            (RequestKind::Read { len }, Some(m)) => len.div_ceil(m.max(1)).max(1),
            _ => 1,
        };
        if resend {
            self.resend(&r, span);
        } else {
            if let Some(n) = self.next.filter(|&n| p.after(n)) {
                let within_read = self.read_slack.is_some_and(|s| !p.after(s));
                if !within_read {
                    self.gap(n, &r);
                }
            }
            self.end_episode();
            self.read_slack = match (r.kind, mtu) {
                (RequestKind::Read { len }, None) => Some(p.add(most_psns(len, None))),
                _ => None,
            };
        }
        let end = p.add(span);
        if self.next.is_none_or(|n| end.after(n)) {
            self.next = Some(end);
        }
        if matches!(r.kind, RequestKind::Read { .. } | RequestKind::Atomic) && !resend {
            if self.awaited.len() == MAX_OUTSTANDING {
                self.awaited.pop_front();
            }
            let most = match r.kind {
                RequestKind::Read { len } => most_psns(len, mtu),
                _ => 1,
            };
            self.awaited.push_back(Awaited {
                next: p,
                end: p.add(most),
            });
        }
        if r.ack_req || r.kind != RequestKind::Data {
            if resend {
                for s in self.samples.iter_mut().filter(|s| s.0 == p) {
                    s.2 = true;
                }
            } else {
                if self.samples.len() == MAX_OUTSTANDING {
                    self.samples.pop_front();
                }
                self.samples.push_back((p, r.t, false));
            }
        }
        self.last_activity = Some(r.t);
        Sent {
            offset,
            resent: resend,
            episode: (self.stats.episodes > episodes)
                .then(|| self.episode.map(|e| e.cause))
                .flatten(),
        }
    }

    fn resend(&mut self, r: &Request, span: u32) {
        self.stats.resent += 1;
        if self.acked.is_some_and(|a| !r.psn.after(a)) {
            self.stats.duplicates += 1;
        }
        match self.episode {
            // Going on from where the last resend ended (a partial READ sent again goes
            // back into the span of the last one).
            Some(e) if !r.psn.before(e.next) => {
                // Resends missing from the capture, as new requests can be.
                if r.psn.after(e.next) {
                    self.gap(e.next, r);
                }
            }
            _ => {
                self.end_episode();
                self.start_episode(r);
            }
        }
        if let Some(e) = &mut self.episode {
            e.next = r.psn.add(span);
            e.resent += 1;
        }
    }

    fn start_episode(&mut self, r: &Request) {
        let s = &mut self.stats;
        s.episodes += 1;
        let cause = match self.cause.take() {
            Some(c) => c,
            None => {
                let silence = r.t.saturating_sub(self.last_activity.unwrap_or(r.t));
                let silence_us = silence as f64 / 1e3;
                if silence >= self.min_timeout_ns {
                    s.timeouts += 1;
                    s.silence_max_ns = s.silence_max_ns.max(silence);
                    Cause::Timeout { silence_us }
                } else {
                    s.episodes_unexplained += 1;
                    Cause::Unexplained { silence_us }
                }
            }
        };
        match cause {
            Cause::Nak { .. } => s.episodes_nak += 1,
            Cause::MissingResponse { .. } => s.episodes_missing_response += 1,
            Cause::RnrNak { .. } => {
                s.episodes_rnr += 1;
                if let Some((frame, at, timer)) = self.pending_rnr.take() {
                    let waited = r.t.saturating_sub(at);
                    s.rnr_wait_ns += waited;
                    push(
                        &mut s.rnr_list,
                        RnrWait {
                            nak_frame: frame,
                            at_s: secs(at),
                            timer_us: timer as f64 / 1e3,
                            waited_us: waited as f64 / 1e3,
                        },
                    );
                }
            }
            Cause::Timeout { .. } | Cause::Unexplained { .. } => {}
        }
        let kept = push(
            &mut s.episode_list,
            Episode {
                frame: r.frame,
                at_s: secs(r.t),
                from_psn: r.psn.value(),
                resent: 0,
                cause,
            },
        );
        self.episode = Some(Running {
            next: r.psn,
            kept,
            resent: 0,
            cause,
        });
        self.started_retry = true;
    }

    fn end_episode(&mut self) {
        if let Some(e) = self.episode.take() {
            if let Some(i) = e.kept {
                self.stats.episode_list[i].resent = e.resent;
            }
        }
    }

    /// Request PSNs from `from` up to the request `r` are missing from the capture.
    fn gap(&mut self, from: Psn, r: &Request) {
        let missing = r.psn.diff(from) as u32;
        self.stats.gaps_in_capture += 1;
        self.stats.missing_psns += u64::from(missing);
        push(
            &mut self.stats.gap_list,
            Gap {
                psn: from.value(),
                missing,
                frame: Some(r.frame),
                nak_frame: None,
                at_s: secs(r.t),
            },
        );
    }

    /// A response to this stream's requests.
    pub fn response(&mut self, r: Response) {
        let x = r.psn;
        self.last_activity = Some(r.t);
        if self.missing_response(&r) {
            if matches!(r.kind, ResponseKind::Nak(0)) {
                self.stats.naks_ignored += 1;
                self.nak_gap(&r);
            }
            return;
        }
        match r.kind {
            ResponseKind::Ack | ResponseKind::ReadResponse { .. } | ResponseKind::AtomicAck => {
                self.progress(x);
                self.answered(x, r.t);
            }
            ResponseKind::Nak(0) => {
                self.nak_gap(&r);
                // The completer acts on a NAK for a PSN it has not seen acknowledged.
                if self.acked.is_some_and(|a| !x.after(a)) {
                    self.stats.naks_ignored += 1;
                    return;
                }
                self.stats.naks_sequence += 1;
                self.progress(x.sub(1));
                if !self.started_retry {
                    self.cause = Some(Cause::Nak {
                        cause_frame: r.frame,
                    });
                }
            }
            ResponseKind::Nak(code) => {
                self.stats.naks_other[usize::from(code.min(4)) - 1] += 1;
            }
            ResponseKind::RnrNak { wait_ns } => {
                if self.acked.is_some_and(|a| !x.after(a)) {
                    return;
                }
                self.stats.rnr_naks += 1;
                self.progress(x.sub(1));
                self.cause = Some(Cause::RnrNak {
                    cause_frame: r.frame,
                });
                self.pending_rnr = Some((r.frame, r.t, wait_ns));
            }
        }
    }

    /// Whether `r` shows that the oldest awaited READ or ATOMIC response is missing (a
    /// later response came first). Advances the awaited response otherwise.
    fn missing_response(&mut self, r: &Response) -> bool {
        let Some(a) = self.awaited.front_mut() else {
            return false;
        };
        let x = r.psn;
        if x.before(a.next) {
            // An answer to something older (an ACK of WRITEs before the READ), or a
            // duplicate response.
            return false;
        }
        let answers = matches!(
            r.kind,
            ResponseKind::ReadResponse { .. } | ResponseKind::AtomicAck
        );
        if x == a.next {
            if !answers {
                // A NAK for the READ or ATOMIC itself: the request was lost.
                return false;
            }
            a.next = x.next();
            let ends = match r.kind {
                ResponseKind::ReadResponse { ends, .. } => ends,
                _ => true,
            };
            if ends {
                self.awaited.pop_front();
            }
            return false;
        }
        self.stats.missing_responses += 1;
        if !self.started_retry && self.cause.is_none() {
            self.cause = Some(Cause::MissingResponse {
                cause_frame: r.frame,
            });
        }
        true
    }

    /// The responder has everything up to `psn`.
    fn progress(&mut self, psn: Psn) {
        if !self.has_sent(psn) {
            return;
        }
        if self.acked.is_none_or(|a| psn.after(a)) {
            self.acked = Some(psn);
            self.started_retry = false;
        }
    }

    /// ACK latency samples for requests up to `psn`.
    fn answered(&mut self, psn: Psn, t: u64) {
        while let Some(&(p, sent, twice)) = self.samples.front() {
            if p.after(psn) {
                break;
            }
            self.samples.pop_front();
            if !twice {
                self.stats.latency.record(t.saturating_sub(sent));
            }
        }
    }

    /// A PSN sequence error NAK: the gap it reports, matched with the one the capture
    /// shows if it does.
    fn nak_gap(&mut self, r: &Response) {
        let psn = r.psn.value();
        let s = &mut self.stats;
        let open = s
            .gap_list
            .iter_mut()
            .rev()
            .take(64)
            .find(|g| g.psn == psn && g.nak_frame.is_none() && g.frame.is_some());
        match open {
            Some(g) => {
                g.nak_frame = Some(r.frame);
                s.gaps_reported += 1;
            }
            None => {
                s.gaps_nak_only += 1;
                push(
                    &mut s.gap_list,
                    Gap {
                        psn,
                        missing: 0,
                        frame: None,
                        nak_frame: Some(r.frame),
                        at_s: secs(r.t),
                    },
                );
            }
        }
    }

    /// Closes the running episode (at the end of the capture).
    pub fn finish(&mut self) {
        self.end_episode();
    }
}
