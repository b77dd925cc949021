//! Generation throughput of OpenAI-compatible servers, side by side: the embedded model against
//! llama.cpp's server on the same GGUF. Each target gets the same prompts; tokens per second count
//! the completion tokens the server reports in `usage`, over the wall time of the whole round.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

#[derive(Debug, Clone, clap::Args)]
pub struct GenerateBenchArgs {
    /// Targets as NAME=URL (the server root); ratios are reported against the last one.
    #[arg(long = "target", required = true)]
    pub targets: Vec<String>,
    /// Concurrent clients per round.
    #[arg(long = "concurrency", default_values_t = [1, 8])]
    pub concurrency: Vec<usize>,
    /// Requests per client per round.
    #[arg(long, default_value_t = 2)]
    pub requests: usize,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// Also time one request for `n` answers to one prompt (a GRPO group) on targets that take `n`.
    #[arg(long, default_value_t = 8)]
    pub group: usize,
}

/// One round's figures for one target.
#[derive(Debug, Clone)]
pub struct RoundReport {
    pub label: String,
    pub completion_tokens: u64,
    pub seconds: f64,
    pub p50_request_seconds: f64,
}

impl RoundReport {
    pub fn tokens_per_second(&self) -> f64 {
        self.completion_tokens as f64 / self.seconds.max(1e-9)
    }
}

const TOPICS: [&str; 8] = [
    "a cat who learns to play chess",
    "the history of the printing press",
    "how rain forms",
    "a lighthouse keeper's long night",
    "why the sky is blue",
    "a robot that paints",
    "the rules of football",
    "a journey across a desert",
];

/// A ChatML prompt (SmolLM2's format) asking for a long answer, so both servers run to max_tokens.
fn prompt(i: usize) -> String {
    format!(
        "<|im_start|>user\nWrite a long, detailed essay about {}.<|im_end|>\n<|im_start|>assistant\n",
        TOPICS[i % TOPICS.len()]
    )
}

async fn complete(
    client: &reqwest::Client,
    base: &str,
    body: &Value,
) -> anyhow::Result<(u64, Duration)> {
    let started = Instant::now();
    let resp = client
        .post(format!("{base}/v1/completions"))
        .json(body)
        .send()
        .await
        .with_context(|| format!("POST {base}/v1/completions"))?;
    let status = resp.status();
    let answer: Value = resp.json().await.context("reading the completion")?;
    anyhow::ensure!(status.is_success(), "{base}: {status} {answer}");
    let tokens = answer["usage"]["completion_tokens"]
        .as_u64()
        .with_context(|| format!("{base}: no usage.completion_tokens in {answer}"))?;
    Ok((tokens, started.elapsed()))
}

async fn round(
    client: &reqwest::Client,
    base: &str,
    clients: usize,
    requests: usize,
    max_tokens: usize,
) -> anyhow::Result<RoundReport> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = client.clone();
        let base = base.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for r in 0..requests {
                let body = json!({
                    "prompt": prompt(c * requests + r),
                    "max_tokens": max_tokens,
                    "temperature": 0.7,
                    "seed": (c * 1000 + r) as u64,
                });
                results.push(complete(&client, &base, &body).await?);
            }
            anyhow::Ok(results)
        }));
    }
    let mut tokens = 0;
    let mut latencies = Vec::new();
    for task in tasks {
        for (t, latency) in task.await?? {
            tokens += t;
            latencies.push(latency.as_secs_f64());
        }
    }
    latencies.sort_by(f64::total_cmp);
    Ok(RoundReport {
        label: format!("{clients} concurrent"),
        completion_tokens: tokens,
        seconds: started.elapsed().as_secs_f64(),
        p50_request_seconds: latencies[latencies.len() / 2],
    })
}

/// One request for `n` answers; `None` when the server ignores `n` (llama.cpp's server does).
async fn group_round(
    client: &reqwest::Client,
    base: &str,
    n: usize,
    max_tokens: usize,
) -> anyhow::Result<Option<RoundReport>> {
    let body = json!({"prompt": prompt(0), "max_tokens": max_tokens, "temperature": 0.7, "n": n});
    let started = Instant::now();
    let resp = client
        .post(format!("{base}/v1/completions"))
        .json(&body)
        .send()
        .await?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    let answer: Value = resp.json().await?;
    if answer["choices"].as_array().map_or(0, Vec::len) != n {
        return Ok(None);
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(Some(RoundReport {
        label: format!("one request, n={n}"),
        completion_tokens: answer["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        seconds,
        p50_request_seconds: seconds,
    }))
}

pub async fn run_generate_bench(
    args: GenerateBenchArgs,
) -> anyhow::Result<Vec<(String, Vec<RoundReport>)>> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3600))
        .build()?;
    let mut reports = Vec::new();
    for target in &args.targets {
        let (name, base) = target
            .split_once('=')
            .with_context(|| format!("--target {target}: expected NAME=URL"))?;
        let base = base.trim_end_matches('/');
        // Warm-up: first-request costs (page faults, allocations) are not generation speed.
        complete(
            &client,
            base,
            &json!({"prompt": prompt(0), "max_tokens": 4}),
        )
        .await?;
        let mut rounds = Vec::new();
        for &clients in &args.concurrency {
            let report = round(&client, base, clients, args.requests, args.max_tokens).await?;
            eprintln!(
                "{name}: {}: {:.1} tokens/s",
                report.label,
                report.tokens_per_second()
            );
            rounds.push(report);
        }
        if args.group > 1
            && let Some(report) = group_round(&client, base, args.group, args.max_tokens).await?
        {
            eprintln!(
                "{name}: {}: {:.1} tokens/s",
                report.label,
                report.tokens_per_second()
            );
            rounds.push(report);
        }
        reports.push((name.to_owned(), rounds));
    }
    Ok(reports)
}

pub fn print_generate_reports(reports: &[(String, Vec<RoundReport>)]) {
    let peer = reports.last();
    println!(
        "| target | round | completion tokens | seconds | tokens/s | p50 request s | vs peer |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, rounds) in reports {
        for round in rounds {
            let ratio = peer
                .and_then(|(_, peer_rounds)| peer_rounds.iter().find(|r| r.label == round.label))
                .map_or("n/a".to_owned(), |p| {
                    format!("{:.2}x", round.tokens_per_second() / p.tokens_per_second())
                });
            println!(
                "| {name} | {} | {} | {:.1} | {:.1} | {:.2} | {ratio} |",
                round.label,
                round.completion_tokens,
                round.seconds,
                round.tokens_per_second(),
                round.p50_request_seconds
            );
        }
    }
}
