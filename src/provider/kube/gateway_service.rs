//! Side objects of the leader: one Service per Gateway in the Gateway's namespace (shaped by
//! `service_spec`) with its EndpointSlices (shaped by `gateway_endpoints`), the Gateway cleanup
//! finalizer that removes them, the deletion of Gateway Services older versions kept in the
//! controller's namespace, and the GatewayClass finalizer while Gateways use the class (those
//! three in `cleanup`). Writes only what differs from the caches. Runs as its own
//! [`LeaderPass`], beside the status writer.

mod cleanup;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use gateway_api::apis::standard::gatewayclasses::GatewayClass;
use gateway_api::apis::standard::gateways::Gateway;
use gateway_api::apis::standard::listenersets::ListenerSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::binding::{
    allocate_ports, is_current, label_value, owner_gateway, service_name, service_ports,
    PortsExhausted, GATEWAY_FINALIZER,
};
use super::gateway_endpoints::{desired_slices, owned_slices, replica_addresses, slice_matches};
use super::leader::LeaderPass;
use super::service_meta::metadata_patch;
use super::service_spec::{
    desired_service_for, exposed_ports, service_matches, ServiceOptions, Transports,
};
use super::watch::Stores;
use crate::kinds::crd::proxy_config::GatewayServiceConfig;
use crate::kinds::crd::ProxyConfig;
use crate::snapshot::{namespace_of, Snapshot, TranslatorRules};
use cleanup::{has_finalizer, leftovers};

/// A side-object write failed or could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Ports(#[from] PortsExhausted),
    /// The patch was computed against a cached object (a Service, or a Gateway or class whose
    /// finalizers change) that has since changed; the next pass, against the newer version,
    /// decides again. Merge patches of propagated keys depend on the record the current version
    /// carries, so they are never sent against a stale one.
    #[error("{0} changed since the cache saw it; trying again")]
    Stale(String),
    /// A Service not made by edgeplane already has the name the Gateway's Service needs.
    #[error("Service {0} exists and was not made by edgeplane; the Gateway gets no Service")]
    Taken(String),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The leader's keeper of side objects. Remembers the ports it handed out until the Service
/// store shows them, so a stale cache never hands one port to two Gateways, and the last patch
/// it sent per Service (and the last write per EndpointSlice), so a cache that has not yet
/// seen that write does not cause it again. Services and slices are keyed `namespace/name`.
pub struct Keeper {
    client: Client,
    stores: Stores,
    options: ServiceOptions,
    controller_name: String,
    allocated: HashMap<String, BTreeMap<u16, u16>>,
    /// Service -> (resourceVersion the patch was computed against, the patch).
    patched: HashMap<String, (Option<String>, serde_json::Value)>,
    /// EndpointSlice -> (resourceVersion the write was computed against, the slice written).
    sliced: HashMap<String, (Option<String>, EndpointSlice)>,
    /// An object whose finalizers could not be patched in this pass (its version moved on).
    conflicted: std::sync::Mutex<Option<String>>,
}

impl Keeper {
    pub fn new(
        client: Client,
        stores: Stores,
        options: ServiceOptions,
        controller_name: String,
    ) -> Self {
        Self {
            client,
            stores,
            options,
            controller_name,
            allocated: HashMap::new(),
            patched: HashMap::new(),
            sliced: HashMap::new(),
            conflicted: std::sync::Mutex::new(None),
        }
    }

