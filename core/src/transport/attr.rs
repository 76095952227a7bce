//! `modify_qp`: the attribute set and the legal state transitions with their required
//! and optional attributes (Linux `qp_state_table` / `ib_modify_qp_is_ok`, roce-facts
//! §6.5).

use core::fmt;

use crate::memory::AccessFlags;
use crate::num::{Psn, Qkey, Qpn};

use super::verbs::{AckTimeout, AddressVector, Mtu, QpState, QpType, RetryCount, RnrTimer};

/// Attribute mask bits (`enum ibv_qp_attr_mask`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttrMask(u32);

impl AttrMask {
    /// No attribute.
    pub const NONE: Self = Self(0);
    /// `IBV_QP_STATE`.
    pub const STATE: Self = Self(1 << 0);
    /// `IBV_QP_CUR_STATE`.
    pub const CUR_STATE: Self = Self(1 << 1);
    /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
    pub const EN_SQD_ASYNC_NOTIFY: Self = Self(1 << 2);
    /// `IBV_QP_ACCESS_FLAGS`.
    pub const ACCESS_FLAGS: Self = Self(1 << 3);
    /// `IBV_QP_PKEY_INDEX`.
    pub const PKEY_INDEX: Self = Self(1 << 4);
    /// `IBV_QP_PORT`.
    pub const PORT: Self = Self(1 << 5);
    /// `IBV_QP_QKEY`.
    pub const QKEY: Self = Self(1 << 6);
    /// `IBV_QP_AV`.
    pub const AV: Self = Self(1 << 7);
    /// `IBV_QP_PATH_MTU`.
    pub const PATH_MTU: Self = Self(1 << 8);
    /// `IBV_QP_TIMEOUT`.
    pub const TIMEOUT: Self = Self(1 << 9);
    /// `IBV_QP_RETRY_CNT`.
    pub const RETRY_CNT: Self = Self(1 << 10);
    /// `IBV_QP_RNR_RETRY`.
    pub const RNR_RETRY: Self = Self(1 << 11);
    /// `IBV_QP_RQ_PSN`.
    pub const RQ_PSN: Self = Self(1 << 12);
    /// `IBV_QP_MAX_QP_RD_ATOMIC`.
    pub const MAX_QP_RD_ATOMIC: Self = Self(1 << 13);
    /// `IBV_QP_ALT_PATH`.
    pub const ALT_PATH: Self = Self(1 << 14);
    /// `IBV_QP_MIN_RNR_TIMER`.
    pub const MIN_RNR_TIMER: Self = Self(1 << 15);
    /// `IBV_QP_SQ_PSN`.
    pub const SQ_PSN: Self = Self(1 << 16);
    /// `IBV_QP_MAX_DEST_RD_ATOMIC`.
    pub const MAX_DEST_RD_ATOMIC: Self = Self(1 << 17);
    /// `IBV_QP_PATH_MIG_STATE`.
    pub const PATH_MIG_STATE: Self = Self(1 << 18);
    /// `IBV_QP_DEST_QPN`.
    pub const DEST_QPN: Self = Self(1 << 20);
    /// Selective repeat (this NIC's extension; no libibverbs bit, so one far above
    /// the ones libibverbs uses).
    pub const SELECTIVE_REPEAT: Self = Self(1 << 30);

