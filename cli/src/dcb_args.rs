//! `roce perf`'s Data Center Bridging options: the port settings of ABI 1.5's
//! MODIFY_DCB that a host administrator gives (as `dcb pfc` / `dcb ets` / `ip link ...
//! egress-qos-map` would on Linux), and where the NIC's DCB MAC runs.

use anyhow::{bail, Context as _, Result};
use roce_core::dcb::{EtsConfig, PfcThresholds, Priorities, PRIORITIES};
use roce_core::engine::DcbConfig;

/// DCB options, set on both NICs through the ABI before the run.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DcbArgs {
    /// Priorities with PFC on, e.g. `0,3` (`none`: off on every priority). Both ports
    /// honour pause frames for them and send XOFF/XON for them.
    #[arg(long, value_name = "PRIOS")]
    pub pfc: Option<String>,
    /// Receive-buffer bytes a lossless priority may hold before the port sends XOFF
    /// (`24k` = 24 KiB; at most the buffer's 64 KiB; the rest is headroom).
    #[arg(long, value_name = "BYTES")]
    pub pfc_xoff: Option<String>,
    /// Bytes at or below which the port sends XON (below --pfc-xoff).
    #[arg(long, value_name = "BYTES")]
    pub pfc_xon: Option<String>,
    /// Pause time an XOFF asks for, in quanta of 512 bit times (1..=65535).
    #[arg(long, value_name = "QUANTA")]
    pub pfc_quanta: Option<u16>,
    /// The PCP each priority's VLAN-tagged frames carry, eight values for priorities
    /// 0..7 (Linux's egress-qos-map), e.g. `0,1,2,3,4,5,6,7`.
    #[arg(long, value_name = "PCPS")]
    pub prio_pcp: Option<String>,
    /// Transmission selection (802.1Qaz ETS, as `dcb ets ... tc-bw`): the bandwidth share
    /// in percent of each ETS class, e.g. `0:80,3:20`; the priorities not listed are
    /// strict (`strict`: every one). The shares must add up to 100.
    #[arg(long, value_name = "PRIO:PCT,..")]
    pub ets: Option<String>,
    /// Untagged frames' priority by DSCP (as `dcb app ... dscp-prio`), e.g. `24:3,46:5`;
    /// the DSCPs not listed keep theirs (`d >> 3` unless set before).
    #[arg(long, value_name = "DSCP:PRIO,..")]
    pub dscp_prio: Option<String>,
    /// Each NIC's DCB MAC is the Verilated RTL block (`roce_dcb_top`: its pause timers,
    /// per-priority queues, ETS and the receive buffer whose thresholds make the PFC
    /// frames), checked against the core's model every cycle. Without it the
    /// thresholds are set but no receive buffer fills: the NICs take frames at once.
    #[arg(long)]
    pub rtl_dcb: bool,
    /// With --rtl-dcb: the server takes frames out of its receive buffer at this rate
    /// (`40g`), a slow receiver whose buffer crosses the thresholds.
    #[arg(long, value_name = "RATE", requires = "rtl_dcb")]
    pub drain: Option<String>,
}

impl DcbArgs {
    /// Whether any port setting is given (otherwise the NICs keep their defaults).
    pub fn sets_port(&self) -> bool {
        self.pfc.is_some()
            || self.pfc_xoff.is_some()
            || self.pfc_xon.is_some()
            || self.pfc_quanta.is_some()
            || self.prio_pcp.is_some()
            || self.ets.is_some()
            || self.dscp_prio.is_some()
    }

