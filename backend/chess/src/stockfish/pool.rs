//! Engine processes shared by callers, replaced when they die or hang.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

use super::engine::Engine;
use super::{Analysis, EngineConfig, EngineError, Score};

/// Engine processes shared by callers; each search borrows one. Processes start when first
/// needed, so a pool costs nothing until it is used.
pub struct EnginePool {
    config: EngineConfig,
    idle: Mutex<Vec<Engine>>,
    returned: Condvar,
    /// Processes alive, idle or searching, with their ids (for drills that kill one).
    live: Mutex<Vec<u32>>,
    restarts: AtomicU64,
}

impl EnginePool {
    /// A pool for `config`; starts one process to check the engine runs at all.
    pub fn start(config: EngineConfig) -> Result<Self, EngineError> {
        let first = Engine::spawn(&config)?;
        let pool = EnginePool {
            live: Mutex::new(vec![first.pid()]),
            idle: Mutex::new(vec![first]),
            returned: Condvar::new(),
            restarts: AtomicU64::new(0),
            config,
        };
        Ok(pool)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The process ids of the engines alive now.
    pub fn pids(&self) -> Vec<u32> {
        lock(&self.live).clone()
    }

    /// Processes replaced after dying or hanging, since the pool started.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Searches the position `fen` (every move, or only `only_move`), on a replacement process
    /// when the first one dies or hangs.
    pub fn analyse(&self, fen: &str, only_move: Option<&str>) -> Result<Analysis, EngineError> {
        self.with_engine(|engine, config| engine.search(fen, only_move, config))
    }

    /// Each of `moves` searched in `fen` in one multi-line search: their scores, in their
    /// order, from the side to move's view. Moves the engine does not report (not legal) are
    /// an error.
    pub fn analyse_each(&self, fen: &str, moves: &[String]) -> Result<Vec<Score>, EngineError> {
        if moves.is_empty() {
            return Ok(Vec::new());
        }
        let lines = self.with_engine(|engine, config| engine.search_lines(fen, moves, config))?;
        moves
            .iter()
            .map(|m| {
                lines
                    .1
                    .iter()
                    .find(|(known, _)| known == m)
                    .map(|(_, score)| *score)
                    .ok_or_else(|| EngineError::Protocol(format!("no line for {m}")))
            })
            .collect()
    }

    /// Runs `work` on an engine, once more on a fresh process when the first dies or hangs.
    fn with_engine<T>(
        &self,
        work: impl Fn(&mut Engine, &EngineConfig) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut engine = self.checkout()?;
        match work(&mut engine, &self.config) {
            Ok(found) => {
                self.give_back(engine);
                Ok(found)
            }
            Err(EngineError::Protocol(reason)) => {
                self.give_back(engine);
                Err(EngineError::Protocol(reason))
            }
            Err(_died_or_hung) => {
                self.retire(engine);
                self.restarts.fetch_add(1, Ordering::Relaxed);
                let mut replacement = self.checkout()?;
                let found = work(&mut replacement, &self.config);
                match found {
                    Ok(_) | Err(EngineError::Protocol(_)) => self.give_back(replacement),
                    Err(_) => self.retire(replacement),
                }
                found
            }
        }
    }

    fn checkout(&self) -> Result<Engine, EngineError> {
        let mut idle = lock(&self.idle);
        loop {
            if let Some(engine) = idle.pop() {
                return Ok(engine);
            }
            if lock(&self.live).len() < self.config.processes.max(1) {
                // Reserve the slot before the slow start, so two callers cannot both take it.
                lock(&self.live).push(0);
                drop(idle);
                return match Engine::spawn(&self.config) {
                    Ok(engine) => {
                        self.replace_pid(0, Some(engine.pid()));
                        Ok(engine)
                    }
                    Err(e) => {
                        self.replace_pid(0, None);
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            idle = self
                .returned
                .wait(idle)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    fn give_back(&self, engine: Engine) {
        lock(&self.idle).push(engine);
        self.returned.notify_one();
    }

    fn retire(&self, engine: Engine) {
        let pid = engine.pid();
        drop(engine);
        self.replace_pid(pid, None);
        self.returned.notify_one();
    }

    fn replace_pid(&self, old: u32, new: Option<u32>) {
        let mut live = lock(&self.live);
        if let Some(i) = live.iter().position(|p| *p == old) {
            match new {
                Some(pid) => live[i] = pid,
                None => {
                    live.swap_remove(i);
                }
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
