//! Entry paths of an archive, validated on their own: what each path may be, and what kind of
//! entry it names.

/// What an entry is, from its path alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `MANIFEST.json`
    Manifest,
    /// `MANIFEST.sig`: the ed25519 signature of the manifest.
    Signature,
    /// `blobs/<blake3>`
    Blob,
    /// `records/<key>.json`
    Record,
    /// `latest.json`
    Latest,
    /// `runs.json`
    Runs,
    /// `tables/<name>.json`
    Table,
    /// `pipelines/<file>.yaml`
    Pipeline,
    /// `sources/<path>`
    Source,
}

impl Kind {
    /// Whether jb reads the entry into memory to parse it (else it is streamed and hashed).
    pub fn parsed(self) -> bool {
        !matches!(self, Kind::Blob | Kind::Pipeline | Kind::Source)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Kind::Manifest => "the manifest",
            Kind::Signature => "the signature",
            Kind::Blob => "a blob",
            Kind::Record => "a record",
            Kind::Latest => "latest.json",
            Kind::Runs => "runs.json",
            Kind::Table => "a table",
            Kind::Pipeline => "a pipeline",
            Kind::Source => "a source file",
        }
    }
}

/// An entry path as shown in messages: escaped, on one line, at most 200 characters.
pub fn shown(raw: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(raw)
        .chars()
        .flat_map(char::escape_debug)
        .collect();
    if s.chars().count() > 200 {
        format!("`{}...`", s.chars().take(200).collect::<String>())
    } else {
        format!("`{s}`")
    }
}

pub fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A name an extension table or column may have: `[A-Za-z_][A-Za-z0-9_]*`, at most 64 bytes.
pub fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    s.len() <= 64
        && matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Check an entry path on its own and say what it names. The reason says what is wrong: an
/// absolute path, a `..` component, a character that has no place in a path, an unknown entry.
pub fn classify(raw: &[u8]) -> Result<(String, Kind), String> {
    let name = std::str::from_utf8(raw).map_err(|_| "the path is not UTF-8".to_string())?;
    if name.is_empty() {
        return Err("an empty path".into());
    }
    if name.len() > 4096 {
        return Err("a path longer than 4096 bytes".into());
    }
    if name.starts_with('/') {
        return Err("an absolute path (entries are relative to the archive)".into());
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the path holds the control character {:?}",
            c.escape_debug().to_string()
        ));
    }
    if name.contains('\\') {
        return Err("the path holds a backslash".into());
    }
    let parts: Vec<&str> = name.split('/').collect();
    for p in &parts {
        match *p {
            ".." => return Err("a `..` component (a path that leaves the archive)".into()),
            "." => return Err("a `.` component".into()),
            "" => return Err("an empty path component (`//` or a trailing `/`)".into()),
            _ => {}
        }
    }
    let kind = match parts.as_slice() {
        ["MANIFEST.json"] => Kind::Manifest,
        ["MANIFEST.sig"] => Kind::Signature,
        ["latest.json"] => Kind::Latest,
        ["runs.json"] => Kind::Runs,
        ["blobs", d] if is_hex64(d) => Kind::Blob,
        ["records", f] if f.strip_suffix(".json").is_some_and(is_hex64) => Kind::Record,
        ["tables", f] if f.strip_suffix(".json").is_some_and(is_ident) => Kind::Table,
        ["pipelines", f] if f.ends_with(".yaml") || f.ends_with(".yml") => Kind::Pipeline,
        ["sources", _, ..] => Kind::Source,
        _ => {
            return Err(
                "not an entry a jb archive holds (MANIFEST.json, MANIFEST.sig, latest.json, \
                 runs.json, blobs/<blake3>, records/<key>.json, tables/<name>.json, \
                 pipelines/<file>.yaml, sources/<path>)"
                    .into(),
            )
        }
    };
    Ok((name.to_string(), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked_on_their_own() {
        let h = "a".repeat(64);
        assert_eq!(
            classify(format!("blobs/{h}").as_bytes()).unwrap().1,
            Kind::Blob
        );
        assert_eq!(
            classify(b"sources/workloads/x/workload.py").unwrap().1,
            Kind::Source
        );
        for (bad, why) in [
            (&b"../etc/passwd"[..], "`..`"),
            (b"sources/../../x", "`..`"),
            (b"/etc/passwd", "absolute"),
            (b"sources//x", "empty path component"),
            (b"sources/./x", "`.` component"),
            (b"sources/a\nb", "control character"),
            (b"sources/\xff", "not UTF-8"),
            (b"blobs/xyz", "not an entry"),
            (b"tables/x;DROP.json", "not an entry"),
            (b"evil.sh", "not an entry"),
        ] {
            let e = classify(bad).unwrap_err();
            assert!(e.contains(why), "{}: {e}", shown(bad));
        }
        assert!(is_ident("ext_samples") && !is_ident("1x") && !is_ident("a b"));
    }
}
