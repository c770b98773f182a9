//! Reading a configuration directory: what is read, skipped and reported.

use super::*;

fn event(kind: EventKind, path: &str) -> notify::Event {
    notify::Event::new(kind).add_path(PathBuf::from(path))
}

#[test]
fn own_reads_do_not_trigger_reloads() {
    let open = event(
        EventKind::Access(AccessKind::Open(AccessMode::Any)),
        "/d/a.yaml",
    );
    assert!(!relevant(&open));
    let write = event(
        EventKind::Access(AccessKind::Close(AccessMode::Write)),
        "/d/a.yaml",
    );
    assert!(relevant(&write));
    let swap = event(
        EventKind::Create(notify::event::CreateKind::File),
        "/d/.a.yaml.swp",
    );
    assert!(!relevant(&swap));
    let configmap = event(
        EventKind::Modify(ModifyKind::Name(notify::event::RenameMode::To)),
        "/d/..data",
    );
    assert!(relevant(&configmap));
}

#[test]
fn open_files_hold_the_reading_back_until_closed_or_capped() {
    let t0 = Instant::now();
    let mut a = Activity::default();
    let modify = event(
        EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any)),
        "/d/a.yaml",
    );
    a.observe(&modify, t0);
    assert_eq!(a.ready_at(t0, t0), t0 + WRITE_CAP);
    let close = event(
        EventKind::Access(AccessKind::Close(AccessMode::Write)),
        "/d/a.yaml",
    );
    let t1 = t0 + Duration::from_millis(30);
    a.observe(&close, t1);
    // Closed after writing: complete, read at once.
    assert_eq!(a.ready_at(t0, t1), t1);
    // Any other last event waits for the burst to go quiet...
    let create = event(
        EventKind::Create(notify::event::CreateKind::File),
        "/d/b.yaml",
    );
    a.observe(&create, t1);
    assert_eq!(a.ready_at(t0, t1), t1 + SETTLE);
    // ...and a burst that never goes quiet is read at the cap.
    let t2 = t0 + SETTLE_CAP - SETTLE / 2;
    a.observe(&create, t2);
    assert_eq!(a.ready_at(t0, t2), t0 + SETTLE_CAP);
    // A writer that never closes is waited for at most WRITE_CAP.
    a.observe(&modify, t2);
    assert_eq!(a.ready_at(t0, t2), t2 + WRITE_CAP);
    assert_eq!(a.ready_at(t0, t2 + WRITE_CAP), t0 + SETTLE_CAP);
    assert!(a.writing.is_empty());
}
