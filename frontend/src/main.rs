//! The Lachesis browser page: a title, a one-line description and the live
//! status of the default run, polled from the backend every two seconds.

use std::time::Duration;

use gloo_net::http::Request;
use lachesis_shared::status::{RunInfo, RunStatus};
use leptos::prelude::*;
use serde::de::DeserializeOwned;

/// How often the page asks the backend for fresh numbers.
const REFRESH: Duration = Duration::from_secs(2);

/// One poll of the backend: what the trainer registered and where the run is.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    info: RunInfo,
    status: RunStatus,
}

/// `GET path` with `Accept: application/json`, decoded as `T`; the error is a
/// short sentence fit to show on the page.
async fn get_json<T: DeserializeOwned>(path: &str) -> Result<T, String> {
    let response = Request::get(path)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("GET {path} failed: {e}"))?;
    if !response.ok() {
        return Err(format!(
            "GET {path} answered HTTP {} {}",
            response.status(),
            response.status_text()
        ));
    }
    response
        .json::<T>()
        .await
        .map_err(|e| format!("GET {path} returned unexpected JSON: {e}"))
}

async fn fetch_snapshot() -> Result<Snapshot, String> {
    let info = get_json::<RunInfo>("/info").await?;
    let status = get_json::<RunStatus>("/status").await?;
    Ok(Snapshot { info, status })
}

/// A registered value, or a dash while the trainer has not registered (−1).
fn registered(value: i64) -> String {
    if value < 0 {
        "—".to_owned()
    } else {
        value.to_string()
    }
}

#[component]
fn Stat(label: &'static str, value: String) -> impl IntoView {
    view! {
        <div class="stat">
            <dt>{label}</dt>
            <dd>{value}</dd>
        </div>
    }
}

#[component]
fn RunPanel() -> impl IntoView {
    let snapshot = LocalResource::new(fetch_snapshot);
    // The last good numbers stay on screen while an error is shown.
    let (last_good, set_last_good) = signal(None::<Snapshot>);

    Effect::new(move |_| {
        if let Some(Ok(s)) = snapshot.get() {
            set_last_good.set(Some(s));
        }
    });

    if let Ok(handle) = set_interval_with_handle(move || snapshot.refetch(), REFRESH) {
        on_cleanup(move || handle.clear());
    }

    let error = move || match snapshot.get() {
        Some(Err(message)) => Some(view! {
            <p class="error" role="alert">"Cannot read the run status: " {message}</p>
        }),
        _ => None,
    };

    let numbers = move || match last_good.get() {
        // Nothing yet: "Loading…" until the first answer, or just the error line below.
        None => (!matches!(snapshot.get(), Some(Err(_))))
            .then(|| view! { <p class="muted">"Loading…"</p> })
            .into_any(),
        Some(Snapshot { info, status }) => {
            let registered_note = (info.batch_size < 0)
                .then(|| view! { <p class="muted">"No trainer has registered yet."</p> });
            view! {
                <dl class="stats">
                    <Stat label="Current step" value=status.current_step.to_string() />
                    <Stat label="Queue size" value=status.queue_size.to_string() />
                    <Stat label="Batch size" value=registered(info.batch_size) />
                    <Stat label="Max token length" value=registered(info.max_token_len) />
                </dl>
                {registered_note}
            }
            .into_any()
        }
    };

    view! {
        <section class="card" aria-live="polite">
            <h2>"Default run"</h2>
            {numbers}
            {error}
            <p class="muted small">"Refreshed every 2 s from /info and /status."</p>
        </section>
    }
}

#[component]
fn App() -> impl IntoView {
    view! {
        <main>
            <header>
                <h1>"Lachesis"</h1>
                <p class="tagline">
                    "An Atropos-compatible trajectory API: environments push scored rollouts, trainers pull batches."
                </p>
            </header>
            <RunPanel />
        </main>
    }
}

fn main() {
    console_error_panic_hook::set_once();
    mount_to_body(App);
}

#[cfg(test)]
mod tests {
    use super::registered;

    #[test]
    fn unregistered_values_show_a_dash() {
        assert_eq!(registered(-1), "—");
        assert_eq!(registered(0), "0");
        assert_eq!(registered(2048), "2048");
    }
}
