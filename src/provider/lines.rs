//! Where a field of a manifest is written: the line of `spec.rules[0].matches[0].path` in the
//! n-th YAML document of a file, so that a rejected object is reported at the field's own line,
//! not only at its document's. Pure; run only when there is an error to report, so the second
//! parse costs nothing on the normal path.

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// The 1-based line where `field` (an API server field path such as
/// `spec.rules[0].matches[0].path`) of document `document` (0-based, counting every document
/// of the stream) is written: the line of the deepest part of the path that is present in the
/// text. `None` when the text does not parse or the document has none of the path.
pub fn field_line(text: &str, document: usize, field: &str) -> Option<usize> {
    let want = segments(field);
    let mut finder = Finder {
        document,
        want: &want,
        documents: 0,
        stack: Vec::new(),
        best: None,
    };
    Parser::new_from_str(text).load(&mut finder, true).ok()?;
    finder.best.map(|(_, line)| line)
}

/// One step of a field path: a property name or a list index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// `a.b[2].c` -> `[Key(a), Key(b), Index(2), Key(c)]`; a key with a dot cannot be told apart
/// and is matched up to its first part.
fn segments(field: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Segment::Key(name.to_owned()));
        }
        for index in rest.split('[') {
            match index.trim_end_matches(']').parse() {
                Ok(i) => out.push(Segment::Index(i)),
                Err(_) if index.is_empty() => {}
                // A map key in brackets (`labels[a]`): a key like any other.
                Err(_) => out.push(Segment::Key(index.trim_end_matches(']').to_owned())),
            }
        }
    }
    out
}

/// One open collection while walking the events.
enum Frame {
    /// A mapping: the key just read (its path segment and line), if a value is expected next.
    Mapping {
        key: Option<(String, usize)>,
        path_len: usize,
    },
    /// A sequence: the index of the next item.
    Sequence { next: usize, path_len: usize },
}

struct Finder<'a> {
    document: usize,
    want: &'a [Segment],
    /// Documents started so far.
    documents: usize,
    stack: Vec<Frame>,
    /// Depth matched and its line.
    best: Option<(usize, usize)>,
}

impl Finder<'_> {
    /// Length of the path the next node sits at, and whether it is still on the wanted path,
    /// given the parent frame; consumes the mapping key or advances the sequence index.
    fn enter(&mut self, line: usize) -> Option<usize> {
        let (segment, at_line, parent_len) = match self.stack.last_mut()? {
            Frame::Mapping { key, path_len } => {
                let (k, l) = key.take()?;
                (Segment::Key(k), l, *path_len)
            }
            Frame::Sequence { next, path_len } => {
                *next += 1;
                (Segment::Index(*next - 1), line, *path_len)
            }
        };
        // `path_len` of a frame off the wanted path is usize::MAX: nothing below it matches.
        if parent_len == usize::MAX || self.want.get(parent_len) != Some(&segment) {
            return Some(usize::MAX);
        }
        let depth = parent_len + 1;
        if self.best.is_none_or(|(d, _)| depth > d) {
            self.best = Some((depth, at_line));
        }
        Some(depth)
    }
}

impl MarkedEventReceiver for Finder<'_> {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::DocumentStart => {
                self.documents += 1;
                self.stack.clear();
            }
            _ if self.documents != self.document + 1 => {}
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path_len = if self.stack.is_empty() {
                    0
                } else {
                    self.enter(line).unwrap_or(usize::MAX)
                };
                self.stack.push(match ev {
                    Event::MappingStart(..) => Frame::Mapping {
                        key: None,
                        path_len,
                    },
                    _ => Frame::Sequence { next: 0, path_len },
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::Scalar(value, ..) => {
                if let Some(Frame::Mapping {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((value, line));
                } else {
                    self.enter(line);
                }
            }
            Event::Alias(..) => {
                self.enter(line);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
apiVersion: v1
kind: A
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: r
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - name: a
  - matches:
    - headers: [{name: x, value: y}]
    - path:
        type: PathPrefix
        value: nope
";

    #[test]
    fn finds_the_line_of_the_deepest_written_part() {
        assert_eq!(
            field_line(TEXT, 1, "spec.rules[1].matches[1].path"),
            Some(15)
        );
        assert_eq!(
            field_line(TEXT, 1, "spec.rules[1].matches[1].path.value"),
            Some(17)
        );
        assert_eq!(
            field_line(TEXT, 1, "spec.rules[0].backendRefs[0]"),
            Some(12)
        );
        assert_eq!(field_line(TEXT, 1, "spec.parentRefs[0].name"), Some(9));
        // Only part of the path is written: the deepest part that is.
        assert_eq!(
            field_line(TEXT, 1, "spec.rules[1].timeouts.request"),
            Some(13)
        );
        assert_eq!(field_line(TEXT, 0, "kind"), Some(2));
        assert_eq!(field_line(TEXT, 2, "kind"), None);
    }

    #[test]
    fn paths_split_into_keys_and_indexes() {
        assert_eq!(
            segments("spec.labels[a].x[3][1]"),
            [
                Segment::Key("spec".into()),
                Segment::Key("labels".into()),
                Segment::Key("a".into()),
                Segment::Key("x".into()),
                Segment::Index(3),
                Segment::Index(1)
            ]
        );
    }
}
