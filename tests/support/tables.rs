//! Route-table builders: the shortest way to a `RouteTable` through the public `table` API,
//! without the translator. Names default to namespace `default`, port 80, HTTP/1 upstreams.

use std::net::SocketAddr;
use std::sync::Arc;

use edgeplane::table::{
    BackendSet, BackendTarget, HeaderMatch, HeaderModifier, ListenerTable, PathMatch, QueryMatch,
    RequestMatch, RouteRef, RouteRule, RouteTable, RuleFilters, ServiceBackend, ServiceKey,
    UpstreamProtocol, ValueMatch, VirtualHost, WeightedBackend,
};
use http::{HeaderName, HeaderValue, Method};

/// A Service `default/name:80` with `endpoints`.
pub fn service(name: &str, endpoints: &[SocketAddr]) -> Arc<ServiceBackend> {
    service_with(name, endpoints, UpstreamProtocol::Http1)
}

/// A Service `default/name:80` with `endpoints`, spoken to with `protocol`.
pub fn service_with(
    name: &str,
    endpoints: &[SocketAddr],
    protocol: UpstreamProtocol,
) -> Arc<ServiceBackend> {
    Arc::new(ServiceBackend {
        service: ServiceKey {
            namespace: "default".into(),
            name: name.into(),
            port: 80,
        },
        endpoints: endpoints.to_vec(),
        terminating: Vec::new(),
        protocol,
        balance: Default::default(),
        limits: None,
    })
}

/// A backendRef of weight 1 to `svc`.
pub fn to(svc: &Arc<ServiceBackend>) -> WeightedBackend {
    weighted(svc, 1)
}

/// A backendRef of `weight` to `svc`.
pub fn weighted(svc: &Arc<ServiceBackend>, weight: u32) -> WeightedBackend {
    WeightedBackend {
        weight,
        target: BackendTarget::Service(svc.clone()),
        filters: RuleFilters::none(),
    }
}

/// A backendRef the translator could not resolve.
pub fn invalid(reason: &str) -> WeightedBackend {
    WeightedBackend {
        weight: 1,
        target: BackendTarget::Invalid {
            reason: reason.into(),
        },
        filters: RuleFilters::none(),
    }
}

/// A header modifier from `(name, value)` pairs to set and add and names to remove.
pub fn header_mod(set: &[(&str, &str)], add: &[(&str, &str)], remove: &[&str]) -> HeaderModifier {
    let pair = |(n, v): &(&str, &str)| {
        (
            HeaderName::from_bytes(n.as_bytes()).expect("valid header name"),
            HeaderValue::from_str(v).expect("valid header value"),
        )
    };
    HeaderModifier {
        set: set.iter().map(pair).collect(),
        add: add.iter().map(pair).collect(),
        remove: remove
            .iter()
            .map(|n| HeaderName::from_bytes(n.as_bytes()).expect("valid header name"))
            .collect(),
        add_on_success: Vec::new(),
    }
}

/// Builds one `RouteRule`: a route name, a match, filters and backends.
pub struct RuleBuilder {
    name: String,
    created: i64,
    matcher: RequestMatch,
    filters: RuleFilters,
    backends: Vec<WeightedBackend>,
}

/// A rule of HTTPRoute `default/name` matching `PathPrefix /` with no backends yet.
pub fn rule(name: &str) -> RuleBuilder {
    RuleBuilder {
        name: name.into(),
        created: 0,
        matcher: RequestMatch::any(),
        filters: RuleFilters::default(),
        backends: vec![],
    }
}

impl RuleBuilder {
    pub fn path(mut self, path: PathMatch) -> Self {
        self.matcher.path = path;
        self
    }

    pub fn method(mut self, method: Method) -> Self {
        self.matcher.method = Some(Box::new(method));
        self
    }

    pub fn header(mut self, name: &str, value: ValueMatch) -> Self {
        let mut headers = std::mem::take(&mut self.matcher.headers).into_vec();
        headers.push(HeaderMatch {
            name: HeaderName::from_bytes(name.as_bytes()).expect("valid header name"),
            value,
        });
        self.matcher.headers = headers.into();
        self
    }

    pub fn query(mut self, name: &str, value: ValueMatch) -> Self {
        let mut query = std::mem::take(&mut self.matcher.query).into_vec();
        query.push(QueryMatch {
            name: name.into(),
            value,
        });
        self.matcher.query = query.into();
        self
    }

    pub fn created(mut self, secs: i64) -> Self {
        self.created = secs;
        self
    }

    pub fn filters(mut self, filters: RuleFilters) -> Self {
        self.filters = filters;
        self
    }

    pub fn backend(mut self, backend: WeightedBackend) -> Self {
        self.backends.push(backend);
        self
    }

    pub fn build(self) -> Arc<RouteRule> {
        Arc::new(RouteRule {
            route: Arc::new(RouteRef::new("HTTPRoute", "default", &self.name)),
            created: self.created,
            rule_index: 0,
            match_index: 0,
            rule_name: None,
            matcher: self.matcher,
            filters: Arc::new(self.filters),
            backends: Arc::new(BackendSet::new(self.backends)),
        })
    }
}

/// A virtual host (`*` for any host, `*.x` for a wildcard).
pub fn vhost(hostname: &str, rules: Vec<Arc<RouteRule>>) -> VirtualHost {
    VirtualHost::new(hostname.into(), rules)
}

/// A listener socket with its virtual hosts.
pub fn listener(addr: SocketAddr, hosts: Vec<VirtualHost>) -> Arc<ListenerTable> {
    Arc::new(ListenerTable::new(
        addr,
        vec![edgeplane::table::SocketSource::gateway(
            "default",
            "gw",
            &addr.port().to_string(),
        )],
        hosts,
    ))
}

/// A table of `generation` with the given listeners.
pub fn table(generation: u64, listeners: Vec<Arc<ListenerTable>>) -> RouteTable {
    RouteTable {
        generation,
        listeners: listeners.into_iter().map(|l| (l.bind, l)).collect(),
        ..RouteTable::default()
    }
}

/// A table with one listener at `addr` serving `rules` for any host.
pub fn single(addr: SocketAddr, rules: Vec<Arc<RouteRule>>) -> RouteTable {
    table(1, vec![listener(addr, vec![vhost("*", rules)])])
}