    /// One pass over every Gateway and class: writes only what differs. Returns the number of
    /// writes; errors are collected so one bad object does not stop the others.
    pub async fn sync(&mut self) -> (usize, Vec<ServiceError>) {
        let mut writes = 0;
        let mut errors = Vec::new();
        let stores = self.stores.clone();
        let classes: Vec<Arc<GatewayClass>> = stores
            .of::<GatewayClass>()
            .state()
            .into_iter()
            .filter(|c| c.spec.controller_name == self.controller_name)
            .collect();
        let gateways = stores.of::<Gateway>().state();
        let listener_sets = stores.of::<ListenerSet>().state();
        // What the translator reads to find a Gateway's ProxyConfig.
        let parameters = Snapshot {
            gateway_classes: stores.of::<GatewayClass>().state(),
            proxy_configs: stores.of::<ProxyConfig>().state(),
            ..Snapshot::default()
        };
        let all_services = stores.of::<Service>().state();
        let services: Vec<Arc<Service>> = all_services
            .iter()
            .filter(|s| owner_gateway(s).is_some())
            .cloned()
            .collect();
        let slices = stores.of::<EndpointSlice>().state();
        let replicas = replica_addresses(
            &slices,
            &self.options.namespace,
            &self.options.replicas_service,
        );
        let mut used: BTreeSet<u16> = services
            .iter()
            .flat_map(|s| service_ports(s).into_values())
            .collect();
        used.extend(self.allocated.values().flat_map(|m| m.values().copied()));
        let mut live = BTreeSet::new();
        let ours = |gw: &Gateway| {
            classes
                .iter()
                .find(|c| c.name_any() == gw.spec.gateway_class_name)
                .cloned()
        };
        for gw in &gateways {
            let ns = namespace_of(&gw.metadata).to_owned();
            let name = gw.name_any();
            let r = if gw.metadata.deletion_timestamp.is_some() {
                self.clean_up(gw, &ns, &name, &slices).await
            } else if ours(gw).is_some() {
                live.insert(key(&ns, &service_name(&name)));
                let config = parameters.gateway_service_config(gw);
                let ctx = Context {
                    listener_sets: &listener_sets,
                    services: &services,
                    all_services: &all_services,
                    slices: &slices,
                    replicas: &replicas,
                };
                self.ensure(gw, config.as_ref(), &ctx, &mut used).await
            } else {
                Ok(0)
            };
            match r {
                Ok(n) => writes += n,
                Err(e) => errors.push(e),
            }
        }
        let leftover = leftovers(
            &services,
            &gateways,
            &classes,
            &live,
            &self.options.namespace,
        );
        for svc in leftover {
            let ns = namespace_of(&svc.metadata).to_owned();
            match self.delete_service(&ns, &svc.name_any()).await {
                Ok(n) => writes += n,
                Err(e) => errors.push(e),
            }
        }
        for class in &classes {
            // A Gateway being deleted no longer holds its class: its clean-up does not need
            // the class, and its final disappearance may change nothing published, so no
            // later pass would come to drop the finalizer.
            let used = gateways.iter().any(|g| {
                g.spec.gateway_class_name == class.name_any()
                    && g.metadata.deletion_timestamp.is_none()
            });
            match self.class_finalizer(class, used).await {
                Ok(n) => writes += n,
                Err(e) => errors.push(e),
            }
        }
        if let Some(name) = self.conflicted.lock().ok().and_then(|mut c| c.take()) {
            errors.push(ServiceError::Stale(name));
        }
        (writes, errors)
    }

    /// One pass, logged; true when every side object is as wanted. A Service that changed
    /// under the pass is only logged at debug level: the next pass decides again.
    async fn pass(&mut self) -> bool {
        let (writes, errors) = self.sync().await;
        for e in &errors {
            if matches!(e, ServiceError::Stale(_)) {
                tracing::debug!(error = %e, "side object not reconciled");
            } else {
                tracing::warn!(error = %e, "side object not reconciled");
            }
        }
        if writes > 0 {
            tracing::info!(side_writes = writes, "side objects synced");
        }
        errors.is_empty()
    }

    fn api_err(what: String) -> impl FnOnce(kube::Error) -> ServiceError {
        move |source| ServiceError::Api {
            what,
            source: Box::new(source),
        }
    }

