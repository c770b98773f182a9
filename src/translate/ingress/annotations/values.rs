//! The value syntaxes the ingress-nginx annotations share, as ingress-nginx reads them:
//! seconds, booleans, comma lists, redirect URLs and codes, absolute paths, hostnames, CIDR
//! lists, nginx sizes, `rewrite-target` and its captures. Apart from [`super::Annotations::parse`]
//! so that its match arms read as a table of annotations, each naming its syntax. Pure.

use http::Uri;

use ipnet::IpNet;

use super::RedirectTo;

/// True when a `rewrite-target` uses a capture (`$1`..`$9`).
pub fn has_captures(target: &str) -> bool {
    target
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == b'$' && (b'1'..=b'9').contains(&w[1]))
}

/// A `rewrite-target`: an absolute path whose `$` only introduce captures `$1`..`$9` (nginx's
/// variables are not served).
pub(super) fn rewrite_target(value: &str) -> Result<String, String> {
    let p = absolute_path(value)?;
    let b = p.as_bytes();
    let variable = (0..b.len())
        .any(|i| b[i] == b'$' && !b.get(i + 1).is_some_and(|d| (b'1'..=b'9').contains(d)));
    if variable {
        Err("using an nginx variable: only the captures $1..$9 are served".to_owned())
    } else {
        Ok(p)
    }
}

pub(super) fn seconds(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| "not a whole number of seconds".to_owned())
}

pub(super) fn boolean(value: &str) -> Result<bool, String> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("not true or false".to_owned()),
    }
}

pub(super) fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A redirect URL: absolute `http(s)://host[:port][/path]`, as ingress-nginx requires.
pub(super) fn redirect_url(value: &str, code: u16) -> Result<RedirectTo, String> {
    let uri: Uri = value.trim().parse().map_err(|_| "not a URL".to_owned())?;
    let scheme = match uri.scheme_str() {
        Some(s @ ("http" | "https")) => s.to_owned(),
        _ => return Err("not an absolute http or https URL".to_owned()),
    };
    let host = hostname(uri.host().ok_or("has no host")?)
        .map_err(|_| "not a URL with a host name".to_owned())?;
    let path = match uri.path() {
        "" => "/".to_owned(),
        p => p.to_owned(),
    };
    Ok(RedirectTo {
        scheme: Some(scheme),
        hostname: Some(host),
        port: uri.port_u16(),
        path,
        code,
    })
}

pub(super) fn redirect_code(value: Option<&str>, default: u16) -> Result<u16, String> {
    let Some(v) = value else {
        return Ok(default);
    };
    match v.trim().parse::<u16>() {
        Ok(c @ (301 | 302 | 303 | 307 | 308)) => Ok(c),
        _ => Err("not one of 301, 302, 303, 307, 308".to_owned()),
    }
}

pub(super) fn absolute_path(value: &str) -> Result<String, String> {
    let v = value.trim();
    if v.starts_with('/') && v.bytes().all(|b| (0x21..=0x7E).contains(&b)) {
        Ok(v.to_owned())
    } else {
        Err("not an absolute path".to_owned())
    }
}

pub(in crate::translate::ingress) fn hostname(value: &str) -> Result<String, String> {
    let v = value.trim().to_ascii_lowercase();
    let valid = !v.is_empty()
        && v.len() <= 253
        && v.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if valid {
        Ok(v)
    } else {
        Err("not a host name (a port is not allowed)".to_owned())
    }
}

/// A CIDR list; a bare address is the one address, as in ingress-nginx.
pub(super) fn cidrs(value: &str) -> Result<Vec<IpNet>, String> {
    list(value)
        .iter()
        .map(|item| {
            item.parse::<IpNet>()
                .or_else(|_| item.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("not a list of CIDRs: {item:?} is not a CIDR or address"))
        })
        .collect()
}

/// An nginx size: bytes, or a number with `k`, `m` or `g` (powers of 1024).
pub(super) fn size(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let (digits, unit) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&v[..i], c.to_ascii_lowercase()),
        _ => (v, 'b'),
    };
    let shift = match unit {
        'b' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        _ => return Err("not an nginx size (a number with k, m or g)".to_owned()),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| "not an nginx size (a number with k, m or g)".to_owned())
}
