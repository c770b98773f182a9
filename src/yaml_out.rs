//! The one YAML writer for everything edgeplane prints (`edgeplane crds`, `check`'s output):
//! block-style YAML that every reader takes the same way. A string is written plain only when
//! no YAML 1.1 reader (kubectl's go-yaml v2, PyYAML) and no YAML 1.2 reader would resolve it
//! to another type: `Off`, `y`, `0755`, `1:20`, `2001-12-14`, `~` or `.inf` come out quoted.
//! The rule is deliberately wider than either schema (every string that starts with a digit,
//! a sign or a dot is quoted): a quote too many costs nothing, one too few changes the value.
//! Pure.

use serde::Serialize;
use serde_yaml_ng::{Mapping, Number, Value};

/// Why a value could not be written (a type serde cannot represent, not user input).
#[derive(Debug, thiserror::Error)]
#[error("encoding YAML: {0}")]
pub struct YamlOutError(#[from] serde_yaml_ng::Error);

/// `value` as one YAML document (no `---`), fields in their serialization order.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, YamlOutError> {
    Ok(emit(&serde_yaml_ng::to_value(value)?))
}

/// One YAML document for `value`, ending in a newline. Tagged values (serde's enum variants)
/// are written as one-key mappings, as JSON writes them.
pub fn emit(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Mapping(m) if !m.is_empty() => mapping(&mut out, m, 0, false),
        Value::Sequence(s) if !s.is_empty() => sequence(&mut out, s, 0, false),
        Value::Tagged(t) => mapping(&mut out, &untag(t), 0, false),
        scalar => {
            // A document that is one scalar: no block scalar at the root.
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

fn untag(t: &serde_yaml_ng::value::TaggedValue) -> Mapping {
    let tag = t.tag.to_string();
    let mut m = Mapping::new();
    m.insert(
        Value::String(tag.trim_start_matches('!').to_owned()),
        t.value.clone(),
    );
    m
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A mapping whose keys start at column `indent`; with `inline_first`, the caller has already
/// written the first line's indentation (`- ` of a sequence item).
fn mapping(out: &mut String, m: &Mapping, indent: usize, inline_first: bool) {
    for (i, (key, value)) in m.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        out.push_str(&inline(key));
        out.push(':');
        child(out, value, indent, indent + 2);
    }
}

/// A sequence whose `-` are at column `indent`.
fn sequence(out: &mut String, s: &[Value], indent: usize, inline_first: bool) {
    for (i, item) in s.iter().enumerate() {
        if i > 0 || !inline_first {
            pad(out, indent);
        }
        out.push('-');
        match item {
            Value::Mapping(m) if !m.is_empty() => {
                out.push(' ');
                mapping(out, m, indent + 2, true);
            }
            Value::Tagged(t) => {
                out.push(' ');
                mapping(out, &untag(t), indent + 2, true);
            }
            Value::Sequence(s) if !s.is_empty() => {
                out.push(' ');
                sequence(out, s, indent + 2, true);
            }
            _ => child(out, item, indent, indent + 2),
        }
    }
}

/// The value of a mapping key (or a scalar sequence item), after its `:` (or `-`): nested
/// mappings at `nested`, nested sequences at `seq_indent`, block scalars' lines at
/// `nested`.
fn child(out: &mut String, value: &Value, seq_indent: usize, nested: usize) {
    match value {
        Value::Mapping(m) if !m.is_empty() => {
            out.push('\n');
            mapping(out, m, nested, false);
        }
        Value::Tagged(t) => {
            out.push('\n');
            mapping(out, &untag(t), nested, false);
        }
        Value::Sequence(s) if !s.is_empty() => {
            out.push('\n');
            sequence(out, s, seq_indent, false);
        }
        Value::String(s) if literal_ok(s) => {
            out.push_str(if s.ends_with('\n') { " |\n" } else { " |-\n" });
            for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
                if !line.is_empty() {
                    pad(out, nested);
                    out.push_str(line);
                }
                out.push('\n');
            }
        }
        scalar => {
            out.push(' ');
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
}

/// A scalar (or an empty collection) on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => string(s),
        Value::Sequence(_) => "[]".to_owned(),
        Value::Mapping(_) => "{}".to_owned(),
        // Unreachable from the callers (tagged values are untagged first); written as text.
        Value::Tagged(t) => string(&t.tag.to_string()),
    }
}

/// A number as both YAML versions read it: a float in exponent form keeps a `.` in its
/// mantissa and a sign in its exponent (`1.0e+300`), which YAML 1.1 requires.
fn number(n: &Number) -> String {
    let text = n.to_string();
    if !n.is_f64() {
        return text;
    }
    match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => {
            let dot = if mantissa.contains('.') { "" } else { ".0" };
            let sign = if exponent.starts_with(['-', '+']) {
                ""
            } else {
                "+"
            };
            format!("{mantissa}{dot}e{sign}{exponent}")
        }
        None => text,
    }
}

/// A string scalar: plain when [`plain_ok`], single-quoted when it is one line of printable
/// characters, else double-quoted with escapes.
pub fn string(s: &str) -> String {
    if plain_ok(s) {
        return s.to_owned();
    }
    if s.chars().all(|c| c != '\t' && printable(c)) {
        return format!("'{}'", s.replace('\'', "''"));
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04X}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Characters written as they are in a plain, single-quoted or block scalar: printable in
/// both versions and never taken for a line break (YAML 1.1 breaks lines at NEL, LS and PS)
/// or a byte order mark.
fn printable(c: char) -> bool {
    matches!(c, ' '..='~')
        || (c >= '\u{A0}'
            && !matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}'
            ))
}

