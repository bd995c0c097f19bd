//! Which client sent a request, from its `User-Agent`: a bounded family (the Kubernetes
//! components and kubectl by name, everything else `other`) and the Kubernetes version
//! it was built at, when it says one.
//!
//! client-go's default `User-Agent` is `<program>/<version> (<os>/<arch>)
//! kubernetes/<commit>` (`rest.DefaultKubernetesUserAgent`), and kube-controller-manager
//! appends `/<controller>` to it. A program built on client-go without its version set
//! reports `v0.0.0-master+$Format:%H$`: no version. Pure and total: any bytes in, a
//! family out, never a label an attacker can choose.

/// The client family: a label with a fixed set of values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientFamily {
    Kubectl,
    Kubelet,
    KubeControllerManager,
    KubeScheduler,
    KubeProxy,
    KubeApiserver,
    CloudControllerManager,
    Other,
}

impl ClientFamily {
    /// Every family, in label order.
    pub const ALL: [ClientFamily; 8] = [
        ClientFamily::Kubectl,
        ClientFamily::Kubelet,
        ClientFamily::KubeControllerManager,
        ClientFamily::KubeScheduler,
        ClientFamily::KubeProxy,
        ClientFamily::KubeApiserver,
        ClientFamily::CloudControllerManager,
        ClientFamily::Other,
    ];

    /// The `client` label: the program's name as its `User-Agent` gives it.
    pub const fn label(self) -> &'static str {
        match self {
            ClientFamily::Kubectl => "kubectl",
            ClientFamily::Kubelet => "kubelet",
            ClientFamily::KubeControllerManager => "kube-controller-manager",
            ClientFamily::KubeScheduler => "kube-scheduler",
            ClientFamily::KubeProxy => "kube-proxy",
            ClientFamily::KubeApiserver => "kube-apiserver",
            ClientFamily::CloudControllerManager => "cloud-controller-manager",
            ClientFamily::Other => "other",
        }
    }
}

/// What a `User-Agent` says of its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAgent {
    pub family: ClientFamily,
    /// The Kubernetes (major, minor) it was built at: `v1.35.2` is (1, 35). `None` for
    /// `v0.0.0-master…`, a missing or unreadable version, and every `other` client.
    pub version: Option<(u16, u16)>,
}

impl ClientAgent {
    /// A client that sent no `User-Agent`, or one of no known family.
    pub const OTHER: ClientAgent = ClientAgent {
        family: ClientFamily::Other,
        version: None,
    };
}

/// The family and version a `User-Agent` names.
pub fn identify(user_agent: Option<&str>) -> ClientAgent {
    let Some(ua) = user_agent else {
        return ClientAgent::OTHER;
    };
    let (program, rest) = ua.split_once('/').unwrap_or((ua, ""));
    let Some(family) = ClientFamily::ALL
        .into_iter()
        .find(|f| *f != ClientFamily::Other && f.label() == program)
    else {
        return ClientAgent::OTHER;
    };
    let version_text = rest.split([' ', '/']).next().unwrap_or("");
    ClientAgent {
        family,
        version: kubernetes_version(version_text),
    }
}

/// `v1.35.2` (or `v1.35.0-alpha.1+abc`) as (1, 35); `v0.0.0-master…` and anything
/// else unreadable as `None`.
fn kubernetes_version(text: &str) -> Option<(u16, u16)> {
    let mut parts = text.strip_prefix('v')?.splitn(3, '.');
    let major: u16 = parts.next()?.parse().ok()?;
    let minor_text = parts.next()?;
    let digits = minor_text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(minor_text.len());
    let minor: u16 = minor_text[..digits].parse().ok()?;
    (major > 0).then_some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_agents_name_a_bounded_family_and_a_version() {
        use ClientFamily::*;
        type Row<'a> = (Option<&'a str>, ClientFamily, Option<(u16, u16)>);
        let table: &[Row] = &[
            (
                Some("kubectl/v1.36.3 (linux/amd64) kubernetes/2b3c4d5"),
                Kubectl,
                Some((1, 36)),
            ),
            (
                Some("kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/9f8e7d6/system:serviceaccount:kube-system:generic-garbage-collector"),
                KubeControllerManager,
                Some((1, 35)),
            ),
            (
                Some("kubelet/v1.32.0 (linux/arm64) kubernetes/70d3cc9"),
                Kubelet,
                Some((1, 32)),
            ),
            (
                Some("kube-scheduler/v1.36.0-alpha.1+abc (linux/amd64) kubernetes/abc"),
                KubeScheduler,
                Some((1, 36)),
            ),
            (Some("kube-proxy/v1.34.1 (linux/amd64) kubernetes/x"), KubeProxy, Some((1, 34))),
            (
                Some("kube-apiserver/v1.36.2 (linux/amd64) kubernetes/x"),
                KubeApiserver,
                Some((1, 36)),
            ),
            (
                Some("cloud-controller-manager/v1.33.4 (linux/amd64) kubernetes/x"),
                CloudControllerManager,
                Some((1, 33)),
            ),
            // A program built on client-go without its version set.
            (
                Some("kubectl/v0.0.0-master+$Format:%H$ (linux/amd64) kubernetes/$Format"),
                Kubectl,
                None,
            ),
            (Some("my-operator/v0.0.0-master+$Format:%H$ (linux/amd64) kubernetes/$Format"), Other, None),
            (Some("Go-http-client/2.0"), Other, None),
            (Some("curl/8.5.0"), Other, None),
            (Some("kubectl"), Kubectl, None),
            (Some("kubectl/"), Kubectl, None),
            (Some("kubectl/v1"), Kubectl, None),
            (Some("kubectl/vx.y"), Kubectl, None),
            (Some("kubectl/v1.99999999999"), Kubectl, None),
            (Some("KUBECTL/v1.35.0"), Other, None),
            (Some(""), Other, None),
            (None, Other, None),
        ];
        for (ua, family, version) in table {
            let a = identify(*ua);
            assert_eq!((a.family, a.version), (*family, *version), "{ua:?}");
        }
    }

    #[test]
    fn labels_are_distinct() {
        let labels: std::collections::BTreeSet<_> =
            ClientFamily::ALL.iter().map(|f| f.label()).collect();
        assert_eq!(labels.len(), ClientFamily::ALL.len());
    }
}
