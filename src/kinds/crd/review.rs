//! The pure part of the conversion webhook: one `ConversionReview` (apiextensions.k8s.io/v1)
//! in, the answering `ConversionReview` out. A body that is not a conversion request is an
//! error the server answers with 400; a request whose objects cannot be converted is answered
//! with `result.status: Failure` and a message, as the API server expects. No I/O.
//!
//! Memory stays near the body's size: the objects are kept as raw JSON text until each is
//! converted (one parsed object at a time, its answer written back as text at once), and a
//! review of more than [`MAX_OBJECTS`] objects is refused while it is read.

use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::convert::convert;

/// The API version of the only `ConversionReview` the API server sends and accepts here.
pub const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The kind of a review.
pub const REVIEW_KIND: &str = "ConversionReview";
/// Most objects one review may carry: bounds the work one request causes (the webhook's
/// body limit bounds their total size).
pub const MAX_OBJECTS: usize = 10_000;
/// Most JSON values (array elements, object members, containers) all objects of one review
/// may hold together. A parsed value takes 32 bytes or more however short its text (`0,` is
/// two bytes), so this, not the body size, bounds the memory a review of tiny values takes.
/// Object schemas bound their lists (at most 256 items), so real objects stay far below it.
pub const MAX_VALUES: usize = 100_000;

/// Why a body is not a conversion request (answered with 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("body is not a ConversionReview: {0}")]
    Malformed(String),
    #[error("ConversionReview apiVersion {0:?} is not supported (only {REVIEW_API_VERSION})")]
    ApiVersion(String),
    #[error("kind {0:?} is not ConversionReview")]
    Kind(String),
    #[error("ConversionReview has no request")]
    NoRequest,
    #[error("cannot encode the answer: {0}")]
    Encode(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

#[derive(Deserialize)]
struct Request {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(default, deserialize_with = "bounded_objects")]
    objects: Vec<Box<RawValue>>,
}

/// Reads `request.objects` as raw JSON texts, failing at the object after [`MAX_OBJECTS`].
fn bounded_objects<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Box<RawValue>>, D::Error> {
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<Box<RawValue>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a list of at most {MAX_OBJECTS} objects")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut objects = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
            let mut values = 0;
            while let Some(object) = seq.next_element::<Box<RawValue>>()? {
                if objects.len() == MAX_OBJECTS {
                    return Err(serde::de::Error::custom(format!(
                        "request.objects holds more than {MAX_OBJECTS} objects"
                    )));
                }
                values += json_values(object.get());
                if values > MAX_VALUES {
                    return Err(serde::de::Error::custom(format!(
                        "request.objects holds more than {MAX_VALUES} JSON values"
                    )));
                }
                objects.push(object);
            }
            Ok(objects)
        }
    }
    d.deserialize_seq(Bounded)
}

/// Answers the review in `body` with the JSON of the answering review: every object converted
/// to `request.desiredAPIVersion`, in order, or (when one cannot be) no objects and a
/// `Failure` naming the object and the reason.
pub fn answer_review(body: &[u8]) -> Result<Vec<u8>, ReviewError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if review.api_version != REVIEW_API_VERSION {
        return Err(ReviewError::ApiVersion(review.api_version));
    }
    if review.kind != REVIEW_KIND {
        return Err(ReviewError::Kind(review.kind));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let converted: Result<Vec<Box<RawValue>>, String> = request
        .objects
        .iter()
        .map(|raw| convert_one(raw, &request.desired_api_version))
        .collect::<Result<Result<_, _>, _>>()?;
    let (objects, result) = match converted {
        Ok(objects) => (objects, json!({"status": "Success"})),
        Err(message) => (Vec::new(), json!({"status": "Failure", "message": message})),
    };
    let answer = Answer {
        api_version: REVIEW_API_VERSION,
        kind: REVIEW_KIND,
        response: Response {
            uid: &request.uid,
            converted_objects: objects,
            result,
        },
    };
    serde_json::to_vec(&answer).map_err(|e| ReviewError::Encode(e.to_string()))
}

/// The answering review; converted objects stay JSON text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Answer<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    converted_objects: Vec<Box<RawValue>>,
    result: Value,
}

/// An upper bound of the values in valid JSON text: one, plus one per `,` `[` `{` outside
/// strings.
fn json_values(text: &str) -> usize {
    let (mut n, mut in_string, mut escaped) = (1, false, false);
    for b in text.bytes() {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b',' | b'[' | b'{') => n += 1,
            (false, _) => {}
        }
    }
    n
}

/// One object converted and written back as JSON text (`Ok(Err(message))`: it cannot be).
fn convert_one(
    raw: &RawValue,
    desired: &str,
) -> Result<Result<Box<RawValue>, String>, ReviewError> {
    let object: Value = serde_json::from_str(raw.get())
        .map_err(|e| ReviewError::Malformed(format!("request.objects: {e}")))?;
    let name = describe(&object);
    match convert(object, desired) {
        Ok(converted) => serde_json::value::to_raw_value(&converted)
            .map(Ok)
            .map_err(|e| ReviewError::Encode(e.to_string())),
        Err(e) => Ok(Err(format!("{name}: {e}"))),
    }
}

/// `Kind namespace/name` of an object, for messages.
fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(objects: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",
            "request":{{"uid":"u","desiredAPIVersion":"edgeplane.dev/v1beta1","objects":{objects}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn objects_are_bounded_while_read() {
        let at = |n: usize| format!("[{}]", vec!["{}"; n].join(","));
        let answer: Value = serde_json::from_slice(
            &answer_review(&review(&at(MAX_OBJECTS))).expect("at the limit"),
        )
        .unwrap();
        assert_eq!(answer["response"]["uid"], "u");
        let e = answer_review(&review(&at(MAX_OBJECTS + 1))).unwrap_err();
        assert!(e.to_string().contains("more than 10000 objects"), "{e}");
    }

    #[test]
    fn values_are_bounded_while_read() {
        let zeros = |n: usize| format!("[{{\"spec\":[{}]}}]", vec!["0"; n].join(","));
        assert!(answer_review(&review(&zeros(MAX_VALUES - 3))).is_ok());
        let e = answer_review(&review(&zeros(MAX_VALUES))).unwrap_err();
        assert!(e.to_string().contains("JSON values"), "{e}");
        assert_eq!(json_values(r#"{"a,[{":"\",{","b":[1,2]}"#), 5);
    }

    #[test]
    fn answer_keeps_objects_as_written() {
        let object = r#"{"apiVersion":"edgeplane.dev/v1beta1","kind":"ProxyConfig","metadata":{"name":"p"},"spec":{"drainDuration":"30s"}}"#;
        let answer: Value =
            serde_json::from_slice(&answer_review(&review(&format!("[{object}]"))).unwrap())
                .unwrap();
        assert_eq!(answer["kind"], "ConversionReview");
        assert_eq!(answer["response"]["result"]["status"], "Success");
        assert_eq!(
            answer["response"]["convertedObjects"][0],
            serde_json::from_str::<Value>(object).unwrap()
        );
    }
}
