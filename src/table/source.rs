//! The Gateway listener behind a socket of the table: [`SocketSource`], what the status overlay
//! of bind failures reads to find the listeners of a failed socket.

use std::cmp::Ordering;
use std::fmt;

use serde::{Serialize, Serializer};

/// One Gateway listener merged onto a socket: its Gateway, and for a ListenerSet's listener the
/// set, so that it is never taken for a Gateway listener of the same name. Shown (and
/// serialized) as `namespace/gateway/listener`, or
/// `namespace/gateway/ListenerSet/set-namespace/set-name/listener`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SocketSource {
    /// The Gateway's namespace.
    pub namespace: String,
    /// The Gateway's name.
    pub gateway: String,
    /// The ListenerSet (namespace, name) that declares the listener; `None` for the Gateway's
    /// own.
    pub listener_set: Option<(String, String)>,
    /// The listener's name.
    pub listener: String,
}

/// The word between the Gateway and the set in the text form.
const LISTENER_SET: &str = "ListenerSet";

impl SocketSource {
    /// A listener of the Gateway `namespace/gateway` itself.
    pub fn gateway(namespace: &str, gateway: &str, listener: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            gateway: gateway.to_owned(),
            listener_set: None,
            listener: listener.to_owned(),
        }
    }

    /// The parts of the text form, in order, without the slashes.
    fn parts(&self) -> impl Iterator<Item = &str> {
        let set = self
            .listener_set
            .iter()
            .flat_map(|(ns, name)| [LISTENER_SET, ns.as_str(), name.as_str()]);
        [self.namespace.as_str(), self.gateway.as_str()]
            .into_iter()
            .chain(set)
            .chain([self.listener.as_str()])
    }

    /// Writes the `gateway` of metrics and access-log lines: `namespace/name`.
    pub fn write_gateway(&self, out: &mut impl fmt::Write) -> fmt::Result {
        out.write_str(&self.namespace)?;
        out.write_char('/')?;
        out.write_str(&self.gateway)
    }

    /// The text form in runs of bytes: the parts and the slashes between them, none empty.
    fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.parts()
            .enumerate()
            .flat_map(|(i, p)| [if i > 0 { "/" } else { "" }, p])
            .map(str::as_bytes)
            .filter(|p| !p.is_empty())
    }

    /// Writes the `listener` of metrics and access-log lines: the listener's name, or
    /// `ListenerSet/namespace/name/listener` for a ListenerSet's.
    pub fn write_listener(&self, out: &mut impl fmt::Write) -> fmt::Result {
        for (i, part) in self.parts().skip(2).enumerate() {
            if i > 0 {
                out.write_char('/')?;
            }
            out.write_str(part)?;
        }
        Ok(())
    }
}

/// Ordered as the text forms are, so tables list sources as they always did. Compared a run
/// of bytes at a time (the parts and the slashes between them) rather than byte by byte: the
/// table keeps a socket's sources in a sorted set, and a Gateway taking in thousands of
/// ListenerSets puts as many on one socket.
impl Ord for SocketSource {
    fn cmp(&self, other: &Self) -> Ordering {
        let (mut a, mut b) = (self.pieces(), other.pieces());
        let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
        loop {
            if x.is_empty() {
                x = a.next().unwrap_or_default();
            }
            if y.is_empty() {
                y = b.next().unwrap_or_default();
            }
            if x.is_empty() || y.is_empty() {
                return x.is_empty().cmp(&y.is_empty()).reverse();
            }
            let n = x.len().min(y.len());
            match x[..n].cmp(&y[..n]) {
                Ordering::Equal => (x, y) = (&x[n..], &y[n..]),
                unequal => return unequal,
            }
        }
    }
}

impl PartialOrd for SocketSource {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for SocketSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.parts().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            f.write_str(part)?;
        }
        Ok(())
    }
}

impl Serialize for SocketSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_set(listener: &str) -> SocketSource {
        SocketSource {
            listener_set: Some(("apps".into(), "extra".into())),
            ..SocketSource::gateway("infra", "gw", listener)
        }
    }

    #[test]
    fn text_form_and_order_are_those_of_the_strings() {
        let own = SocketSource::gateway("infra", "gw", "http");
        assert_eq!(own.to_string(), "infra/gw/http");
        let (mut gateway, mut listener) = (String::new(), String::new());
        in_set("web").write_gateway(&mut gateway).unwrap();
        in_set("web").write_listener(&mut listener).unwrap();
        assert_eq!(
            (gateway.as_str(), listener.as_str()),
            ("infra/gw", "ListenerSet/apps/extra/web")
        );
        assert_eq!(
            in_set("web").to_string(),
            "infra/gw/ListenerSet/apps/extra/web"
        );
        assert_eq!(
            serde_json::to_value(in_set("web")).expect("serializes"),
            serde_json::json!("infra/gw/ListenerSet/apps/extra/web")
        );
        let mut sources = [
            own.clone(),
            in_set("web"),
            SocketSource::gateway("infra", "gw", "Admin"),
            SocketSource::gateway("infra-b", "gw", "a"),
            SocketSource::gateway("infra", "gw-2", "a"),
            SocketSource::gateway("infra", "gw", "a"),
            SocketSource::gateway("infra", "gw", "ab"),
            SocketSource::gateway("infra", "gw", "a"),
            SocketSource::gateway("infra", "gwa", ""),
            SocketSource::gateway("", "", ""),
            in_set("web-2"),
        ];
        let mut texts: Vec<String> = sources.iter().map(ToString::to_string).collect();
        sources.sort();
        texts.sort();
        let sorted: Vec<String> = sources.iter().map(ToString::to_string).collect();
        assert_eq!(sorted, texts);
    }
}
