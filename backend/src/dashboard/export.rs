//! Exports of a run: `metrics.csv` (one row per number, in long form so that any trainer metric
//! fits) and `rollouts.jsonl` (one line per group: its numbers, its texts, and the group as the
//! trainer received it while it is still stored). Both stream page by page, so a long run never
//! sits in memory whole.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use lachesis_shared::runs::GroupSummary;

use super::{load_details, readable_run, store};
use crate::app::AppError;
use crate::app::AppState;
use crate::auth::Viewer;

const PAGE: i64 = 500;

/// Pages of groups, newest first, rendered by `render` as a stream; ends at the first error.
fn paged<F, Fut>(
    state: AppState,
    run: String,
    render: F,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    F: Fn(AppState, Vec<GroupSummary>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, AppError>> + Send + 'static,
{
    let render = std::sync::Arc::new(render);
    // State: the id to page back from (`None`: the newest), or `Done`.
    let stream = futures::stream::unfold(Cursor::Start, move |cursor| {
        let (state, run, render) = (state.clone(), run.clone(), render.clone());
        async move {
            let before = match cursor {
                Cursor::Done => return None,
                Cursor::Start => None,
                Cursor::Before(id) => Some(id),
            };
            let page = match store::latest_groups(&state.db, &run, None, before, PAGE).await {
                Ok(page) if page.is_empty() => return None,
                Ok(page) => page,
                Err(e) => return Some((Err(std::io::Error::other(e.to_string())), Cursor::Done)),
            };
            let next = page.last().map_or(Cursor::Done, |g| Cursor::Before(g.id));
            match render(state, page).await {
                Ok(text) => Some((Ok(Bytes::from(text)), next)),
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), Cursor::Done)),
            }
        }
    });
    // Fused: a body is polled again after its end, which `unfold` does not allow.
    stream.fuse()
}

#[derive(Clone, Copy)]
enum Cursor {
    Start,
    Before(i64),
    Done,
}

fn download(content_type: &'static str, filename: String, body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        body,
    )
        .into_response()
}

pub async fn metrics_csv(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
) -> Result<Response, AppError> {
    readable_run(&state, &viewer, &run).await?;
    // Status samples and trainer metrics are small next to groups: written first, in one piece.
    let mut head = String::from("series,at_ms,step,env_id,group_id,value\n");
    for point in store::status_points(&state.db, &run, i64::MAX).await? {
        head.push_str(&format!(
            "queue_size,{},{},,,{}\n",
            point.at_ms, point.step, point.queue_size
        ));
    }
    for point in store::trainer_points(&state.db, &run, i64::MAX).await? {
        for (name, value) in &point.values {
            head.push_str(&format!(
                "{},{},{},,,{value}\n",
                csv_field(&format!("trainer/{name}")),
                point.at_ms,
                point.step
            ));
        }
    }
    let groups = paged(state, run.clone(), |_, page| async move {
        let mut text = String::new();
        for group in &page {
            let env = group.env_id.map(|e| e.to_string()).unwrap_or_default();
            let mut row = |series: &str, value: f64| {
                text.push_str(&format!(
                    "{series},{},,{env},{},{value}\n",
                    group.at_ms, group.id
                ));
            };
            if let (Some(mean), Some(min), Some(max)) =
                (group.mean_score(), group.min_score(), group.max_score())
            {
                row("reward_mean", mean);
                row("reward_min", min);
                row("reward_max", max);
            }
            row("tokens", group.tokens as f64);
        }
        Ok(text)
    });
    let body = Body::from_stream(
        futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) })
            .chain(groups),
    );
    Ok(download("text/csv", format!("{run}-metrics.csv"), body))
}

/// Quotes a CSV field when it needs it (metric names come from trainers).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

pub async fn rollouts_jsonl(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(run): Path<String>,
) -> Result<Response, AppError> {
    readable_run(&state, &viewer, &run).await?;
    let rows = paged(state, run.clone(), |state, page| async move {
        let mut text = String::new();
        for (detail, group) in load_details(&state, page, true).await? {
            let line = serde_json::json!({
                "summary": detail.summary,
                "texts": detail.texts,
                "group": group,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        Ok(text)
    });
    Ok(download(
        "application/x-ndjson",
        format!("{run}-rollouts.jsonl"),
        Body::from_stream(rows),
    ))
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("trainer/loss"), "trainer/loss");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
