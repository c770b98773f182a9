//! What the Kubernetes API server does to a custom resource before a controller sees it:
//! structural defaulting, schema validation and CEL rules. Pure: JSON values in, results out.
//! (Placeholder registry: keeps schemas and applies defaults; validation lands with the engine.)

pub mod builtin;

use std::collections::BTreeMap;

use serde_json::Value;

/// Registry of CRD schemas by (group, kind) and version.
#[derive(Debug, Clone, Default)]
pub struct Crds {
    schemas: BTreeMap<(String, String), BTreeMap<String, Value>>,
}

/// A CustomResourceDefinition that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("not a CustomResourceDefinition: {0}")]
    NotACrd(String),
}

/// Why an object was not admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub kind: String,
    pub name: String,
    pub errors: Vec<FieldError>,
}

/// One field error.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub detail: String,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?} is invalid: ", self.kind, self.name)?;
        for e in &self.errors {
            write!(f, "{}: {}", e.field, e.detail)?;
        }
        Ok(())
    }
}

impl Crds {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, crd: &Value) -> Result<String, CrdError> {
        let spec = crd
            .get("spec")
            .ok_or_else(|| CrdError::NotACrd("no spec".into()))?;
        let group = spec["group"].as_str().unwrap_or("").to_owned();
        let kind = spec["names"]["kind"].as_str().unwrap_or("").to_owned();
        let mut versions = BTreeMap::new();
        for v in spec["versions"].as_array().into_iter().flatten() {
            versions.insert(
                v["name"].as_str().unwrap_or("").to_owned(),
                v["schema"]["openAPIV3Schema"].clone(),
            );
        }
        let name = format!("{kind}.{group}");
        self.schemas.insert((group, kind), versions);
        Ok(name)
    }

    pub fn contains(&self, api_version: &str, kind: &str) -> bool {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.schemas
            .get(&(group.to_owned(), kind.to_owned()))
            .is_some_and(|v| v.contains_key(version))
    }

    pub fn admit(&self, object: &mut Value, _old: Option<&Value>) -> Result<(), Rejection> {
        let api_version = object["apiVersion"].as_str().unwrap_or("").to_owned();
        let kind = object["kind"].as_str().unwrap_or("").to_owned();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        if let Some(s) = self
            .schemas
            .get(&(group.to_owned(), kind))
            .and_then(|v| v.get(version))
        {
            default(object, s);
        }
        Ok(())
    }
}

fn default(x: &mut Value, s: &Value) {
    match x {
        Value::Object(map) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    if let Some(d) = p.get("default") {
                        if !map.contains_key(k) {
                            map.insert(k.clone(), d.clone());
                        }
                    }
                }
                for (k, v) in map.iter_mut() {
                    if let Some(p) = props.get(k) {
                        default(v, p);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(i) = s.get("items") {
                for v in items {
                    default(v, i);
                }
            }
        }
        _ => {}
    }
}