/// The words YAML 1.1 reads as booleans or null, in any case (`yes`, `Off`, `y`, `NULL`).
const WORDS: [&str; 9] = ["y", "n", "yes", "no", "true", "false", "on", "off", "null"];

/// True when `s` can be written plain and every reader takes it back as this string: it
/// starts with a letter, `/`, `_`, `$`, `(` or `^` (so never a number, date, `.inf`, `~` or
/// an indicator), is not a YAML 1.1 boolean or null word, holds only printable characters
/// (no tab, no line break), no `: ` or ` #`, and neither ends with `:` nor with a space.
pub fn plain_ok(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || matches!(first, '/' | '_' | '$' | '(' | '^'))
        && !WORDS.iter().any(|w| s.eq_ignore_ascii_case(w))
        && s.chars().all(printable)
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with([':', ' '])
}

/// True when a string with line breaks can be a literal block (`|`, `|-`): every line is
/// printable without tabs, none ends in a space, the first does not start with one (its
/// indentation sets the block's), and it ends in at most one line break.
fn literal_ok(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && !s.ends_with("\n\n")
        && s.split('\n')
            .all(|l| !l.ends_with(' ') && l.chars().all(|c| c != '\t' && printable(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_other_types_would_take_are_quoted() {
        for s in [
            "Off",
            "off",
            "ON",
            "y",
            "Y",
            "n",
            "yes",
            "No",
            "true",
            "FALSE",
            "null",
            "~",
            "",
            "0755",
            "0x1f",
            "0o17",
            "0b101",
            "1_000",
            "1:20",
            "1e3",
            "1.5",
            ".inf",
            "-.inf",
            ".NaN",
            "+1",
            "-1",
            "2001-12-14",
            "2001-12-14T21:59:43.10-05:00",
            "<<",
            "=",
            "- a",
            "a: b",
            "a #b",
            "key:",
            " lead",
            "trail ",
            "*alias",
            "&anchor",
            "!tag",
            "%dir",
            "@at",
            "`tick",
            "'q'",
            "\"q\"",
            "[x]",
            "{x}",
            "|",
            ">",
            "?",
            "#c",
            "a\tb",
        ] {
            assert!(!plain_ok(s), "{s:?} written plain");
        }
        for s in [
            "Offline",
            "HTTPRoute",
            "edgeplane.dev/gateway-controller",
            "/convert",
            "(has(self.x))",
            "Accepted",
            "a-b_c.d",
            "x-kubernetes-preserve-unknown-fields",
        ] {
            assert!(plain_ok(s), "{s:?} quoted");
        }
    }

    #[test]
    fn quoting_round_trips_through_a_reader() {
        for s in [
            "it's",
            "a\"b\\c",
            "tab\there",
            "nel\u{85}",
            "ls\u{2028}",
            "\u{1}",
        ] {
            let doc = emit(&Value::String(s.to_owned()));
            let back: String = serde_yaml_ng::from_str(&doc).unwrap();
            assert_eq!(back, s, "{doc}");
        }
        assert_eq!(string("Off"), "'Off'");
        assert_eq!(string("it's"), "it's");
        assert_eq!(string("'a' b"), "'''a'' b'");
        assert_eq!(string("a\u{85}"), "\"a\\u0085\"");
    }

    proptest::proptest! {
        /// Any string, as a value, a key, an item or a nested value, reads back as itself.
        #[test]
        fn every_string_reads_back(s in "[a-c]?[a-c0-2 :#.'\"\\\\\n\t~&*|>@`,\\[\\]{}?=<é\u{85}\u{2028}-]{0,8}") {
            let mut inner = Mapping::new();
            inner.insert(Value::String(s.clone()), Value::String(s.clone()));
            let mut m = Mapping::new();
            m.insert(Value::String(s.clone()), Value::String(s.clone()));
            m.insert(Value::String("list".into()), Value::Sequence(vec![Value::String(s.clone()), Value::Mapping(inner)]));
            let v = Value::Mapping(m);
            let text = emit(&v);
            let back: Value = serde_yaml_ng::from_str(&text).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{e}: {text}")))?;
            proptest::prop_assert_eq!(back, v, "{}", text);
        }
    }

    #[test]
    fn layout_is_block_style_with_literal_blocks() {
        let v: Value = serde_yaml_ng::from_str(
            "a: {b: [1, {c: x, d: [y]}, [z], []], e: {}}\nf: \"l1\\nl2\\n\"\ng: \"l1\\n  l2\"\nh: 1.0e+300\n",
        )
        .unwrap();
        let text = emit(&v);
        assert_eq!(
            text,
            "a:\n  b:\n  - 1\n  - c: x\n    d:\n    - 'y'\n  - - z\n  - []\n  e: {}\nf: |\n  l1\n  l2\ng: |-\n  l1\n    l2\nh: 1.0e+300\n"
        );
        let back: Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert_eq!(emit(&Value::Sequence(vec![])), "[]\n");
    }
}
