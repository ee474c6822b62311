//! The HTTP/1 accept loop: bounded request heads, a bound on open connections, an idle timeout, and a stop that lets running replies finish.
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// Most bytes of a request head (request line and header fields); a longer head is answered 431 and the connection closed.
pub const HEAD_BYTES: usize = 32 << 10;
/// Most header fields in a request; more are answered 431 and the connection closed.
pub const HEADERS: usize = 100;

/// What the accept loop bounds.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most connections open at once; further ones wait in the listen queue until one closes.
    pub max_connections: usize,
    /// Time a connection has to send a whole request head, from its opening or from its previous reply's end; then it is closed.
    pub idle: Duration,
}

/// Serves `app` on `listener` until `stop` resolves; then stops accepting, closes idle connections, and waits up to `grace` for the others to finish their replies.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: impl Future<Output = ()>, grace: Duration) {
    let max = u32::try_from(limits.max_connections.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
    let slots = Arc::new(Semaphore::new(max as usize));
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).keep_alive(true).header_read_timeout(limits.idle).max_header_size(HEAD_BYTES).max_headers(HEADERS);
    tokio::pin!(stop);
    loop {
        // a slot first, so connections past the bound stay in the kernel's listen queue
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let tcp = tokio::select! {
            r = listener.accept() => match r {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    pause_after(e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let conn = http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app.clone()));
        let mut closing = closing_rx.clone();
        tokio::spawn(async move {
            let _slot = permit;
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = closing.wait_for(|c| *c) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    let _ = tokio::time::timeout(grace, slots.acquire_many(max)).await;
}

/// After a failed accept: a connection that died in the queue is skipped; anything else (out of file descriptors) waits a second.
async fn pause_after(e: std::io::Error) {
    if !matches!(e.kind(), ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused) {
        eprintln!("accepting a connection: {e}; retrying in 1 s");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
