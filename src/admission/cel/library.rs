//! The Kubernetes CEL library on top of the `cel` crate's standard environment: the strings
//! extension (`split`, `substring`, `lowerAscii`, ...), the IP/CIDR library (`isIP`, `ip`,
//! `isCIDR`, `cidr`), the regex `find`/`findAll`, and the `format.*` name validators. Built once
//! per process; rules compile and run against it.

use std::any::Any;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, LazyLock};

use cel::common::types::{CelBool, CelInt, CelList, CelOptional, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use crate::admission::formats;

/// The shared environment, or why it could not be built (a declaration clash is a bug here).
pub(crate) static ENV: LazyLock<Result<Arc<Env>, String>> =
    LazyLock::new(|| build().map(Arc::new).map_err(|e| e.to_string()));

fn build() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_type(IP_TYPE.to_owned())?;
    env.add_type(CIDR_TYPE.to_owned())?;
    env.add_type(FORMAT_TYPE.to_owned())?;
    cel::add_overload!(env, fn is_ip: (CelString) -> CelBool, name = "isIP")?;
    cel::add_overload!(env, fn is_cidr: (CelString) -> CelBool, name = "isCIDR")?;
    cel::add_overload!(env, fn ip: (CelString) -> Result<Ip>)?;
    cel::add_overload!(env, fn cidr: (CelString) -> Result<Cidr>)?;
    cel::add_member_overload!(env, fn family: (Ip) -> CelInt)?;
    cel::add_member_overload!(env, fn is_loopback: (Ip) -> CelBool)?;
    cel::add_member_overload!(env, fn is_unspecified: (Ip) -> CelBool)?;
    cel::add_member_overload!(env, fn contains_ip: (Cidr, Ip) -> CelBool, name = "containsIP")?;
    cel::add_member_overload!(env, fn contains_ip_string: (Cidr, CelString) -> Result<CelBool>,
        name = "containsIP")?;
    cel::add_member_overload!(env, fn prefix_length: (Cidr) -> CelInt)?;
    cel::add_member_overload!(env, fn cidr_ip: (Cidr) -> Ip, name = "ip")?;
    cel::add_member_overload!(env, fn find: (CelString, CelString) -> Result<CelString>)?;
    cel::add_member_overload!(env, fn find_all: (CelString, CelString) -> Result<CelList>)?;
    for (name, id) in FORMATS {
        env.add_overload(name, id, vec![], format_named_fn(id))?;
    }
    cel::add_member_overload!(env, fn validate: (Format, CelString) -> CelOptional)?;
    Ok(env)
}

static IP_TYPE: Type = Type::new_unspecified_type("net.IP");
static CIDR_TYPE: Type = Type::new_unspecified_type("net.CIDR");
static FORMAT_TYPE: Type = Type::new_unspecified_type("kubernetes.NamedFormat");

/// Parses an address as Kubernetes' `ip()` does: no zones, no IPv4-mapped IPv6.
fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(v4) = s.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    let v6 = s.parse::<Ipv6Addr>().ok()?;
    (v6.to_ipv4_mapped().is_none()).then_some(IpAddr::V6(v6))
}

fn is_ip(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_ip(s.inner()).is_some())
}

fn is_cidr(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_cidr(s.inner()).is_some())
}

fn parse_cidr(s: &str) -> Option<Cidr> {
    let (ip, len) = s.split_once('/')?;
    let (ip, len) = (parse_ip(ip)?, len.parse::<u8>().ok()?);
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (formats::is_cidr(s) && len <= max).then_some(Cidr { ip, len })
}

fn ip(s: &CelString<'_>) -> Result<Ip, ExecutionError> {
    parse_ip(s.inner()).map(Ip).ok_or_else(|| {
        ExecutionError::function_error("ip", format!("IP Address {:?} parse error", s.inner()))
    })
}

fn cidr(s: &CelString<'_>) -> Result<Cidr, ExecutionError> {
    parse_cidr(s.inner()).ok_or_else(|| {
        ExecutionError::function_error(
            "cidr",
            format!("network address {:?} parse error", s.inner()),
        )
    })
}

fn family(ip: &Ip) -> CelInt {
    CelInt::from(if ip.0.is_ipv4() { 4 } else { 6 })
}

fn is_loopback(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_loopback())
}

fn is_unspecified(ip: &Ip) -> CelBool {
    CelBool::from(ip.0.is_unspecified())
}

fn contains_ip(c: &Cidr, ip: &Ip) -> CelBool {
    CelBool::from(c.contains(ip.0))
}

fn contains_ip_string(c: &Cidr, s: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    Ok(contains_ip(c, &ip(s)?))
}

fn prefix_length(c: &Cidr) -> CelInt {
    CelInt::from(i64::from(c.len))
}

