#!/usr/bin/env python3
"""Validates Kubernetes objects offline and strictly (an unknown field is an error).

    validate-manifests.py --kubernetes 1.34 [--crds FILE]... [--unchecked KIND]... FILE...

Every object of every FILE (multi-document YAML) is checked:
- built-in kinds against the Kubernetes OpenAPI schemas of that version, as the PyPI package
  kubernetes-validate ships them (its strict variant);
- kinds a CustomResourceDefinition of a --crds file defines against that CRD's
  openAPIV3Schema, made strict (every object schema with properties refuses other fields
  unless it preserves unknown fields), and their metadata against ObjectMeta;
- kinds named with --unchecked are reported as not schema-checked (the caller checks them
  otherwise); any other kind without a schema is an error.
Prints one line per object and exits 1 when any object fails or has no schema.
"""

import argparse
import copy
import sys

import jsonschema
import kubernetes_validate
import referencing
import yaml
from kubernetes_validate import utils


def strict(schema):
    """A copy of an OpenAPI v3 (structural) schema that refuses unknown fields and takes
    `nullable` into account, as the API server's strict field validation does."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_schemas(paths):
    """(apiVersion, kind) -> strict schema, from every CRD in the files."""
    schemas = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for version in spec["versions"]:
                    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
                    # metadata is ObjectMeta, checked on its own below.
                    schema.get("properties", {}).pop("metadata", None)
                    schema.setdefault("properties", {})
                    schema["properties"]["metadata"] = {"type": "object"}
                    for field in ("apiVersion", "kind"):
                        schema["properties"].setdefault(field, {"type": "string"})
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    schemas[key] = strict(schema)
    return schemas


def object_meta_validator(version):
    """A validator of ObjectMeta from kubernetes-validate's strict schemas of `version`."""
    directory = f"kubernetes-json-schema/v{version}.0-local-strict"
    schema = utils.schema_contents(f"{directory}/objectmeta-meta-v1.json", version)
    definitions = utils.schema_contents(f"{directory}/_definitions.json", version)
    registry = referencing.Resource.from_contents(schema) @ referencing.Registry()
    registry = referencing.Resource.from_contents(definitions) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def name_of(obj):
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')}/{ns + '/' if ns else ''}{meta.get('name')}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubernetes", required=True, help="Kubernetes minor version, e.g. 1.34")
    parser.add_argument("--crds", action="append", default=[])
    parser.add_argument("--unchecked", action="append", default=[])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    crds = crd_schemas(args.crds)
    meta = object_meta_validator(args.kubernetes)
    failed = 0
    count = 0
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            objects = [o for o in yaml.safe_load_all(f) if o]
        for obj in objects:
            count += 1
            where = f"{path}: {name_of(obj)}"
            key = (obj.get("apiVersion"), obj.get("kind"))
            try:
                if key in crds:
                    jsonschema.validate(obj, crds[key], cls=jsonschema.Draft202012Validator)
                    meta.validate(obj.get("metadata") or {})
                    print(f"ok {where} (CRD schema)")
                    continue
                try:
                    kubernetes_validate.validate(obj, args.kubernetes, strict=True)
                    print(f"ok {where} (Kubernetes {args.kubernetes} schema)")
                except kubernetes_validate.SchemaNotFoundError:
                    if obj.get("kind") in args.unchecked:
                        print(f"unchecked {where} (no schema: checked by the caller)")
                    else:
                        print(f"error {where}: no schema for {key[0]} {key[1]}")
                        failed += 1
            except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as e:
                message = getattr(e, "message", None) or str(e).splitlines()[0]
                path_ = "/".join(str(p) for p in getattr(e, "absolute_path", []))
                print(f"error {where}: {message} (at {path_ or '/'})")
                failed += 1
    if count == 0:
        print("error: no objects", file=sys.stderr)
        return 1
    print(f"{count} objects, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
