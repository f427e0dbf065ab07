//! Paired speedups of a profile result (`speedup_vs_xla`, `speedup_vs_handtuned`: median of
//! per-round ratios with a bootstrap interval, from python/jb/ops/profile.py) and their pooling
//! over re-measurements: each fresh measurement's per-round ratios are kept in the run
//! database's `samples` table under `<profile key>#ratio:<role>` (one run id per measurement),
//! and the pooled speedup is the median of every round so far with the order-statistic
//! interval of [`stats::median_interval`], widened to span the measurements' own medians
//! (drift between measurements; see [`pooled`]).

use serde::Serialize;
use serde_json::Value;

use crate::cache::db::Db;
use crate::stats::{self, Speedup};

/// The roles a candidate is paired with, and the result field of each one's speedup.
pub const ROLES: [(&str, &str); 2] = [
    ("xla", "speedup_vs_xla"),
    ("handtuned", "speedup_vs_handtuned"),
];

/// The `samples` key under which a role's per-round ratios accumulate.
pub fn ratio_key(profile_key: &str, role: &str) -> String {
    format!("{profile_key}#ratio:{role}")
}

/// One measurement's per-round ratios for a role (`paired.ratios.<role>`).
pub fn ratios(result: &Value, role: &str) -> Vec<f64> {
    result
        .get("paired")
        .and_then(|p| p.get("ratios"))
        .and_then(|r| r.get(role))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Keep a fresh measurement's rounds (call once per measurement, with its run id).
pub fn record_rounds(
    db: &Db,
    profile_key: &str,
    run_id: i64,
    result: &Value,
) -> crate::error::Result<()> {
    for (role, _) in ROLES {
        let r = ratios(result, role);
        if !r.is_empty() {
            db.add_samples(&ratio_key(profile_key, role), run_id, &r, &[])?;
        }
    }
    Ok(())
}

/// A speedup pooled over every measurement of one key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pooled {
    pub point: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub rounds: usize,
    pub measurements: usize,
}

/// The pooled speedup of every measurement of one key: the median of all rounds, with an
/// interval that holds drift between measurements too. Rounds of one measurement share its
/// machine state, so the order-statistic interval of all rounds as if independent is too narrow
/// when measurements disagree (measured on the 2-core machine: each run's own interval held the
/// five runs' median 77 % of the time, not 95 %). The interval is therefore widened to the
/// order-statistic interval of the measurements' own medians ([min, max] below six runs).
pub fn pooled(db: &Db, profile_key: &str, role: &str) -> crate::error::Result<Option<Pooled>> {
    let all = db.samples(&ratio_key(profile_key, role))?;
    let mut by_run: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for (run, v) in &all {
        by_run.entry(*run).or_default().push(*v);
    }
    let values: Vec<f64> = all.iter().map(|(_, v)| *v).collect();
    let run_medians: Vec<f64> = by_run.values().filter_map(|v| stats::median(v)).collect();
    let Some((point, lo, hi)) = stats::median_interval(&values) else {
        return Ok(None);
    };
    let (lo, hi) = match stats::median_interval(&run_medians) {
        Some((_, run_lo, run_hi)) if run_medians.len() > 1 => (lo.min(run_lo), hi.max(run_hi)),
        _ => (lo, hi),
    };
    Ok(Some(Pooled {
        point,
        ci_low: lo,
        ci_high: hi,
        rounds: values.len(),
        measurements: by_run.len(),
    }))
}

