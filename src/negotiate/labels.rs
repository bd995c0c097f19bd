//! The labels a request's metrics carry besides verb, code and formats (docs/wire.md §6):
//! the API group and resource its route addresses, and its client family. Pure and total,
//! and bounded by construction: the client is one of [`ClientFamily::ALL`]; a route that
//! addresses no resource gets one of a few fixed values; a resource route gets its own
//! group and resource only when both are names an apiserver can serve, and then only up
//! to a cap the caller keeps (`proxy::request_labels::ResourceLabels`), beyond which it is
//! [`OTHER`]. Never a namespace, an object name or a user: the route keeps neither.
//!
//! [`ClientFamily::ALL`]: super::client::ClientFamily::ALL

use super::route::{query_first_value, Method, Route};

/// `group` and `resource` of a discovery request (`/api`, `/apis`, `/apis/<group>`,
/// `/api/v1`, `/apis/<group>/<version>`).
pub const DISCOVERY: &str = "(discovery)";
/// `group` and `resource` of a request outside the resource API (`/version`,
/// `/openapi/...`, `/healthz`, anything that does not parse as a resource path) and of
/// one that was never classified.
pub const NON_RESOURCE: &str = "(nonresource)";
/// `group` and `resource` of a resource request beyond the cap on distinct (group,
/// resource) pairs, or to a group or resource no apiserver can serve.
pub const OTHER: &str = "(other)";

/// The longest resource name (a DNS-1123 label, as a CRD's plural must be).
const MAX_RESOURCE_LEN: usize = 63;
/// The longest group name (a DNS-1123 subdomain).
const MAX_GROUP_LEN: usize = 253;

/// What a route's `group` and `resource` labels are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceKey<'a> {
    /// A resource of its own: counted against the cap on distinct pairs. `group` is `""`
    /// for the core group, as in kube-apiserver's `apiserver_request_total`.
    Resource { group: &'a str, resource: &'a str },
    /// One of [`DISCOVERY`], [`NON_RESOURCE`] and [`OTHER`], in both labels; not counted
    /// against the cap.
    Fixed(&'static str),
}

/// The `group` and `resource` labels of a request to `route`. A subresource counts as its
/// resource (`pods/log` is `pods`); the version is not a label.
pub fn resource_key(route: &Route) -> ResourceKey<'_> {
    match route {
        Route::Resource(r) if is_group(&r.group) && is_resource(&r.resource) => {
            ResourceKey::Resource {
                group: &r.group,
                resource: &r.resource,
            }
        }
        Route::Resource(_) => ResourceKey::Fixed(OTHER),
        Route::GroupVersionDiscovery { .. } | Route::NoCborDiscovery => {
            ResourceKey::Fixed(DISCOVERY)
        }
        Route::Other => ResourceKey::Fixed(NON_RESOURCE),
    }
}

/// The `scope` label, as kube-apiserver 1.36's `CleanScope` gives it (read from its
/// `/metrics` for the same requests, tests/control_plane/request_metrics.rs): `resource` for
/// a request that names an object or creates one (any POST to a resource path: the
/// apiserver's `create` verb), else `namespace` under `/namespaces/<ns>/`, else `cluster`;
/// `""` outside the resource API.
pub fn scope(route: &Route, method: Method) -> &'static str {
    match route {
        Route::Resource(r) if r.named || method == Method::Post => "resource",
        Route::Resource(r) if r.namespaced => "namespace",
        Route::Resource(_) => "cluster",
        _ => "",
    }
}

/// The `dry_run` label, as kube-apiserver's `cleanDryRun` gives it: `""` without a `dryRun`
/// query parameter, `All` when every value is `All` (the only valid one), `invalid` otherwise.
pub fn dry_run(query: Option<&str>) -> &'static str {
    let Some(q) = query.filter(|q| q.contains("dryRun")) else {
        return "";
    };
    // Every value of every `dryRun` parameter (`url.Values`' list), decoded.
    let mut seen = false;
    for pair in q.split('&') {
        if let Some(v) = query_first_value(pair, "dryRun") {
            if v != "All" {
                return "invalid";
            }
            seen = true;
        }
    }
    if seen {
        "All"
    } else {
        ""
    }
}

