//! `parametersRef` of GatewayClasses (`spec.parametersRef`) and Gateways
//! (`spec.infrastructure.parametersRef`): which referents edgeplane can read. A reference that
//! cannot be used makes its object `Accepted=False, reason InvalidParameters`. The one kind
//! read is our `ProxyConfig`; a Gateway's own reference replaces its class's (the whole
//! object: fields are not merged). Pure.

use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClassParametersRef;
use gateway_api::apis::standard::gateways::{Gateway, GatewayInfrastructureParametersRef};

use crate::kinds::crd::proxy_config::GatewayServiceConfig;
use crate::kinds::crd::{ProxyConfig, GROUP};
use crate::snapshot::{namespace_of, Snapshot};
use crate::table::ListenerSettings;
use crate::translate::gateways::proxy_config::{compile_proxy_config, ProxyConfigError};

/// A `parametersRef`, whichever object carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParametersRef<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    /// Namespace of the referent: the GatewayClass's own field, the Gateway's namespace for a
    /// Gateway's (local) reference.
    pub namespace: Option<&'a str>,
}

impl<'a> ParametersRef<'a> {
    /// A GatewayClass's `spec.parametersRef`.
    pub fn of_class(r: &'a GatewayClassParametersRef) -> Self {
        Self {
            group: &r.group,
            kind: &r.kind,
            name: &r.name,
            namespace: r.namespace.as_deref(),
        }
    }

    /// A Gateway's `spec.infrastructure.parametersRef` (always in the Gateway's namespace).
    pub fn of_gateway(r: &'a GatewayInfrastructureParametersRef, namespace: &'a str) -> Self {
        Self {
            group: &r.group,
            kind: &r.kind,
            name: &r.name,
            namespace: Some(namespace),
        }
    }

    /// `group/kind namespace/name`, as messages name the referent (core group shown as `core`).
    fn describe(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        match self.namespace {
            Some(ns) => format!("{group}/{} {ns}/{}", self.kind, self.name),
            None => format!("{group}/{} {}", self.kind, self.name),
        }
    }
}

/// Why a `parametersRef` cannot be used (the message of the `InvalidParameters` condition).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidParameters {
    #[error("parametersRef {0}: edgeplane reads no parameters of this group and kind")]
    UnsupportedKind(String),
    #[error("parametersRef {0}: the referenced object does not exist")]
    NotFound(String),
    #[error("parametersRef {0}: a GatewayClass must name the namespace of its parameters")]
    NamespaceRequired(String),
    #[error("parametersRef {referent}: {error}")]
    Invalid {
        referent: String,
        error: ProxyConfigError,
    },
    /// A Gateway whose GatewayClass has invalid parameters cannot be provisioned either.
    #[error("GatewayClass {class} has invalid parameters: {source}")]
    Class {
        class: String,
        #[source]
        source: Box<InvalidParameters>,
    },
}

/// What a usable `parametersRef` gives the Gateways using it: the settings of the sockets
/// they bind (`None` when the referent sets none).
pub type Resolved = Option<Arc<ListenerSettings>>;

/// A kind of parameters object edgeplane understands, with how to read one from a snapshot.
struct ParametersKind {
    group: &'static str,
    kind: &'static str,
    resolve: fn(&Snapshot, &ParametersRef<'_>) -> Result<Resolved, InvalidParameters>,
}

/// The parameters kinds edgeplane reads.
const KINDS: &[ParametersKind] = &[ParametersKind {
    group: GROUP,
    kind: "ProxyConfig",
    resolve: resolve_proxy_config,
}];

/// The ProxyConfig `reference` names, if the snapshot has it.
fn find_proxy_config<'s>(
    snapshot: &'s Snapshot,
    reference: &ParametersRef<'_>,
) -> Option<&'s ProxyConfig> {
    let ns = reference.namespace?;
    snapshot
        .proxy_configs
        .iter()
        .rev()
        .find(|p| {
            p.metadata.name.as_deref() == Some(reference.name) && namespace_of(&p.metadata) == ns
        })
        .map(|p| p.as_ref())
}

