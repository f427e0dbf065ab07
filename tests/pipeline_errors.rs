//! Malformed pipelines: exit code 2, a one-line message naming file, line and column, and
//! nothing run or written. The whole stderr of each case is snapshotted
//! (`tests/snapshots/pipeline_errors__*.snap`), and the line and column are checked to point at
//! the offending text itself (not at the key above it).

mod common;

use common::TestProject;

/// The bad pipeline at `(line, col)` must start with `token`; stderr must name that place.
fn check(name: &str, yaml: &str, at: (usize, usize), token: &str, needle: &str) {
    check_bytes(name, yaml.as_bytes(), at, token.as_bytes(), needle)
}

fn check_bytes(name: &str, yaml: &[u8], at: (usize, usize), token: &[u8], needle: &str) {
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
    let (line, col) = at;
    let expected = format!("pipelines/bad.yaml:{line}:{col}: ");
    assert!(
        r.stderr.contains(&expected),
        "{name}: expected `{expected}` in: {}",
        r.stderr
    );
    let text_at = text_at(yaml, line, col);
    assert!(
        text_at.starts_with(token),
        "{name}: {line}:{col} is at {:?}, not at {:?}",
        String::from_utf8_lossy(text_at),
        String::from_utf8_lossy(token)
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

/// The bytes of `text` from 1-based `line` and `col` (columns count characters; a byte that is
/// not UTF-8 counts as one).
fn text_at(text: &[u8], line: usize, col: usize) -> &[u8] {
    let start = text
        .split_inclusive(|&b| b == b'\n')
        .take(line - 1)
        .map(<[u8]>::len)
        .sum::<usize>();
    let rest = &text[start.min(text.len())..];
    let mut chars = 0;
    let mut i = 0;
    while chars + 1 < col && i < rest.len() {
        // Skip one character: a lead byte and its continuation bytes.
        i += 1;
        while i < rest.len() && (rest[i] & 0xc0) == 0x80 {
            i += 1;
        }
        chars += 1;
    }
    &rest[i..]
}

const OK_STEP: &str = "  ok:\n    kind: command\n    outputs: [out/ok.txt]\n    run: mkdir -p out && echo ok > out/ok.txt\n";

#[test]
fn yaml_syntax_error() {
    // An unclosed flow sequence: at its `[`, not at the end of the file where it is noticed.
    check(
        "syntax",
        &format!("steps:\n{OK_STEP}  b:\n    kind: [command\n"),
        (7, 11),
        "[command",
        "never closed",
    );
}

#[test]
fn unknown_key() {
    check(
        "unknown key",
        &format!("steps:\n{OK_STEP}  b:\n    kind: command\n    rn: echo\n"),
        (8, 5),
        "rn:",
        "unknown field `rn`",
    );
}

#[test]
fn unknown_top_level_key() {
    check(
        "unknown top key",
        &format!("stepz: 1\nsteps:\n{OK_STEP}"),
        (1, 1),
        "stepz",
        "unknown field `stepz`",
    );
}

#[test]
fn unknown_step_kind() {
    check(
        "unknown kind",
        &format!("steps:\n{OK_STEP}  b:\n    kind: compil\n"),
        (7, 11),
        "compil",
        "unknown variant `compil`",
    );
}

#[test]
fn unknown_cache_policy() {
    check(
        "unknown cache policy",
        &format!("steps:\n{OK_STEP}  b:\n    kind: command\n    cache: sometimes\n    run: echo\n"),
        (8, 12),
        "sometimes",
        "unknown variant `sometimes`",
    );
}

#[test]
fn missing_field() {
    // At the step that lacks it (serde would point past its last entry).
    check(
        "missing field",
        &format!("steps:\n{OK_STEP}  b:\n    run: echo\n"),
        (6, 3),
        "b:",
        "missing field `kind`",
    );
}

#[test]
fn dependency_cycle() {
    // At the `needs` entry that closes the cycle.
    let yaml = "steps:\n  a:\n    kind: command\n    needs: [b]\n    run: echo a\n  b:\n    kind: command\n    needs: [a]\n    run: echo b\n";
    check("cycle", yaml, (8, 13), "a]", "dependency cycle");
}

#[test]
fn missing_step_reference() {
    // A flow sequence: at the entry that names no step, not at `needs`.
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    needs: [ok, nope]\n    run: echo b\n"
    );
    check(
        "missing ref",
        &yaml,
        (8, 17),
        "nope]",
        "`bad/nope`, which does not exist",
    );
}

#[test]
fn missing_step_reference_in_a_block_list() {
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    needs:\n      - ok\n      # - gone\n      - nope\n    run: echo b\n"
    );
    check(
        "missing ref block",
        &yaml,
        (11, 9),
        "nope",
        "`bad/nope`, which does not exist",
    );
}

