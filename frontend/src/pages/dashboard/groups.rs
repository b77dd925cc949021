//! The table of the latest scored groups: live rows are prepended as they arrive; clicking a row
//! shows what each sequence said with its score.

use std::collections::BTreeSet;

use lachesis_shared::runs::{GroupDetail, GroupSummary};
use leptos::prelude::*;

use crate::format::{local_time, numbers};
use crate::table::DataTable;

/// How many groups the table shows.
pub const TABLE_ROWS: usize = 50;

/// A table row. Live events carry no texts (`texts: None`); they are loaded on demand.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub summary: GroupSummary,
    pub texts: Option<Vec<Option<String>>>,
}

impl From<GroupDetail> for Row {
    fn from(detail: GroupDetail) -> Self {
        Row {
            summary: detail.summary,
            texts: Some(detail.texts),
        }
    }
}

/// Puts a live group on top (newest first), once, keeping at most `TABLE_ROWS`.
pub fn prepend(rows: &mut Vec<Row>, group: GroupSummary) {
    if rows.iter().any(|r| r.summary.id == group.id) {
        return;
    }
    let at = rows.partition_point(|r| r.summary.id > group.id);
    rows.insert(
        at,
        Row {
            summary: group,
            texts: None,
        },
    );
    rows.truncate(TABLE_ROWS);
}

/// Replaces the rows by a fresh answer, keeping live rows newer than anything in it (they
/// arrived while the request was in flight).
pub fn replace(rows: &mut Vec<Row>, loaded: Vec<GroupDetail>) {
    let newest = loaded
        .iter()
        .map(|d| d.summary.id)
        .max()
        .unwrap_or(i64::MIN);
    let mut fresh: Vec<Row> = rows.drain(..).filter(|r| r.summary.id > newest).collect();
    fresh.extend(loaded.into_iter().map(Row::from));
    fresh.sort_by_key(|r| std::cmp::Reverse(r.summary.id));
    fresh.dedup_by_key(|r| r.summary.id);
    fresh.truncate(TABLE_ROWS);
    *rows = fresh;
}

#[component]
pub fn GroupsTable(
    rows: RwSignal<Vec<Row>>,
    /// The name of an environment id.
    env_name: Callback<Option<i64>, String>,
    /// Called when a row without texts is opened, to load them.
    load_texts: Callback<()>,
) -> impl IntoView {
    let open = RwSignal::new(BTreeSet::<i64>::new());

    let body = move || {
        rows.get()
            .into_iter()
            .map(|row| {
                let g = row.summary;
                let id = g.id;
                let is_open = open.with(|o| o.contains(&id));
                let missing_texts = row.texts.is_none();
                let toggle = move |_| {
                    open.update(|o| {
                        if !o.remove(&id) {
                            o.insert(id);
                        }
                    });
                    if missing_texts {
                        load_texts.run(());
                    }
                };
                let mean = g.mean_score().map_or_else(|| "—".to_owned(), |m| format!("{m:.3}"));
                let advantages = g
                    .advantages
                    .as_deref()
                    .map_or_else(|| "—".to_owned(), |a| numbers(a, 8));
                let detail = is_open.then(|| {
                    let texts = row.texts.clone();
                    let sequences = g
                        .scores
                        .iter()
                        .enumerate()
                        .map(|(i, score)| {
                            let text = match &texts {
                                None => "Loading…".to_owned(),
                                Some(t) => t
                                    .get(i)
                                    .cloned()
                                    .flatten()
                                    .unwrap_or_else(|| "(text not available)".to_owned()),
                            };
                            view! {
                                <div class="sequence">
                                    <div class="sequence-head">
                                        {format!("#{} · score {score:.3}", i + 1)}
                                    </div>
                                    <pre>{text}</pre>
                                </div>
                            }
                        })
                        .collect_view();
                    view! {
                        <tr class="detail">
                            <td colspan="6">{sequences}</td>
                        </tr>
                    }
                });
                view! {
                    <tr
                        data-testid="group-row"
                        data-group-id=id.to_string()
                        class=if is_open { "group open" } else { "group" }
                        on:click=toggle
                    >
                        <td>{local_time(g.at_ms)}</td>
                        <td>{env_name.run(g.env_id)}</td>
                        <td class="num">{g.weight_version.map_or_else(|| "—".to_owned(), |v| v.to_string())}</td>
                        <td>{numbers(&g.scores, 8)}</td>
                        <td>{advantages}</td>
                        <td class="num">{mean}</td>
                    </tr>
                    {detail}
                }
            })
            .collect_view()
    };

    view! {
        <DataTable class="groups" testid="groups-table" rows=body>
            <th>"Time"</th>
            <th>"Environment"</th>
            <th class="num">"Weights"</th>
            <th>"Scores"</th>
            <th>"Advantages"</th>
            <th class="num">"Mean"</th>
        </DataTable>
        {move || {
            rows.with(|r| r.is_empty())
                .then(|| view! { <p class="muted">"No groups yet."</p> })
        }}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(id: i64) -> GroupSummary {
        GroupSummary {
            id,
            run: "r".into(),
            env_id: None,
            at_ms: id,
            weight_version: None,
            scores: vec![1.0],
            advantages: None,
            tokens: 1,
        }
    }

    fn detail(id: i64) -> GroupDetail {
        GroupDetail {
            summary: summary(id),
            texts: vec![Some(format!("text {id}"))],
        }
    }

    fn ids(rows: &[Row]) -> Vec<i64> {
        rows.iter().map(|r| r.summary.id).collect()
    }

    #[test]
    fn live_groups_go_on_top_once() {
        let mut rows = Vec::new();
        prepend(&mut rows, summary(1));
        prepend(&mut rows, summary(3));
        prepend(&mut rows, summary(2));
        prepend(&mut rows, summary(3));
        assert_eq!(ids(&rows), vec![3, 2, 1]);
        for id in 10..100 {
            prepend(&mut rows, summary(id));
        }
        assert_eq!(rows.len(), TABLE_ROWS);
        assert_eq!(rows[0].summary.id, 99);
    }

    #[test]
    fn a_reload_keeps_rows_that_arrived_meanwhile_and_fills_texts() {
        let mut rows = Vec::new();
        prepend(&mut rows, summary(5));
        prepend(&mut rows, summary(4));
        replace(&mut rows, vec![detail(4), detail(3)]);
        assert_eq!(ids(&rows), vec![5, 4, 3]);
        assert!(rows[0].texts.is_none());
        assert_eq!(rows[1].texts, Some(vec![Some("text 4".to_owned())]));
    }
}