fn resolve_proxy_config(
    snapshot: &Snapshot,
    reference: &ParametersRef<'_>,
) -> Result<Resolved, InvalidParameters> {
    if reference.namespace.is_none() {
        return Err(InvalidParameters::NamespaceRequired(reference.describe()));
    }
    let config = find_proxy_config(snapshot, reference)
        .ok_or_else(|| InvalidParameters::NotFound(reference.describe()))?;
    let settings = compile_proxy_config(config).map_err(|error| InvalidParameters::Invalid {
        referent: reference.describe(),
        error,
    })?;
    Ok(Some(Arc::new(settings)))
}

/// Checks a `parametersRef`: its group and kind must be one edgeplane reads, the referent must
/// exist and be valid. Both GatewayClasses and Gateways go through this one rule.
pub fn resolve_parameters(
    snapshot: &Snapshot,
    reference: &ParametersRef<'_>,
) -> Result<Resolved, InvalidParameters> {
    let kind = KINDS
        .iter()
        .find(|k| k.group == reference.group && k.kind == reference.kind)
        .ok_or_else(|| InvalidParameters::UnsupportedKind(reference.describe()))?;
    (kind.resolve)(snapshot, reference)
}

/// The parameters of a Gateway of class `class` whose own parameters resolved to `of_class`:
/// a class with invalid parameters makes its Gateways invalid too; otherwise the Gateway's
/// own `spec.infrastructure.parametersRef`, when set, replaces the class's whole.
pub fn gateway_parameters(
    snapshot: &Snapshot,
    gateway: &Gateway,
    class: &str,
    of_class: &Result<Resolved, InvalidParameters>,
) -> Result<Resolved, InvalidParameters> {
    let class_settings = match of_class {
        Ok(settings) => settings,
        Err(e) => {
            return Err(InvalidParameters::Class {
                class: class.to_owned(),
                source: Box::new(e.clone()),
            })
        }
    };
    let ns = namespace_of(&gateway.metadata);
    let own = gateway
        .spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref());
    match own {
        Some(reference) => resolve_parameters(snapshot, &ParametersRef::of_gateway(reference, ns)),
        None => Ok(class_settings.clone()),
    }
}

/// The `service` section of the ProxyConfig a Gateway uses (its own, else its class's): the
/// type and annotations of the Service exposing the Gateway. `None` when no ProxyConfig
/// applies, when it sets no `service`, or when it is invalid (the Gateway is then not
/// accepted and the Service keeps the defaults).
pub fn gateway_service_config(
    snapshot: &Snapshot,
    gateway: &Gateway,
) -> Option<GatewayServiceConfig> {
    let ns = namespace_of(&gateway.metadata);
    let own = gateway
        .spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref());
    let reference = match own {
        Some(r) => ParametersRef::of_gateway(r, ns),
        None => {
            let class = snapshot
                .gateway_classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(&gateway.spec.gateway_class_name))?;
            ParametersRef::of_class(class.spec.parameters_ref.as_ref()?)
        }
    };
    if reference.group != GROUP || reference.kind != "ProxyConfig" {
        return None;
    }
    let config = find_proxy_config(snapshot, &reference)?;
    compile_proxy_config(config).ok()?;
    config.spec.service.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_are_invalid_and_named_in_the_message() {
        let r = GatewayInfrastructureParametersRef {
            group: "invalid.io".into(),
            kind: "InvalidParameters".into(),
            name: "invalid".into(),
        };
        let e = resolve_parameters(&Snapshot::default(), &ParametersRef::of_gateway(&r, "ns"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "parametersRef invalid.io/InvalidParameters ns/invalid: edgeplane reads no \
             parameters of this group and kind"
        );
        let c = GatewayClassParametersRef {
            group: String::new(),
            kind: "ConfigMap".into(),
            name: "cfg".into(),
            namespace: Some("sys".into()),
        };
        let e = resolve_parameters(&Snapshot::default(), &ParametersRef::of_class(&c)).unwrap_err();
        assert!(e.to_string().contains("core/ConfigMap sys/cfg"), "{e}");
        let wrapped = InvalidParameters::Class {
            class: "edgeplane".into(),
            source: Box::new(e),
        };
        assert!(wrapped
            .to_string()
            .starts_with("GatewayClass edgeplane has invalid parameters: parametersRef core/"));
    }
}
