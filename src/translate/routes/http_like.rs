//! HTTP-like route kinds: the kinds whose rules compile as an HTTPRoute's (HTTPRoute itself,
//! GRPCRoute and Ingress through their lowered forms). [`HttpLike`] is what a kind gives for that, implemented
//! once per kind; [`HttpLikeRoute`] is the same, object-safe, so that the HTTP stage and the
//! incremental cache hold routes of every such kind in one list ([`Source`]) without a variant
//! per kind. Adding an HTTP-like kind: its [`HttpLike`] impl and its entry in
//! `http_like_kinds!` below. Pure.

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use crate::kinds::httproute::HttpRoute;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::kinds::crd::TrafficPolicy;
use crate::kinds::routes::{RouteKind, RouteKindId};
use crate::kinds::KindSet;
use crate::snapshot::Snapshot;
use crate::table::{CookieAttributes, RequestMatch};
use crate::translate::routes::parents::{names_our_gateway, GatewayIndex};
use crate::translate::routes::rules::MatchError;

/// A route kind whose rules compile as an HTTPRoute's: filters, backendRefs, timeouts, retries
/// and attachment are read from its lowered form; only its matches may be its own.
pub(in crate::translate) trait HttpLike:
    RouteKind + PartialEq + Debug + Send + Sync
{
    /// The HTTPRoute the route's rules compile as. Made again only when the route changes.
    fn lower(&self) -> HttpRoute;

    /// The route itself when it is an HTTPRoute already, which is its own lowered form.
    fn as_http(self: Arc<Self>) -> Result<Arc<HttpRoute>, Arc<Self>> {
        Err(self)
    }

    /// The request matchers of rule `index`, when the kind's matches are its own rather than
    /// the lowered route's (a GRPCRoute's service and method).
    fn own_matches(&self, _index: usize) -> Option<Result<Vec<RequestMatch>, MatchError>> {
        None
    }

    /// Per rule, the one host that serves it (an Ingress's rules have their own hosts);
    /// empty when every rule serves every host of the route.
    fn rule_hosts(&self) -> Vec<String> {
        Vec::new()
    }

    /// The TrafficPolicy the route's own spec asks for on every rule (an Ingress's
    /// annotations), targeting its lowered form; `None` for the kinds that take their
    /// settings from TrafficPolicies only. The policy stage compiles it.
    fn traffic_policy(&self) -> Option<TrafficPolicy> {
        None
    }

    /// True when [`HttpLike::traffic_policy`] reads objects of the snapshot (Secrets,
    /// Services): the route's compiled rules are then not reused across translations.
    fn reads_objects(&self) -> bool {
        false
    }

    /// Per rule, whether plain HTTP requests are redirected to https (an Ingress's
    /// `ssl-redirect`); empty when no rule is.
    fn https_redirects(&self) -> Vec<bool> {
        Vec::new()
    }

    /// True when the route's requests write no access log line (an Ingress's
    /// `enable-access-log: "false"`).
    fn access_log_off(&self) -> bool {
        false
    }

    /// Per rule, whether its `ReplaceFullPath` rewrite is a template of the captures of its
    /// regex path (an Ingress's `rewrite-target`); empty when no rule's is.
    fn capture_rewrites(&self) -> Vec<bool> {
        Vec::new()
    }

    /// Per rule, the attributes of its session cookie (an Ingress's `session-cookie-path`,
    /// `-samesite`, `-secure`); empty when every rule's are the defaults.
    fn session_cookies(&self) -> Vec<CookieAttributes> {
        Vec::new()
    }

    /// The longest a backend may leave a request of the route unread
    /// ([`crate::table::RuleFilters::backend_send_idle`]: an Ingress's `proxy-send-timeout`);
    /// Gateway API has no such timeout.
    fn backend_send_idle(&self) -> Option<Duration> {
        None
    }

    /// The time budget of the route's retries ([`crate::table::RetryPolicy::within`]: an
    /// Ingress's `proxy-next-upstream-timeout`); Gateway API's `retry` has none.
    fn retry_within(&self) -> Option<Duration> {
        None
    }

    /// The response headers the rules' `ResponseHeaderModifier` adds to 2xx and 3xx responses
    /// only (an Ingress's `add_header` without `always`); empty for the other kinds.
    fn added_on_success(&self) -> Vec<String> {
        Vec::new()
    }
}

