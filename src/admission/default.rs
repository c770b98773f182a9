//! Structural defaulting, as the API server applies it before validation: a missing property
//! whose schema has a `default` gets a deep copy of it, then defaulting recurses into every
//! property (newly defaulted ones included), list item and `additionalProperties` value.

use serde_json::Value;

use super::schema::{Additional, Schema};

/// Applies `schema`'s defaults to `value` in place.
pub(crate) fn apply(schema: &Schema, value: &mut Value) {
    match value {
        Value::Object(map) => {
            // Nulls in non-nullable fields are pruned before defaulting, as the API server does.
            map.retain(|name, v| !v.is_null() || schema.child(name).is_none_or(|s| s.nullable));
            for (name, prop) in &schema.properties {
                if let (Some(default), false) = (&prop.default, map.contains_key(name)) {
                    map.insert(name.clone(), default.clone());
                }
            }
            for (name, v) in map.iter_mut() {
                if let Some(prop) = schema.properties.get(name) {
                    apply(prop, v);
                } else if let Additional::Schema(s) = &schema.additional {
                    apply(s, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    apply(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::parse(&v, "").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn defaults_recurse_into_new_values_items_and_maps() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "default": {},
                      "properties": {"b": {"type": "string", "default": "x"}}},
                "list": {"type": "array", "items": {"type": "object",
                      "properties": {"w": {"type": "integer", "default": 1}}}},
                "m": {"type": "object", "additionalProperties": {"type": "object",
                      "properties": {"k": {"type": "boolean", "default": true}}}},
                "keep": {"type": "string", "default": "d"}
            }
        }));
        let mut v = json!({"list": [{}, {"w": 5}], "m": {"one": {}}, "keep": "mine", "a": null});
        apply(&s, &mut v);
        assert_eq!(
            v,
            json!({"a": {"b": "x"}, "list": [{"w": 1}, {"w": 5}], "m": {"one": {"k": true}},
                   "keep": "mine"})
        );
    }
}
