//! Path patterns: `{var}` placeholders (one path component each) and `*`/`?` globs.

use std::path::Path;

use indexmap::IndexMap;

fn skip(name: &str) -> bool {
    name.starts_with('.') || name == "__pycache__"
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
    (
        regex::Regex::new(&re).expect("valid component regex"),
        names,
    )
}

fn is_pattern(component: &str) -> bool {
    component.contains(['{', '*', '?'])
}

/// Every existing path under `root` matching `pattern`, with the placeholder bindings, sorted by
/// path. `**` matches any number of folders.
pub fn match_pattern(root: &Path, pattern: &str) -> Vec<(String, IndexMap<String, String>)> {
    // An absolute pattern (a candidate kernel outside the project) matches absolute paths.
    if let Some(rest) = pattern.strip_prefix('/') {
        if root != Path::new("/") {
            let mut out = match_pattern(Path::new("/"), rest);
            for (p, _) in &mut out {
                p.insert(0, '/');
            }
            return out;
        }
    }
    let components: Vec<&str> = pattern
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let mut out = Vec::new();
    walk(root, "", &components, IndexMap::new(), &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn walk(
    root: &Path,
    prefix: &str,
    rest: &[&str],
    vars: IndexMap<String, String>,
    out: &mut Vec<(String, IndexMap<String, String>)>,
) {
    let here = if prefix.is_empty() {
        root.to_path_buf()
    } else {
        root.join(prefix)
    };
    let Some((first, tail)) = rest.split_first() else {
        if here.exists() {
            out.push((prefix.to_string(), vars));
        }
        return;
    };
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        }
    };
    if *first == "**" {
        walk(root, prefix, tail, vars.clone(), out);
        if let Ok(entries) = std::fs::read_dir(&here) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if !skip(&name) && e.path().is_dir() {
                    walk(root, &join(&name), rest, vars.clone(), out);
                }
            }
        }
        return;
    }
    if !is_pattern(first) {
        walk(root, &join(first), tail, vars, out);
        return;
    }
    let (re, names) = component_regex(first);
    let Ok(entries) = std::fs::read_dir(&here) else {
        return;
    };
    let mut names_sorted: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !skip(n))
        .collect();
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
        walk(root, &join(&name), tail, v, out);
    }
}

/// All files named by `pattern` (a folder names every file below it), relative to `root`.
pub fn expand_files(root: &Path, pattern: &str) -> Vec<String> {
    let mut files = Vec::new();
    for (path, _) in match_pattern(root, pattern) {
        collect_files(root, &path, &mut files);
    }
    files.sort();
    files.dedup();
    files
}

fn collect_files(root: &Path, rel: &str, out: &mut Vec<String>) {
    let full = root.join(rel);
    if full.is_file() {
        out.push(rel.to_string());
    } else if full.is_dir() {
        if let Ok(entries) = std::fs::read_dir(&full) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if !skip(&name) {
                    collect_files(root, &format!("{rel}/{name}"), out);
                }
            }
        }
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
}
