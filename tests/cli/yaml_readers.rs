//! Every YAML edgeplane writes means the same to a YAML 1.1 reader (kubectl's go-yaml v2,
//! PyYAML) and to a YAML 1.2 reader: `crds/edgeplane.yaml`, `edgeplane crds` and `check`'s
//! output on manifests full of strings that look like other types are read with both
//! resolutions (written here from the two specifications' type rules, applied to the plain
//! scalars of yaml-rust2's event parser) and compared, as JSON, with what was meant; PyYAML
//! reads them too when it is installed (with `CI=true` it must be).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;

use regex::Regex;
use serde_json::{json, Map, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::{text, write, BIN, CONTROLLER};

/// Which specification resolves plain scalars.
#[derive(Clone, Copy, Debug)]
enum Spec {
    /// The YAML 1.1 type repository (yaml.org/type): bool, null, int, float, timestamp, merge,
    /// value.
    V1_1,
    /// The YAML 1.2 core schema.
    V1_2,
}

/// `re` matching whole scalars, compiled once per pattern.
fn full(re: &'static str) -> Regex {
    static CACHE: Mutex<BTreeMap<&'static str, Regex>> = Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap();
    cache
        .entry(re)
        .or_insert_with(|| Regex::new(&format!("^(?:{re})$")).unwrap())
        .clone()
}

/// A plain scalar as `spec` resolves it. Values that are not plain strings, booleans, null
/// or decimal numbers come out as `{"<type>": text}`, never equal to what edgeplane meant.
fn resolve(spec: Spec, s: &str) -> Value {
    let tagged = |t: &str| json!({ t: s });
    let decimal = |text: &str| -> Value {
        let t = text.replace('_', "");
        t.parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| tagged("int"))
    };
    let float = |text: &str| -> Value {
        text.replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
            .unwrap_or_else(|| tagged("float"))
    };
    match spec {
        Spec::V1_1 => {
            if full("y|Y|yes|Yes|YES|on|On|ON|true|True|TRUE").is_match(s) {
                Value::Bool(true)
            } else if full("n|N|no|No|NO|off|Off|OFF|false|False|FALSE").is_match(s) {
                Value::Bool(false)
            } else if full("~|null|Null|NULL|").is_match(s) {
                Value::Null
            } else if full("[-+]?(?:0|[1-9][0-9_]*)").is_match(s) {
                decimal(s)
            } else if full(
                "[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+",
            )
            .is_match(s)
            {
                tagged("int")
            } else if full("[-+]?(?:[0-9][0-9_]*)?\\.[0-9.]*(?:[eE][-+][0-9]+)?").is_match(s) {
                float(s)
            } else if full("[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)")
                .is_match(s)
            {
                tagged("float")
            } else if full("[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \\t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]*)?(?:[ \\t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?")
                .is_match(s)
            {
                tagged("timestamp")
            } else if s == "<<" || s == "=" {
                tagged("special")
            } else {
                Value::String(s.to_owned())
            }
        }
        Spec::V1_2 => {
            if full("true|True|TRUE").is_match(s) {
                Value::Bool(true)
            } else if full("false|False|FALSE").is_match(s) {
                Value::Bool(false)
            } else if full("~|null|Null|NULL|").is_match(s) {
                Value::Null
            } else if full("[-+]?[0-9]+").is_match(s) {
                decimal(s)
            } else if full("0o[0-7]+|0x[0-9a-fA-F]+").is_match(s) {
                tagged("int")
            } else if full("[-+]?(?:\\.[0-9]+|[0-9]+(?:\\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?").is_match(s) {
                float(s)
            } else if full("[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)").is_match(s) {
                tagged("float")
            } else {
                Value::String(s.to_owned())
            }
        }
    }
}

/// Builds JSON documents from parser events.
struct Reader {
    spec: Spec,
    docs: Vec<Value>,
    /// Open collections: a sequence, or a mapping with the key waiting for its value.
    stack: Vec<(Value, Option<String>)>,
}

impl Reader {
    fn push(&mut self, v: Value) {
        match self.stack.last_mut() {
            None => self.docs.push(v),
            Some((Value::Array(a), _)) => a.push(v),
            Some((Value::Object(m), key)) => match key.take() {
                Some(k) => {
                    m.insert(k, v);
                }
                None => {
                    let k = match v {
                        Value::String(s) => s,
                        other => panic!("a mapping key that is not a string: {other}"),
                    };
                    *key = Some(k);
                }
            },
            Some(_) => unreachable!(),
        }
    }
}

