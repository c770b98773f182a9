//! `route_backends`: 1 for every backendRef (or self-answering rule) the live table serves.
//! The series are written at scrape time from the rules of the published table instead of
//! being kept as registered gauges or request handles: a gauge series costs about 800 bytes of
//! registry state per backendRef, and the request handles of a rule are made only at its
//! first request, while the labels can be formatted from the rule when a scrape asks.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::families::ROUTE_LABELS;
use super::rule_cells::{backend_label, route_label, rule_label, Source};
use crate::table::RouteRule;

const NAME: &str = "route_backends";
const HELP: &str = "1 for each backendRef of each route rule the live table serves (backend empty for a rule that answers itself)";

/// One rule on one Gateway listener of the published table.
#[derive(Debug)]
pub(super) struct Announced {
    pub(super) source: Arc<Source>,
    pub(super) rule: Arc<RouteRule>,
}

/// The collector of `route_backends`; clones share the announced rules.
#[derive(Debug, Clone)]
pub struct RouteBackends {
    desc: Arc<Desc>,
    /// The rules of the last published table.
    announced: Arc<Mutex<Arc<[Announced]>>>,
}

impl RouteBackends {
    pub(super) fn new() -> Self {
        let labels = ROUTE_LABELS.iter().map(|l| (*l).to_owned()).collect();
        let desc = Desc::new(NAME.to_owned(), HELP.to_owned(), labels, Default::default())
            .expect("valid metric");
        Self {
            desc: Arc::new(desc),
            announced: Arc::new(Mutex::new(Arc::from(Vec::new()))),
        }
    }

    /// Replaces the announced rules with those of a newly published table.
    pub(super) fn announce(&self, rules: Vec<Announced>) {
        *self.announced.lock().unwrap_or_else(|p| p.into_inner()) = rules.into();
    }
}

impl Collector for RouteBackends {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // Cloned out so that a publish never waits for a scrape's formatting.
        let rules = self
            .announced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut metrics = Vec::with_capacity(rules.len());
        // A rule is announced once per host and match it serves, and two backendRefs may
        // name one Service port: each label set is written once.
        let mut written = HashSet::with_capacity(rules.len());
        for a in rules.iter() {
            let rule = &a.rule;
            let fixed = [
                a.source.gateway.to_string(),
                a.source.listener.to_string(),
                route_label(&rule.route),
                rule_label(rule),
            ];
            let backends = &rule.backends.backends;
            // A rule without a backendRef answers itself: one series, backend empty.
            let labels = backends.iter().map(backend_label);
            let labels = labels.chain(backends.is_empty().then(String::new));
            for backend in labels {
                let [gateway, listener, route, rule] = fixed.clone();
                let values = [gateway, listener, route, rule, backend];
                if !written.insert(values.clone()) {
                    continue;
                }
                let label = ROUTE_LABELS
                    .iter()
                    .zip(values)
                    .map(|(name, value)| {
                        let mut pair = LabelPair::default();
                        pair.set_name((*name).to_owned());
                        pair.set_value(value);
                        pair
                    })
                    .collect();
                let mut gauge = Gauge::default();
                gauge.set_value(1.0);
                let mut metric = Metric::from_label(label);
                metric.set_gauge(gauge);
                metrics.push(metric);
            }
        }
        let mut family = MetricFamily::default();
        family.set_name(NAME.to_owned());
        family.set_help(HELP.to_owned());
        family.set_field_type(MetricType::GAUGE);
        family.set_metric(metrics);
        vec![family]
    }
}
