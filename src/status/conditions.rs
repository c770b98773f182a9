//! Conditions: the condition types and reasons edgeplane writes, typed (`ConditionType`,
//! `Reason`; each string spelled once, route reasons are not in the `gateway-api` crate), the
//! one builder every status uses so `observedGeneration` and `lastTransitionTime` are never
//! forgotten, and the two rules about single conditions: which ones report a problem, and when
//! `lastTransitionTime` moves. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition type edgeplane writes; [`ConditionType::as_str`] is the one place each is
/// spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionType {
    Accepted,
    Programmed,
    ResolvedRefs,
    Conflicted,
    PartiallyInvalid,
    /// Gateway: some port accepts clients without a valid certificate.
    InsecureFrontendValidationMode,
    /// Ingress: something it asks for is not served (an ingress-nginx annotation, a resource
    /// backend, a missing TLS Secret); a problem when True.
    Unsupported,
}

impl ConditionType {
    /// The type as the status carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "Accepted",
            Self::Programmed => "Programmed",
            Self::ResolvedRefs => "ResolvedRefs",
            Self::Conflicted => "Conflicted",
            Self::PartiallyInvalid => "PartiallyInvalid",
            Self::InsecureFrontendValidationMode => "InsecureFrontendValidationMode",
            Self::Unsupported => "Unsupported",
        }
    }
}

/// A condition reason edgeplane writes, for every kind (route reasons are not in the
/// `gateway-api` crate); [`Reason::as_str`] is the one place each is spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    // Shared by several kinds.
    Accepted,
    Programmed,
    ResolvedRefs,
    Invalid,
    /// GatewayClass and Gateway: `parametersRef` cannot be used.
    InvalidParameters,
    /// Policies (TrafficPolicy, BackendTLSPolicy) and routes that lose to another.
    Conflicted,
    /// Policies: no targetRef names an existing object.
    TargetNotFound,
    // Gateway.
    ListenersNotValid,
    UnsupportedAddress,
    AddressNotUsable,
    Pending,
    /// A frontend validation or CA setting changed (`InsecureFrontendValidationMode`).
    ConfigurationChanged,
    /// A Gateway's backend client certificate does not resolve.
    InvalidClientCertificateRef,
    // Listener.
    NoConflicts,
    HostnameConflict,
    ProtocolConflict,
    PortUnavailable,
    UnsupportedProtocol,
    InvalidRouteKinds,
    InvalidCertificateRef,
    /// A caCertificateRef does not resolve or holds no CA.
    InvalidCACertificateRef,
    /// A caCertificateRef names a kind that cannot hold a CA.
    InvalidCACertificateKind,
    /// No CA reference of a validation (frontend or backend) is usable.
    NoValidCACertificate,
    // ListenerSet.
    NotAllowed,
    ParentNotAccepted,
    // Route (`RouteConditionReason` in the spec); listeners share some.
    NotAllowedByListeners,
    NoMatchingListenerHostname,
    NoMatchingParent,
    UnsupportedValue,
    RefNotPermitted,
    InvalidKind,
    BackendNotFound,
}

impl Reason {
    /// The reason as the status carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "Accepted",
            Self::Programmed => "Programmed",
            Self::ResolvedRefs => "ResolvedRefs",
            Self::Invalid => "Invalid",
            Self::InvalidParameters => "InvalidParameters",
            Self::Conflicted => "Conflicted",
            Self::TargetNotFound => "TargetNotFound",
            Self::ListenersNotValid => "ListenersNotValid",
            Self::UnsupportedAddress => "UnsupportedAddress",
            Self::AddressNotUsable => "AddressNotUsable",
            Self::Pending => "Pending",
            Self::ConfigurationChanged => "ConfigurationChanged",
            Self::InvalidClientCertificateRef => "InvalidClientCertificateRef",
            Self::NoConflicts => "NoConflicts",
            Self::HostnameConflict => "HostnameConflict",
            Self::ProtocolConflict => "ProtocolConflict",
            Self::PortUnavailable => "PortUnavailable",
            Self::UnsupportedProtocol => "UnsupportedProtocol",
            Self::InvalidRouteKinds => "InvalidRouteKinds",
            Self::InvalidCertificateRef => "InvalidCertificateRef",
            Self::InvalidCACertificateRef => "InvalidCACertificateRef",
            Self::InvalidCACertificateKind => "InvalidCACertificateKind",
            Self::NoValidCACertificate => "NoValidCACertificate",
            Self::NotAllowed => "NotAllowed",
            Self::ParentNotAccepted => "ParentNotAccepted",
            Self::NotAllowedByListeners => "NotAllowedByListeners",
            Self::NoMatchingListenerHostname => "NoMatchingListenerHostname",
            Self::NoMatchingParent => "NoMatchingParent",
            Self::UnsupportedValue => "UnsupportedValue",
            Self::RefNotPermitted => "RefNotPermitted",
            Self::InvalidKind => "InvalidKind",
            Self::BackendNotFound => "BackendNotFound",
        }
    }
}

