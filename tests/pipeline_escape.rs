//! Pipelines cannot escape: values in `run:` are data, paths stay inside the project unless a
//! pipeline allows an outside root, names jb cannot represent are errors, deep YAML is refused
//! before parsing (the real binary; the malicious inputs are built here).

mod common;

use common::TestProject;

/// Exit 2, one line naming `pipelines/bad.yaml:LINE:`, the reason, and nothing written.
fn refused(p: &TestProject, line: usize, needle: &str) {
    let r = p.jb(&["build"]);
    assert_eq!(
        r.code, 2,
        "expected exit 2, got {}\nstderr: {}",
        r.code, r.stderr
    );
    let at = format!("pipelines/bad.yaml:{line}:");
    assert!(r.stderr.contains(&at), "expected `{at}` in: {}", r.stderr);
    assert!(
        r.stderr.contains(needle),
        "expected `{needle}` in: {}",
        r.stderr
    );
    assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {}", r.stderr);
    assert!(!p.path().join("cache").exists(), "nothing may be written");
}

#[test]
fn file_names_are_data_in_run() {
    let p = TestProject::new();
    let names = [
        "a;touch X;",
        "$(touch X)",
        "`touch X`",
        "it's",
        "say \"hi\" $HOME",
    ];
    for n in names {
        p.write(&format!("src/{n}.txt"), &format!("content of {n}\n"));
    }
    p.write(
        "pipelines/copy.yaml",
        r#"steps:
  bare:
    kind: command
    foreach: [{match: "src/{f}.txt"}]
    outputs: ["out/bare/{f}.txt"]
    run: mkdir -p out/bare && cp src/{f}.txt out/bare/{f}.txt
  quoted:
    kind: command
    foreach: [{match: "src/{f}.txt"}]
    outputs: ["out/quoted/{f}.txt"]
    run: mkdir -p out/quoted && cp "src/{f}.txt" 'out/quoted/{f}.txt'
  env:
    kind: command
    foreach: [{match: "src/{f}.txt"}]
    outputs: ["out/env/{f}.txt"]
    run: mkdir -p out/env && cp "src/$JB_VAR_f.txt" "out/env/$JB_VAR_f.txt"
"#,
    );
    let r = p.jb(&["build", "-j", "1"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(!p.path().join("X").exists(), "a file name ran a command");
    for dir in ["bare", "quoted", "env"] {
        for n in names {
            assert_eq!(
                p.read(&format!("out/{dir}/{n}.txt")),
                format!("content of {n}\n"),
                "{dir}/{n}"
            );
        }
    }
}

#[test]
fn paths_outside_the_project_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let out = outside.path().display().to_string();
    let step = |body: &str| format!("steps:\n  s:\n{body}");
    for (body, line, needle) in [
        (
            "    kind: command\n    inputs: [../secret.txt]\n    run: \"true\"\n".to_string(),
            4,
            "`../secret.txt` is a `..` path outside the project",
        ),
        (
            format!("    kind: command\n    inputs: [{out}/secret.txt]\n    run: \"true\"\n"),
            4,
            "is an absolute path outside the project",
        ),
        (
            "    kind: command\n    outputs: [out/../../evil.txt]\n    run: \"true\"\n".to_string(),
            4,
            "`out/../../evil.txt` is a `..` path",
        ),
        (
            "    kind: compile\n    params: {workload: ../../etc, impl: {kind: xla}}\n".to_string(),
            4,
            "(params.workload)",
        ),
        (
            format!("    kind: compile\n    params: {{workload: workloads/w, impl: {{kind: candidate, path: {out}/k.py}}}}\n"),
            4,
            "(params.impl.path)",
        ),
        (
            "    kind: command\n    foreach: [{match: \"../*/secret.txt\"}]\n    run: \"true\"\n".to_string(),
            4,
            "is a `..` path outside the project",
        ),
        (
            "    kind: command\n    inputs: [data/secret.txt]\n    run: \"true\"\n".to_string(),
            4,
            "leads through a symbolic link",
        ),
    ] {
        let p = TestProject::new();
        p.write("workloads/w/workload.py", "x = 1\n");
        std::os::unix::fs::symlink(outside.path(), p.path().join("data")).unwrap();
        p.write("pipelines/bad.yaml", &step(&body));
        refused(&p, line, needle);
    }
    // Allowed explicitly: the same symlinked and absolute inputs build.
    let p = TestProject::new();
    std::os::unix::fs::symlink(outside.path(), p.path().join("data")).unwrap();
    p.write(
        "pipelines/ok.yaml",
        &format!("allow_outside: [{out}]\nsteps:\n  s:\n    kind: command\n    inputs: [data/secret.txt, {out}/secret.txt]\n    run: \"true\"\n"),
    );
    let r = p.jb(&["build"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // `allow_outside` takes absolute paths only.
    let p = TestProject::new();
    p.write(
        "pipelines/bad.yaml",
        "allow_outside: [../up]\nsteps:\n  s:\n    kind: command\n    run: \"true\"\n",
    );
    refused(&p, 1, "not an absolute path");
}

#[test]
fn an_output_the_command_links_elsewhere_fails() {
    let outside = tempfile::tempdir().unwrap();
    let p = TestProject::new();
    p.write(
        "pipelines/p.yaml",
        &format!(
            "steps:\n  s:\n    kind: command\n    outputs: [out/passwd]\n    run: rmdir out && ln -s {} out && echo x > out/passwd\n",
            outside.path().display()
        ),
    );
    let r = p.jb(&["build", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("leads through a symbolic link"),
        "{}",
        r.stdout
    );
}

#[test]
fn names_jb_cannot_represent_are_errors() {
    let p = TestProject::new();
    p.write("src/ok.txt", "x");
    p.write("src/new\nline.txt", "x");
    p.write(
        "pipelines/bad.yaml",
        "steps:\n  s:\n    kind: command\n    foreach: [{match: \"src/{f}.txt\"}]\n    run: \"true\"\n",
    );
    refused(&p, 4, "src/new\\nline.txt` holds a newline");
    // A folder input with such a file below it.
    let p = TestProject::new();
    p.write("src/new\nline.txt", "x");
    p.write(
        "pipelines/bad.yaml",
        "steps:\n  s:\n    kind: command\n    inputs: [src]\n    run: \"true\"\n",
    );
    refused(&p, 4, "holds a newline");
    // Not UTF-8.
    let p = TestProject::new();
    std::fs::create_dir_all(p.path().join("src")).unwrap();
    std::fs::write(
        p.path()
            .join("src")
            .join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"k\xff.txt")),
        "x",
    )
    .unwrap();
    p.write(
        "pipelines/bad.yaml",
        "steps:\n  s:\n    kind: command\n    foreach: [{match: \"src/{f}.txt\"}]\n    run: \"true\"\n",
    );
    refused(&p, 4, "is not UTF-8");
}

#[test]
fn deep_yaml_is_refused_before_parsing() {
    for (text, line) in [
        (
            format!("steps: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000)),
            1,
        ),
        (format!("steps:\n  a:\n    {}x\n", "- ".repeat(100_000)), 3),
        (
            format!("steps:\n  a:\n    b: {}\n", "{c: ".repeat(100_000)),
            3,
        ),
    ] {
        let p = TestProject::new();
        p.write("pipelines/bad.yaml", &text);
        refused(&p, line, "nested deeper than 64 levels");
    }
}
