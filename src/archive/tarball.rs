//! Deterministic tar + zstd: sorted entries with fixed metadata, written and read as a stream.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::ArchiveError;

/// The zstd level of new archives.
pub const DEFAULT_LEVEL: i32 = 9;

pub struct Writer {
    builder: tar::Builder<zstd::Encoder<'static, BufWriter<File>>>,
    last: Option<String>,
    path: PathBuf,
}

impl Writer {
    pub fn create(path: &Path, level: i32) -> Result<Writer, ArchiveError> {
        let file = File::create(path).map_err(|e| ArchiveError::io(path, e))?;
        let mut enc = zstd::Encoder::new(BufWriter::new(file), level)
            .map_err(|e| ArchiveError::io(path, e))?;
        enc.include_checksum(true)
            .map_err(|e| ArchiveError::io(path, e))?;
        let mut builder = tar::Builder::new(enc);
        builder.mode(tar::HeaderMode::Deterministic);
        Ok(Writer {
            builder,
            last: None,
            path: path.to_path_buf(),
        })
    }

    /// Append an entry; entries must come in strictly increasing path order.
    pub fn add(&mut self, name: &str, data: &[u8]) -> Result<(), ArchiveError> {
        if self.last.as_deref().is_some_and(|l| l >= name) {
            return Err(ArchiveError::Other(format!(
                "archive entries out of order: {} then {name}",
                self.last.as_deref().unwrap_or("")
            )));
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h.set_username("")
            .and_then(|_| h.set_groupname(""))
            .map_err(|e| ArchiveError::io(&self.path, e))?;
        self.builder
            .append_data(&mut h, name, data)
            .map_err(|e| ArchiveError::io(&self.path, e))?;
        self.last = Some(name.to_string());
        Ok(())
    }

    pub fn finish(self) -> Result<(), ArchiveError> {
        let path = self.path.clone();
        let enc = self
            .builder
            .into_inner()
            .map_err(|e| ArchiveError::io(&path, e))?;
        let mut out = enc.finish().map_err(|e| ArchiveError::io(&path, e))?;
        out.flush().map_err(|e| ArchiveError::io(&path, e))?;
        out.into_inner()
            .map_err(|e| ArchiveError::io(&path, e.into_error()))?
            .sync_all()
            .map_err(|e| ArchiveError::io(&path, e))?;
        Ok(())
    }
}

/// Call `f` with every entry (path, content) in archive order. A file that does not decode is
/// `Unreadable`.
pub fn for_each_entry(
    path: &Path,
    mut f: impl FnMut(&str, Vec<u8>) -> Result<(), ArchiveError>,
) -> Result<(), ArchiveError> {
    let unreadable = |m: String| ArchiveError::Unreadable {
        path: path.to_path_buf(),
        message: m,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ArchiveError::NotFound(path.to_path_buf()))
        }
        Err(e) => return Err(ArchiveError::io(path, e)),
    };
    let dec = zstd::Decoder::new(BufReader::new(file)).map_err(|e| unreadable(e.to_string()))?;
    let mut ar = tar::Archive::new(dec);
    let entries = ar.entries().map_err(|e| unreadable(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| unreadable(e.to_string()))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(unreadable(format!(
                "unexpected entry type {:?}",
                entry.header().entry_type()
            )));
        }
        let name = entry
            .path()
            .map_err(|e| unreadable(e.to_string()))?
            .to_string_lossy()
            .to_string();
        let mut data = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut data)
            .map_err(|e| unreadable(format!("{name}: {e}")))?;
        f(&name, data)?;
    }
    // Read to the end so that zstd checks its content checksum over the whole frame.
    let mut rest = ar.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink()).map_err(|e| unreadable(e.to_string()))?;
    Ok(())
}
