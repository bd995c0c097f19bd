//! Listen addresses (`server.listen`, `server.admin`, the demo's flags) as Go programs
//! take them (docs/surface.md).

/// A listen address as Go programs take it: `IP:PORT`, `[IP]:PORT` (either family in
/// brackets, as Go's `net.SplitHostPort` takes it), `HOST:PORT` or `[HOST]:PORT` (the
/// name's first IPv4 address, else its first address, as `net.Listen` picks it) or
/// `:PORT` (every interface of both families: `[::]:PORT`, which the listener binds with
/// IPV6_V6ONLY off, as Go does; `0.0.0.0:PORT` where the host has no IPv6, see
/// `process::server`). An IPv6 address with a port and no brackets (`fd00::5:9464`) is
/// refused with the bracketed form to write instead; the error says what to write.
/// Port 0 is refused too: the kernel would pick a port no client, probe or scrape
/// could be pointed at, and the start-up check, which connects to the configured
/// port, could never see the listener.
pub fn listen_addr(addr: &str) -> Result<std::net::SocketAddr, String> {
    let a = any_port(addr)?;
    if a.port() == 0 {
        return Err(format!(
            "{addr:?}: port 0 would be a port the kernel picks, which no client or probe \
             could be pointed at: give the port to listen on"
        ));
    }
    Ok(a)
}

fn any_port(addr: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};
    let forms = "IP:PORT, [IP]:PORT, HOST:PORT or :PORT";
    let bad = || format!("{addr:?} is not a listen address ({forms})");
    if let Some(port) = addr.strip_prefix(':') {
        let port = port.parse::<u16>().map_err(|_| bad())?;
        return Ok(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)));
    }
    let (host, port) = match addr.strip_prefix('[') {
        Some(rest) => rest.split_once("]:").ok_or_else(bad)?,
        None => {
            let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
            if host.contains(':') {
                // `fd00::5:9464` is itself an IPv6 address: which colon starts the port
                // cannot be known, so Go refuses it too ("too many colons").
                return Err(format!(
                    "{addr:?} is an IPv6 address without brackets: write [{host}]:{port} \
                     (an IPv6 address with a port is written in brackets)"
                ));
            }
            (host, port)
        }
    };
    let port = port.parse::<u16>().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let all: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{addr:?}: the name {host} does not resolve: {e}"))?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(bad)
}
