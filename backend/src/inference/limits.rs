//! What one caller may ask of the embedded engine, fixed at start, and the per-caller token
//! accounting that enforces the rate.

use std::sync::Arc;

use anyhow::bail;
use lachesis_inference::{EngineOptions, MAX_CHOICES, Precision};

use super::quota::{CallerKey, CallerQuotas};
use crate::hosting::slots::Slots;

const MIB: u64 = 1024 * 1024;

/// Flags and environment variables for the inference limits (`None`: not given).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InferenceLimitArgs {
    /// Most completions (`n`) one request may ask for [default: 64].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_N")]
    pub inference_max_n: Option<usize>,
    /// KV cache one request may need, in MiB: n × (prompt + max_tokens) × the model's KV bytes
    /// per token [default: 2048].
    #[arg(long, env = "LACHESIS_INFERENCE_KV_BUDGET_MIB")]
    pub inference_kv_budget_mib: Option<u64>,
    /// Most stop strings per request [default: 4, as OpenAI].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_STOP")]
    pub inference_max_stop: Option<usize>,
    /// Longest stop string, in bytes [default: 256].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_STOP_BYTES")]
    pub inference_max_stop_bytes: Option<usize>,
    /// Tokens (prompt + n × max_tokens) one caller may request per minute [default: 200000].
    #[arg(long, env = "LACHESIS_INFERENCE_TOKENS_PER_MINUTE")]
    pub inference_tokens_per_minute: Option<u64>,
    /// Tokens one caller may request at once after idling [default: one minute's worth].
    #[arg(long, env = "LACHESIS_INFERENCE_BURST_TOKENS")]
    pub inference_burst_tokens: Option<u64>,
    /// Callers whose token balance is remembered; the least recently seen are forgotten beyond
    /// it [default: 65536].
    #[arg(long, env = "LACHESIS_INFERENCE_QUOTA_CALLERS")]
    pub inference_quota_callers: Option<usize>,
    /// Requests the engine holds at once, running or waiting; more are refused with 503 and
    /// `Retry-After` [default: 64].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_IN_FLIGHT")]
    pub inference_max_in_flight: Option<usize>,
    /// Requests one caller may have running or waiting at once, with accounts on; more are
    /// refused with 429 and `Retry-After` [default: 2].
    #[arg(long, env = "LACHESIS_INFERENCE_PER_CALLER")]
    pub inference_per_caller: Option<usize>,
    /// Most tools one chat request may offer [default: 64].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_TOOLS")]
    pub inference_max_tools: Option<usize>,
    /// Most bytes of tool definitions (their JSON, all together) one chat request may send; they
    /// all go into the prompt [default: 65536].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_TOOL_SCHEMA_BYTES")]
    pub inference_max_tool_schema_bytes: Option<usize>,
    /// LoRA adapters the server holds at once, each served by its own engine and named by
    /// `POST /v1/load_lora_adapter`; 0 refuses adapters [default: 2].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_LORA_ADAPTERS")]
    pub inference_max_lora_adapters: Option<usize>,
    /// Largest weights file set, in MiB, that an adapter load or a full reload reads from disk
    /// [default: 4096].
    #[arg(long, env = "LACHESIS_INFERENCE_MAX_WEIGHTS_MIB")]
    pub inference_max_weights_mib: Option<u64>,
    /// How weights from a trainer are served: the base under LoRA adapters, and a full reload
    /// [default: f32].
    #[arg(long, env = "LACHESIS_INFERENCE_TRAINED_PRECISION", value_enum)]
    pub inference_trained_precision: Option<TrainedPrecision>,
    /// How the model given with `--model` is held [default: quantized].
    #[arg(long, env = "LACHESIS_INFERENCE_BASE_PRECISION", value_enum)]
    pub inference_base_precision: Option<BasePrecision>,
}

/// How the server's own model (`--model`) is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BasePrecision {
    /// Fast on a CPU: a GGUF's types without a fast kernel re-quantized to Q8_0 (SmolLM2's Q4_1
    /// among them), activations quantized too; about 0.07 nats a token from the model's dense
    /// logprobs on SmolLM2.
    Quantized,
    /// As the file holds them, with the file's own quantization.
    Stored,
    /// Dense f32, dequantized once (SmolLM2-135M: ~540 MB, four times Q8_0, and slower): the
    /// logprobs a trainer computes from the same file, so the importance ratios of a training
    /// run's first rollouts carry no quantization noise.
    F32,
}

