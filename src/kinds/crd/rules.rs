//! The CEL rules (`x-kubernetes-validations`) of the edgeplane CRDs, as `(rule, message)`
//! pairs next to each other so they can be read as one list. Each is attached to its type
//! with `#[x_kube(validation = ...)]`; standalone mode evaluates them with the project's own
//! CEL engine (`crate::admission`), a cluster with the API server's.

/// A rule and the message shown when it fails.
pub type CelRule = (&'static str, &'static str);

/// `targetRefs`: 1 to 16 targets.
pub const TARGET_COUNT: CelRule = (
    "size(self) >= 1 && size(self) <= 16",
    "targetRefs must name 1 to 16 targets",
);

/// A target is a Gateway or HTTPRoute of the Gateway API group, or a core Service.
pub const TARGET_KINDS: CelRule = (
    "(self.group == 'gateway.networking.k8s.io' && (self.kind == 'Gateway' || self.kind == 'HTTPRoute')) || (self.group == '' && self.kind == 'Service')",
    "a target must be a Gateway or HTTPRoute (group gateway.networking.k8s.io) or a Service (group \"\")",
);

/// `sectionName` names a listener or a rule: not on Services.
pub const SECTION_NAME_TARGETS: CelRule = (
    "!has(self.sectionName) || self.kind == 'Gateway' || self.kind == 'HTTPRoute'",
    "sectionName is only allowed on Gateway and HTTPRoute targets",
);

/// Service-scoped settings need every target to be a Service.
pub const SERVICE_SCOPED: CelRule = (
    "!(has(self.loadBalancer) || has(self.circuitBreaker) || has(self.outlierDetection) || (has(self.retry) && has(self.retry.budget))) || self.targetRefs.all(t, t.kind == 'Service')",
    "loadBalancer, circuitBreaker, outlierDetection and retry.budget apply to Services: every target must be a Service",
);

/// Request-scoped settings need every target to be a Gateway or HTTPRoute.
pub const REQUEST_SCOPED: CelRule = (
    "!(has(self.timeouts) || has(self.rateLimit) || has(self.concurrencyLimit) || has(self.basicAuth) || has(self.jwt) || has(self.ipAccess) || has(self.bodyLimits) || has(self.externalAuth) || has(self.errorPages) || (has(self.retry) && (has(self.retry.attempts) || has(self.retry.codes) || has(self.retry.backoff)))) || !self.targetRefs.exists(t, t.kind == 'Service')",
    "timeouts, retry attempts, codes and backoff, rateLimit, concurrencyLimit, basicAuth, jwt, ipAccess, bodyLimits, externalAuth and errorPages apply to requests: no target may be a Service",
);

/// `hash` goes with `ConsistentHash`, and only with it.
pub const HASH_ONLY_WITH_CONSISTENT_HASH: CelRule = (
    "(has(self.algorithm) && self.algorithm == 'ConsistentHash') == has(self.hash)",
    "hash is required with algorithm ConsistentHash and allowed only with it",
);

/// A hash key has exactly one source.
pub const ONE_HASH_KEY: CelRule = (
    "(has(self.header) ? 1 : 0) + (has(self.cookie) ? 1 : 0) + (has(self.queryParameter) ? 1 : 0) + (has(self.sourceIp) && self.sourceIp ? 1 : 0) + (has(self.path) && self.path ? 1 : 0) + (has(self.pathAndQuery) && self.pathAndQuery ? 1 : 0) == 1",
    "hash must set exactly one of header, cookie, queryParameter, sourceIp: true, path: true and pathAndQuery: true",
);

/// A rate-limit key of type `Header` names the header, other types do not.
pub const RATE_KEY_HEADER: CelRule = (
    "(has(self.type) && self.type == 'Header') == has(self.header)",
    "header is required with key type Header and allowed only with it",
);

/// A JWKS comes from exactly one place.
pub const JWKS_ONE_SOURCE: CelRule = (
    "has(self.secretRef) != has(self.configMapRef)",
    "jwks must set exactly one of secretRef and configMapRef",
);

