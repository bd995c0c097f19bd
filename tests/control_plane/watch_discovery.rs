//! WatchList and aggregated discovery through cborgate answer as the apiserver does
//! directly, whichever apiserver it is: 1.36 (CBOR off) streams a WatchList, 1.30
//! refuses `sendInitialEvents=true` with 422 (client-go then lists and watches), and
//! serves aggregated discovery as `apidiscovery.k8s.io/v2` and `v2beta1`.

use crate::http::Client;
use crate::Suite;

pub const CASES: [crate::Case; 1] = [(
    "watchlist_and_discovery_answer_as_directly",
    watchlist_and_discovery,
)];

/// The status and the media type (no parameters) of a GET.
fn answer(c: &Client, path: &str, accept: &str) -> (u16, String) {
    let r = c.request("GET", path, &[("Accept", accept)], None);
    let media = r.content_type().split(';').next().unwrap_or("").to_string();
    (r.status, media)
}

fn watchlist_and_discovery(s: &mut Suite) {
    // A WatchList as client-go asks for it (ending after 1 s), then its fallback: the
    // plain list and watch.
    let watch_list = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true\
                      &resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let list = "/api/v1/namespaces/default/configmaps";
    let watch = "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1";
    for path in [watch_list, list, watch] {
        let d = answer(&s.direct, path, "application/json");
        let t = answer(&s.through, path, "application/json");
        assert_eq!(t, d, "GET {path} as JSON: through cborgate, directly");
        // A CBOR client gets the same status, in CBOR (a 422 Status included); a
        // watch stream as a CBOR sequence (docs/wire.md §1).
        let c = answer(&s.through, path, "application/cbor");
        assert_eq!(c.0, d.0, "GET {path} as CBOR through cborgate");
        let media = if path.contains("watch=1") && c.0 == 200 {
            "application/cbor-seq"
        } else {
            "application/cbor"
        };
        assert_eq!(c.1, media, "GET {path} as CBOR through cborgate");
    }
    let refused = answer(&s.direct, watch_list, "application/json").0;
    if s.assets.legacy {
        assert_eq!(refused, 422, "a 1.30 apiserver refuses a WatchList");
    } else {
        assert_eq!(refused, 200, "1.36 serves a WatchList");
    }

    // Aggregated discovery in every version the apiserver serves: the same answer
    // directly and through cborgate, JSON asked for.
    for version in ["v2", "v2beta1"] {
        for path in ["/api", "/apis"] {
            let accept = format!(
                "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList,application/json"
            );
            let d = s.direct.request("GET", path, &[("Accept", &accept)], None);
            let t = s.through.request("GET", path, &[("Accept", &accept)], None);
            assert_eq!(t.status, d.status, "GET {path} as {version}");
            assert_eq!(
                t.content_type(),
                d.content_type(),
                "GET {path} as {version}"
            );
            if s.assets.legacy || version == "v2" {
                assert!(
                    d.content_type().contains(&format!("v={version}")),
                    "GET {path} as {version}: {}",
                    d.content_type()
                );
            }
        }
    }
}
