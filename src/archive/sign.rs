//! Signed archives: an ed25519 signature of `MANIFEST.json` in `MANIFEST.sig`.
//!
//! The manifest lists every entry's digest, every record's key, output digest and measurement
//! digest, so a signature over it covers the whole archive. Digests alone say the archive is
//! self-consistent (a forger recomputes them); a signature that checks against a key you trust
//! says who produced the results.
//!
//! Keys: `jb archive keygen` writes an OpenSSH ed25519 key pair (unencrypted private key, mode
//! 0600, and `.pub`). Existing keys work too: an OpenSSH ed25519 private key (unencrypted) or
//! public key (`ssh-ed25519 AAAA...`), and a minisign key pair (public key file; secret key only
//! when unencrypted, `minisign -G -W`). The signature is jb's own (pure ed25519 over a prefixed
//! manifest), not a minisign or SSHSIG signature: the tools' keys are reused, not their formats.

use std::path::Path;

use base64::Engine;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use super::ArchiveError;

/// What is signed: this prefix, then the manifest's bytes.
const CONTEXT: &[u8] = b"jb-archive/2 MANIFEST.json\n";

/// `MANIFEST.sig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureEntry {
    pub algorithm: String,
    /// The signer's public key, as an OpenSSH public key line.
    pub public_key: String,
    /// Its SHA256 fingerprint (as `ssh-keygen -l` prints it).
    pub fingerprint: String,
    /// The key's comment (who says they signed; only a trusted key makes it true).
    pub comment: String,
    /// Hex of the 64-byte signature.
    pub signature: String,
}

pub struct SecretKey {
    key: SigningKey,
    pub comment: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    pub key: VerifyingKey,
    pub comment: String,
}

impl PublicKey {
    pub fn fingerprint(&self) -> String {
        ssh_public(&self.key, "")
            .fingerprint(ssh_key::HashAlg::Sha256)
            .to_string()
    }

    pub fn openssh(&self) -> String {
        ssh_public(&self.key, &self.comment)
            .to_openssh()
            .unwrap_or_default()
    }
}

fn ssh_public(key: &VerifyingKey, comment: &str) -> ssh_key::PublicKey {
    ssh_key::PublicKey::new(
        ssh_key::public::KeyData::Ed25519(ssh_key::public::Ed25519PublicKey(key.to_bytes())),
        comment,
    )
}

