//! What comes back from a sandbox: only declared products.
//!
//! The export stage's products are `export/index.json` and the program files it names, each
//! under a size cap; any other step's are the regular files of its out_dir, up to a count and
//! a total size. They are copied out (each read up to its cap, never further) into a folder the
//! sandbox cannot reach, at the moment the sandbox answers and while its processes are stopped,
//! so nothing it writes afterwards is read. Everything else it left is discarded and counted.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The largest `export/index.json` taken (as the judge's `jb.exported.MAX_INDEX_BYTES`).
pub const MAX_INDEX_BYTES: u64 = 4 << 20;
/// The largest program file taken (as `jb.exported.MAX_PROGRAM_BYTES`).
pub const MAX_PROGRAM_BYTES: u64 = 256 << 20;
/// The most programs an index may name (as `jb.exported.MAX_PROGRAMS`).
pub const MAX_PROGRAMS: usize = 64;
/// The most files taken from a step other than export (dumped outputs, a profiler trace).
pub const MAX_OTHER_FILES: usize = 256;
/// The most bytes taken from a step other than export.
pub const MAX_OTHER_BYTES: u64 = 2 << 30;
/// Files looked at when counting what was left (the rest are counted as one more).
const WALK_LIMIT: usize = 100_000;

/// What was taken and what was left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Names (relative to out_dir, `/`-separated) of the files copied out.
    pub kept: Vec<String>,
    pub discarded_files: u64,
    pub discarded_bytes: u64,
    /// Why a declared product was refused (too large, not a regular file, a bad name).
    pub refused: Vec<String>,
}

impl Collected {
    /// The account put into the step's result.
    pub fn json(&self) -> Value {
        serde_json::json!({
            "discarded_files": self.discarded_files,
            "discarded_bytes": self.discarded_bytes,
            "refused_products": self.refused,
        })
    }
}

/// A plain file name: no separator, not hidden, no NUL, not empty.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('/')
        && !name.contains('\\')
        && !name.starts_with('.')
        && !name.contains('\0')
}

/// Copy `src` (a regular file, not a link) to `dest`, reading at most `cap` bytes: an error
/// when it is larger or not a regular file.
fn copy_capped(src: &Path, dest: &Path, cap: u64) -> Result<u64, String> {
    let meta = src
        .symlink_metadata()
        .map_err(|e| format!("missing ({e})"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    let f = std::fs::File::open(src).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    f.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    if buf.len() as u64 > cap {
        return Err(format!("larger than {cap} bytes"));
    }
    if let Some(p) = dest.parent() {
        std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
    }
    std::fs::write(dest, &buf).map_err(|e| e.to_string())?;
    Ok(buf.len() as u64)
}

/// Every regular file under `dir` with its size (links neither followed nor counted as files;
/// at most [`WALK_LIMIT`]).
fn walk(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if out.len() >= WALK_LIMIT {
                return out;
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            let p = e.path();
            if m.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push((rel.to_string_lossy().replace('\\', "/"), m.len()));
            }
        }
    }
    out.sort();
    out
}

fn account_rest(out_dir: &Path, c: &mut Collected) {
    for (name, len) in walk(out_dir) {
        if !c.kept.contains(&name) {
            c.discarded_files += 1;
            c.discarded_bytes += len;
        }
    }
}

