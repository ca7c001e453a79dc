//! [`FileStore`]: pending calls as files of a private directory, one per call.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::{PendingCall, PendingStore, PendingStoreError, hex, now_ms};

/// A [`PendingStore`] in a directory: one JSON file per call (`<key>.json`).
///
/// - **Private** (Unix): the directory is created `0700` and each file `0600`. An existing directory that group
///   or others may use is refused ([`PendingStoreError::Permissions`]), neither used nor changed: tighten it
///   (`chmod 700`) or choose another.
/// - **Whole files**: a call is written to a temporary file of an unpredictable name, created exclusively (a
///   file or symbolic link already at that name is never opened, so never followed), synced, renamed into
///   place, and the directory synced after the rename; a reader never sees half a file, and a saved call
///   survives a crash.
/// - **Taken once**: [`take`](PendingStore::take) first renames the file to a name of its own, and syncs the
///   directory: of two processes, exactly one rename succeeds, and only that one reads the call.
/// - **Resolved once**: a record taken leaves a file of its own, `consumed-<key>-<record id>` (created
///   exclusively, holding the record's expiry), made durable before the call is returned; the same record saved
///   again is refused, and found put back (a copy restored) is removed and refused
///   ([`PendingStoreError::Consumed`]). These files are small and stay; those of records expired long ago may be
///   deleted ([`FileStore::purge_consumed`]).
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// The store in `dir`, created (`0700`) if missing; its parents are created as usual if missing.
    ///
    /// # Errors
    ///
    /// [`PendingStoreError::Permissions`] if `dir` exists and is open to group or others;
    /// [`PendingStoreError::Io`] if it cannot be created or is not a directory.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore, PendingStoreError> {
        let dir = dir.as_ref().to_path_buf();
        create_private_dir(&dir).map_err(|e| io_error(format!("creating {}", dir.display()), e))?;
        check_private(&dir)?;
        Ok(FileStore { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that says the record `pending` was taken.
    fn consumed(&self, pending: &PendingCall) -> PathBuf {
        self.dir.join(format!("consumed-{}-{}", pending.key(), pending.record_id()))
    }

    /// Deletes the records of taken calls ([`FileStore`]'s `consumed-` files) whose calls expired more than `grace` ago
    /// (a record that expired is refused by [`Executor::resume`](crate::Executor::resume) as `approval_expired`
    /// anyway); how many.
    ///
    /// # Errors
    ///
    /// [`PendingStoreError::Io`] when the directory cannot be listed.
    pub fn purge_consumed(&self, grace: Duration) -> Result<u64, PendingStoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| io_error(format!("listing {}", self.dir.display()), e))?;
        let before = now_ms().saturating_sub(u64::try_from(grace.as_millis()).unwrap_or(u64::MAX));
        let mut purged = 0;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            if !name.to_str().is_some_and(|n| n.starts_with("consumed-pc-")) {
                continue;
            }
            let expired = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|text| text.trim().parse::<u64>().ok())
                .is_some_and(|expires_at_ms| expires_at_ms < before);
            if expired && std::fs::remove_file(entry.path()).is_ok() {
                purged += 1;
            }
        }
        Ok(purged)
    }

    /// A name in the store no other process can guess: `.<what>-<key>-<32 random hex digits>`.
    fn unique(&self, what: &str, key: &str) -> PathBuf {
        self.dir.join(format!(".{what}-{key}-{}", random_suffix()))
    }
}

pub(super) fn io_error(context: String, source: io::Error) -> PendingStoreError {
    PendingStoreError::Io { context, source }
}

/// Creates `dir` (`0700` on Unix) if it is missing, and its parents as usual.
pub(super) fn create_private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        done => done,
    }
}

/// Checks that `dir` is a directory, and (Unix) that only its owner may use it.
pub(super) fn check_private(dir: &Path) -> Result<(), PendingStoreError> {
    let context = || format!("opening {}", dir.display());
    let meta = std::fs::metadata(dir).map_err(|e| io_error(context(), e))?;
    if !meta.is_dir() {
        return Err(io_error(context(), io::Error::new(io::ErrorKind::NotADirectory, "not a directory")));
    }
    #[cfg(unix)]
    {
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
        if mode & 0o077 != 0 {
            return Err(PendingStoreError::Permissions { dir: dir.to_path_buf(), mode });
        }
    }
    Ok(())
}