/// Compares a written condition's `type_` or `reason` with a typed one.
macro_rules! eq_str {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for String {
            fn eq(&self, other: &$t) -> bool {
                self == other.as_str()
            }
        }
        impl PartialEq<$t> for str {
            fn eq(&self, other: &$t) -> bool {
                self == other.as_str()
            }
        }
    )*};
}
eq_str!(ConditionType, Reason);

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
    pub fn condition(
        &self,
        ty: ConditionType,
        status: bool,
        reason: Reason,
        message: String,
    ) -> Condition {
        Condition {
            last_transition_time: Time(self.now),
            message: bounded_message(message),
            observed_generation: self.generation,
            reason: reason.as_str().to_owned(),
            status: if status { "True" } else { "False" }.to_owned(),
            type_: ty.as_str().to_owned(),
        }
    }

    /// A True condition.
    pub fn ok(&self, ty: ConditionType, reason: Reason, message: impl Into<String>) -> Condition {
        self.condition(ty, true, reason, message.into())
    }

    /// A False condition.
    pub fn fail(&self, ty: ConditionType, reason: Reason, message: impl Into<String>) -> Condition {
        self.condition(ty, false, reason, message.into())
    }
}

/// Whether a condition reports a problem: `Accepted`, `ResolvedRefs` or `Programmed` False, or
/// `Conflicted` or `Unsupported` True. `edgeplane check` fails on these, and they are counted per publication.
pub fn is_problem(condition: &Condition) -> bool {
    use ConditionType::{Accepted, Conflicted, Programmed, ResolvedRefs, Unsupported};
    let is = |ty: ConditionType| condition.type_ == ty;
    if is(Accepted) || is(ResolvedRefs) || is(Programmed) {
        condition.status == "False"
    } else {
        (is(Conflicted) || is(Unsupported)) && condition.status == "True"
    }
}

/// Whether `condition` has type `ty` and reports a problem (see [`is_problem`]).
pub fn is_problem_of_type(condition: &Condition, ty: ConditionType) -> bool {
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
        let c = stamp.fail(ConditionType::Accepted, Reason::NoMatchingParent, "m");
        assert_eq!(c.status, "False");
        assert_eq!(c.observed_generation, Some(3));
        assert_eq!(c.last_transition_time.0, now);
        assert_eq!(
            stamp
                .ok(ConditionType::Programmed, Reason::Programmed, "")
                .status,
            "True"
        );
    }

    #[test]
    fn problems_and_transition_times() {
        let at = |s: &str| Stamp {
            generation: Some(1),
            now: s.parse().unwrap(),
        };
        let (t0, t1) = (at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"));
        assert!(is_problem(&t0.fail(
            ConditionType::Accepted,
            Reason::Invalid,
            ""
        )));
        assert!(is_problem(&t0.fail(
            ConditionType::ResolvedRefs,
            Reason::Invalid,
            ""
        )));
        assert!(is_problem(&t0.ok(
            ConditionType::Conflicted,
            Reason::HostnameConflict,
            ""
        )));
        assert!(!is_problem(&t0.fail(
            ConditionType::Conflicted,
            Reason::NoConflicts,
            ""
        )));
        assert!(!is_problem(&t0.fail(
            ConditionType::PartiallyInvalid,
            Reason::Invalid,
            ""
        )));
        assert!(is_problem_of_type(
            &t0.fail(ConditionType::Programmed, Reason::Pending, ""),
            ConditionType::Programmed
        ));
        assert!(!is_problem_of_type(
            &t0.fail(ConditionType::Programmed, Reason::Pending, ""),
            ConditionType::Accepted
        ));

        let prev = [
            t0.ok(ConditionType::Accepted, Reason::Accepted, ""),
            t0.ok(ConditionType::Programmed, Reason::Programmed, ""),
        ];
        let mut next = [
            t1.ok(ConditionType::Accepted, Reason::Accepted, "other message"),
            t1.fail(ConditionType::Programmed, Reason::Pending, ""),
            t1.ok(ConditionType::ResolvedRefs, Reason::ResolvedRefs, ""),
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
