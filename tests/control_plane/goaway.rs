//! Token clients beside an anonymous client, and beside a client whose token the
//! apiserver rejects, through cborgate over shared HTTP/2 upstream connections
//! (docs/wire.md §5a). kube-apiserver ends an HTTP/2 connection after each anonymous
//! request and each 401; before cborgate kept anonymous requests apart and sent refused
//! requests again, 21–26 of 120 token POSTs failed with 503 beside one anonymous
//! client.

use crate::http::{Client, Cred, TlsConn};
use crate::Suite;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub const CASES: [crate::Case; 2] = [
    (
        "goaway_anonymous_client_beside_token_posts",
        anonymous_client_beside_token_posts,
    ),
    (
        "goaway_rejected_token_beside_token_posts",
        rejected_token_beside_token_posts,
    ),
];

/// The label on every ConfigMap these cases make, to delete them afterwards.
const LABEL: &str = "cborgate-test=goaway";

/// What the clients got: the token POSTs' statuses; the other client's requests, its
/// statuses, and how often its keep-alive connection to cborgate was closed under it.
struct Outcome {
    posts: Vec<u16>,
    other_statuses: Vec<u16>,
    other_closed: usize,
}

impl Outcome {
    fn failed_posts(&self) -> usize {
        self.posts.iter().filter(|&&s| s != 201).count()
    }
}

/// 120 ConfigMap POSTs with the admin token from 8 keep-alive connections to cborgate,
/// while `other` loops `GET /version` on one keep-alive connection.
fn run(suite: &Suite, tag: &str, other: Cred) -> Outcome {
    let token = suite
        .gate
        .client_as(&suite.pki, &Cred::Token(suite.pki.admin_token.clone()));
    let other = suite.gate.client_as(&suite.pki, &other);
    let stop = Arc::new(AtomicBool::new(false));
    let looping = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut statuses, mut closed) = (Vec::new(), 0);
            let mut c = other.conn();
            while !stop.load(Ordering::SeqCst) {
                other.send(
                    &mut c,
                    "GET",
                    "/version",
                    &[("Accept", "application/json")],
                    None,
                );
                match c.try_response("GET") {
                    Ok(r) if !r.closes() => statuses.push(r.status),
                    Ok(r) => {
                        statuses.push(r.status);
                        closed += 1;
                        c = other.conn();
                    }
                    Err(_) => {
                        closed += 1;
                        c = other.conn();
                    }
                }
            }
            (statuses, closed)
        })
    };
    let posters: Vec<_> = (0..8)
        .map(|k| {
            let (token, tag) = (token.clone(), tag.to_string());
            std::thread::spawn(move || {
                let mut c: TlsConn = token.conn();
                (0..15)
                    .map(|i| post(&token, &mut c, &format!("{tag}-{k}-{i}")))
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let posts = posters
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    stop.store(true, Ordering::SeqCst);
    let (other_statuses, other_closed) = looping.join().unwrap();
    let r = suite.direct.request(
        "DELETE",
        &format!("/api/v1/namespaces/default/configmaps?labelSelector={LABEL}"),
        &[("Accept", "application/json")],
        None,
    );
    assert_eq!(r.status, 200, "deleting the ConfigMaps: {}", r.text());
    Outcome {
        posts,
        other_statuses,
        other_closed,
    }
}

/// One ConfigMap POST on `c` (a new connection after one that closed); its status, 0
/// when the connection failed.
fn post(client: &Client, c: &mut TlsConn, name: &str) -> u16 {
    let (key, value) = LABEL.split_once('=').unwrap();
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"{key}":"{value}"}}}},"data":{{"k":"v"}}}}"#
    );
    client.send(
        c,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json"),
        ],
        Some(body.as_bytes()),
    );
    match c.try_response("POST") {
        Ok(r) => {
            if r.closes() {
                *c = client.conn();
            }
            r.status
        }
        Err(_) => {
            *c = client.conn();
            0
        }
    }
}

fn refused_retries(suite: &Suite) -> f64 {
    suite
        .gate
        .metric("cborgate_upstream_retries_total", &[("reason", "refused")])
}

/// An anonymous client (probes, `kubeadm join` discovery) beside token clients: its
/// requests go upstream over HTTP/1.1 on connections of their own, so none of the token
/// POSTs fails, none needs sending again, and its own keep-alive connection stays open.
fn anonymous_client_beside_token_posts(suite: &mut Suite) {
    let retries = refused_retries(suite);
    let out = run(suite, "goaway-anon", Cred::Anonymous);
    println!(
        "  120 token POSTs beside {} anonymous GETs: {} failed; the anonymous connection closed {} times",
        out.other_statuses.len(),
        out.failed_posts(),
        out.other_closed
    );
    assert_eq!(out.posts.len(), 120);
    assert_eq!(out.failed_posts(), 0, "POST statuses: {:?}", out.posts);
    assert!(!out.other_statuses.is_empty());
    assert!(
        out.other_statuses.iter().all(|&s| s == 200),
        "anonymous GET /version: {:?}",
        out.other_statuses
    );
    assert_eq!(out.other_closed, 0, "the anonymous connection was closed");
    assert_eq!(
        refused_retries(suite),
        retries,
        "requests were refused: anonymous requests shared connections with tokens"
    );
}

/// A client whose token the apiserver rejects (401, then GOAWAY) shares the token
/// clients' HTTP/2 connections; what its GOAWAYs refuse is sent again, POSTs included.
fn rejected_token_beside_token_posts(suite: &mut Suite) {
    let retries = refused_retries(suite);
    let out = run(suite, "goaway-401", Cred::Token("wrong".into()));
    println!(
        "  120 token POSTs beside {} rejected GETs: {} failed, {} refused and sent again",
        out.other_statuses.len(),
        out.failed_posts(),
        refused_retries(suite) - retries
    );
    assert_eq!(out.failed_posts(), 0, "POST statuses: {:?}", out.posts);
    assert!(
        out.other_statuses.iter().all(|&s| s == 401),
        "GET /version with a rejected token: {:?}",
        out.other_statuses
    );
    assert_eq!(out.other_closed, 0);
}