/// The export stage's products: `export/index.json` and the program files it names, copied
/// from `out_dir` into `dest`.
pub fn collect_export(out_dir: &Path, dest: &Path) -> Collected {
    let mut c = Collected::default();
    let index = "export/index.json";
    match copy_capped(&out_dir.join(index), &dest.join(index), MAX_INDEX_BYTES) {
        Ok(_) => c.kept.push(index.into()),
        Err(e) => {
            if out_dir.join(index).symlink_metadata().is_ok() {
                c.refused.push(format!("{index}: {e}"));
            }
            account_rest(out_dir, &mut c);
            return c;
        }
    }
    // The names it declares, read from the copy (what the judge will read too).
    let names: Vec<String> = std::fs::read(dest.join(index))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("programs").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("file").and_then(Value::as_str).map(str::to_string))
        .collect();
    for (i, name) in names.iter().enumerate() {
        if i >= MAX_PROGRAMS {
            c.refused
                .push(format!("more than {MAX_PROGRAMS} programs named"));
            break;
        }
        if !plain_name(name) {
            c.refused.push(format!(
                "program file name {name:?} is not a plain file name"
            ));
            continue;
        }
        let rel = format!("export/{name}");
        if c.kept.contains(&rel) {
            continue;
        }
        match copy_capped(&out_dir.join(&rel), &dest.join(&rel), MAX_PROGRAM_BYTES) {
            Ok(_) => c.kept.push(rel),
            Err(e) => c.refused.push(format!("{rel}: {e}")),
        }
    }
    account_rest(out_dir, &mut c);
    c
}

/// Another step's products: its regular files, up to [`MAX_OTHER_FILES`] and
/// [`MAX_OTHER_BYTES`] in all (in name order), copied from `out_dir` into `dest`.
pub fn collect_all(out_dir: &Path, dest: &Path) -> Collected {
    let mut c = Collected::default();
    let mut total = 0u64;
    for (name, len) in walk(out_dir) {
        if c.kept.len() >= MAX_OTHER_FILES || total + len > MAX_OTHER_BYTES {
            break;
        }
        match copy_capped(
            &out_dir.join(&name),
            &dest.join(&name),
            MAX_OTHER_BYTES - total,
        ) {
            Ok(n) => {
                total += n;
                c.kept.push(name);
            }
            Err(e) => c.refused.push(format!("{name}: {e}")),
        }
    }
    account_rest(out_dir, &mut c);
    c
}

/// Where a step's products wait between the answer and the step's folder: a fresh folder
/// outside the sandbox's scratch.
pub fn staging(scratch: &Path) -> std::io::Result<tempfile::TempDir> {
    let base = scratch
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    tempfile::Builder::new()
        .prefix("jb-products-")
        .tempdir_in(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_index_and_its_programs_come_back() {
        let out = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        let e = out.path().join("export");
        std::fs::create_dir_all(&e).unwrap();
        std::fs::write(
            e.join("index.json"),
            r#"{"programs": [{"file": "p0.jaxexport"}, {"file": "../escape"}, {"file": "gone"}]}"#,
        )
        .unwrap();
        std::fs::write(e.join("p0.jaxexport"), b"prog").unwrap();
        std::fs::write(e.join("extra.bin"), vec![0u8; 1000]).unwrap();
        std::fs::write(out.path().join("junk"), b"12345").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", e.join("link")).unwrap();
        let c = collect_export(out.path(), dest.path());
        assert_eq!(c.kept, vec!["export/index.json", "export/p0.jaxexport"]);
        assert_eq!(c.discarded_files, 3, "{c:?}");
        assert_eq!(
            c.discarded_bytes,
            1005 + "/etc/passwd".len() as u64,
            "{c:?}"
        );
        assert_eq!(c.refused.len(), 2, "{c:?}");
        assert!(dest.path().join("export/p0.jaxexport").is_file());
        assert!(!dest.path().join("export/extra.bin").exists());
    }

    #[test]
    fn a_linked_index_is_refused() {
        let out = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(out.path().join("export")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", out.path().join("export/index.json")).unwrap();
        let c = collect_export(out.path(), dest.path());
        assert!(c.kept.is_empty());
        assert_eq!(c.refused.len(), 1);
        assert_eq!(c.discarded_files, 1);
    }

    #[test]
    fn other_steps_are_capped_by_count() {
        let out = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        for i in 0..(MAX_OTHER_FILES + 10) {
            std::fs::write(out.path().join(format!("f{i:04}")), b"x").unwrap();
        }
        let c = collect_all(out.path(), dest.path());
        assert_eq!(c.kept.len(), MAX_OTHER_FILES);
        assert_eq!(c.discarded_files, 10);
    }
}
