//! Image URLs fetched for `serve --fetch-image-urls`: http and https from public addresses only, connected to the address checked (so a second lookup cannot swap it), each redirect re-resolved and re-checked, size-capped while streaming, under a timeout.
use axum::body::Body;
use axum::http::{header, Request, StatusCode, Uri};
use futures_util::StreamExt;
use hyper_util::rt::TokioIo;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// Most redirects one image URL may take.
pub const MAX_REDIRECTS: usize = 3;

/// Fetches image URLs within a byte limit and a time limit.
#[derive(Clone)]
pub struct Fetcher {
    max_bytes: usize,
    timeout: Duration,
    tls: tokio_rustls::TlsConnector,
}

/// What one request got: the body, or where it redirects.
enum Got {
    Body(Vec<u8>),
    Redirect(String),
}

/// Aborts the connection's driver when the fetch ends, however it ends.
struct Abort(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Fetcher {
    /// A fetcher taking at most `max_bytes` per image and `timeout` per URL (its redirects included), trusting the Mozilla roots for https.
    pub fn new(max_bytes: usize, timeout: Duration) -> Result<Fetcher, String> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("setting up TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Fetcher { max_bytes, timeout, tls: tokio_rustls::TlsConnector::from(Arc::new(config)) })
    }

    /// The bytes at `url`, or why not, as a client reads it.
    pub async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let secs = self.timeout.as_secs_f64();
        tokio::time::timeout(self.timeout, self.follow(url)).await.unwrap_or_else(|_| Err(format!("fetching the image URL took over {secs} s (--image-fetch-timeout)")))
    }

    async fn follow(&self, url: &str) -> Result<Vec<u8>, String> {
        let mut target = Target::parse(url)?;
        let mut hops = 0;
        loop {
            let addr = target.resolve().await?;
            match self.get(&target, addr).await? {
                Got::Body(b) => return Ok(b),
                Got::Redirect(_) if hops == MAX_REDIRECTS => return Err(format!("the image URL redirected more than {MAX_REDIRECTS} times")),
                Got::Redirect(to) => {
                    hops += 1;
                    target = target.join(&to)?;
                }
            }
        }
    }

    async fn get(&self, t: &Target, addr: SocketAddr) -> Result<Got, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| format!("connecting to {} ({addr}): {e}", t.host))?;
        if !t.https {
            return self.exchange(t, tcp).await;
        }
        let name = rustls::pki_types::ServerName::try_from(t.host.clone()).map_err(|_| format!("`{}` is not a host name TLS can check", t.host))?;
        let tls = self.tls.connect(name, tcp).await.map_err(|e| format!("TLS with {} failed: {e}", t.host))?;
        self.exchange(t, tls).await
    }

    async fn exchange<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(&self, t: &Target, io: S) -> Result<Got, String> {
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| format!("talking to {}: {e}", t.host))?;
        let _driver = Abort(tokio::spawn(conn));
        let req = Request::get(t.path.as_str())
            .header(header::HOST, t.host_header())
            .header(header::USER_AGENT, concat!("lockstep/", env!("CARGO_PKG_VERSION")))
            .header(header::ACCEPT, "image/*")
            .body(Body::empty())
            .map_err(|e| format!("the image URL cannot be requested: {e}"))?;
        let resp = send.send_request(req).await.map_err(|e| format!("requesting {}: {e}", t.url()))?;
        let status = resp.status();
        if matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER | StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT) {
            let to = resp.headers().get(header::LOCATION).and_then(|v| v.to_str().ok()).ok_or_else(|| format!("{} answered {status} without a Location", t.url()))?;
            return Ok(Got::Redirect(to.to_string()));
        }
        if !status.is_success() {
            return Err(format!("{} answered {status}", t.url()));
        }
        let too_big = |n: String| format!("the image at {} is {n} bytes; this server takes at most {} bytes per image (--max-image-bytes)", t.url(), self.max_bytes);
        let declared = resp.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<u64>().ok());
        if let Some(n) = declared.filter(|&n| n > self.max_bytes as u64) {
            return Err(too_big(n.to_string()));
        }
        let mut body = Body::new(resp.into_body()).into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("reading {}: {e}", t.url()))?;
            if bytes.len() + chunk.len() > self.max_bytes {
                return Err(too_big(format!("over {}", self.max_bytes)));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Got::Body(bytes))
    }
}