    async fn ensure(
        &mut self,
        gw: &Gateway,
        config: Option<&GatewayServiceConfig>,
        ctx: &Context<'_>,
        used: &mut BTreeSet<u16>,
    ) -> Result<usize, ServiceError> {
        let ns = namespace_of(&gw.metadata);
        let name = gw.name_any();
        let mut writes = 0;
        if !has_finalizer(gw, GATEWAY_FINALIZER) {
            let mut finalizers = gw.finalizers().to_vec();
            finalizers.push(GATEWAY_FINALIZER.to_owned());
            let api: Api<Gateway> = Api::namespaced(self.client.clone(), ns);
            writes += self
                .patch_finalizers(&api, &name, gw.resource_version(), finalizers)
                .await?;
        }
        let svc_name = service_name(&name);
        let svc_key = key(ns, &svc_name);
        let current = ctx
            .services
            .iter()
            .find(|s| namespace_of(&s.metadata) == ns && s.name_any() == svc_name);
        if current.is_none() {
            let foreign = ctx
                .all_services
                .iter()
                .any(|s| namespace_of(&s.metadata) == ns && s.name_any() == svc_name);
            if foreign {
                return Err(ServiceError::Taken(svc_key));
            }
        }
        let label = label_value(ns, &name);
        let (ports, exposed) = self.target_ports(gw, &label, &svc_key, current, ctx, used)?;
        let desired = desired_service_for(gw, &ports, &exposed, config, &self.options);
        writes += self.ensure_slices(gw, &desired, ctx).await?;
        let api: Api<Service> = Api::namespaced(self.client.clone(), ns);
        match current {
            Some(c) if service_matches(c, &desired) => {
                self.allocated.remove(&svc_key);
                self.patched.remove(&svc_key);
                return Ok(writes);
            }
            Some(c) if class_changed(c, &desired) => {
                // Kubernetes refuses a new loadBalancerClass on a LoadBalancer Service: it is
                // made again (created on a later pass while the old one is still going).
                tracing::info!(gateway = %label, service = %svc_key, "load-balancer class changed: recreating the Gateway Service");
                match api.delete(&svc_name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(Self::api_err(format!("delete Service {svc_key}"))(e)),
                }
                self.patched.remove(&svc_key);
                match api.create(&PostParams::default(), &desired).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(Self::api_err(format!("create Service {svc_key}"))(e)),
                }
            }
            Some(c) => {
                let mut metadata = metadata_patch(c, &desired);
                metadata["resourceVersion"] = json!(c.resource_version());
                let spec = desired.spec.as_ref();
                let patch = json!({
                    "metadata": metadata,
                    "spec": {
                        "type": spec.and_then(|s| s.type_.clone()),
                        "selector": spec.and_then(|s| s.selector.clone()),
                        "ports": spec.and_then(|s| s.ports.clone()),
                        "externalIPs": spec.and_then(|s| s.external_ips.clone()),
                        "loadBalancerIP": spec.and_then(|s| s.load_balancer_ip.clone()),
                        "externalTrafficPolicy": spec.and_then(|s| s.external_traffic_policy.clone()),
                        "loadBalancerClass": spec.and_then(|s| s.load_balancer_class.clone()),
                        "loadBalancerSourceRanges": spec.and_then(|s| s.load_balancer_source_ranges.clone()),
                    }
                });
                let basis = c.resource_version();
                if self.patched.get(&svc_key) == Some(&(basis.clone(), patch.clone())) {
                    // Already sent against this very version: the cache is behind, not the
                    // Service.
                    return Ok(writes);
                }
                match api
                    .patch(&svc_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        return Err(ServiceError::Stale(svc_key));
                    }
                    Err(e) => return Err(Self::api_err(format!("patch Service {svc_key}"))(e)),
                }
                self.patched.insert(svc_key.clone(), (basis, patch));
            }
            None if self.allocated.contains_key(&svc_key) => return Ok(writes),
            None => match api.create(&PostParams::default(), &desired).await {
                Ok(_) => {
                    tracing::info!(gateway = %label, service = %svc_key, ?ports, "created Gateway Service")
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(Self::api_err(format!("create Service {svc_key}"))(e)),
            },
        }
        self.allocated.insert(svc_key, ports);
        Ok(writes + 1)
    }

    /// The target port of each port Gateway `gw` exposes, kept from what it had (its Service's,
    /// else those of the Service an older version kept for it in the controller's namespace,
    /// so a move keeps every target port) and allocated from the free range for new ones;
    /// `used` is updated. Also returns the exposed ports with their transports.
    fn target_ports(
        &self,
        gw: &Gateway,
        label: &str,
        svc_key: &str,
        current: Option<&Arc<Service>>,
        ctx: &Context<'_>,
        used: &mut BTreeSet<u16>,
    ) -> Result<(TargetPorts, BTreeMap<u16, Transports>), ServiceError> {
        let ns = namespace_of(&gw.metadata);
        let name = gw.name_any();
        let legacy = ctx
            .services
            .iter()
            .find(|s| owner_gateway(s) == Some((ns, name.as_str())) && !is_current(s));
        let existing = match (current.or(legacy), self.allocated.get(svc_key)) {
            (_, Some(mine)) => mine.clone(),
            (Some(c), None) => service_ports(c),
            (None, None) => BTreeMap::new(),
        };
        for t in existing.values() {
            used.remove(t);
        }
        let exposed = exposed_ports(gw, ctx.listener_sets);
        let wanted: BTreeSet<u16> = exposed.keys().copied().collect();
        let ports = allocate_ports(
            label,
            &wanted,
            &existing,
            used,
            self.options.port_base,
            self.options.port_count,
        )?;
        used.extend(ports.values().copied());
        Ok((ports, exposed))
    }

    /// Brings the EndpointSlices of Gateway Service `desired` to what the replicas serve.
    async fn ensure_slices(
        &mut self,
        gw: &Gateway,
        desired: &Service,
        ctx: &Context<'_>,
    ) -> Result<usize, ServiceError> {
        let ns = namespace_of(&desired.metadata).to_owned();
        let svc_name = desired.name_any();
        let want = desired_slices(gw, desired, ctx.replicas);
        let have = owned_slices(ctx.slices, &ns, &svc_name);
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &ns);
        let mut writes = 0;
        for slice in &want {
            let name = slice.name_any();
            let slice_key = key(&ns, &name);
            let current = have.iter().find(|s| s.name_any() == name);
            let basis = current.and_then(|c| c.resource_version());
            match current {
                Some(c) if slice_matches(c, slice) => {
                    self.sliced.remove(&slice_key);
                    continue;
                }
                _ if self.sliced.get(&slice_key) == Some(&(basis.clone(), slice.clone())) => {
                    continue;
                }
                Some(c) => {
                    let mut next = slice.clone();
                    next.metadata.resource_version = c.resource_version();
                    let mut labels = c.metadata.labels.clone().unwrap_or_default();
                    labels.extend(slice.metadata.labels.clone().unwrap_or_default());
                    next.metadata.labels = Some(labels);
                    match api.replace(&name, &PostParams::default(), &next).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 409 => {
                            return Err(ServiceError::Stale(slice_key));
                        }
                        Err(e) => {
                            return Err(Self::api_err(format!("update EndpointSlice {slice_key}"))(
                                e,
                            ))
                        }
                    }
                }
                None => match api.create(&PostParams::default(), slice).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(Self::api_err(format!("create EndpointSlice {slice_key}"))(
                            e,
                        ))
                    }
                },
            }
            self.sliced.insert(slice_key, (basis, slice.clone()));
            writes += 1;
        }
        for stale in have
            .iter()
            .filter(|s| !want.iter().any(|w| w.name_any() == s.name_any()))
        {
            writes += self.delete_slice(&ns, &stale.name_any()).await?;
        }
        Ok(writes)
    }
}

