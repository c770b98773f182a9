//! YAML documents into JSON values under a size budget, so a small file of nested aliases (the
//! "billion laughs") is an error instead of hundreds of megabytes. serde_yaml_ng bounds nesting
//! depth (128) and the number of alias jumps (100 per event of the document), not the size of
//! what the jumps expand to: a 1 KiB file stays within both limits while expanding to millions
//! of nodes. The budget is charged while the value is built, so memory never exceeds it. Pure.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Cost of one node (scalar, sequence, mapping or key), besides the bytes of its text: roughly
/// what the YAML spends on indentation, punctuation and line breaks, so that a file without
/// aliases costs about twice its size.
const NODE_COST: usize = 8;

/// Budget given to every file on top of its proportional share.
const BASE_BUDGET: usize = 1 << 20;

/// How many times its own size a file may expand to (plus [`BASE_BUDGET`]).
const EXPANSION_FACTOR: usize = 16;

/// No file expands beyond this, whatever its size.
pub const MAX_BUDGET: usize = 16 << 20;

/// The size a file's documents may expand to, shared by all its documents.
#[derive(Debug)]
pub struct Budget {
    left: Cell<usize>,
    limit: usize,
}

impl Budget {
    /// The budget of a file of `len` bytes: 16 times its size plus 1 MiB, at most 16 MiB.
    pub fn for_text(len: usize) -> Self {
        let limit = len
            .saturating_mul(EXPANSION_FACTOR)
            .saturating_add(BASE_BUDGET)
            .min(MAX_BUDGET);
        Self {
            left: Cell::new(limit),
            limit,
        }
    }

    fn spend<E: de::Error>(&self, cost: usize) -> Result<(), E> {
        let left = self.left.get();
        if cost > left {
            return Err(E::custom(format_args!(
                "document expands beyond {} bytes (16 times the file's size plus 1 MiB, at most \
                 16 MiB): too many or too deeply nested aliases",
                self.limit
            )));
        }
        self.left.set(left - cost);
        Ok(())
    }
}

/// Deserializes one value as `serde_json::Value` would, charging `Budget` as it goes.
#[derive(Clone, Copy)]
pub struct Bounded<'b>(pub &'b Budget);

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        let n = i64::try_from(v)
            .map(Number::from)
            .or_else(|_| u64::try_from(v).map(Number::from))
            .map_err(|_| E::custom("number out of range"))?;
        Ok(Value::Number(n))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        let n = u64::try_from(v).map_err(|_| E::custom("number out of range"))?;
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.spend(NODE_COST.saturating_add(v.len()))?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.0.spend(NODE_COST.saturating_add(v.len()))?;
        Ok(Value::String(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.0.spend(NODE_COST)?;
        Ok(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.spend(NODE_COST)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.spend(NODE_COST)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.0.spend(NODE_COST.saturating_add(key.len()))?;
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    fn parse(text: &str) -> Result<Vec<Value>, String> {
        let budget = Budget::for_text(text.len());
        serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| Bounded(&budget).deserialize(d).map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn values_are_those_of_serde_json() {
        let text = "a: 1\nb: -2\nc: 1.5\nd: [x, true, null, ~]\ne: {f: 'g'}\nh: 18446744073709551615\nn: .nan\n---\n- &x {k: v}\n- *x\n";
        let got = parse(text).unwrap();
        let want: Vec<Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn nested_aliases_stop_at_the_budget() {
        let mut text = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (i, c) in ('b'..='i').enumerate() {
            let prev = (b'a' + i as u8) as char;
            let refs = vec![format!("*{prev}"); 9].join(",");
            text.push_str(&format!("{c}: &{c} [{refs}]\n"));
        }
        assert!(text.len() < 1024, "{}", text.len());
        let e = parse(&text).unwrap_err();
        assert!(e.contains("expands beyond"), "{e}");
    }

    #[test]
    fn the_budget_grows_with_the_file_and_is_capped() {
        assert_eq!(Budget::for_text(0).limit, BASE_BUDGET);
        assert_eq!(Budget::for_text(1000).limit, BASE_BUDGET + 16_000);
        assert_eq!(Budget::for_text(usize::MAX).limit, MAX_BUDGET);
    }
}
