//! The engine's worker thread: it holds up to `max_active` requests at once and advances them in
//! turn, one decoding step each, so a short request is never stuck behind a long one. The `n`
//! completions of one request are decoded together as a batch (the GRPO case: a group of answers
//! to one prompt), which reads the weights once per step for all of them.
//!
//! A panic in the loop (a bug in the forward pass, an allocation candle refuses) is caught at the
//! thread's top: the requests it was running are answered with [`EngineError::WorkerCrashed`],
//! the restart is logged and counted, and after a pause ([`Backoff`]: a panic on every request
//! must not spin a core) a fresh loop starts on the same weights and queue, so requests that were
//! waiting, and every later one, are still served.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use tokio::sync::{mpsc, oneshot};

use crate::backoff::{Backoff, Streak};
use crate::engine::{
    Choice, FinishReason, GenerateRequest, Generation, StreamedToken, TokenLogprob,
};
use crate::llama::{KvCache, Llama, rows};
use crate::sampling::{log_softmax, sample, top_k};
use crate::{EngineError, ModelTokenizer};

pub(crate) type SharedModel = Arc<RwLock<Arc<Llama>>>;

/// Prompt tokens read per forward pass. Attention scores take heads × chunk × prompt floats, so a
/// prompt near the context never needs prompt² of them at once (2.4 GB a copy for 8k tokens on
/// SmolLM2, and the masking and softmax make copies), and prompt logprobs are scored chunk by
/// chunk instead of holding a vocabulary-sized row for every prompt token.
const PREFILL_CHUNK: usize = 256;

/// Requests admitted to the engine and not yet dropped by the worker: queued or running.
#[derive(Debug)]
pub(crate) struct Admitted {
    count: AtomicUsize,
    pub limit: usize,
}

impl Admitted {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            count: AtomicUsize::new(0),
            limit,
        })
    }

    /// A place for one more request, or `None` when `limit` are already admitted.
    pub fn claim(self: &Arc<Self>) -> Option<Slot> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.clone()))
    }
}

/// One admitted request's place; freed when the worker drops the job, so a caller that went away
/// keeps its place until the engine has really let go of its work.
#[derive(Debug)]
pub(crate) struct Slot(Arc<Admitted>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) struct Job {
    pub request: GenerateRequest,
    pub reply: oneshot::Sender<Result<Generation, EngineError>>,
    /// Where each sampled token goes as soon as it is chosen, for callers that show text as it
    /// is written. At most `n × max_tokens` are ever sent, so the channel's length is bounded.
    pub tokens: Option<mpsc::UnboundedSender<StreamedToken>>,
    /// Held, never read: dropping the job gives the place back.
    pub _slot: Slot,
}

pub(crate) enum Command {
    Generate(Job),
    /// Panics inside the loop, so tests can watch the supervisor restart it.
    Crash,
}

pub(crate) struct Worker {
    pub model: SharedModel,
    pub tokenizer: ModelTokenizer,
    pub context: usize,
    pub max_active: usize,
    pub backoff: Backoff,
    pub health: Arc<Mutex<WorkerHealth>>,
}

/// The worker's supervision state, for the server's task list and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerHealth {
    /// Times the loop panicked and was started again.
    pub restarts: u64,
    /// The last panic's message.
    pub last_failure: Option<String>,
    /// Set while the worker pauses before starting again.
    pub backing_off_until: Option<SystemTime>,
    /// When the worker last started or failed.
    pub since: SystemTime,
}

impl Default for WorkerHealth {
    fn default() -> Self {
        Self {
            restarts: 0,
            last_failure: None,
            backing_off_until: None,
            since: SystemTime::now(),
        }
    }
}

impl Worker {
    fn current(&self) -> Arc<Llama> {
        // A poisoned lock only means a swap panicked midway; the Arc inside is still whole.
        match self.model.read() {
            Ok(model) => model.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Runs the loop until every engine handle is gone, restarting it after a panic.
    pub fn supervise(self, mut queue: mpsc::Receiver<Command>) {
        let mut active: Vec<Session> = Vec::new();
        let mut streak = Streak::default();
        loop {
            let started = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| self.run(&mut queue, &mut active)));
            let Err(panic) = outcome else {
                return;
            };
            let cause = panic_message(&panic);
            let wait = streak.failed(&self.backoff, started.elapsed());
            let restarts = self.update_health(|health| {
                health.restarts += 1;
                health.last_failure = Some(cause.clone());
                health.backing_off_until = Some(SystemTime::now() + wait);
            });
            tracing::error!(
                task = "inference-worker",
                cause,
                failed_requests = active.len(),
                restarts,
                wait_ms = wait.as_millis() as u64,
                "the engine worker panicked; restarting it on the loaded weights after a pause"
            );
            // Their caches may be half-written: they are answered, not resumed.
            for session in active.drain(..) {
                let _ = session.into_reply().send(Err(EngineError::WorkerCrashed));
            }
            std::thread::sleep(wait);
            self.update_health(|health| health.backing_off_until = None);
            tracing::warn!(
                task = "inference-worker",
                restarts,
                "the engine worker restarted"
            );
        }
    }

