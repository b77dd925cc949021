//! A round-robin TCP proxy in front of the instances, as a load balancer would stand: each client
//! connection goes to the next backend that accepts it (one that refuses, a killed or stopping
//! instance, is skipped). It relays bytes, so HTTP keep-alive and WebSockets pass unchanged; a
//! connection stays on its backend until either side closes it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long one backend may take to accept before the next is tried.
const CONNECT_BOUND: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Shared {
    backends: Mutex<Vec<SocketAddr>>,
    next: AtomicUsize,
    /// Client connections relayed to a backend.
    relayed: AtomicU64,
    /// Connection attempts a backend refused (or did not accept in time).
    refused: AtomicU64,
    /// Client connections closed at once because no backend accepted.
    dropped: AtomicU64,
}

pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept_loop: JoinHandle<()>,
}

/// What the proxy saw, for the drill's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProxyCounts {
    pub relayed: u64,
    pub refused: u64,
    pub dropped: u64,
}

impl Proxy {
    pub async fn start(backends: Vec<SocketAddr>) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            backends: Mutex::new(backends),
            ..Shared::default()
        });
        let accept_loop = tokio::spawn(accept(listener, shared.clone()));
        Ok(Self {
            addr,
            shared,
            accept_loop,
        })
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws", self.addr)
    }

    /// Replaces the backend list (a replacement instance has a new port).
    pub fn set_backends(&self, backends: Vec<SocketAddr>) {
        *self
            .shared
            .backends
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = backends;
    }

    pub fn counts(&self) -> ProxyCounts {
        ProxyCounts {
            relayed: self.shared.relayed.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = client.set_nodelay(true);
            match connect_next(&shared).await {
                Some(backend) => {
                    shared.relayed.fetch_add(1, Ordering::Relaxed);
                    relay(client, backend).await;
                }
                // Dropping the client closes it: the caller sees a failed request and retries.
                None => {
                    shared.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// The next backend in turn that accepts a connection, each tried at most once.
async fn connect_next(shared: &Shared) -> Option<TcpStream> {
    let backends = shared
        .backends
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if backends.is_empty() {
        return None;
    }
    let start = shared.next.fetch_add(1, Ordering::Relaxed);
    for i in 0..backends.len() {
        let addr = backends[(start + i) % backends.len()];
        match tokio::time::timeout(CONNECT_BOUND, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Some(stream);
            }
            _ => {
                shared.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    None
}

/// Copies both ways until one side closes or fails; then both are closed, so a client whose
/// backend died sees its connection end rather than hang.
async fn relay(mut client: TcpStream, mut backend: TcpStream) {
    let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
}
