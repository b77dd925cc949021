//! `lachesis bench api`: load for any Atropos-compatible trajectory API, so ours and atroposlib's
//! `run-api` are measured by the same client in one run.
//!
//! Two measurements per target:
//! 1. ingest: `clients` concurrent posters send `groups` scored groups of `seqs` x `tokens` to
//!    `/scored_data`, gzipped as atroposlib's BaseEnv sends them; groups acknowledged per second.
//! 2. batch: with `queue` groups queued, the latency of `batch_calls` consecutive `/batch` calls
//!    (p50, p90, and the first call, which forms the batches).

pub mod fanout;
pub mod generate;
pub mod mcp;
pub mod protein;
pub mod python_peer;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

#[derive(Debug, Clone, clap::Args)]
pub struct ApiBenchArgs {
    /// Targets as NAME=URL; ratios are reported against the last one (the peer).
    #[arg(long = "target", required = true)]
    pub targets: Vec<String>,
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Groups posted in the ingest measurement.
    #[arg(long, default_value_t = 2000)]
    pub groups: usize,
    #[arg(long, default_value_t = 16)]
    pub seqs: usize,
    #[arg(long, default_value_t = 512)]
    pub tokens: usize,
    /// Groups queued before timing `/batch`.
    #[arg(long, default_value_t = 10_000)]
    pub queue: usize,
    /// Tokens per sequence of the queued groups (smaller keeps the peer's memory in bounds).
    #[arg(long, default_value_t = 512)]
    pub queue_tokens: usize,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 200)]
    pub batch_calls: usize,
    /// A bearer token for one target, as NAME=TOKEN (a server with accounts on); repeatable.
    #[arg(long = "token")]
    pub tokens_by_target: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct TargetReport {
    pub name: String,
    pub groups_per_sec: f64,
    pub batch_first_ms: f64,
    pub batch_p50_ms: f64,
    pub batch_p90_ms: f64,
}