fn key_err(path: &Path, message: impl Into<String>) -> ArchiveError {
    ArchiveError::Key {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read_text(path: &Path) -> Result<String, ArchiveError> {
    let meta = std::fs::metadata(path).map_err(|e| key_err(path, e.to_string()))?;
    if meta.len() > 64 << 10 {
        return Err(key_err(path, "too large for a key file"));
    }
    std::fs::read_to_string(path).map_err(|e| key_err(path, e.to_string()))
}

/// The minisign key lines: (untrusted comment, decoded base64 payload).
fn minisign(text: &str) -> Option<(String, Vec<u8>)> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let comment = lines.next()?.strip_prefix("untrusted comment:")?.trim();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(lines.next()?)
        .ok()?;
    Some((comment.to_string(), payload))
}

/// A secret key: OpenSSH ed25519 (unencrypted) or minisign (unencrypted).
pub fn load_secret(path: &Path) -> Result<SecretKey, ArchiveError> {
    let text = read_text(path)?;
    if text.contains("-----BEGIN OPENSSH PRIVATE KEY-----") {
        let k = ssh_key::PrivateKey::from_openssh(&text)
            .map_err(|e| key_err(path, format!("not a readable OpenSSH private key: {e}")))?;
        if k.is_encrypted() {
            return Err(key_err(
                path,
                "an encrypted OpenSSH key: jb signs with unencrypted keys only (a copy without a passphrase: `ssh-keygen -p -N '' -f COPY`)",
            ));
        }
        let ssh_key::private::KeypairData::Ed25519(kp) = k.key_data() else {
            return Err(key_err(
                path,
                format!("a {} key, not ed25519", k.algorithm()),
            ));
        };
        return Ok(SecretKey {
            key: SigningKey::from_bytes(&kp.private.to_bytes()),
            comment: k.comment().to_string(),
        });
    }
    if let Some((comment, p)) = minisign(&text) {
        // sig alg, kdf alg, checksum alg, salt 32, opslimit 8, memlimit 8, key id 8, sk 64, cksum 32
        if p.len() != 158 || &p[..2] != b"Ed" {
            return Err(key_err(path, "not a minisign ed25519 secret key"));
        }
        if p[2..4] != [0, 0] {
            return Err(key_err(
                path,
                "an encrypted minisign secret key: jb reads unencrypted ones only (`minisign -G -W`)",
            ));
        }
        let sk = &p[62..126];
        let seed: [u8; 32] = sk[..32].try_into().expect("32 bytes");
        let key = SigningKey::from_bytes(&seed);
        if key.verifying_key().as_bytes() != &sk[32..] {
            return Err(key_err(
                path,
                "minisign secret key whose public half does not match",
            ));
        }
        return Ok(SecretKey { key, comment });
    }
    Err(key_err(
        path,
        "not a secret key jb reads (OpenSSH ed25519 private key, minisign secret key, or one from `jb archive keygen`)",
    ))
}

/// A public key: an OpenSSH `ssh-ed25519` line, a minisign public key, or a private key file
/// (its public half).
pub fn load_public(path: &Path) -> Result<PublicKey, ArchiveError> {
    let text = read_text(path)?;
    let trimmed = text.trim();
    if trimmed.starts_with("ssh-") {
        let k = ssh_key::PublicKey::from_openssh(trimmed)
            .map_err(|e| key_err(path, format!("not a readable OpenSSH public key: {e}")))?;
        let ssh_key::public::KeyData::Ed25519(pk) = k.key_data() else {
            return Err(key_err(
                path,
                format!("a {} key, not ed25519", k.algorithm()),
            ));
        };
        let key = VerifyingKey::from_bytes(&pk.0)
            .map_err(|e| key_err(path, format!("not a valid ed25519 public key: {e}")))?;
        return Ok(PublicKey {
            key,
            comment: k.comment().to_string(),
        });
    }
    if let Some((comment, p)) = minisign(&text) {
        if p.len() == 42 && &p[..2] == b"Ed" {
            let bytes: [u8; 32] = p[10..].try_into().expect("32 bytes");
            let key = VerifyingKey::from_bytes(&bytes)
                .map_err(|e| key_err(path, format!("not a valid ed25519 public key: {e}")))?;
            return Ok(PublicKey { key, comment });
        }
    }
    match load_secret(path) {
        Ok(s) => Ok(PublicKey {
            key: s.key.verifying_key(),
            comment: s.comment,
        }),
        Err(_) => Err(key_err(
            path,
            "not a public key jb reads (an `ssh-ed25519 ...` line, a minisign public key, or a key from `jb archive keygen`)",
        )),
    }
}

/// Write a new key pair: `out` (OpenSSH private key, mode 0600) and `out.pub`.
pub fn keygen(out: &Path, comment: &str, force: bool) -> Result<PublicKey, ArchiveError> {
    let public_path = pub_path(out);
    for p in [out, public_path.as_path()] {
        if !force && p.exists() {
            return Err(key_err(p, "exists (add --force to replace it)"));
        }
    }
    let mut rng = ssh_key::rand_core::OsRng;
    let kp = ssh_key::private::Ed25519Keypair::random(&mut rng);
    let public = PublicKey {
        key: VerifyingKey::from_bytes(&kp.public.0)
            .map_err(|e| ArchiveError::Other(e.to_string()))?,
        comment: comment.to_string(),
    };
    let private = ssh_key::PrivateKey::new(ssh_key::private::KeypairData::Ed25519(kp), comment)
        .map_err(|e| ArchiveError::Other(e.to_string()))?;
    let text = private
        .to_openssh(ssh_key::LineEnding::LF)
        .map_err(|e| ArchiveError::Other(e.to_string()))?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| ArchiveError::io(dir, e))?;
    }
    write_private(out, text.as_bytes())?;
    std::fs::write(&public_path, format!("{}\n", public.openssh()))
        .map_err(|e| ArchiveError::io(&public_path, e))?;
    Ok(public)
}

pub fn pub_path(out: &Path) -> std::path::PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".pub");
    s.into()
}

fn write_private(path: &Path, data: &[u8]) -> Result<(), ArchiveError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| ArchiveError::io(path, e))?;
    f.write_all(data).map_err(|e| ArchiveError::io(path, e))
}

fn message(manifest: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(CONTEXT.len() + manifest.len());
    m.extend_from_slice(CONTEXT);
    m.extend_from_slice(manifest);
    m
}

