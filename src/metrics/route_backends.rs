//! `route_backends`: 1 for every backendRef (or self-answering rule) the live table serves.
//! The series are written at scrape time from the label handles of the published table
//! instead of being kept as registered gauges: a gauge series costs about 800 bytes of
//! registry state per backendRef, which was the largest share of memory per route, while
//! the labels it shows are already held by the request handles.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Gauge, LabelPair, Metric, MetricFamily, MetricType};

use super::families::ROUTE_LABELS;
use super::handles::RequestCells;

const NAME: &str = "route_backends";
const HELP: &str = "1 for each backendRef of each route rule the live table serves (backend empty for a rule that answers itself)";

/// The collector of `route_backends`; clones share the announced handles.
#[derive(Debug, Clone)]
pub struct RouteBackends {
    desc: Arc<Desc>,
    /// The handles of the last published table whose series exist before any request.
    announced: Arc<Mutex<Arc<[Arc<RequestCells>]>>>,
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

    /// Replaces the announced handles with those of a newly published table.
    pub(super) fn announce(&self, cells: Vec<Arc<RequestCells>>) {
        *self.announced.lock().unwrap_or_else(|p| p.into_inner()) = cells.into();
    }
}

impl Collector for RouteBackends {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // Cloned out so that a publish never waits for a scrape's formatting.
        let cells = self
            .announced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut metrics = Vec::with_capacity(cells.len());
        for cell in cells.iter() {
            let label = ROUTE_LABELS
                .iter()
                .zip(cell.labels())
                .map(|(name, value)| {
                    let mut pair = LabelPair::default();
                    pair.set_name((*name).to_owned());
                    pair.set_value(value.to_string());
                    pair
                })
                .collect();
            let mut gauge = Gauge::default();
            gauge.set_value(1.0);
            let mut metric = Metric::from_label(label);
            metric.set_gauge(gauge);
            metrics.push(metric);
        }
        let mut family = MetricFamily::default();
        family.set_name(NAME.to_owned());
        family.set_help(HELP.to_owned());
        family.set_field_type(MetricType::GAUGE);
        family.set_metric(metrics);
        vec![family]
    }
}
