//! What a file looked like when it was last read (size, times, inode), so that a reading of a
//! directory of thousands of files opens only those that changed. Pure apart from `stat`.
//!
//! A stamp is trusted only when the file's modification time was clearly older than the
//! moment it was taken: a file written again within the same timestamp tick, with the same
//! size, would otherwise look unchanged (git's "racily clean" entries). Such a file is simply
//! read again next time. A trusted stamp is kept in the admission state's record of the file
//! whose text it vouches for, so that a file costs one entry, not one per map.

use std::num::NonZeroU64;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How much older than the reading a modification time must be for its stamp to be trusted:
/// well above the timestamp granularity of any local file system.
const RACY: Duration = Duration::from_secs(2);

/// The metadata of one file that any write changes. Times are nanoseconds since the epoch: a
/// directory of thousands of files keeps one stamp each, and a `SystemTime` takes twice the
/// room. A file timed at or before the epoch has no stamp and is read every time; so an
/// `Option<Stamp>` is no larger than a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: NonZeroU64,
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
        let modified = NonZeroU64::new(nanos(meta.modified().ok()?)?)?;
        #[cfg(unix)]
        let changed = {
            let secs = u64::try_from(meta.ctime()).ok()?;
            let nanos = u64::try_from(meta.ctime_nsec()).ok()?;
            secs.checked_mul(1_000_000_000)?.checked_add(nanos)?
        };
        #[cfg(not(unix))]
        let changed = modified.get();
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

/// A file's stamp taken before it is read, to be kept if the reading is taken as is.
#[derive(Debug, Clone, Copy)]
pub struct Pending(Option<Taken>);

/// Stats `path` (following links). `Ok` when the file is unchanged since `kept`, the trusted
/// stamp held for its text, else `Err` with the new stamp, for [`Pending::keep`] once its text
/// has been taken.
pub fn check(kept: Option<&Stamp>, path: &Path) -> Result<(), Pending> {
    let now = nanos(SystemTime::now());
    let Some(stamp) = std::fs::metadata(path).ok().and_then(|m| Stamp::of(&m)) else {
        return Err(Pending(None));
    };
    match kept {
        Some(kept) if *kept == stamp => Ok(()),
        _ => {
            let racy = u64::try_from(RACY.as_nanos()).unwrap_or(u64::MAX);
            let settled = stamp.modified.get().max(stamp.changed).saturating_add(racy);
            Err(Pending(Some(Taken {
                stamp,
                trusted: now.is_some_and(|now| settled < now),
            })))
        }
    }
}

impl Pending {
    /// The stamp to hold for the file once it has been read: `Some` when `kept` (its text is
    /// what the state now holds) and the stamp is trusted; `None` forgets the file's stamp, so
    /// that it is read next time.
    pub fn keep(self, kept: bool) -> Option<Stamp> {
        self.0.filter(|t| kept && t.trusted).map(|t| t.stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_unchanged_file_is_not_read_again_and_any_change_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "a: 1\n").unwrap();
        // Just written: its stamp is racy, so it is not kept and the file is read again.
        let held = check(None, &path).unwrap_err().keep(true);
        assert_eq!(held, None);
        assert!(check(held.as_ref(), &path).is_err());
        // Modified long ago but its status changed just now: still racy.
        let old = SystemTime::now() - Duration::from_secs(10);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let held = check(None, &path).unwrap_err().keep(true);
        assert_eq!(held, None);
        // An old stamp is trusted until the file changes.
        let mut taken = match check(None, &path).unwrap_err().0 {
            Some(t) => t,
            None => panic!("no stamp"),
        };
        taken.trusted = true;
        let held = Pending(Some(taken)).keep(true);
        assert!(held.is_some());
        assert!(check(held.as_ref(), &path).is_ok());
        std::fs::write(&path, "a: 2\n").unwrap();
        assert!(check(held.as_ref(), &path).is_err());
        // A reading that was not taken as is keeps no stamp.
        assert_eq!(Pending(Some(taken)).keep(false), None);
    }

    #[test]
    fn a_held_stamp_is_five_numbers() {
        // Thousands of files keep one each: no `SystemTime` pairs, and no room for `None`.
        assert!(std::mem::size_of::<Option<Stamp>>() <= 40);
    }
}
