//! `parametersRef` of GatewayClasses (`spec.parametersRef`) and Gateways
//! (`spec.infrastructure.parametersRef`): which referents edgeplane can read. A reference that
//! cannot be used makes its object `Accepted=False, reason InvalidParameters`. Pure.

use gateway_api::apis::standard::gatewayclasses::GatewayClassParametersRef;
use gateway_api::apis::standard::gateways::GatewayInfrastructureParametersRef;

use crate::snapshot::Snapshot;

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
    /// A Gateway whose GatewayClass has invalid parameters cannot be provisioned either.
    #[error("GatewayClass {class} has invalid parameters: {source}")]
    Class {
        class: String,
        #[source]
        source: Box<InvalidParameters>,
    },
}

/// A kind of parameters object edgeplane understands, with how to find one in a snapshot.
struct ParametersKind {
    group: &'static str,
    kind: &'static str,
    exists: fn(&Snapshot, &ParametersRef<'_>) -> bool,
}

/// The parameters kinds edgeplane reads. None yet: every reference is unsupported until a kind
/// of our own (with its snapshot lookup) is listed here.
const KINDS: &[ParametersKind] = &[];

/// Checks a `parametersRef`: its group and kind must be one edgeplane reads and the referent
/// must exist. Both GatewayClasses and Gateways go through this one rule.
pub fn resolve_parameters(
    snapshot: &Snapshot,
    reference: &ParametersRef<'_>,
) -> Result<(), InvalidParameters> {
    let kind = KINDS
        .iter()
        .find(|k| k.group == reference.group && k.kind == reference.kind)
        .ok_or_else(|| InvalidParameters::UnsupportedKind(reference.describe()))?;
    if (kind.exists)(snapshot, reference) {
        Ok(())
    } else {
        Err(InvalidParameters::NotFound(reference.describe()))
    }
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
