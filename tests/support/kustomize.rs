//! A renderer of exactly the kustomize subset `deploy/` uses, so the tests that need the
//! rendered install run where neither `kubectl` nor `kustomize` is installed: `resources`
//! (files, and directories that hold a `kustomization.yaml`, recursively), `components`
//! (`kind: Component`) with `images`, `configMapGenerator` (files, literals,
//! `options.disableNameSuffixHash: true`, `options.labels`/`annotations`, `namespace`) and
//! `patches` (inline JSON 6902 operations, `target` by group, version, kind, name, namespace).
//! Any other field panics naming it, so an edit to `deploy/` that this renderer does not know
//! fails loudly instead of rendering wrong. The output is in `kubectl kustomize`'s default
//! ("legacy") order. `tests/deploy/render.rs` compares it with `kubectl kustomize` where that
//! runs.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

/// Renders the kustomization in `dir` as `kubectl kustomize dir` prints it: the objects in
/// kustomize's legacy kind order. Panics with the reason on anything outside the subset.
pub fn render(dir: &Path) -> Vec<Value> {
    let mut objects = Vec::new();
    build(dir, "Kustomization", &mut objects);
    sort_legacy(&mut objects);
    objects
}

/// Fields a kustomization (or component) may have here; anything else panics.
const KNOWN: [&str; 7] = [
    "apiVersion",
    "kind",
    "resources",
    "components",
    "images",
    "configMapGenerator",
    "patches",
];

/// Reads `dir`'s kustomization file, checks its kind and fields, and runs it over `objects`
/// (empty for a Kustomization, the including kustomization's objects for a Component).
fn build(dir: &Path, kind: &str, objects: &mut Vec<Value>) {
    let file = dir.join("kustomization.yaml");
    for other in ["kustomization.yml", "Kustomization"] {
        assert!(
            !dir.join(other).exists(),
            "{}: only kustomization.yaml is supported by this renderer",
            dir.join(other).display()
        );
    }
    assert!(
        file.is_file(),
        "{}: not a kustomization directory (no kustomization.yaml; kustomize refuses it too)",
        dir.display()
    );
    let docs = documents(&file);
    assert!(docs.len() == 1, "{}: one document expected", file.display());
    let k = docs[0]
        .as_object()
        .unwrap_or_else(|| panic!("{}: not a mapping", file.display()));
    let api_version = match kind {
        "Component" => "kustomize.config.k8s.io/v1alpha1",
        _ => "kustomize.config.k8s.io/v1beta1",
    };
    assert!(
        k.get("kind").and_then(Value::as_str) == Some(kind)
            && k.get("apiVersion").and_then(Value::as_str) == Some(api_version),
        "{}: expected {api_version} {kind}, got {:?} {:?}",
        file.display(),
        k.get("apiVersion"),
        k.get("kind")
    );
    for field in k.keys() {
        assert!(
            KNOWN.contains(&field.as_str()),
            "{}: field `{field}` is not supported by the test renderer (tests/support/kustomize.rs)",
            file.display()
        );
    }
    let list = |field: &str| -> Vec<Value> {
        match k.get(field) {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(other) => panic!("{}: `{field}` is not a list: {other}", file.display()),
        }
    };
    for r in list("resources") {
        let r = r
            .as_str()
            .unwrap_or_else(|| panic!("{}: resource {r} is not a path", file.display()));
        let path = dir.join(r);
        if path.is_dir() {
            let mut sub = Vec::new();
            build(&path, "Kustomization", &mut sub);
            for o in sub {
                add(objects, o, &file);
            }
        } else if path.is_file() {
            for o in documents(&inside(dir, r)) {
                add(objects, o, &file);
            }
        } else {
            panic!("{}: resource `{r}` is neither a file nor a directory (remote resources are not supported)", file.display());
        }
    }
    for c in list("components") {
        let c = c
            .as_str()
            .unwrap_or_else(|| panic!("{}: component {c} is not a path", file.display()));
        build(&dir.join(c), "Component", objects);
    }
    for g in list("configMapGenerator") {
        let cm = config_map(dir, &g, &file);
        add(objects, cm, &file);
    }
    for p in list("patches") {
        patch(objects, &p, &file);
    }
    for i in list("images") {
        image(objects, &i, &file);
    }
}