    /// `base` (the port's settings as queried) with the options applied. Only the
    /// syntax is checked here; the NIC refuses what breaks its rules (XON at or above
    /// XOFF, XOFF beyond the buffer, quanta 0, a PCP above 7, ETS shares not adding up
    /// to 100) and says which.
    pub fn apply(&self, base: DcbConfig) -> Result<DcbConfig> {
        let mut dcb = base;
        if let Some(s) = &self.pfc {
            dcb.pfc_enable = parse_priorities(s).context("--pfc")?.0;
        }
        let t: &mut PfcThresholds = &mut dcb.pfc_thresholds;
        if let Some(s) = &self.pfc_xoff {
            t.xoff = parse_bytes(s).context("--pfc-xoff")?;
        }
        if let Some(s) = &self.pfc_xon {
            t.xon = parse_bytes(s).context("--pfc-xon")?;
        }
        if let Some(q) = self.pfc_quanta {
            t.quanta = q;
        }
        if let Some(s) = &self.prio_pcp {
            dcb.prio_pcp = parse_pcps(s).context("--prio-pcp")?;
        }
        if let Some(s) = &self.ets {
            dcb.ets = parse_ets(s).context("--ets")?;
        }
        if let Some(s) = &self.dscp_prio {
            for (dscp, prio) in parse_pairs(s, 63).context("--dscp-prio")? {
                dcb.map.dscp[usize::from(dscp)] = prio;
            }
        }
        Ok(dcb)
    }
}

/// `0,3` -> priorities 0 and 3; `none` -> none.
pub fn parse_priorities(s: &str) -> Result<Priorities> {
    if s.trim() == "none" {
        return Ok(Priorities::NONE);
    }
    s.split(',').try_fold(Priorities::NONE, |m, p| {
        let p: u8 = p
            .trim()
            .parse()
            .with_context(|| format!("{p:?} is not a priority (0..7)"))?;
        if usize::from(p) >= PRIORITIES {
            bail!("priority {p} is above 7");
        }
        Ok(m.with(p))
    })
}

/// `0:80,3:20` -> ETS classes 0 (80 %) and 3 (20 %), the others strict; `strict` -> all
/// strict.
pub fn parse_ets(s: &str) -> Result<EtsConfig> {
    let mut ets = EtsConfig::STRICT;
    if s.trim() == "strict" {
        return Ok(ets);
    }
    for (prio, share) in parse_pairs(s, 7)? {
        ets.strict = ets.strict.without(Priorities::only(prio));
        ets.bw[usize::from(prio)] = share;
    }
    Ok(ets)
}

/// `a:b,c:d` -> the pairs, each key at most `max_key` (the values, a priority or a
/// percent, are the NIC's to check).
fn parse_pairs(s: &str, max_key: u8) -> Result<Vec<(u8, u8)>> {
    s.split(',')
        .map(|pair| {
            let (k, v) = pair
                .split_once(':')
                .with_context(|| format!("{pair:?}: give KEY:VALUE"))?;
            let num = |x: &str| {
                x.trim()
                    .parse::<u8>()
                    .with_context(|| format!("{x:?} is not a number"))
            };
            let (k, v) = (num(k)?, num(v)?);
            if k > max_key {
                bail!("{k} is above {max_key}");
            }
            Ok((k, v))
        })
        .collect()
}

/// `24576`, `24k` or `24KiB` -> bytes (k is 1024).
pub fn parse_bytes(s: &str) -> Result<u32> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = match t.strip_suffix("kib").or_else(|| t.strip_suffix('k')) {
        Some(n) => (n, 1024),
        None => (t.as_str(), 1),
    };
    let v: u32 = num
        .trim()
        .parse()
        .with_context(|| format!("{s:?} is not a byte count (try 24k)"))?;
    v.checked_mul(mult)
        .with_context(|| format!("{s:?} is too large"))
}

