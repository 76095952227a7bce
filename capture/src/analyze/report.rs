//! The result of `roce analyze`: serialisable (`--json`) and as a table.

use super::hist::Percentiles;
use super::pfc::PriorityReport;
use super::stream::{Cause, Episode, Gap, RnrWait, Stats};
use super::{Analyzer, Flow};
use roce_core::wire::opcode::{Opcode, Transport};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub frames: u64,
    pub roce_frames: u64,
    /// Of those, frames captured with a snap length: headers only, ICRC not checked.
    pub snapped_frames: u64,
    pub icrc_errors: u64,
    pub pfc_frames: u64,
    /// Ethernet frames that are neither RoCE nor PFC.
    pub other_frames: u64,
    /// Frames of link types other than Ethernet.
    pub other_link_type_frames: u64,
    /// From the first frame to the last.
    pub duration_s: f64,
    /// The link rate PFC pause times are reckoned at.
    pub link_gbps: f64,
    pub connections: Vec<Connection>,
    pub pfc: Vec<PriorityReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Connection {
    /// Numbered from 1 in order of first appearance.
    pub id: usize,
    pub transport: &'static str,
    pub a: Endpoint,
    pub b: Endpoint,
    pub first_s: f64,
    pub last_s: f64,
    /// What A sent B, and the analysis of A's requests.
    pub a_to_b: Direction,
    /// What B sent A (absent when the capture shows none).
    pub b_to_a: Option<Direction>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub ip: String,
    /// Unknown for the sender of a flow that never paired.
    pub qpn: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Direction {
    pub packets: u64,
    pub payload_bytes: u64,
    pub icrc_errors: u64,
    pub opcodes: BTreeMap<&'static str, OpcodeCount>,
    /// Packets marked ECN-CE (congestion experienced).
    pub ecn_ce: u64,
    pub ecn_ce_peak_per_s: f64,
    /// CNPs: congestion notifications to the other end's reaction point.
    pub cnps: u64,
    pub cnp_peak_per_s: f64,
    /// Responses whose requests the capture does not show.
    pub unmatched_responses: u64,
    /// This end's requests, when it sent any.
    pub requests: Option<Requests>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct OpcodeCount {
    pub packets: u64,
    pub payload_bytes: u64,
    /// Packets that end a message (LAST, ONLY) of a request or READ response.
    pub messages: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Requests {
    pub packets: u64,
    /// Requests sent again (a PSN below the highest sent).
    pub resent: u64,
    /// Requests the responder had already acknowledged.
    pub duplicates: u64,
    pub go_back_n: GoBackN,
    pub naks: Naks,
    pub psn_gaps: Gaps,
    /// READ or ATOMIC responses that did not come (a later response did).
    pub missing_responses: u64,
    pub rnr_naks: u64,
    pub rnr_waited_us: f64,
    /// Go-Back-N episodes that nothing but the local ACK timer explains (after a silence
    /// at least as long as it).
    pub timeouts: u64,
    pub longest_silence_us: f64,
    pub ack_latency: Option<Percentiles>,
    pub events: Events,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct GoBackN {
    pub episodes: u64,
    pub after_nak: u64,
    pub after_rnr_nak: u64,
    pub after_missing_response: u64,
    pub after_timeout: u64,
    /// Nothing in the capture explains them, and the silence before them was too short
    /// for the ACK timer: a NAK or response lost past the capture point.
    pub unexplained: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Naks {
    /// PSN sequence error NAKs the requester acts on (rxe `rcvd_seq_err`).
    pub psn_sequence_error: u64,
    /// Sequence error NAKs it cannot act on: for a PSN it already has acknowledged, or
    /// behind a READ or ATOMIC whose response is missing (it retries for that instead).
    pub psn_sequence_error_ignored: u64,
    pub invalid_request: u64,
    pub remote_access_error: u64,
    pub remote_operational_error: u64,
    pub other: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Gaps {
    /// Ranges of request PSNs missing from the capture.
    pub in_capture: u64,
    pub missing_psns: u64,
    /// Of those, reported by a PSN sequence error NAK.
    pub reported_by_nak: u64,
    /// Sequence error NAKs for a gap the capture does not show (the loss was past the
    /// capture point).
    pub nak_only: u64,
}

/// The first events of each kind (`stream::MAX_EVENTS`).
#[derive(Debug, Clone, Serialize)]
pub struct Events {
    pub go_back_n: Vec<Episode>,
    pub psn_gaps: Vec<Gap>,
    pub rnr_waits: Vec<RnrWait>,
}

fn direction(f: &Flow) -> Direction {
    let t = &f.traffic;
    Direction {
        packets: t.packets,
        payload_bytes: t.payload_bytes,
        icrc_errors: t.icrc_errors,
        opcodes: t
            .opcodes
            .iter()
            .map(|(&op, c)| {
                (
                    Opcode(op).name().unwrap_or("UNKNOWN"),
                    OpcodeCount {
                        packets: c.packets,
                        payload_bytes: c.payload_bytes,
                        messages: c.messages,
                    },
                )
            })
            .collect(),
        ecn_ce: t.ecn_ce,
        ecn_ce_peak_per_s: t.ecn_ce_bins.peak_per_second(),
        cnps: t.cnps,
        cnp_peak_per_s: t.cnp_bins.peak_per_second(),
        unmatched_responses: t.unmatched_responses,
        requests: (f.stream.stats.requests > 0).then(|| requests(&f.stream.stats)),
    }
}

fn requests(s: &Stats) -> Requests {
    Requests {
        packets: s.requests,
        resent: s.resent,
        duplicates: s.duplicates,
        go_back_n: GoBackN {
            episodes: s.episodes,
            after_nak: s.episodes_nak,
            after_rnr_nak: s.episodes_rnr,
            after_missing_response: s.episodes_missing_response,
            after_timeout: s.timeouts,
            unexplained: s.episodes_unexplained,
        },
        naks: Naks {
            psn_sequence_error: s.naks_sequence,
            psn_sequence_error_ignored: s.naks_ignored,
            invalid_request: s.naks_other[0],
            remote_access_error: s.naks_other[1],
            remote_operational_error: s.naks_other[2],
            other: s.naks_other[3],
        },
        psn_gaps: Gaps {
            in_capture: s.gaps_in_capture,
            missing_psns: s.missing_psns,
            reported_by_nak: s.gaps_reported,
            nak_only: s.gaps_nak_only,
        },
        missing_responses: s.missing_responses,
        rnr_naks: s.rnr_naks,
        rnr_waited_us: s.rnr_wait_ns as f64 / 1e3,
        timeouts: s.timeouts,
        longest_silence_us: s.silence_max_ns as f64 / 1e3,
        ack_latency: s.latency.percentiles(),
        events: Events {
            go_back_n: s.episode_list.clone(),
            psn_gaps: s.gap_list.clone(),
            rnr_waits: s.rnr_list.clone(),
        },
    }
}

fn transport(t: Option<Transport>) -> &'static str {
    match t {
        Some(Transport::Rc) => "RC",
        Some(Transport::Uc) => "UC",
        Some(Transport::Ud) => "UD",
        Some(Transport::Cnp) => "CNP",
        None => "?",
    }
}

impl Report {
    pub(super) fn new(a: &Analyzer) -> Self {
        let secs = |ns: u64| ns as f64 / 1e9;
        let connections = a
            .connections()
            .into_iter()
            .enumerate()
            .map(|(i, (x, y))| {
                let fx = &a.flows[x];
                let fy = y.map(|y| &a.flows[y]);
                Connection {
                    id: i + 1,
                    transport: transport(fx.transport.or(fy.and_then(|f| f.transport))),
                    a: Endpoint {
                        ip: fx.src.to_string(),
                        qpn: fx.src_qp,
                    },
                    b: Endpoint {
                        ip: fx.dst.to_string(),
                        qpn: Some(fx.qpn),
                    },
                    first_s: secs(fy.map_or(fx.first_ns, |f| f.first_ns.min(fx.first_ns))),
                    last_s: secs(fy.map_or(fx.last_ns, |f| f.last_ns.max(fx.last_ns))),
                    a_to_b: direction(fx),
                    b_to_a: fy.map(direction),
                }
            })
            .collect();
        Self {
            frames: a.totals.frames,
            roce_frames: a.totals.roce,
            snapped_frames: a.totals.snapped,
            icrc_errors: a.totals.icrc_errors,
            pfc_frames: a.totals.pfc,
            other_frames: a.totals.not_roce,
            other_link_type_frames: a.totals.other_link,
            duration_s: secs(a.last_ns),
            link_gbps: a.pfc.link_bps() as f64 / 1e9,
            connections,
            pfc: a.pfc.report(),
        }
    }

    /// The report as text: a line per connection, a line per paused priority, and the
    /// first events of each connection.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} frames in {:.6} s: {} RoCE{} ({} with a bad ICRC), {} PFC, {} other{}",
            self.frames,
            self.duration_s,
            self.roce_frames,
            if self.snapped_frames > 0 {
                format!(", {} of them headers only", self.snapped_frames)
            } else {
                String::new()
            },
            self.icrc_errors,
            self.pfc_frames,
            self.other_frames,
            if self.other_link_type_frames > 0 {
                format!(", {} of other link types", self.other_link_type_frames)
            } else {
                String::new()
            }
        );
        if !self.connections.is_empty() {
            let _ = writeln!(
                s,
                "\n{:>3} {:<4} {:<42} {:>8} {:>10} {:>7} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7} {:>17}",
                "#", "", "A <-> B", "frames", "payload B", "resent", "GBN", "NAK", "gaps", "dup",
                "RNR", "TO", "CNP", "ECN-CE", "ACK p50/p99 us"
            );
        }
        for c in &self.connections {
            let dirs: Vec<&Direction> = std::iter::once(&c.a_to_b)
                .chain(c.b_to_a.as_ref())
                .collect();
            let sum = |f: &dyn Fn(&Direction) -> u64| dirs.iter().map(|d| f(d)).sum::<u64>();
            let req = |f: &dyn Fn(&Requests) -> u64| {
                dirs.iter()
                    .filter_map(|d| d.requests.as_ref())
                    .map(f)
                    .sum::<u64>()
            };
            let latency = dirs
                .iter()
                .filter_map(|d| d.requests.as_ref()?.ack_latency)
                .max_by_key(|p| p.samples)
                .map_or("-".to_string(), |p| {
                    format!("{:.2}/{:.2}", p.p50_us, p.p99_us)
                });
            let _ = writeln!(
                s,
                "{:>3} {:<4} {:<42} {:>8} {:>10} {:>7} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>7} {:>17}",
                c.id,
                c.transport,
                format!("{} <-> {}", endpoint(&c.a), endpoint(&c.b)),
                sum(&|d| d.packets),
                sum(&|d| d.payload_bytes),
                req(&|r| r.resent),
                req(&|r| r.go_back_n.episodes),
                req(&|r| r.naks.psn_sequence_error),
                req(&|r| r.psn_gaps.in_capture + r.psn_gaps.nak_only),
                req(&|r| r.duplicates),
                req(&|r| r.rnr_naks),
                req(&|r| r.timeouts),
                sum(&|d| d.cnps),
                sum(&|d| d.ecn_ce),
                latency
            );
        }
        if !self.pfc.is_empty() {
            let _ = writeln!(
                s,
                "\nPFC pause frames (pause times at {} Gb/s):\n{:<19} {:>4} {:>7} {:>7} {:>12}",
                self.link_gbps, "sender", "prio", "XOFF", "XON", "paused us"
            );
            for p in &self.pfc {
                let _ = writeln!(
                    s,
                    "{:<19} {:>4} {:>7} {:>7} {:>12.3}",
                    p.mac, p.priority, p.xoff, p.xon, p.paused_us
                );
            }
        }
        for c in &self.connections {
            story(&mut s, c);
        }
        s
    }
}

fn endpoint(e: &Endpoint) -> String {
    match e.qpn {
        Some(q) => format!("{} {q:#x}", e.ip),
        None => format!("{} ?", e.ip),
    }
}

/// Events shown per connection in the text.
const SHOWN: usize = 20;

/// The first events of a connection's request streams, in words, in time order.
fn story(s: &mut String, c: &Connection) {
    let sides = [(&c.a, &c.b, &c.a_to_b)]
        .into_iter()
        .chain(c.b_to_a.as_ref().map(|d| (&c.b, &c.a, d)));
    for (from, to, d) in sides {
        let Some(r) = &d.requests else { continue };
        let ev = &r.events;
        let mut lines: Vec<(f64, String)> = Vec::new();
        for g in &ev.psn_gaps {
            let seen = match g.frame {
                Some(f) => format!("{} PSNs missing before frame {f}", g.missing),
                None => "none missing in the capture".into(),
            };
            let nak = g
                .nak_frame
                .map_or("no NAK".into(), |f| format!("NAK in frame {f}"));
            lines.push((g.at_s, format!("PSN gap at {}: {seen}; {nak}", g.psn)));
        }
        for e in &ev.go_back_n {
            let why = match e.cause {
                Cause::Nak { cause_frame } => format!("after the NAK in frame {cause_frame}"),
                Cause::RnrNak { cause_frame } => {
                    format!("after the RNR NAK in frame {cause_frame}")
                }
                Cause::MissingResponse { cause_frame } => {
                    format!("after frame {cause_frame} showed a response missing")
                }
                Cause::Timeout { silence_us } => {
                    format!("after a timeout ({silence_us:.1} us of silence)")
                }
                Cause::Unexplained { silence_us } => format!(
                    "{silence_us:.1} us after the last frame, nothing in the capture explaining it"
                ),
            };
            lines.push((
                e.at_s,
                format!(
                    "Go-Back-N from PSN {} in frame {}, {why}: {} resent",
                    e.from_psn, e.frame, e.resent
                ),
            ));
        }
        for w in &ev.rnr_waits {
            lines.push((
                w.at_s,
                format!(
                    "RNR NAK in frame {} (timer {:.2} us): waited {:.2} us",
                    w.nak_frame, w.timer_us, w.waited_us
                ),
            ));
        }
        if lines.is_empty() {
            continue;
        }
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        let _ = writeln!(
            s,
            "\nconnection {}: requests {} -> {}",
            c.id,
            endpoint(from),
            endpoint(to)
        );
        for (at, line) in lines.iter().take(SHOWN) {
            let _ = writeln!(s, "  {at:.6} s  {line}");
        }
        if lines.len() > SHOWN {
            let _ = writeln!(
                s,
                "  ... {} more (every event: roce analyze --json)",
                lines.len() - SHOWN
            );
        }
    }
}
