//! A static-body upstream on loopback, cheaper than the stand-in so that it is never the
//! bottleneck: fixed JSON answers, written from memory, HTTP/1.1 keep-alive.
//!
//! - `GET …/pods/NAME`: one pod (about 7 KB).
//! - `GET …/pods`: the pod list (700 pods).
//! - `GET …/pods?watch=1`: the watch stream, one event per chunk, then the end of the body.
//! - `GET …/pods?watch=1&idle=1`: a watch that sends nothing until the client leaves.
//! - `POST …`: reads the body (Content-Length or chunked) and answers 201 with the pod.

use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};

/// The bodies served.
pub struct Bodies {
    pub pod: Vec<u8>,
    pub list: Vec<u8>,
    /// Watch events, each one JSON line with its newline.
    pub events: Vec<Vec<u8>>,
}

/// Start serving on an ephemeral loopback port.
pub async fn start(bodies: Arc<Bodies>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else {
                continue;
            };
            let _ = s.set_nodelay(true);
            let bodies = bodies.clone();
            tokio::spawn(async move {
                let _ = serve(s, bodies).await;
            });
        }
    });
    addr
}

async fn serve(s: TcpStream, bodies: Arc<Bodies>) -> std::io::Result<()> {
    let (r, w) = s.into_split();
    let mut r = BufReader::with_capacity(64 * 1024, r);
    let mut w = BufWriter::with_capacity(256 * 1024, w);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let mut content_length = 0usize;
        let mut chunked = false;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).await? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim();
                if k.eq_ignore_ascii_case("content-length") {
                    content_length = v.parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.eq_ignore_ascii_case("chunked");
                }
            }
        }
        // Read (and drop) the request body.
        if chunked {
            loop {
                let mut l = String::new();
                r.read_line(&mut l).await?;
                let n = usize::from_str_radix(l.trim().split(';').next().unwrap_or("0"), 16)
                    .unwrap_or(0);
                let mut skip = vec![0; n + 2];
                r.read_exact(&mut skip).await?;
                if n == 0 {
                    break;
                }
            }
        } else if content_length > 0 {
            let mut skip = vec![0; content_length];
            r.read_exact(&mut skip).await?;
        }

        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let watch = query
            .split('&')
            .any(|kv| kv == "watch=1" || kv == "watch=true");
        if watch {
            w.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            )
            .await?;
            if query.split('&').any(|kv| kv == "idle=1") {
                w.flush().await?;
                // Hold the watch open until the client goes away.
                let mut buf = [0u8; 1];
                let _ = r.read(&mut buf).await;
                return Ok(());
            }
            for ev in &bodies.events {
                w.write_all(format!("{:x}\r\n", ev.len()).as_bytes())
                    .await?;
                w.write_all(ev).await?;
                w.write_all(b"\r\n").await?;
            }
            w.write_all(b"0\r\n\r\n").await?;
            w.flush().await?;
            continue;
        }
        let (status, body): (&str, &[u8]) = match method.as_str() {
            "POST" => ("201 Created", &bodies.pod),
            _ if path.ends_with("/pods") => ("200 OK", &bodies.list),
            _ => ("200 OK", &bodies.pod),
        };
        w.write_all(
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await?;
        w.write_all(body).await?;
        w.flush().await?;
    }
}