/// An HTTP-like route of any kind: [`HttpLike`] behind a pointer.
pub(in crate::translate) trait HttpLikeRoute:
    Any + Debug + Send + Sync
{
    /// The route's kind.
    fn kind(&self) -> RouteKindId;
    /// The route's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// True when a parentRef of the route names one of our Gateways or ListenerSets.
    fn names_our_gateway(&self, by_name: &GatewayIndex<'_>) -> bool;
    /// The HTTPRoute the route's rules compile as ([`HttpLike::lower`]).
    fn lowered(self: Arc<Self>) -> Arc<HttpRoute>;
    /// The route when it is its own lowered form ([`HttpLike::as_http`]).
    fn itself(self: Arc<Self>) -> Option<Arc<HttpRoute>>;
    /// [`HttpLike::own_matches`].
    fn own_matches(&self, index: usize) -> Option<Result<Vec<RequestMatch>, MatchError>>;
    /// True when `other` is a route of the same kind equal to this one.
    fn equals(&self, other: &dyn HttpLikeRoute) -> bool;
    /// [`HttpLike::rule_hosts`].
    fn rule_hosts(&self) -> Vec<String>;
    /// [`HttpLike::traffic_policy`].
    fn traffic_policy(&self) -> Option<TrafficPolicy>;
    /// [`HttpLike::reads_objects`].
    fn reads_objects(&self) -> bool;
    /// [`HttpLike::https_redirects`].
    fn https_redirects(&self) -> Vec<bool>;
    /// [`HttpLike::capture_rewrites`].
    fn capture_rewrites(&self) -> Vec<bool>;
    /// [`HttpLike::added_on_success`].
    fn added_on_success(&self) -> Vec<String>;
    /// [`HttpLike::access_log_off`].
    fn access_log_off(&self) -> bool;
    /// [`HttpLike::session_cookies`].
    fn session_cookies(&self) -> Vec<CookieAttributes>;
    /// [`HttpLike::backend_send_idle`].
    fn backend_send_idle(&self) -> Option<Duration>;
    /// [`HttpLike::retry_within`].
    fn retry_within(&self) -> Option<Duration>;
}

impl<K: HttpLike> HttpLikeRoute for K {
    fn kind(&self) -> RouteKindId {
        K::ID
    }

    fn meta(&self) -> &ObjectMeta {
        kube::Resource::meta(self)
    }

    fn names_our_gateway(&self, by_name: &GatewayIndex<'_>) -> bool {
        names_our_gateway(kube::Resource::meta(self), self.parent_refs(), by_name)
    }

    fn lowered(self: Arc<Self>) -> Arc<HttpRoute> {
        self.as_http()
            .unwrap_or_else(|route| Arc::new(route.lower()))
    }

    fn itself(self: Arc<Self>) -> Option<Arc<HttpRoute>> {
        self.as_http().ok()
    }

    fn own_matches(&self, index: usize) -> Option<Result<Vec<RequestMatch>, MatchError>> {
        HttpLike::own_matches(self, index)
    }

    fn equals(&self, other: &dyn HttpLikeRoute) -> bool {
        let other: &dyn Any = other;
        other.downcast_ref::<K>().is_some_and(|o| o == self)
    }

    fn rule_hosts(&self) -> Vec<String> {
        HttpLike::rule_hosts(self)
    }

    fn traffic_policy(&self) -> Option<TrafficPolicy> {
        HttpLike::traffic_policy(self)
    }

    fn reads_objects(&self) -> bool {
        HttpLike::reads_objects(self)
    }

    fn https_redirects(&self) -> Vec<bool> {
        HttpLike::https_redirects(self)
    }

    fn capture_rewrites(&self) -> Vec<bool> {
        HttpLike::capture_rewrites(self)
    }

    fn session_cookies(&self) -> Vec<CookieAttributes> {
        HttpLike::session_cookies(self)
    }

    fn backend_send_idle(&self) -> Option<Duration> {
        HttpLike::backend_send_idle(self)
    }

    fn retry_within(&self) -> Option<Duration> {
        HttpLike::retry_within(self)
    }

    fn added_on_success(&self) -> Vec<String> {
        HttpLike::added_on_success(self)
    }

    fn access_log_off(&self) -> bool {
        HttpLike::access_log_off(self)
    }
}

/// A route of an HTTP-like kind, as the HTTP stage and the cache hold it.
pub(in crate::translate) type Source = Arc<dyn HttpLikeRoute>;

/// True when `a` and `b` are the same object (not merely equal ones).
pub(in crate::translate) fn same_object(a: &Source, b: &Source) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// `(kind, namespace, name)`: how reports order routes and the cache finds one again.
pub(in crate::translate) fn route_key(route: &dyn HttpLikeRoute) -> (RouteKindId, &str, &str) {
    let meta = route.meta();
    (
        route.kind(),
        crate::snapshot::namespace_of(meta),
        meta.name.as_deref().unwrap_or(""),
    )
}

/// Declares the HTTP-like kinds, in the order the translator numbers their routes.
macro_rules! http_like_kinds {
    ($($ty:ty),* $(,)?) => {
        /// The routes of every HTTP-like kind in `snapshot`, with their metadata as the
        /// snapshot holds it: each kind's in snapshot order, the kinds in declaration order.
        /// A route's position in this sequence is its position for the cache.
        pub(in crate::translate) fn sources(
            snapshot: &Snapshot,
        ) -> impl Iterator<Item = (&ObjectMeta, Source)> + '_ {
            std::iter::empty()
                $( .chain(snapshot.objects::<$ty>().iter().map(|r| {
                    (kube::Resource::meta(&**r), r.clone() as Source)
                })) )*
        }

        /// The number of routes [`sources`] yields.
        pub(in crate::translate) fn count(snapshot: &Snapshot) -> usize {
            0 $( + snapshot.objects::<$ty>().len() )*
        }
    };
}

http_like_kinds!(
    HttpRoute,
    gateway_api::apis::standard::grpcroutes::GrpcRoute,
    k8s_openapi::api::networking::v1::Ingress,
);