#[test]
fn glob_matches_nothing() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach:\n      - match: \"src/{{x}}.nothing\"\n    run: echo {{x}}\n");
    check(
        "empty glob",
        &yaml,
        (9, 16),
        "\"src/{x}.nothing\"",
        "matches nothing",
    );
}

#[test]
fn glob_matches_nothing_in_a_later_list_item() {
    // The second `foreach` entry, in a flow mapping.
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach:\n      - values: {{y: [1]}}\n      - {{match: \"src/{{x}}.nothing\"}}\n    run: echo {{x}}\n");
    check(
        "empty glob second item",
        &yaml,
        (10, 17),
        "\"src/{x}.nothing\"",
        "matches nothing",
    );
}

#[test]
fn input_glob_matches_nothing() {
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    inputs: [src/a.txt, \"src/*.py\"]\n    run: echo\n"
    );
    check(
        "empty input glob",
        &yaml,
        (8, 25),
        "\"src/*.py\"",
        "matches no file",
    );
}

#[test]
fn input_neither_present_nor_produced() {
    let yaml = format!(
        "steps:\n{OK_STEP}  b:\n    kind: command\n    inputs:\n      - out/ok.txt\n      - out/gone.txt\n    run: echo\n"
    );
    check(
        "input not produced",
        &yaml,
        (10, 9),
        "out/gone.txt",
        "no step produces it",
    );
}

#[test]
fn wrongly_typed_value() {
    let yaml =
        format!("steps:\n{OK_STEP}  b:\n    kind: command\n    timeout: soon\n    run: echo\n");
    check("type", &yaml, (8, 14), "soon", "invalid type");
}

#[test]
fn unknown_variable() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    run: echo {{nope}}\n");
    check(
        "unknown var",
        &yaml,
        (8, 15),
        "{nope}",
        "unknown variable `{nope}`",
    );
}

