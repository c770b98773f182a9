//! Per-Service limits from TrafficPolicies targeting a Service (`ServiceBackend::limits`) over
//! the command line's: circuit-breaker limits, outlier detection and the retry budget. A
//! Service without such a policy uses the registry's settings as they are, at no cost; one
//! with a policy builds its small copy where it is needed (a pick, a failure, a retry).

use std::borrow::Cow;

use super::breaker::BreakerLimits;
use super::outlier::OutlierOptions;
use crate::proxy::upstream::retry::BudgetLimits;
use crate::table::ServiceLimits;

fn size(v: Option<u32>, fallback: usize) -> usize {
    v.map_or(fallback, |n| n as usize)
}

/// The breaker limits of a Service.
pub(crate) fn breaker<'a>(
    base: &'a BreakerLimits,
    limits: Option<&ServiceLimits>,
) -> Cow<'a, BreakerLimits> {
    match limits {
        None => Cow::Borrowed(base),
        Some(l) => Cow::Owned(BreakerLimits {
            max_requests: size(l.max_requests, base.max_requests),
            max_pending: size(l.max_pending_requests, base.max_pending),
            max_connections: size(l.max_connections, base.max_connections),
        }),
    }
}

/// The outlier detection of a Service.
pub(crate) fn outlier<'a>(
    base: &'a OutlierOptions,
    limits: Option<&ServiceLimits>,
) -> Cow<'a, OutlierOptions> {
    match limits {
        None => Cow::Borrowed(base),
        Some(l) => Cow::Owned(OutlierOptions {
            consecutive_failures: l
                .outlier_consecutive_errors
                .unwrap_or(base.consecutive_failures),
            base_ejection: l.outlier_base_ejection.unwrap_or(base.base_ejection),
            max_ejection: base.max_ejection,
            max_ejected_percent: l
                .outlier_max_ejection_percent
                .map_or(base.max_ejected_percent, |p| p.min(100) as u8),
        }),
    }
}

/// The retry budget of a Service.
pub(crate) fn budget(base: BudgetLimits, limits: Option<&ServiceLimits>) -> BudgetLimits {
    match limits {
        None => base,
        Some(l) => BudgetLimits {
            percent: l.retry_budget_percent.unwrap_or(base.percent),
            min_concurrent: size(l.retry_budget_min, base.min_concurrent),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unset_fields_keep_the_command_lines_values() {
        let base = BreakerLimits::default();
        assert!(matches!(breaker(&base, None), Cow::Borrowed(_)));
        let l = ServiceLimits {
            max_requests: Some(1),
            outlier_base_ejection: Some(Duration::from_secs(2)),
            outlier_max_ejection_percent: Some(250),
            retry_budget_min: Some(0),
            ..ServiceLimits::default()
        };
        let b = breaker(&base, Some(&l));
        assert_eq!((b.max_requests, b.max_pending), (1, base.max_pending));
        let default_outlier = OutlierOptions::default();
        let o = outlier(&default_outlier, Some(&l));
        assert_eq!(o.base_ejection, Duration::from_secs(2));
        assert_eq!(o.max_ejected_percent, 100);
        assert_eq!(o.consecutive_failures, 5);
        let r = budget(BudgetLimits::default(), Some(&l));
        assert_eq!((r.percent, r.min_concurrent), (20, 0));
    }
}
