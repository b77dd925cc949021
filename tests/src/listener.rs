//! A plain TCP listener that answers every request with fixed bytes and keeps what it was sent:
//! the judge endpoints of the marketplace tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A host on this machine standing for someone else's: it counts connections and keeps what was
/// sent to it.
pub struct Listener {
    pub port: u16,
    connections: Arc<AtomicUsize>,
    pub received: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Listener {
    /// Answers every request with `answer` (an HTTP response written as it is).
    pub async fn start(answer: Arc<Vec<u8>>) -> Self {
        let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = socket.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (count, kept) = (connections.clone(), received.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = socket.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (kept, answer) = (kept.clone(), answer.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    if let Ok(n) = stream.read(&mut buf).await {
                        kept.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                    let _ = stream.write_all(&answer).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            port,
            connections,
            received,
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}