/// A URL to fetch: scheme, host (an IPv6 literal without brackets), port, and the path with its query.
#[derive(Clone, Debug, PartialEq)]
struct Target {
    https: bool,
    host: String,
    port: u16,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let url = url.split('#').next().unwrap_or_default();
        let shown = shorten(url);
        let uri: Uri = url.parse().map_err(|e| format!("`{shown}` is not a URL: {e}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(format!("`{shown}`: an image URL must be http://, https:// or data:")),
        };
        let auth = uri.authority().ok_or_else(|| format!("`{shown}` has no host"))?;
        if auth.as_str().contains('@') {
            return Err(format!("`{shown}`: an image URL must not carry a user name or password"));
        }
        let host = auth.host().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if host.is_empty() {
            return Err(format!("`{shown}` has no host"));
        }
        let port = auth.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(Target { https, host, port, path: if path.is_empty() { "/".into() } else { path.to_string() } })
    }

    fn origin(&self) -> String {
        format!("{}://{}", if self.https { "https" } else { "http" }, self.host_header())
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        if self.port == if self.https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    fn url(&self) -> String {
        shorten(&format!("{}{}", self.origin(), self.path))
    }

    /// Where a redirect's `Location` points from here: absolute, scheme-relative, absolute-path or relative.
    fn join(&self, to: &str) -> Result<Target, String> {
        let url = if to.starts_with("http://") || to.starts_with("https://") {
            to.to_string()
        } else if to.starts_with("//") {
            format!("{}:{to}", if self.https { "https" } else { "http" })
        } else if to.starts_with('/') {
            format!("{}{to}", self.origin())
        } else {
            let dir = self.path.split('?').next().unwrap_or("/").rsplit_once('/').map_or("", |(d, _)| d);
            format!("{}{dir}/{to}", self.origin())
        };
        Target::parse(&url).map_err(|e| format!("a redirect: {e}"))
    }

    /// The first address of the host that may be fetched; refused naming the range when none may.
    async fn resolve(&self) -> Result<SocketAddr, String> {
        let addrs = tokio::net::lookup_host((self.host.as_str(), self.port)).await.map_err(|e| format!("resolving `{}`: {e}", self.host))?;
        let mut refused = None;
        for a in addrs {
            if crate::testing::fetch_allowed(a) {
                return Ok(a);
            }
            match refused_range(a.ip()) {
                None => return Ok(SocketAddr::new(a.ip().to_canonical(), a.port())),
                Some(why) => {
                    refused.get_or_insert((a.ip(), why));
                }
            }
        }
        Err(match refused {
            Some((ip, why)) => format!("{} is at {ip}, in {why}; this server fetches images only from public addresses", self.url()),
            None => format!("`{}` resolves to no address", self.host),
        })
    }
}

/// A URL cut to a length fit for an error message.
fn shorten(url: &str) -> String {
    match url.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &url[..i]),
        None => url.to_string(),
    }
}

/// IPv4 ranges that are not public, first match named: (base, prefix length, name).
const V4_RANGES: &[(u32, u32, &str)] = &[
    (0x0000_0000, 8, "0.0.0.0/8 (this network, unspecified)"),
    (0x0a00_0000, 8, "10.0.0.0/8 (private)"),
    (0x6440_0000, 10, "100.64.0.0/10 (shared, carrier-grade NAT)"),
    (0x7f00_0000, 8, "127.0.0.0/8 (loopback)"),
    (0xa9fe_0000, 16, "169.254.0.0/16 (link-local)"),
    (0xac10_0000, 12, "172.16.0.0/12 (private)"),
    (0xc000_0000, 24, "192.0.0.0/24 (protocol assignments)"),
    (0xc000_0200, 24, "192.0.2.0/24 (documentation)"),
    (0xc058_6300, 24, "192.88.99.0/24 (6to4 relay)"),
    (0xc0a8_0000, 16, "192.168.0.0/16 (private)"),
    (0xc612_0000, 15, "198.18.0.0/15 (benchmarking)"),
    (0xc633_6400, 24, "198.51.100.0/24 (documentation)"),
    (0xcb00_7100, 24, "203.0.113.0/24 (documentation)"),
    (0xe000_0000, 4, "224.0.0.0/4 (multicast)"),
    (0xffff_ffff, 32, "255.255.255.255 (broadcast)"),
    (0xf000_0000, 4, "240.0.0.0/4 (reserved)"),
];

/// IPv6 ranges that are not public, first match named; past them only 2000::/3 (global unicast) is public.
const V6_RANGES: &[(u128, u32, &str)] = &[
    (0, 128, ":: (unspecified)"),
    (1, 128, "::1 (loopback)"),
    (0, 96, "::/96 (IPv4-compatible)"),
    (0x0064_ff9b_0001 << 80, 48, "64:ff9b:1::/48 (local NAT64)"),
    (0x0100 << 112, 64, "100::/64 (discard)"),
    (0x2001 << 112, 23, "2001::/23 (protocol assignments: Teredo, benchmarking)"),
    (0x2001_0db8 << 96, 32, "2001:db8::/32 (documentation)"),
    (0x3fff << 112, 20, "3fff::/20 (documentation)"),
    (0xfc00 << 112, 7, "fc00::/7 (unique local)"),
    (0xfe80 << 112, 10, "fe80::/10 (link-local)"),
    (0xfec0 << 112, 10, "fec0::/10 (site-local)"),
    (0xff00 << 112, 8, "ff00::/8 (multicast)"),
];