fn cidr_ip(c: &Cidr) -> Ip {
    Ip(c.ip)
}

fn regex(function: &str, re: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(re).map_err(|e| ExecutionError::function_error(function, e))
}

fn find(s: &CelString<'_>, re: &CelString<'_>) -> Result<CelString<'static>, ExecutionError> {
    let re = regex("find", re.inner())?;
    Ok(CelString::from(
        re.find(s.inner())
            .map(|m| m.as_str().to_string())
            .unwrap_or_default(),
    ))
}

fn find_all(s: &CelString<'_>, re: &CelString<'_>) -> Result<CelList<'static>, ExecutionError> {
    let re = regex("findAll", re.inner())?;
    let found: Vec<Box<dyn Val>> = re
        .find_iter(s.inner())
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val>)
        .collect();
    Ok(CelList::from(found))
}

/// The `format.<name>()` validators: CEL name and overload id.
const FORMATS: [(&str, &str); 7] = [
    ("format.dns1123Label", "dns1123Label"),
    ("format.dns1123Subdomain", "dns1123Subdomain"),
    ("format.dns1035Label", "dns1035Label"),
    ("format.labelValue", "labelValue"),
    ("format.qualifiedName", "qualifiedName"),
    ("format.uri", "uri"),
    ("format.uuid", "uuid"),
];

fn format_named_fn(id: &str) -> cel::common::functions::Function {
    match id {
        "dns1123Label" => |_| Ok(cel::common::value::CowVal::owned(Format("dns1123Label"))),
        "dns1123Subdomain" => |_| {
            Ok(cel::common::value::CowVal::owned(Format(
                "dns1123Subdomain",
            )))
        },
        "dns1035Label" => |_| Ok(cel::common::value::CowVal::owned(Format("dns1035Label"))),
        "labelValue" => |_| Ok(cel::common::value::CowVal::owned(Format("labelValue"))),
        "qualifiedName" => |_| Ok(cel::common::value::CowVal::owned(Format("qualifiedName"))),
        "uri" => |_| Ok(cel::common::value::CowVal::owned(Format("uri"))),
        _ => |_| Ok(cel::common::value::CowVal::owned(Format("uuid"))),
    }
}

/// `<format>.validate(s)`: `optional.none()` when valid, else `optional.of(errors)`, as in
/// Kubernetes' format library.
fn validate(f: &Format, s: &CelString<'_>) -> CelOptional<'static> {
    let s = s.inner();
    let errs = match f.0 {
        "dns1123Label" => formats::dns1123_label(s),
        "dns1123Subdomain" => formats::dns1123_subdomain(s),
        "dns1035Label" => formats::dns1035_label(s),
        "labelValue" => formats::label_value(s),
        "qualifiedName" => formats::qualified_name(s),
        "uri" if !formats::is_uri(s) => vec!["invalid URI".to_string()],
        "uuid" if !formats::is_uuid(s) => vec!["does not match the UUID format".to_string()],
        _ => Vec::new(),
    };
    if errs.is_empty() {
        return CelOptional::none();
    }
    let list: Vec<Box<dyn Val>> = errs
        .into_iter()
        .map(|e| Box::new(CelString::from(e)) as Box<dyn Val>)
        .collect();
    CelOptional::of(Box::new(CelList::from(list)))
}

/// An IP address value (`ip("10.0.0.1")`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ip(IpAddr);

/// A CIDR value (`cidr("10.0.0.0/8")`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Cidr {
    ip: IpAddr,
    len: u8,
}

impl Cidr {
    fn contains(&self, ip: IpAddr) -> bool {
        let prefix = |bits: u128, width: u32| {
            let shift = width.saturating_sub(u32::from(self.len));
            if shift >= 128 {
                0
            } else {
                bits >> shift
            }
        };
        match (self.ip, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                prefix(u128::from(u32::from(net)), 32) == prefix(u128::from(u32::from(a)), 32)
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                prefix(u128::from(net), 128) == prefix(u128::from(a), 128)
            }
            _ => false,
        }
    }
}

/// A named format from `format.<name>()`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Format(&'static str);

macro_rules! static_val {
    ($t:ty, $ty:ident) => {
        impl Val for $t {
            fn get_type(&self) -> &Type {
                &$ty
            }
            fn cel_type() -> &'static Type {
                &$ty
            }
            fn equals(&self, other: &dyn Val) -> bool {
                other.downcast_ref::<$t>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
                Box::new(*self)
            }
            fn as_any(&self) -> Option<&dyn Any> {
                Some(self)
            }
        }
        impl StaticVal for $t {}
    };
}

static_val!(Ip, IP_TYPE);
static_val!(Cidr, CIDR_TYPE);
static_val!(Format, FORMAT_TYPE);
