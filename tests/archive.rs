//! `jb archive create | verify | import` with the real binary on a cache of fixed records.

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use std::io::Read;

use common::TestProject;

fn populated() -> TestProject {
    let p = TestProject::new();
    drop(fixture::populate(&p));
    fixture::add_extension_table(&p.path().join("cache"));
    p
}

fn create(p: &TestProject, out: &str, args: &[&str]) -> Vec<u8> {
    let mut a = vec!["archive", "create", out];
    a.extend_from_slice(args);
    let r = p.jb(&a);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "no warnings expected: {}", r.stderr);
    std::fs::read(p.path().join(out)).unwrap()
}

/// Every entry of an archive, in order.
fn entries(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut ar = tar::Archive::new(zstd::Decoder::new(bytes).unwrap());
    ar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().to_string();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

/// An archive written back with the same layout (what a careful forger would produce).
fn repack(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(zstd::Encoder::new(Vec::new(), 3).unwrap());
    for (name, data) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        b.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

#[test]
fn create_twice_gives_identical_bytes_and_verifies() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    let b = create(&p, "out/b.tar.zst", &[]);
    assert_eq!(a, b, "same results, same bytes");
    let names: Vec<String> = entries(&a).into_iter().map(|(n, _)| n).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "entries are sorted");
    assert_eq!(names[0], "MANIFEST.json");
    for expected in [
        "latest.json",
        "runs.json",
        "pipelines/baseline.yaml",
        "sources/candidates/8p_GEMM/gemm_tiled.py",
        "sources/scratch/my_rmsnorm.py",
        "sources/workloads/8p_GEMM/workload.py",
        "tables/ext_samples.json",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert_eq!(
        names.iter().filter(|n| n.starts_with("blobs/")).count(),
        1,
        "the trace"
    );
    let r = p.jb(&["--json", "archive", "verify", "a.tar.zst"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = r.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["records"], 32);
    assert_eq!(v["blobs"], 1);
    // A new result changes the archive.
    let f = fixture::Fixture::new(&p);
    drop(f);
    let mut f = fixture::Fixture::new(&p);
    f.put(
        "extra/step",
        "command",
        "ok",
        serde_json::json!({}),
        &[],
        &[],
    );
    drop(f);
    let c = create(&p, "c.tar.zst", &[]);
    assert_ne!(a, c);
}

#[test]
fn any_changed_byte_fails_verify() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    for at in [13, a.len() / 3, a.len() / 2, a.len() - 5] {
        let mut bad = a.clone();
        bad[at] ^= 0x01;
        std::fs::write(p.path().join("bad.tar.zst"), &bad).unwrap();
        let r = p.jb(&["archive", "verify", "bad.tar.zst"]);
        assert_eq!(r.code, 1, "byte {at}: {}{}", r.stdout, r.stderr);
    }
    // A record changed and the archive re-packed: its manifest digest no longer matches.
    let mut es = entries(&a);
    let i = es
        .iter()
        .position(|(n, _)| n.starts_with("records/"))
        .unwrap();
    let text = String::from_utf8(es[i].1.clone()).unwrap();
    es[i].1 = text
        .replacen("\"status\": \"", "\"status\": \"x", 1)
        .into_bytes();
    std::fs::write(p.path().join("forged.tar.zst"), repack(&es)).unwrap();
    let r = p.jb(&["archive", "verify", "forged.tar.zst"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("changed"), "{}", r.stderr);
    // Changed consistently with the manifest: the record's own digests no longer recompute.
    let mut es = entries(&a);
    let i = es
        .iter()
        .position(|(n, d)| {
            n.starts_with("records/") && String::from_utf8_lossy(d).contains("\"median_ms\": 5.36")
        })
        .expect("the 8p XLA profile");
    let old = jb::key::hash_hex(&es[i].1);
    es[i].1 = String::from_utf8(es[i].1.clone())
        .unwrap()
        .replace("\"median_ms\": 5.36", "\"median_ms\": 0.536")
        .replace("\"status\": \"ok\"", "\"status\": \"correct\"")
        .into_bytes();
    let new = jb::key::hash_hex(&es[i].1);
    let size = es[i].1.len();
    let manifest = String::from_utf8(es[0].1.clone()).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    for e in m["entries"].as_array_mut().unwrap() {
        if e["blake3"] == old {
            e["blake3"] = new.clone().into();
            e["size"] = size.into();
        }
    }
    es[0].1 = serde_json::to_vec_pretty(&m).unwrap();
    std::fs::write(p.path().join("forged2.tar.zst"), repack(&es)).unwrap();
    let r = p.jb(&["archive", "verify", "forged2.tar.zst"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("differs from the manifest"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("output digest"), "{}", r.stderr);
    // Not an archive at all, and no file.
    std::fs::write(p.path().join("junk.tar.zst"), b"hello").unwrap();
    assert_eq!(p.jb(&["archive", "verify", "junk.tar.zst"]).code, 1);
    assert_eq!(p.jb(&["archive", "verify", "missing.tar.zst"]).code, 2);
}

#[test]
fn import_into_an_empty_cache_reproduces_the_report() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    let report = |cache: &str, format: &str| {
        let r = p.jb(&[
            "--cache-dir",
            cache,
            "report",
            "--format",
            format,
            "--out",
            "-",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let md = report("cache", "md");
    let html = report("cache", "html");
    let json = report("cache", "json");
    assert!(md.contains("| 8p_GEMM | ok | 5.360 |"), "{md}");

    let r = p.jb(&[
        "--cache-dir",
        "other",
        "--json",
        "archive",
        "import",
        "a.tar.zst",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = r.json();
    assert_eq!(s["records"], 32);
    assert_eq!(s["new_records"], 32);
    assert_eq!(s["samples"], 5);
    assert_eq!(s["table_rows"], 2);
    assert_eq!(report("other", "md"), md);
    assert_eq!(report("other", "html"), html);
    assert_eq!(report("other", "json"), json);
    // Importing again adds nothing; archiving the imported cache gives the same bytes.
    let r = p.jb(&[
        "--cache-dir",
        "other",
        "--json",
        "archive",
        "import",
        "a.tar.zst",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["new_records"], 0);
    assert_eq!(r.json()["samples"], 0);
    let r = p.jb(&["--cache-dir", "other", "archive", "create", "b.tar.zst"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = std::fs::read(p.path().join("b.tar.zst")).unwrap();
    if b != a {
        let (ea, eb) = (entries(&a), entries(&b));
        let differ: Vec<String> = ea
            .iter()
            .zip(&eb)
            .filter(|(x, y)| x != y)
            .map(|(x, y)| {
                format!(
                    "{}:\n{}\n---\n{}",
                    x.0,
                    String::from_utf8_lossy(&x.1),
                    String::from_utf8_lossy(&y.1)
                )
            })
            .collect();
        panic!(
            "the imported cache archives differently ({} vs {} entries):\n{}",
            ea.len(),
            eb.len(),
            differ.join("\n")
        );
    }
    // The trace came along, intact.
    let cache = jb::cache::Cache::open(&p.path().join("other")).unwrap();
    let (key, _) = cache
        .db
        .latest("baseline/profile[workload=1p_Flash_Attention]")
        .unwrap()
        .unwrap();
    let rec = cache.db.get_action(&key).unwrap().unwrap();
    let trace = cache
        .cas
        .get(&rec.files["trace/host.trace.json.gz"])
        .unwrap();
    assert_eq!(trace, b"fixture trace: not a real profile\n");
}

#[test]
fn a_damaged_archive_is_not_imported() {
    let p = populated();
    let mut a = create(&p, "a.tar.zst", &[]);
    let n = a.len() / 2;
    a[n] ^= 0x10;
    std::fs::write(p.path().join("bad.tar.zst"), &a).unwrap();
    let r = p.jb(&["--cache-dir", "other", "archive", "import", "bad.tar.zst"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let cache = jb::cache::Cache::open(&p.path().join("other")).unwrap();
    assert!(cache.db.latest_records("").unwrap().is_empty());
    assert!(cache.cas.list().is_empty());
}
