//! The ingress-nginx annotations that edit headers: `custom-headers` (a ConfigMap whose entries
//! are set on the response to the client, nginx's `more_set_headers`), and
//! `configuration-snippet` / `server-snippet` limited to the header directives
//! `more_set_headers`, `more_set_input_headers`, `proxy_set_header` and `add_header`, parsed
//! strictly: a snippet holding anything else (another directive, an option, a block, an nginx
//! variable) is refused whole and reported with the directive. They become the lowered rules'
//! `RequestHeaderModifier` and `ResponseHeaderModifier` filters. The ConfigMap is read when the
//! Ingress is prepared ([`resolve`]) into an annotation of the working copy
//! ([`CUSTOM_HEADERS`]), so the lowering stays a function of the Ingress. Pure.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use crate::kinds::ingress::NGINX_PREFIX;
use crate::snapshot::{find_named, namespace_of, Snapshot};

/// The annotations this module reads.
pub const NAMES: &[&str] = &["custom-headers", "configuration-snippet", "server-snippet"];

/// Annotation `prepare` sets on its working copy of an Ingress: the entries of the
/// `custom-headers` ConfigMap as a JSON object. A value an Ingress carries itself is replaced.
pub const CUSTOM_HEADERS: &str = "edgeplane.dev/ingress-custom-headers";

/// What is done to one header.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Edit {
    Set(String),
    /// nginx's `add_header`: without `always`, on 2xx and 3xx responses only.
    Add {
        value: String,
        always: bool,
    },
    Remove,
}

/// The header edits of one Ingress, by lower-case name (with the name as written); for a
/// name edited twice the last directive wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderEdits {
    request: BTreeMap<String, (String, Edit)>,
    response: BTreeMap<String, (String, Edit)>,
}

/// Where a directive's headers go.
#[derive(Clone, Copy)]
enum Side {
    Request,
    Response,
}

impl HeaderEdits {
    fn edit(&mut self, side: Side, name: &str, edit: Edit) {
        let map = match side {
            Side::Request => &mut self.request,
            Side::Response => &mut self.response,
        };
        map.insert(name.to_ascii_lowercase(), (name.to_owned(), edit));
    }

    /// `other`'s edits over these (for a name edited in both, `other`'s).
    pub fn extend(&mut self, other: HeaderEdits) {
        self.request.extend(other.request);
        self.response.extend(other.response);
    }

    /// Sets `name: value` on requests sent upstream unless a directive edits it already.
    pub fn set_request_default(&mut self, name: &str, value: &str) {
        self.request
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| (name.to_owned(), Edit::Set(value.to_owned())));
    }

    /// The names of the response headers added (`add_header`) without `always`, which nginx
    /// adds to 2xx and 3xx responses only: the `ResponseHeaderModifier` adds them to every
    /// response, the serving table to those only.
    pub fn added_on_success(&self) -> Vec<String> {
        self.response
            .values()
            .filter(|(_, e)| matches!(e, Edit::Add { always: false, .. }))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The `RequestHeaderModifier` and `ResponseHeaderModifier` filters, when there are edits.
    pub fn filters(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for (kind, field, map) in [
            (
                "RequestHeaderModifier",
                "requestHeaderModifier",
                &self.request,
            ),
            (
                "ResponseHeaderModifier",
                "responseHeaderModifier",
                &self.response,
            ),
        ] {
            if map.is_empty() {
                continue;
            }
            let (mut set, mut add, mut remove) = (Vec::new(), Vec::new(), Vec::new());
            for (name, edit) in map.values() {
                match edit {
                    Edit::Set(v) => set.push(json!({"name": name, "value": v})),
                    Edit::Add { value, .. } => add.push(json!({"name": name, "value": value})),
                    Edit::Remove => remove.push(json!(name)),
                }
            }
            let mut modifier = serde_json::Map::new();
            for (key, list) in [("set", set), ("add", add), ("remove", remove)] {
                if !list.is_empty() {
                    modifier.insert(key.into(), Value::Array(list));
                }
            }
            out.push(json!({"type": kind, field: modifier}));
        }
        out
    }

    /// Reads `custom-headers` (from [`CUSTOM_HEADERS`]) and the snippets; what cannot be
    /// applied goes to `problems`. With `server_level`, `server-snippet` is only checked: it
    /// applies per host ([`super::server_snippet`]).
    pub fn read<'a>(
        get: &dyn Fn(&str) -> Option<&'a str>,
        custom: Option<&'a str>,
        server_level: bool,
        problems: &mut Vec<String>,
    ) -> Self {
        let mut out = Self::default();
        if get("custom-headers").is_some() {
            let entries: BTreeMap<String, String> = custom
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or_default();
            let mut bad = Vec::new();
            for (name, value) in &entries {
                match header(name, value) {
                    Ok(()) => out.edit(Side::Response, name, Edit::Set(value.clone())),
                    Err(why) => bad.push(format!("{name:?}: {why}")),
                }
            }
            if !bad.is_empty() {
                problems.push(format!(
                    "annotation {NGINX_PREFIX}custom-headers: entries not applied: {}",
                    bad.join("; ")
                ));
            }
        }
        for name in ["server-snippet", "configuration-snippet"] {
            let Some(text) = get(name) else { continue };
            match snippet(text) {
                Ok(_) if server_level && name == "server-snippet" => {}
                Ok(edits) => out.extend(edits),
                Err(why) => problems.push(format!(
                    "annotation {NGINX_PREFIX}{name}: {why} (the snippet is not applied)"
                )),
            }
        }
        out
    }
}

