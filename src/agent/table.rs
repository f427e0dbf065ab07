//! The summary table `jb agent` prints: outcomes per benchmark, the best speedup, the method's
//! geomean (floor 1x), mean, correct count and the fast1@N curve.

use std::fmt::Write;

use super::accounting::{BenchmarkSummary, MethodSummary, Outcome};

const SHORT: [(&str, &str); 9] = [
    ("api_error", "api_err"),
    ("no_code", "no_code"),
    ("compile_error", "compile"),
    ("runtime_error", "runtime"),
    ("incorrect", "wrong"),
    ("eval_error", "eval_err"),
    ("correct_slower", "slower"),
    ("correct_faster", "faster"),
    ("correct_unmeasured", "untimed"),
];

fn speedup(s: Option<f64>) -> String {
    s.map(|x| format!("{x:.3}x")).unwrap_or_else(|| "-".into())
}

/// Points of the fast1@N curve worth printing: every N up to 12, else about a dozen.
pub fn curve_points(len: usize) -> Vec<usize> {
    if len <= 12 {
        return (1..=len).collect();
    }
    let mut pts: Vec<usize> = (0..12).map(|i| 1 + i * (len - 1) / 11).collect();
    pts.dedup();
    pts
}

pub fn render(title: &str, benches: &[BenchmarkSummary], m: &MethodSummary) -> String {
    debug_assert_eq!(SHORT.len(), Outcome::ALL.len());
    let name_w = benches
        .iter()
        .map(|b| b.workload.len())
        .chain([9])
        .max()
        .unwrap_or(9);
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let _ = write!(s, "{:<name_w$} {:>7}", "benchmark", "samples");
    for (_, short) in SHORT {
        let _ = write!(s, " {short:>8}");
    }
    let _ = writeln!(s, " {:>9}", "best");
    let row = |s: &mut String,
               name: &str,
               n: usize,
               o: &std::collections::BTreeMap<String, usize>,
               best: String| {
        let _ = write!(s, "{name:<name_w$} {n:>7}");
        for (long, _) in SHORT {
            let _ = write!(s, " {:>8}", o.get(long).copied().unwrap_or(0));
        }
        let _ = writeln!(s, " {best:>9}");
    };
    for b in benches {
        row(
            &mut s,
            &b.workload,
            b.samples,
            &b.outcomes,
            speedup(b.best_speedup),
        );
    }
    row(&mut s, "total", m.samples, &m.outcomes, String::new());
    let _ = writeln!(
        s,
        "geomean speedup (floor 1x) {:.3}x   mean {:.3}x   correct {}/{}   faster than XLA {}/{}",
        m.geomean_speedup, m.mean_speedup, m.correct, m.benchmarks, m.faster, m.benchmarks
    );
    let unmeasured = m.outcomes.get("correct_unmeasured").copied().unwrap_or(0);
    if unmeasured > 0 {
        let _ = writeln!(
            s,
            "untimed: {unmeasured} correct sample(s) could only be timed in their own process (trust sandboxed/unsandboxed): no speedup counts for them"
        );
    }
    if !m.fast1.is_empty() {
        let pts: Vec<String> = curve_points(m.fast1.len())
            .into_iter()
            .map(|n| format!("@{n} {:.0}%", 100.0 * m.fast1[n - 1]))
            .collect();
        let _ = writeln!(s, "fast1: {}", pts.join("  "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::accounting::summarize;
    use Outcome::*;

    #[test]
    fn table_has_rows_totals_and_curve() {
        let b = vec![
            BenchmarkSummary::new("12p_RMSNorm", &[(NoCode, None), (CorrectFaster, Some(1.5))]),
            BenchmarkSummary::new("8p_GEMM", &[(Incorrect, None), (CorrectSlower, Some(0.7))]),
        ];
        let m = summarize(&b);
        let t = render("best-of-n", &b, &m);
        assert!(t.starts_with("best-of-n\nbenchmark"), "{t}");
        assert!(t.contains("12p_RMSNorm       2"), "{t}");
        assert!(t.contains("1.500x") && t.contains("0.700x"));
        assert!(t.contains(
            "geomean speedup (floor 1x) 1.225x   mean 1.250x   correct 2/2   faster than XLA 1/2"
        ));
        assert!(t.contains("fast1: @1 0%  @2 50%"));
        assert!(!t.contains("untimed:"));
        let b = vec![BenchmarkSummary::new(
            "12p_RMSNorm",
            &[(CorrectUnmeasured, Some(7.3))],
        )];
        let t = render("best-of-n", &b, &summarize(&b));
        assert!(t.contains("untimed: 1 correct sample(s)"), "{t}");
        assert!(
            t.contains("faster than XLA 0/1") && !t.contains("7.300x"),
            "{t}"
        );
    }

    #[test]
    fn curve_points_are_bounded() {
        assert_eq!(curve_points(3), [1, 2, 3]);
        let p = curve_points(144);
        assert_eq!(p.len(), 12);
        assert_eq!((p[0], p[11]), (1, 144));
    }
}
