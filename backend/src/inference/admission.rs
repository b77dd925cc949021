//! The one gate between the generation routes (`/v1/completions`, `/v1/chat/completions`,
//! `/generate`) and the engine: what a request may ask for, what its KV cache would take, and
//! whether its caller has tokens left, all decided before the engine sees it.

use std::sync::Arc;
use std::time::Instant;

use lachesis_inference::{
    Engine, EngineError, GenerateRequest, Generation, ModelInfo, StreamedToken,
};
use tokio::sync::mpsc::UnboundedSender;

use super::InferenceError;
use super::limits::InferenceLimits;
use super::quota::CallerKey;
use crate::hosting::slots::Slot;

const MIB: f64 = 1024.0 * 1024.0;

/// Admits the request (see [`admit`]), charges its caller, runs it, and gives back the tokens it
/// did not use. A request whose caller went away midway keeps its whole charge: the engine
/// worked for it.
pub async fn generate(
    limits: &Arc<InferenceLimits>,
    engine: &Engine,
    caller: &CallerKey,
    request: GenerateRequest,
) -> Result<Generation, InferenceError> {
    reserve(limits, engine, caller, &request)?
        .run(engine, request, None)
        .await
}

/// Admits the request and charges its caller, without running it yet: a streamed answer is
/// refused with an HTTP status before its stream starts.
pub fn reserve(
    limits: &Arc<InferenceLimits>,
    engine: &Engine,
    caller: &CallerKey,
    request: &GenerateRequest,
) -> Result<Reservation, InferenceError> {
    let cost = admit(limits, engine.info(), request)?;
    // Held until the answer: a caller's requests beyond its share are refused before they cost.
    let running = if limits.per_caller_applies {
        Some(
            limits
                .running
                .claim_key(caller.clone())
                .map_err(|running| InferenceError::TooManyRunning { running })?,
        )
    } else {
        None
    };
    limits.quotas.charge(caller, cost, limits, Instant::now())?;
    Ok(Reservation {
        limits: limits.clone(),
        caller: caller.clone(),
        cost,
        _running: running,
    })
}

/// An admitted, charged request, holding its caller's running place until it is answered.
pub struct Reservation {
    limits: Arc<InferenceLimits>,
    caller: CallerKey,
    cost: u64,
    _running: Option<Slot<CallerKey>>,
}

impl Reservation {
    /// Runs the request (sending each token to `tokens`, when given) and refunds what it did not
    /// use.
    pub async fn run(
        self,
        engine: &Engine,
        request: GenerateRequest,
        tokens: Option<UnboundedSender<StreamedToken>>,
    ) -> Result<Generation, InferenceError> {
        let result = match tokens {
            Some(sink) => engine.generate_streaming(request, sink).await,
            None => engine.generate(request).await,
        };
        let used = result.as_ref().map_or(0, |generation| {
            (generation.prompt_tokens.len() + generation.completion_tokens()) as u64
        });
        let limits = &self.limits;
        limits.quotas.refund(
            &self.caller,
            self.cost.saturating_sub(used),
            limits,
            Instant::now(),
        );
        Ok(result?)
    }
}

/// Checks a request against the server's limits and the loaded model without running it, and
/// returns the tokens it may use (prompt + n × max_tokens), which the caller's quota is charged.
pub fn admit(
    limits: &InferenceLimits,
    model: &ModelInfo,
    request: &GenerateRequest,
) -> Result<u64, InferenceError> {
    let params = &request.params;
    if params.n > limits.max_n {
        return Err(InferenceError::bad(
            format!(
                "n is {}, more than the {} completions one request may ask for on this server (--inference-max-n)",
                params.n, limits.max_n
            ),
            "n",
        ));
    }
    if params.stop.len() > limits.max_stop_strings {
        return Err(InferenceError::bad(
            format!(
                "stop holds {} strings; at most {} are allowed (--inference-max-stop)",
                params.stop.len(),
                limits.max_stop_strings
            ),
            "stop",
        ));
    }
    if let Some((index, long)) = params
        .stop
        .iter()
        .enumerate()
        .find(|(_, stop)| stop.len() > limits.max_stop_bytes)
    {
        return Err(InferenceError::bad(
            format!(
                "stop string {index} is {} bytes; at most {} are allowed (--inference-max-stop-bytes)",
                long.len(),
                limits.max_stop_bytes
            ),
            "stop",
        ));
    }
    params.validate()?;
    let prompt = request.prompt.len();
    let sequence = prompt.saturating_add(params.max_tokens);
    if sequence > model.context_length {
        return Err(EngineError::ContextLength {
            prompt,
            max_tokens: params.max_tokens,
            context: model.context_length,
        }
        .into());
    }
    // Each of the n rows holds the whole sequence's keys and values once the answers are long.
    let estimate = (params.n as u64)
        .saturating_mul(sequence as u64)
        .saturating_mul(model.kv_bytes_per_token as u64);
    if estimate > limits.kv_budget_bytes {
        return Err(InferenceError::KvBudget {
            n: params.n,
            prompt,
            max_tokens: params.max_tokens,
            bytes_per_token: model.kv_bytes_per_token,
            estimate_mib: estimate as f64 / MIB,
            budget_mib: limits.kv_budget_bytes as f64 / MIB,
        });
    }
    Ok((prompt as u64).saturating_add((params.n as u64).saturating_mul(params.max_tokens as u64)))
}

