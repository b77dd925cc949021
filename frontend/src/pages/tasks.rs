//! The "Server tasks" panel of the runs page: the server's supervised background tasks (live
//! bridge, status sampler, in-process environments, the model's worker), with a warning style for
//! those backing off after a failure. Hidden for visitors who may not read the list.

use std::time::Duration;

use lachesis_shared::system::{TaskState, TaskStatus};
use leptos::prelude::*;

use crate::api;
use crate::format::{ago, now_ms};
use crate::table::DataTable;

/// A restart takes a second or more: a slow poll shows it.
const REFRESH: Duration = Duration::from_secs(5);

/// The state's label and the badge class it is shown with.
pub fn state_badge(state: TaskState) -> (&'static str, &'static str) {
    match state {
        TaskState::Running => ("running", "badge ok"),
        TaskState::BackingOff => ("backing off", "badge warn"),
        TaskState::Stopped => ("stopped", "badge"),
    }
}

#[component]
pub fn ServerTasks() -> impl IntoView {
    let tasks = LocalResource::new(api::system_tasks);
    if let Ok(handle) = set_interval_with_handle(move || tasks.refetch(), REFRESH) {
        on_cleanup(move || handle.clear());
    }
    // The last good list stays on screen while a refresh fails; a refusal hides the panel.
    let (last, set_last) = signal(None::<Vec<TaskStatus>>);
    Effect::new(move |_| match tasks.get() {
        Some(Ok(list)) => set_last.set(Some(list)),
        Some(Err(api::ApiError::Unauthorized(_) | api::ApiError::Status { .. })) => {
            set_last.set(None)
        }
        _ => {}
    });

    let rows = move || {
        let now = now_ms();
        last.get()
            .unwrap_or_default()
            .into_iter()
            .map(|task| {
                let (label, badge) = state_badge(task.state);
                let row_class = match task.state {
                    TaskState::BackingOff => "backing-off",
                    _ => "",
                };
                let since = match task.retry_at_ms {
                    Some(at) if at > now => format!("retry in {} s", (at - now + 999) / 1000),
                    _ => ago(now, task.since_ms),
                };
                view! {
                    <tr class=row_class data-testid="task-row">
                        <td><code>{task.name}</code></td>
                        <td><span class=badge>{label}</span></td>
                        <td class="num">{task.restarts}</td>
                        <td>{since}</td>
                        <td class="muted task-error">{task.last_error.unwrap_or_default()}</td>
                    </tr>
                }
            })
            .collect_view()
    };

    move || {
        last.with(|l| l.as_ref().is_some_and(|l| !l.is_empty()))
            .then(|| {
                view! {
                    <section class="server-tasks" data-testid="server-tasks">
                        <h2>"Server tasks"</h2>
                        <DataTable rows>
                            <th>"Task"</th>
                            <th>"State"</th>
                            <th class="num">"Restarts"</th>
                            <th>"Since"</th>
                            <th>"Last error"</th>
                        </DataTable>
                    </section>
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_backing_off_are_shown_as_warnings() {
        assert_eq!(
            state_badge(TaskState::BackingOff),
            ("backing off", "badge warn")
        );
        assert_eq!(state_badge(TaskState::Running).1, "badge ok");
        assert_eq!(state_badge(TaskState::Stopped).1, "badge");
    }
}