impl MarkedEventReceiver for Reader {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(value, style, _, tag) => {
                assert!(tag.is_none(), "a tag at line {}", mark.line());
                let v = match style {
                    TScalarStyle::Plain => resolve(self.spec, &value),
                    _ => Value::String(value),
                };
                self.push(v);
            }
            Event::SequenceStart(_, tag) | Event::MappingStart(_, tag) if tag.is_some() => {
                panic!("a tag at line {}", mark.line())
            }
            Event::SequenceStart(..) => self.stack.push((Value::Array(Vec::new()), None)),
            Event::MappingStart(..) => self.stack.push((Value::Object(Map::new()), None)),
            Event::SequenceEnd | Event::MappingEnd => {
                let (v, _) = self.stack.pop().expect("balanced events");
                self.push(v);
            }
            Event::Alias(_) => panic!("an alias at line {}", mark.line()),
            _ => {}
        }
    }
}

/// Every document of `text`, as a reader following `spec` takes it.
fn read(spec: Spec, text: &str) -> Vec<Value> {
    let mut r = Reader {
        spec,
        docs: Vec::new(),
        stack: Vec::new(),
    };
    Parser::new_from_str(text)
        .load(&mut r, true)
        .expect("valid YAML");
    r.docs
}

/// Every document of `text` as PyYAML (YAML 1.1) reads it, values of other types marked as
/// the resolver above marks them; `None` when python3 or PyYAML is missing (an error when
/// `CI=true`).
fn pyyaml(yaml: &str) -> Option<Vec<Value>> {
    const SCRIPT: &str = "import sys, json, yaml\n\
        docs = list(yaml.safe_load_all(sys.stdin))\n\
        print(json.dumps(docs, default=lambda o: {type(o).__name__: str(o)}))\n";
    let child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let missing = |why: String| {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "PyYAML is needed in CI (apt-get install python3-yaml): {why}"
        );
        eprintln!("PyYAML not run: {why}");
        None
    };
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return missing(format!("python3: {e}")),
    };
    use std::io::Write;
    let mut stdin = child.stdin.take().unwrap();
    let input = yaml.to_owned();
    let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    let err = text(&out.stderr);
    if err.contains("No module named 'yaml'") {
        return missing(err);
    }
    assert!(out.status.success(), "PyYAML failed: {err}");
    Some(serde_json::from_slice(&out.stdout).expect("PyYAML's JSON"))
}

