//! Conditions: the Gateway API's condition types and reasons (route reasons are not in the
//! `gateway-api` crate), the one builder every status uses so `observedGeneration` and
//! `lastTransitionTime` are never forgotten, and the two rules about single conditions: which
//! ones report a problem, and when `lastTransitionTime` moves. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub const ACCEPTED: &str = "Accepted";
pub const PROGRAMMED: &str = "Programmed";
pub const RESOLVED_REFS: &str = "ResolvedRefs";
pub const CONFLICTED: &str = "Conflicted";
pub const PARTIALLY_INVALID: &str = "PartiallyInvalid";

/// Reasons shared by several kinds.
pub const REASON_ACCEPTED: &str = "Accepted";
pub const REASON_PROGRAMMED: &str = "Programmed";
pub const REASON_RESOLVED_REFS: &str = "ResolvedRefs";
pub const REASON_INVALID: &str = "Invalid";
/// GatewayClass and Gateway: `parametersRef` cannot be used.
pub const REASON_INVALID_PARAMETERS: &str = "InvalidParameters";

/// Gateway reasons.
pub const REASON_LISTENERS_NOT_VALID: &str = "ListenersNotValid";
pub const REASON_UNSUPPORTED_ADDRESS: &str = "UnsupportedAddress";
pub const REASON_ADDRESS_NOT_USABLE: &str = "AddressNotUsable";
pub const REASON_PENDING: &str = "Pending";

/// Listener reasons.
pub const REASON_NO_CONFLICTS: &str = "NoConflicts";
pub const REASON_HOSTNAME_CONFLICT: &str = "HostnameConflict";
pub const REASON_PROTOCOL_CONFLICT: &str = "ProtocolConflict";
pub const REASON_PORT_UNAVAILABLE: &str = "PortUnavailable";
pub const REASON_UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
pub const REASON_INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";

/// Route reasons (`RouteConditionReason` in the spec).
pub const REASON_NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
pub const REASON_NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";
pub const REASON_NO_MATCHING_PARENT: &str = "NoMatchingParent";
pub const REASON_UNSUPPORTED_VALUE: &str = "UnsupportedValue";
pub const REASON_REF_NOT_PERMITTED: &str = "RefNotPermitted";
pub const REASON_INVALID_KIND: &str = "InvalidKind";
pub const REASON_BACKEND_NOT_FOUND: &str = "BackendNotFound";

/// Longest condition message written, in bytes. The Condition schema allows 32,768; a route with
/// hundreds of invalid rules could otherwise produce a status the API server refuses.
pub const MAX_MESSAGE_BYTES: usize = 32_768;

/// `message` cut to [`MAX_MESSAGE_BYTES`] at a character boundary, ending in `...` when cut.
pub fn bounded_message(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_MESSAGE_BYTES - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str("...");
    message
}

/// Stamps conditions of one object: its generation and the translation time.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub generation: Option<i64>,
    pub now: jiff::Timestamp,
}

impl Stamp {
    /// A condition with `status` True or False.
    pub fn condition(&self, ty: &str, status: bool, reason: &str, message: String) -> Condition {
        Condition {
            last_transition_time: Time(self.now),
            message: bounded_message(message),
            observed_generation: self.generation,
            reason: reason.to_owned(),
            status: if status { "True" } else { "False" }.to_owned(),
            type_: ty.to_owned(),
        }
    }

    /// A True condition.
    pub fn ok(&self, ty: &str, reason: &str, message: impl Into<String>) -> Condition {
        self.condition(ty, true, reason, message.into())
    }

    /// A False condition.
    pub fn fail(&self, ty: &str, reason: &str, message: impl Into<String>) -> Condition {
        self.condition(ty, false, reason, message.into())
    }
}

/// Whether a condition reports a problem: `Accepted`, `ResolvedRefs` or `Programmed` False, or
/// `Conflicted` True. `edgeplane check` fails on these, and they are counted per publication.
pub fn is_problem(condition: &Condition) -> bool {
    match condition.type_.as_str() {
        ACCEPTED | RESOLVED_REFS | PROGRAMMED => condition.status == "False",
        CONFLICTED => condition.status == "True",
        _ => false,
    }
}