#[cfg(test)]
mod tests {
    use lachesis_inference::SamplingParams;

    use super::*;

    /// SmolLM2-135M's shape: 30 layers × 2 × 3 KV heads × 64 dimensions × 4 bytes.
    fn smollm2() -> ModelInfo {
        ModelInfo {
            name: "smollm2".into(),
            context_length: 8192,
            vocab_size: 49152,
            kv_bytes_per_token: 46_080,
        }
    }

    fn request(prompt: usize, n: usize, max_tokens: usize, stop: &[&str]) -> GenerateRequest {
        GenerateRequest {
            prompt: vec![1; prompt],
            params: SamplingParams {
                n,
                max_tokens,
                stop: stop.iter().map(|s| s.to_string()).collect(),
                ..SamplingParams::default()
            },
        }
    }

    fn refusal(limits: &InferenceLimits, request: &GenerateRequest) -> String {
        admit(limits, &smollm2(), request).unwrap_err().to_string()
    }

    #[test]
    fn an_ordinary_request_costs_its_prompt_and_every_answer() {
        let limits = InferenceLimits::default();
        assert_eq!(
            admit(&limits, &smollm2(), &request(100, 8, 256, &["\n"])).unwrap(),
            100 + 8 * 256
        );
    }

    #[test]
    fn many_answers_near_the_context_are_refused_with_the_estimate_and_the_fix() {
        let limits = InferenceLimits::default();
        let error = refusal(&limits, &request(8000, 64, 150, &[]));
        // 64 × 8150 × 46080 bytes.
        assert!(error.contains("22921.9 MiB"), "{error}");
        assert!(error.contains("2048.0 MiB"), "{error}");
        assert!(error.contains("--inference-kv-budget-mib"), "{error}");
        assert!(error.contains("lower n or max_tokens"), "{error}");
        // One answer of the same length fits.
        assert!(admit(&limits, &smollm2(), &request(8000, 1, 150, &[])).is_ok());
    }

    #[test]
    fn the_kv_budget_is_configurable() {
        // Two rows of 200 tokens fit exactly; one token more does not.
        let limits = InferenceLimits {
            kv_budget_bytes: 46_080 * 400,
            ..InferenceLimits::default()
        };
        assert!(admit(&limits, &smollm2(), &request(100, 2, 100, &[])).is_ok());
        let error = refusal(&limits, &request(100, 2, 101, &[]));
        assert!(error.contains("KV cache"), "{error}");
    }

    #[test]
    fn n_is_capped_by_the_server() {
        let limits = InferenceLimits {
            max_n: 4,
            ..InferenceLimits::default()
        };
        assert!(admit(&limits, &smollm2(), &request(10, 4, 8, &[])).is_ok());
        let error = refusal(&limits, &request(10, 5, 8, &[]));
        assert!(error.contains("--inference-max-n"), "{error}");
    }

    #[test]
    fn stop_strings_are_bounded_in_number_and_length() {
        let limits = InferenceLimits::default();
        assert!(
            admit(
                &limits,
                &smollm2(),
                &request(10, 1, 8, &["a", "b", "c", "d"])
            )
            .is_ok()
        );
        let error = refusal(&limits, &request(10, 1, 8, &["a", "b", "c", "d", "e"]));
        assert!(error.contains("--inference-max-stop"), "{error}");
        let long = "x".repeat(257);
        let error = refusal(&limits, &request(10, 1, 8, &["ok", &long]));
        assert!(error.contains("stop string 1 is 257 bytes"), "{error}");
        let strict = InferenceLimits {
            max_stop_strings: 1,
            max_stop_bytes: 2,
            ..InferenceLimits::default()
        };
        assert!(refusal(&strict, &request(10, 1, 8, &["a", "b"])).contains("at most 1"));
        assert!(refusal(&strict, &request(10, 1, 8, &["abc"])).contains("at most 2"));
    }

    #[test]
    fn sequences_beyond_the_context_are_refused_as_before_even_when_huge() {
        let limits = InferenceLimits::default();
        for max_tokens in [8193, usize::MAX] {
            let refused = admit(&limits, &smollm2(), &request(10, 1, max_tokens, &[]));
            assert!(
                matches!(
                    refused,
                    Err(InferenceError::Engine(EngineError::ContextLength { .. }))
                ),
                "{refused:?}"
            );
        }
    }
}