/// Eight comma-separated PCPs, for priorities 0..7 in order (values checked by the NIC).
pub fn parse_pcps(s: &str) -> Result<[u8; PRIORITIES]> {
    let v = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u8>()
                .with_context(|| format!("{p:?} is not a PCP"))
        })
        .collect::<Result<Vec<u8>>>()?;
    v.try_into()
        .map_err(|v: Vec<u8>| anyhow::anyhow!("{} values: give one PCP per priority, 8", v.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_the_port_settings_and_leave_the_rest() {
        let a = DcbArgs {
            pfc: Some("0, 3".into()),
            pfc_xoff: Some("24k".into()),
            pfc_xon: Some("16384".into()),
            pfc_quanta: Some(8000),
            prio_pcp: Some("1,0,2,3,4,5,6,7".into()),
            ..DcbArgs::default()
        };
        assert!(a.sets_port());
        let d = a.apply(DcbConfig::OFF).unwrap();
        assert_eq!(d.pfc_enable, 0b1001);
        assert_eq!(
            d.pfc_thresholds,
            PfcThresholds {
                xoff: 24_576,
                xon: 16_384,
                quanta: 8000
            }
        );
        assert_eq!(d.prio_pcp, [1, 0, 2, 3, 4, 5, 6, 7]);
        assert_eq!((d.map, d.ets), (DcbConfig::OFF.map, DcbConfig::OFF.ets));
        assert!(!DcbArgs::default().sets_port());
        assert_eq!(
            DcbArgs::default().apply(DcbConfig::OFF).unwrap(),
            DcbConfig::OFF
        );
    }

    #[test]
    fn ets_and_dscp_options_are_the_dcb_tools_settings() {
        let a = DcbArgs {
            ets: Some("0:80, 3:20".into()),
            dscp_prio: Some("46:5,24:3".into()),
            ..DcbArgs::default()
        };
        assert!(a.sets_port());
        let d = a.apply(DcbConfig::OFF).unwrap();
        assert_eq!(d.ets.strict, Priorities::ALL.without(Priorities(0b1001)));
        assert_eq!(d.ets.bw, [80, 0, 0, 20, 0, 0, 0, 0]);
        // What the NIC checks (802.1Qaz's rules) holds, and the map changed only there.
        assert_eq!(d.validate_rules(), Ok(()));
        assert_eq!((d.map.dscp[46], d.map.dscp[24], d.map.dscp[47]), (5, 3, 5));
        assert_eq!(d.map.dscp[45], DcbConfig::OFF.map.dscp[45]);
        let strict = DcbArgs {
            ets: Some("strict".into()),
            ..DcbArgs::default()
        };
        assert_eq!(strict.apply(DcbConfig::OFF).unwrap().ets, EtsConfig::STRICT);
        // Shares that do not add up are the NIC's to refuse.
        let off = DcbArgs {
            ets: Some("0:80".into()),
            ..DcbArgs::default()
        };
        assert!(off.apply(DcbConfig::OFF).unwrap().validate_rules().is_err());
    }

    #[test]
    fn malformed_options_are_refused_with_the_option_named() {
        let bad = |a: DcbArgs| format!("{:#}", a.apply(DcbConfig::OFF).unwrap_err());
        let e = bad(DcbArgs {
            pfc: Some("0,8".into()),
            ..DcbArgs::default()
        });
        assert!(e.contains("--pfc") && e.contains("priority 8"), "{e}");
        let e = bad(DcbArgs {
            pfc_xoff: Some("lots".into()),
            ..DcbArgs::default()
        });
        assert!(e.contains("--pfc-xoff"), "{e}");
        let e = bad(DcbArgs {
            prio_pcp: Some("0,1,2".into()),
            ..DcbArgs::default()
        });
        assert!(e.contains("--prio-pcp") && e.contains("3 values"), "{e}");
        let e = bad(DcbArgs {
            ets: Some("0:80,9:20".into()),
            ..DcbArgs::default()
        });
        assert!(e.contains("--ets") && e.contains("9 is above 7"), "{e}");
        let e = bad(DcbArgs {
            dscp_prio: Some("24=3".into()),
            ..DcbArgs::default()
        });
        assert!(e.contains("--dscp-prio") && e.contains("KEY:VALUE"), "{e}");
        assert!(parse_bytes("5000000k").is_err());
        assert_eq!(parse_priorities("none").unwrap(), Priorities::NONE);
    }
}