    const NAMES: [(Self, &'static str); 21] = [
        (Self::STATE, "STATE"),
        (Self::CUR_STATE, "CUR_STATE"),
        (Self::EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"),
        (Self::ACCESS_FLAGS, "ACCESS_FLAGS"),
        (Self::PKEY_INDEX, "PKEY_INDEX"),
        (Self::PORT, "PORT"),
        (Self::QKEY, "QKEY"),
        (Self::AV, "AV"),
        (Self::PATH_MTU, "PATH_MTU"),
        (Self::TIMEOUT, "TIMEOUT"),
        (Self::RETRY_CNT, "RETRY_CNT"),
        (Self::RNR_RETRY, "RNR_RETRY"),
        (Self::RQ_PSN, "RQ_PSN"),
        (Self::MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"),
        (Self::ALT_PATH, "ALT_PATH"),
        (Self::MIN_RNR_TIMER, "MIN_RNR_TIMER"),
        (Self::SQ_PSN, "SQ_PSN"),
        (Self::MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"),
        (Self::PATH_MIG_STATE, "PATH_MIG_STATE"),
        (Self::DEST_QPN, "DEST_QPN"),
        (Self::SELECTIVE_REPEAT, "SELECTIVE_REPEAT"),
    ];

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// From raw bits.
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits)
    }

    /// Every bit of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Union.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Bits of `self` that are not in `other`.
    #[must_use]
    pub const fn difference(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// No bit set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl fmt::Debug for AttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut rest = self.0;
        for (bit, name) in Self::NAMES {
            if self.contains(bit) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
                rest &= !bit.0;
            }
        }
        if rest != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{rest:#x}")?;
        } else if first {
            f.write_str("NONE")?;
        }
        Ok(())
    }
}

impl fmt::Display for AttrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// QP attributes for `modify_qp` (`struct ibv_qp_attr`): each attribute is given or
/// not, and the mask is derived from which ones are given, so the two cannot disagree.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct QpAttr {
    /// Target state (`IBV_QP_STATE`); required.
    pub qp_state: Option<QpState>,
    /// The state the caller believes the QP is in (`IBV_QP_CUR_STATE`).
    pub cur_qp_state: Option<QpState>,
    /// Request an async event when SQD is reached.
    pub en_sqd_async_notify: Option<bool>,
    /// Remote access the responder allows.
    pub qp_access_flags: Option<AccessFlags>,
    /// Index into the port's P_Key table.
    pub pkey_index: Option<u16>,
    /// Port number (1-based).
    pub port_num: Option<u8>,
    /// Q_Key (UD).
    pub qkey: Option<Qkey>,
    /// Primary path.
    pub ah_attr: Option<AddressVector>,
    /// Path MTU.
    pub path_mtu: Option<Mtu>,
    /// Local ACK timeout.
    pub timeout: Option<AckTimeout>,
    /// Transport retry count.
    pub retry_cnt: Option<RetryCount>,
    /// RNR retry count (7 = infinite).
    pub rnr_retry: Option<RetryCount>,
    /// Responder's expected PSN.
    pub rq_psn: Option<Psn>,
    /// Outstanding READ/ATOMIC this QP may initiate.
    pub max_rd_atomic: Option<u8>,
    /// Minimum RNR NAK timer this QP advertises as responder.
    pub min_rnr_timer: Option<RnrTimer>,
    /// First PSN this QP sends.
    pub sq_psn: Option<Psn>,
    /// READ/ATOMIC this QP accepts as responder.
    pub max_dest_rd_atomic: Option<u8>,
    /// Remote QPN (RC/UC).
    pub dest_qp_num: Option<Qpn>,
    /// Selective repeat instead of Go-Back-N (RC, at INIT -> RTR; both ends must set
    /// it: `docs/selective-repeat.md`).
    pub selective_repeat: Option<SrAttr>,
}

impl QpAttr {
    /// Attributes that move to `state` (with nothing else given yet).
    pub fn to_state(state: QpState) -> Self {
        Self {
            qp_state: Some(state),
            ..Self::default()
        }
    }

    /// The mask that the given attributes stand for.
    pub fn mask(&self) -> AttrMask {
        let mut m = AttrMask::NONE;
        let mut set = |present: bool, bit: AttrMask| {
            if present {
                m = m.union(bit);
            }
        };
        set(self.qp_state.is_some(), AttrMask::STATE);
        set(self.cur_qp_state.is_some(), AttrMask::CUR_STATE);
        set(
            self.en_sqd_async_notify.is_some(),
            AttrMask::EN_SQD_ASYNC_NOTIFY,
        );
        set(self.qp_access_flags.is_some(), AttrMask::ACCESS_FLAGS);
        set(self.pkey_index.is_some(), AttrMask::PKEY_INDEX);
        set(self.port_num.is_some(), AttrMask::PORT);
        set(self.qkey.is_some(), AttrMask::QKEY);
        set(self.ah_attr.is_some(), AttrMask::AV);
        set(self.path_mtu.is_some(), AttrMask::PATH_MTU);
        set(self.timeout.is_some(), AttrMask::TIMEOUT);
        set(self.retry_cnt.is_some(), AttrMask::RETRY_CNT);
        set(self.rnr_retry.is_some(), AttrMask::RNR_RETRY);
        set(self.rq_psn.is_some(), AttrMask::RQ_PSN);
        set(self.max_rd_atomic.is_some(), AttrMask::MAX_QP_RD_ATOMIC);
        set(self.min_rnr_timer.is_some(), AttrMask::MIN_RNR_TIMER);
        set(self.sq_psn.is_some(), AttrMask::SQ_PSN);
        set(
            self.max_dest_rd_atomic.is_some(),
            AttrMask::MAX_DEST_RD_ATOMIC,
        );
        set(self.dest_qp_num.is_some(), AttrMask::DEST_QPN);
        set(self.selective_repeat.is_some(), AttrMask::SELECTIVE_REPEAT);
        m
    }
}