#[test]
fn unknown_variable_deep_in_params() {
    // At the placeholder in the parameter that cannot be filled, inside nested flow mappings.
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    params: {{a: 1, b: {{c: [x, \"{{nope}}\"]}}}}\n    run: echo\n");
    check(
        "unknown var in params",
        &yaml,
        (8, 32),
        "{nope}\"",
        "unknown variable `{nope}`",
    );
}

#[test]
fn command_without_run() {
    check(
        "no run",
        &format!("steps:\n{OK_STEP}  b:\n    kind: command\n"),
        (6, 3),
        "b:",
        "needs `run`",
    );
}

#[test]
fn run_on_another_kind() {
    check(
        "run not for kind",
        &format!("steps:\n{OK_STEP}  b:\n    kind: compile\n    run: echo\n"),
        (8, 5),
        "run:",
        "`run` is only for `command` steps",
    );
}

#[test]
fn ambiguous_foreach_entry() {
    // At the entry (the list item), not at `foreach`.
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach:\n      - match: \"src/{{x}}.txt\"\n        values: {{y: [1]}}\n    run: echo\n");
    check("foreach", &yaml, (9, 9), "match:", "only one of");
}

#[test]
fn not_utf8() {
    let mut yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    run: echo ").into_bytes();
    yaml.extend_from_slice(b"caf\xe9\n");
    check_bytes("not utf8", &yaml, (8, 18), b"\xe9", "not UTF-8");
}

#[test]
fn negative_timeout() {
    // In a flow mapping: at the value.
    let yaml = format!("steps:\n{OK_STEP}  b: {{kind: command, timeout: -1, run: echo}}\n");
    check("timeout", &yaml, (6, 31), "-1", "positive");
}

#[test]
fn duplicate_key() {
    // At the second `b`: serde would keep the last one silently.
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    run: echo 1\n  b:\n    kind: command\n    run: echo 2\n");
    check("duplicate key", &yaml, (9, 3), "b:", "duplicate key `b`");
}

#[test]
fn tab_indentation() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n\tkind: command\n");
    check("tab", &yaml, (7, 1), "\tkind", "tabs");
}

#[test]
fn quoted_step_name() {
    // A quoted key holding a colon: at the key, quotes included.
    let yaml = format!("steps:\n{OK_STEP}  \"b:c\":\n    kind: command\n    run: echo\n");
    check(
        "quoted key",
        &yaml,
        (6, 3),
        "\"b:c\"",
        "invalid step name `b:c`",
    );
}

#[test]
fn anchored_needs() {
    // Through an alias: at the entry of the anchored list, where the bad name is written.
    let yaml = "steps:\n  ok:\n    kind: command\n    params: {deps: &deps [ok, nope]}\n    run: echo\n  b:\n    kind: command\n    needs: *deps\n    run: echo\n";
    check(
        "anchored needs",
        yaml,
        (4, 31),
        "nope]",
        "`bad/nope`, which does not exist",
    );
}

#[test]
fn invalid_pipeline_name() {
    let yaml = format!("name: a b\nsteps:\n{OK_STEP}");
    check(
        "pipeline name",
        &yaml,
        (1, 7),
        "a b",
        "invalid pipeline name",
    );
}

#[test]
fn no_steps() {
    check("no steps", "steps: {}\n", (1, 8), "{}", "at least one step");
}

#[test]
fn allow_outside_relative() {
    let yaml = format!("allow_outside: [/opt, \"../up\"]\nsteps:\n{OK_STEP}");
    check(
        "allow outside",
        &yaml,
        (1, 23),
        "\"../up\"",
        "not an absolute path",
    );
}

#[test]
fn output_outside_the_project() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    outputs: [out/b.txt, /etc/jb-b.txt]\n    run: echo\n");
    check(
        "output escape",
        &yaml,
        (8, 26),
        "/etc/jb-b.txt",
        "outside the project",
    );
}

#[test]
fn instances_with_the_same_id() {
    let yaml = format!("steps:\n{OK_STEP}  b:\n    kind: command\n    foreach: [{{values: {{x: [1, 1]}}}}]\n    run: echo\n");
    check("duplicate id", &yaml, (6, 3), "b:", "same id");
}

#[test]
fn drawn_report_on_request() {
    // `JB_DIAGNOSTICS=fancy` draws the miette report (no colour: NO_COLOR is set).
    let p = TestProject::new();
    p.write("src/a.txt", "a\n");
    p.write(
        "pipelines/bad.yaml",
        &format!(
            "steps:\n{OK_STEP}  b:\n    kind: command\n    needs: [ok, nope]\n    run: echo b\n"
        ),
    );
    let r = p
        .command(&["build"])
        .env("JB_DIAGNOSTICS", "fancy")
        .output()
        .expect("run jb");
    assert_eq!(r.status.code(), Some(2));
    insta::assert_snapshot!("fancy_missing_ref", String::from_utf8_lossy(&r.stderr));
    let plain = p
        .command(&["build"])
        .env("JB_DIAGNOSTICS", "plain")
        .output()
        .expect("run jb");
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr),
        "error: pipelines/bad.yaml:8:17: step `b` needs `bad/nope`, which does not exist\n"
    );
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

#[test]
fn search_space_not_utf8_is_a_usage_error() {
    // A file a pipeline names (a grid's search space) that is not UTF-8: exit 2 at its first
    // bad byte, like the pipeline itself (it was an I/O error, exit 3).
    let p = TestProject::new();
    p.write(
        "pipelines/grid.yaml",
        "steps:\n  g:\n    kind: command\n    foreach: [{grid: space.yaml}]\n    run: echo {config}\n",
    );
    std::fs::write(
        p.path().join("space.yaml"),
        b"space:\n  cpu:\n    params: {bm: [\xff]}\n",
    )
    .unwrap();
    let r = p.jb(&["build"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    insta::assert_snapshot!("space_not_utf8", r.stderr);
}