impl From<BasePrecision> for Precision {
    fn from(precision: BasePrecision) -> Self {
        match precision {
            BasePrecision::Quantized => Precision::Quantized,
            BasePrecision::Stored => Precision::Stored,
            BasePrecision::F32 => Precision::F32,
        }
    }
}

/// How weights a trainer sends are held: the base under hot-loaded LoRA adapters (loaded once,
/// at the first adapter, and shared by all of them; the adapters' own matrices are always f32),
/// and a fully reloaded model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrainedPrecision {
    /// Dense f32: the server serves exactly the model its trainer computes (SmolLM2-135M:
    /// ~540 MB).
    F32,
    /// Q8_0, as the engine serves its own base: a quarter of the memory, and the base's
    /// quantization noise (about 0.1 nats a token on SmolLM2).
    #[value(name = "q8_0")]
    Q8_0,
}

/// The limits the inference routes enforce (public fields: tests and embedders set them), and
/// the per-caller token balances.
#[derive(Debug, Clone)]
pub struct InferenceLimits {
    pub max_n: usize,
    pub kv_budget_bytes: u64,
    pub max_stop_strings: usize,
    pub max_stop_bytes: usize,
    pub tokens_per_minute: u64,
    pub burst_tokens: u64,
    pub quota_callers: usize,
    pub max_in_flight: usize,
    /// Requests one caller may have in the engine at once. On a shared server this keeps one
    /// caller from filling the engine's running places, so others are served beside it; on a
    /// loopback server without accounts every caller is the same person, so it does not apply.
    pub per_caller: usize,
    /// Tools one chat request may offer.
    pub max_tools: usize,
    /// Bytes of tool definitions (serialized JSON, summed) one chat request may send.
    pub max_tool_schema_bytes: usize,
    /// LoRA adapters served at once (`crate::weights`).
    pub max_lora_adapters: usize,
    /// Bytes of weights one adapter load or full reload may read.
    pub max_weights_bytes: u64,
    /// How adapters' base and fully reloaded weights are held.
    pub trained_precision: TrainedPrecision,
    /// How the server's own model is held.
    pub base_precision: Precision,
    /// Whether `per_caller` applies (accounts on); set by [`InferenceLimits::for_new_server`].
    pub(super) per_caller_applies: bool,
    /// Runtime state, shared by clones; [`InferenceLimits::for_new_server`] starts it empty.
    pub(super) quotas: Arc<CallerQuotas>,
    pub(super) running: Arc<Slots<CallerKey>>,
}

impl Default for InferenceLimits {
    fn default() -> Self {
        Self {
            max_n: MAX_CHOICES,
            // n = 16 answers of 1k tokens after a 1k prompt on SmolLM2 (45 KiB a token) is 1.4 GiB;
            // with the engine's 4 running requests the caches stay under 8 GiB.
            kv_budget_bytes: 2048 * MIB,
            max_stop_strings: 4,
            max_stop_bytes: 256,
            tokens_per_minute: 200_000,
            burst_tokens: 200_000,
            quota_callers: 65_536,
            max_in_flight: 64,
            per_caller: 2,
            // OpenAI's own limit is 128 tools; 64 KiB of schemas is some 16k tokens of prompt,
            // already more than SmolLM2's context, so larger requests can only fail later.
            max_tools: 64,
            max_tool_schema_bytes: 64 * 1024,
            // Each adapter has its own engine and KV caches; the base under them is shared.
            max_lora_adapters: 2,
            // A 1B model in f32, with room; the load itself holds the base in f32 besides.
            max_weights_bytes: 4096 * MIB,
            // Trainers compare served logprobs with their own, so the default serves theirs.
            trained_precision: TrainedPrecision::F32,
            base_precision: Precision::Quantized,
            per_caller_applies: false,
            quotas: Arc::default(),
            running: Arc::new(Slots::new(2)),
        }
    }
}

/// Replaces a default with the value given by a flag or variable, if any.
fn given<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

