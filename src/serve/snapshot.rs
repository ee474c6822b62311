//! Prompt-cache snapshots on disk: a versioned file carrying the checkpoint's fingerprint, the prefix's key, its logits and the state bytes, sealed by a sha256.
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The first bytes of a snapshot file (the version is in the name): keys of u64 elements, image positions among them.
pub const MAGIC: &[u8; 8] = b"LKSNAP02";
/// The first version's magic: text-only keys of u32 token ids (still read).
pub const MAGIC_V1: &[u8; 8] = b"LKSNAP01";
/// The file extension.
pub const EXT: &str = "lksnap";

/// What a snapshot file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// The prefix the state consumed, as prompt-cache key elements.
    pub key: Vec<u64>,
    /// The logits of its last token.
    pub logits: Vec<f32>,
    /// `SeqState::to_bytes` of the state.
    pub state: Vec<u8>,
}

/// The file's bytes: magic, fingerprint, key, logits, state, then sha256 of everything before it.
pub fn encode(fingerprint: &[u8; 32], s: &Snapshot) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend(fingerprint);
    b.extend((s.key.len() as u64).to_le_bytes());
    s.key.iter().for_each(|t| b.extend(t.to_le_bytes()));
    b.extend((s.logits.len() as u64).to_le_bytes());
    s.logits.iter().for_each(|v| b.extend(v.to_bits().to_le_bytes()));
    b.extend((s.state.len() as u64).to_le_bytes());
    b.extend(&s.state);
    let seal = Sha256::digest(&b);
    b.extend(seal);
    b
}

/// Reads a file [`encode`] wrote; refused when truncated, corrupted, or made for another checkpoint.
pub fn decode(fingerprint: &[u8; 32], bytes: &[u8]) -> Result<Snapshot, String> {
    let v1 = bytes.get(..8) == Some(&MAGIC_V1[..]);
    if bytes.len() < MAGIC.len() + 32 + 32 || (&bytes[..8] != MAGIC && !v1) {
        return Err("not a lockstep snapshot of this version (bad magic or too short)".into());
    }
    let (body, seal) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != seal {
        return Err("checksum mismatch: the file is truncated or corrupted".into());
    }
    if &body[8..40] != fingerprint {
        return Err("made for another checkpoint (fingerprint differs)".into());
    }
    let mut at = 40;
    let u64_at = |at: &mut usize| -> Result<usize, String> {
        let s = body.get(*at..*at + 8).ok_or("truncated header")?;
        *at += 8;
        usize::try_from(u64::from_le_bytes(s.try_into().map_err(|_| "bad length")?)).map_err(|_| "length too large".to_string())
    };
    let words = |at: &mut usize, n: usize| -> Result<Vec<u32>, String> {
        let end = n.checked_mul(4).and_then(|b| b.checked_add(*at)).filter(|&e| e <= body.len()).ok_or("truncated data")?;
        let v = body[*at..end].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        *at = end;
        Ok(v)
    };
    let n = u64_at(&mut at)?;
    let key: Vec<u64> = if v1 {
        words(&mut at, n)?.into_iter().map(u64::from).collect()
    } else {
        let pairs = words(&mut at, n.checked_mul(2).ok_or("length overflow")?)?;
        pairs.chunks_exact(2).map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32)).collect()
    };
    if crate::testing::planted("snapshot") && key.iter().any(|&k| k >> 32 != 0 && k >> 63 == 0) {
        panic!("planted bug: a sealed key element above 32 bits");
    }
    let n = u64_at(&mut at)?;
    let logits = words(&mut at, n)?.into_iter().map(f32::from_bits).collect();
    let n = u64_at(&mut at)?;
    let state = body.get(at..at.checked_add(n).ok_or("length overflow")?).ok_or("truncated state")?.to_vec();
    if at + n != body.len() {
        return Err(format!("{} bytes after the state", body.len() - at - n));
    }
    Ok(Snapshot { key, logits, state })
}

/// The file name of a prefix: the sha256 of its key elements.
pub fn file_name(key: &[u64]) -> String {
    let mut h = Sha256::new();
    key.iter().for_each(|t| h.update(t.to_le_bytes()));
    let hex: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{hex}.{EXT}")
}