/// The `version` and `subresource` labels of a resource route with labels of its own: the
/// version when it is a Kubernetes API version (`v1`, `v2beta1`, `v1alpha3`: `v`, a number,
/// then optionally `alpha` or `beta` and a number), the subresource when it is a DNS-1123
/// label (`""` for none). `None` when either is not: the request counts under [`OTHER`].
pub fn variant(route: &Route) -> Option<(&str, &str)> {
    let Route::Resource(r) = route else {
        return Some(("", ""));
    };
    let sub = r.subresource.as_deref().unwrap_or("");
    (is_version(&r.version) && (sub.is_empty() || is_dns_label(sub))).then_some((&r.version, sub))
}

/// `v<N>`, `v<N>alpha<M>`, `v<N>beta<M>` with numbers of at most 4 digits, no leading zero.
fn is_version(v: &str) -> bool {
    let number = |s: &str| {
        (1..=4).contains(&s.len()) && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit())
    };
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let cut = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, level) = rest.split_at(cut);
    number(major)
        && (level.is_empty()
            || level
                .strip_prefix("alpha")
                .or_else(|| level.strip_prefix("beta"))
                .is_some_and(number))
}

/// A DNS-1123 label: lowercase letters, digits and `-`, starting and ending with a
/// letter or digit.
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= MAX_RESOURCE_LEN
        && b.first().is_some_and(inner)
        && b.last().is_some_and(inner)
        && b.iter().all(|c| inner(c) || *c == b'-')
}

/// `""` (the core group) or a DNS-1123 subdomain.
fn is_group(s: &str) -> bool {
    s.is_empty() || (s.len() <= MAX_GROUP_LEN && s.split('.').all(is_dns_label))
}

