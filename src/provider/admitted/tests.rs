//! Admission across readings: rejected updates, unparsable files, duplicates, and
//! incremental readings against complete ones.

use serde_json::json;

use super::*;

/// A route CRD of `kind` (plural `plural`) in the Gateway API group whose `spec.hostnames`
/// has the schema `hostnames`; everything else is preserved unchecked.
fn route_crd(kind: &str, plural: &str, hostnames: serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.gateway.networking.k8s.io")},
        "spec": {"group": "gateway.networking.k8s.io", "names": {"kind": kind, "plural": plural}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"hostnames": hostnames}}}}}}]}
    })
}

/// The built-in defaults plus an HTTPRoute CRD whose hostnames have at most 10 characters.
fn crds() -> Arc<Crds> {
    let mut crds = Crds::new();
    crate::admission::builtin::register(&mut crds).unwrap();
    let hostnames = json!({"type": "array", "items": {"type": "string", "maxLength": 10}});
    crds.register(&route_crd("HTTPRoute", "httproutes", hostnames))
        .unwrap();
    Arc::new(crds)
}

fn route(name: &str, host: &str) -> String {
    format!("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {name}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames:\n  - a.b\n  - {host}\n")
}

/// `(name, second hostname)` of every admitted route.
fn routes(a: &Admission) -> Vec<(String, String)> {
    a.snapshot()
        .http_routes
        .iter()
        .map(|r| {
            let host = r.spec.hostnames.as_ref().map_or("", |h| h[1].as_str());
            (r.metadata.name.clone().unwrap_or_default(), host.to_owned())
        })
        .collect()
}

fn read(files: &[(&str, &str)]) -> Vec<(PathBuf, Taken)> {
    files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), Taken::Read(Ok((*t).to_owned()))))
        .collect()
}

#[test]
fn a_rejected_update_keeps_the_admitted_version_and_names_the_field_line() {
    let mut a = Admission::new(crds());
    let first = a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
    assert!(
        first.errors.is_empty() && first.changed,
        "{:?}",
        first.errors
    );
    let bad = a.apply(
        read(&[("a.yaml", &route("s", "long.example.com"))]),
        Reading::Final,
    );
    let [e] = bad.errors.as_slice() else {
        panic!("{:?}", bad.errors)
    };
    assert_eq!((e.path.to_str(), e.line), (Some("a.yaml"), Some(9)), "{e}");
    assert!(e.message.contains("spec.hostnames[1]"), "{e}");
    assert!(
        e.message
            .ends_with("the previously admitted version stays in force"),
        "{e}"
    );
    assert!(!bad.changed);
    assert_eq!(routes(&a), [("s".to_owned(), "s.io".to_owned())]);
    // A new object that is rejected is simply not admitted.
    let other = a.apply(
        read(&[
            ("a.yaml", &route("s", "s1.io")),
            ("b.yaml", &route("t", "long.example.com")),
        ]),
        Reading::Final,
    );
    assert!(other.changed);
    assert!(
        other.errors[0].message.ends_with("not admitted"),
        "{:?}",
        other.errors
    );
    assert_eq!(routes(&a), [("s".to_owned(), "s1.io".to_owned())]);
}

#[test]
fn a_file_that_does_not_parse_keeps_its_objects_while_others_change() {
    let mut a = Admission::new(crds());
    a.apply(
        read(&[
            ("a.yaml", &route("s", "s.io")),
            ("b.yaml", &route("t", "t.io")),
        ]),
        Reading::Final,
    );
    let r = a.apply(
        read(&[("a.yaml", "kind: [\n"), ("b.yaml", &route("t", "t1.io"))]),
        Reading::Final,
    );
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(r.errors[0]
        .message
        .contains("previously admitted objects stay in force"));
    assert_eq!(
        routes(&a),
        [
            ("s".to_owned(), "s.io".to_owned()),
            ("t".to_owned(), "t1.io".to_owned())
        ]
    );
    // Deleting the file deletes its objects.
    let gone = a.apply(read(&[("b.yaml", &route("t", "t1.io"))]), Reading::Final);
    assert!(gone.changed && gone.errors.is_empty());
    assert_eq!(routes(&a), [("t".to_owned(), "t1.io".to_owned())]);
}

