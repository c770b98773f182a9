//! The echo backend's retry simulation, as the conformance suite's echo server has it: a
//! request whose query carries `uuid` and `succeedAfter=N` fails its first N attempts (counted
//! per `uuid` in this process) and succeeds after. A failure is the `responseCode` status, or a
//! connection reset when no code is given; `delayRetry` delays each failing attempt (so a
//! proxy's backend timeout fires first).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use http::{Response, StatusCode};

use super::parse_go_duration;

/// Requests tracked at once; the oldest half is forgotten beyond this, so a long-running echo
/// does not grow without bound.
const MAX_TRACKED: usize = 10_000;

/// Attempts seen per `uuid`.
static ATTEMPTS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

/// Marks a response that must not be sent: the connection is closed instead (the retry
/// simulation's connection failure).
#[derive(Debug, Clone, Copy)]
pub(super) struct ResetConnection;

/// The error that makes hyper close a connection without answering.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by the retry simulation")]
pub(crate) struct SimulatedReset;

/// The response to send, or [`SimulatedReset`] when the connection is to be closed instead.
pub(crate) fn deliver<B>(resp: Response<B>) -> Result<Response<B>, SimulatedReset> {
    if resp.extensions().get::<ResetConnection>().is_some() {
        Err(SimulatedReset)
    } else {
        Ok(resp)
    }
}

/// What the simulation makes of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simulated {
    /// Not a simulated request, or its failures are spent: answer normally.
    Pass,
    /// Answer with this status.
    Fail(StatusCode),
    /// Close the connection without answering.
    Reset,
}

/// Counts the attempt of the request with `query` and says how to answer it, with the delay to
/// apply first.
pub fn simulate(query: Option<&str>) -> (Simulated, Option<Duration>) {
    let Some(query) = query else {
        return (Simulated::Pass, None);
    };
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    let (Some(uuid), Some(after)) = (param("uuid"), param("succeedAfter")) else {
        return (Simulated::Pass, None);
    };
    let Ok(after) = after.parse::<u32>() else {
        return (Simulated::Pass, None);
    };
    let attempt = {
        let mut guard = ATTEMPTS.lock().unwrap_or_else(|p| p.into_inner());
        let seen = guard.get_or_insert_with(HashMap::new);
        if seen.len() >= MAX_TRACKED {
            let drop: Vec<String> = seen.keys().take(MAX_TRACKED / 2).cloned().collect();
            for k in drop {
                seen.remove(&k);
            }
        }
        let n = seen.entry(uuid.to_owned()).or_insert(0);
        *n += 1;
        *n
    };
    if attempt > after {
        return (Simulated::Pass, None);
    }
    let delay = param("delayRetry").and_then(parse_go_duration);
    let failure = param("responseCode")
        .and_then(|c| c.parse::<u16>().ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .map_or(Simulated::Reset, Simulated::Fail);
    (failure, delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_the_first_attempts_of_each_uuid_then_passes() {
        let q = "responseCode=503&succeedAfter=2&uuid=test-a";
        assert_eq!(
            simulate(Some(q)).0,
            Simulated::Fail(StatusCode::SERVICE_UNAVAILABLE)
        );
        assert_eq!(
            simulate(Some(q)).0,
            Simulated::Fail(StatusCode::SERVICE_UNAVAILABLE)
        );
        assert_eq!(simulate(Some(q)).0, Simulated::Pass);
        let other = "succeedAfter=1&uuid=test-b&delayRetry=300ms";
        assert_eq!(
            simulate(Some(other)),
            (Simulated::Reset, Some(Duration::from_millis(300)))
        );
        assert_eq!(simulate(Some(other)).0, Simulated::Pass);
        assert_eq!(simulate(Some("delay=1s")).0, Simulated::Pass);
        assert_eq!(simulate(None).0, Simulated::Pass);
    }
}
