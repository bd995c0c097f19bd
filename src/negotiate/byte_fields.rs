//! Which fields of a built-in kind are bytes: the [`Schema`] a CBOR request body is
//! transcoded with (docs/wire.md §3, byte fields).
//!
//! Every Go `[]byte` field of the kinds kube-apiserver serves (`format: byte` in its OpenAPI
//! schema), read from `k8s.io/api` (every `types.go`, 2026-07 snapshot, Kubernetes 1.36),
//! `k8s.io/apiextensions-apiserver` and `k8s.io/kube-aggregator`:
//!
//! | group/version | resource | `[]byte` fields |
//! |---|---|---|
//! | `v1` | configmaps | `binaryData.*` |
//! | `v1` | secrets | `data.*` |
//! | `certificates.k8s.io/v1`, `v1beta1` | certificatesigningrequests | `spec.request`, `status.certificate` |
//! | `certificates.k8s.io/v1` | podcertificaterequests | `spec.stubPKCS10Request` |
//! | `certificates.k8s.io/v1beta1` | podcertificaterequests | `spec.pkixPublicKey`, `spec.proofOfPossession`, `spec.stubPKCS10Request` |
//! | `admissionregistration.k8s.io/v1`, `v1beta1` | validating/mutatingwebhookconfigurations | `webhooks[].clientConfig.caBundle` |
//! | `apiextensions.k8s.io/v1` | customresourcedefinitions | `spec.conversion.webhook.clientConfig.caBundle` |
//! | `apiregistration.k8s.io/v1` | apiservices | `spec.caBundle` |
//!
//! (`RangeAllocation.data` and `AdmissionReview`'s patch are not served as resources.) Every
//! other resource of a group-version listed in [`BUILT_IN`] has no `[]byte` field. A
//! built-in group at a version not listed (newer than this table) is [`Schema::Unknown`].
//! Any other group is a custom resource or an aggregated API, decoded by the CBOR-enabled
//! server into `map[string]interface{}`: [`Schema::Unstructured`]. So are apply patches,
//! which the apiserver decodes into an `Unstructured` whatever the kind.

use crate::codec::fields::{Schema, Step};

use super::route::ResourceRoute;

use Step::{AnyIndex, AnyKey, Key};

pub(crate) const CONFIGMAP: &[&[Step]] = &[&[Key("binaryData"), AnyKey]];
const SECRET: &[&[Step]] = &[&[Key("data"), AnyKey]];
const CSR: &[&[Step]] = &[
    &[Key("spec"), Key("request")],
    &[Key("status"), Key("certificate")],
];
const PCR_V1: &[&[Step]] = &[&[Key("spec"), Key("stubPKCS10Request")]];
const PCR_V1BETA1: &[&[Step]] = &[
    &[Key("spec"), Key("pkixPublicKey")],
    &[Key("spec"), Key("proofOfPossession")],
    &[Key("spec"), Key("stubPKCS10Request")],
];
const WEBHOOKS: &[&[Step]] = &[&[
    Key("webhooks"),
    AnyIndex,
    Key("clientConfig"),
    Key("caBundle"),
]];
const CRD: &[&[Step]] = &[&[
    Key("spec"),
    Key("conversion"),
    Key("webhook"),
    Key("clientConfig"),
    Key("caBundle"),
]];
const APISERVICE: &[&[Step]] = &[&[Key("spec"), Key("caBundle")]];

/// (group, version, resource, its kind, its `[]byte` fields).
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static [Step]],
);

/// Every resource with `[]byte` fields.
const BYTE_FIELDS: &[Row] = &[
    ("", "v1", "configmaps", "ConfigMap", CONFIGMAP),
    ("", "v1", "secrets", "Secret", SECRET),
    (
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        CSR,
    ),
    (
        "certificates.k8s.io",
        "v1beta1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        CSR,
    ),
    (
        "certificates.k8s.io",
        "v1",
        "podcertificaterequests",
        "PodCertificateRequest",
        PCR_V1,
    ),
    (
        "certificates.k8s.io",
        "v1beta1",
        "podcertificaterequests",
        "PodCertificateRequest",
        PCR_V1BETA1,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        WEBHOOKS,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        WEBHOOKS,
    ),
    (
        "admissionregistration.k8s.io",
        "v1beta1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        WEBHOOKS,
    ),
    (
        "admissionregistration.k8s.io",
        "v1beta1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        WEBHOOKS,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        CRD,
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        APISERVICE,
    ),
];

