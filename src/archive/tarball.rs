//! Deterministic tar + zstd: sorted entries with fixed metadata, written and read as a stream.
//!
//! The reader is jb's own: it checks every header (checksum, entry type, path, size against the
//! limit of its kind) before it reads or allocates anything, and hands each entry to the caller
//! as a bounded stream, so neither a header that claims a terabyte nor a gigabyte of zeros that
//! compresses to a few bytes costs more than a fixed amount of memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::entry::{self, Kind};
use super::ArchiveError;

/// The zstd level of new archives.
pub const DEFAULT_LEVEL: i32 = 9;

/// The most bytes one entry jb parses (manifest, signature, records, tables, ...) may hold.
pub const MAX_PARSED_ENTRY: u64 = 256 << 20;
/// The most bytes one streamed entry (a blob, a source, a pipeline) may hold.
pub const MAX_STREAMED_ENTRY: u64 = 64 << 30;
/// The most entries one archive may hold.
pub const MAX_ENTRIES: usize = 4_000_000;
/// The most bytes of a GNU long-name or pax extension header.
const MAX_EXTENSION: u64 = 64 << 10;
/// The zstd window of the decoder (the format's default limit, 128 MiB).
const MAX_WINDOW_LOG: u32 = 27;

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

    /// Append an entry; entries must come in strictly increasing path order (the manifest and
    /// its signature first).
    pub fn add(&mut self, name: &str, data: &[u8]) -> Result<(), ArchiveError> {
        self.add_reader(name, data.len() as u64, data)
    }

    /// Append an entry of `size` bytes read from `data` (streamed).
    pub fn add_reader(
        &mut self,
        name: &str,
        size: u64,
        data: impl Read,
    ) -> Result<(), ArchiveError> {
        if self.last.as_deref().is_some_and(|l| l >= name) {
            return Err(ArchiveError::Other(format!(
                "archive entries out of order: {} then {name}",
                self.last.as_deref().unwrap_or("")
            )));
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(size);
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

/// One entry as the reader hands it over: its validated path, kind and size, and its content as
/// a stream of exactly `size` bytes.
pub struct EntryRef<'a> {
    pub name: &'a str,
    pub kind: Kind,
    pub size: u64,
    pub data: &'a mut dyn Read,
}

impl EntryRef<'_> {
    /// The whole content (only for kinds jb parses: their size is already within
    /// [`MAX_PARSED_ENTRY`]).
    pub fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size.min(1 << 20) as usize);
        self.data.read_to_end(&mut out)?;
        Ok(out)
    }

    /// The blake3 digest of the content, streamed.
    pub fn hash(&mut self) -> std::io::Result<String> {
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = self.data.read(&mut buf)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(h.finalize().to_hex().to_string())
    }
}

/// The most bytes an entry of this kind may hold.
pub fn limit(kind: Kind) -> u64 {
    if kind.parsed() {
        MAX_PARSED_ENTRY
    } else {
        MAX_STREAMED_ENTRY
    }
}

/// A reader that counts what it hands out.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Read exactly one 512-byte block; `Ok(false)` at a clean end of stream.
fn read_block(r: &mut impl Read, block: &mut [u8; 512]) -> std::io::Result<bool> {
    let mut got = 0;
    while got < 512 {
        match r.read(&mut block[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the archive ends inside a tar header",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn skip(r: &mut impl Read, n: u64) -> std::io::Result<u64> {
    std::io::copy(&mut r.take(n), &mut std::io::sink())
}

fn checksum_ok(block: &[u8; 512], header: &tar::Header) -> bool {
    let Ok(claimed) = header.cksum() else {
        return false;
    };
    let sum: u32 = block
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if (148..156).contains(&i) {
                32
            } else {
                *b as u32
            }
        })
        .sum();
    sum == claimed
}

/// What an entry that is not a regular file is, for the reason that refuses it.
fn refused_type(t: tar::EntryType) -> &'static str {
    match t {
        tar::EntryType::Symlink => "a symbolic link",
        tar::EntryType::Link => "a hard link",
        tar::EntryType::Char => "a character device",
        tar::EntryType::Block => "a block device",
        tar::EntryType::Directory => "a directory",
        tar::EntryType::Fifo => "a FIFO",
        tar::EntryType::GNUSparse => "a sparse file",
        tar::EntryType::XGlobalHeader => "a global pax header",
        _ => "an entry of an unsupported type",
    }
}

/// The `path` and `size` records of a pax extension header.
fn pax_fields(data: &[u8]) -> Result<(Option<Vec<u8>>, Option<u64>), String> {
    let mut path = None;
    let mut size = None;
    let mut rest = data;
    while !rest.is_empty() {
        let sp = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or("malformed pax record")?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .filter(|l| *l > sp + 1 && *l <= rest.len())
            .ok_or("malformed pax record length")?;
        let record = &rest[sp + 1..len];
        let record = record
            .strip_suffix(b"\n")
            .ok_or("pax record without newline")?;
        let eq = record
            .iter()
            .position(|b| *b == b'=')
            .ok_or("pax record without `=`")?;
        let (k, v) = (&record[..eq], &record[eq + 1..]);
        match k {
            b"path" => path = Some(v.to_vec()),
            b"size" => {
                size = Some(
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or("pax size is not a number")?,
                )
            }
            b"linkpath" => return Err("pax header names a link target".into()),
            _ => {}
        }
        rest = &rest[len..];
    }
    Ok((path, size))
}

