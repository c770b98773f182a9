//! `edgeplane convert ingress`: reads manifests (or the cluster's objects:
//! `convert_cluster`), converts their Ingresses
//! ([`crate::convert`]), writes the objects (stdout, or one file per object under `-o DIR`)
//! and the report, and with `--verify` replays the request corpus through both translations.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::convert::verify::{converted_snapshot, verify, Verification};
use crate::convert::{
    convert, Conversion, ConvertOptions, DEFAULT_GATEWAY_CLASS, DEFAULT_GATEWAY_NAMESPACE,
};
use crate::provider::admitted::{Admission, Reading, Taken};
use crate::provider::crds::load_crds;
use crate::provider::paths::load_paths;
use crate::snapshot::Snapshot;

/// Written, no difference found (or not verified).
pub const EXIT_OK: u8 = 0;
/// `--verify` found a request the conversion routes differently.
pub const EXIT_DIFFERENT: u8 = 1;
/// Bad input: a manifest that does not parse or is not admitted, a path that cannot be read,
/// an output directory that cannot be written.
pub const EXIT_INVALID: u8 = 2;
/// No Ingress of ingress-nginx or edgeplane was found to convert.
pub const EXIT_NOTHING: u8 = 3;

/// What `convert` converts.
#[derive(Debug, Subcommand)]
pub enum ConvertWhat {
    /// Convert the Ingresses of ingress-nginx's or edgeplane's IngressClasses to a Gateway per
    /// IngressClass, HTTPRoutes, ReferenceGrants and TrafficPolicies, with a report per
    /// Ingress and annotation; exit 0 when converted (1 with --verify and a difference), 2 on
    /// bad input, 3 when no Ingress was converted.
    Ingress(ConvertIngressArgs),
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    #[command(subcommand)]
    pub what: ConvertWhat,
}

#[derive(Debug, Args)]
pub struct ConvertIngressArgs {
    /// A manifest file, or a directory of YAML/JSON manifests read recursively; repeatable.
    /// Ingresses, IngressClasses, Services and Secrets are read from them.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "PATH",
        required_unless_present = "from_cluster",
        conflicts_with = "from_cluster"
    )]
    pub paths: Vec<PathBuf>,
    /// Read the Ingresses, IngressClasses, Services, EndpointSlices, Secrets and ConfigMaps of
    /// every namespace from the cluster of the kubeconfig (KUBECONFIG, ~/.kube/config, or
    /// in-cluster) instead of files; exit 2 when it cannot be read.
    #[arg(long)]
    pub from_cluster: bool,
    /// Write one file per object (`<kind>-<namespace>-<name>.yaml`) and the report
    /// (`report.txt`, and `report.jsonl`: the same as one line of JSON) into this directory
    /// instead of the objects to stdout and the report to stderr.
    #[arg(short = 'o', long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// `spec.gatewayClassName` of the written Gateways (the GatewayClass is not written).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_GATEWAY_CLASS)]
    pub gateway_class: String,
    /// Namespace of the written Gateways.
    #[arg(long, value_name = "NAMESPACE", default_value = DEFAULT_GATEWAY_NAMESPACE)]
    pub gateway_namespace: String,
    /// Replay requests generated from the Ingresses through the Ingresses and through the
    /// conversion and print every request decided differently; exit 1 on any difference.
    /// Without -o, the objects are not printed.
    #[arg(long)]
    pub verify: bool,
    /// With --verify: compare the Ingresses with these Gateway API manifests (a file or
    /// directory, repeatable; e.g. a conversion edited since) instead of a fresh conversion.
    #[arg(long, value_name = "PATH", requires = "verify")]
    pub converted: Vec<PathBuf>,
}

/// Runs `convert`.
pub async fn run(args: &ConvertArgs) -> ExitCode {
    let ConvertWhat::Ingress(args) = &args.what;
    let cluster = if args.from_cluster {
        match super::convert_cluster::manifests().await {
            Ok(text) => Some(text),
            Err(e) => {
                eprintln!("error: cannot read the cluster: {e:#}");
                return ExitCode::from(EXIT_INVALID);
            }
        }
    } else {
        None
    };
    ExitCode::from(ingress(args, cluster))
}