#[test]
fn an_object_defined_twice_keeps_its_admitted_version() {
    let mut a = Admission::new(crds());
    a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
    let r = a.apply(
        read(&[
            ("a.yaml", &route("s", "s.io")),
            ("b.yaml", &route("s", "s2.io")),
        ]),
        Reading::Final,
    );
    let [e] = r.errors.as_slice() else {
        panic!("{:?}", r.errors)
    };
    assert!(
        e.message
            .contains("HTTPRoute default/s is defined more than once: a.yaml:1, b.yaml:1"),
        "{e}"
    );
    assert_eq!(routes(&a), [("s".to_owned(), "s.io".to_owned())]);
}

/// A held file's document that has to be admitted later (here: once its duplicate is gone) is
/// parsed again from the file's text; the items of a `List` share their YAML document, so
/// each is found by its place among the file's definitions.
#[test]
fn a_document_of_a_held_file_is_admitted_from_its_text() {
    let item = |name: &str, host: &str| {
        format!("- apiVersion: gateway.networking.k8s.io/v1\n  kind: HTTPRoute\n  metadata: {{name: {name}}}\n  spec: {{parentRefs: [{{name: gw}}], hostnames: [a.b, {host}]}}\n")
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}{}",
        item("x", "x.io"),
        item("y", "y-list.io")
    );
    let mut a = Admission::new(crds());
    let first = a.apply(
        read(&[("c.yaml", &list), ("d.yaml", &route("y", "y-file.io"))]),
        Reading::Final,
    );
    assert_eq!(first.errors.len(), 1, "{:?}", first.errors);
    assert_eq!(routes(&a), [("x".to_owned(), "x.io".to_owned())]);

    let second = a.apply(vec![(PathBuf::from("c.yaml"), Taken::Held)], Reading::Final);
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert!(second.changed);
    assert_eq!(
        routes(&a),
        [
            ("x".to_owned(), "x.io".to_owned()),
            ("y".to_owned(), "y-list.io".to_owned())
        ]
    );
}

#[test]
fn an_unchanged_reading_changes_nothing() {
    let mut a = Admission::new(crds());
    assert!(
        a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final)
            .changed
    );
    let again = a.apply(read(&[("a.yaml", &route("s", "s.io"))]), Reading::Final);
    assert!(!again.changed && again.errors.is_empty());
    assert_eq!(a.len(), 1);
}

/// A Service `name` with one port.
fn service(name: &str) -> String {
    format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  ports: [{{port: 80}}]\n")
}

/// The addresses of a list's objects, in order.
fn addresses<T>(objects: &[Arc<T>]) -> Vec<usize> {
    objects.iter().map(|o| Arc::as_ptr(o) as usize).collect()
}

/// The snapshot the admission holds is the one collecting its admitted objects anew gives:
/// the same allocations in the same order, field by field.
fn assert_snapshot_in_step(a: &Admission, context: &str) {
    let (held, collected) = (a.snapshot(), a.collected());
    assert_eq!(
        addresses(&held.http_routes),
        addresses(&collected.http_routes),
        "{context}"
    );
    assert_eq!(
        addresses(&held.services),
        addresses(&collected.services),
        "{context}"
    );
    assert_eq!(held.len(), collected.len(), "{context}");
}

/// Random edits of a few files, each applied as an incremental reading of that file to one
/// state and as a complete reading of the directory to another: the admitted objects agree
/// after every step (rejections, unparsable files, duplicates and removals included), and the
/// snapshot each state holds, put in step object by object, is the one collected anew.
#[test]
fn incremental_readings_admit_what_complete_readings_admit() {
    let names = ["a.yaml", "b.yaml", "c.yaml", "d.yaml"];
    let contents = [
        route("one", "x.y"),
        route("one", "far-too-long.example"),
        route("two", "z.y"),
        format!("{}---\n{}", route("one", "p.q"), route("two", "r.s")),
        format!("{}---\n{}", route("zero", "p.q"), route("three", "r.s")),
        format!("{}---\n{}", route("two", "t.u"), route("two", "v.w")),
        format!("{}---\n{}", service("m"), route("five", "f.g")),
        service("a"),
        service("z"),
        "kind: [".to_owned(),
        String::new(),
    ];
    for seed in 0..40 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut incremental = Admission::new(crds());
        let mut complete = Admission::new(crds());
        let mut files: BTreeMap<&str, String> = BTreeMap::new();
        for step in 0..40 {
            let mut changes: Vec<(PathBuf, Option<FileRead>)> = Vec::new();
            // Mostly one file at a time, sometimes two at once.
            for _ in 0..1 + usize::from(rng.usize(..4) == 0) {
                let name = names[rng.usize(..names.len())];
                let change = if rng.usize(..5) == 0 {
                    files.remove(name);
                    None
                } else {
                    let text = contents[rng.usize(..contents.len())].clone();
                    files.insert(name, text.clone());
                    Some(Ok(text))
                };
                changes.retain(|(p, _)| p.as_path() != Path::new(name));
                changes.push((PathBuf::from(name), change));
            }
            incremental.apply_changes(changes, Reading::Final);
            let all: Vec<(&str, &str)> = files.iter().map(|(n, t)| (*n, t.as_str())).collect();
            complete.apply(read(&all), Reading::Final);
            let context = format!("seed {seed} step {step}: {files:?}");
            assert_eq!(routes(&incremental), routes(&complete), "{context}");
            assert_eq!(incremental.len(), complete.len(), "{context}");
            assert_snapshot_in_step(&incremental, &context);
            assert_snapshot_in_step(&complete, &context);
        }
    }
}