/// A header name and value as configured: valid, and no nginx variable in the value.
fn header(name: &str, value: &str) -> Result<(), String> {
    HeaderName::try_from(name).map_err(|_| "not a header name".to_owned())?;
    if value.contains('$') {
        return Err("an nginx variable in the value is not served".to_owned());
    }
    HeaderValue::try_from(value).map_err(|_| "not a header value".to_owned())?;
    Ok(())
}

/// The statements of an nginx snippet, each its words (quotes removed, `\` escapes kept as
/// the escaped character); comments dropped. Blocks are refused.
fn statements(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            ';' => out.push(std::mem::take(&mut words)),
            '{' | '}' => return Err("a block ({ }) is refused".to_owned()),
            '"' | '\'' => {
                let mut word = String::new();
                let mut closed = false;
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => word.extend(chars.next()),
                        d if d == c => {
                            closed = true;
                            break;
                        }
                        d => word.push(d),
                    }
                }
                if !closed {
                    return Err("a quote is not closed".to_owned());
                }
                words.push(word);
            }
            c => {
                let mut word = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() || matches!(d, ';' | '{' | '}' | '"' | '\'') {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
                words.push(word);
            }
        }
    }
    if !words.is_empty() {
        return Err(format!("{:?} does not end with ';'", words.join(" ")));
    }
    Ok(out)
}

/// The header edits of a snippet, or why it is refused (every refused directive named).
pub fn snippet(text: &str) -> Result<HeaderEdits, String> {
    let mut out = HeaderEdits::default();
    let mut refused = Vec::new();
    for words in statements(text)? {
        let Some((directive, args)) = words.split_first() else {
            continue;
        };
        if let Err(why) = directive_edits(&mut out, directive, args) {
            refused.push(format!("{directive:?} {why}"));
        }
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "directive {} (only more_set_headers, more_set_input_headers, proxy_set_header \
             and add_header with constant values are served)",
            refused.join(", ")
        ))
    }
}

fn directive_edits(out: &mut HeaderEdits, directive: &str, args: &[String]) -> Result<(), String> {
    match directive {
        "more_set_headers" | "more_set_input_headers" => {
            let side = if directive == "more_set_headers" {
                Side::Response
            } else {
                Side::Request
            };
            if args.is_empty() {
                return Err("needs a header".to_owned());
            }
            for a in args {
                if a.starts_with('-') {
                    return Err(format!("option {a} is refused"));
                }
                let (name, value) = a.split_once(':').unwrap_or((a, ""));
                let (name, value) = (name.trim(), value.trim());
                header(name, value).map_err(|why| format!("{a:?}: {why}"))?;
                let edit = if value.is_empty() {
                    Edit::Remove
                } else {
                    Edit::Set(value.to_owned())
                };
                out.edit(side, name, edit);
            }
            Ok(())
        }
        "proxy_set_header" => match args {
            [name, value] => {
                header(name, value).map_err(|why| format!("{name:?}: {why}"))?;
                // An empty value: nginx does not send the header.
                let edit = if value.is_empty() {
                    Edit::Remove
                } else {
                    Edit::Set(value.clone())
                };
                out.edit(Side::Request, name, edit);
                Ok(())
            }
            _ => Err("needs a name and a value".to_owned()),
        },
        "add_header" => match args {
            [name, value] | [name, value, _] => {
                if args.get(2).is_some_and(|a| a != "always") {
                    return Err(format!("{:?} is not always", args[2]));
                }
                header(name, value).map_err(|why| format!("{name:?}: {why}"))?;
                let always = args.len() == 3;
                let edit = Edit::Add {
                    value: value.clone(),
                    always,
                };
                out.edit(Side::Response, name, edit);
                Ok(())
            }
            _ => Err("needs a name and a value".to_owned()),
        },
        _ => Err("is refused".to_owned()),
    }
}

/// The `(namespace, name)` of the ConfigMap `custom-headers` names: `namespace/name` or `name`
/// (the Ingress's namespace); only the Ingress's namespace is read.
pub fn config_map_of(ingress: &Ingress) -> Option<Result<(String, String), String>> {
    let value = ingress
        .metadata
        .annotations
        .as_ref()?
        .get(&format!("{NGINX_PREFIX}custom-headers"))?
        .trim();
    let ns = namespace_of(&ingress.metadata);
    Some(match value.split_once('/') {
        None if !value.is_empty() => Ok((ns.to_owned(), value.to_owned())),
        Some((n, name)) if n == ns && !name.is_empty() => Ok((ns.to_owned(), name.to_owned())),
        _ => Err(format!(
            "annotation {NGINX_PREFIX}custom-headers: {value:?} is not a ConfigMap of the \
             Ingress's namespace (only those are read; not applied)"
        )),
    })
}

/// Writes the entries of the `custom-headers` ConfigMap of `ingress` (a working copy) into
/// [`CUSTOM_HEADERS`]; a ConfigMap that cannot be read goes to `problems`.
pub fn resolve(snapshot: &Snapshot, ingress: &mut Ingress, problems: &mut Vec<String>) {
    let wanted = config_map_of(ingress);
    let notes = ingress
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    notes.remove(CUSTOM_HEADERS);
    let (ns, name) = match wanted {
        None => return,
        Some(Err(why)) => {
            problems.push(why);
            return;
        }
        Some(Ok(found)) => found,
    };
    let map = find_named(&snapshot.config_maps, &ns, &name);
    match map {
        Some(c) => {
            let data = c.data.clone().unwrap_or_default();
            notes.insert(CUSTOM_HEADERS.to_owned(), json!(data).to_string());
        }
        None => problems.push(format!(
            "annotation {NGINX_PREFIX}custom-headers: ConfigMap {ns}/{name} not found (not applied)"
        )),
    }
}

#[cfg(test)]
#[path = "headers_tests.rs"]
mod tests;