impl InferenceLimits {
    pub fn resolve(args: &InferenceLimitArgs) -> anyhow::Result<Self> {
        let mut limits = Self::default();
        let mib = |given: Option<u64>| given.map(|mib| mib.saturating_mul(MIB));
        given(&mut limits.max_n, args.inference_max_n);
        given(
            &mut limits.kv_budget_bytes,
            mib(args.inference_kv_budget_mib),
        );
        given(&mut limits.max_stop_strings, args.inference_max_stop);
        given(&mut limits.max_stop_bytes, args.inference_max_stop_bytes);
        given(
            &mut limits.tokens_per_minute,
            args.inference_tokens_per_minute,
        );
        // A minute's worth unless given: the burst follows the rate.
        limits.burst_tokens = args
            .inference_burst_tokens
            .unwrap_or(limits.tokens_per_minute);
        given(&mut limits.quota_callers, args.inference_quota_callers);
        given(&mut limits.max_in_flight, args.inference_max_in_flight);
        given(&mut limits.per_caller, args.inference_per_caller);
        given(&mut limits.max_tools, args.inference_max_tools);
        given(
            &mut limits.max_tool_schema_bytes,
            args.inference_max_tool_schema_bytes,
        );
        given(
            &mut limits.max_lora_adapters,
            args.inference_max_lora_adapters,
        );
        given(
            &mut limits.max_weights_bytes,
            mib(args.inference_max_weights_mib),
        );
        given(
            &mut limits.trained_precision,
            args.inference_trained_precision,
        );
        given(
            &mut limits.base_precision,
            args.inference_base_precision.map(Precision::from),
        );
        limits.check()?;
        Ok(limits)
    }

