//! A rule's compiled filters (header modifiers, rewrites, redirects, mirrors, timeouts and
//! the policies attached to it), shared between the rules and backendRefs that carry the same
//! ones. Part of the route table: built by the translator, applied by the proxy per request.

use std::num::NonZeroU32;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use serde::Serialize;

use super::cors::Cors;
use super::filters::{HeaderModifier, Mirror, Redirect, Scheme, Timeouts, UrlRewrite};
use super::policy::RequestPolicy;
use super::resilience::{RetryPolicy, SessionPersistence};

/// Filters of a rule (or of one backendRef), compiled at table build time. Every member a
/// plain route leaves unset is boxed: each rule and each backendRef carries one, and most
/// carry none, so the empty value is about a hundred bytes rather than half a kilobyte.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleFilters {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_headers: Option<Box<HeaderModifier>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_headers: Option<Box<HeaderModifier>>,
    /// When set, the rule answers with a redirect and never reaches a backend.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect: Option<Box<Redirect>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Box<UrlRewrite>>,
    /// Resolved `RequestMirror` targets; each gets a copy of the request, fire and forget.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
    /// The `CORS` filter: preflights are answered by the proxy, other responses get headers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<Box<Cors>>,
    /// `rules[].timeouts` (set on rule filters only).
    #[serde(skip_serializing_if = "Timeouts::is_empty")]
    pub timeouts: Timeouts,
    /// `rules[].retry` (set on rule filters only; boxed, as every backendRef carries filters
    /// and few rules retry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<Box<RetryPolicy>>,
    /// `rules[].sessionPersistence` (set on rule filters only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<SessionPersistence>>,
    /// TrafficPolicy settings of the route and rule (set on rule filters only); merged over
    /// the virtual host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Arc<RequestPolicy>>,
    /// `ExternalAuth` filters (set on rule filters only), checked in order after the
    /// TrafficPolicy's own `externalAuth`.
    /// Boxed, as the other members most rules leave unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<Box<Vec<Arc<crate::table::ExternalAuth>>>>,
    /// A request that arrived over plain HTTP answers 308 to the same URL on https; over TLS
    /// the rule serves as usual (an Ingress's `ssl-redirect`, set on rule filters only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub https_redirect: bool,
    /// The rule's requests write no access log line (an Ingress's `enable-access-log:
    /// "false"`, set on rule filters only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub access_log_off: bool,
    /// The longest a backend may leave the request unread while some of it is left to write,
    /// in milliseconds (an Ingress's `proxy-send-timeout`; 504 when it passes; set on rule
    /// filters only). Counted per write, not over the whole request, and not while the
    /// client's body is awaited; HTTP/1.1 backends only. Not boxed: it fits in the padding
    /// after the flags.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_millis")]
    pub backend_send_idle: Option<NonZeroU32>,
}

/// Milliseconds as `"<n>ms"`, how `/debug/config` shows every duration.
fn ser_millis<S: serde::Serializer>(ms: &Option<NonZeroU32>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.collect_str(&format_args!("{ms}ms")),
        None => s.serialize_none(),
    }
}

impl RuleFilters {
    /// True when no filter is set: what most rules and backendRefs carry.
    pub fn is_empty(&self) -> bool {
        // Every field named: a new filter cannot be forgotten here (and dropped by `shared`).
        let Self {
            request_headers,
            response_headers,
            redirect,
            rewrite,
            mirrors,
            cors,
            timeouts,
            retry,
            session,
            policy,
            external_auth,
            https_redirect,
            access_log_off,
            backend_send_idle,
        } = self;
        request_headers.is_none()
            && response_headers.is_none()
            && redirect.is_none()
            && rewrite.is_none()
            && mirrors.is_empty()
            && cors.is_none()
            && timeouts.is_empty()
            && retry.is_none()
            && session.is_none()
            && policy.is_none()
            && external_auth.is_none()
            && !https_redirect
            && !access_log_off
            && backend_send_idle.is_none()
    }

    /// `self` behind an `Arc`: empty filters are one allocation shared by every rule and
    /// backendRef that has none.
    pub fn shared(self) -> Arc<Self> {
        static EMPTY: LazyLock<Arc<RuleFilters>> = LazyLock::new(Arc::default);
        if self.is_empty() {
            EMPTY.clone()
        } else {
            Arc::new(self)
        }
    }

    /// [`RuleFilters::backend_send_idle`] as a duration.
    pub fn send_idle(&self) -> Option<Duration> {
        self.backend_send_idle
            .map(|ms| Duration::from_millis(u64::from(ms.get())))
    }

    /// A send idle limit of `limit` (rounded down to milliseconds, at most about 49 days;
    /// none under a millisecond).
    pub fn set_send_idle(&mut self, limit: Option<Duration>) {
        self.backend_send_idle =
            limit.and_then(|d| NonZeroU32::new(u32::try_from(d.as_millis()).unwrap_or(u32::MAX)));
    }

    /// The shared empty filters.
    pub fn none() -> Arc<Self> {
        Self::default().shared()
    }

    /// The redirect a request answers with, if any: over plain HTTP the https redirect (308 to
    /// the same URL on https) when set, else the rule's `RequestRedirect`. The proxy answers by
    /// it and `convert --verify` replays it.
    pub fn redirect_for(&self, https: bool) -> Option<&Redirect> {
        static TO_HTTPS: Redirect = Redirect {
            scheme: Some(Scheme::Https),
            hostname: None,
            port: None,
            path: None,
            status: 308,
        };
        if self.https_redirect && !https {
            return Some(&TO_HTTPS);
        }
        self.redirect.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule and every backendRef carries a `RuleFilters`, most of them empty: the
    /// members a plain route leaves unset stay boxed (512 bytes when they were inline); the
    /// one flag, `https_redirect`, costs a word.
    #[test]
    fn filters_a_rule_leaves_unset_stay_small() {
        let size = std::mem::size_of::<RuleFilters>();
        assert!(size <= 136, "RuleFilters grew to {size} bytes");
    }

    /// Most rules and backendRefs have no filter: they share one empty value.
    #[test]
    fn empty_filters_are_one_shared_allocation() {
        let (a, b) = (RuleFilters::none(), RuleFilters::default().shared());
        assert!(Arc::ptr_eq(&a, &b) && a.is_empty());
        let timed = RuleFilters {
            timeouts: Timeouts {
                request: Some(std::time::Duration::from_secs(1)),
                ..Timeouts::default()
            },
            ..RuleFilters::default()
        };
        assert!(!timed.is_empty());
        let shared = timed.shared();
        assert!(!Arc::ptr_eq(&shared, &a) && !shared.timeouts.is_empty());
    }
}