/// `lastTransitionTime`s that read as strings, replaced by one value: two runs of `check`
/// stamp different times. A time read as anything else stays and fails the comparison.
fn without_times(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "lastTransitionTime" && x.is_string() {
                    *x = json!("<time>");
                } else {
                    without_times(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(without_times),
        _ => {}
    }
}

/// `text` read as YAML 1.1, as YAML 1.2 and by PyYAML is `meant`, document for document.
fn same_to_every_reader(what: &str, text: &str, meant: &[Value]) {
    let mut meant = meant.to_vec();
    meant.iter_mut().for_each(without_times);
    let mut readings = vec![
        ("YAML 1.1", read(Spec::V1_1, text)),
        ("YAML 1.2", read(Spec::V1_2, text)),
    ];
    if let Some(py) = pyyaml(text) {
        readings.push(("PyYAML", py));
    }
    for (reader, mut docs) in readings {
        docs.iter_mut().for_each(without_times);
        assert_eq!(
            docs.len(),
            meant.len(),
            "{what}: documents read by {reader}"
        );
        for (i, (got, want)) in docs.iter().zip(&meant).enumerate() {
            if got != want {
                panic!(
                    "{what}, document {i}: {reader} reads something else:\n{}",
                    first_difference(got, want, "")
                );
            }
        }
    }
}

/// Where two values first differ, as `path: got != want`.
fn first_difference(got: &Value, want: &Value, path: &str) -> String {
    match (got, want) {
        (Value::Object(a), Value::Object(b)) if a.len() == b.len() => {
            for (k, x) in a {
                match b.get(k) {
                    Some(y) if x != y => return first_difference(x, y, &format!("{path}.{k}")),
                    None => return format!("{path}: key {k} not meant"),
                    _ => {}
                }
            }
            format!("{path}: ?")
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            let (i, (x, y)) = a
                .iter()
                .zip(b)
                .enumerate()
                .find(|(_, (x, y))| x != y)
                .unwrap();
            first_difference(x, y, &format!("{path}[{i}]"))
        }
        _ => format!("{path}: {got} != {want}"),
    }
}

#[test]
fn the_resolvers_tell_the_versions_apart() {
    // Unquoted, each of these is not the string to one reader at least: what the CRD file's
    // plain `Off` was to kubectl.
    for s in [
        "Off",
        "on",
        "y",
        "N",
        "yes",
        "0755",
        "0x1f",
        "0o17",
        "0b11",
        "1_000",
        "1:20",
        "1e3",
        "1.5",
        ".inf",
        ".NaN",
        "~",
        "null",
        "2001-12-14",
        "2001-12-14T21:59:43Z",
        "<<",
    ] {
        let doc = format!("v: {s}\n");
        let readings = [read(Spec::V1_1, &doc), read(Spec::V1_2, &doc)];
        assert!(
            readings.iter().any(|r| r[0]["v"] != json!(s)),
            "{s} reads as the string to both"
        );
        // Quoted, it is the string to both.
        for spec in [Spec::V1_1, Spec::V1_2] {
            assert_eq!(read(spec, &format!("v: '{s}'\n"))[0]["v"], json!(s));
        }
    }
    assert_eq!(read(Spec::V1_1, "- Off\n")[0], json!([false]));
    assert_eq!(read(Spec::V1_2, "- Off\n")[0], json!(["Off"]));
    assert_eq!(
        read(Spec::V1_1, "a: 12\nb: 1.5\n")[0],
        json!({"a": 12, "b": 1.5})
    );
}

#[test]
fn the_crds_mean_the_same_to_every_reader() {
    let meant = edgeplane::kinds::crd::generate::crd_values().expect("CRDs generate");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds/edgeplane.yaml");
    let on_disk = std::fs::read_to_string(path).unwrap();
    same_to_every_reader("crds/edgeplane.yaml", &on_disk, &meant);
    let out = Command::new(BIN).arg("crds").output().unwrap();
    assert!(out.status.success());
    same_to_every_reader("edgeplane crds", &text(&out.stdout), &meant);
    // The values that once read as `false` under kubectl: the access log format of both
    // ProxyConfig versions.
    fn enums_with_off(v: &Value, found: &mut usize) {
        match v {
            Value::Object(m) => {
                let off = m.get("enum").and_then(Value::as_array);
                *found += usize::from(off.is_some_and(|e| e.contains(&json!("Off"))));
                m.values().for_each(|x| enums_with_off(x, found));
            }
            Value::Array(a) => a.iter().for_each(|x| enums_with_off(x, found)),
            _ => {}
        }
    }
    let mut found = 0;
    meant.iter().for_each(|crd| enums_with_off(crd, &mut found));
    assert_eq!(found, 2, "both ProxyConfig versions");
}

/// Manifests whose names, sections and values look like other types to one reader or
/// another.
fn tricky_manifests() -> String {
    let route = |name: &str, section: &str, backend: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: \"{name}\"\nspec:\n  parentRefs:\n  - name: \"on\"\n    sectionName: \"{section}\"\n  rules:\n  - filters:\n    - type: RequestHeaderModifier\n      requestHeaderModifier:\n        set:\n        - {{name: X-Yes, value: \"yes\"}}\n        - {{name: X-No, value: \"no\"}}\n        - {{name: X-Time, value: \"1:20\"}}\n        - {{name: X-Mode, value: \"0755\"}}\n        - {{name: X-Date, value: \"2001-12-14\"}}\n        - {{name: X-Null, value: \"~\"}}\n        - {{name: X-Inf, value: \".inf\"}}\n    backendRefs:\n    - name: \"{backend}\"\n      port: 8080\n"
        )
    };
    let mut text = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: \"off\"\nspec:\n  controllerName: {CONTROLLER}\n---\napiVersion: edgeplane.dev/v1beta1\nkind: ProxyConfig\nmetadata:\n  name: \"yes\"\nspec:\n  accessLog:\n    format: \"Off\"\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: \"on\"\nspec:\n  gatewayClassName: \"off\"\n  listeners:\n  - name: \"0755\"\n    protocol: HTTP\n    port: 18080\n  - name: \"2001-12-14\"\n    protocol: HTTP\n    port: 18081\n"
    );
    for (name, section, backend) in [
        ("y", "0755", "null"),
        ("no", "2001-12-14", "1e3"),
        ("2001-12-14", "0755", "0x1f"),
        ("0o17", "0755", "true"),
    ] {
        text.push_str(&route(name, section, backend));
    }
    text
}

#[test]
fn check_output_means_the_same_to_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tricky.yaml", &tricky_manifests());
    let run = |output: &str| {
        let out = Command::new(BIN)
            .args(["check", "--output", output, "--config-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        // Missing backends: problems, not errors.
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let meant: Value = serde_json::from_str(&run("json")).expect("JSON output");
    let names: Vec<&str> = meant
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["off", "on", "0o17", "2001-12-14", "no", "y"],
        "{meant}"
    );
    same_to_every_reader("check --output yaml", &run("yaml"), &[meant]);
}