/// The YAML documents of `path`, empty ones dropped.
fn documents(path: &Path) -> Vec<Value> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// `dir.join(rel)`, refused (as kustomize's default load restrictions do) when it leaves `dir`.
fn inside(dir: &Path, rel: &str) -> PathBuf {
    let root = dir
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir
        .join(rel)
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(rel).display()));
    assert!(
        path.starts_with(&root),
        "{}: file `{rel}` is not in or below the kustomization's directory",
        dir.display()
    );
    path
}

fn str_of<'a>(o: &'a Value, field: &str) -> &'a str {
    o[field].as_str().unwrap_or_default()
}

/// (group, version) of an object's apiVersion.
fn group_version(o: &Value) -> (&str, &str) {
    match str_of(o, "apiVersion").split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", str_of(o, "apiVersion")),
    }
}

/// The identity kustomize refuses to hold twice: group, kind, namespace, name.
fn id(o: &Value) -> (String, String, String, String) {
    (
        group_version(o).0.to_owned(),
        str_of(o, "kind").to_owned(),
        str_of(&o["metadata"], "namespace").to_owned(),
        str_of(&o["metadata"], "name").to_owned(),
    )
}

fn add(objects: &mut Vec<Value>, o: Value, file: &Path) {
    assert!(
        o.is_object() && !str_of(&o["metadata"], "name").is_empty(),
        "{}: an object without metadata.name: {o}",
        file.display()
    );
    assert!(
        !objects.iter().any(|x| id(x) == id(&o)),
        "{}: {:?} is already registered (kustomize refuses a duplicate)",
        file.display(),
        id(&o)
    );
    objects.push(o);
}

/// The fields of `v` (a mapping), each checked against `known`.
fn fields<'a>(v: &'a Value, known: &[&str], what: &str, file: &Path) -> &'a Map<String, Value> {
    let m = v
        .as_object()
        .unwrap_or_else(|| panic!("{}: {what} is not a mapping: {v}", file.display()));
    for f in m.keys() {
        assert!(
            known.contains(&f.as_str()),
            "{}: {what} field `{f}` is not supported by the test renderer",
            file.display()
        );
    }
    m
}

/// A `configMapGenerator` entry as the ConfigMap kustomize generates (no name hash).
fn config_map(dir: &Path, g: &Value, file: &Path) -> Value {
    let what = "configMapGenerator";
    let m = fields(
        g,
        &["name", "namespace", "files", "literals", "options"],
        what,
        file,
    );
    let options = m.get("options").cloned().unwrap_or(json!({}));
    let o = fields(
        &options,
        &["disableNameSuffixHash", "labels", "annotations"],
        "configMapGenerator options",
        file,
    );
    assert!(
        o.get("disableNameSuffixHash") == Some(&Value::Bool(true)),
        "{}: a configMapGenerator without disableNameSuffixHash: true (the name hash is not implemented)",
        file.display()
    );
    let mut data = Map::new();
    for f in m
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = f.as_str().unwrap_or_default();
        let (key, rel) = f.split_once('=').unwrap_or_else(|| {
            let name = Path::new(f).file_name().and_then(|n| n.to_str());
            (name.unwrap_or(f), f)
        });
        let text = std::fs::read_to_string(inside(dir, rel)).unwrap_or_else(|e| {
            panic!(
                "{}: `{rel}` (binaryData is not supported): {e}",
                file.display()
            )
        });
        assert!(
            data.insert(key.to_owned(), json!(text)).is_none(),
            "{}: key `{key}` twice",
            file.display()
        );
    }
    for l in m
        .get("literals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let l = l.as_str().unwrap_or_default();
        let (key, value) = l
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: literal `{l}` is not KEY=VALUE", file.display()));
        let value = value.trim_matches('"');
        assert!(
            data.insert(key.to_owned(), json!(value)).is_none(),
            "{}: key `{key}` twice",
            file.display()
        );
    }
    let mut meta = Map::new();
    meta.insert("name".into(), m.get("name").cloned().unwrap_or_default());
    for (field, value) in [
        ("namespace", m.get("namespace")),
        ("labels", o.get("labels")),
        ("annotations", o.get("annotations")),
    ] {
        if let Some(v) = value {
            meta.insert(field.into(), v.clone());
        }
    }
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
    if !data.is_empty() {
        cm["data"] = Value::Object(data);
    }
    cm
}

/// Whether `value` matches kustomize's anchored regular expression `pattern`.
fn matches(pattern: &str, value: &str) -> bool {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .unwrap_or_else(|e| panic!("target pattern `{pattern}`: {e}"))
        .is_match(value)
}

