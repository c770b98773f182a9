//! String formats: the OpenAPI `format` checks of the API server's registry (ipv4, ipv6,
//! hostname, date-time, uri, ...) and the Kubernetes name rules the CEL `format` library
//! exposes. Unknown formats are accepted, as the API server accepts them.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Whether `s` satisfies the OpenAPI string `format`; `None` for a format without a check.
pub(crate) fn check(format: &str, s: &str) -> Option<bool> {
    Some(match format {
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "hostname" => is_hostname(s),
        "date-time" | "datetime" => is_date_time(s),
        "date" => is_date(s),
        "uri" => is_uri(s),
        "uuid" => is_uuid(s),
        "byte" => is_base64(s),
        _ => return None,
    })
}

/// An IPv4 or IPv6 address with a prefix length, e.g. `10.0.0.0/8`.
pub(crate) fn is_cidr(s: &str) -> bool {
    let Some((ip, len)) = s.split_once('/') else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else {
        return false;
    };
    if len.to_string().len() != s.len() - ip.len() - 1 {
        return false;
    }
    match (ip.parse::<Ipv4Addr>(), ip.parse::<Ipv6Addr>()) {
        (Ok(_), _) => len <= 32,
        (_, Ok(_)) => len <= 128,
        _ => false,
    }
}

/// An RFC 1123 host name of at most 255 characters.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// `YYYY-MM-DD`.
pub(crate) fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    match parts.as_slice() {
        [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2) => {
            let (m, d) = (m.parse::<u8>().unwrap_or(0), d.parse::<u8>().unwrap_or(0));
            (1..=12).contains(&m) && (1..=31).contains(&d)
        }
        _ => false,
    }
}

/// RFC 3339 date-time: `2006-01-02T15:04:05(.frac)?(Z|+hh:mm)`.
pub(crate) fn is_date_time(s: &str) -> bool {
    let Some((date, time)) = s.split_once(['T', 't', ' ']) else {
        return false;
    };
    if !is_date(date) || time.len() < 8 {
        return false;
    }
    let (hms, rest) = time.split_at(8);
    let hms: Vec<&str> = hms.split(':').collect();
    let ok_hms = matches!(hms.as_slice(), [h, m, sec] if digits(h, 2) && digits(m, 2) && digits(sec, 2)
        && h < &"24" && m < &"60" && sec <= &"60");
    if !ok_hms {
        return false;
    }
    let rest = match rest.strip_prefix('.') {
        Some(frac) => {
            let n = frac.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return false;
            }
            &frac[n..]
        }
        None => rest,
    };
    match rest {
        "Z" | "z" => true,
        tz => {
            let Some(off) = tz.strip_prefix(['+', '-']) else {
                return false;
            };
            matches!(off.split_once(':'), Some((h, m)) if digits(h, 2) && digits(m, 2))
        }
    }
}

/// An absolute URI or an absolute path, as Go's `url.ParseRequestURI` accepts.
pub(crate) fn is_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    match s.split_once(':') {
        Some((scheme, _)) => {
            let mut chars = scheme.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in hex.
pub(crate) fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Standard base64 with padding.
fn is_base64(s: &str) -> bool {
    s.len() % 4 == 0
        && s.trim_end_matches('=').len() + 2 >= s.len()
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// Errors of `validation.IsDNS1123Label`, worded as Kubernetes words them.
pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_label(s, |c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
             and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', \
             regex used for validation is '{DNS1123_LABEL_FMT}')"
        ));
    }
    errs
}

/// Errors of `validation.IsDNS1123Subdomain`.
pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let ok = s
        .split('.')
        .all(|l| is_label(l, |c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    if !ok {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
             or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
             regex used for validation is '{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*')"
        ));
    }
    errs
}

/// Errors of `validation.IsDNS1035Label`.
pub(crate) fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let starts_alpha = s.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    if !starts_alpha || !is_label(s, |c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        errs.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  \
             or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_string(),
        );
    }
    errs
}

/// Errors of `validation.IsValidLabelValue`.
pub(crate) fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let inner_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends_ok = s.is_empty()
        || (s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if !inner_ok || !ends_ok {
        errs.push(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
             or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
             'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_string(),
        );
    }
    errs
}

/// Errors of `validation.IsQualifiedName` (`prefix/name` with a DNS subdomain prefix).
pub(crate) fn qualified_name(s: &str) -> Vec<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(
                dns1123_subdomain(p)
                    .into_iter()
                    .map(|e| format!("prefix part {e}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    let ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name.is_empty() && !ok {
        errs.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', \
             regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                .to_string(),
        );
    }
    errs
}

/// A non-empty run of `alnum` characters and inner dashes.
fn is_label(s: &str, alnum: impl Fn(char) -> bool) -> bool {
    !s.is_empty()
        && s.starts_with(&alnum)
        && s.ends_with(&alnum)
        && s.chars().all(|c| alnum(c) || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openapi_formats() {
        assert_eq!(check("ipv4", "10.0.0.1"), Some(true));
        assert_eq!(check("ipv4", "10.0.0.01"), Some(false));
        assert_eq!(check("ipv6", "fd00::1"), Some(true));
        assert_eq!(check("ipv6", "10.0.0.1"), Some(false));
        assert_eq!(check("hostname", "a-b.example.com"), Some(true));
        assert_eq!(check("hostname", "-a.example.com"), Some(false));
        assert_eq!(check("date-time", "2024-01-02T03:04:05Z"), Some(true));
        assert_eq!(
            check("date-time", "2024-01-02T03:04:05.123+02:00"),
            Some(true)
        );
        assert_eq!(check("date-time", "2024-01-02"), Some(false));
        assert_eq!(check("uri", "https://example.com/x"), Some(true));
        assert_eq!(check("uri", "not a uri"), Some(false));
        assert_eq!(check("int32", "whatever"), None);
        assert!(is_cidr("10.0.0.0/8") && is_cidr("fd00::/64") && !is_cidr("10.0.0.0/33"));
    }

    #[test]
    fn kubernetes_name_rules() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(dns1123_label("My_name").len(), 1);
        assert!(dns1123_subdomain("a.b-c.d").is_empty());
        assert!(!dns1035_label("1abc").is_empty());
        assert!(label_value("").is_empty() && !label_value("-x").is_empty());
        assert!(qualified_name("example.com/my.name").is_empty());
        assert!(!qualified_name("/x").is_empty());
    }
}
