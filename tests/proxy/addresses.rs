//! Listen addresses of both families (docs/surface.md, `server.listen`): the proxy and
//! the admin listener on `[::1]:P`, `[127.0.0.1]:P` as Go takes it, and `:PORT` taking
//! connections of both families on one listener, as Go's `net.Listen` binds `[::]`.

use crate::support::harness::{loopback_standin, wait_exit, wait_for};
use crate::support::http::once;
use cborgate_standin::StandIn;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PATH: &str = "/api/v1/namespaces/default/configmaps";

/// A port free on `ip` (the kernel's pick, then let go); `None` where `ip` cannot be
/// bound at all (a host without an IPv6 loopback).
fn free_on(ip: &str) -> Option<u16> {
    let l = TcpListener::bind(format!("{ip}:0")).ok()?;
    Some(l.local_addr().ok()?.port())
}

/// The stand-in on 127.0.0.1 and `cborgate serve --listen LISTEN --admin ADMIN` in front.
fn serve(listen: &str, admin: &str) -> (tokio::runtime::Runtime, StandIn, Child) {
    let (rt, standin) = loopback_standin();
    let child = Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args([
            "serve", "--listen", listen, "--admin", admin, "--mode", "legacy",
        ])
        .arg(format!("--upstream=http://{}", standin.addr()))
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("start cborgate");
    (rt, standin, child)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = wait_exit(&mut child, Duration::from_secs(10));
}

#[test]
fn the_proxy_and_the_admin_listener_serve_on_ipv6_loopback() {
    let (Some(p), Some(a)) = (free_on("[::1]"), free_on("[::1]")) else {
        eprintln!("skipped: this host has no IPv6 loopback (::1)");
        return;
    };
    let (proxy, admin): (SocketAddr, SocketAddr) = (
        format!("[::1]:{p}").parse().unwrap(),
        format!("[::1]:{a}").parse().unwrap(),
    );
    let (_rt, _standin, mut child) = serve(&proxy.to_string(), &admin.to_string());
    wait_for(proxy, &mut child);
    wait_for(admin, &mut child);
    let r = once(proxy, "GET", PATH, &[("Accept", "application/json")], None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kind"], "ConfigMapList");
    let m = once(admin, "GET", "/metrics", &[], None);
    assert_eq!(m.status, 200);
    assert!(m.text().contains("cborgate_requests_total"), "{}", m.text());
    stop(child);
}

/// `--listen [127.0.0.1]:P --admin [::1]:Q` (the admin on `[127.0.0.1]` where the host
/// has no IPv6 loopback).
#[test]
fn an_ipv4_address_in_brackets_is_taken_as_go_takes_it() {
    let p = free_on("127.0.0.1").unwrap();
    let admin: SocketAddr = match free_on("[::1]") {
        Some(a) => format!("[::1]:{a}"),
        None => format!("127.0.0.1:{}", free_on("127.0.0.1").unwrap()),
    }
    .parse()
    .unwrap();
    let bracketed = format!("[{}]:{}", admin.ip(), admin.port());
    let (_rt, _standin, mut child) = serve(&format!("[127.0.0.1]:{p}"), &bracketed);
    let proxy: SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
    wait_for(proxy, &mut child);
    wait_for(admin, &mut child);
    assert_eq!(once(proxy, "GET", PATH, &[], None).status, 200);
    assert_eq!(once(admin, "GET", "/metrics", &[], None).status, 200);
    stop(child);
}

#[test]
fn a_port_alone_takes_both_families_on_one_listener() {
    let Some(p) = free_on("[::]") else {
        eprintln!("skipped: this host has no IPv6");
        return;
    };
    let a = free_on("127.0.0.1").unwrap();
    let (_rt, _standin, mut child) = serve(&format!(":{p}"), &format!("127.0.0.1:{a}"));
    let v4: SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
    let v6: SocketAddr = format!("[::1]:{p}").parse().unwrap();
    wait_for(v4, &mut child);
    assert_eq!(once(v4, "GET", PATH, &[], None).status, 200);
    if free_on("[::1]").is_some() {
        assert_eq!(once(v6, "GET", PATH, &[], None).status, 200);
    } else {
        eprintln!("skipped the ::1 half: this host has no IPv6 loopback");
    }
    stop(child);
}

#[test]
fn an_ipv6_address_without_brackets_is_refused_with_the_form_to_write() {
    let out = Command::new(env!("CARGO_BIN_EXE_cborgate"))
        .args([
            "serve",
            "--upstream=http://127.0.0.1:1",
            "--admin",
            "fd00::5:9464",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("server.admin (--admin): \"fd00::5:9464\" is an IPv6 address without brackets: write [fd00::5]:9464"),
        "{err}"
    );
}
