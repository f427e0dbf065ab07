//! "Did you mean": the known names closest to a mistyped one (edit distance, case-insensitive),
//! for unknown workloads, targets and steps.

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Up to three known names close to `name`, closest first: a name or one of its words
/// containing it, else within a third of its length in edits.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = Vec::new();
    for k in known {
        let kl = k.to_lowercase();
        // Compare with the whole name and with its id part (`12p` of `12p_RMSNorm`) and its
        // words, so `rmsnrom` finds `12p_RMSNorm`.
        let d = std::iter::once(kl.as_str())
            .chain(kl.split(['_', '/', '[', ']', '=']))
            .filter(|p| !p.is_empty())
            .map(|p| {
                if p.contains(&lower) {
                    0
                } else if p.len() > 2 && lower.contains(p) {
                    // A word of the name inside the query: the rest of the query is the miss.
                    lower.len() - p.len()
                } else {
                    distance(&lower, p)
                }
            })
            .min()
            .unwrap_or(usize::MAX);
        if d <= (lower.chars().count() / 3).max(1) {
            scored.push((d, k));
        }
    }
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, k)| k.to_string())
        .collect()
}

/// `; did you mean `a`, `b`?` or nothing.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let c = closest(name, known);
    if c.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            c.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: [&str; 4] = ["12p_RMSNorm", "8p_GEMM", "9p_Softmax", "13p_Cross_Entropy"];

    #[test]
    fn typos_find_the_workload() {
        assert_eq!(closest("rmsnrom", W), ["12p_RMSNorm"]);
        assert_eq!(closest("12P", W)[0], "12p_RMSNorm");
        assert_eq!(closest("softmx", W), ["9p_Softmax"]);
        assert_eq!(closest("cross_entropy", W), ["13p_Cross_Entropy"]);
        assert!(closest("zzzzzz", W).is_empty());
        assert_eq!(did_you_mean("zzzzzz", W), "");
        assert_eq!(did_you_mean("gemn", W), "; did you mean `8p_GEMM`?");
    }

    #[test]
    fn step_names() {
        let steps = ["baseline/compile", "baseline/profile", "tune/grid"];
        assert_eq!(closest("baseline/profle", steps)[0], "baseline/profile");
        assert_eq!(closest("basline", steps)[0], "baseline/compile");
    }
}
