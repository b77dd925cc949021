//! Stockfish as the chess judge's soundness oracle: which binary, how deep, how many processes.
//! Without it (not installed, or `--no-stockfish`) the shallow-search judge judges alone.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use lachesis_chess::stockfish::{self, EngineConfig, EnginePool, SearchLimit};

pub const DEFAULT_DEPTH: u32 = 12;
pub const DEFAULT_PROCESSES: usize = 2;
pub const DEFAULT_DEADLINE_MS: u64 = 10_000;
/// Deeper than this and a review of one game takes minutes of a core.
const MAX_DEPTH: u32 = 30;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct StockfishArgs {
    /// The Stockfish binary that judges the chess agent's sacrifices. Defaults to Debian's
    /// `/usr/games/stockfish` or `stockfish` on PATH, when there is one.
    #[arg(long, env = "LACHESIS_STOCKFISH")]
    pub stockfish: Option<PathBuf>,
    /// Judge with the shallow search alone, even where Stockfish is installed.
    #[arg(long, env = "LACHESIS_NO_STOCKFISH")]
    pub no_stockfish: bool,
    /// Plies Stockfish searches per judged move (1 to 30).
    #[arg(long, env = "LACHESIS_STOCKFISH_DEPTH")]
    pub stockfish_depth: Option<u32>,
    /// Stockfish processes, one search thread each: the server's bound on cores spent judging.
    #[arg(long, env = "LACHESIS_STOCKFISH_PROCESSES")]
    pub stockfish_processes: Option<usize>,
    /// A search still running after this many milliseconds is stopped (its best so far counts);
    /// a process that does not stop is replaced.
    #[arg(long, env = "LACHESIS_STOCKFISH_DEADLINE_MS")]
    pub stockfish_deadline_ms: Option<u64>,
}

/// Resolved: `None` when the server judges without Stockfish.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleSettings {
    pub engine: EngineConfig,
}

impl OracleSettings {
    pub fn resolve(args: &StockfishArgs) -> anyhow::Result<Option<Self>> {
        let depth = args.stockfish_depth.unwrap_or(DEFAULT_DEPTH);
        if !(1..=MAX_DEPTH).contains(&depth) {
            bail!("--stockfish-depth must be between 1 and {MAX_DEPTH}, not {depth}");
        }
        let processes = args.stockfish_processes.unwrap_or(DEFAULT_PROCESSES);
        if processes == 0 {
            bail!("--stockfish-processes must be at least 1");
        }
        let deadline_ms = args.stockfish_deadline_ms.unwrap_or(DEFAULT_DEADLINE_MS);
        if deadline_ms == 0 {
            bail!("--stockfish-deadline-ms must be at least 1");
        }
        if args.no_stockfish {
            return Ok(None);
        }
        let Some(path) = args.stockfish.clone().or_else(stockfish::locate) else {
            return Ok(None);
        };
        Ok(Some(Self {
            engine: EngineConfig {
                limit: SearchLimit::Depth(depth),
                deadline: Duration::from_millis(deadline_ms),
                processes,
                ..EngineConfig::new(path)
            },
        }))
    }

    /// Starts the pool (one process at once, the rest when needed). A binary that does not run
    /// is reported and the shallow-search judge stands in.
    pub async fn start(self) -> Option<Arc<EnginePool>> {
        let shown = self.engine.path.display().to_string();
        match tokio::task::spawn_blocking(move || EnginePool::start(self.engine)).await {
            Ok(Ok(pool)) => {
                tracing::info!(engine = %shown, "Stockfish judges the chess agent's sacrifices");
                Some(Arc::new(pool))
            }
            Ok(Err(e)) => {
                tracing::warn!(engine = %shown, error = %e, "Stockfish unavailable; the shallow-search judge stands in");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "starting Stockfish failed; the shallow-search judge stands in");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_have_defaults_and_refuse_nonsense() {
        let given = StockfishArgs {
            stockfish: Some("/opt/sf".into()),
            ..StockfishArgs::default()
        };
        let resolved = OracleSettings::resolve(&given).unwrap().unwrap();
        assert_eq!(resolved.engine.limit, SearchLimit::Depth(DEFAULT_DEPTH));
        assert_eq!(resolved.engine.processes, DEFAULT_PROCESSES);
        assert_eq!(
            resolved.engine.deadline,
            Duration::from_millis(DEFAULT_DEADLINE_MS)
        );
        assert_eq!(resolved.engine.path, PathBuf::from("/opt/sf"));
        let off = StockfishArgs {
            no_stockfish: true,
            ..given.clone()
        };
        assert_eq!(OracleSettings::resolve(&off).unwrap(), None);
        for bad in [
            StockfishArgs {
                stockfish_depth: Some(0),
                ..given.clone()
            },
            StockfishArgs {
                stockfish_depth: Some(31),
                ..given.clone()
            },
            StockfishArgs {
                stockfish_processes: Some(0),
                ..given.clone()
            },
            StockfishArgs {
                stockfish_deadline_ms: Some(0),
                ..given.clone()
            },
        ] {
            assert!(OracleSettings::resolve(&bad).is_err(), "{bad:?}");
        }
        let tuned = StockfishArgs {
            stockfish_depth: Some(8),
            stockfish_processes: Some(3),
            stockfish_deadline_ms: Some(500),
            ..given
        };
        let tuned = OracleSettings::resolve(&tuned).unwrap().unwrap();
        assert_eq!(tuned.engine.limit, SearchLimit::Depth(8));
        assert_eq!(tuned.engine.processes, 3);
        assert_eq!(tuned.engine.deadline, Duration::from_millis(500));
    }
}