/// A `patches` entry: inline JSON 6902 operations applied to every object its target selects.
fn patch(objects: &mut [Value], p: &Value, file: &Path) {
    let m = fields(p, &["patch", "target"], "patches entry", file);
    let text = m
        .get("patch")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{}: a patch without inline `patch` text", file.display()));
    let ops: Value = serde_yaml_ng::from_str(text)
        .unwrap_or_else(|e| panic!("{}: patch is not YAML: {e}", file.display()));
    assert!(
        ops.is_array(),
        "{}: only JSON 6902 patches (a list of operations) are supported, not strategic merge",
        file.display()
    );
    let ops: json_patch::Patch = serde_json::from_value(ops)
        .unwrap_or_else(|e| panic!("{}: not JSON 6902 operations: {e}", file.display()));
    let target = m
        .get("target")
        .unwrap_or_else(|| panic!("{}: a JSON 6902 patch needs a target", file.display()));
    let t = fields(
        target,
        &["group", "version", "kind", "name", "namespace"],
        "patch target",
        file,
    );
    let want = |field: &str, value: &str| {
        t.get(field)
            .and_then(Value::as_str)
            .is_none_or(|pattern| matches(pattern, value))
    };
    for o in objects.iter_mut() {
        let (group, version) = group_version(o);
        let selected = want("group", group)
            && want("version", version)
            && want("kind", str_of(o, "kind"))
            && want("name", str_of(&o["metadata"], "name"))
            && want("namespace", str_of(&o["metadata"], "namespace"));
        if selected {
            json_patch::patch(o, &ops)
                .unwrap_or_else(|e| panic!("{}: patch fails on {:?}: {e}", file.display(), id(o)));
        }
    }
}

/// An `images` entry applied to every `containers` and `initContainers` image, wherever in an
/// object they are (kustomize's image transformer walks the whole object too).
fn image(objects: &mut [Value], i: &Value, file: &Path) {
    let m = fields(
        i,
        &["name", "newName", "newTag", "digest"],
        "images entry",
        file,
    );
    let get = |f: &str| m.get(f).and_then(Value::as_str);
    let name = get("name").unwrap_or_else(|| panic!("{}: an image without name", file.display()));
    let rule = (name, get("newName"), get("newTag"), get("digest"));
    for o in objects.iter_mut() {
        retag(o, rule);
    }
}

type Rule<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);

fn retag(v: &mut Value, rule: Rule) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "containers" || k == "initContainers" {
                    for c in child.as_array_mut().into_iter().flatten() {
                        if let Some(image) = c["image"].as_str() {
                            if let Some(new) = replaced(image, rule) {
                                c["image"] = json!(new);
                            }
                        }
                    }
                } else {
                    retag(child, rule);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|c| retag(c, rule)),
        _ => {}
    }
}

/// `image` with the rule applied, when its name is the rule's.
fn replaced(image: &str, (name, new_name, new_tag, digest): Rule) -> Option<String> {
    let (rest, old_digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (base, old_tag) = match rest[slash..].rfind(':') {
        Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
        None => (rest, None),
    };
    if base != name {
        return None;
    }
    let base = new_name.unwrap_or(base);
    Some(match (digest, new_tag, old_tag, old_digest) {
        (Some(d), ..) => format!("{base}@{d}"),
        (None, Some(t), ..) => format!("{base}:{t}"),
        (None, None, Some(t), _) => format!("{base}:{t}"),
        (None, None, None, Some(d)) => format!("{base}@{d}"),
        (None, None, None, None) => base.to_owned(),
    })
}

/// Kinds kustomize's legacy order puts first, in that order; `LAST` go after every other kind.
const FIRST: [&str; 22] = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// kustomize's legacy order: by kind rank, then `group_version_kind`, then namespace
/// (`default` when unset) and name.
fn sort_legacy(objects: &mut [Value]) {
    objects.sort_by_cached_key(|o| {
        let kind = str_of(o, "kind");
        let rank = match (
            FIRST.iter().position(|k| *k == kind),
            LAST.iter().position(|k| *k == kind),
        ) {
            (Some(i), _) => i as i64 - FIRST.len() as i64,
            (None, Some(i)) => i as i64 + 1,
            (None, None) => 0,
        };
        let (group, version) = group_version(o);
        let group = if group.is_empty() { "~G" } else { group };
        let ns = match str_of(&o["metadata"], "namespace") {
            "" => "default",
            ns => ns,
        };
        (
            rank,
            format!("{group}_{version}_{kind}"),
            format!("{ns}_{}", str_of(&o["metadata"], "name")),
        )
    });
}
