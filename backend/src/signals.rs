//! The process's stop signals, shared by `lachesis serve` and the environment CLI.

/// Resolves on Ctrl-C or SIGTERM. SIGTERM is caught from the call on (inside a runtime), not from
/// the first poll: one that arrives as soon as the server says it is serving starts the drain
/// instead of killing the process.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        #[cfg(unix)]
        let terminate = async {
            match terminate.as_mut() {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            () = ctrl_c => {},
            () = terminate => {},
        }
        tracing::info!("shutting down");
    }
}