/// The range that makes `ip` not public, or `None` for a public address; IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by it.
pub fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

/// Whether `ip` is public: in none of the refused ranges, nor an IPv6 form carrying a refused IPv4 address.
pub fn public_address(ip: IpAddr) -> bool {
    refused_range(ip).is_none()
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let n = u32::from(ip);
    V4_RANGES.iter().find(|&&(base, len, _)| n.checked_shr(32 - len) == base.checked_shr(32 - len)).map(|r| r.2)
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    let n = u128::from(ip);
    let s = ip.segments();
    let carried = if let Some(v4) = ip.to_ipv4_mapped() {
        Some((v4, "::ffff:0:0/96 (IPv4-mapped) of a non-public IPv4 address"))
    } else if n >> 32 == 0x0064_ff9b << 64 {
        Some((Ipv4Addr::from(n as u32), "64:ff9b::/96 (NAT64) of a non-public IPv4 address"))
    } else if s[0] == 0x2002 {
        Some((Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])), "2002::/16 (6to4) of a non-public IPv4 address"))
    } else {
        None
    };
    if let Some((v4, name)) = carried {
        return v4_range(v4).map(|_| name);
    }
    if let Some(r) = V6_RANGES.iter().find(|&&(base, len, _)| n.checked_shr(128 - len) == base.checked_shr(128 - len)) {
        return Some(r.2);
    }
    (s[0] & 0xe000 != 0x2000).then_some("outside 2000::/3 (not global unicast)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> bool {
        let ip: IpAddr = s.parse().unwrap();
        assert_eq!(public_address(ip), refused_range(ip).is_none(), "{s}");
        !public_address(ip)
    }

    #[test]
    fn every_non_public_v4_range_is_refused_at_both_ends_and_its_neighbours_pass() {
        for &(base, len, name) in V4_RANGES {
            let last = base | u32::MAX.checked_shr(len).unwrap_or(0);
            for ip in [base, last, base + (last - base) / 2] {
                assert!(!public_address(IpAddr::V4(ip.into())), "{} in {name}", Ipv4Addr::from(ip));
            }
        }
        for ip in ["9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "192.0.1.0", "192.0.3.0", "192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "198.51.99.255", "203.0.112.255", "203.0.114.0", "223.255.255.255", "8.8.8.8", "1.1.1.1"] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn every_non_public_v6_range_and_every_v4_carrying_form_is_refused_and_public_ones_pass() {
        for &(base, len, name) in V6_RANGES {
            let last = base | u128::MAX.checked_shr(len).unwrap_or(0);
            for ip in [base, last, base + (last - base) / 3] {
                assert!(!public_address(IpAddr::V6(ip.into())), "{} in {name}", Ipv6Addr::from(ip));
            }
        }
        for ip in ["::ffff:10.1.2.3", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:100.64.0.1", "::ffff:192.168.1.1", "::ffff:0.0.0.0", "::ffff:255.255.255.255", "::ffff:224.0.0.1", "64:ff9b::a00:1", "64:ff9b::7f00:1", "2002:a00:1::", "2002:c0a8:101::1", "4000::1", "1234::1", "fd12:3456::1"] {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in ["2606:4700::1111", "2001:4860:4860::8888", "2a00:1450::1", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2001:200::1"] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn a_redirect_location_resolves_against_the_url_it_came_from() {
        let t = Target::parse("http://example.com:8080/img/a.png?x=1#frag").unwrap();
        assert_eq!(t, Target { https: false, host: "example.com".into(), port: 8080, path: "/img/a.png?x=1".into() });
        assert_eq!(t.join("b.png").unwrap().path, "/img/b.png");
        assert_eq!(t.join("/c.png").unwrap().host_header(), "example.com:8080");
        assert_eq!(t.join("//other.org/d.png").unwrap(), Target { https: false, host: "other.org".into(), port: 80, path: "/d.png".into() });
        assert_eq!(t.join("https://[2606:4700::1111]/e").unwrap().host_header(), "[2606:4700::1111]");
        for bad in ["ftp://example.com/a.png", "file:///etc/passwd", "http://user:pw@example.com/a.png", "http:///a.png", "example.com/a.png"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
