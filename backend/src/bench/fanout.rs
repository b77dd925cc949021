//! `lachesis bench fanout`: how the live hub holds up with many watchers.
//!
//! For each client count N: N WebSocket clients subscribe to one run's topic, then events are
//! published at a fixed rate (30 Hz by default) through the real path — a trainer's
//! `POST /runs/{run}/trainer-metrics`, which commits, notifies Postgres, comes back through the
//! bridge and fans out to every socket (or `--via notify`: `live::publish` on the database, skipping
//! HTTP). Each event's step indexes the instant it was sent, so every delivery's latency is measured
//! on this process's monotonic clock. The server's resident memory is read from
//! `/proc/<pid>/status` before the clients connect, once they are connected, and at its peak while
//! events flow.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use lachesis_shared::live::{ClientMsg, LiveEvent, ServerMsg, Topic};
use lachesis_shared::runs::{TrainerPoint, TrainerReport};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// `POST /runs/{run}/trainer-metrics`, as a trainer reports.
    Http,
    /// `live::publish` straight on the database.
    Notify,
}

#[derive(Debug, Clone, clap::Args)]
pub struct FanoutBenchArgs {
    /// The server's root URL.
    #[arg(long, default_value = "http://127.0.0.1:18310")]
    pub url: String,
    /// The server's database (needed for `--via notify`).
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
    /// The server's process id, to read its resident memory.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Client counts, one round each.
    #[arg(long = "clients", default_values_t = [100, 1000])]
    pub clients: Vec<usize>,
    /// Events per second.
    #[arg(long, default_value_t = 30.0)]
    pub rate: f64,
    /// Seconds of publishing per round.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    #[arg(long, value_enum, default_value_t = Via::Http)]
    pub via: Via,
    /// Clients connecting at once.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
}

#[derive(Debug, Clone)]
pub struct FanoutReport {
    pub clients: usize,
    pub events: usize,
    pub deliveries: u64,
    pub missing: u64,
    pub lag_notices: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Per event, its first delivery: the publish path (HTTP, commit, NOTIFY, bridge) alone.
    pub first_p50_ms: f64,
    /// Per event, last delivery minus first: the cost of fanning out to every socket.
    pub spread_p50_ms: f64,
    pub spread_p99_ms: f64,
    pub rss_idle_kib: Option<u64>,
    pub rss_connected_kib: Option<u64>,
    pub rss_peak_kib: Option<u64>,
    /// The server's CPU time while publishing, as a share of one core.
    pub server_cpu_pct: Option<f64>,
    /// This process's (the clients') CPU over the same time: on one machine they compete.
    pub clients_cpu_pct: Option<f64>,
}

/// What one client saw: (event index, latency in µs) per delivery.
#[derive(Default)]
struct Seen {
    deliveries: Vec<(u32, u32)>,
    lag_notices: u64,
}

