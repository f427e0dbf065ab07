//! Malicious archives, built in the tests: every one is refused with exit 1 and a reason, none
//! ends in a signal, none writes anything (`jb archive verify | import`, the real binary).

mod common;
#[path = "common/fixture.rs"]
mod fixture;

use std::io::{Read, Write};

use common::{Run, TestProject};
use jb::archive::manifest::ArchivedRecord;
use serde_json::{json, Value};

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
    std::fs::read(p.path().join(out)).unwrap()
}

/// Exit 1 (not a signal, not a panic), and the first line of stderr is the reason.
fn refused(r: &Run, reason: &str) {
    assert_eq!(r.code, 1, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    let first = r.stderr.lines().next().unwrap_or("");
    assert!(
        first.starts_with("error: ") && first.contains(reason),
        "expected `{reason}` in the first line of: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

/// The entries of an archive, in order.
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

/// A careful forger: edits entries and keeps the manifest consistent (entry digests, record
/// output and measurement digests), as anyone can who has no signing key.
struct Forger {
    entries: Vec<(String, Vec<u8>)>,
}

impl Forger {
    fn new(bytes: &[u8]) -> Self {
        Forger {
            entries: entries(bytes),
        }
    }

    fn manifest(&self) -> Value {
        serde_json::from_slice(&self.entries[0].1).unwrap()
    }

    fn set_manifest(&mut self, m: &Value) {
        self.entries[0].1 = serde_json::to_vec_pretty(m).unwrap();
    }

    fn get(&self, name: &str) -> Vec<u8> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
            .clone()
    }

    /// Replace (or add) an entry and its manifest line.
    fn set(&mut self, name: &str, data: Vec<u8>) {
        let mut m = self.manifest();
        let list = m["entries"].as_array_mut().unwrap();
        list.retain(|e| e["path"] != name);
        list.push(json!({"path": name, "size": data.len(), "blake3": jb::key::hash_hex(&data)}));
        list.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        self.set_manifest(&m);
        self.entries.retain(|(n, _)| n != name);
        self.entries.push((name.to_string(), data));
        self.entries[1..].sort_by(|a, b| a.0.cmp(&b.0));
    }

    /// Edit a record and recompute everything a digest covers.
    fn record(
        &mut self,
        pred: impl Fn(&ArchivedRecord) -> bool,
        f: impl Fn(&mut ArchivedRecord),
    ) -> String {
        let (name, data) = self
            .entries
            .iter()
            .find(|(n, d)| {
                n.starts_with("records/")
                    && pred(&serde_json::from_slice::<ArchivedRecord>(d).unwrap())
            })
            .cloned()
            .expect("a record to forge");
        let _ = data;
        let mut r: ArchivedRecord = serde_json::from_slice(&self.get(&name)).unwrap();
        f(&mut r);
        r.output_digest = jb::key::output_digest(&r.result, &r.files);
        let mut m = self.manifest();
        for e in m["records"].as_array_mut().unwrap() {
            if e["key"] == r.key.as_str() {
                e["output_digest"] = json!(r.output_digest);
                e["status"] = json!(r.status);
                e["measurements"] = json!(r.measurements_digest());
            }
        }
        self.set_manifest(&m);
        let mut bytes = serde_json::to_vec_pretty(&r).unwrap();
        bytes.push(b'\n');
        self.set(&name, bytes);
        r.key
    }

    fn pack(&self) -> Vec<u8> {
        let mut b = tar::Builder::new(zstd::Encoder::new(Vec::new(), 3).unwrap());
        for (name, data) in &self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(0);
            b.append_data(&mut h, name, data.as_slice()).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }
}

fn is_8p_xla_profile(r: &ArchivedRecord) -> bool {
    r.step_id == "baseline/profile[workload=8p_GEMM]"
}

/// A tar header written byte by byte (paths and types the `tar` crate's builder refuses).
fn raw_entry(name: &[u8], t: tar::EntryType, claimed: u64, data: &[u8], link: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    {
        let g = h.as_gnu_mut().unwrap();
        g.name = [0; 100];
        g.name[..name.len()].copy_from_slice(name);
        g.linkname[..link.len()].copy_from_slice(link);
    }
    h.set_mode(0o644);
    h.set_entry_type(t);
    h.set_size(claimed);
    h.set_mtime(0);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn zst(tar: &[u8]) -> Vec<u8> {
    zstd::encode_all(tar, 19).unwrap()
}

/// A valid manifest entry first, then `rest`, then the end-of-archive marker.
fn crafted(rest: &[Vec<u8>]) -> Vec<u8> {
    let m = br#"{"format": "jb-archive/2"}"#;
    let mut t = raw_entry(
        b"MANIFEST.json",
        tar::EntryType::Regular,
        m.len() as u64,
        m,
        b"",
    );
    for r in rest {
        t.extend_from_slice(r);
    }
    t.extend_from_slice(&[0u8; 1024]);
    zst(&t)
}

fn verify_and_import(p: &TestProject, bytes: &[u8], reason: &str) {
    std::fs::write(p.path().join("evil.tar.zst"), bytes).unwrap();
    refused(&p.jb(&["archive", "verify", "evil.tar.zst"]), reason);
    refused(
        &p.jb(&["--cache-dir", "victim", "archive", "import", "evil.tar.zst"]),
        reason,
    );
    let cache = jb::cache::Cache::open(&p.path().join("victim")).unwrap();
    assert!(cache.db.latest_records("").unwrap().is_empty());
    assert!(cache.cas.list().is_empty());
}

#[test]
fn a_header_that_claims_a_terabyte_is_refused_before_allocating() {
    let p = TestProject::new();
    let h = "0".repeat(64);
    let tar = raw_entry(
        format!("blobs/{h}").as_bytes(),
        tar::EntryType::Regular,
        1 << 40,
        b"",
        b"",
    );
    let bytes = zst(&tar);
    assert!(bytes.len() < 120, "{} bytes", bytes.len());
    verify_and_import(&p, &bytes, "claims 1099511627776 bytes, over the limit");
    // A parsed entry has a tighter limit.
    let tar = raw_entry(b"MANIFEST.json", tar::EntryType::Regular, 1 << 30, b"", b"");
    verify_and_import(
        &p,
        &zst(&tar),
        "over the limit of 268435456 for the manifest",
    );
    // A size within the limit but data that is not there: truncated, not a crash.
    let tar = raw_entry(
        b"MANIFEST.json",
        tar::EntryType::Regular,
        100 << 20,
        b"{",
        b"",
    );
    verify_and_import(&p, &zst(&tar), "ends inside entry MANIFEST.json");
}

#[test]
fn a_big_zero_entry_is_streamed() {
    let p = TestProject::new();
    // 2 GiB of zeros under their true digest: compresses to a few hundred KiB.
    let size: u64 = 2 << 30;
    let mut hasher = blake3::Hasher::new();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(size >> 20) {
        hasher.update(&zeros);
    }
    let name = format!("blobs/{}", hasher.finalize().to_hex());
    let mut enc = zstd::Encoder::new(Vec::new(), 1).unwrap();
    let m = br#"{"format": "jb-archive/2"}"#;
    enc.write_all(&raw_entry(
        b"MANIFEST.json",
        tar::EntryType::Regular,
        m.len() as u64,
        m,
        b"",
    ))
    .unwrap();
    let head = raw_entry(name.as_bytes(), tar::EntryType::Regular, size, b"", b"");
    enc.write_all(&head).unwrap();
    for _ in 0..(size >> 20) {
        enc.write_all(&zeros).unwrap();
    }
    enc.write_all(&[0u8; 1024]).unwrap();
    let bytes = enc.finish().unwrap();
    assert!(bytes.len() < 1 << 20);
    std::fs::write(p.path().join("zeros.tar.zst"), &bytes).unwrap();
    // The manifest here is not a real one: verify reads the 2 GiB through and says so.
    let r = p.jb(&["archive", "verify", "zeros.tar.zst"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not a valid jb archive"), "{}", r.stderr);
    assert!(
        r.stderr.contains("no readable MANIFEST.json"),
        "{}",
        r.stderr
    );
}

#[test]
fn paths_and_entry_types_are_checked_on_their_own() {
    let p = TestProject::new();
    let data = b"x";
    let one = |name: &[u8], t: tar::EntryType, link: &[u8]| {
        let size = if t == tar::EntryType::Regular { 1 } else { 0 };
        crafted(&[raw_entry(name, t, size, &data[..size as usize], link)])
    };
    use tar::EntryType as T;
    for (bytes, reason) in [
        (one(b"../escape.txt", T::Regular, b""), "a `..` component"),
        (
            one(b"sources/../../escape.txt", T::Regular, b""),
            "a `..` component",
        ),
        (one(b"/tmp/escape.txt", T::Regular, b""), "an absolute path"),
        (one(b"sources/a\nb", T::Regular, b""), "control character"),
        (one(b"sources/\xff", T::Regular, b""), "not UTF-8"),
        (
            one(b"install.sh", T::Regular, b""),
            "not an entry a jb archive holds",
        ),
        (
            one(b"sources/passwd", T::Symlink, b"/etc/passwd"),
            "entry `sources/passwd` -> `/etc/passwd` is a symbolic link",
        ),
        (
            one(b"sources/x", T::Link, b"MANIFEST.json"),
            "is a hard link",
        ),
        (one(b"sources/null", T::Char, b""), "is a character device"),
        (one(b"sources/sda", T::Block, b""), "is a block device"),
        (one(b"sources/fifo", T::Fifo, b""), "is a FIFO"),
        (one(b"sources", T::Directory, b""), "is a directory"),
    ] {
        verify_and_import(&p, &bytes, reason);
    }
    assert!(!p.path().join("../escape.txt").exists());
    assert!(!std::path::Path::new("/tmp/escape.txt").exists());
    // Structure: a header whose checksum fails, garbage, truncation, data after the end,
    // oversized extension headers.
    let mut t = raw_entry(b"MANIFEST.json", T::Regular, 1, b"{", b"");
    t[0] ^= 1;
    t.extend_from_slice(&[0u8; 1024]);
    verify_and_import(&p, &zst(&t), "checksum mismatch");
    verify_and_import(&p, b"not zstd at all", "not a readable jb archive");
    let t = raw_entry(b"MANIFEST.json", T::Regular, 1, b"{", b"");
    verify_and_import(&p, &zst(&t), "without an end-of-archive marker");
    let mut t = raw_entry(b"MANIFEST.json", T::Regular, 1, b"{", b"");
    t.extend_from_slice(&[0u8; 1024]);
    t.extend_from_slice(b"trailing");
    verify_and_import(&p, &zst(&t), "data after the end-of-archive marker");
    let t = raw_entry(b"././@LongLink", T::GNULongName, 1 << 30, b"", b"");
    verify_and_import(&p, &zst(&t), "claims 1073741824 bytes (limit 65536)");
    let t = raw_entry(b"pax", T::XHeader, 1 << 40, b"", b"");
    verify_and_import(&p, &zst(&t), "claims 1099511627776 bytes (limit 65536)");
    // A long name that hides a `..`.
    let long = format!("sources/{}/../../../escape.txt", "d".repeat(120));
    let mut t = raw_entry(
        b"././@LongLink",
        T::GNULongName,
        long.len() as u64,
        long.as_bytes(),
        b"",
    );
    t.extend(raw_entry(b"short", T::Regular, 1, b"x", b""));
    t.extend_from_slice(&[0u8; 1024]);
    verify_and_import(&p, &zst(&t), "a `..` component");
}

#[test]
fn tables_are_data_not_sql() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    let table = |f: &Forger| -> Value {
        serde_json::from_slice(&f.get("tables/ext_samples.json")).unwrap()
    };
    let f = Forger::new(&a);
    let t = table(&f);
    assert_eq!(t["columns"][0], json!({"name": "method", "type": "TEXT"}));
    assert_eq!(t["primary_key"], json!(["method", "workload", "idx"]));
    assert!(t.get("sql").is_none());
    let escape = p.path().join("attached.db");
    let attach = format!(
        "TEXT); ATTACH DATABASE '{}' AS x; CREATE TABLE x.t(a",
        escape.display()
    );
    let cases: Vec<(Value, &str)> = vec![
        // The format-1 way: SQL in the archive.
        (
            json!({"name": "ext_samples", "sql": format!("CREATE TABLE ext_samples (a); ATTACH DATABASE '{}' AS x; UPDATE actions SET status = 'x'", escape.display()), "columns": ["a"], "rows": []}),
            "unknown field `sql`",
        ),
        (
            json!({"name": "ext_samples", "columns": [{"name": "a", "type": attach}], "rows": []}),
            "has type",
        ),
        (
            json!({"name": "ext_samples", "columns": [{"name": "a\" TEXT); DROP TABLE actions; --", "type": "TEXT"}], "rows": []}),
            "is not a plain identifier",
        ),
        (
            json!({"name": "actions", "columns": [{"name": "a", "type": "TEXT"}], "rows": []}),
            "is reserved",
        ),
        (
            json!({"name": "ext_samples", "columns": [{"name": "a", "type": "TEXT"}], "rows": [[{"sql": "x"}]]}),
            "not a scalar",
        ),
    ];
    for (forged, reason) in cases {
        let mut f = Forger::new(&a);
        f.set(
            "tables/ext_samples.json",
            serde_json::to_vec_pretty(&forged).unwrap(),
        );
        std::fs::write(p.path().join("evil.tar.zst"), f.pack()).unwrap();
        let r = p.jb(&["archive", "verify", "evil.tar.zst"]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(reason), "{reason}: {}", r.stderr);
        let r = p.jb(&["--cache-dir", "victim", "archive", "import", "evil.tar.zst"]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(!escape.exists(), "ATTACH ran");
        let cache = jb::cache::Cache::open(&p.path().join("victim")).unwrap();
        assert!(cache.db.latest_records("").unwrap().is_empty());
    }
}

#[test]
fn import_never_overwrites() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    // A forged archive: the 8p XLA profile 10x faster, samples and all, every digest
    // recomputed. It verifies (self-consistent, unsigned) ...
    let mut f = Forger::new(&a);
    let key = f.record(is_8p_xla_profile, |r| {
        for k in ["median_ms", "min_ms"] {
            if let Some(v) = r.result.get(k).and_then(Value::as_f64) {
                r.result[k] = json!(v / 10.0);
            }
        }
        let s: Vec<f64> = r.result["samples_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() / 10.0)
            .collect();
        r.result["samples_ms"] = json!(s);
        for row in r.samples.iter_mut() {
            row.device_ms = row.device_ms.map(|x| x / 10.0);
            row.wall_ms = row.wall_ms.map(|x| x / 10.0);
        }
    });
    std::fs::write(p.path().join("forged.tar.zst"), f.pack()).unwrap();
    let r = p.jb(&["archive", "verify", "forged.tar.zst"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("unsigned"), "{}", r.stdout);
    // ... but importing it over the real results is a conflict naming both, and nothing is
    // written: not even the record the cache lacks.
    let cache = jb::cache::Cache::open(&p.path().join("cache")).unwrap();
    let other = cache
        .db
        .latest("baseline/profile[workload=1p_Flash_Attention]")
        .unwrap()
        .unwrap()
        .0;
    cache.db.delete_action(&other).unwrap();
    let before = cache.db.counts().unwrap();
    let r = p.jb(&["archive", "import", "forged.tar.zst"]);
    refused(&r, "conflict(s)");
    assert!(r.stderr.contains(&key), "{}", r.stderr);
    assert!(r.stderr.contains("median_ms 0.53"), "{}", r.stderr);
    assert!(r.stderr.contains(" vs 5.36"), "{}", r.stderr);
    assert_eq!(cache.db.counts().unwrap(), before);
    assert!(cache.db.get_action(&other).unwrap().is_none());
    let rec = cache.db.get_action(&key).unwrap().unwrap();
    assert_eq!(rec.result["median_ms"], json!(5.36));
    // An extension-table row under a primary key the cache holds with other values.
    let mut f = Forger::new(&a);
    let mut t: Value = serde_json::from_slice(&f.get("tables/ext_samples.json")).unwrap();
    for row in t["rows"].as_array_mut().unwrap() {
        row[4] = json!(1);
    }
    f.set(
        "tables/ext_samples.json",
        serde_json::to_vec_pretty(&t).unwrap(),
    );
    std::fs::write(p.path().join("forged.tar.zst"), f.pack()).unwrap();
    let r = p.jb(&["archive", "import", "forged.tar.zst"]);
    refused(&r, "conflict(s)");
    assert!(r.stderr.contains("same primary key"), "{}", r.stderr);
    assert_eq!(cache.db.counts().unwrap(), before);
    assert!(cache.db.get_action(&other).unwrap().is_none());
    // The genuine archive imports: it adds the missing record, keeps the rest.
    let r = p.jb(&["--json", "archive", "import", "a.tar.zst"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["new_records"], 1);
    assert!(cache.db.get_action(&other).unwrap().is_some());
}

#[test]
fn forged_timings_fail_verify() {
    let p = populated();
    let a = create(&p, "a.tar.zst", &[]);
    let fix_entry = |f: &mut Forger, key: &str, edit: &dyn Fn(&mut ArchivedRecord)| {
        let name = format!("records/{key}.json");
        let mut r: ArchivedRecord = serde_json::from_slice(&f.get(&name)).unwrap();
        edit(&mut r);
        f.set(&name, serde_json::to_vec_pretty(&r).unwrap());
    };
    let key_of = |pred: &dyn Fn(&ArchivedRecord) -> bool| {
        let f = Forger::new(&a);
        f.entries
            .iter()
            .filter(|(n, _)| n.starts_with("records/"))
            .map(|(_, d)| serde_json::from_slice::<ArchivedRecord>(d).unwrap())
            .find(|r| pred(r))
            .unwrap()
            .key
    };
    let key = key_of(&is_8p_xla_profile);
    let key_1p =
        key_of(&|r: &ArchivedRecord| r.step_id == "baseline/profile[workload=1p_Flash_Attention]");
    // The median alone (the entry digest fixed): not the median of the samples.
    let mut f = Forger::new(&a);
    fix_entry(&mut f, &key, &|r| r.result["median_ms"] = json!(0.5));
    std::fs::write(p.path().join("f.tar.zst"), f.pack()).unwrap();
    let r = p.jb(&["archive", "verify", "f.tar.zst"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("median_ms 0.5 is not the median of its samples_ms"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("measurement digest"), "{}", r.stderr);
    // Samples rows that are not the result's samples.
    let mut f = Forger::new(&a);
    fix_entry(&mut f, &key_1p, &|r| {
        assert!(!r.samples.is_empty());
        for s in r.samples.iter_mut() {
            s.device_ms = Some(0.1);
        }
    });
    std::fs::write(p.path().join("f.tar.zst"), f.pack()).unwrap();
    let r = p.jb(&["archive", "verify", "f.tar.zst"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("no run's samples are the samples_ms"),
        "{}",
        r.stderr
    );
    // An invented record (consistent in itself): verifies unsigned, fails against a key.
    let mut f = Forger::new(&a);
    f.record(is_8p_xla_profile, |r| {
        r.result["median_ms"] = r.result["median_ms"].clone()
    });
    let r = p.jb(&["archive", "keygen", "k"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::write(p.path().join("f.tar.zst"), f.pack()).unwrap();
    let r = p.jb(&["archive", "verify", "f.tar.zst", "--key", "k.pub"]);
    refused(&r, "unsigned, but a signature by SHA256:");
}

#[test]
fn signed_archives_name_their_producer() {
    let p = populated();
    for k in ["alice", "mallory"] {
        let r = p.jb(&["archive", "keygen", k, "--comment", k]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let mode = std::fs::metadata(p.path().join("alice")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let a = create(&p, "a.tar.zst", &["--sign", "alice"]);
    let b = create(&p, "b.tar.zst", &["--sign", "alice"]);
    assert_eq!(a, b, "signed archives are reproducible too");
    let names: Vec<String> = entries(&a).into_iter().map(|e| e.0).collect();
    assert_eq!(names[..2], ["MANIFEST.json", "MANIFEST.sig"]);
    let r = p.jb(&["archive", "verify", "a.tar.zst", "--key", "alice.pub"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("(alice), a trusted key"), "{}", r.stdout);
    let r = p.jb(&["archive", "verify", "a.tar.zst"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("only --key with a key you trust"),
        "{}",
        r.stdout
    );
    // The wrong trusted key: refused, and import writes nothing.
    let r = p.jb(&["archive", "verify", "a.tar.zst", "--key", "mallory.pub"]);
    refused(&r, "not by the trusted key");
    let r = p.jb(&[
        "--cache-dir",
        "victim",
        "archive",
        "import",
        "a.tar.zst",
        "--require-key",
        "mallory.pub",
    ]);
    refused(&r, "not by the trusted key");
    let cache = jb::cache::Cache::open(&p.path().join("victim")).unwrap();
    assert!(cache.db.latest_records("").unwrap().is_empty());
    let r = p.jb(&[
        "--cache-dir",
        "victim",
        "--json",
        "archive",
        "import",
        "a.tar.zst",
        "--require-key",
        "alice.pub",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["signature"]["trusted"], true);
    // A forgery of a signed archive: the signature no longer matches; re-signing with another
    // key is caught by --key.
    let mut f = Forger::new(&a);
    f.record(is_8p_xla_profile, |r| r.result["median_ms"] = json!(5.36));
    f.record(is_8p_xla_profile, |r| {
        r.duration_ms = 1.0;
    });
    std::fs::write(p.path().join("f.tar.zst"), f.pack()).unwrap();
    refused(
        &p.jb(&["archive", "verify", "f.tar.zst"]),
        "the signature does not match the manifest",
    );
    let r = p.jb(&["archive", "create", "m.tar.zst", "--sign", "mallory"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    refused(
        &p.jb(&["archive", "verify", "m.tar.zst", "--key", "alice.pub"]),
        "signed by SHA256:",
    );
    // An OpenSSH public key line works as --key.
    let line = std::fs::read_to_string(p.path().join("alice.pub")).unwrap();
    assert!(line.starts_with("ssh-ed25519 "), "{line}");
    // A key file that is not one: exit 2 with the reason.
    std::fs::write(p.path().join("junk.pub"), "hello").unwrap();
    let r = p.jb(&["archive", "verify", "a.tar.zst", "--key", "junk.pub"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("not a public key jb reads"),
        "{}",
        r.stderr
    );
}

/// Writes the malicious archives of the closing note of issue 11 (before/after table) into
/// `$JB_CASES_DIR`, format-1 ones made with `$JB_BEFORE_BIN` (a jb built before this change).
#[test]
#[ignore = "writes measurement inputs; run with JB_CASES_DIR and JB_BEFORE_BIN set"]
fn write_measurement_cases() {
    let dir = std::path::PathBuf::from(std::env::var("JB_CASES_DIR").unwrap());
    let before = std::env::var("JB_BEFORE_BIN").unwrap();
    let p = populated();
    let a2 = create(&p, "a2.tar.zst", &[]);
    let r: Run = std::process::Command::new(&before)
        .args(["archive", "create", "a1.tar.zst"])
        .current_dir(p.path())
        .output()
        .unwrap()
        .into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let a1 = std::fs::read(p.path().join("a1.tar.zst")).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    w("genuine-1.tar.zst", &a1);
    w("genuine-2.tar.zst", &a2);
    // Format-independent: crafted headers.
    let h = "0".repeat(64);
    w(
        "tib.tar.zst",
        &zst(&raw_entry(
            format!("blobs/{h}").as_bytes(),
            tar::EntryType::Regular,
            1 << 40,
            b"",
            b"",
        )),
    );
    w(
        "dotdot.tar.zst",
        &crafted(&[raw_entry(
            b"../escape.txt",
            tar::EntryType::Regular,
            1,
            b"x",
            b"",
        )]),
    );
    w(
        "symlink.tar.zst",
        &crafted(&[raw_entry(
            b"sources/passwd",
            tar::EntryType::Symlink,
            0,
            b"",
            b"/etc/passwd",
        )]),
    );
    let size: u64 = 2 << 30;
    let mut enc = zstd::Encoder::new(Vec::new(), 1).unwrap();
    let m = br#"{"format": "jb-archive/2"}"#;
    enc.write_all(&raw_entry(
        b"MANIFEST.json",
        tar::EntryType::Regular,
        m.len() as u64,
        m,
        b"",
    ))
    .unwrap();
    enc.write_all(&raw_entry(
        format!("blobs/{h}").as_bytes(),
        tar::EntryType::Regular,
        size,
        b"",
        b"",
    ))
    .unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(size >> 20) {
        enc.write_all(&zeros).unwrap();
    }
    enc.write_all(&[0u8; 1024]).unwrap();
    w("zeros2g.tar.zst", &enc.finish().unwrap());
    // SQL in a table: format 1 carries a CREATE TABLE statement, which it executed.
    let pwned = dir.join("pwned.db");
    let mut f = Forger::new(&a1);
    let mut t: Value = serde_json::from_slice(&f.get("tables/ext_samples.json")).unwrap();
    t["sql"] = json!(format!(
        "CREATE TABLE ext_samples (method TEXT, workload TEXT, idx INTEGER, outcome TEXT, tokens INTEGER); ATTACH DATABASE '{}' AS pwn; CREATE TABLE pwn.t(x); UPDATE actions SET status = 'hacked'",
        pwned.display()
    ));
    f.set(
        "tables/ext_samples.json",
        serde_json::to_vec_pretty(&t).unwrap(),
    );
    w("sql-1.tar.zst", &f.pack());
    let mut f = Forger::new(&a2);
    let mut t: Value = serde_json::from_slice(&f.get("tables/ext_samples.json")).unwrap();
    t["columns"][0]["type"] = json!(format!(
        "TEXT); ATTACH DATABASE '{}' AS pwn; CREATE TABLE pwn.t(x); UPDATE actions SET status = 'hacked'; CREATE TABLE z (a",
        pwned.display()
    ));
    f.set(
        "tables/ext_samples.json",
        serde_json::to_vec_pretty(&t).unwrap(),
    );
    w("sql-2.tar.zst", &f.pack());
    // The 8p XLA profile 10x faster, every digest recomputed (samples too).
    let faster = |r: &mut ArchivedRecord| {
        r.result["median_ms"] = json!(0.536);
        let s: Vec<f64> = r.result["samples_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() / 10.0)
            .collect();
        r.result["samples_ms"] = json!(s);
    };
    for (tag, a) in [("1", &a1), ("2", &a2)] {
        let mut f = Forger::new(a);
        f.record(is_8p_xla_profile, faster);
        w(&format!("overwrite-{tag}.tar.zst"), &f.pack());
        // Only the median, the record's entry digest fixed.
        let mut f = Forger::new(a);
        let (name, _) = f
            .entries
            .iter()
            .find(|(n, d)| {
                n.starts_with("records/") && is_8p_xla_profile(&serde_json::from_slice(d).unwrap())
            })
            .cloned()
            .unwrap();
        let mut r: ArchivedRecord = serde_json::from_slice(&f.get(&name)).unwrap();
        r.result["median_ms"] = json!(0.536);
        f.set(&name, serde_json::to_vec_pretty(&r).unwrap());
        w(&format!("median-{tag}.tar.zst"), &f.pack());
    }
    let status = std::process::Command::new("cp")
        .args([
            "-a",
            &p.path().to_string_lossy(),
            &dir.join("project").to_string_lossy(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
}
