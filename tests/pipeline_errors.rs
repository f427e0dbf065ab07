//! Malformed pipelines: exit code 2, a one-line message naming file, line and column, and
//! nothing run or written. The whole stderr of each case is snapshotted
//! (`tests/snapshots/pipeline_errors__*.snap`).

mod common;

use common::TestProject;

fn check(name: &str, yaml: &str, line: usize, needle: &str) {
    check_bytes(name, yaml.as_bytes(), line, needle)
}

fn check_bytes(name: &str, yaml: &[u8], line: usize, needle: &str) {
    let p = TestProject::new();
    p.write("src/a.txt", "a\n");
    std::fs::create_dir_all(p.path().join("pipelines")).unwrap();
    std::fs::write(p.path().join("pipelines/bad.yaml"), yaml).unwrap();
    let r = p.jb(&["build"]);
    insta::assert_snapshot!(name.replace(' ', "_"), r.stderr);
    assert_eq!(
        r.code, 2,
        "{name}: expected exit 2, got {}\nstderr: {}",
        r.code, r.stderr
    );
    let expected = format!("pipelines/bad.yaml:{line}:");
    assert!(
        r.stderr.contains(&expected),
        "{name}: expected `{expected}` in: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains(needle),
        "{name}: expected `{needle}` in: {}",
        r.stderr
    );
    assert_eq!(
        r.stderr.trim().lines().count(),
        1,
        "{name}: message is one line: {}",
        r.stderr
    );
    assert!(
        !p.path().join("cache").exists(),
        "{name}: nothing may be written"
    );
    assert!(!p.path().join("out").exists(), "{name}: nothing may run");
}

const OK_STEP: &str = "  ok:\n    kind: command\n    outputs: [out/ok.txt]\n    run: mkdir -p out && echo ok > out/ok.txt\n";

#[test]
fn yaml_syntax_error() {
    check(
        "syntax",
        &format!("steps:\n{OK_STEP}  b:\n    kind: [command\n"),
        7,
        "",
    );
}

#[test]
fn unknown_key() {
    check(
        "unknown key",
        &format!("steps:\n{OK_STEP}  b:\n    kind: command\n    rn: echo\n"),
        8,
        "unknown field `rn`",
    );
}

#[test]
fn unknown_top_level_key() {
    check(
        "unknown top key",
        &format!("stepz: 1\nsteps:\n{OK_STEP}"),
        1,
        "unknown field `stepz`",
    );
}

#[test]
fn unknown_step_kind() {
    check(
        "unknown kind",
        &format!("steps:\n{OK_STEP}  b:\n    kind: compil\n"),
        7,
        "unknown variant `compil`",
    );
}

#[test]
fn dependency_cycle() {
    let yaml = "steps:\n  a:\n    kind: command\n    needs: [b]\n    run: echo a\n  b:\n    kind: command\n    needs: [a]\n    run: echo b\n";
    check("cycle", yaml, 8, "dependency cycle");
}

#[test]
fn missing_step_reference() {
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    needs: [ok, nope]\n    run: echo b\n"
    );
    check("missing ref", &yaml, 8, "`bad/nope`, which does not exist");
}

#[test]
fn glob_matches_nothing() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach:\n      - match: \"src/{{x}}.nothing\"\n    run: echo {{x}}\n");
    check("empty glob", &yaml, 8, "matches nothing");
}

#[test]
fn input_glob_matches_nothing() {
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    inputs: [\"src/*.py\"]\n    run: echo\n"
    );
    check("empty input glob", &yaml, 8, "matches no file");
}

#[test]
fn wrongly_typed_value() {
    let yaml =
        format!("steps:\n{OK_STEP}  b:\n    kind: command\n    timeout: soon\n    run: echo\n");
    check("type", &yaml, 8, "invalid type");
}

#[test]
fn unknown_variable() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    run: echo {{nope}}\n");
    check("unknown var", &yaml, 8, "unknown variable `{nope}`");
}

#[test]
fn command_without_run() {
    check(
        "no run",
        &format!("steps:\n{OK_STEP}  b:\n    kind: command\n"),
        6,
        "needs `run`",
    );
}

#[test]
fn ambiguous_foreach_entry() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach:\n      - match: \"src/{{x}}.txt\"\n        values: {{y: [1]}}\n    run: echo\n");
    check("foreach", &yaml, 8, "only one of");
}

#[test]
fn not_utf8() {
    let mut yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    run: echo ").into_bytes();
    yaml.extend_from_slice(b"caf\xe9\n");
    check_bytes("not utf8", &yaml, 8, "not UTF-8");
}

#[test]
fn negative_timeout() {
    let yaml =
        format!("steps:\n{OK_STEP}  b:\n    kind: command\n    timeout: -1\n    run: echo\n");
    check("timeout", &yaml, 8, "positive");
}

#[test]
fn unknown_target_is_usage_error() {
    // Two instances that cannot be told apart (no variable distinguishes them) are an error.
    let p = TestProject::new();
    p.write("src/a.txt", "a");
    p.write(
        "pipelines/ok.yaml",
        OK_STEP.replace("  ok:", "steps:\n  ok:").as_str(),
    );
    let r = p.jb(&["build", "nosuchtarget"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("matches no step"), "{}", r.stderr);
}
