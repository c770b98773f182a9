//! edgeplane's own CRDs: conversion between their versions, the conversion webhook over real
//! HTTPS, the generated CRD file, and admission of both kinds in standalone mode.

mod support;

#[path = "crd/webhook.rs"]
mod webhook;

#[path = "crd/convert.rs"]
mod convert;

#[path = "crd/admission.rs"]
mod admission;

#[path = "crd/generated.rs"]
mod generated;

#[path = "crd/columns.rs"]
mod columns;
