//! The structural schema model: a CRD version's `openAPIV3Schema` (JSONSchemaProps) parsed once
//! into typed nodes with compiled patterns and CEL rules, so admission never re-parses a schema.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::cel::{self, Rule};
use super::CrdError;

/// The `type` of a schema node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl SchemaType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "object" => SchemaType::Object,
            "array" => SchemaType::Array,
            "string" => SchemaType::String,
            "integer" => SchemaType::Integer,
            "number" => SchemaType::Number,
            "boolean" => SchemaType::Boolean,
            _ => return None,
        })
    }

    /// The name OpenAPI (and the API server's messages) use for this type.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SchemaType::Object => "object",
            SchemaType::Array => "array",
            SchemaType::String => "string",
            SchemaType::Integer => "integer",
            SchemaType::Number => "number",
            SchemaType::Boolean => "boolean",
        }
    }
}

/// `additionalProperties`: absent, a boolean, or a schema for every value of a map.
#[derive(Debug, Default)]
pub(crate) enum Additional {
    #[default]
    Absent,
    Allowed(bool),
    Schema(Box<Schema>),
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// One node of a structural schema.
#[derive(Debug, Default)]
pub(crate) struct Schema {
    pub ty: Option<SchemaType>,
    pub properties: BTreeMap<String, Schema>,
    pub required: Vec<String>,
    pub items: Option<Box<Schema>>,
    pub additional: Additional,
    pub enum_values: Option<Vec<Value>>,
    pub pattern: Option<(String, Regex)>,
    pub format: Option<String>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub nullable: bool,
    pub default: Option<Value>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub all_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    pub list_type: Option<ListType>,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded_resource: bool,
    pub rules: Vec<Rule>,
    /// True when this node or any node below it carries CEL rules (lets walks skip subtrees).
    pub any_rules: bool,
    /// True when this node or any node below it carries a transition rule (`oldSelf`): only
    /// then does admitting a new version need the previous one.
    pub any_old_self: bool,
}

impl Schema {
    /// Parses a JSONSchemaProps object; `path` names the node in errors (`.spec.foo`).
    pub(crate) fn parse(v: &Value, path: &str) -> Result<Schema, CrdError> {
        let obj = v.as_object().ok_or_else(|| CrdError::BadSchema {
            path: path.to_string(),
            reason: "schema is not an object".into(),
        })?;
        let mut s = Schema {
            ty: match obj.get("type").and_then(Value::as_str) {
                None | Some("") => None,
                Some(t) => Some(SchemaType::parse(t).ok_or_else(|| CrdError::BadSchema {
                    path: path.to_string(),
                    reason: format!("unknown type {t:?}"),
                })?),
            },
            required: strings(obj.get("required")),
            enum_values: obj.get("enum").and_then(Value::as_array).cloned(),
            format: obj
                .get("format")
                .and_then(Value::as_str)
                .map(str::to_string),
            minimum: obj.get("minimum").and_then(Value::as_f64),
            maximum: obj.get("maximum").and_then(Value::as_f64),
            exclusive_minimum: flag(obj, "exclusiveMinimum"),
            exclusive_maximum: flag(obj, "exclusiveMaximum"),
            min_length: obj.get("minLength").and_then(Value::as_u64),
            max_length: obj.get("maxLength").and_then(Value::as_u64),
            min_items: obj.get("minItems").and_then(Value::as_u64),
            max_items: obj.get("maxItems").and_then(Value::as_u64),
            min_properties: obj.get("minProperties").and_then(Value::as_u64),
            max_properties: obj.get("maxProperties").and_then(Value::as_u64),
            nullable: flag(obj, "nullable"),
            default: obj.get("default").cloned(),
            int_or_string: flag(obj, "x-kubernetes-int-or-string"),
            preserve_unknown: flag(obj, "x-kubernetes-preserve-unknown-fields"),
            embedded_resource: flag(obj, "x-kubernetes-embedded-resource"),
            ..Schema::default()
        };
        if let Some(p) = obj.get("pattern").and_then(Value::as_str) {
            let re = Regex::new(p).map_err(|e| CrdError::BadPattern {
                path: path.to_string(),
                pattern: p.to_string(),
                reason: e.to_string(),
            })?;
            s.pattern = Some((p.to_string(), re));
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let sub = Schema::parse(sub, &format!("{path}.{name}"))?;
                s.properties.insert(name.clone(), sub);
            }
        }
        if let Some(items) = obj.get("items") {
            s.items = Some(Box::new(Schema::parse(items, &format!("{path}[*]"))?));
        }
        s.additional = match obj.get("additionalProperties") {
            None => Additional::Absent,
            Some(Value::Bool(b)) => Additional::Allowed(*b),
            Some(sub) => Additional::Schema(Box::new(Schema::parse(sub, &format!("{path}[*]"))?)),
        };
        for (key, list) in [
            ("anyOf", &mut s.any_of),
            ("oneOf", &mut s.one_of),
            ("allOf", &mut s.all_of),
        ] {
            if let Some(subs) = obj.get(key).and_then(Value::as_array) {
                for (i, sub) in subs.iter().enumerate() {
                    list.push(Schema::parse(sub, &format!("{path}.{key}[{i}]"))?);
                }
            }
        }
        if let Some(not) = obj.get("not") {
            s.not = Some(Box::new(Schema::parse(not, &format!("{path}.not"))?));
        }
        s.list_type = match obj.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => Some(ListType::Set),
            Some("map") => Some(ListType::Map(strings(
                obj.get("x-kubernetes-list-map-keys"),
            ))),
            Some("atomic") => Some(ListType::Atomic),
            _ => None,
        };
        if let Some(rules) = obj
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        {
            for (i, rule) in rules.iter().enumerate() {
                s.rules.push(cel::compile_rule(rule, path, i)?);
            }
        }
        s.any_rules = !s.rules.is_empty()
            || s.properties.values().any(|p| p.any_rules)
            || s.items.as_ref().is_some_and(|i| i.any_rules)
            || matches!(&s.additional, Additional::Schema(a) if a.any_rules);
        s.any_old_self = s.rules.iter().any(Rule::uses_old_self)
            || s.properties.values().any(|p| p.any_old_self)
            || s.items.as_ref().is_some_and(|i| i.any_old_self)
            || matches!(&s.additional, Additional::Schema(a) if a.any_old_self);
        Ok(s)
    }

    /// The schema of property or map entry `name`, if the schema declares one.
    pub(crate) fn child(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        })
    }

    /// Every compiled rule in this subtree, with its schema path, for reports and tests.
    pub(crate) fn collect_rules<'a>(&'a self, path: &str, out: &mut Vec<(String, &'a Rule)>) {
        out.extend(self.rules.iter().map(|r| (path.to_string(), r)));
        for (name, p) in &self.properties {
            p.collect_rules(&format!("{path}.{name}"), out);
        }
        if let Some(items) = &self.items {
            items.collect_rules(&format!("{path}[*]"), out);
        }
        if let Additional::Schema(s) = &self.additional {
            s.collect_rules(&format!("{path}[*]"), out);
        }
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn flag(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key).and_then(Value::as_bool).unwrap_or(false)
}
