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

/// The metadata of one file that any write changes. Times are nanoseconds since the epoch: a
/// directory of thousands of files keeps one stamp each, and a `SystemTime` takes twice the
/// room. A file timed before the epoch has no stamp and is read every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: u64,
    /// Inode and device where the platform has them: a file replaced by a rename (or a
    /// ConfigMap's `..data` swap) is another inode.
    #[cfg(unix)]
    identity: (u64, u64),
    /// The status-change time where the platform has it (else the modification time): a
    /// write moves it even when the modification time was set back.
    changed: u64,
}

/// `time` in nanoseconds since the epoch; `None` before it (or after the year 2554).
fn nanos(time: SystemTime) -> Option<u64> {
    let since = time.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_nanos()).ok()
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        let modified = nanos(meta.modified().ok()?)?;
        #[cfg(unix)]
        let changed = {
            let secs = u64::try_from(meta.ctime()).ok()?;
            let nanos = u64::try_from(meta.ctime_nsec()).ok()?;
            secs.checked_mul(1_000_000_000)?.checked_add(nanos)?
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

/// The trusted stamps of the files of a directory whose text the admission state holds as
/// read. A stamp that is not trusted is not kept: it would never spare a reading.
#[derive(Debug, Default)]
pub struct Stamps {
    /// By path, shared with the admission state's entry of the file.
    files: HashMap<Arc<Path>, Stamp>,
}

/// A file's stamp taken before it is read, to be kept if the reading is taken as is.
#[derive(Debug, Clone, Copy)]
pub struct Pending(Option<Taken>);

impl Stamps {
    /// Stats `path` (following links). `Ok` when the file is unchanged since a trusted stamp,
    /// else `Err` with the new stamp to [`Stamps::keep`] once its text has been taken.
    pub fn check(&self, path: &Path) -> Result<(), Pending> {
        let now = nanos(SystemTime::now());
        let Some(stamp) = std::fs::metadata(path).ok().and_then(|m| Stamp::of(&m)) else {
            return Err(Pending(None));
        };
        match self.files.get(path) {
            Some(kept) if *kept == stamp => Ok(()),
            _ => {
                let racy = u64::try_from(RACY.as_nanos()).unwrap_or(u64::MAX);
                let settled = stamp.modified.max(stamp.changed).saturating_add(racy);
                Err(Pending(Some(Taken {
                    stamp,
                    trusted: now.is_some_and(|now| settled < now),
                })))
            }
        }
    }

    /// Records `pending` for `path` when `kept` (its text is what the state now holds) and
    /// its stamp is trusted, else forgets the file so that it is read next time.
    pub fn keep(&mut self, path: Arc<Path>, pending: Pending, kept: bool) {
        match pending.0 {
            Some(taken) if kept && taken.trusted => {
                self.files.insert(path, taken.stamp);
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
        // A stamp that is not trusted is not kept.
        assert!(stamps.files.is_empty());
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

    #[test]
    fn a_stamp_is_five_numbers() {
        // Thousands of files keep one each: no `SystemTime` pairs.
        assert!(std::mem::size_of::<Stamp>() <= 40);
    }
}
