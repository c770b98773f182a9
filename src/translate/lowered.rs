//! What `edgeplane convert` reads of one prepared Ingress: the HTTPRoute it is served as
//! (`routes::lower` output), the host of each lowered rule and whether
//! plain HTTP requests of each rule are redirected to https. The same functions serving uses,
//! so a conversion cannot drift from what is served. Pure.

use crate::kinds::httproute::HttpRoute;
use k8s_openapi::api::networking::v1::Ingress;

use crate::translate::routes::http_like::HttpLike;
use crate::translate::routes::ingress::{capture_rewrites, https_redirects, lower};

/// One prepared Ingress as the stages see it.
#[derive(Debug, Clone)]
pub struct Lowered {
    /// The HTTPRoute the Ingress is served as (its parentRef: the serving Gateway).
    pub route: HttpRoute,
    /// The host each rule of `route` serves (`*`: any host).
    pub rule_hosts: Vec<String>,
    /// Per rule of `route`: plain HTTP requests answer 308 to https.
    pub https_redirects: Vec<bool>,
    /// Per rule of `route`: its path rewrite is a `rewrite-target` template with regex
    /// captures, served for the Ingress alone (Gateway API has no such rewrite).
    pub capture_rewrites: Vec<bool>,
}

/// Lowers a prepared Ingress (one of [`super::ingress::Prepared::snapshot`]'s) as serving does.
pub fn lowered(ingress: &Ingress) -> Lowered {
    Lowered {
        route: lower(ingress),
        rule_hosts: HttpLike::rule_hosts(ingress),
        https_redirects: https_redirects(ingress),
        capture_rewrites: capture_rewrites(ingress),
    }
}