pub async fn run_fanout_bench(args: FanoutBenchArgs) -> anyhow::Result<Vec<FanoutReport>> {
    let base = args.url.trim_end_matches('/').to_string();
    let ws_url = format!(
        "{}/ws",
        base.replacen("http://", "ws://", 1)
            .replacen("https://", "wss://", 1)
    );
    let db = match (&args.via, &args.database_url) {
        (Via::Notify, Some(url)) => Some(crate::db::connect(url, 4).await?),
        (Via::Notify, None) => bail!("--via notify needs --database-url or DATABASE_URL"),
        (Via::Http, _) => None,
    };
    let http = reqwest::Client::new();
    let mut reports = Vec::new();
    // Steps never repeat across rounds, so a late delivery from one round cannot count in the next.
    let mut next_step = 0i64;
    for (round, &n) in args.clients.iter().enumerate() {
        let run = format!("bench-fanout-{}-{round}", std::process::id());
        let topic = Topic::Run { run: run.clone() };
        let rss_idle = rss_kib(args.server_pid);
        eprintln!("[{n} clients] connecting");
        let sockets = connect_all(&ws_url, &topic, n, args.connect_concurrency).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_connected = rss_kib(args.server_pid);

        let events = (args.rate * args.seconds as f64).round() as usize;
        let sent: Arc<[OnceLock<Instant>]> = (0..events).map(|_| OnceLock::new()).collect();
        let first_step = next_step;
        next_step += events as i64;
        let (stop_tx, stop_rx) = watch::channel(false);
        let readers: Vec<_> = sockets
            .into_iter()
            .map(|ws| tokio::spawn(read(ws, sent.clone(), first_step, stop_rx.clone())))
            .collect();

        eprintln!(
            "[{n} clients] publishing {events} events at {} Hz",
            args.rate
        );
        let sampler = tokio::spawn(sample_peak_rss(args.server_pid, stop_rx.clone()));
        let own_pid = Some(std::process::id());
        let (cpu_before, own_before) = (cpu_seconds(args.server_pid), cpu_seconds(own_pid));
        let publishing = Instant::now();
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        for (i, slot) in sent.iter().enumerate() {
            ticks.tick().await;
            let step = first_step + i as i64;
            let _ = slot.set(Instant::now());
            publish(&http, &base, &run, db.as_ref(), &topic, step).await?;
        }
        let share = |after: Option<f64>, before: Option<f64>| {
            let seconds = publishing.elapsed().as_secs_f64();
            after.zip(before).map(|(a, b)| (a - b) / seconds * 100.0)
        };
        let server_cpu_pct = share(cpu_seconds(args.server_pid), cpu_before);
        let clients_cpu_pct = share(cpu_seconds(own_pid), own_before);
        // Stragglers get a moment before the clients stop listening.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let _ = stop_tx.send(true);
        let rss_peak = sampler.await.unwrap_or(None);

        let mut all = Vec::with_capacity(n * events);
        let mut first = vec![u32::MAX; events];
        let mut last = vec![0u32; events];
        let mut lag_notices = 0;
        for reader in readers {
            let seen = reader.await.context("a client task")??;
            lag_notices += seen.lag_notices;
            for (i, us) in seen.deliveries {
                let i = i as usize;
                first[i] = first[i].min(us);
                last[i] = last[i].max(us);
                all.push(us);
            }
        }
        let delivered = |f: &&u32| **f != u32::MAX;
        let mut first_delivery: Vec<u32> = first.iter().filter(delivered).copied().collect();
        let mut spread: Vec<u32> = first
            .iter()
            .zip(&last)
            .filter(|(f, _)| delivered(f))
            .map(|(f, l)| l - f)
            .collect();
        let expected = (n * events) as u64;
        let report = FanoutReport {
            clients: n,
            events,
            deliveries: all.len() as u64,
            missing: expected.saturating_sub(all.len() as u64),
            lag_notices,
            p50_ms: quantile_ms(&mut all, 0.5),
            p99_ms: quantile_ms(&mut all, 0.99),
            max_ms: quantile_ms(&mut all, 1.0),
            first_p50_ms: quantile_ms(&mut first_delivery, 0.5),
            spread_p50_ms: quantile_ms(&mut spread, 0.5),
            spread_p99_ms: quantile_ms(&mut spread, 0.99),
            rss_idle_kib: rss_idle,
            rss_connected_kib: rss_connected,
            rss_peak_kib: rss_peak.max(rss_connected),
            server_cpu_pct,
            clients_cpu_pct,
        };
        eprintln!(
            "[{n} clients] p50 {:.2} ms, p99 {:.2} ms, {} missing; first delivery p50 {:.2} ms, \
             fan-out spread p50 {:.2} ms, p99 {:.2} ms",
            report.p50_ms,
            report.p99_ms,
            report.missing,
            report.first_p50_ms,
            report.spread_p50_ms,
            report.spread_p99_ms
        );
        reports.push(report);
        // Let the server notice the closed sockets before the next round measures its memory.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(reports)
}

/// Tungstenite zeroes its whole read buffer (128 KiB by default) before every socket read: with
/// small frames that memset was 70% of the clients' CPU. 4 KiB holds any frame of this benchmark.
fn client_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096)
}