/// The speedup for `jb eval --json`: pooled over measurements where there are several, else
/// this measurement's; `None` where the result was not measured paired with `role`.
pub fn best_estimate(result: &Value, role: &str, pooled: Option<&Pooled>) -> Option<Speedup> {
    let field = ROLES.iter().find(|(r, _)| *r == role)?.1;
    let single = result.get(field).and_then(Speedup::from_json)?;
    Some(match pooled {
        Some(p) if p.measurements > 1 => Speedup {
            point: p.point,
            ci_low: Some(p.ci_low),
            ci_high: Some(p.ci_high),
        },
        _ => single,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rounds_pool_across_measurements() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("jb.sqlite")).unwrap();
        let r1 = json!({"speedup_vs_xla": {"point": 2.0, "ci_low": 1.9, "ci_high": 2.1},
                        "paired": {"ratios": {"xla": [1.9, 2.0, 2.1]}}});
        let r2 = json!({"speedup_vs_xla": {"point": 2.2, "ci_low": 2.1, "ci_high": 2.3},
                        "paired": {"ratios": {"xla": [2.1, 2.2, 2.3]}}});
        record_rounds(&db, "k", 1, &r1).unwrap();
        let one = pooled(&db, "k", "xla").unwrap().unwrap();
        assert_eq!(one.measurements, 1);
        // One measurement: its own bootstrap interval stands.
        assert_eq!(
            best_estimate(&r1, "xla", Some(&one)).unwrap().ci_low,
            Some(1.9)
        );
        record_rounds(&db, "k", 2, &r2).unwrap();
        let two = pooled(&db, "k", "xla").unwrap().unwrap();
        assert_eq!((two.rounds, two.measurements), (6, 2));
        assert!((two.point - 2.1).abs() < 1e-12);
        let best = best_estimate(&r2, "xla", Some(&two)).unwrap();
        assert_eq!(best.interval(), Some((1.9, 2.3)));
        assert!(pooled(&db, "k", "handtuned").unwrap().is_none());
        assert!(best_estimate(&json!({}), "xla", None).is_none());
    }

    #[test]
    fn measurements_that_disagree_widen_the_pooled_interval() {
        // Three measurements, each tight (20 rounds within 2 %), around 1.0, 1.1 and 1.2: as
        // 60 independent rounds the median's interval would lie inside the middle run (1.10-1.12).
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("jb.sqlite")).unwrap();
        for (run, centre) in [(1, 1.0), (2, 1.1), (3, 1.2)] {
            let rounds: Vec<f64> = (0..20).map(|i| centre + 0.001 * f64::from(i)).collect();
            let r = json!({"paired": {"ratios": {"xla": rounds}}});
            record_rounds(&db, "k", run, &r).unwrap();
        }
        let all: Vec<f64> = db
            .samples("k#ratio:xla")
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let (_, iid_lo, iid_hi) = stats::median_interval(&all).unwrap();
        assert!(iid_lo >= 1.1 && iid_hi < 1.12, "{iid_lo} {iid_hi}");
        let p = pooled(&db, "k", "xla").unwrap().unwrap();
        assert_eq!((p.rounds, p.measurements), (60, 3));
        assert!(p.point >= 1.1 && p.point < 1.12);
        // The interval spans the three measurements' own medians.
        assert!(
            (p.ci_low - 1.0095).abs() < 1e-9 && (p.ci_high - 1.2095).abs() < 1e-9,
            "{p:?}"
        );
    }
}

/// A paired baseline that ran this much slower beside the candidate than in its own profile step
/// makes the paired speedup suspect: a candidate can slow its neighbour (caches, memory, the thread
/// pool) and so inflate its own ratio.
pub const SLOWED: f64 = 1.25;

/// The median of `role`'s program in a paired profile result.
pub fn pair_median(result: &Value, role: &str) -> Option<f64> {
    result
        .pointer("/paired/programs")?
        .as_array()?
        .iter()
        .find(|p| p.get("role").and_then(Value::as_str) == Some(role))?
        .get("median_ms")?
        .as_f64()
}

/// How a baseline fared beside the candidate against alone.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Slowed {
    pub paired_ms: f64,
    pub alone_ms: f64,
    /// `paired_ms / alone_ms`.
    pub ratio: f64,
    /// The speedup reported instead: the smaller of the paired one and the baseline alone over
    /// the candidate's paired time.
    pub capped: f64,
}

/// The guard: `Some` when the baseline ran more than [`SLOWED`] times slower in the pair than in
/// its own step, with the speedup capped at the unpaired ratio (never raised).
pub fn slowed(
    point: f64,
    paired_base_ms: Option<f64>,
    alone_base_ms: Option<f64>,
    candidate_ms: Option<f64>,
) -> Option<Slowed> {
    let (p, a, c) = (paired_base_ms?, alone_base_ms?, candidate_ms?);
    if !(p > 0.0 && a > 0.0 && c > 0.0) || p <= SLOWED * a {
        return None;
    }
    Some(Slowed {
        paired_ms: p,
        alone_ms: a,
        ratio: p / a,
        capped: point.min(a / c),
    })
}

#[cfg(test)]
mod slowed_tests {
    use super::*;

    #[test]
    fn a_baseline_slowed_in_the_pair_caps_the_speedup() {
        // XLA 4.4 ms alone, 8.8 ms beside the candidate (20 ms): paired 0.44x becomes 0.22x.
        let s = slowed(0.44, Some(8.8), Some(4.4), Some(20.0)).unwrap();
        assert!((s.ratio - 2.0).abs() < 1e-9 && (s.capped - 0.22).abs() < 1e-9);
        // Within the allowance, or missing figures: no guard.
        assert_eq!(slowed(0.44, Some(5.0), Some(4.4), Some(20.0)), None);
        assert_eq!(slowed(0.44, None, Some(4.4), Some(20.0)), None);
        // Never raises a speedup.
        let s = slowed(0.1, Some(9.0), Some(4.4), Some(20.0)).unwrap();
        assert_eq!(s.capped, 0.1);
    }
}
