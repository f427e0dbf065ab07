//! Path patterns: `{var}` placeholders (one path component each) and `*`/`?` globs; and the
//! check that a path a pipeline names stays inside the project (or a root it allows).

use std::path::{Component, Path, PathBuf};

use indexmap::IndexMap;

fn skip(name: &str) -> bool {
    name.starts_with('.') || name == "__pycache__"
}

/// A directory entry's name, or why jb cannot represent it (keys, ids and messages are UTF-8
/// text, one line each).
fn entry_name(e: &std::fs::DirEntry, dir: &str) -> Result<String, String> {
    let raw = e.file_name();
    let shown = |n: &str| {
        let at = if dir.is_empty() {
            n.to_string()
        } else {
            format!("{dir}/{n}")
        };
        at.chars().flat_map(char::escape_debug).collect::<String>()
    };
    match raw.to_str() {
        None => Err(format!(
            "file name `{}` is not UTF-8: jb cannot represent it (rename it)",
            shown(&raw.to_string_lossy())
        )),
        Some(n) if n.chars().any(char::is_control) => Err(format!(
            "file name `{}` holds a newline or control character: jb cannot represent it (rename it)",
            shown(n)
        )),
        Some(n) => Ok(n.to_string()),
    }
}

/// Regex for one pattern component; returns (regex, variable names in order).
fn component_regex(component: &str) -> (regex::Regex, Vec<String>) {
    let mut re = String::from("^");
    let mut names = Vec::new();
    let mut rest = component;
    while let Some(c) = rest.chars().next() {
        if c == '{' {
            if let Some(end) = rest.find('}') {
                let name = &rest[1..end];
                re.push_str("(.+)");
                names.push(name.to_string());
                rest = &rest[end + 1..];
                continue;
            }
        }
        match c {
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            other => re.push_str(&regex::escape(&other.to_string())),
        }
        rest = &rest[c.len_utf8()..];
    }
    re.push('$');
    // `(?s)`: a name with a newline matches too (and is then refused, not skipped).
    (
        regex::Regex::new(&format!("(?s){re}")).expect("valid component regex"),
        names,
    )
}

fn is_pattern(component: &str) -> bool {
    component.contains(['{', '*', '?'])
}

/// Every existing path under `root` matching `pattern`, with the placeholder bindings, sorted by
/// path. `**` matches any number of folders.
/// Matched paths with their placeholder bindings.
pub type Matches = Vec<(String, IndexMap<String, String>)>;

/// Names jb cannot represent are left out (see [`try_match_pattern`] for pipelines).
pub fn match_pattern(root: &Path, pattern: &str) -> Vec<(String, IndexMap<String, String>)> {
    try_match(root, pattern, false).unwrap_or_default()
}

/// [`match_pattern`], except that a file name that would match but that jb cannot represent
/// (a newline, not UTF-8) is an error.
pub fn try_match_pattern(root: &Path, pattern: &str) -> Result<Matches, String> {
    try_match(root, pattern, true)
}

fn try_match(root: &Path, pattern: &str, strict: bool) -> Result<Matches, String> {
    // An absolute pattern (a candidate kernel outside the project) matches absolute paths.
    if let Some(rest) = pattern.strip_prefix('/') {
        if root != Path::new("/") {
            let mut out = try_match(Path::new("/"), rest, strict)?;
            for (p, _) in &mut out {
                p.insert(0, '/');
            }
            return Ok(out);
        }
    }
    let components: Vec<&str> = pattern
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut out = Vec::new();
    walk(root, "", &components, IndexMap::new(), &mut out, strict)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    Ok(out)
}