pub fn sign(manifest: &[u8], key: &SecretKey) -> SignatureEntry {
    let public = PublicKey {
        key: key.key.verifying_key(),
        comment: key.comment.clone(),
    };
    let sig = key.key.sign(&message(manifest));
    SignatureEntry {
        algorithm: "ed25519".into(),
        public_key: public.openssh(),
        fingerprint: public.fingerprint(),
        comment: key.comment.clone(),
        signature: sig.to_bytes().iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// Check a signature against the key it names; the signer's key when it holds.
pub fn check(manifest: &[u8], sig: &SignatureEntry) -> Result<PublicKey, String> {
    if sig.algorithm != "ed25519" {
        return Err(format!("unknown signature algorithm `{}`", sig.algorithm));
    }
    let k = ssh_key::PublicKey::from_openssh(sig.public_key.trim())
        .map_err(|e| format!("the signer's public key does not read: {e}"))?;
    let ssh_key::public::KeyData::Ed25519(pk) = k.key_data() else {
        return Err("the signer's key is not ed25519".into());
    };
    let key = VerifyingKey::from_bytes(&pk.0)
        .map_err(|e| format!("the signer's public key is not valid: {e}"))?;
    let public = PublicKey {
        key,
        comment: sig.comment.clone(),
    };
    if public.fingerprint() != sig.fingerprint {
        return Err("the fingerprint does not match the signer's key".into());
    }
    let bytes: Vec<u8> = (0..sig.signature.len() / 2)
        .filter_map(|i| u8::from_str_radix(sig.signature.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|_| "the signature is not 64 bytes of hex".to_string())?;
    key.verify(&message(manifest), &Signature::from_bytes(&bytes))
        .map_err(|_| {
            format!(
                "the signature does not match the manifest (signer {})",
                public.fingerprint()
            )
        })?;
    Ok(public)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_sign_check_and_tamper() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("k");
        let public = keygen(&k, "tester", false).unwrap();
        assert!(keygen(&k, "again", false).is_err(), "no silent overwrite");
        let secret = load_secret(&k).unwrap();
        let pub_file = load_public(&pub_path(&k)).unwrap();
        assert_eq!(pub_file.key, public.key);
        assert_eq!(load_public(&k).unwrap().key, public.key);
        let sig = sign(b"{\"a\": 1}", &secret);
        assert_eq!(check(b"{\"a\": 1}", &sig).unwrap().key, public.key);
        assert!(check(b"{\"a\": 2}", &sig).is_err());
        // Another key's public half in the entry: its fingerprint or signature fails.
        let other = keygen(&dir.path().join("o"), "other", false).unwrap();
        let mut forged = sig.clone();
        forged.public_key = other.openssh();
        assert!(check(b"{\"a\": 1}", &forged).is_err());
        forged.fingerprint = other.fingerprint();
        assert!(check(b"{\"a\": 1}", &forged).is_err());
    }

    #[test]
    fn minisign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let seed = [7u8; 32];
        let sk = SigningKey::from_bytes(&seed);
        let pk = sk.verifying_key().to_bytes();
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let mut public = b"Ed".to_vec();
        public.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        public.extend_from_slice(&pk);
        let pub_file = dir.path().join("m.pub");
        std::fs::write(
            &pub_file,
            format!("untrusted comment: minisign public key\n{}\n", b64(&public)),
        )
        .unwrap();
        assert_eq!(load_public(&pub_file).unwrap().key, sk.verifying_key());
        let mut secret = b"Ed\0\0B2".to_vec();
        secret.extend_from_slice(&[0u8; 48]);
        secret.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        secret.extend_from_slice(&seed);
        secret.extend_from_slice(&pk);
        secret.extend_from_slice(&[0u8; 32]);
        let sec_file = dir.path().join("m.key");
        std::fs::write(
            &sec_file,
            format!("untrusted comment: minisign secret key\n{}\n", b64(&secret)),
        )
        .unwrap();
        let s = load_secret(&sec_file).unwrap();
        assert_eq!(
            check(b"m", &sign(b"m", &s)).unwrap().key,
            sk.verifying_key()
        );
        secret[2] = b'S';
        secret[3] = b'c';
        std::fs::write(
            &sec_file,
            format!("untrusted comment: x\n{}\n", b64(&secret)),
        )
        .unwrap();
        assert!(load_secret(&sec_file)
            .err()
            .unwrap()
            .to_string()
            .contains("encrypted"));
    }
}
