//! Recording helpers of the control-plane families that read a snapshot: objects by kind.

use crate::kinds::{Declared, Kind, KindSet, Visitor};

use super::Metrics;

/// Counts a snapshot's objects kind by kind.
struct Count<'a, S> {
    snapshot: &'a S,
    metrics: &'a Metrics,
}

impl<S: KindSet> Visitor<S> for Count<'_, S> {
    fn kind<K: Kind>(&mut self, _declared: Declared<S, K>) {
        let kind = K::kind(&());
        let n = self.snapshot.objects::<K>().len();
        self.metrics
            .control
            .objects
            .with_label_values(&[kind.as_ref()])
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

impl Metrics {
    /// Sets `objects{kind}` to the snapshot's count of every kind it declares (0 included).
    pub fn record_objects<S: KindSet>(&self, snapshot: &S) {
        S::visit(&mut Count {
            snapshot,
            metrics: self,
        });
    }
}