/// JWT provider names are unique.
pub const JWT_UNIQUE_NAMES: CelRule = (
    "self.all(p, self.exists_one(q, q.name == p.name))",
    "JWT provider names must be unique",
);

/// An IP access list says something.
pub const IP_ACCESS_NOT_EMPTY: CelRule = (
    "(has(self.allow) && size(self.allow) > 0) || (has(self.deny) && size(self.deny) > 0)",
    "ipAccess must set allow or deny",
);

/// Every entry of an address list is a CIDR.
pub const CIDRS: CelRule = (
    "self.all(c, isCIDR(c))",
    "every entry must be a CIDR such as 10.0.0.0/8 or 2001:db8::/32",
);

/// `backendRequest` is no longer than a `request` timeout that is not disabled (`0s`).
pub const BACKEND_WITHIN_REQUEST: CelRule = (
    "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))",
    "backendRequest must not be longer than request (unless request is 0s, no timeout)",
);

/// A duration longer than zero (`outlierDetection.baseEjectionTime`, `ejectionTime`).
pub const POSITIVE_DURATION: CelRule =
    ("duration(self) > duration('0s')", "must be longer than 0s");

/// v1alpha1: its single target, the same kinds as v1beta1's.
pub const ALPHA_SERVICE_SCOPED: CelRule = (
    "!(has(self.loadBalancing) || has(self.hashHeader) || has(self.hashCookie) || has(self.hashSourceIP) || has(self.maxConnections) || has(self.maxPendingRequests) || has(self.maxRequests) || has(self.ejectAfterErrors) || has(self.ejectionTime) || has(self.maxEjectionPercent) || has(self.retryBudgetPercent)) || self.targetRef.kind == 'Service'",
    "load balancing, connection limits, ejection and retryBudgetPercent apply to Services: the target must be a Service",
);

/// v1alpha1: request-scoped settings only on Gateway and HTTPRoute targets.
pub const ALPHA_REQUEST_SCOPED: CelRule = (
    "!(has(self.requestTimeout) || has(self.backendRequestTimeout) || has(self.retries) || has(self.retryOn) || has(self.retryBackoff) || has(self.requestsPerSecond) || has(self.burst) || has(self.basicAuthSecret) || has(self.realm) || has(self.jwtIssuer) || has(self.jwtAudiences) || has(self.jwksSecret) || has(self.allowCIDRs) || has(self.denyCIDRs) || has(self.maxRequestBodyBytes) || has(self.maxResponseBodyBytes)) || self.targetRef.kind != 'Service'",
    "timeouts, retries, rate limits, authentication, CIDR lists and body limits apply to requests: the target must not be a Service",
);

/// v1alpha1: hash keys only with `ConsistentHash`, and exactly one of them.
pub const ALPHA_HASH: CelRule = (
    "(has(self.loadBalancing) && self.loadBalancing == 'ConsistentHash') == ((has(self.hashHeader) ? 1 : 0) + (has(self.hashCookie) ? 1 : 0) + (has(self.hashSourceIP) && self.hashSourceIP ? 1 : 0) == 1)",
    "loadBalancing ConsistentHash needs exactly one of hashHeader, hashCookie and hashSourceIP: true, and they are allowed only with it",
);

/// v1alpha1: a JWT issuer needs its key set.
pub const ALPHA_JWT: CelRule = (
    "has(self.jwtIssuer) == has(self.jwksSecret)",
    "jwtIssuer and jwksSecret go together",
);

/// v1alpha1: `backendRequestTimeout` no longer than a `requestTimeout` that is not `0s`.
pub const ALPHA_BACKEND_WITHIN_REQUEST: CelRule = (
    "!(has(self.requestTimeout) && has(self.backendRequestTimeout) && duration(self.requestTimeout) != duration('0s') && duration(self.backendRequestTimeout) > duration(self.requestTimeout))",
    "backendRequestTimeout must not be longer than requestTimeout (unless requestTimeout is 0s, no timeout)",
);