fn walk(
    root: &Path,
    prefix: &str,
    rest: &[&str],
    vars: IndexMap<String, String>,
    out: &mut Vec<(String, IndexMap<String, String>)>,
    strict: bool,
) -> Result<(), String> {
    let here = if prefix.is_empty() {
        root.to_path_buf()
    } else {
        root.join(prefix)
    };
    let Some((first, tail)) = rest.split_first() else {
        if here.exists() {
            out.push((prefix.to_string(), vars));
        }
        return Ok(());
    };
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        }
    };
    if *first == "**" {
        walk(root, prefix, tail, vars.clone(), out, strict)?;
        if let Ok(entries) = std::fs::read_dir(&here) {
            for e in entries.flatten() {
                if skip(&e.file_name().to_string_lossy()) || !e.path().is_dir() {
                    continue;
                }
                let name = match entry_name(&e, prefix) {
                    Ok(n) => n,
                    Err(m) if strict => return Err(m),
                    Err(_) => continue,
                };
                walk(root, &join(&name), rest, vars.clone(), out, strict)?;
            }
        }
        return Ok(());
    }
    if !is_pattern(first) {
        return walk(root, &join(first), tail, vars, out, strict);
    }
    let (re, names) = component_regex(first);
    let Ok(entries) = std::fs::read_dir(&here) else {
        return Ok(());
    };
    let mut names_sorted: Vec<String> = Vec::new();
    for e in entries.flatten() {
        let lossy = e.file_name().to_string_lossy().to_string();
        if skip(&lossy) || !re.is_match(&lossy) {
            continue;
        }
        match entry_name(&e, prefix) {
            Ok(n) => names_sorted.push(n),
            Err(m) if strict => return Err(m),
            Err(_) => {}
        }
    }
    names_sorted.sort();
    'entry: for name in names_sorted {
        let Some(caps) = re.captures(&name) else {
            continue;
        };
        let mut v = vars.clone();
        for (i, var) in names.iter().enumerate() {
            let value = caps
                .get(i + 1)
                .map(|m| m.as_str().to_string())
                .unwrap_or_default();
            match v.get(var) {
                Some(existing) if *existing != value => continue 'entry,
                _ => {
                    v.insert(var.clone(), value);
                }
            }
        }
        walk(root, &join(&name), tail, v, out, strict)?;
    }
    Ok(())
}