    /// Changes the shared health record (stamping `since`) and returns the restart count.
    fn update_health(&self, change: impl FnOnce(&mut WorkerHealth)) -> u64 {
        // Only this thread writes the record, so a poisoned lock holds a whole value.
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut health);
        health.since = SystemTime::now();
        health.restarts
    }

    fn run(&self, queue: &mut mpsc::Receiver<Command>, active: &mut Vec<Session>) {
        loop {
            while active.len() < self.max_active {
                match queue.try_recv() {
                    Ok(command) => self.accept(command, active),
                    Err(_) => break,
                }
            }
            if active.is_empty() {
                match queue.blocking_recv() {
                    Some(command) => self.accept(command, active),
                    None => return,
                }
                continue;
            }
            let mut index = 0;
            while index < active.len() {
                let session = &mut active[index];
                let outcome = if session.job.reply.is_closed() {
                    Some(Err(EngineError::Stopped))
                } else {
                    session.step(&self.tokenizer, self.context).transpose()
                };
                match outcome {
                    None => index += 1,
                    Some(result) => {
                        let reply = active.swap_remove(index).into_reply();
                        // A caller that went away no longer wants the answer.
                        let _ = reply.send(result);
                    }
                }
            }
        }
    }

    fn accept(&self, command: Command, active: &mut Vec<Session>) {
        match command {
            Command::Generate(job) => active.push(Session::new(job, self.current())),
            Command::Crash => panic!("engine worker crash requested by a test"),
        }
    }
}

