//! Step statuses and what they mean for the build.

/// Statuses that count as a failed step (exit code 1).
pub fn is_failure(status: &str) -> bool {
    matches!(
        status,
        "failed"
            | "error"
            | "compile_error"
            | "runtime_error"
            | "incorrect"
            | "rejected"
            | "timeout"
            | "crashed"
    )
}

/// Statuses after which dependants do not run the same work: they inherit a status instead.
pub fn blocks_dependants(status: &str) -> bool {
    is_failure(status) || matches!(status, "unsupported" | "invalid" | "skipped" | "no_code")
}

/// The status a dependant gets when an upstream step blocked it.
pub fn inherited(status: &str) -> &'static str {
    match status {
        "unsupported" => "unsupported",
        "invalid" => "invalid",
        _ => "skipped",
    }
}
