//! The CustomResourceDefinitions of the edgeplane kinds, generated from the Rust types: both
//! served versions merged (storage `v1beta1`, `v1alpha1` deprecated), conversion through the
//! webhook this process serves (`caBundle` left for the controller to fill), printed by
//! `edgeplane crds` and checked in as `crds/edgeplane.yaml`. Standalone admission registers
//! the same definitions. Pure.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, ServiceReference, WebhookClientConfig,
    WebhookConversion,
};
use kube::core::crd::merge_crds;
use kube::CustomResourceExt;
use serde_json::Value;

use super::{proxy_config, traffic_policy, v1alpha1, STORAGE_VERSION};

/// Namespace of the Service in front of the conversion webhook.
pub const WEBHOOK_NAMESPACE: &str = "edgeplane-system";
/// Name of that Service.
pub const WEBHOOK_SERVICE: &str = "edgeplane-webhook";
/// Port of that Service.
pub const WEBHOOK_PORT: i32 = 443;
/// The path the CRDs' `conversion.webhook.clientConfig.service.path` names, where the
/// conversion webhook (`crate::webhook`) answers.
pub const CONVERT_PATH: &str = "/convert";

/// Why the definitions could not be built (a bug in the types, not user input).
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("merging the versions of {kind}: {reason}")]
    Merge { kind: &'static str, reason: String },
    #[error("encoding the CRDs: {0}")]
    Encode(String),
}

/// Both CRDs, `TrafficPolicy` then `ProxyConfig`.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, GenerateError> {
    let merge = |kind: &'static str, versions: Vec<CustomResourceDefinition>| {
        merge_crds(versions, STORAGE_VERSION)
            .map(with_webhook)
            .map_err(|e| GenerateError::Merge {
                kind,
                reason: e.to_string(),
            })
    };
    Ok(vec![
        merge(
            "TrafficPolicy",
            vec![
                v1alpha1::TrafficPolicy::crd(),
                traffic_policy::TrafficPolicy::crd(),
            ],
        )?,
        merge(
            "ProxyConfig",
            vec![
                v1alpha1::ProxyConfig::crd(),
                proxy_config::ProxyConfig::crd(),
            ],
        )?,
    ])
}

/// `crd` converted by the webhook Service `edgeplane-system/edgeplane-webhook`, `/convert`.
fn with_webhook(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                ca_bundle: None,
                service: Some(ServiceReference {
                    namespace: WEBHOOK_NAMESPACE.to_owned(),
                    name: WEBHOOK_SERVICE.to_owned(),
                    path: Some(CONVERT_PATH.to_owned()),
                    port: Some(WEBHOOK_PORT),
                }),
                url: None,
            }),
            conversion_review_versions: vec!["v1".to_owned()],
        }),
    });
    crd
}

/// Both CRDs as JSON, as the admission registry takes them.
pub fn crd_values() -> Result<Vec<Value>, GenerateError> {
    crds()?
        .into_iter()
        .map(|c| serde_json::to_value(c).map_err(|e| GenerateError::Encode(e.to_string())))
        .collect()
}

/// Both CRDs as one multi-document YAML text: what `edgeplane crds` prints, through
/// [`crate::yaml_out`] so that YAML 1.1 readers (kubectl) take every string as a string.
pub fn crds_yaml() -> Result<String, GenerateError> {
    let mut out = String::from(
        "# edgeplane CustomResourceDefinitions (group edgeplane.dev), generated from the Rust\n\
         # types by `edgeplane crds`; do not edit by hand.\n",
    );
    for crd in crds()? {
        out.push_str("---\n");
        out.push_str(
            &crate::yaml_out::to_string(&crd).map_err(|e| GenerateError::Encode(e.to_string()))?,
        );
    }
    Ok(out)
}
