//! Gateway addresses: which IPs a Gateway's listeners bind, from `spec.addresses`. Pure.

use std::net::IpAddr;

use gateway_api::apis::standard::gateways::Gateway;

/// An address problem: it makes the Gateway not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("address type {0} is not supported; use IPAddress")]
    UnsupportedType(String),
    #[error("address {0:?} is not a valid IP address")]
    NotAnIp(String),
}

/// Bind IPs from `spec.addresses` (`IPAddress` entries or untyped ones). An entry without a
/// value asks the implementation to assign one: that is `default` (`--bind-address`), as is
/// the answer when there are no entries at all.
pub fn bind_addresses(gateway: &Gateway, default: IpAddr) -> (Vec<IpAddr>, Option<AddressError>) {
    let mut ips = Vec::new();
    for a in gateway.spec.addresses.iter().flatten() {
        let ty = a.r#type.as_deref().unwrap_or("IPAddress");
        if ty != "IPAddress" {
            return (vec![], Some(AddressError::UnsupportedType(ty.to_owned())));
        }
        // An IPAddress without a value asks the implementation to pick one.
        let Some(value) = a.value.as_deref().filter(|v| !v.is_empty()) else {
            if !ips.contains(&default) {
                ips.push(default);
            }
            continue;
        };
        match value.parse::<IpAddr>() {
            Ok(ip) if !ips.contains(&ip) => ips.push(ip),
            Ok(_) => {}
            Err(_) => return (vec![], Some(AddressError::NotAnIp(value.to_owned()))),
        }
    }
    if ips.is_empty() {
        ips.push(default);
    }
    (ips, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(yaml: &str) -> Gateway {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn addresses_pick_ips_or_fail() {
        let default: IpAddr = "127.0.0.1".parse().unwrap();
        let ok = gateway("metadata: {name: g}\nspec: {gatewayClassName: c, listeners: [], addresses: [{value: 127.0.0.2}, {type: IPAddress, value: 127.0.0.2}]}");
        assert_eq!(
            bind_addresses(&ok, default),
            (vec!["127.0.0.2".parse().unwrap()], None)
        );
        let host = gateway("metadata: {name: g}\nspec: {gatewayClassName: c, listeners: [], addresses: [{type: Hostname, value: a.com}]}");
        assert!(matches!(
            bind_addresses(&host, default).1,
            Some(AddressError::UnsupportedType(_))
        ));
        let none = gateway("metadata: {name: g}\nspec: {gatewayClassName: c, listeners: []}");
        assert_eq!(bind_addresses(&none, default).0, vec![default]);
        let empty = gateway("metadata: {name: g}\nspec: {gatewayClassName: c, listeners: [], addresses: [{type: IPAddress}]}");
        assert_eq!(bind_addresses(&empty, default), (vec![default], None));
        let mixed = gateway("metadata: {name: g}\nspec: {gatewayClassName: c, listeners: [], addresses: [{value: 127.0.0.3}, {type: IPAddress, value: ''}]}");
        assert_eq!(
            bind_addresses(&mixed, default).0,
            vec!["127.0.0.3".parse::<IpAddr>().unwrap(), default]
        );
    }
}