/// All files named by `pattern` (a folder names every file below it), relative to `root`; a
/// file jb cannot represent is an error (not skipped).
pub fn try_expand_files(root: &Path, pattern: &str) -> Result<Vec<String>, String> {
    let mut files = Vec::new();
    for (path, _) in try_match_pattern(root, pattern)? {
        collect_files(root, &path, &mut files)?;
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// [`try_expand_files`], leaving out names jb cannot represent (for jb's own files).
pub fn expand_files(root: &Path, pattern: &str) -> Vec<String> {
    try_expand_files(root, pattern).unwrap_or_else(|_| {
        let mut files = Vec::new();
        for (path, _) in match_pattern(root, pattern) {
            let _ = collect_files(root, &path, &mut files);
        }
        files.sort();
        files.dedup();
        files
    })
}

fn collect_files(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), String> {
    let full = root.join(rel);
    if full.is_file() {
        out.push(rel.to_string());
    } else if full.is_dir() {
        if let Ok(entries) = std::fs::read_dir(&full) {
            for e in entries.flatten() {
                if skip(&e.file_name().to_string_lossy()) {
                    continue;
                }
                let name = entry_name(&e, rel)?;
                collect_files(root, &format!("{rel}/{name}"), out)?;
            }
        }
    }
    Ok(())
}

/// The roots a pipeline's paths must stay in: the project, and the outside roots the pipeline
/// allows (`allow_outside:`), each as given and as resolved (symbolic links followed).
#[derive(Debug, Clone)]
pub struct Roots {
    roots: Vec<PathBuf>,
}

/// `..` and `.` taken out without touching the filesystem.
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path with every symbolic link resolved, as far as it exists (the rest appended).
fn resolved(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return lexical(&out);
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

impl Roots {
    pub fn new(project_root: &Path, allowed: &[PathBuf]) -> Roots {
        let mut roots = Vec::new();
        for r in std::iter::once(project_root).chain(allowed.iter().map(PathBuf::as_path)) {
            let l = lexical(r);
            roots.push(resolved(&l));
            roots.push(l);
        }
        roots.dedup();
        Roots { roots }
    }

    fn inside(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| p.starts_with(r))
    }

    /// Check one path a pipeline names (relative to the project root, or absolute): it must
    /// stay inside the project or an allowed root, both as written (`..`, absolute) and once
    /// symbolic links are followed. The reason says which.
    pub fn check(&self, root: &Path, path: &str) -> Result<(), String> {
        if path.chars().any(char::is_control) {
            return Err(format!(
                "path {path:?} holds a newline or control character"
            ));
        }
        let full = lexical(&root.join(path));
        if !self.inside(&full) {
            let how = if Path::new(path).is_absolute() {
                "an absolute path"
            } else {
                "a `..` path"
            };
            return Err(format!(
                "`{path}` is {how} outside the project ({}); list an outside root in `allow_outside:` to allow it",
                full.display()
            ));
        }
        let real = resolved(&full);
        if !self.inside(&real) {
            return Err(format!(
                "`{path}` leads through a symbolic link to {}, outside the project; list an outside root in `allow_outside:` to allow it",
                real.display()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_bind_components() {
        let dir = tempfile::tempdir().unwrap();
        for p in [
            "w/1p_A/workload.py",
            "w/2p_B/workload.py",
            "w/2p_B/extra.py",
            "c/1p_A/k1.py",
            "c/1p_A/k2.py",
        ] {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "x").unwrap();
        }
        let m = match_pattern(dir.path(), "w/{workload}/workload.py");
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].1["workload"], "2p_B");
        let m = match_pattern(dir.path(), "c/{workload}/{candidate}.py");
        assert_eq!(
            m.iter()
                .map(|x| x.1["candidate"].clone())
                .collect::<Vec<_>>(),
            ["k1", "k2"]
        );
        assert_eq!(
            expand_files(dir.path(), "w/2p_B"),
            ["w/2p_B/extra.py", "w/2p_B/workload.py"]
        );
        assert_eq!(expand_files(dir.path(), "**/k*.py").len(), 2);
    }

    #[test]
    fn absolute_paths_outside_the_root() {
        let root = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let f = other.path().join("k.py");
        std::fs::write(&f, "x").unwrap();
        let abs = f.to_string_lossy().to_string();
        assert_eq!(expand_files(root.path(), &abs), vec![abs.clone()]);
        // Joined onto any root, the absolute path is the file itself.
        assert!(root.path().join(&abs).is_file());
        assert!(expand_files(root.path(), &format!("{abs}.missing")).is_empty());
    }

    #[test]
    fn unrepresentable_names_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c/ok.py"), "x").unwrap();
        std::fs::write(dir.path().join("c/a\nb.py"), "x").unwrap();
        let e = try_match_pattern(dir.path(), "c/{candidate}.py").unwrap_err();
        assert_eq!(match_pattern(dir.path(), "c/{candidate}.py").len(), 1);
        assert!(e.contains("c/a\\nb.py") && e.contains("newline"), "{e}");
        let e = try_expand_files(dir.path(), "c").unwrap_err();
        assert!(e.contains("newline"), "{e}");
        // A name that does not match the pattern is not an error.
        assert_eq!(try_match_pattern(dir.path(), "c/ok.py").unwrap().len(), 1);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::ffi::OsStrExt;
            let d2 = tempfile::tempdir().unwrap();
            std::fs::write(
                d2.path().join(std::ffi::OsStr::from_bytes(b"k\xff.py")),
                "x",
            )
            .unwrap();
            let e = try_match_pattern(d2.path(), "{k}.py").unwrap_err();
            assert!(e.contains("not UTF-8"), "{e}");
        }
    }

    #[test]
    fn paths_stay_inside_the_project() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("w")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("w/link")).unwrap();
        let r = Roots::new(root.path(), &[]);
        assert!(r.check(root.path(), "w/x.py").is_ok());
        assert!(r.check(root.path(), "w/../w/x.py").is_ok());
        assert!(r.check(root.path(), "out/new/file.txt").is_ok());
        let e = r.check(root.path(), "../etc/passwd").unwrap_err();
        assert!(e.contains("`..` path outside"), "{e}");
        let e = r.check(root.path(), "/etc/passwd").unwrap_err();
        assert!(e.contains("absolute path outside"), "{e}");
        let e = r.check(root.path(), "w/link/secret").unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let allowed = Roots::new(root.path(), &[outside.path().to_path_buf()]);
        assert!(allowed.check(root.path(), "w/link/secret").is_ok());
        let abs = outside.path().join("k.py");
        assert!(allowed.check(root.path(), &abs.to_string_lossy()).is_ok());
        assert!(allowed.check(root.path(), "/etc/passwd").is_err());
    }
}
