//! Protocol upgrades for `pods/<name>/exec|attach|portforward`: answers
//! `101 Switching Protocols` (SPDY/3.1 echoing `X-Stream-Protocol-Version`, or
//! WebSocket with `Sec-WebSocket-Accept` and the first offered subprotocol), then
//! echoes every byte back until the client closes or the stand-in shuts down. There
//! is no kubelet behind it: the stream content is not interpreted.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch as signal;

use super::api::UpgradePlan;
use super::http::Conn;
use super::util;

pub(crate) async fn serve(mut conn: Conn, plan: UpgradePlan, mut shutdown: signal::Receiver<bool>) {
    let mut head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {}\r\n",
        plan.protocol
    );
    if plan.websocket {
        head.push_str(&format!(
            "Sec-WebSocket-Accept: {}\r\n",
            util::websocket_accept(&plan.ws_key)
        ));
        if let Some(p) = &plan.subprotocol {
            head.push_str(&format!("Sec-WebSocket-Protocol: {p}\r\n"));
        }
    } else if let Some(v) = &plan.subprotocol {
        let first = v.split(',').map(str::trim).next().unwrap_or("");
        if !first.is_empty() {
            head.push_str(&format!("X-Stream-Protocol-Version: {first}\r\n"));
        }
    }
    head.push_str("\r\n");
    if conn.stream.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    // Bytes that arrived with the head belong to the upgraded stream.
    let early = std::mem::take(&mut conn.buf);
    if !early.is_empty() && conn.stream.write_all(&early).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 16384];
    loop {
        tokio::select! {
            r = conn.stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if conn.stream.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            },
            r = shutdown.changed() => {
                if r.is_err() || *shutdown.borrow() {
                    break;
                }
            }
        }
    }
    let _ = conn.stream.shutdown().await;
}
