//! Gateway API durations (GEP-2257): one to four `<number><unit>` parts, numbers of up to five
//! digits, units `h`, `m`, `s`, `ms` (`1h1m`, `500ms`, `0s`); and `rules[].timeouts` built from
//! them. Pure.

use std::time::Duration;

use crate::kinds::httproute::HttpRouteRulesTimeouts;

use crate::table::Timeouts;

/// Why a rule's `timeouts` cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutError {
    #[error("timeouts.{field}: {error}")]
    Duration {
        field: &'static str,
        error: DurationError,
    },
    #[error("timeouts.backendRequest {backend} is longer than timeouts.request {request}")]
    BackendExceedsRequest { backend: String, request: String },
}

/// Compiles `rules[].timeouts`: the zero duration disables a timeout, and `backendRequest` may
/// not exceed a non-zero `request` (the CRD's own validation rule).
pub fn compile_timeouts(spec: Option<&HttpRouteRulesTimeouts>) -> Result<Timeouts, TimeoutError> {
    let Some(spec) = spec else {
        return Ok(Timeouts::default());
    };
    let parse = |field, v: &Option<String>| match v.as_deref() {
        None => Ok(None),
        Some(text) => parse_duration(text)
            .map(|d| Some(d).filter(|d| !d.is_zero()))
            .map_err(|error| TimeoutError::Duration { field, error }),
    };
    let request = parse("request", &spec.request)?;
    let backend_request = parse("backendRequest", &spec.backend_request)?;
    if let (Some(r), Some(b)) = (request, backend_request) {
        if b > r {
            return Err(TimeoutError::BackendExceedsRequest {
                backend: spec.backend_request.clone().unwrap_or_default(),
                request: spec.request.clone().unwrap_or_default(),
            });
        }
    }
    Ok(Timeouts {
        request,
        backend_request,
    })
}

/// A string that is not a Gateway API duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Gateway API duration (like 500ms, 10s or 1h30m)")]
pub struct DurationError(pub String);

/// Parses a Gateway API duration.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let err = || DurationError(text.to_owned());
    let mut rest = text;
    let mut total = Duration::ZERO;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return Err(err());
        }
        let value: u64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else {
            return Err(err());
        };
        rest = &rest[len..];
        total += unit * u32::try_from(value).map_err(|_| err())?;
        parts += 1;
        if parts > 4 {
            return Err(err());
        }
    }
    if parts == 0 {
        return Err(err());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_examples() {
        let ms = |v| Ok(Duration::from_millis(v));
        assert_eq!(parse_duration("0s"), ms(0));
        assert_eq!(parse_duration("500ms"), ms(500));
        assert_eq!(parse_duration("1h1m"), ms(3_660_000));
        assert_eq!(parse_duration("1h2m3s4ms"), ms(3_723_004));
        assert_eq!(parse_duration("99999s"), ms(99_999_000));
    }

    #[test]
    fn timeouts_follow_the_crd_rules() {
        let t = |r: Option<&str>, b: Option<&str>| {
            compile_timeouts(Some(&HttpRouteRulesTimeouts {
                request: r.map(Into::into),
                backend_request: b.map(Into::into),
            }))
        };
        let ok = t(Some("1s"), Some("500ms")).unwrap();
        assert_eq!(ok.request, Some(Duration::from_secs(1)));
        assert_eq!(ok.backend_request, Some(Duration::from_millis(500)));
        assert_eq!(t(Some("0s"), Some("0s")).unwrap(), Timeouts::default());
        // A disabled request timeout does not bound backendRequest.
        assert!(t(Some("0s"), Some("10s")).is_ok());
        assert!(matches!(
            t(Some("1s"), Some("2s")),
            Err(TimeoutError::BackendExceedsRequest { .. })
        ));
        assert!(matches!(
            t(Some("1x"), None),
            Err(TimeoutError::Duration {
                field: "request",
                ..
            })
        ));
        assert_eq!(compile_timeouts(None).unwrap(), Timeouts::default());
    }

    #[test]
    fn rejects_other_forms() {
        for bad in [
            "",
            "1",
            "1.5s",
            "100000s",
            "1d",
            "s",
            "1s1s1s1s1s",
            "-1s",
            "1 s",
            "1us",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
