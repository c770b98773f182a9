//! The TrafficPolicy a route's own spec asks for (an Ingress's annotations,
//! `HttpLike::traffic_policy`), compiled as any TrafficPolicy: the request settings its rules
//! carry, and for an Ingress why that policy is invalid (its `Unsupported` condition). An
//! invalid one keeps only its access controls, refusing every request. Pure.

use std::collections::BTreeMap;

use crate::snapshot::{namespace_of, Snapshot};
use crate::table::RequestPolicy;
use crate::translate::routes::http_like::HttpLikeRoute;

use super::compile_policy;

/// The request settings of `route`'s own TrafficPolicy, Secrets and Services read from
/// `snapshot`; `None` when it asks for none.
pub fn route_policy(snapshot: &Snapshot, route: &dyn HttpLikeRoute) -> Option<RequestPolicy> {
    let policy = route.traffic_policy()?;
    let request = compile_policy(snapshot, &policy).compiled.request;
    Some(request).filter(|r| !r.is_empty())
}

/// Adds to `problems` (by Ingress `(namespace, name)`) why the TrafficPolicy of an Ingress of
/// `snapshot` (our Ingresses, prepared) is invalid, for each one that is.
pub fn ingress_policy_problems(
    snapshot: &Snapshot,
    problems: &mut BTreeMap<(String, String), Vec<String>>,
) {
    for ingress in &snapshot.ingresses {
        let Some(policy) = crate::translate::routes::ingress::traffic_policy(ingress) else {
            continue;
        };
        let Some(error) = compile_policy(snapshot, &policy).error else {
            continue;
        };
        let key = (
            namespace_of(&ingress.metadata).to_owned(),
            ingress.metadata.name.clone().unwrap_or_default(),
        );
        problems.entry(key).or_default().push(format!(
            "the annotations' TrafficPolicy settings are invalid ({error}): its access controls refuse every request"
        ));
    }
}