/// What one pass read from the caches, shared by every Gateway's reconciliation.
struct Context<'a> {
    listener_sets: &'a [Arc<ListenerSet>],
    /// Services edgeplane made (labelled for a Gateway).
    services: &'a [Arc<Service>],
    /// Every Service, to tell a name taken by someone else.
    all_services: &'a [Arc<Service>],
    slices: &'a [Arc<EndpointSlice>],
    /// Ready replica addresses by address type.
    replicas: &'a BTreeMap<String, BTreeSet<String>>,
}

/// True when `current`, a `LoadBalancer` Service staying one, must get another
/// `loadBalancerClass`: a field Kubernetes does not let a Service change.
fn class_changed(current: &Service, desired: &Service) -> bool {
    let (Some(c), Some(d)) = (&current.spec, &desired.spec) else {
        return false;
    };
    let load_balancer = |t: &Option<String>| t.as_deref() == Some("LoadBalancer");
    load_balancer(&c.type_)
        && load_balancer(&d.type_)
        && c.load_balancer_class != d.load_balancer_class
}

/// `namespace/name`.
fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl LeaderPass for Keeper {
    async fn run(&mut self) -> bool {
        self.pass().await
    }
}

/// Target port by Gateway listener port.
type TargetPorts = BTreeMap<u16, u16>;