/// Why a `modify_qp` was refused by the transition rules.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TransitionError {
    /// The transition is not in the table for this QP type.
    InvalidTransition {
        /// QP type.
        qp_type: QpType,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// Required attributes were not given.
    MissingAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// What is missing.
        missing: AttrMask,
    },
    /// Attributes that this transition does not accept were given.
    UnexpectedAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// What was not expected.
        unexpected: AttrMask,
    },
    /// `cur_qp_state` was given and does not match the QP's state.
    CurrentStateMismatch {
        /// The QP's real state.
        actual: QpState,
        /// What the caller said.
        claimed: QpState,
    },
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidTransition { qp_type, from, to } => {
                write!(f, "invalid {qp_type:?} QP transition {from} -> {to}")
            }
            Self::MissingAttributes { from, to, missing } => {
                write!(f, "{from} -> {to} requires {missing}")
            }
            Self::UnexpectedAttributes {
                from,
                to,
                unexpected,
            } => write!(f, "{from} -> {to} does not accept {unexpected}"),
            Self::CurrentStateMismatch { actual, claimed } => {
                write!(f, "cur_qp_state says {claimed} but the QP is in {actual}")
            }
        }
    }
}

/// Required and optional attributes of one transition for one QP type.
#[derive(Clone, Copy)]
struct Rule {
    req: AttrMask,
    opt: AttrMask,
}

const fn m(bits: &[AttrMask]) -> AttrMask {
    let mut acc = 0;
    let mut i = 0;
    while i < bits.len() {
        acc |= bits[i].0;
        i += 1;
    }
    AttrMask(acc)
}

const fn rule(req: &[AttrMask], opt: &[AttrMask]) -> Option<Rule> {
    Some(Rule {
        req: m(req),
        opt: m(opt),
    })
}

use AttrMask as A;

/// The table of roce-facts §6.5, per (from, to, type). None = not a legal transition.
fn transition_rule(qp_type: QpType, from: QpState, to: QpState) -> Option<Rule> {
    use QpState::*;
    use QpType::*;
    let t = qp_type;
    match (from, to) {
        // Any state may go to RESET or ERR, except RESET -> ERR which this version of
        // the table does not list.
        (Reset, Reset) => rule(&[], &[]),
        (Reset, Err) => None,
        (_, Reset) | (_, Err) => rule(&[], &[]),
        (Reset, Init) => match t {
            Rc | Uc => rule(&[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS], &[]),
            Ud => rule(&[A::PKEY_INDEX, A::PORT, A::QKEY], &[]),
        },
        (Init, Init) => match t {
            Rc | Uc => rule(&[], &[A::PKEY_INDEX, A::PORT, A::ACCESS_FLAGS]),
            Ud => rule(&[], &[A::PKEY_INDEX, A::PORT, A::QKEY]),
        },
        (Init, Rtr) => match t {
            Rc => rule(
                &[
                    A::AV,
                    A::PATH_MTU,
                    A::DEST_QPN,
                    A::RQ_PSN,
                    A::MAX_DEST_RD_ATOMIC,
                    A::MIN_RNR_TIMER,
                ],
                &[
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::PKEY_INDEX,
                    A::SELECTIVE_REPEAT,
                ],
            ),
            Uc => rule(
                &[A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN],
                &[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX],
            ),
            Ud => rule(&[], &[A::PKEY_INDEX, A::QKEY]),
        },
        (Rtr, Rts) => match t {
            Rc => rule(
                &[
                    A::TIMEOUT,
                    A::RETRY_CNT,
                    A::RNR_RETRY,
                    A::SQ_PSN,
                    A::MAX_QP_RD_ATOMIC,
                ],
                &[
                    A::CUR_STATE,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::MIN_RNR_TIMER,
                    A::PATH_MIG_STATE,
                ],
            ),
            Uc => rule(
                &[A::SQ_PSN],
                &[
                    A::CUR_STATE,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::PATH_MIG_STATE,
                ],
            ),
            Ud => rule(&[A::SQ_PSN], &[A::CUR_STATE, A::QKEY]),
        },
        (Rts, Rts) => match t {
            Rc => rule(
                &[],
                &[
                    A::CUR_STATE,
                    A::ACCESS_FLAGS,
                    A::ALT_PATH,
                    A::PATH_MIG_STATE,
                    A::MIN_RNR_TIMER,
                ],
            ),
            Uc => rule(
                &[],
                &[
                    A::CUR_STATE,
                    A::ACCESS_FLAGS,
                    A::ALT_PATH,
                    A::PATH_MIG_STATE,
                ],
            ),
            Ud => rule(&[], &[A::CUR_STATE, A::QKEY]),
        },
        (Rts, Sqd) => rule(&[], &[A::EN_SQD_ASYNC_NOTIFY]),
        (Sqd, Rts) => match t {
            Rc => rule(
                &[],
                &[
                    A::CUR_STATE,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::MIN_RNR_TIMER,
                    A::PATH_MIG_STATE,
                ],
            ),
            Uc => rule(
                &[],
                &[
                    A::CUR_STATE,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::PATH_MIG_STATE,
                ],
            ),
            Ud => rule(&[], &[A::CUR_STATE, A::QKEY]),
        },
        (Sqd, Sqd) => match t {
            Rc => rule(
                &[],
                &[
                    A::PORT,
                    A::AV,
                    A::TIMEOUT,
                    A::RETRY_CNT,
                    A::RNR_RETRY,
                    A::MAX_QP_RD_ATOMIC,
                    A::MAX_DEST_RD_ATOMIC,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::PKEY_INDEX,
                    A::MIN_RNR_TIMER,
                    A::PATH_MIG_STATE,
                ],
            ),
            Uc => rule(
                &[],
                &[
                    A::AV,
                    A::ALT_PATH,
                    A::ACCESS_FLAGS,
                    A::PKEY_INDEX,
                    A::PATH_MIG_STATE,
                ],
            ),
            Ud => rule(&[], &[A::PKEY_INDEX, A::QKEY]),
        },
        (Sqe, Rts) => match t {
            Rc => None,
            Uc => rule(&[], &[A::CUR_STATE, A::ACCESS_FLAGS]),
            Ud => rule(&[], &[A::CUR_STATE, A::QKEY]),
        },
        _ => None,
    }
}

