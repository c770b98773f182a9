//! W3C Trace Context (`traceparent`): the proxy is a span in every request's trace. It reads the
//! client's `traceparent` (its trace id, the parent span and the sampled flag), or starts a
//! trace when there is none or it does not parse, and sends upstream the same trace id with a
//! span id of its own; `tracestate` goes upstream untouched. Pure.

use http::header::HeaderName;
use http::HeaderValue;

use crate::proxy::text::{hex_u128, hex_u64};

/// `traceparent`.
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The proxy's span in a request's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanIds {
    pub trace_id: u128,
    pub span_id: u64,
    /// The client's span, when the request came with a `traceparent`.
    pub parent: Option<u64>,
    /// The parent's sampled flag (false for a trace started here).
    pub parent_sampled: bool,
}

/// A parsed `traceparent`, from the values a request carries: `00-<32 hex trace id>-<16 hex
/// parent id>-<2 hex flags>`; `None` when it is absent, repeated or invalid (all-zero ids,
/// version `ff`, wrong lengths, upper case). A version above `00` is read as `00` where its
/// first four fields have that shape, as the specification asks.
pub(crate) fn parse<'a>(
    mut values: impl Iterator<Item = &'a HeaderValue>,
) -> Option<(u128, u64, bool)> {
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let text = value.to_str().ok()?;
    let mut parts = text.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let lower_hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !lower_hex(version, 2) || version == "ff" || !lower_hex(trace, 32) {
        return None;
    }
    if !lower_hex(parent, 16) || !lower_hex(flags, 2) {
        return None;
    }
    // Version 00 has exactly four fields; later versions may add more.
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace_id = u128::from_str_radix(trace, 16).ok()?;
    let parent_id = u64::from_str_radix(parent, 16).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace_id == 0 || parent_id == 0 {
        return None;
    }
    Some((trace_id, parent_id, flags & 1 == 1))
}

/// The proxy's span for a request whose `traceparent` values are `given`: in the client's
/// trace when it sent one valid value, else in a new one.
pub(crate) fn span_for<'a>(given: impl Iterator<Item = &'a HeaderValue>) -> SpanIds {
    let span_id = nonzero_u64();
    match parse(given) {
        Some((trace_id, parent, sampled)) => SpanIds {
            trace_id,
            span_id,
            parent: Some(parent),
            parent_sampled: sampled,
        },
        None => SpanIds {
            trace_id: nonzero_u128(),
            span_id,
            parent: None,
            parent_sampled: false,
        },
    }
}

/// The `traceparent` the upstream request carries: the trace, the proxy's span, `sampled`.
/// Written digit by digit into a fixed buffer: every request carries one.
pub(crate) fn header(ids: &SpanIds, sampled: bool) -> HeaderValue {
    let mut text = *b"00-00000000000000000000000000000000-0000000000000000-00";
    text[3..35].copy_from_slice(&hex_u128(ids.trace_id));
    text[36..52].copy_from_slice(&hex_u64(ids.span_id));
    if sampled {
        text[54] = b'1';
    }
    HeaderValue::from_bytes(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn nonzero_u64() -> u64 {
    fastrand::u64(1..)
}

fn nonzero_u128() -> u128 {
    fastrand::u128(1..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    fn parse(headers: &HeaderMap) -> Option<(u128, u64, bool)> {
        super::parse(headers.get_all(&TRACEPARENT).iter())
    }

    fn with(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(TRACEPARENT, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_valid_traceparent_is_continued_with_a_new_span() {
        let h = with(&["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]);
        let ids = span_for(h.get_all(&TRACEPARENT).iter());
        assert_eq!(ids.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(ids.parent, Some(0x00f067aa0ba902b7));
        assert!(ids.parent_sampled);
        assert_ne!(ids.span_id, 0x00f067aa0ba902b7);
        let out = header(&ids, true);
        let text = out.to_str().unwrap();
        assert!(
            text.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{text}"
        );
        assert!(text.ends_with("-01"));
        assert_eq!(parse(&with(&[text])).map(|p| p.1), Some(ids.span_id));
        let small = SpanIds {
            trace_id: 0x0a,
            span_id: 0x00f0_67aa_0ba9_02b7,
            parent: None,
            parent_sampled: false,
        };
        assert_eq!(
            header(&small, false),
            "00-0000000000000000000000000000000a-00f067aa0ba902b7-00"
        );
    }

    #[test]
    fn invalid_or_repeated_traceparents_start_a_new_trace() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "garbage",
        ] {
            assert_eq!(parse(&with(&[bad])), None, "{bad}");
            let ids = span_for(with(&[bad]).get_all(&TRACEPARENT).iter());
            assert_eq!(ids.parent, None);
            assert_ne!(ids.trace_id, 0);
        }
        let two = with(&[
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01",
        ]);
        assert_eq!(parse(&two), None);
        // A later version is read by its first four fields.
        let v1 = with(&["01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more"]);
        assert_eq!(
            parse(&v1),
            Some((
                0x4bf92f3577b34da6a3ce929d0e0e4736,
                0x00f067aa0ba902b7,
                false
            ))
        );
        assert!(header(&span_for(std::iter::empty()), false)
            .to_str()
            .unwrap()
            .ends_with("-00"));
    }
}
