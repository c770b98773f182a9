//! Server-side printing: a get or list asked for `as=Table` in `Accept` (what `kubectl get`
//! sends) answers a `meta.k8s.io/v1` `Table`. For a custom resource the columns are `Name` and
//! the `additionalPrinterColumns` of the requested version in the stored CRD (or `Name` and
//! `Age` when it declares none); each cell is the FIRST value the column's JSONPath selects,
//! as the API server prints it, so a column that selects several values shows one of them.
//! Other kinds get `Name` and `Created At`.

use serde_json::{json, Value};
use serde_json_path::JsonPath;

use super::store::Store;
use super::Kind;

/// `true` when `accept` asks for a Table rendering.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .any(|media| media.split(';').any(|p| p.trim() == "as=Table"))
}

/// One printed column: its definition as the Table reports it and the JSONPath of its cells.
struct Column {
    definition: Value,
    path: String,
}

impl Column {
    fn new(name: &str, ty: &str, format: &str, path: &str, description: &str) -> Column {
        Column {
            definition: json!({"name": name, "type": ty, "format": format,
                "description": description, "priority": 0}),
            path: path.to_string(),
        }
    }

    /// The column from one `additionalPrinterColumns` entry of a CRD.
    fn from_crd(c: &Value) -> Column {
        let text = |k: &str| c[k].as_str().unwrap_or_default();
        let mut column = Column::new(
            text("name"),
            text("type"),
            text("format"),
            text("jsonPath"),
            text("description"),
        );
        column.definition["priority"] = json!(c["priority"].as_i64().unwrap_or(0));
        column
    }

    fn ty(&self) -> &str {
        self.definition["type"].as_str().unwrap_or("string")
    }

    /// The cell for `obj`: the first match of the JSONPath, typed as the API server types it;
    /// `null` (printed `<none>`) when nothing matches or the value does not fit the type.
    fn cell(&self, obj: &Value) -> Value {
        let Ok(query) = JsonPath::parse(&format!("${}", self.path)) else {
            return Value::Null;
        };
        let Some(value) = query.query(obj).first() else {
            return Value::Null;
        };
        match (self.ty(), value) {
            ("string", Value::String(s)) => json!(s),
            ("string", other) => json!(other.to_string()),
            ("integer", Value::Number(n)) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, |i| json!(i)),
            ("number", Value::Number(n)) => json!(n),
            ("boolean", Value::Bool(b)) => json!(b),
            ("date", Value::String(s)) => json!(s),
            _ => Value::Null,
        }
    }
}

/// The columns `kind` prints with, read from its CRD in `store` when it has one.
fn columns(store: &Store, kind: &Kind) -> Vec<Column> {
    let name = Column::new(
        "Name",
        "string",
        "name",
        ".metadata.name",
        "Name must be unique within a namespace.",
    );
    let crd = store
        .kinds
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .and_then(|crds| store.get(&crds, "", &kind.resource()).ok());
    let Some(crd) = crd else {
        let created = ".metadata.creationTimestamp";
        return vec![name, Column::new("Created At", "date", "", created, "")];
    };
    let declared: Vec<Column> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["name"] == kind.version.as_str())
        .flat_map(|v| v["additionalPrinterColumns"].as_array().cloned())
        .flatten()
        .map(|c| Column::from_crd(&c))
        .collect();
    if declared.is_empty() {
        let age = ".metadata.creationTimestamp";
        return vec![name, Column::new("Age", "date", "", age, "")];
    }
    std::iter::once(name).chain(declared).collect()
}

/// The Table for `objects` (already at the requested version), each row carrying the
/// object's metadata as the default `includeObject=Metadata` does.
pub fn render(store: &Store, kind: &Kind, objects: &[Value], rv: Option<u64>) -> Value {
    let columns = columns(store, kind);
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = columns.iter().map(|c| c.cell(o)).collect();
            json!({"cells": cells, "object": {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": o["metadata"]}})
        })
        .collect();
    let mut table = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns.iter().map(|c| c.definition.clone()).collect::<Vec<_>>(),
        "rows": rows,
    });
    if let Some(rv) = rv {
        table["metadata"]["resourceVersion"] = json!(rv.to_string());
    }
    table
}