/// Checks a `modify_qp` request against the transition table (`ib_modify_qp_is_ok`).
///
/// `cur` is the QP's state. If `attr.cur_qp_state` is given it must equal `cur`, and it
/// is only accepted where the table lists CUR_STATE as optional.
pub fn check_transition(
    qp_type: QpType,
    cur: QpState,
    attr: &QpAttr,
) -> Result<QpState, TransitionError> {
    let next = attr.qp_state.unwrap_or(cur);
    if let Some(claimed) = attr.cur_qp_state {
        if claimed != cur {
            return Err(TransitionError::CurrentStateMismatch {
                actual: cur,
                claimed,
            });
        }
    }
    let Some(r) = transition_rule(qp_type, cur, next) else {
        return Err(TransitionError::InvalidTransition {
            qp_type,
            from: cur,
            to: next,
        });
    };
    let mask = attr.mask().difference(AttrMask::STATE);
    let missing = r.req.difference(mask);
    if !missing.is_empty() {
        return Err(TransitionError::MissingAttributes {
            from: cur,
            to: next,
            missing,
        });
    }
    let unexpected = mask.difference(r.req.union(r.opt));
    if !unexpected.is_empty() {
        return Err(TransitionError::UnexpectedAttributes {
            from: cur,
            to: next,
            unexpected,
        });
    }
    Ok(next)
}

/// PSNs each bitmap covers: the largest window a selective-repeat QP may use.
pub const SR_WINDOW: u32 = 256;

