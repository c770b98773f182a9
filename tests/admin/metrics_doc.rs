//! docs/metrics.md's metric table is the registry's own list: every family the process
//! registers, with its labels and help, and nothing else. `UPDATE_GOLDEN=1` rewrites it from
//! the code.

use std::path::Path;

use edgeplane::metrics::Metrics;

const BEGIN: &str =
    "<!-- metrics:begin (generated from the registry; UPDATE_GOLDEN=1 cargo test --test admin) -->";
const END: &str = "<!-- metrics:end -->";

/// The table as the registry describes it.
fn generated() -> String {
    let metrics = Metrics::new();
    let mut out = String::from("| Metric | Labels | What it measures |\n|---|---|---|\n");
    for (name, labels, help) in metrics.catalog() {
        let labels = labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "| `{name}` | {labels} | {} |\n",
            help.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn the_metrics_reference_lists_every_metric_the_registry_has() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let readme = std::fs::read_to_string(&path).expect("docs/metrics.md");
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("docs/metrics.md has no metric table between {BEGIN:?} and {END:?}");
    };
    let table = &readme[start + BEGIN.len()..end];
    let want = generated();
    if table.trim() == want.trim() {
        return;
    }
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{BEGIN}\n{want}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).expect("write docs/metrics.md");
        return;
    }
    panic!(
        "docs/metrics.md's metric table differs from the registry; run UPDATE_GOLDEN=1 cargo test \
         --test admin, or put this in it:\n{want}"
    );
}