/// Converts the Ingresses of `args.paths`, or of `cluster` (a manifest stream read from the
/// cluster) when given.
fn ingress(args: &ConvertIngressArgs, cluster: Option<String>) -> u8 {
    let crds = match load_crds(&[]) {
        Ok((crds, _)) => Arc::new(crds),
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    let loaded = match cluster {
        Some(text) => admit_as(&text, crds.clone(), "<cluster>"),
        None => match load_paths(&args.paths, crds.clone()) {
            Ok(l) if l.errors.is_empty() => Ok(l.snapshot),
            Ok(l) => Err(l.errors.iter().map(ToString::to_string).collect()),
            Err(e) => Err(vec![e.to_string()]),
        },
    };
    let snapshot = match loaded {
        Ok(s) => s,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            eprintln!("error: nothing written: fix the input first");
            return EXIT_INVALID;
        }
    };
    let options = ConvertOptions {
        gateway_class: args.gateway_class.clone(),
        gateway_namespace: args.gateway_namespace.clone(),
    };
    let conversion = convert(&snapshot, &options);
    let yaml = match stream(&conversion.objects) {
        Ok(y) => y,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_INVALID;
        }
    };
    let report = conversion.report.text();
    if let Some(dir) = &args.output_dir {
        match write_dir(dir, &conversion) {
            Ok(stale) if !stale.is_empty() => eprintln!(
                "warning: {} also holds manifests this conversion did not write (left as they are): {}",
                dir.display(),
                stale.join(", ")
            ),
            Ok(_) => {}
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", dir.display());
                return EXIT_INVALID;
            }
        }
        eprint!(
            "{}",
            conversion
                .report
                .text()
                .lines()
                .last()
                .unwrap_or("")
                .to_owned()
                + "\n"
        );
    } else {
        if !args.verify {
            if let Err(e) = super::write_stdout(&yaml) {
                eprintln!("error: cannot print: {e}");
                return EXIT_INVALID;
            }
        }
        eprint!("{report}");
    }
    if conversion.report.converted() == 0 {
        eprintln!("warning: no Ingress of an ingress-nginx or edgeplane IngressClass found: nothing converted (exit 3)");
        return EXIT_NOTHING;
    }
    if !args.verify {
        return EXIT_OK;
    }
    let theirs = if args.converted.is_empty() {
        admit_as(&yaml, crds, "<converted>")
    } else {
        match load_paths(&args.converted, crds) {
            Ok(l) if l.errors.is_empty() => Ok(l.snapshot),
            Ok(l) => Err(l.errors.iter().map(ToString::to_string).collect()),
            Err(e) => Err(vec![e.to_string()]),
        }
    };
    let theirs = match theirs {
        Ok(s) => s,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return if args.converted.is_empty() {
                eprintln!("error: the converted objects are not admitted");
                EXIT_DIFFERENT
            } else {
                EXIT_INVALID
            };
        }
    };
    let compared = converted_snapshot(&conversion.input, &theirs, &args.gateway_class);
    let result = verify(&conversion.input, &compared);
    let text = verification_text(&result);
    if let Err(e) = super::write_stdout(&text) {
        eprintln!("error: cannot print: {e}");
        return EXIT_INVALID;
    }
    if result.differences.is_empty() {
        EXIT_OK
    } else {
        EXIT_DIFFERENT
    }
}

/// The objects as one YAML stream, each document opened by `---`.
fn stream(objects: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&crate::yaml_out::to_string(o).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// A manifest stream as a snapshot, admitted as if read from the file `source`.
fn admit_as(
    yaml: &str,
    crds: Arc<crate::admission::Crds>,
    source: &str,
) -> Result<Snapshot, Vec<String>> {
    let mut admission: Admission = Admission::new(crds);
    let applied = admission.apply(
        vec![(PathBuf::from(source), Taken::Read(Ok(yaml.to_owned())))],
        Reading::Final,
    );
    if applied.errors.is_empty() {
        Ok(admission.snapshot())
    } else {
        Err(applied.errors.iter().map(ToString::to_string).collect())
    }
}

/// One file per object, plus `report.txt` and `report.jsonl`; returns the names of the
/// manifests (`.yaml`, `.yml`, `.json`) already in `dir` that were not written now.
fn write_dir(dir: &Path, conversion: &Conversion) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut written = std::collections::BTreeSet::new();
    for o in &conversion.objects {
        let name = format!(
            "{}-{}-{}.yaml",
            o["kind"].as_str().unwrap_or("object").to_ascii_lowercase(),
            o["metadata"]["namespace"].as_str().unwrap_or("cluster"),
            o["metadata"]["name"].as_str().unwrap_or("unnamed"),
        );
        let text = crate::yaml_out::to_string(o).map_err(|e| e.to_string())?;
        std::fs::write(dir.join(&name), text).map_err(|e| e.to_string())?;
        written.insert(name);
    }
    std::fs::write(dir.join("report.txt"), conversion.report.text()).map_err(|e| e.to_string())?;
    // One line of JSON under a name neither kubectl nor `check` reads as a manifest.
    let json = serde_json::to_string(&conversion.report).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("report.jsonl"), json + "\n").map_err(|e| e.to_string())?;
    let mut stale: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| [".yaml", ".yml", ".json"].iter().any(|x| n.ends_with(x)))
        .filter(|n| !written.contains(n))
        .collect();
    stale.sort();
    Ok(stale)
}

/// Every differing request with both decisions, the converted objects' problems, and a
/// summary line.
fn verification_text(v: &Verification) -> String {
    let mut out = String::new();
    for d in &v.differences {
        out.push_str(&format!("difference: {}\n", d.request));
        let json =
            |x: &crate::convert::verify::Decision| serde_json::to_string(x).unwrap_or_default();
        out.push_str(&format!("  ingress:   {}\n", json(&d.ingress)));
        out.push_str(&format!("  converted: {}\n", json(&d.converted)));
    }
    for p in &v.problems {
        out.push_str(&format!("problem in the conversion: {p}\n"));
    }
    out.push_str(&format!(
        "verify: {} requests replayed, {} decided differently\n",
        v.requests,
        v.differences.len()
    ));
    out
}
