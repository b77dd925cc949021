//! The pool's own logic (retries, backoff, balancing, limits) against tiny axum servers on
//! 127.0.0.1:0 whose answers each test scripts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use super::*;

/// Backoff short enough that retry tests take milliseconds.
const FAST: Backoff = Backoff {
    base: Duration::from_millis(1),
    max: Duration::from_millis(5),
    failures_before_cooldown: 1,
    cooldown: Duration::from_secs(60),
};

async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// A server that answers with the scripted statuses in turn, then 200 "ok", counting requests.
#[derive(Clone, Default)]
struct Scripted {
    statuses: Arc<Mutex<VecDeque<u16>>>,
    hits: Arc<AtomicUsize>,
    delay: Duration,
}

impl Scripted {
    fn new(statuses: &[u16]) -> Self {
        Self {
            statuses: Arc::new(Mutex::new(statuses.iter().copied().collect())),
            ..Self::default()
        }
    }

    fn slow(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    async fn start(&self) -> String {
        async fn answer(State(s): State<Scripted>) -> (StatusCode, String) {
            s.hits.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(s.delay).await;
            let next = s.statuses.lock().expect("not poisoned").pop_front();
            let status = next
                .and_then(|code| StatusCode::from_u16(code).ok())
                .unwrap_or(StatusCode::OK);
            let body = if status.is_success() {
                "ok".to_owned()
            } else {
                "x".repeat(1000)
            };
            (status, body)
        }
        serve(
            Router::new()
                .route("/generate", post(answer))
                .with_state(self.clone()),
        )
        .await
    }
}

fn pool(urls: Vec<String>, max_retries: u32) -> ServerPool {
    ServerPool::new(ServerPoolConfig {
        base_urls: urls,
        max_retries,
        timeout: Duration::from_secs(5),
        ..ServerPoolConfig::default()
    })
    .expect("a valid configuration")
    .with_backoff(FAST)
}

/// An address nothing listens on: bind a port, then free it.
async fn dead_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("a bound address");
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retried_until_success() {
    let server = Scripted::new(&[503, 429, 500]);
    let url = server.start().await;
    let answer = pool(vec![url], 3)
        .post_json("/generate", &serde_json::json!({}))
        .await;
    assert_eq!(answer.expect("the fourth attempt succeeds").as_ref(), b"ok");
    assert_eq!(server.hits(), 4);
}

#[tokio::test]
async fn client_errors_are_returned_at_once_with_a_bounded_quote_of_the_body() {
    let server = Scripted::new(&[400]);
    let url = server.start().await;
    let err = pool(vec![url], 3)
        .post_json("/generate", &serde_json::json!({}))
        .await
        .expect_err("a 400 is final");
    assert_eq!(server.hits(), 1);
    let message = err.to_string();
    assert!(matches!(err, PolicyError::Server(_)), "{message}");
    assert!(message.contains("400"), "{message}");
    assert!(
        message.len() < 600,
        "the 1000-byte body is quoted in part: {message}"
    );
}

#[tokio::test]
async fn the_pool_gives_up_after_max_retries() {
    let server = Scripted::new(&[500; 10]);
    let url = server.start().await;
    let pool = pool(vec![url], 2);
    let err = pool
        .post_json("/generate", &serde_json::json!({}))
        .await
        .expect_err("every attempt fails");
    assert_eq!(server.hits(), 3, "one attempt and two retries");
    assert!(err.to_string().contains("500"), "{err}");
    let status = &pool.status()[0];
    assert_eq!(status.consecutive_failures, 3);
    assert!(status.cooling_down);
}

#[tokio::test]
async fn slow_answers_time_out_and_are_retried() {
    let server = Scripted::slow(Duration::from_secs(30));
    let url = server.start().await;
    let pool = ServerPool::new(ServerPoolConfig {
        base_urls: vec![url],
        timeout: Duration::from_millis(100),
        max_retries: 1,
        ..ServerPoolConfig::default()
    })
    .expect("a valid configuration")
    .with_backoff(FAST);
    let err = pool
        .post_json("/generate", &serde_json::json!({}))
        .await
        .expect_err("the server never answers in time");
    assert!(
        matches!(err, PolicyError::Timeout(t) if t == Duration::from_millis(100)),
        "{err}"
    );
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_dead_server_is_skipped_and_cools_down() {
    let live = Scripted::default();
    let urls = vec![dead_url().await, live.start().await];
    let pool = pool(urls, 3);
    for _ in 0..4 {
        let answer = pool.post_json("/generate", &serde_json::json!({})).await;
        assert_eq!(answer.expect("the live server answers").as_ref(), b"ok");
    }
    assert_eq!(live.hits(), 4);
    let dead = &pool.status()[0];
    assert_eq!(
        dead.consecutive_failures, 1,
        "tried once, then left alone: {dead:?}"
    );
    assert!(dead.cooling_down);
    assert!(!pool.status()[1].cooling_down);
}

#[tokio::test]
async fn connection_errors_are_typed_server_errors_naming_the_cause() {
    let pool = pool(vec![dead_url().await], 1);
    let err = pool
        .post_json("/generate", &serde_json::json!({}))
        .await
        .expect_err("nobody listens");
    assert!(matches!(err, PolicyError::Server(_)), "{err}");
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
}

#[tokio::test]
async fn requests_go_to_the_server_with_the_fewest_in_flight() {
    let busy = Scripted::slow(Duration::from_millis(500));
    let idle = Scripted::default();
    let pool = pool(vec![busy.start().await, idle.start().await], 0);
    // The first request takes the first server (all tied) and stays there for a while...
    let long = tokio::spawn({
        let pool = pool.clone();
        async move { pool.post_json("/generate", &serde_json::json!({})).await }
    });
    while pool.status()[0].in_flight == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // ...so every request meanwhile goes to the idle one, whatever the rotation says.
    for _ in 0..5 {
        pool.post_json("/generate", &serde_json::json!({}))
            .await
            .expect("the idle server answers");
    }
    assert_eq!(idle.hits(), 5);
    long.await
        .expect("the task ran")
        .expect("the slow server answers");
    assert_eq!(busy.hits(), 1);
}

#[tokio::test]
async fn concurrent_requests_spread_evenly_over_idle_servers() {
    let a = Scripted::slow(Duration::from_millis(100));
    let b = Scripted::slow(Duration::from_millis(100));
    let pool = pool(vec![a.start().await, b.start().await], 0);
    let body = serde_json::json!({});
    let answers =
        futures::future::join_all((0..6).map(|_| pool.post_json("/generate", &body))).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!((a.hits(), b.hits()), (3, 3));
}

#[tokio::test]
async fn each_server_runs_at_most_its_concurrency_limit() {
    #[derive(Clone, Default)]
    struct Gauge {
        now: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }
    async fn measured(State(g): State<Gauge>) -> &'static str {
        let now = g.now.fetch_add(1, Ordering::SeqCst) + 1;
        g.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        g.now.fetch_sub(1, Ordering::SeqCst);
        "ok"
    }
    let gauge = Gauge::default();
    let url = serve(
        Router::new()
            .route("/generate", post(measured))
            .with_state(gauge.clone()),
    )
    .await;
    let pool = ServerPool::new(ServerPoolConfig {
        base_urls: vec![url],
        max_concurrent_per_server: 2,
        ..ServerPoolConfig::default()
    })
    .expect("a valid configuration");
    let body = serde_json::json!({});
    let answers =
        futures::future::join_all((0..8).map(|_| pool.post_json("/generate", &body))).await;
    assert!(answers.iter().all(Result::is_ok));
    assert_eq!(gauge.peak.load(Ordering::SeqCst), 2);
    assert_eq!(
        pool.status()[0].in_flight,
        0,
        "finished requests are no longer counted"
    );
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_v1_is_dropped_from_the_path() {
    async fn echo(headers: HeaderMap) -> String {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned()
    }
    let url = serve(Router::new().route("/generate", post(echo))).await;
    let pool = ServerPool::new(ServerPoolConfig {
        base_urls: vec![format!("{url}/v1/")],
        api_key: Some("sk-test".into()),
        ..ServerPoolConfig::default()
    })
    .expect("a valid configuration");
    let answer = pool.post_json("/generate", &serde_json::json!({})).await;
    assert_eq!(answer.expect("echoed").as_ref(), b"Bearer sk-test");
}

#[test]
fn configurations_that_cannot_work_are_refused() {
    let with = |urls: &[&str], limit: usize| {
        ServerPool::new(ServerPoolConfig {
            base_urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            max_concurrent_per_server: limit,
            ..ServerPoolConfig::default()
        })
    };
    assert!(with(&[], 4).is_err());
    assert!(with(&["http://localhost:1"], 0).is_err());
    assert!(with(&["ftp://localhost:1"], 4).is_err());
    assert!(with(&["not a url"], 4).is_err());
    assert!(with(&["http://localhost:1", "https://example.com/v1"], 4).is_ok());
}

#[test]
fn server_roots_lose_trailing_slashes_and_v1() {
    assert_eq!(server_root("http://h:8000/v1"), "http://h:8000");
    assert_eq!(server_root("http://h:8000/v1/"), "http://h:8000");
    assert_eq!(server_root(" http://h:8000/ "), "http://h:8000");
    assert_eq!(server_root("https://h/api/v1"), "https://h/api");
    assert_eq!(server_root("https://h/v1beta"), "https://h/v1beta");
}

#[test]
fn backoff_doubles_is_capped_and_jittered_into_the_upper_half() {
    let b = Backoff {
        base: Duration::from_millis(100),
        max: Duration::from_secs(1),
        ..Backoff::default()
    };
    for _ in 0..50 {
        let first = b.delay(0);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        let third = b.delay(2);
        assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
        assert!(b.delay(u32::MAX) <= Duration::from_secs(1));
    }
}

#[test]
fn cooldowns_start_at_the_threshold_and_grow_to_eight_times() {
    let b = Backoff::default();
    assert_eq!(b.cooldown_after(2), None);
    assert_eq!(b.cooldown_after(3), Some(b.cooldown));
    assert_eq!(b.cooldown_after(4), Some(b.cooldown * 2));
    assert_eq!(b.cooldown_after(100), Some(b.cooldown * 8));
}

#[test]
fn the_debug_form_of_a_config_hides_the_api_key() {
    let config = ServerPoolConfig {
        api_key: Some("sk-secret".into()),
        ..ServerPoolConfig::default()
    };
    let shown = format!("{config:?}");
    assert!(!shown.contains("sk-secret"), "{shown}");
    assert!(shown.contains("redacted"), "{shown}");
}
