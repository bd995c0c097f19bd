//! rustls' two crypto providers, ring (cborgate's, and pingora's default) and aws-lc-rs,
//! on what a new client connection costs with an RSA-2048 serving key as kubeadm makes
//! it: the server's RSA-PSS signature alone, and whole TLS 1.3 handshakes in memory
//! (client and server in this process, no session resumption), rounds taking turns.
//! CPU from `/proc/self/stat` (10 ms ticks) next to wall time.
//!
//! ```sh
//! cargo run --release --manifest-path bench/providers/Cargo.toml -- DIR [N]
//! ```
//! where DIR has `ca.pem`, `server.pem` (for `localhost`) and `server.key` (RSA-2048).
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use std::time::Instant;

fn handshake(client: &Arc<rustls::ClientConfig>, server: &Arc<rustls::ServerConfig>) {
    let mut c =
        rustls::ClientConnection::new(client.clone(), "localhost".try_into().unwrap()).unwrap();
    let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        while c.wants_write() {
            buf.clear();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut &buf[..]).unwrap();
            s.process_new_packets().unwrap();
            moved = true;
        }
        while s.wants_write() {
            buf.clear();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut &buf[..]).unwrap();
            c.process_new_packets().unwrap();
            moved = true;
        }
        if !c.is_handshaking() && !s.is_handshaking() {
            break;
        }
        assert!(moved);
    }
}

fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("DIR with ca.pem server.pem server.key (RSA)");
    let n: usize = std::env::args().nth(2).map_or(2000, |v| v.parse().unwrap());
    let ca = CertificateDer::from_pem_file(format!("{dir}/ca.pem")).unwrap();
    let chain: Vec<CertificateDer> = CertificateDer::pem_file_iter(format!("{dir}/server.pem"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(format!("{dir}/server.key")).unwrap();
    let providers: Vec<(&str, CryptoProvider)> = vec![
        ("ring", rustls::crypto::ring::default_provider()),
        ("aws-lc-rs", rustls::crypto::aws_lc_rs::default_provider()),
    ];
    for round in 0..5 {
        for (name, p) in &providers {
            let signing = p.key_provider.load_private_key(key.clone_key()).unwrap();
            let signer = signing
                .choose_scheme(&[rustls::SignatureScheme::RSA_PSS_SHA256])
                .unwrap();
            let msg = [7u8; 130];
            let (t, c0) = (Instant::now(), cpu());
            for _ in 0..n {
                std::hint::black_box(signer.sign(&msg).unwrap());
            }
            let (wall, c1) = (t.elapsed().as_secs_f64(), cpu());
            println!(
                "round {round} {name:10} {:.0} µs wall, {:.0} µs CPU per RSA-2048 PSS signature",
                wall * 1e6 / n as f64,
                (c1 - c0) * 1e6 / n as f64
            );
        }
    }
    for round in 0..3 {
        for (name, p) in &providers {
            let p = Arc::new(p.clone());
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca.clone()).unwrap();
            let client = Arc::new(
                rustls::ClientConfig::builder_with_provider(p.clone())
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            );
            let mut server = rustls::ServerConfig::builder_with_provider(p.clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(chain.clone(), key.clone_key())
                .unwrap();
            server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
            server.send_tls13_tickets = 0;
            let server = Arc::new(server);
            for _ in 0..50 {
                handshake(&client, &server);
            }
            let (t, c0) = (Instant::now(), cpu());
            for _ in 0..n {
                handshake(&client, &server);
            }
            let (wall, c1) = (t.elapsed().as_secs_f64(), cpu());
            println!("round {round} {name:10} {:.0} µs wall, {:.0} µs CPU per full TLS 1.3 handshake (client and server), {n} handshakes", wall * 1e6 / n as f64, (c1 - c0) * 1e6 / n as f64);
        }
    }
}