/// A resource name as kube-apiserver serves them (a CRD's plural is a DNS-1123 label).
fn is_resource(s: &str) -> bool {
    is_dns_label(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::client;

    #[test]
    fn routes_name_a_bounded_group_and_resource() {
        use ResourceKey::*;
        let r = |group, resource| Resource { group, resource };
        let table: &[(&str, ResourceKey)] = &[
            ("/api/v1/namespaces/demo/configmaps", r("", "configmaps")),
            (
                "/api/v1/namespaces/demo/configmaps/name-is-not-a-label",
                r("", "configmaps"),
            ),
            ("/api/v1/namespaces/demo/pods/p/log", r("", "pods")),
            ("/api/v1/namespaces/kube-system", r("", "namespaces")),
            ("/api/v1/namespaces/x/status", r("", "namespaces")),
            ("/api/v1/watch/namespaces/demo/pods", r("", "pods")),
            ("/api/v1/nodes", r("", "nodes")),
            (
                "/apis/apps/v1/namespaces/demo/deployments/d/scale",
                r("apps", "deployments"),
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
                r("coordination.k8s.io", "leases"),
            ),
            (
                "/apis/stable.example.com/v1/crontabs",
                r("stable.example.com", "crontabs"),
            ),
            (
                "/apis/x-1.example.com/v1beta1/things-2",
                r("x-1.example.com", "things-2"),
            ),
            // Names no apiserver can serve: one bucket, never a label of their own.
            ("/api/v1/ConfigMaps", Fixed(OTHER)),
            ("/api/v1/config_maps", Fixed(OTHER)),
            ("/api/v1/-pods", Fixed(OTHER)),
            ("/api/v1/pods-", Fixed(OTHER)),
            ("/api/v1/%22%7D%0A", Fixed(OTHER)),
            ("/apis/Example.COM/v1/things", Fixed(OTHER)),
            ("/apis/a..b/v1/things", Fixed(OTHER)),
            ("/apis/example.com./v1/things", Fixed(OTHER)),
            ("/apis/example.com/v1/é", Fixed(OTHER)),
            // Discovery.
            ("/api", Fixed(DISCOVERY)),
            ("/apis", Fixed(DISCOVERY)),
            ("/apis/apps", Fixed(DISCOVERY)),
            ("/api/v1", Fixed(DISCOVERY)),
            ("/apis/apps/v1", Fixed(DISCOVERY)),
            // Outside the resource API.
            ("/version", Fixed(NON_RESOURCE)),
            ("/openapi/v3/apis/apps/v1", Fixed(NON_RESOURCE)),
            ("/healthz", Fixed(NON_RESOURCE)),
            ("/metrics", Fixed(NON_RESOURCE)),
            ("/", Fixed(NON_RESOURCE)),
            ("/api/v1/%zz", Fixed(NON_RESOURCE)),
        ];
        for (path, want) in table {
            let route = Route::classify(path);
            assert_eq!(resource_key(&route), *want, "{path}");
        }
        let long = format!("/api/v1/{}", "a".repeat(64));
        assert_eq!(resource_key(&Route::classify(&long)), Fixed(OTHER));
        let ok = format!("/api/v1/{}", "a".repeat(63));
        assert!(matches!(
            resource_key(&Route::classify(&ok)),
            Resource { .. }
        ));
    }

    #[test]
    fn scope_is_the_apiservers() {
        let table = [
            ("GET", "/api/v1/namespaces/demo/configmaps", "namespace"),
            ("POST", "/api/v1/namespaces/demo/configmaps", "resource"),
            ("DELETE", "/api/v1/namespaces/demo/configmaps", "namespace"),
            ("GET", "/api/v1/namespaces/demo/configmaps/cm", "resource"),
            ("PUT", "/api/v1/namespaces/demo/pods/p/status", "resource"),
            ("GET", "/api/v1/watch/namespaces/demo/pods", "namespace"),
            ("GET", "/api/v1/namespaces/demo", "resource"),
            ("PUT", "/api/v1/namespaces/demo/status", "resource"),
            ("GET", "/api/v1/namespaces", "cluster"),
            ("POST", "/api/v1/namespaces", "resource"),
            ("GET", "/api/v1/nodes", "cluster"),
            ("GET", "/api/v1/pods", "cluster"),
            ("GET", "/api/v1/nodes/n1", "resource"),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
                "resource",
            ),
            ("GET", "/apis/apps/v1", ""),
            ("POST", "/version", ""),
        ];
        for (method, path, want) in table {
            let got = scope(&Route::classify(path), Method::parse(method));
            assert_eq!(got, want, "{method} {path}");
        }
    }

    #[test]
    fn dry_run_is_the_apiservers() {
        let table = [
            (None, ""),
            (Some("watch=1"), ""),
            (Some("dryRun=All"), "All"),
            (Some("fieldManager=x&dryRun=All&dryRun=All"), "All"),
            (Some("dryRun=all"), "invalid"),
            (Some("dryRun="), "invalid"),
            (Some("dryRun"), "invalid"),
            (Some("dryRun=All&dryRun=Foo"), "invalid"),
            (Some("labelSelector=dryRun"), ""),
        ];
        for (query, want) in table {
            assert_eq!(dry_run(query), want, "{query:?}");
        }
    }

    #[test]
    fn versions_and_subresources_are_names_a_server_can_serve() {
        let v = |p: &str| variant(&Route::classify(p)).map(|(a, b)| (a.to_owned(), b.to_owned()));
        let some = |a: &str, b: &str| Some((a.to_owned(), b.to_owned()));
        assert_eq!(v("/api/v1/pods"), some("v1", ""));
        assert_eq!(
            v("/apis/apps/v1/namespaces/d/deployments/x/scale"),
            some("v1", "scale")
        );
        assert_eq!(v("/apis/x.io/v2beta1/things"), some("v2beta1", ""));
        assert_eq!(v("/apis/x.io/v1alpha3/things"), some("v1alpha3", ""));
        assert_eq!(v("/version"), some("", ""));
        for bad in [
            "/apis/x.io/V1/things",
            "/apis/x.io/v01/things",
            "/apis/x.io/v1gamma1/things",
            "/apis/x.io/v1beta/things",
            "/apis/x.io/v12345/things",
            "/apis/x.io/latest/things",
            "/api/v1/namespaces/d/pods/p/Status",
            "/api/v1/namespaces/d/pods/p/a_b",
        ] {
            assert_eq!(v(bad), None, "{bad}");
        }
    }

    #[test]
    fn fixed_values_cannot_be_a_resource_name() {
        for v in [DISCOVERY, NON_RESOURCE, OTHER] {
            assert!(!is_resource(v) && !is_group(v), "{v}");
        }
    }

    #[test]
    fn client_labels_are_the_family() {
        assert_eq!(
            client::identify(Some("kubelet/v1.35.2 (linux/amd64) kubernetes/abc"))
                .family
                .label(),
            "kubelet"
        );
        let label = |ua| client::identify(ua).family.label();
        assert_eq!(label(Some("my-operator/v0.1.0")), "other");
        assert_eq!(label(None), "other");
    }
}