/// The `q` quantile of microsecond samples, in milliseconds (NaN when there are none).
fn quantile_ms(samples: &mut [u32], q: f64) -> f64 {
    samples.sort_unstable();
    samples
        .get(((samples.len() as f64 - 1.0) * q).round() as usize)
        .map_or(f64::NAN, |&us| f64::from(us) / 1000.0)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects `n` clients, each subscribed (its `subscribed` reply read) before this returns.
async fn connect_all(
    url: &str,
    topic: &Topic,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<Socket>> {
    let subscribe = serde_json::to_string(&ClientMsg::Subscribe {
        topic: topic.clone(),
    })?;
    futures::stream::iter(0..n)
        .map(|_| {
            let subscribe = subscribe.clone();
            async move {
                let (mut ws, _) =
                    tokio_tungstenite::connect_async_with_config(url, Some(client_config()), false)
                        .await
                        .with_context(|| {
                            format!("connecting to {url} (is `ulimit -n` high enough?)")
                        })?;
                ws.send(Message::text(subscribe)).await?;
                loop {
                    let frame = tokio::time::timeout(Duration::from_secs(30), ws.next())
                        .await
                        .context("no reply to subscribe")?
                        .context("closed while subscribing")??;
                    if let Message::Text(text) = frame
                        && let ServerMsg::Subscribed { .. } = serde_json::from_str(&text)?
                    {
                        return anyhow::Ok(ws);
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

async fn read(
    mut ws: Socket,
    sent: Arc<[OnceLock<Instant>]>,
    first_step: i64,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Seen> {
    let mut seen = Seen::default();
    loop {
        let frame = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            frame = ws.next() => frame,
        };
        let received = Instant::now();
        let Some(frame) = frame else { break };
        let Message::Text(text) = frame? else {
            continue;
        };
        // Only the frame's type and the event's step are decoded: the clients share this
        // machine's cores with the server, so they should spend as little as they can.
        let frame: FrameHead = serde_json::from_str(&text)?;
        match (frame.kind, frame.event) {
            ("event", Some(EventHead { step: Some(step) })) => {
                let index = usize::try_from(step - first_step).ok();
                let sent_at = index.and_then(|i| Some((i, sent.get(i)?.get()?)));
                if let Some((index, sent_at)) = sent_at {
                    let us = received.saturating_duration_since(*sent_at).as_micros();
                    let us = u32::try_from(us).unwrap_or(u32::MAX - 1);
                    seen.deliveries.push((index as u32, us));
                }
            }
            ("lagged", _) => seen.lag_notices += 1,
            _ => {}
        }
    }
    let _ = ws.close(None).await;
    Ok(seen)
}

/// The parts of a `ServerMsg` frame the clients look at; the rest is skipped unread.
#[derive(serde::Deserialize)]
struct FrameHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
    #[serde(default)]
    event: Option<EventHead>,
}

#[derive(serde::Deserialize)]
struct EventHead {
    #[serde(default)]
    step: Option<i64>,
}

async fn publish(
    http: &reqwest::Client,
    base: &str,
    run: &str,
    db: Option<&sqlx::PgPool>,
    topic: &Topic,
    step: i64,
) -> anyhow::Result<()> {
    let values = [("loss".to_string(), 1.0 / (step as f64 + 1.0))].into();
    match db {
        Some(db) => {
            let at_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis() as i64;
            let event = LiveEvent::Trainer(TrainerPoint {
                at_ms,
                step,
                values,
            });
            crate::live::publish(db, topic, &event).await?;
        }
        None => {
            let url = format!("{base}/runs/{run}/trainer-metrics");
            let resp = http
                .post(&url)
                .json(&TrainerReport { step, values })
                .send()
                .await
                .with_context(|| format!("POST {url}"))?;
            if !resp.status().is_success() {
                bail!("{url} answered {}", resp.status());
            }
        }
    }
    Ok(())
}

/// The process's user + system CPU time in seconds, from `/proc/<pid>/stat` (Linux's USER_HZ is
/// 100 on every architecture it exposes to user space).
fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command name (which may contain spaces) start at `state`, field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<f64>().ok();
    Some((ticks(14)? + ticks(15)?) / 100.0)
}

/// The process's resident set (VmRSS) in KiB, if it can be read.
fn rss_kib(pid: Option<u32>) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

async fn sample_peak_rss(pid: Option<u32>, mut stop: watch::Receiver<bool>) -> Option<u64> {
    let mut peak = rss_kib(pid);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return peak,
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                peak = peak.max(rss_kib(pid));
            }
        }
    }
}

pub fn print_fanout_reports(reports: &[FanoutReport]) {
    let mib =
        |kib: Option<u64>| kib.map_or("-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0));
    println!(
        "{:>8} {:>7} {:>11} {:>8} {:>7} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>12} {:>11}",
        "clients",
        "events",
        "deliveries",
        "missing",
        "lagged",
        "p50 ms",
        "p99 ms",
        "max ms",
        "RSS idle",
        "RSS conn.",
        "RSS peak",
        "KiB/client",
        "server CPU"
    );
    for r in reports {
        let per_client = match (r.rss_idle_kib, r.rss_peak_kib) {
            (Some(idle), Some(peak)) => format!(
                "{:.1}",
                peak.saturating_sub(idle) as f64 / r.clients.max(1) as f64
            ),
            _ => "-".into(),
        };
        println!(
            "{:>8} {:>7} {:>11} {:>8} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>10} {:>10} {:>10} {:>12} {:>11}",
            r.clients,
            r.events,
            r.deliveries,
            r.missing,
            r.lag_notices,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            mib(r.rss_idle_kib),
            mib(r.rss_connected_kib),
            mib(r.rss_peak_kib),
            per_client,
            r.server_cpu_pct
                .map_or("-".to_string(), |pct| format!("{pct:.0}%"))
        );
    }
    println!(
        "(RSS in MiB; KiB/client = (peak - idle) / clients; server CPU while publishing, 100% = one core)"
    );
    for r in reports {
        println!(
            "{} clients: an event's first delivery p50 {:.2} ms; its last minus first delivery p50 {:.2} ms, p99 {:.2} ms; the clients' own CPU {}",
            r.clients,
            r.first_p50_ms,
            r.spread_p50_ms,
            r.spread_p99_ms,
            r.clients_cpu_pct
                .map_or("-".to_string(), |pct| format!("{pct:.0}%"))
        );
    }
}