fn panic_message(panic: &Box<dyn Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

struct ChoiceState {
    tokens: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    text: String,
    finished: Option<FinishReason>,
}

/// One request in progress, with its own KV cache (the weights are shared).
struct Session {
    job: Job,
    model: Arc<Llama>,
    cache: KvCache,
    rng: StdRng,
    choices: Vec<ChoiceState>,
    prompt_logprobs: Option<Vec<Option<TokenLogprob>>>,
    /// Position of the next token fed to the model; 0 until the prompt has been read.
    position: usize,
    started: Instant,
    prompt_seconds: f64,
}

impl Session {
    fn new(job: Job, model: Arc<Llama>) -> Self {
        let n = job.request.params.n;
        Self {
            cache: model.new_cache(),
            rng: job.request.params.rng(),
            job,
            model,
            choices: (0..n)
                .map(|_| ChoiceState {
                    tokens: Vec::new(),
                    logprobs: Vec::new(),
                    text: String::new(),
                    finished: None,
                })
                .collect(),
            prompt_logprobs: None,
            position: 0,
            started: Instant::now(),
            prompt_seconds: 0.0,
        }
    }

    /// Frees the session's cache and its admission place, keeping only the way to answer: a
    /// caller that has its answer can be sure the engine has room for its next request.
    fn into_reply(self) -> oneshot::Sender<Result<Generation, EngineError>> {
        self.job.reply
    }

    /// Reads the prompt for one row, chunk by chunk, scoring its tokens when asked; returns the
    /// logits that follow its last token.
    fn read_prompt(&mut self) -> Result<Vec<f32>, EngineError> {
        let prompt = &self.job.request.prompt;
        let scoring = self.job.request.params.prompt_logprobs;
        // Nothing precedes the first token, so it has no logprob.
        let mut scored = scoring.map(|_| vec![None]);
        let mut last = Vec::new();
        for (index, chunk) in prompt.chunks(PREFILL_CHUNK).enumerate() {
            let start = index * PREFILL_CHUNK;
            let input = Tensor::new(chunk, &Device::Cpu)?.unsqueeze(0)?;
            let logits = self
                .model
                .forward(&input, start, &mut self.cache, scoring.is_some())?;
            // With every position, row `offset` predicts prompt token `start + offset + 1`;
            // otherwise the one row is the chunk's last, and only the final chunk's is kept.
            for (offset, row) in rows(&logits)?.into_iter().enumerate() {
                match (scoring, scored.as_mut(), prompt.get(start + offset + 1)) {
                    (Some(k), Some(scored), Some(&next)) => scored.push(Some(score(&row, next, k))),
                    _ => last = row,
                }
            }
        }
        self.prompt_logprobs = scored;
        Ok(last)
    }

    /// Advances by one token per choice (the first step reads the whole prompt). Returns the
    /// finished generation when every choice is done.
    fn step(
        &mut self,
        tokenizer: &ModelTokenizer,
        context: usize,
    ) -> Result<Option<Generation>, EngineError> {
        let n = self.job.request.params.n;
        let rows = if self.position == 0 {
            // The prompt is read once, for one row; its cache is then repeated for the n answers.
            let last = self.read_prompt()?;
            if n > 1 {
                self.cache = self.cache.repeat_rows(n)?;
            }
            self.position = self.job.request.prompt.len();
            self.prompt_seconds = self.started.elapsed().as_secs_f64();
            vec![last; n]
        } else {
            let last: Vec<u32> = self
                .choices
                .iter()
                .map(|c| c.tokens.last().copied().unwrap_or(0))
                .collect();
            let input = Tensor::new(last.as_slice(), &Device::Cpu)?.unsqueeze(1)?;
            let logits = self
                .model
                .forward(&input, self.position, &mut self.cache, false)?;
            self.position += 1;
            rows(&logits)?
        };
        let params = &self.job.request.params;
        let eos = tokenizer.eos_token_id();
        for (index, (choice, row)) in self.choices.iter_mut().zip(rows).enumerate() {
            if choice.finished.is_some() {
                continue;
            }
            let lps = log_softmax(&row);
            let token = sample(&lps, params.temperature, params.top_p, &mut self.rng)?;
            if let Some(sink) = &self.job.tokens {
                // A reader that went away only stops watching; the answer is still delivered.
                let _ = sink.send(StreamedToken {
                    choice: index,
                    token,
                });
            }
            choice.tokens.push(token);
            choice.logprobs.push(TokenLogprob {
                token,
                logprob: lps[token as usize],
                top: top_k(&lps, params.top_logprobs),
            });
            if token == eos {
                choice.finished = Some(FinishReason::Stop);
                continue;
            }
            // Stop strings need the text at every step; otherwise it is decoded once at the end.
            if !params.stop.is_empty() {
                choice.text = tokenizer.decode(&choice.tokens)?;
                if let Some(cut) = first_stop(&choice.text, &params.stop) {
                    choice.text.truncate(cut);
                    choice.finished = Some(FinishReason::Stop);
                    continue;
                }
            }
            if choice.tokens.len() >= params.max_tokens || self.position + 1 >= context {
                choice.finished = Some(FinishReason::Length);
            }
        }
        if self.choices.iter().any(|c| c.finished.is_none()) {
            return Ok(None);
        }
        let mut choices = Vec::with_capacity(self.choices.len());
        for c in self.choices.drain(..) {
            let text = if params.stop.is_empty() {
                let spoken = match c.tokens.split_last() {
                    Some((&last, rest)) if last == eos => rest,
                    _ => &c.tokens[..],
                };
                tokenizer.decode(spoken)?
            } else {
                c.text
            };
            choices.push(Choice {
                tokens: c.tokens,
                logprobs: c.logprobs,
                text,
                finish_reason: c.finished.unwrap_or(FinishReason::Length),
            });
        }
        let total = self.started.elapsed().as_secs_f64();
        Ok(Some(Generation {
            prompt_tokens: self.job.request.prompt.clone(),
            prompt_logprobs: self.prompt_logprobs.take(),
            choices,
            prompt_seconds: self.prompt_seconds,
            generation_seconds: total - self.prompt_seconds,
        }))
    }
}

/// Byte offset of the earliest stop string in `text`.
fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter_map(|s| text.find(s.as_str())).min()
}

/// The log-probability of `token` under one position's logits, with `k` alternatives.
fn score(logits: &[f32], token: u32, k: usize) -> TokenLogprob {
    let lps = log_softmax(logits);
    TokenLogprob {
        token,
        logprob: lps
            .get(token as usize)
            .copied()
            .unwrap_or(f32::NEG_INFINITY),
        top: top_k(&lps, k),
    }
}

#[cfg(test)]
mod tests {
    use super::{Admitted, first_stop};

    #[test]
    fn the_earliest_stop_string_wins() {
        let stops = vec!["\n\n".to_owned(), "Answer".to_owned()];
        assert_eq!(first_stop("x = 4\n\nAnswer", &stops), Some(5));
        assert_eq!(first_stop("no stop here", &stops), None);
    }

    #[test]
    fn admission_slots_are_bounded_and_freed_on_drop() {
        let admitted = Admitted::new(2);
        let first = admitted.claim().expect("a first place");
        let second = admitted.claim().expect("a second place");
        assert!(admitted.claim().is_none(), "a third request is refused");
        drop(first);
        let third = admitted.claim().expect("a freed place is reused");
        drop((second, third));
        assert!(admitted.claim().is_some());
    }
}
