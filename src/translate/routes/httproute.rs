//! HTTPRoute (and lowered GRPCRoute) attachment: the compiled rules of an HTTP kind route
//! read as the outcome [`attach`] puts into each `parents[]` entry. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kinds::httproute::HttpRoute;

use crate::translate::gateways::gateway::GatewayModel;
use crate::translate::routes::attach::{attach, Attached, RuleOutcome};
use crate::translate::routes::http_like::HttpLike;
use crate::translate::routes::parents::GatewayIndex;
use crate::translate::routes::rules::CompiledRoute;
use crate::translate::TranslateOptions;

/// Attaches one HTTPRoute (or a GRPCRoute's lowered form, `compiled.kind` saying which) to the
/// Gateways its parentRefs name: [`attach`] with the outcome of its compiled rules. Only
/// accepted Gateways take its attachments.
pub fn attach_route(
    route: &HttpRoute,
    compiled: &CompiledRoute,
    gateways: &[GatewayModel<'_>],
    by_name: &GatewayIndex<'_>,
    labels: &BTreeMap<String, String>,
    options: &TranslateOptions,
) -> Attached {
    let outcome = RuleOutcome {
        kind: compiled.kind,
        invalid: compiled.invalid(),
        all_invalid: compiled.all_invalid(),
        unresolved: compiled.unresolved().map(|e| (e.reason(), e.to_string())),
        needs_accepted_gateway: true,
    };
    attach(route, &outcome, gateways, by_name, labels, options)
}

impl HttpLike for HttpRoute {
    fn lower(&self) -> HttpRoute {
        self.clone()
    }

    fn as_http(self: Arc<Self>) -> Result<Arc<HttpRoute>, Arc<Self>> {
        Ok(self)
    }
}