/// The built-in defaults plus a GRPCRoute CRD whose hostnames may not change once admitted
/// (a transition rule), beside the HTTPRoute CRD of [`crds`] (no transition rule).
fn crds_with_transition_rule() -> Arc<Crds> {
    let mut crds = Arc::try_unwrap(crds()).unwrap_or_else(|_| unreachable!());
    let hostnames = json!({"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "hostnames are immutable"}]});
    crds.register(&route_crd("GRPCRoute", "grpcroutes", hostnames))
        .unwrap();
    Arc::new(crds)
}

#[test]
fn transition_rules_see_the_previous_version_and_only_their_kinds_keep_it() {
    let crds = crds_with_transition_rule();
    assert!(crds.reads_old("gateway.networking.k8s.io/v1", "GRPCRoute"));
    assert!(!crds.reads_old("gateway.networking.k8s.io/v1", "HTTPRoute"));
    let grpc = |host: &str| {
        format!("apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata:\n  name: g\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [{host}]\n")
    };
    let mut a = Admission::new(crds);
    let first = a.apply(
        read(&[("g.yaml", &grpc("g.io")), ("a.yaml", &route("s", "s.io"))]),
        Reading::Final,
    );
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    // The GRPCRoute's admitted version is kept for its transition rule, the HTTPRoute's not.
    let kept: Vec<(String, bool)> = a
        .admitted
        .keys()
        .map(|k| (k.kind().to_owned(), a.olds.contains_key(k)))
        .collect();
    assert_eq!(
        kept,
        [
            ("GRPCRoute".to_owned(), true),
            ("HTTPRoute".to_owned(), false)
        ]
    );
    let changed = a.apply(
        read(&[("g.yaml", &grpc("h.io")), ("a.yaml", &route("s", "t.io"))]),
        Reading::Final,
    );
    let [e] = changed.errors.as_slice() else {
        panic!("{:?}", changed.errors)
    };
    assert!(e.message.contains("hostnames are immutable"), "{e}");
    // The HTTPRoute's change, with no transition rule, is admitted.
    assert_eq!(routes(&a), [("s".to_owned(), "t.io".to_owned())]);
}

/// A directory of thousands of one-object files keeps a key, a definition and an admitted
/// object per object: each stays a few words.
#[test]
fn the_records_kept_per_object_stay_small() {
    use std::mem::size_of;
    assert_eq!(size_of::<ObjectKey>(), size_of::<usize>());
    assert!(size_of::<super::Definition>() <= 40);
    // A file's stamp included; its text and skipped kinds behind one pointer.
    assert!(size_of::<super::ParsedFile>() <= 88);
    assert!(size_of::<super::AdmittedObject<crate::snapshot::Snapshot>>() <= 72);
}

/// An error about a field of a `List`'s item names the line of that field in the item.
#[test]
fn a_rejected_item_of_a_list_names_the_line_of_its_field() {
    let item = |name: &str, host: &str| {
        format!("- apiVersion: gateway.networking.k8s.io/v1\n  kind: HTTPRoute\n  metadata: {{name: {name}}}\n  spec:\n    hostnames:\n    - a.b\n    - {host}\n")
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}{}",
        item("x", "x.io"),
        item("y", "long.example.com")
    );
    let mut a = Admission::new(crds());
    let applied = a.apply(read(&[("l.yaml", &list)]), Reading::Final);
    let [e] = applied.errors.as_slice() else {
        panic!("{:?}", applied.errors)
    };
    assert_eq!((e.path.to_str(), e.line), (Some("l.yaml"), Some(17)), "{e}");
    assert_eq!(routes(&a), [("x".to_owned(), "x.io".to_owned())]);
}