    /// Refuses settings that would turn a route off or exceed what the engine can do.
    fn check(&self) -> anyhow::Result<()> {
        if !(1..=MAX_CHOICES).contains(&self.max_n) {
            bail!("--inference-max-n must be between 1 and {MAX_CHOICES}");
        }
        let at_least_one = [
            ("--inference-kv-budget-mib", self.kv_budget_bytes),
            ("--inference-max-stop-bytes", self.max_stop_bytes as u64),
            ("--inference-tokens-per-minute", self.tokens_per_minute),
            ("--inference-burst-tokens", self.burst_tokens),
            ("--inference-quota-callers", self.quota_callers as u64),
            ("--inference-max-in-flight", self.max_in_flight as u64),
            ("--inference-per-caller", self.per_caller as u64),
            ("--inference-max-tools", self.max_tools as u64),
            (
                "--inference-max-tool-schema-bytes",
                self.max_tool_schema_bytes as u64,
            ),
            ("--inference-max-weights-mib", self.max_weights_bytes),
        ];
        for (flag, value) in at_least_one {
            if value == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        Ok(())
    }

    /// The same limits with no caller seen yet: each server keeps its own balances, even when
    /// one configuration builds several (as tests do). `accounts`: whether callers are told apart
    /// by their credentials, which the per-caller concurrency limit needs.
    pub fn for_new_server(&self, accounts: bool) -> Self {
        Self {
            quotas: Arc::default(),
            running: Arc::new(Slots::new(self.per_caller.max(1))),
            per_caller_applies: accounts,
            ..self.clone()
        }
    }

    /// The engine's share: `max_in_flight` requests in all, of which the engine's default number
    /// run at once (each running one holds a KV cache) and the rest wait.
    pub fn engine_options(&self) -> EngineOptions {
        let defaults = EngineOptions::default();
        let max_active = defaults.max_active.min(self.max_in_flight).max(1);
        EngineOptions {
            max_active,
            queue: self.max_in_flight.saturating_sub(max_active),
            precision: self.base_precision,
            ..defaults
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        limits: InferenceLimitArgs,
    }

    fn resolve(flags: &[&str]) -> anyhow::Result<InferenceLimits> {
        let cli = Cli::try_parse_from(std::iter::once("lachesis").chain(flags.iter().copied()))?;
        InferenceLimits::resolve(&cli.limits)
    }

    /// Asserts every numeric limit, `expected` in the order `InferenceLimits` declares them and
    /// the two byte sizes in MiB (as their flags take them), naming the one that differs.
    fn assert_limits(limits: &InferenceLimits, expected: [u64; 13]) {
        let actual = [
            ("max_n", limits.max_n as u64, 1),
            ("kv_budget_bytes", limits.kv_budget_bytes, MIB),
            ("max_stop_strings", limits.max_stop_strings as u64, 1),
            ("max_stop_bytes", limits.max_stop_bytes as u64, 1),
            ("tokens_per_minute", limits.tokens_per_minute, 1),
            ("burst_tokens", limits.burst_tokens, 1),
            ("quota_callers", limits.quota_callers as u64, 1),
            ("max_in_flight", limits.max_in_flight as u64, 1),
            ("per_caller", limits.per_caller as u64, 1),
            ("max_tools", limits.max_tools as u64, 1),
            (
                "max_tool_schema_bytes",
                limits.max_tool_schema_bytes as u64,
                1,
            ),
            ("max_lora_adapters", limits.max_lora_adapters as u64, 1),
            ("max_weights_bytes", limits.max_weights_bytes, MIB),
        ];
        for ((name, value, unit), want) in actual.into_iter().zip(expected) {
            assert_eq!(value, want * unit, "{name}");
        }
    }

    #[test]
    fn without_flags_the_defaults_apply() {
        let limits = resolve(&[]).unwrap();
        let expected = [
            64, 2048, 4, 256, 200_000, 200_000, 65_536, 64, 2, 64, 65_536, 2, 4096,
        ];
        assert_limits(&limits, expected);
        assert_eq!(limits.trained_precision, TrainedPrecision::F32);
        let engine = limits.engine_options();
        assert_eq!(engine.max_active + engine.queue, 64);
        assert_eq!(engine.precision, Precision::Quantized);
    }

    #[test]
    fn every_flag_sets_its_limit() {
        let limits = resolve(&[
            "--inference-max-n",
            "8",
            "--inference-kv-budget-mib",
            "100",
            "--inference-max-stop",
            "2",
            "--inference-max-stop-bytes",
            "16",
            "--inference-tokens-per-minute",
            "600",
            "--inference-burst-tokens",
            "50",
            "--inference-quota-callers",
            "10",
            "--inference-max-in-flight",
            "1",
            "--inference-per-caller",
            "3",
            "--inference-max-tools",
            "5",
            "--inference-max-tool-schema-bytes",
            "1000",
            "--inference-max-lora-adapters",
            "0",
            "--inference-max-weights-mib",
            "7",
            "--inference-trained-precision",
            "q8_0",
            "--inference-base-precision",
            "f32",
        ])
        .unwrap();
        assert_limits(&limits, [8, 100, 2, 16, 600, 50, 10, 1, 3, 5, 1000, 0, 7]);
        assert_eq!(limits.trained_precision, TrainedPrecision::Q8_0);
        assert!(resolve(&["--inference-trained-precision", "f16"]).is_err());
        let engine = limits.engine_options();
        assert_eq!((engine.max_active, engine.queue), (1, 0));
        assert_eq!(engine.precision, Precision::F32);
        let stored = resolve(&["--inference-base-precision", "stored"]).unwrap();
        assert_eq!(stored.engine_options().precision, Precision::Stored);
        assert!(resolve(&["--inference-base-precision", "f16"]).is_err());
    }

    #[test]
    fn the_burst_follows_the_rate_unless_given() {
        let limits = resolve(&["--inference-tokens-per-minute", "900"]).unwrap();
        assert_eq!(limits.burst_tokens, 900);
    }

    #[test]
    fn limits_that_would_shut_a_route_or_exceed_the_engine_are_refused() {
        for flags in [
            ["--inference-max-n", "0"],
            ["--inference-max-n", "65"],
            ["--inference-kv-budget-mib", "0"],
            ["--inference-tokens-per-minute", "0"],
            ["--inference-max-in-flight", "0"],
            ["--inference-quota-callers", "0"],
            ["--inference-per-caller", "0"],
            ["--inference-max-tools", "0"],
            ["--inference-max-tool-schema-bytes", "0"],
            ["--inference-max-weights-mib", "0"],
        ] {
            let error = resolve(&flags).unwrap_err().to_string();
            assert!(error.contains(flags[0]), "{flags:?}: {error}");
        }
    }

    #[test]
    fn a_new_server_starts_with_no_caller_balances() {
        let limits = InferenceLimits::default();
        let fresh = limits.for_new_server(false);
        assert!(Arc::ptr_eq(&limits.quotas, &limits.clone().quotas));
        assert!(!Arc::ptr_eq(&limits.quotas, &fresh.quotas));
    }
}