/// The built-in groups and the versions this table knows.
const BUILT_IN: &[(&str, &[&str])] = &[
    ("", &["v1"]),
    (
        "admissionregistration.k8s.io",
        &["v1", "v1alpha1", "v1beta1"],
    ),
    ("apiextensions.k8s.io", &["v1"]),
    ("apiregistration.k8s.io", &["v1"]),
    ("apps", &["v1", "v1beta1", "v1beta2"]),
    ("authentication.k8s.io", &["v1", "v1alpha1", "v1beta1"]),
    ("authorization.k8s.io", &["v1", "v1beta1"]),
    ("autoscaling", &["v1", "v2"]),
    ("batch", &["v1", "v1beta1"]),
    ("certificates.k8s.io", &["v1", "v1alpha1", "v1beta1"]),
    ("coordination.k8s.io", &["v1", "v1alpha2", "v1beta1"]),
    ("discovery.k8s.io", &["v1", "v1beta1"]),
    ("events.k8s.io", &["v1", "v1beta1"]),
    ("extensions", &["v1beta1"]),
    (
        "flowcontrol.apiserver.k8s.io",
        &["v1", "v1beta1", "v1beta2", "v1beta3"],
    ),
    ("internal.apiserver.k8s.io", &["v1alpha1"]),
    ("lifecycle.k8s.io", &["v1alpha1"]),
    ("networking.k8s.io", &["v1", "v1beta1"]),
    ("node.k8s.io", &["v1", "v1alpha1", "v1beta1"]),
    ("policy", &["v1", "v1beta1"]),
    ("rbac.authorization.k8s.io", &["v1", "v1alpha1", "v1beta1"]),
    ("resource.k8s.io", &["v1", "v1alpha3", "v1beta1", "v1beta2"]),
    ("scheduling.k8s.io", &["v1", "v1alpha3", "v1beta1"]),
    ("storage.k8s.io", &["v1", "v1alpha1", "v1beta1"]),
    ("storagemigration.k8s.io", &["v1", "v1beta1"]),
];

/// The schema of a typed (create, update, delete) CBOR body sent to `route`.
pub fn typed_body(route: &ResourceRoute) -> Schema {
    let (group, version) = (route.group.as_str(), route.version.as_str());
    let Some((_, versions)) = BUILT_IN.iter().find(|(g, _)| *g == group) else {
        return Schema::Unstructured;
    };
    if !versions.contains(&version) {
        return Schema::Unknown;
    }
    // Subresources that take the object itself (`status`, a CSR's `approval`) share its
    // fields; the others take kinds without `[]byte` fields (Scale, Eviction, Binding,
    // TokenRequest, DeleteOptions).
    let whole_object = matches!(
        route.subresource.as_deref(),
        None | Some("status" | "approval")
    );
    let fields = BYTE_FIELDS
        .iter()
        .find(|(g, v, r, ..)| *g == group && *v == version && *r == route.resource)
        .filter(|_| whole_object)
        .map_or(&[][..], |(.., f)| *f);
    Schema::Typed(fields)
}

/// The schema of a successful answer from `route` (docs/wire.md §2): the `[]byte` fields of
/// the objects it holds, where the table knows them; nothing to rewrite otherwise.
pub fn typed_response(route: &ResourceRoute) -> Schema {
    match typed_body(route) {
        Schema::Typed(fields) if !fields.is_empty() => Schema::Typed(fields),
        _ => Schema::Unstructured,
    }
}

/// The kind and version the apiserver decodes a typed body to `route` into, where that kind
/// has `[]byte` fields: the words of its decode errors
/// (`ConfigMap in version "v1" cannot be handled as a ConfigMap: …`).
pub fn typed_kind(route: &ResourceRoute) -> Option<TypedKind> {
    BYTE_FIELDS
        .iter()
        .find(|(g, v, r, ..)| {
            *g == route.group.as_str() && *v == route.version.as_str() && *r == route.resource
        })
        .map(|&(_, version, _, kind, _)| TypedKind { kind, version })
}

/// A built-in kind at one version, as its decode errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypedKind {
    pub kind: &'static str,
    pub version: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::route::Route;

    fn schema(path: &str) -> Schema {
        match Route::classify(path) {
            Route::Resource(r) => typed_body(&r),
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn each_route_gets_its_schema() {
        let cases: &[(&str, Schema)] = &[
            ("/api/v1/namespaces/a/configmaps", Schema::Typed(CONFIGMAP)),
            (
                "/api/v1/namespaces/a/configmaps/b",
                Schema::Typed(CONFIGMAP),
            ),
            ("/api/v1/namespaces/a/secrets/b", Schema::Typed(SECRET)),
            ("/api/v1/namespaces/a/pods", Schema::Typed(&[])),
            ("/api/v1/namespaces/a/pods/p/eviction", Schema::Typed(&[])),
            (
                "/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval",
                Schema::Typed(CSR),
            ),
            (
                "/apis/certificates.k8s.io/v1/certificatesigningrequests/c/status",
                Schema::Typed(CSR),
            ),
            (
                "/apis/certificates.k8s.io/v1beta1/namespaces/a/podcertificaterequests",
                Schema::Typed(PCR_V1BETA1),
            ),
            (
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                Schema::Typed(WEBHOOKS),
            ),
            (
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x",
                Schema::Typed(CRD),
            ),
            (
                "/apis/apiregistration.k8s.io/v1/apiservices/x/status",
                Schema::Typed(APISERVICE),
            ),
            (
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                Schema::Typed(&[]),
            ),
            // A version of a built-in group this table does not know.
            (
                "/apis/certificates.k8s.io/v2/certificatesigningrequests",
                Schema::Unknown,
            ),
            // Custom resources and aggregated APIs.
            (
                "/apis/harness.example.com/v1/namespaces/a/widgets",
                Schema::Unstructured,
            ),
            ("/apis/metrics.k8s.io/v1beta1/pods", Schema::Unstructured),
        ];
        for (path, want) in cases {
            assert_eq!(schema(path), *want, "{path}");
        }
    }

    #[test]
    fn every_table_row_names_a_known_group_version() {
        for (g, v, r, _, fields) in BYTE_FIELDS {
            let known = BUILT_IN.iter().any(|(bg, vs)| bg == g && vs.contains(v));
            assert!(known, "{g}/{v} {r}");
            assert!(fields.len() <= crate::codec::fields::MAX_PATHS, "{r}");
        }
    }
}
