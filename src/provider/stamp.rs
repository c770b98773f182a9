//! What a file looked like when it was last read (size, times, inode), so that a reading of a
//! directory of thousands of files opens only those that changed. Pure apart from `stat`.
//!
//! A stamp is trusted only when the file's modification time was clearly older than the
//! moment it was taken: a file written again within the same timestamp tick, with the same
//! size, would otherwise look unchanged (git's "racily clean" entries). Such a file is simply
//! read again next time.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How much older than the reading a modification time must be for its stamp to be trusted:
/// well above the timestamp granularity of any local file system.
const RACY: Duration = Duration::from_secs(2);

/// The metadata of one file that any write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: SystemTime,
    /// Inode and device where the platform has them: a file replaced by a rename (or a
    /// ConfigMap's `..data` swap) is another inode.
    #[cfg(unix)]
    identity: (u64, u64),
    /// The status-change time where the platform has it (else the modification time): a
    /// write moves it even when the modification time was set back.
    changed: SystemTime,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        let modified = meta.modified().ok()?;
        #[cfg(unix)]
        let changed = {
            let secs = u64::try_from(meta.ctime()).ok()?;
            let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
            SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
        };
        #[cfg(not(unix))]
        let changed = modified;
        Some(Self {
            len: meta.len(),
            modified,
            #[cfg(unix)]
            identity: (meta.ino(), meta.dev()),
            changed,
        })
    }
}

/// A stamp and whether it can be trusted.
#[derive(Debug, Clone, Copy)]
struct Taken {
    stamp: Stamp,
    trusted: bool,
}

/// The stamps of the files of a directory whose text the admission state holds as read.
#[derive(Debug, Default)]
pub struct Stamps {
    /// By path, shared with the admission state's entry of the file.
    files: HashMap<Arc<Path>, Taken>,
}

/// A file's stamp taken before it is read, to be kept if the reading is taken as is.
#[derive(Debug, Clone, Copy)]
pub struct Pending(Option<Taken>);

impl Stamps {
    /// Stats `path` (following links). `Ok` when the file is unchanged since a trusted stamp,
    /// else `Err` with the new stamp to [`Stamps::keep`] once its text has been taken.
    pub fn check(&self, path: &Path) -> Result<(), Pending> {
        let now = SystemTime::now();
        let Some(stamp) = std::fs::metadata(path).ok().and_then(|m| Stamp::of(&m)) else {
            return Err(Pending(None));
        };
        match self.files.get(path) {
            Some(t) if t.trusted && t.stamp == stamp => Ok(()),
            _ => Err(Pending(Some(Taken {
                stamp,
                trusted: stamp.modified.max(stamp.changed) + RACY < now,
            }))),
        }
    }

    /// Records `pending` for `path` when `kept` (its text is what the state now holds), else
    /// forgets the file so that it is read next time.
    pub fn keep(&mut self, path: Arc<Path>, pending: Pending, kept: bool) {
        match pending.0 {
            Some(taken) if kept => {
                self.files.insert(path, taken);
            }
            _ => {
                self.files.remove(&path);
            }
        }
    }

    /// Forgets `path`: it is read again by the next walk.
    pub fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }

    /// Forgets every file not in `present`.
    pub fn retain(&mut self, present: &std::collections::HashSet<&Path>) {
        self.files.retain(|p, _| present.contains(&**p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_unchanged_file_is_not_read_again_and_any_change_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<Path> = Arc::from(dir.path().join("a.yaml"));
        std::fs::write(&path, "a: 1\n").unwrap();
        let mut stamps = Stamps::default();
        // Just written: its stamp is racy, so it is read again.
        let pending = stamps.check(&path).unwrap_err();
        stamps.keep(path.clone(), pending, true);
        assert!(stamps.check(&path).is_err());
        // Modified long ago but its status changed just now: still racy.
        let old = SystemTime::now() - Duration::from_secs(10);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let pending = stamps.check(&path).unwrap_err();
        stamps.keep(path.clone(), pending, true);
        assert!(stamps.check(&path).is_err());
        // An old stamp is trusted until the file changes.
        let mut taken = match stamps.check(&path).unwrap_err().0 {
            Some(t) => t,
            None => panic!("no stamp"),
        };
        taken.trusted = true;
        stamps.keep(path.clone(), Pending(Some(taken)), true);
        assert!(stamps.check(&path).is_ok());
        std::fs::write(&path, "a: 2\n").unwrap();
        assert!(stamps.check(&path).is_err());
        // A reading that was not taken as is forgets the file.
        let pending = stamps.check(&path).unwrap_err();
        stamps.keep(path.clone(), pending, false);
        assert!(stamps.check(&path).is_err());
    }
}