/// The selective-repeat QP attribute (`QpAttr::selective_repeat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SrAttr {
    /// Use selective repeat (both ends must set it).
    pub enabled: bool,
    /// Most PSNs in flight (IRN's BDP cap); 0 = the port's `max_unacked_psns`. At most
    /// [`SR_WINDOW`].
    pub max_inflight: u16,
    /// IRN's RTO_low, used while at most 3 packets are in flight; `INFINITE` = always
    /// the QP's `timeout`.
    pub rto_low: AckTimeout,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::verbs::{AckTimeout, RetryCount, RnrTimer};
    use QpState::{Init, Reset, Rtr, Rts, Sqd, Sqe};

    fn init_attr() -> QpAttr {
        QpAttr {
            qp_state: Some(Init),
            pkey_index: Some(0),
            port_num: Some(1),
            qp_access_flags: Some(AccessFlags::REMOTE_WRITE),
            ..Default::default()
        }
    }

    fn rtr_attr() -> QpAttr {
        QpAttr {
            qp_state: Some(Rtr),
            ah_attr: Some(AddressVector::default()),
            path_mtu: Some(Mtu::Mtu1024),
            dest_qp_num: Some(Qpn::new(0x11)),
            rq_psn: Some(Psn::new(0)),
            max_dest_rd_atomic: Some(4),
            min_rnr_timer: RnrTimer::new(12),
            ..Default::default()
        }
    }

    fn rts_attr() -> QpAttr {
        QpAttr {
            qp_state: Some(Rts),
            timeout: AckTimeout::new(14),
            retry_cnt: RetryCount::new(7),
            rnr_retry: RetryCount::new(7),
            sq_psn: Some(Psn::new(0)),
            max_rd_atomic: Some(4),
            ..Default::default()
        }
    }

    #[test]
    fn rc_walks_reset_init_rtr_rts() {
        assert_eq!(check_transition(QpType::Rc, Reset, &init_attr()), Ok(Init));
        assert_eq!(check_transition(QpType::Rc, Init, &rtr_attr()), Ok(Rtr));
        assert_eq!(check_transition(QpType::Rc, Rtr, &rts_attr()), Ok(Rts));
        assert_eq!(
            check_transition(QpType::Rc, Rts, &QpAttr::to_state(Sqd)),
            Ok(Sqd)
        );
        assert_eq!(
            check_transition(QpType::Rc, Sqd, &QpAttr::to_state(Rts)),
            Ok(Rts)
        );
        assert_eq!(
            check_transition(QpType::Rc, Rts, &QpAttr::to_state(QpState::Err)),
            Ok(QpState::Err)
        );
        assert_eq!(
            check_transition(QpType::Rc, QpState::Err, &QpAttr::to_state(Reset)),
            Ok(Reset)
        );
    }

    #[test]
    fn errors_name_both_states() {
        let e = check_transition(QpType::Rc, Reset, &QpAttr::to_state(Rts)).unwrap_err();
        assert_eq!(
            e,
            TransitionError::InvalidTransition {
                qp_type: QpType::Rc,
                from: Reset,
                to: Rts
            }
        );
        let mut a = rtr_attr();
        a.min_rnr_timer = None;
        a.rq_psn = None;
        let e = check_transition(QpType::Rc, Init, &a).unwrap_err();
        assert_eq!(
            e,
            TransitionError::MissingAttributes {
                from: Init,
                to: Rtr,
                missing: AttrMask::RQ_PSN | AttrMask::MIN_RNR_TIMER
            }
        );
        extern crate std;
        use std::string::ToString;
        assert_eq!(e.to_string(), "INIT -> RTR requires RQ_PSN|MIN_RNR_TIMER");
    }

    #[test]
    fn unexpected_attributes_are_refused() {
        let mut a = init_attr();
        a.sq_psn = Some(Psn::new(1));
        assert_eq!(
            check_transition(QpType::Rc, Reset, &a),
            Err(TransitionError::UnexpectedAttributes {
                from: Reset,
                to: Init,
                unexpected: AttrMask::SQ_PSN
            })
        );
        // UD needs a Q_Key and does not take access flags.
        assert!(check_transition(QpType::Ud, Reset, &init_attr()).is_err());
        let ud = QpAttr {
            qp_state: Some(Init),
            pkey_index: Some(0),
            port_num: Some(1),
            qkey: Some(Qkey(0x1111_1111)),
            ..Default::default()
        };
        assert_eq!(check_transition(QpType::Ud, Reset, &ud), Ok(Init));
        assert_eq!(
            check_transition(QpType::Ud, Init, &QpAttr::to_state(Rtr)),
            Ok(Rtr)
        );
    }

    #[test]
    fn reset_to_err_and_rc_sqe_are_not_in_the_table() {
        assert!(check_transition(QpType::Rc, Reset, &QpAttr::to_state(QpState::Err)).is_err());
        assert!(check_transition(QpType::Rc, Sqe, &QpAttr::to_state(Rts)).is_err());
        assert!(check_transition(QpType::Uc, Sqe, &QpAttr::to_state(Rts)).is_ok());
    }

    #[test]
    fn cur_state_is_checked_and_only_optional_where_listed() {
        let mut a = rts_attr();
        a.cur_qp_state = Some(Init);
        assert_eq!(
            check_transition(QpType::Rc, Rtr, &a),
            Err(TransitionError::CurrentStateMismatch {
                actual: Rtr,
                claimed: Init
            })
        );
        a.cur_qp_state = Some(Rtr);
        assert_eq!(check_transition(QpType::Rc, Rtr, &a), Ok(Rts));
        let mut i = init_attr();
        i.cur_qp_state = Some(Reset);
        assert!(matches!(
            check_transition(QpType::Rc, Reset, &i),
            Err(TransitionError::UnexpectedAttributes { .. })
        ));
    }
}