/// A group shaped like real rollouts: pseudo-random token ids below a 50k vocabulary, a quarter of
/// each sequence prompt (masked as -100, logprob 1.0), and full-precision logprobs as Python's
/// `json.dumps` writes them. Regular synthetic data would compress and parse unrealistically well.
fn group_body(seqs: usize, tokens: usize, salt: usize) -> serde_json::Value {
    let prompt = tokens / 4;
    let mut state = (salt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut token_rows = Vec::with_capacity(seqs);
    let mut masks = Vec::with_capacity(seqs);
    let mut logprobs = Vec::with_capacity(seqs);
    for _ in 0..seqs {
        let row: Vec<i64> = (0..tokens).map(|_| (next() % 50_000) as i64).collect();
        masks.push(
            row.iter()
                .enumerate()
                .map(|(i, &t)| if i < prompt { -100 } else { t })
                .collect::<Vec<_>>(),
        );
        let lp: Vec<f64> = (0..tokens)
            .map(|i| {
                let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
                if i < prompt { 1.0 } else { -(u * u * u * 6.0) }
            })
            .collect();
        token_rows.push(row);
        logprobs.push(lp);
    }
    let scores: Vec<f64> = (0..seqs)
        .map(|s| {
            if (s + salt).is_multiple_of(3) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    json!({"tokens": token_rows, "masks": masks, "scores": scores, "inference_logprobs": logprobs, "env_id": 0})
}

/// Gzips like atroposlib's `_post_json_with_compression` (level 9), only when that is smaller.
fn encode(value: &serde_json::Value) -> (Vec<u8>, bool) {
    let raw = serde_json::to_vec(value).expect("plain JSON");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&raw).expect("in-memory write");
    let packed = enc.finish().expect("in-memory write");
    if packed.len() < raw.len() {
        (packed, true)
    } else {
        (raw, false)
    }
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let mut req = client.request(method, &url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.with_context(|| format!("calling {url}"))?;
    let status = resp.status();
    let text = resp.text().await?;
    if !status.is_success() {
        bail!("{url} answered {status}: {text}");
    }
    Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
}

/// Resets the target and registers a trainer and one env (group size `seqs`).
async fn prepare(client: &reqwest::Client, base: &str, args: &ApiBenchArgs) -> anyhow::Result<()> {
    use reqwest::Method;
    call(client, Method::GET, format!("{base}/reset_data"), None).await?;
    let registration = json!({
        "wandb_group": "bench", "wandb_project": "bench", "batch_size": args.batch_size,
        "max_token_len": args.tokens.max(args.queue_tokens), "checkpoint_dir": "/tmp/bench",
        "save_checkpoint_interval": 100, "starting_step": 0, "num_steps": 1_000_000,
    });
    call(
        client,
        Method::POST,
        format!("{base}/register"),
        Some(registration),
    )
    .await?;
    call(client, Method::GET, format!("{base}/batch"), None).await?;
    let env = json!({"max_token_length": args.tokens, "desired_name": "bench", "weight": 1.0, "group_size": args.seqs});
    let answer = call(
        client,
        Method::POST,
        format!("{base}/register-env"),
        Some(env),
    )
    .await?;
    if answer["status"] != "success" {
        bail!("{base} did not register the env: {answer}");
    }
    Ok(())
}

async fn measure_ingest(
    client: &reqwest::Client,
    base: &str,
    args: &ApiBenchArgs,
) -> anyhow::Result<f64> {
    let bodies: Arc<Vec<(Vec<u8>, bool)>> = Arc::new(
        (0..64)
            .map(|salt| encode(&group_body(args.seqs, args.tokens, salt)))
            .collect(),
    );
    prepare(client, base, args).await?;
    let per_client = args.groups.div_ceil(args.clients);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..args.clients {
        let (client, bodies, url) = (
            client.clone(),
            bodies.clone(),
            format!("{base}/scored_data"),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                let (body, gz) = &bodies[(c * per_client + i) % bodies.len()];
                let mut req = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone());
                if *gz {
                    req = req.header("content-encoding", "gzip");
                }
                let resp = req.send().await?;
                if !resp.status().is_success() {
                    bail!("posting a group answered {}", resp.status());
                }
                resp.bytes().await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok((per_client * args.clients) as f64 / started.elapsed().as_secs_f64())
}

async fn measure_batch(
    client: &reqwest::Client,
    base: &str,
    args: &ApiBenchArgs,
) -> anyhow::Result<(f64, f64, f64)> {
    let chunk = 50;
    let chunks: Vec<Vec<u8>> = (0..8)
        .map(|salt| {
            let list: Vec<serde_json::Value> = (0..chunk)
                .map(|i| group_body(args.seqs, args.queue_tokens, salt * chunk + i))
                .collect();
            encode(&serde_json::Value::Array(list)).0
        })
        .collect();
    prepare(client, base, args).await?;
    let mut posted = 0;
    let mut round = 0;
    while posted < args.queue {
        let resp = client
            .post(format!("{base}/scored_data_list"))
            .header("content-type", "application/json")
            .header("content-encoding", "gzip")
            .body(chunks[round % chunks.len()].clone())
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("queueing groups answered {}", resp.status());
        }
        resp.bytes().await?;
        posted += chunk;
        round += 1;
    }
    let mut times = Vec::with_capacity(args.batch_calls);
    for _ in 0..args.batch_calls {
        let started = Instant::now();
        let resp = client.get(format!("{base}/batch")).send().await?;
        let body = resp.bytes().await?;
        times.push(started.elapsed());
        // Both servers write `{"batch":null}` compactly; a real batch is never parsed, so parsing
        // cost on the client side does not blur the comparison.
        if body.len() < 32 && body.starts_with(b"{\"batch\":null") {
            break;
        }
    }
    let first = times.first().copied().unwrap_or_default();
    let mut sorted = times.clone();
    sorted.sort();
    let pick = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok((ms(first), ms(pick(0.5)), ms(pick(0.9))))
}

pub async fn run_api_bench(args: ApiBenchArgs) -> anyhow::Result<Vec<TargetReport>> {
    let mut reports = Vec::new();
    for target in &args.targets {
        let (name, url) = target.split_once('=').context("targets are NAME=URL")?;
        let mut headers = reqwest::header::HeaderMap::new();
        for given in &args.tokens_by_target {
            let (for_name, token) = given.split_once('=').context("tokens are NAME=TOKEN")?;
            if for_name == name {
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    format!("Bearer {token}").parse()?,
                );
            }
        }
        // uvicorn closes idle keep-alive connections after 5 s; never reuse one that old.
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(args.clients * 2)
            .pool_idle_timeout(Duration::from_secs(2))
            .default_headers(headers)
            .build()?;
        let base = url.trim_end_matches('/');
        eprintln!(
            "[{name}] ingest: {} groups of {}x{} from {} clients",
            args.groups, args.seqs, args.tokens, args.clients
        );
        let groups_per_sec = measure_ingest(&client, base, &args).await?;
        eprintln!(
            "[{name}] {groups_per_sec:.1} groups/s; queueing {} groups for /batch",
            args.queue
        );
        let (first, p50, p90) = measure_batch(&client, base, &args).await?;
        eprintln!("[{name}] /batch first {first:.2} ms, p50 {p50:.2} ms, p90 {p90:.2} ms");
        reports.push(TargetReport {
            name: name.to_string(),
            groups_per_sec,
            batch_first_ms: first,
            batch_p50_ms: p50,
            batch_p90_ms: p90,
        });
    }
    Ok(reports)
}

pub fn print_reports(reports: &[TargetReport]) {
    println!(
        "{:<12} {:>12} {:>14} {:>12} {:>12}",
        "target", "groups/s", "/batch first", "/batch p50", "/batch p90"
    );
    for r in reports {
        println!(
            "{:<12} {:>12.1} {:>11.2} ms {:>9.2} ms {:>9.2} ms",
            r.name, r.groups_per_sec, r.batch_first_ms, r.batch_p50_ms, r.batch_p90_ms
        );
    }
    if let Some(peer) = reports.last() {
        for r in &reports[..reports.len() - 1] {
            println!(
                "{} vs {}: ingest {:.2}x, /batch p50 {:.1}x lower, first /batch {:.1}x lower",
                r.name,
                peer.name,
                r.groups_per_sec / peer.groups_per_sec,
                peer.batch_p50_ms / r.batch_p50_ms,
                peer.batch_first_ms / r.batch_first_ms
            );
        }
    }
}

/// `lachesis bench codec`: where one ingested group's server time goes, stage by stage (µs per
/// group of `seqs` x `tokens`, median of `rounds`). The typed decode and encode are shown for
/// comparison with the fast path the server takes.
pub fn run_codec_bench(seqs: usize, tokens: usize, rounds: usize) {
    use crate::trajectory::{body, canonical, store};
    use lachesis_shared::atropos::ScoredData;
    let (gz, _) = encode(&group_body(seqs, tokens, 1));
    let mut stages: Vec<(&str, Vec<f64>)> = [
        "gunzip",
        "check (fast path)",
        "zstd",
        "typed decode",
        "typed encode",
    ]
    .into_iter()
    .map(|name| (name, Vec::new()))
    .collect();
    let mut stored_len = 0;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let json = body::gunzip(&gz, usize::MAX / 2).expect("valid gzip");
        stages[0].1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let checked = canonical::fast_group(&json).expect("a valid group");
        stages[1].1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let stored = store::encode_payload(&checked.json);
        stages[2].1.push(t.elapsed().as_secs_f64());
        stored_len = stored.len();
        let t = Instant::now();
        let group: ScoredData = body::decode_json(&json).expect("a valid group");
        stages[3].1.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(serde_json::to_vec(&group).expect("plain JSON"));
        stages[4].1.push(t.elapsed().as_secs_f64());
    }
    println!(
        "group of {seqs}x{tokens}: {} bytes gzipped, {stored_len} bytes stored",
        gz.len()
    );
    for (name, mut times) in stages {
        times.sort_by(f64::total_cmp);
        println!("{name:<18} {:>8.1} µs", times[times.len() / 2] * 1e6);
    }
}