/// Call `f` with every entry in archive order. Any structural problem (a header that does not
/// check, a path that is not allowed, a size over its limit, a link or device, a truncated or
/// corrupt stream) is `Unreadable` with a one-line reason; nothing beyond a fixed buffer is
/// allocated for an entry the caller streams.
pub fn for_each_entry(
    path: &Path,
    mut f: impl FnMut(EntryRef<'_>) -> Result<(), ArchiveError>,
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
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(unreadable("a directory, not an archive".into()));
    }
    let mut dec =
        zstd::Decoder::new(BufReader::new(file)).map_err(|e| unreadable(e.to_string()))?;
    dec.window_log_max(MAX_WINDOW_LOG)
        .map_err(|e| unreadable(e.to_string()))?;
    let mut r = Counting {
        inner: dec,
        read: 0,
    };
    let io = |e: std::io::Error| unreadable(one_line(&e.to_string()));
    let mut block = [0u8; 512];
    let mut long_name: Option<Vec<u8>> = None;
    let mut pax: (Option<Vec<u8>>, Option<u64>) = (None, None);
    let mut count = 0usize;
    let mut last = String::from("the start");
    loop {
        let at = r.read;
        if !read_block(&mut r, &mut block).map_err(io)? {
            return Err(unreadable(format!(
                "the archive ends after {last} without an end-of-archive marker (truncated?)"
            )));
        }
        if block.iter().all(|b| *b == 0) {
            // End of archive: the rest is zero padding, and zstd checks its content checksum
            // when the frame is read to its end.
            let mut rest = [0u8; 8192];
            loop {
                let n = r.read(&mut rest).map_err(io)?;
                if n == 0 {
                    break;
                }
                if rest[..n].iter().any(|b| *b != 0) {
                    return Err(unreadable(
                        "data after the end-of-archive marker".to_string(),
                    ));
                }
            }
            return Ok(());
        }
        let header = tar::Header::from_byte_slice(&block);
        if !checksum_ok(&block, header) {
            return Err(unreadable(format!(
                "tar header at byte {at} (after {last}): checksum mismatch"
            )));
        }
        let size = match pax.1.take() {
            Some(s) => s,
            None => header
                .entry_size()
                .map_err(|e| unreadable(format!("tar header at byte {at}: {e}")))?,
        };
        let padding = (512 - size % 512) % 512;
        let t = header.entry_type();
        match t {
            tar::EntryType::GNULongName | tar::EntryType::XHeader => {
                if size > MAX_EXTENSION {
                    return Err(unreadable(format!(
                        "tar extension header at byte {at} claims {size} bytes (limit {MAX_EXTENSION})"
                    )));
                }
                let mut data = Vec::with_capacity(size as usize);
                (&mut r).take(size).read_to_end(&mut data).map_err(io)?;
                if (data.len() as u64) < size {
                    return Err(unreadable(format!(
                        "the archive ends inside the tar extension header at byte {at}"
                    )));
                }
                skip(&mut r, padding).map_err(io)?;
                if t == tar::EntryType::GNULongName {
                    while data.last() == Some(&0) {
                        data.pop();
                    }
                    long_name = Some(data);
                } else {
                    pax = pax_fields(&data)
                        .map_err(|m| unreadable(format!("pax header at byte {at}: {m}")))?;
                }
                continue;
            }
            _ => {}
        }
        let raw: Vec<u8> = match long_name.take().or(pax.0.take()) {
            Some(n) => n,
            None => header.path_bytes().into_owned(),
        };
        let shown = entry::shown(&raw);
        if !matches!(t, tar::EntryType::Regular | tar::EntryType::Continuous) {
            let target = header
                .link_name_bytes()
                .map(|l| format!(" -> {}", entry::shown(&l)))
                .unwrap_or_default();
            return Err(unreadable(format!(
                "entry {shown}{target} is {}: jb archives hold regular files only",
                refused_type(t)
            )));
        }
        let (name, kind) =
            entry::classify(&raw).map_err(|m| unreadable(format!("entry {shown}: {m}")))?;
        let max = limit(kind);
        if size > max {
            return Err(unreadable(format!(
                "entry {name}: its header claims {size} bytes, over the limit of {max} for {}",
                kind.describe()
            )));
        }
        count += 1;
        if count > MAX_ENTRIES {
            return Err(unreadable(format!("more than {MAX_ENTRIES} entries")));
        }
        let start = r.read;
        {
            let mut take = (&mut r).take(size);
            f(EntryRef {
                name: &name,
                kind,
                size,
                data: &mut take,
            })
            .map_err(|e| match e {
                // An I/O error inside the stream is the archive's, with this entry named.
                ArchiveError::Io { source, .. } => {
                    unreadable(one_line(&format!("entry {name}: {source}")))
                }
                other => other,
            })?;
            skip(&mut take, u64::MAX).map_err(io)?;
        }
        let got = r.read - start;
        if got < size {
            return Err(unreadable(format!(
                "the archive ends inside entry {name} (its header says {size} bytes, {got} are there)"
            )));
        }
        skip(&mut r, padding).map_err(io)?;
        last = format!("entry {name}");
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The blake3 digest and size of a file, streamed.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = File::open(path)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    Ok((h.finalize().to_hex().to_string(), n_total))
}

/// A reader that hashes what passes through it.
pub struct Hashing<R> {
    inner: R,
    hasher: blake3::Hasher,
    pub bytes: u64,
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> Self {
        Hashing {
            inner,
            hasher: blake3::Hasher::new(),
            bytes: 0,
        }
    }

    pub fn digest(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}