/// A folder of snapshots kept within a byte budget (the oldest files go first).
pub struct SnapshotDir {
    /// The folder.
    pub dir: PathBuf,
    /// Most bytes of snapshot files.
    pub budget: u64,
    /// The checkpoint's fingerprint.
    pub fingerprint: [u8; 32],
}

impl SnapshotDir {
    /// The folder `dir` (made if missing, then resolved once to its canonical path) holding at most `budget` bytes of snapshots of the checkpoint `fingerprint`.
    pub fn open(dir: &Path, budget: u64, fingerprint: [u8; 32]) -> Result<SnapshotDir, String> {
        usable(dir)?;
        let dir = std::fs::canonicalize(dir).map_err(|e| format!("snapshot dir {}: {e}", dir.display()))?;
        Ok(SnapshotDir { dir, budget, fingerprint })
    }

    /// Snapshot files in the folder with their size and age, oldest first: regular files directly in it named as [`file_name`] names them, never a link.
    fn files(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut v: Vec<_> = rd
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(is_snapshot_name))
            .filter_map(|e| std::fs::symlink_metadata(e.path()).ok().filter(|m| m.is_file()).map(|m| (e.path(), m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH))))
            .collect();
        v.sort_by_key(|f| f.2);
        v
    }

    /// Writes `s` (atomically, through a temporary file), removing the oldest files to stay within the budget; a snapshot larger than the budget is not written.
    pub fn write(&self, s: &Snapshot) -> Result<Option<PathBuf>, String> {
        let bytes = encode(&self.fingerprint, s);
        if bytes.len() as u64 > self.budget {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("creating {}: {e}", self.dir.display()))?;
        let path = self.dir.join(file_name(&s.key));
        let mut files: Vec<_> = self.files().into_iter().filter(|f| f.0 != path).collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        while total + bytes.len() as u64 > self.budget && !files.is_empty() {
            let (p, n, _) = files.remove(0);
            std::fs::remove_file(&p).map_err(|e| format!("removing {}: {e}", p.display()))?;
            total -= n;
        }
        let tmp = path.with_extension("tmp");
        if tmp.symlink_metadata().is_ok() {
            // a stale entry (a link included) is removed, never written through
            std::fs::remove_file(&tmp).map_err(|e| format!("removing {}: {e}", tmp.display()))?;
        }
        write_synced(&tmp, &bytes).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("renaming {}: {e}", tmp.display()))?;
        Ok(Some(path))
    }

    /// Removes the temporary files of writes a kill cut short; how many.
    pub fn remove_torn(&self) -> usize {
        let Ok(rd) = std::fs::read_dir(&self.dir) else { return 0 };
        let torn: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "tmp") && p.symlink_metadata().is_ok_and(|m| m.is_file())).collect();
        torn.iter().filter(|p| std::fs::remove_file(p).is_ok()).count()
    }

    /// Every snapshot file, newest last: its path and what it holds, or why it was refused.
    pub fn read_all(&self) -> Vec<(PathBuf, Result<Snapshot, String>)> {
        self.files()
            .into_iter()
            .map(|(p, _, _)| {
                let r = read_regular(&p).map_err(|e| e.to_string()).and_then(|b| decode(&self.fingerprint, &b));
                (p, r)
            })
            .collect()
    }
}

/// Writes `bytes` to `path` and syncs them to the disk (the injected faults refuse the write, or pause it halfway).
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if crate::testing::fault("snapshot_write") {
        return Err(std::io::Error::other("injected fault: no space left on device"));
    }
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    let half = bytes.len() / 2;
    f.write_all(&bytes[..half])?;
    if crate::testing::fault("snapshot_slow") {
        f.flush()?;
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    f.write_all(&bytes[half..])?;
    f.sync_all()
}

