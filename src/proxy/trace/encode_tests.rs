use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Version};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;

use super::*;
use crate::proxy::trace::context::SpanIds;
use crate::table::{BackendSet, RequestMatch, RouteRef, RouteRule, RuleFilters};

fn span(parent: Option<u64>, status: u16, rule: Option<Arc<RouteRule>>) -> Span {
    let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_796_000_000_123_456_789);
    Span {
        ids: SpanIds {
            trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
            span_id: 0x00f0_67aa_0ba9_02b7,
            parent,
            parent_sampled: parent.is_some(),
        },
        start,
        end: start + Duration::from_micros(1500),
        method: Method::POST,
        path: "/caf\u{e9}".into(),
        tls: true,
        host: Some(HeaderValue::from_static("example.com")),
        version: Version::HTTP_2,
        client: "2001:db8::1".parse().unwrap(),
        user_agent: None,
        request_id: HeaderValue::from_static("abc"),
        status: Some(status),
        rule,
        upstream: Some("10.0.0.7:8080".parse().unwrap()),
    }
}

fn attributes(list: &[KeyValue]) -> Vec<(String, String)> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => format!("int {i}"),
                other => panic!("unexpected value {other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

#[test]
fn a_batch_decodes_as_the_otlp_request_with_every_field() {
    let rule = Arc::new(RouteRule {
        route: Arc::new(RouteRef::new("HTTPRoute", "shop", "web")),
        created: 0,
        rule_index: 3,
        match_index: 0,
        rule_name: None,
        matcher: RequestMatch::any(),
        filters: RuleFilters::none(),
        backends: Arc::new(BackendSet::new(Vec::new())),
    });
    let mut batch = Batch::new("edgeplane", "9.9.9");
    batch.push(&span(Some(0x1122_3344_5566_7788), 503, Some(rule)));
    batch.push(&span(None, 200, None));
    assert_eq!(batch.len, 2);
    let bytes = batch.take();
    assert_eq!(batch.len, 0);
    let request = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("protobuf");

    assert_eq!(request.resource_spans.len(), 1);
    let resource = &request.resource_spans[0];
    let resource_attributes = attributes(&resource.resource.as_ref().unwrap().attributes);
    assert_eq!(
        resource_attributes,
        [
            ("service.name".to_owned(), "edgeplane".to_owned()),
            ("service.version".to_owned(), "9.9.9".to_owned())
        ]
    );
    assert_eq!(resource.scope_spans.len(), 1);
    let scope = &resource.scope_spans[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "edgeplane");
    assert_eq!(scope.spans.len(), 2);

    let first = &scope.spans[0];
    assert_eq!(
        first.trace_id,
        0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736u128.to_be_bytes()
    );
    assert_eq!(first.span_id, 0x00f0_67aa_0ba9_02b7u64.to_be_bytes());
    assert_eq!(first.parent_span_id, 0x1122_3344_5566_7788u64.to_be_bytes());
    assert_eq!(first.name, "POST");
    assert_eq!(first.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(first.start_time_unix_nano, 1_796_000_000_123_456_789);
    assert_eq!(
        first.end_time_unix_nano - first.start_time_unix_nano,
        1_500_000
    );
    assert_eq!(first.flags, 0x301, "sampled, remote parent");
    let status = first.status.as_ref().expect("an error status");
    assert_eq!((status.code, status.message.as_str()), (2, "503"));
    let want: Vec<(String, String)> = [
        ("http.request.method", "POST"),
        ("url.path", "/caf\u{e9}"),
        ("url.scheme", "https"),
        ("server.address", "example.com"),
        ("network.protocol.version", "2"),
        ("client.address", "2001:db8::1"),
        ("edgeplane.request_id", "abc"),
        ("http.response.status_code", "int 503"),
        ("edgeplane.route", "HTTPRoute/shop/web"),
        ("edgeplane.rule", "3"),
        ("edgeplane.upstream.address", "10.0.0.7:8080"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec();
    assert_eq!(attributes(&first.attributes), want);

    let second = &scope.spans[1];
    assert!(second.parent_span_id.is_empty());
    assert_eq!(second.flags, 0x101, "sampled, no remote parent");
    assert_eq!(second.status, None, "2xx leaves the status unset");
    let second_attributes = attributes(&second.attributes);
    assert!(
        second_attributes.contains(&("http.response.status_code".to_owned(), "int 200".to_owned()))
    );
    assert!(!second_attributes
        .iter()
        .any(|(k, _)| k == "edgeplane.route"));

    // The batch starts over: a third span is a request of its own.
    batch.push(&span(None, 200, None));
    let again = ExportTraceServiceRequest::decode(batch.take().as_slice()).expect("protobuf");
    assert_eq!(again.resource_spans[0].scope_spans[0].spans.len(), 1);
}
