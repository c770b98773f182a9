//! The conversion webhook's entry point (`edgeplane::kinds::crd::answer_review`) on arbitrary bytes:
//! never panics; an answer is a `v1` ConversionReview with the request's `uid` and a `Success`
//! carrying one object per object sent, or a `Failure` with a message and no objects.
#![no_main]

use edgeplane::kinds::crd::answer_review;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(answer) = answer_review(data) else {
        return;
    };
    let answer: Value = serde_json::from_slice(&answer).expect("the answer is JSON");
    assert_eq!(answer["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(answer["kind"], "ConversionReview");
    // Fields the review does not read are skipped unchecked (invalid UTF-8 there is not an
    // error), so the body itself need not parse as a JSON value.
    let Ok(request) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let response = &answer["response"];
    assert_eq!(response["uid"], request["request"]["uid"]);
    let converted = response["convertedObjects"].as_array().expect("a list");
    match response["result"]["status"].as_str() {
        Some("Success") => {
            let sent = request["request"]["objects"].as_array().map_or(0, Vec::len);
            assert_eq!(converted.len(), sent);
        }
        Some("Failure") => {
            assert!(converted.is_empty());
            assert!(response["result"]["message"].is_string());
        }
        other => panic!("result.status {other:?}"),
    }
});