/// Whether `condition` has type `ty` and reports a problem (see [`is_problem`]).
pub fn is_problem_of_type(condition: &Condition, ty: &str) -> bool {
    condition.type_ == ty && is_problem(condition)
}

/// Keeps each condition's `lastTransitionTime` from the condition of the same type in `prev`
/// when its status did not change, so times move only on real transitions and unchanged output
/// compares equal. The only place this rule is written; [`carry_changes`] and [`carry_to`]
/// answer questions about it without copying anything.
pub fn carry_times(prev: &[Condition], next: &mut [Condition]) {
    for c in next {
        if let Some(p) = carried_from(prev, c) {
            c.last_transition_time = p.last_transition_time.clone();
        }
    }
}

/// The condition of `prev` whose time [`carry_times`] gives `c`.
fn carried_from<'a>(prev: &'a [Condition], c: &Condition) -> Option<&'a Condition> {
    prev.iter()
        .find(|p| p.type_ == c.type_)
        .filter(|p| p.status == c.status)
}

/// Whether [`carry_times`] would change a time of `next`.
pub fn carry_changes(prev: &[Condition], next: &[Condition]) -> bool {
    next.iter().any(|c| {
        carried_from(prev, c).is_some_and(|p| p.last_transition_time != c.last_transition_time)
    })
}

/// Whether [`carry_times`] would make `next` equal to `prev`: the same conditions in the same
/// order but for their times, each carrying its time from its counterpart.
pub fn carry_to(prev: &[Condition], next: &[Condition]) -> bool {
    prev.len() == next.len()
        && next.iter().zip(prev).all(|(c, p)| {
            carried_from(prev, c).is_some_and(|q| std::ptr::eq(q, p))
                && p.reason == c.reason
                && p.message == c.message
                && p.observed_generation == c.observed_generation
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_carry_generation_and_time() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let stamp = Stamp {
            generation: Some(3),
            now,
        };
        let c = stamp.fail(ACCEPTED, REASON_NO_MATCHING_PARENT, "m");
        assert_eq!(c.status, "False");
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(c.last_transition_time.0, now);
        assert_eq!(stamp.ok(PROGRAMMED, REASON_PROGRAMMED, "").status, "True");
    }

    #[test]
    fn problems_and_transition_times() {
        let at = |s: &str| Stamp {
            generation: Some(1),
            now: s.parse().unwrap(),
        };
        let (t0, t1) = (at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"));
        assert!(is_problem(&t0.fail(ACCEPTED, REASON_INVALID, "")));
        assert!(is_problem(&t0.fail(RESOLVED_REFS, REASON_INVALID, "")));
        assert!(is_problem(&t0.ok(CONFLICTED, REASON_HOSTNAME_CONFLICT, "")));
        assert!(!is_problem(&t0.fail(CONFLICTED, REASON_NO_CONFLICTS, "")));
        assert!(!is_problem(&t0.fail(PARTIALLY_INVALID, REASON_INVALID, "")));
        assert!(is_problem_of_type(
            &t0.fail(PROGRAMMED, REASON_PENDING, ""),
            PROGRAMMED
        ));
        assert!(!is_problem_of_type(
            &t0.fail(PROGRAMMED, REASON_PENDING, ""),
            ACCEPTED
        ));

        let prev = [
            t0.ok(ACCEPTED, REASON_ACCEPTED, ""),
            t0.ok(PROGRAMMED, REASON_PROGRAMMED, ""),
        ];
        let mut next = [
            t1.ok(ACCEPTED, REASON_ACCEPTED, "other message"),
            t1.fail(PROGRAMMED, REASON_PENDING, ""),
            t1.ok(RESOLVED_REFS, REASON_RESOLVED_REFS, ""),
        ];
        carry_times(&prev, &mut next);
        let times: Vec<_> = next.iter().map(|c| c.last_transition_time.0).collect();
        assert_eq!(times, [t0.now, t1.now, t1.now]);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bounded_message("short".into()), "short");
        let cut = bounded_message("é".repeat(MAX_MESSAGE_BYTES));
        assert!(cut.len() <= MAX_MESSAGE_BYTES, "{}", cut.len());
        assert!(cut.ends_with("..."));
        assert!(cut.trim_end_matches("...").chars().all(|c| c == 'é'));
    }
}