/// Whether `name` is a snapshot's file name: 32 lowercase hex digits and the extension.
fn is_snapshot_name(name: &str) -> bool {
    name.strip_suffix(EXT).and_then(|n| n.strip_suffix('.')).is_some_and(|h| h.len() == 32 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The bytes of `path` when it is a regular file, and still the file [`SnapshotDir::files`] listed when opened (a link swapped in is refused).
fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let listed = std::fs::symlink_metadata(path)?;
    let mut f = std::fs::File::open(path)?;
    let opened = f.metadata()?;
    if !listed.is_file() || !opened.is_file() || (listed.dev(), listed.ino()) != (opened.dev(), opened.ino()) {
        return Err(std::io::Error::other("not a regular file in the snapshot dir"));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Whether `path` is inside a folder that exists or can be made.
pub fn usable(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("snapshot dir {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_round_trips_and_any_flipped_or_missing_byte_is_refused() {
        let fp = [7u8; 32];
        let s = Snapshot { key: vec![1, 2, 3, super::super::cache::IMAGE_BIT | 0xdead_beef_0bad_f00d], logits: vec![0.5, -0.0, f32::MIN_POSITIVE], state: (0..50).collect() };
        let b = encode(&fp, &s);
        assert_eq!(decode(&fp, &b).unwrap(), s);
        for i in [0, 9, 45, b.len() / 2, b.len() - 1] {
            let mut c = b.clone();
            c[i] ^= 1;
            assert!(decode(&fp, &c).is_err(), "flip at {i}");
        }
        assert!(decode(&fp, &b[..b.len() - 1]).is_err());
        assert!(decode(&[8u8; 32], &b).unwrap_err().contains("another checkpoint"));
    }

    #[test]
    fn links_named_like_snapshots_are_neither_read_nor_written_through_and_other_names_are_ignored() {
        let root = std::env::temp_dir().join(format!("lockstep-snapdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (inside, outside) = (root.join("in"), root.join("out"));
        std::fs::create_dir_all(&outside).unwrap();
        let fp = [3u8; 32];
        let s = Snapshot { key: vec![11, 22, 33], logits: vec![0.25, -1.5], state: (0..40).rev().collect() };
        let name = file_name(&s.key);
        let real = encode(&fp, &s);
        std::fs::write(outside.join(&name), &real).unwrap();
        std::fs::write(outside.join("victim"), b"keep me").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("via")).unwrap();
        assert_eq!(SnapshotDir::open(&root.join("via"), 1, fp).unwrap().dir, std::fs::canonicalize(&outside).unwrap(), "the dir is resolved once, at start");
        let dir = SnapshotDir::open(&inside, 1 << 20, fp).unwrap();
        std::os::unix::fs::symlink(outside.join(&name), dir.dir.join(&name)).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), dir.dir.join(&name).with_extension("tmp")).unwrap();
        assert!(dir.read_all().is_empty(), "a link named like a snapshot is read");
        let other = Snapshot { key: s.key.clone(), logits: vec![9.0], state: vec![1, 2, 3] };
        dir.write(&other).unwrap();
        assert_eq!(std::fs::read(outside.join(&name)).unwrap(), real, "written through the snapshot's link");
        assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"keep me", "written through the temporary file's link");
        assert!(dir.dir.join(&name).symlink_metadata().unwrap().is_file());
        std::fs::write(dir.dir.join("notes.lksnap"), &real).unwrap();
        std::fs::write(dir.dir.join(format!("{}.lksnap", "A".repeat(32))), &real).unwrap();
        std::fs::create_dir(dir.dir.join(format!("{}.lksnap", "a".repeat(32)))).unwrap();
        let back = dir.read_all();
        assert_eq!(back.len(), 1, "{back:?}");
        assert_eq!(back[0].1.as_ref().unwrap(), &other);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_first_version_file_of_u32_ids_is_still_read() {
        let fp = [7u8; 32];
        let mut b = MAGIC_V1.to_vec();
        b.extend(fp);
        b.extend(2u64.to_le_bytes());
        b.extend([5u32, 129_264].iter().flat_map(|t| t.to_le_bytes()));
        b.extend(1u64.to_le_bytes());
        b.extend(0.25f32.to_bits().to_le_bytes());
        b.extend(3u64.to_le_bytes());
        b.extend([9u8, 8, 7]);
        let seal = Sha256::digest(&b);
        b.extend(seal);
        assert_eq!(decode(&fp, &b).unwrap(), Snapshot { key: vec![5, 129_264], logits: vec![0.25], state: vec![9, 8, 7] });
    }
}