/// Creates `path` for writing, only if nothing is there (`O_CREAT | O_EXCL`: an existing file or symbolic link is
/// never opened, so a link planted at the name is not followed), readable by its owner only (`0600` on Unix).
pub(super) fn create_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Syncs a directory, so that a rename in it survives a crash (Unix; elsewhere a directory cannot be opened for
/// it, and this does nothing).
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// 32 hex digits that another process cannot predict: SHA-256 of a per-process random seed and a counter.
pub(super) fn random_suffix() -> String {
    static SEED: OnceLock<[u8; 32]> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(|| {
        let mut seed = [0u8; 32];
        os_random(&mut seed);
        seed
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    hex(&Sha256::new().chain_update(seed).chain_update(n.to_le_bytes()).finalize()[..16])
}

/// Fills `buf` from the operating system's generator: `/dev/urandom` on Unix. Where it cannot be read, from the
/// keys `std` draws from the same generator for each thread's first `RandomState` (128 bits), expanded with
/// SHA-256.
pub(super) fn os_random(buf: &mut [u8]) {
    #[cfg(unix)]
    {
        use std::io::Read as _;
        if File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf)).is_ok() {
            return;
        }
    }
    let mut seed = Sha256::new();
    for i in 0..4u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(i);
        seed.update(h.finish().to_le_bytes());
    }
    seed.update(std::process::id().to_le_bytes());
    let seed = seed.finalize();
    for (n, chunk) in buf.chunks_mut(32).enumerate() {
        let block = Sha256::new().chain_update(seed).chain_update((n as u64).to_le_bytes()).finalize();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

pub(super) fn read_entry(path: &Path, entry: &str) -> Result<PendingCall, PendingStoreError> {
    let text = std::fs::read(path).map_err(|e| io_error(format!("reading {}", path.display()), e))?;
    serde_json::from_slice(&text).map_err(|e| PendingStoreError::Corrupt {
        entry: entry.to_owned(),
        message: e.to_string(),
        source: Some(e),
    })
}

/// Whether `key` is one [`PendingCall::key`] makes (so that no key names a path outside the store).
pub(super) fn valid_key(key: &str) -> bool {
    key.strip_prefix("pc-").is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl PendingStore for FileStore {
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError> {
        let key = pending.key();
        if self.consumed(pending).exists() {
            return Err(PendingStoreError::Consumed { key });
        }
        let text = serde_json::to_vec_pretty(pending).expect("a pending call serialises");
        let temp = self.unique("new", &key);
        let mut created = false;
        let mut write = || -> io::Result<()> {
            let mut file = create_private(&temp)?;
            created = true;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temp, self.dir.join(format!("{key}.json")))?;
            sync_dir(&self.dir)
        };
        write().map_err(|e| {
            // Only a file this call created is removed (the rename may have happened: then there is none).
            if created {
                let _ = std::fs::remove_file(&temp);
            }
            io_error(format!("saving {key} in {}", self.dir.display()), e)
        })
    }

    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| io_error(format!("listing {}", self.dir.display()), e))?;
        let mut keys: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_owned))
            .filter(|k| valid_key(k))
            .collect();
        keys.sort();
        let mut calls = Vec::with_capacity(keys.len());
        for key in keys {
            match read_entry(&self.dir.join(format!("{key}.json")), &key) {
                Ok(call) => calls.push(call),
                // Taken by another process between the listing and the read.
                Err(PendingStoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(calls)
    }

    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError> {
        if !valid_key(key) {
            return Ok(None);
        }
        let path = self.dir.join(format!("{key}.json"));
        let claimed = self.unique("taken", key);
        // The claim: of two takers, one rename succeeds and the other finds nothing.
        match std::fs::rename(&path, &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(format!("taking {key} from {}", self.dir.display()), e)),
        }
        let pending = match read_entry(&claimed, key) {
            Ok(pending) => pending,
            // A corrupt entry goes back where it was, for an operator to see.
            Err(e) => {
                let _ = std::fs::rename(&claimed, &path);
                return Err(e);
            }
        };
        // The record of its taking: of two takers of one record (the second a copy put back), one creates it.
        let context = || format!("taking {key} from {}", self.dir.display());
        let consumed = self.consumed(&pending);
        let marked = create_private(&consumed).and_then(|mut file| {
            file.write_all(pending.expires_at_ms.to_string().as_bytes())?;
            file.sync_all()
        });
        match marked {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(&claimed);
                let _ = sync_dir(&self.dir);
                return Err(PendingStoreError::Consumed { key: key.to_owned() });
            }
            Err(e) => {
                let _ = std::fs::remove_file(&consumed);
                let _ = std::fs::rename(&claimed, &path);
                return Err(io_error(context(), e));
            }
        }
        // The claim and its record are made durable before the call can run, so that a crash cannot bring the call
        // back.
        if let Err(e) = sync_dir(&self.dir) {
            let _ = std::fs::remove_file(&consumed);
            let _ = std::fs::rename(&claimed, &path);
            return Err(io_error(context(), e));
        }
        let _ = std::fs::remove_file(&claimed);
        Ok(Some(pending))
    }
}
